package hostcli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// Codex's tool loop through the relay: the scripted model runs two
// commands through Codex's exec_command, each call after a reasoning
// item, then answers with what they printed.
const (
	// askCodexLoop: the three-turn loop of TestCodexNative.
	askCodexLoop = "HOSTTEST-CODEX-LOOP"

	codexStep1 = "hostcli-codex-step-1"
	codexStep2 = "hostcli-codex-step-2"
	codexFinal = "DONE: the steps printed " + codexStep1 + " and " + codexStep2 + "."

	// codexTier is the service tier Codex asks for: the ledger rows
	// must be priced at its rate card.
	codexTier = "flex"
)

// codexNativeConfig is what TestCodexNative adds to Codex's config.toml:
// reasoning (so Codex asks for reasoning.encrypted_content and sends the
// items back), the flex tier, and the sandbox and approval settings that
// run the commands here, offline, without asking.
const codexNativeConfig = `model_reasoning_effort = "high"
service_tier = "` + codexTier + `"
approval_policy = "never"
sandbox_mode = "workspace-write"
`

// codexLoopReply plays the loop of TestCodexNative, on the Responses API
// (relayed) or Chat Completions (translated, where no reasoning item can
// go back): ok is false for a request of another flow. Each turn reports
// reasoning tokens, and the turns after the first cached ones, so that
// the ledger's prices cover both.
func codexLoopReply(r openaifake.Recorded, c convo) (rep openaifake.Reply, ok bool) {
	if !strings.Contains(c.firstUser, askCodexLoop) {
		return rep, false
	}
	var outputs []string
	if strings.HasSuffix(r.Path, "/responses") {
		for _, it := range r.Input() {
			if it.Type == "function_call_output" {
				outputs = append(outputs, it.Text)
			}
		}
	} else {
		for _, m := range r.Messages() {
			if m.Role == "tool" {
				outputs = append(outputs, m.Content)
			}
		}
	}
	cmd := func(out string) string { return fmt.Sprintf(`{"cmd":"echo %s"}`, out) }
	switch len(outputs) {
	case 0:
		rep = openaifake.ReasoningToolCallReply("Run the first step.", "exec_command", cmd(codexStep1))
	case 1:
		rep = openaifake.ReasoningToolCallReply("The first step ran; now the second.", "exec_command", cmd(codexStep2))
	default:
		text := codexFinal
		if all := strings.Join(outputs, "\n"); !strings.Contains(all, codexStep1) || !strings.Contains(all, codexStep2) {
			text = "The steps printed something else: " + all
		}
		rep = openaifake.Reply{Reasoning: "Both steps ran.", Text: text}
	}
	prompt := max(len(r.Body)/4, 1)
	rep.Usage = openaifake.Usage{Prompt: prompt, Completion: 90 + 10*len(outputs), Reasoning: 64}
	if len(outputs) > 0 {
		rep.Usage.Cached = prompt / 2 / 128 * 128
	}
	return rep, true
}

// TestCodexNative drives Codex through the relay (its Responses requests
// go to the OpenAI-API provider as it sent them) with a tap between the
// CLI and the gateway and another between the gateway and the provider:
// a three-turn tool loop (reasoning and an exec_command call, twice, then
// text) succeeds against a provider that refuses a call sent back without
// the reasoning item issued before it, and the provider got each earlier
// reasoning item back with its encrypted_content; every request reaches
// the provider as Codex sent it but for the model, with store false, the
// encrypted reasoning included, the prompt cache key and the flex tier;
// every answer reaches Codex byte for byte as the provider wrote it,
// marked relayed; each ledger row counts its answer's usage and costs
// what the catalog prices it at on the flex tier, and carries Codex's
// session id.
func TestCodexNative(t *testing.T) {
	need(t)
	var up *tap
	w := newWorldWith(t, func(w *world) {
		up = newTap(t, w.gpt.URL())
		w.planOn(t, "gpt", up.url)
	})
	down := newTap(t, w.base)
	w.mayFail = true // a failed turn shows in the checks below
	run := w.codexCLIAt(t, taskID, down.url, codexNativeConfig)

	out := run(askCodexLoop + ": run the two steps and tell me what they printed.")
	t.Logf("transcript:\n%s", out)
	if !strings.Contains(out, codexFinal) {
		t.Errorf("Codex did not print the final answer %q:\n%s\n%s", codexFinal, out, w.upstream())
	}
	exs, ups := down.exchanges(), up.exchanges()
	rows := w.rows(t)
	for _, ex := range exs {
		t.Logf("Codex asked %s %s: %d %s, relayed %q", ex.method, ex.path, ex.status, ex.respHeader.Get("Content-Type"), ex.respHeader.Get("X-CortexBuild-Relayed"))
	}
	got := providerTurns(t, w.gpt, ups)
	checkCodexReasoning(t, got)
	turns := checkCodexRelayed(t, got, exs)
	checkCodexCosts(t, turns, rows)
	checkCodexSession(t, turns, rows)
}

// planOn rewrites the project's configuration so that the planner runs on
// prov, and the gpt provider is reached at base (a tap in front of the
// scripted provider).
func (w *world) planOn(t *testing.T, prov, base string) {
	t.Helper()
	path := filepath.Join(w.dir, ".cortexbuild", "llm-config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for old, repl := range map[string]string{
		"base_url: " + w.gpt.URL() + "/v1": "base_url: " + base + "/v1",
		"agents:\n":                        "agents:\n  planner:\n    providers: [" + prov + "]\n",
	} {
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("the configuration has no %q:\n%s", old, b)
		}
		b = bytes.Replace(b, []byte(old), []byte(repl), 1)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// providerTurn is one request the provider received, with the exchange
// in which the gateway sent it upstream and the events of the answer the
// provider wrote.
type providerTurn struct {
	got    openaifake.Recorded
	up     *exchange
	answer codexAnswer
}

// codexTurn is one turn of Codex's loop: the exchange in which Codex sent
// it, and the turn as the provider saw it.
type codexTurn struct {
	ex *exchange
	providerTurn
}

// providerTurns pairs each request the provider received with the
// upstream exchange that carried it (by the x-request-id it answered).
func providerTurns(t *testing.T, fake *openaifake.Server, ups []*exchange) []providerTurn {
	t.Helper()
	byID := map[string]*exchange{}
	for _, u := range ups {
		byID[u.respHeader.Get("x-request-id")] = u
	}
	var out []providerTurn
	for _, got := range fake.Requests() {
		u := byID[got.RequestID]
		if u == nil {
			t.Fatalf("no upstream exchange answered with x-request-id %s", got.RequestID)
		}
		if !bytes.Equal(u.reqBody, got.Body) {
			t.Errorf("the provider recorded another body than the gateway sent")
		}
		out = append(out, providerTurn{got: got, up: u, answer: readCodexAnswer(u.body())})
	}
	return out
}

// codexAnswer is what a streamed Responses answer holds: its output items
// (from response.output_item.done) and its response.completed.
type codexAnswer struct {
	items     []gjson.Result
	completed gjson.Result
}

// readCodexAnswer reads a streamed Responses answer, independently of the
// adapter.
func readCodexAnswer(body []byte) codexAnswer {
	var a codexAnswer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		switch ev.Get("type").String() {
		case "response.output_item.done":
			a.items = append(a.items, ev.Get("item"))
		case "response.completed":
			a.completed = ev.Get("response")
		}
	}
	return a
}

// checkCodexRelayed pairs each request the provider received with the
// one Codex sent, and checks that it reached the provider on the
// Responses API as Codex sent it but for the model (and the fields the
// gateway names as adjusted, with the values it names), with Codex's
// stateless-loop fields, and that Codex got the provider's answer byte for
// byte, marked relayed, with nothing ignored. The turns come back in the
// order Codex sent them.
func checkCodexRelayed(t *testing.T, turns []providerTurn, exs []*exchange) []codexTurn {
	t.Helper()
	var sent []*exchange
	for _, ex := range exs {
		if path, _, _ := strings.Cut(ex.path, "?"); ex.method == http.MethodPost && path == "/v1/responses" {
			sent = append(sent, ex)
		} else {
			t.Errorf("Codex asked %s %s", ex.method, ex.path)
		}
	}
	turnOf := map[*exchange]codexTurn{}
	for _, pt := range turns {
		got, u := pt.got, pt.up
		if got.Method != http.MethodPost || got.Path != "/v1/responses" {
			t.Errorf("the provider was asked %s %s: the Responses request was not relayed", got.Method, got.Path)
			continue
		}
		var ex *exchange
		for _, e := range sent {
			if _, done := turnOf[e]; !done && sameRequest(t, e, got.Body) {
				ex = e
				break
			}
		}
		if ex == nil {
			t.Errorf("the provider got a request Codex did not send, but for the model: %.600s", got.Body)
			continue
		}
		turnOf[ex] = codexTurn{ex: ex, providerTurn: pt}
		adjusted := ex.respHeader.Get("X-CortexBuild-Adjusted-Params")
		t.Logf("relayed: model %s -> %s, %d body bytes, %d answer bytes, include %q, adjusted %q", gjson.GetBytes(ex.reqBody, "model"), got.Model(),
			len(got.Body), len(ex.body()), got.Include(), adjusted)
		for _, a := range strings.Split(adjusted, ",") {
			if field, value, ok := strings.Cut(strings.TrimSpace(a), "="); ok {
				if v := gjson.GetBytes(got.Body, field); v.String() != value || gjson.GetBytes(ex.reqBody, field).String() == value {
					t.Errorf("the gateway names %s=%s as adjusted, Codex sent %s, the provider got %s", field, value, gjson.GetBytes(ex.reqBody, field).Raw, v.Raw)
				}
			}
		}
		if ex.status != http.StatusOK || u.status != http.StatusOK {
			t.Errorf("Codex got %d, the provider answered %d", ex.status, u.status)
		}
		if r := ex.respHeader.Get("X-CortexBuild-Relayed"); r != string(provider.ProtoResponses) {
			t.Errorf("the answer says X-CortexBuild-Relayed: %q, want %s", r, provider.ProtoResponses)
		}
		if v := ex.respHeader.Get("X-CortexBuild-Ignored-Params"); v != "" {
			t.Errorf("the gateway answered X-CortexBuild-Ignored-Params: %s", v)
		}
		if id := ex.respHeader.Get("x-request-id"); id != got.RequestID {
			t.Errorf("Codex got x-request-id %q, the provider answered %q", id, got.RequestID)
		}
		if body, wrote := ex.body(), u.body(); !bytes.Equal(body, wrote) {
			t.Errorf("Codex got another answer than the provider wrote:\nprovider: %.800s\nCodex:    %.800s", wrote, body)
		}
		if !slices.Equal(got.Include(), []string{openaifake.IncludeEncryptedReasoning}) {
			t.Errorf("the request reached the provider with include %q, want [%s]", got.Include(), openaifake.IncludeEncryptedReasoning)
		}
		for f, want := range map[string]string{"store": "false", "service_tier": codexTier, "stream": "true"} {
			if v := gjson.GetBytes(got.Body, f); v.String() != want {
				t.Errorf("the request reached the provider with %s %s, want %s", f, v.Raw, want)
			}
		}
		if k := gjson.GetBytes(got.Body, "prompt_cache_key"); k.String() == "" || k.String() != gjson.GetBytes(ex.reqBody, "prompt_cache_key").String() {
			t.Errorf("the request reached the provider with prompt_cache_key %s, Codex sent %s", k.Raw, gjson.GetBytes(ex.reqBody, "prompt_cache_key").Raw)
		}
	}
	var out []codexTurn
	for _, ex := range sent {
		turn, ok := turnOf[ex]
		if !ok {
			t.Errorf("Codex's request (%d %s) did not reach the provider as sent: %.600s", ex.status, ex.respHeader.Get("Content-Type"), ex.reqBody)
			continue
		}
		out = append(out, turn)
	}
	if len(out) != 3 {
		t.Fatalf("want the three turns of the loop relayed, got %d (Codex sent %d requests, the provider got %d)", len(out), len(sent), len(turns))
	}
	return out
}

// sameRequest reports whether the provider's body is the one Codex sent
// in ex, compared as JSON values without the model and the fields the
// gateway's answer names as adjusted.
func sameRequest(t *testing.T, ex *exchange, got []byte) bool {
	t.Helper()
	drop := []string{"model"}
	if adj := ex.respHeader.Get("X-CortexBuild-Adjusted-Params"); adj != "" {
		for _, a := range strings.Split(adj, ",") {
			field, _, _ := strings.Cut(strings.TrimSpace(a), "=")
			drop = append(drop, field)
		}
	}
	value := func(b []byte) any {
		var err error
		for _, f := range drop {
			if b, err = sjson.DeleteBytes(bytes.Clone(b), f); err != nil {
				t.Fatalf("deleting %s: %v", f, err)
			}
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return err.Error()
		}
		return v
	}
	return reflect.DeepEqual(value(ex.reqBody), value(got))
}

// checkCodexReasoning checks the loop's reasoning items as the provider
// saw them: three Responses turns, the first two answered with a
// reasoning item carrying encrypted_content and then an exec_command
// call, the third with the final text, and every later turn received with
// each earlier reasoning item, its encrypted_content as issued, right
// before the call it preceded.
func checkCodexReasoning(t *testing.T, turns []providerTurn) {
	t.Helper()
	if len(turns) != 3 {
		t.Errorf("the provider got %d requests, want the loop's three", len(turns))
	}
	type issued struct{ encrypted, callID string }
	var before []issued
	for i, turn := range turns {
		if turn.got.Path != "/v1/responses" {
			t.Errorf("turn %d reached the provider at %s, where no reasoning item can go: the Responses request was translated", i+1, turn.got.Path)
		}
		input := turn.got.Input()
		for _, is := range before {
			at := slices.IndexFunc(input, func(it openaifake.InputItem) bool {
				return it.Type == "reasoning" && it.EncryptedContent == is.encrypted
			})
			switch {
			case at < 0:
				t.Errorf("turn %d reached the provider without the reasoning item issued before call %s (encrypted_content %.40s…)", i+1, is.callID, is.encrypted)
			case at+1 >= len(input) || input[at+1].Type != "function_call" || input[at+1].CallID != is.callID:
				t.Errorf("turn %d: the reasoning item issued before call %s is not followed by that call", i+1, is.callID)
			}
		}
		items := turn.answer.items
		types := make([]string, len(items))
		for j, it := range items {
			types[j] = it.Get("type").String()
		}
		if i < 2 {
			if len(items) != 2 || types[0] != "reasoning" || types[1] != "function_call" || items[1].Get("name").String() != "exec_command" {
				t.Errorf("turn %d was answered with items %q, want a reasoning item and an exec_command call", i+1, types)
				continue
			}
			enc := items[0].Get("encrypted_content").String()
			if enc == "" {
				t.Errorf("turn %d was answered with a reasoning item without encrypted_content: %s", i+1, items[0].Raw)
				continue
			}
			before = append(before, issued{encrypted: enc, callID: items[1].Get("call_id").String()})
			continue
		}
		if n := len(types); n == 0 || types[n-1] != "message" || !strings.Contains(items[n-1].Raw, codexFinal) {
			t.Errorf("turn %d was answered with items %q, want the final message %q", i+1, types, codexFinal)
		}
	}
	if len(before) != 2 {
		t.Errorf("the provider issued %d reasoning items before a call, want 2", len(before))
	}
}

// codexUsage is the usage a Responses answer's response.completed
// reports, read independently of the adapter.
func codexUsage(a codexAnswer) (provider.Usage, error) {
	u := a.completed.Get("usage")
	if !u.Exists() {
		return provider.Usage{}, fmt.Errorf("the answer has no response.completed with usage")
	}
	out := provider.UsageInclusive(u.Get("input_tokens").Int(), u.Get("input_tokens_details.cached_tokens").Int(),
		u.Get("input_tokens_details.cache_write_tokens").Int(), u.Get("output_tokens").Int())
	out.ReasoningTokens = u.Get("output_tokens_details.reasoning_tokens").Int()
	if tier := a.completed.Get("service_tier").String(); tier != "default" && tier != "auto" {
		out.ServiceTier = tier
	}
	return out, nil
}

// checkCodexCosts checks that each turn's ledger row counts the tokens its
// response.completed reported (cached ones included) and costs what the
// catalog prices them at on the tier the answer reports, flex, which is
// not the standard price.
func checkCodexCosts(t *testing.T, turns []codexTurn, rows []ledger.AttemptRow) {
	t.Helper()
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	ns := openaicompat.OpenAI.Namespace
	var cached, reasoning int64
	for i, turn := range turns {
		u, err := codexUsage(turn.answer)
		if err != nil {
			t.Errorf("turn %d: %v", i+1, err)
			continue
		}
		cached += u.CacheReadTokens
		reasoning += u.ReasoningTokens
		row := rowOf(t, rows, turn.ex)
		if row.Outcome != "ok" || row.EstimatedUsage || row.Unpriced || row.Provider != "gpt" || row.Agent != "planner" || row.Task != taskID {
			t.Errorf("turn %d's row %+v: want an ok row of the planner on gpt, task %s, priced from the reported usage", i+1, row, taskID)
		}
		if row.InputTokens != u.InputTokens || row.OutputTokens != u.OutputTokens || row.CacheReadTokens != u.CacheReadTokens || row.CacheWriteTokens != u.CacheWriteTokens {
			t.Errorf("turn %d's row counts %d/%d/%d/%d tokens (input/output/cache read/cache write), the answer reported %+v",
				i+1, row.InputTokens, row.OutputTokens, row.CacheReadTokens, row.CacheWriteTokens, u)
		}
		if u.ServiceTier != codexTier {
			t.Errorf("turn %d's answer reports the service tier %q, want %s", i+1, u.ServiceTier, codexTier)
		}
		want, err := cat.Cost(ns, row.Model, u, row.Time)
		if err != nil {
			t.Fatal(err)
		}
		standard := u
		standard.ServiceTier = ""
		std, err := cat.Cost(ns, row.Model, standard, row.Time)
		if err != nil {
			t.Fatal(err)
		}
		if row.Cost != want || want == std {
			t.Errorf("turn %d's row costs $%s, the catalog prices its answer's usage (%+v) at $%s on %s ($%s on the standard tier)", i+1, row.Cost, u, want, codexTier, std)
		}
		t.Logf("turn %d: %s %+v, priced $%s on %s ($%s standard)", i+1, row.Model, u, row.Cost, codexTier, std)
	}
	if cached == 0 || reasoning == 0 {
		t.Errorf("the answers reported %d cached and %d reasoning tokens: the rows' prices do not cover both", cached, reasoning)
	}
}

// codexSession is the session id Codex sent with a request: 0.171 sends
// it as session-id (older versions as session_id).
func codexSession(h http.Header) string {
	if v := h.Get("Session-Id"); v != "" {
		return v
	}
	return h.Get("Session_id")
}

// checkCodexSession checks that every turn's ledger row carries Codex's
// session id, one for the whole run.
func checkCodexSession(t *testing.T, turns []codexTurn, rows []ledger.AttemptRow) {
	t.Helper()
	sessions := map[string]bool{}
	for i, turn := range turns {
		s := codexSession(turn.ex.reqHeader)
		sessions[s] = true
		if row := rowOf(t, rows, turn.ex); row.Session != s {
			t.Errorf("turn %d: Codex sent session %q, the row has %q", i+1, s, row.Session)
		}
	}
	if len(sessions) != 1 || sessions[""] {
		t.Errorf("want one session id on every turn, got %q", slices.Collect(maps.Keys(sessions)))
	}
}
