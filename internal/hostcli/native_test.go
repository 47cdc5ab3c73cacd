package hostcli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// Claude Code's own features through the relay: the scripted model plays
// the flows the CLI needs for them.
const (
	// askSearch: load WebSearch with ToolSearch (Claude Code defers it),
	// call it, then answer with what it found.
	askSearch = "HOSTTEST-SEARCH"
	// askSubagent: spawn a general-purpose subagent with the Agent tool,
	// then answer with what it said.
	askSubagent = "HOSTTEST-SUBAGENT"

	searchQuery = "hostcli relay check"
	searchURL   = "https://docs.example.org/hostcli/relay"
	searchTitle = "The HostCLI relay page"
	searchCited = "The relay passes the web search through untouched."

	subagentPrompt = "Check that all is well and say so in one sentence."
	subagentAnswer = "All is well, says the subagent."
)

// clearedThinking is the context edit the scripted provider reports
// having applied to every main request after the first. Claude Code asks
// for clear_thinking_20251015 keeping all thinking, so the real API would
// report none: a non-empty report shows that it reaches the CLI as sent.
var clearedThinking = anthropicfake.AppliedEdit{Type: anthropicfake.EditClearThinking, ClearedThinkingTurns: 1, ClearedInputTokens: 32}

// linksLine is the list of sources in the WebSearch tool's result.
var linksLine = regexp.MustCompile(`Links: (\[.*?\])\n`)

// nativeReply plays the Claude Code flows of TestClaudeCodeNative; ok is
// false for a request of another flow.
func nativeReply(r anthropicfake.Recorded) (rep anthropicfake.Reply, ok bool) {
	if r.WebSearchTool() != nil {
		// The WebSearch tool's own request ("Perform a web search for the
		// query: …"), with the web search server tool: search once.
		q := searchQuery
		if _, asked, found := strings.Cut(r.LastUserText(), "query:"); found && strings.TrimSpace(asked) != "" {
			q = strings.TrimSpace(asked)
		}
		return anthropicfake.Reply{
			WebSearches: []anthropicfake.WebSearch{{Query: q, Results: []anthropicfake.SearchResult{
				{URL: searchURL, Title: searchTitle, PageAge: "March 1, 2026", CitedText: searchCited},
			}}},
			Text: "Summary of the results: " + searchCited,
		}, true
	}
	c := anthropicConvo(r.Body)
	var m move
	switch {
	case strings.Contains(c.firstUser, subagentPrompt):
		m = move{text: subagentAnswer}
	case strings.Contains(c.firstUser, askSearch):
		m = searchMove(c)
	case strings.Contains(c.firstUser, askSubagent):
		m = subagentMove(c)
	default:
		return anthropicfake.Reply{}, false
	}
	if gjson.GetBytes(r.Body, "thinking.type").String() != "" {
		// Adaptive thinking, displayed "omitted": an empty thinking block
		// with its signature, which Claude Code sends back.
		rep.Thinking = &anthropicfake.Thinking{}
	}
	if r.ContextManagement() != nil && gjson.GetBytes(r.Body, "messages.#").Int() > 1 {
		rep.AppliedEdits = []anthropicfake.AppliedEdit{clearedThinking}
	}
	if m.tool == "" {
		rep.Text = m.text
		return rep, true
	}
	args, _ := json.Marshal(m.args)
	rep.ToolUses = []anthropicfake.ToolUse{{Name: m.tool, Input: args}}
	return rep, true
}

// searchMove: ToolSearch loads WebSearch, WebSearch runs, the answer
// cites its result.
func searchMove(c convo) move {
	switch r := c.last; {
	case r != nil && r.tool == "WebSearch":
		m := linksLine.FindStringSubmatch(r.content)
		if m == nil {
			return move{text: "DONE: the search found nothing: " + r.content}
		}
		var links []struct{ Title, URL string }
		_ = json.Unmarshal([]byte(m[1]), &links)
		var b strings.Builder
		b.WriteString("DONE: sources:")
		for _, l := range links {
			fmt.Fprintf(&b, " [%s](%s)", l.Title, l.URL)
		}
		summary, _, _ := strings.Cut(r.content[strings.Index(r.content, m[0])+len(m[0]):], "REMINDER:")
		b.WriteString(". " + strings.TrimSpace(summary))
		return move{text: b.String()}
	case (r != nil && r.tool == "ToolSearch") || c.tools["WebSearch"]:
		return move{tool: "WebSearch", args: map[string]any{"query": searchQuery}}
	case c.tools["ToolSearch"]:
		return move{tool: "ToolSearch", args: map[string]any{"query": "select:WebSearch", "max_results": 1}}
	}
	return move{text: "no WebSearch for this: offered " + strings.Join(keys(c.tools), ", ")}
}

// subagentMove: the Agent tool spawns a general-purpose subagent, the
// answer repeats what it said.
func subagentMove(c convo) move {
	switch r := c.last; {
	case r != nil && r.tool == "Agent":
		return move{text: "DONE: the subagent said: " + r.content}
	case c.tools["Agent"]:
		return move{tool: "Agent", args: map[string]any{"description": "Check all is well", "prompt": subagentPrompt,
			"subagent_type": "general-purpose", "run_in_background": false}}
	}
	return move{text: "no Agent tool for this: offered " + strings.Join(keys(c.tools), ", ")}
}

// TestClaudeCodeNative drives Claude Code through the relay (its Messages
// requests go to the Anthropic-API provider as it sent them) with a tap
// between the CLI and the gateway that records what the CLI sent and got:
// its WebSearch (a deferred tool, loaded by ToolSearch, that makes its own
// request with the web search server tool) runs and its result reaches
// the answer, the search priced in the ledger row at the catalog's
// per-search price; context management reaches the provider and its
// applied_edits come back; every request reaches the provider as the CLI
// sent it but for the model, and every answer comes back byte for byte;
// the ledger rows carry Claude Code's session id, and a subagent's its id.
func TestClaudeCodeNative(t *testing.T) {
	need(t)
	w := newWorld(t)
	tp := newTap(t, w.base)
	run := w.claudeCodeAt(t, taskID, tp.url)

	out := run(askSearch + ": search the web for the relay check and tell me what you found.")
	t.Logf("search:\n%s", out)
	if !strings.Contains(out, searchURL) || !strings.Contains(out, searchTitle) || !strings.Contains(out, searchCited) {
		t.Errorf("the answer does not use the search's result (%s, %q, %q):\n%s\n%s", searchURL, searchTitle, searchCited, out, w.upstream())
	}
	searchRun := tp.exchanges()
	out = run(askSubagent + ": have a general-purpose agent check that all is well, and tell me what it said.")
	t.Logf("subagent:\n%s", out)
	if !strings.Contains(out, subagentAnswer) {
		t.Errorf("the answer does not carry the subagent's (%q):\n%s\n%s", subagentAnswer, out, w.upstream())
	}
	all := tp.exchanges()
	subagentRun := all[len(searchRun):]
	rows := w.rows(t)

	for _, ex := range all {
		t.Logf("the CLI asked %s %s: %d %s", ex.method, ex.path, ex.status, ex.respHeader.Get("Content-Type"))
	}
	pairs := checkRelayed(t, w.claude, all)
	checkCosts(t, pairs, rows)
	checkSearch(t, pairs, rows)
	checkContextManagement(t, pairs)
	checkSession(t, "the search run", searchRun, rows, false)
	checkSession(t, "the subagent run", subagentRun, rows, true)
}

// relayed is a request the provider received with the exchange in which
// the CLI sent it.
type relayed struct {
	ex  *exchange
	got anthropicfake.Recorded
}

// checkRelayed pairs each Messages request the provider received with the
// one the CLI sent, and checks that it is that request with only the
// model changed, with the CLI's anthropic-* headers, and that the CLI got
// the provider's answer byte for byte, with no gateway header saying a
// parameter was ignored or adjusted.
func checkRelayed(t *testing.T, fake *anthropicfake.Server, exs []*exchange) []relayed {
	t.Helper()
	var sent []*exchange
	for _, ex := range exs {
		if path, _, _ := strings.Cut(ex.path, "?"); ex.method == http.MethodPost && path == "/v1/messages" {
			sent = append(sent, ex)
		}
	}
	var pairs []relayed
	matched := map[*exchange]bool{}
	for _, got := range fake.Requests() {
		if got.Path != "/v1/messages" {
			t.Errorf("the provider was asked %s %s", got.Method, got.Path)
			continue
		}
		model := gjson.GetBytes(got.Body, "model").String()
		var ex *exchange
		for _, e := range sent {
			if matched[e] {
				continue
			}
			if b, err := sjson.SetBytes(bytes.Clone(e.reqBody), "model", model); err == nil && bytes.Equal(b, got.Body) {
				ex = e
				break
			}
		}
		if ex == nil {
			t.Errorf("the provider got a request the CLI did not send, but for the model: %.600s", got.Body)
			continue
		}
		matched[ex] = true
		pairs = append(pairs, relayed{ex: ex, got: got})
		t.Logf("relayed to %s?%s: model %s -> %s, %d body bytes, %d answer bytes, agent id %q, betas %q", got.Path, got.RawQuery, gjson.GetBytes(ex.reqBody, "model"), model,
			len(got.Body), len(ex.body()), ex.reqHeader.Get("X-Claude-Code-Agent-Id"), got.Betas())
		if want, have := anthropicHeaders(ex.reqHeader), anthropicHeaders(got.Header); !slices.Equal(want, have) {
			t.Errorf("the CLI sent the headers %q, the provider got %q", want, have)
		}
		if ex.status != http.StatusOK {
			t.Errorf("the CLI got %d for a request the provider answered", ex.status)
		}
		if body, sent := ex.body(), fake.Sent(got.RequestID); !bytes.Equal(body, sent) {
			t.Errorf("the CLI got another answer than the provider sent:\nprovider: %.800s\nCLI:      %.800s", sent, body)
		}
	}
	for _, ex := range sent {
		for _, h := range []string{"X-CortexBuild-Ignored-Params", "X-CortexBuild-Adjusted-Params"} {
			if v := ex.respHeader.Get(h); v != "" {
				t.Errorf("the gateway answered %s: %s", h, v)
			}
		}
		if !matched[ex] {
			t.Errorf("the CLI's request (%d %s) did not reach the provider as sent: %.600s", ex.status, ex.respHeader.Get("Content-Type"), ex.reqBody)
		}
	}
	if len(pairs) == 0 {
		t.Fatal("no request reached the provider")
	}
	return pairs
}

// anthropicHeaders lists the anthropic-* header lines of h, sorted.
func anthropicHeaders(h http.Header) []string {
	var out []string
	for k, vs := range h {
		if strings.HasPrefix(strings.ToLower(k), "anthropic-") {
			for _, v := range vs {
				out = append(out, strings.ToLower(k)+": "+v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkSearch checks the WebSearch tool's own request: it reached the
// provider with the web search server tool, the provider's searches came
// back to the CLI, and its ledger row prices them.
func checkSearch(t *testing.T, pairs []relayed, rows []ledger.AttemptRow) {
	t.Helper()
	var searches []relayed
	for _, p := range pairs {
		if p.got.WebSearchTool() != nil {
			searches = append(searches, p)
		}
	}
	if len(searches) != 1 {
		t.Fatalf("want one request with the web search tool, got %d", len(searches))
	}
	p := searches[0]
	if ws := p.got.WebSearchTool(); ws.Type != "web_search_20250305" || ws.Name != "web_search" || ws.MaxUses != 8 {
		t.Errorf("the provider got the web search tool %+v, want web_search_20250305 named web_search with max_uses 8", *ws)
	}
	for _, f := range []string{"metadata.user_id", "tool_choice"} {
		if !gjson.GetBytes(p.got.Body, f).Exists() {
			t.Errorf("the web search request reached the provider without %s", f)
		}
	}
	u, err := answerUsage(p.ex.body())
	if err != nil {
		t.Fatal(err)
	}
	if u.WebSearchRequests != 1 {
		t.Errorf("the answer to the web search request reports %d searches, want 1", u.WebSearchRequests)
	}
	row := rowOf(t, rows, p.ex)
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	want, err := cat.Cost(anthropic.Namespace, row.Model, u, row.Time)
	if err != nil {
		t.Fatal(err)
	}
	if row.Cost != want {
		t.Errorf("the web search request's row costs $%s, the catalog prices its usage (%+v) at $%s", row.Cost, u, want)
	}
	tokens := u
	tokens.WebSearchRequests = 0
	bare, err := cat.Cost(anthropic.Namespace, row.Model, tokens, row.Time)
	if err != nil {
		t.Fatal(err)
	}
	if search := perSearch(t, cat, row); want-bare != search || search <= 0 {
		t.Errorf("the search adds $%s to the row's cost, the catalog's price of one search is $%s", want-bare, search)
	}
	t.Logf("the web search request: %+v, priced $%s (tokens $%s)", u, row.Cost, bare)
}

// checkCosts checks that each relayed call's ledger row counts the
// tokens its answer reported and costs what the catalog prices them at.
func checkCosts(t *testing.T, pairs []relayed, rows []ledger.AttemptRow) {
	t.Helper()
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		u, err := answerUsage(p.ex.body())
		if err != nil {
			t.Error(err)
			continue
		}
		row := rowOf(t, rows, p.ex)
		if row.Outcome != "ok" || row.EstimatedUsage || row.Unpriced {
			t.Errorf("the row of invocation %s: %+v, want ok, priced from the reported usage", row.InvocationID, row)
		}
		if row.InputTokens != u.InputTokens || row.OutputTokens != u.OutputTokens || row.CacheReadTokens != u.CacheReadTokens || row.CacheWriteTokens != u.CacheWriteTokens {
			t.Errorf("the row of invocation %s counts %d/%d/%d/%d tokens (input/output/cache read/cache write), the answer reported %+v",
				row.InvocationID, row.InputTokens, row.OutputTokens, row.CacheReadTokens, row.CacheWriteTokens, u)
		}
		want, err := cat.Cost(anthropic.Namespace, row.Model, u, row.Time)
		if err != nil {
			t.Fatal(err)
		}
		if row.Cost != want {
			t.Errorf("the row of invocation %s costs $%s, the catalog prices its answer's usage (%+v) at $%s", row.InvocationID, row.Cost, u, want)
		}
	}
}

// perSearch is the catalog's price of one web search on row's model.
func perSearch(t *testing.T, cat *pricing.Catalog, row ledger.AttemptRow) provider.Money {
	t.Helper()
	m, _, err := cat.Lookup(anthropic.Namespace, row.Model)
	if err != nil {
		t.Fatal(err)
	}
	ws := m.WebSearch
	if ws == nil {
		ws = cat.Namespaces[anthropic.Namespace].WebSearch
	}
	if ws == nil {
		t.Fatalf("the catalog has no web search price for %s", row.Model)
	}
	// Per 1,000 searches: one is a thousandth, rounded up to a nano-dollar.
	return provider.PerMillion(ws.At(row.Time)*1000, 1)
}

// answerUsage is the usage a Messages answer reports, a stream's (the
// cumulative counts of its last message_delta over message_start's) or a
// message's, read independently of the adapter.
func answerUsage(body []byte) (provider.Usage, error) {
	var usage gjson.Result
	var long int64
	if gjson.ValidBytes(body) {
		usage = gjson.GetBytes(body, "usage")
		long = usage.Get("cache_creation.ephemeral_1h_input_tokens").Int()
	} else {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			ev := gjson.Parse(data)
			switch ev.Get("type").String() {
			case "message_start":
				usage = ev.Get("message.usage")
				long = usage.Get("cache_creation.ephemeral_1h_input_tokens").Int()
			case "message_delta":
				d := ev.Get("usage")
				merged, _ := sjson.SetRaw(usage.Raw, "output_tokens", d.Get("output_tokens").Raw)
				for _, f := range []string{"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "server_tool_use"} {
					if v := d.Get(f); v.Exists() {
						merged, _ = sjson.SetRaw(merged, f, v.Raw)
					}
				}
				usage = gjson.Parse(merged)
			}
		}
	}
	if !usage.Exists() {
		return provider.Usage{}, fmt.Errorf("the answer reports no usage: %.600s", body)
	}
	u := provider.UsageExclusive(usage.Get("input_tokens").Int(), usage.Get("cache_read_input_tokens").Int(),
		usage.Get("cache_creation_input_tokens").Int(), usage.Get("output_tokens").Int())
	u.CacheWriteLongTokens = min(long, u.CacheWriteTokens)
	u.WebSearchRequests = usage.Get("server_tool_use.web_search_requests").Int()
	if tier := usage.Get("service_tier").String(); tier != "standard" {
		u.ServiceTier = tier
	}
	return u, nil
}

// rowOf is the ledger row of the call the CLI made in ex, by the
// invocation id the gateway answered with.
func rowOf(t *testing.T, rows []ledger.AttemptRow, ex *exchange) ledger.AttemptRow {
	t.Helper()
	id := ex.respHeader.Get("X-CortexBuild-Invocation")
	var found []ledger.AttemptRow
	for _, r := range rows {
		if id != "" && r.InvocationID == id {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one ledger row of invocation %q, got %d", id, len(found))
	}
	return found[0]
}

// checkContextManagement checks Claude Code's main requests: they reached
// the provider with context_management, its beta, thinking and the
// metadata, and the applied_edits the provider reported reached the CLI.
func checkContextManagement(t *testing.T, pairs []relayed) {
	t.Helper()
	main, edited := 0, 0
	edit, _ := json.Marshal([]anthropicfake.AppliedEdit{clearedThinking})
	for _, p := range pairs {
		if p.got.WebSearchTool() != nil {
			continue
		}
		main++
		if cm := p.got.ContextManagement(); cm == nil || !gjson.GetBytes(cm, "edits").IsArray() {
			t.Errorf("a main request reached the provider without context_management edits: %.300s", p.got.Body)
		}
		if !slices.Contains(p.got.Betas(), anthropicfake.BetaContextManagement) {
			t.Errorf("a main request reached the provider without the %s beta: %q", anthropicfake.BetaContextManagement, p.got.Betas())
		}
		for _, f := range []string{"thinking.type", "metadata.user_id"} {
			if gjson.GetBytes(p.got.Body, f).String() == "" {
				t.Errorf("a main request reached the provider without %s", f)
			}
		}
		if gjson.GetBytes(p.got.Body, "messages.#").Int() > 1 {
			if !bytes.Contains(p.ex.body(), []byte(`"context_management":{"applied_edits":`+string(edit)+`}`)) {
				t.Errorf("the CLI did not get the applied edits %s: %.600s", edit, p.ex.body())
			}
			edited++
		}
	}
	if main == 0 || edited == 0 {
		t.Errorf("want main requests, some after the first turn: got %d, %d", main, edited)
	}
}

// checkSession checks that the ledger rows of the calls the CLI made in
// exs carry its session id (one per run), and, with subagent, that some
// are a subagent's, whose rows carry its id and its parent's.
func checkSession(t *testing.T, what string, exs []*exchange, rows []ledger.AttemptRow, subagent bool) {
	t.Helper()
	sessions := map[string]bool{}
	agents := 0
	for _, ex := range exs {
		if ex.respHeader.Get("X-CortexBuild-Invocation") == "" {
			continue
		}
		session := ex.reqHeader.Get("X-Claude-Code-Session-Id")
		sessions[session] = true
		row := rowOf(t, rows, ex)
		agent, parent := ex.reqHeader.Get("X-Claude-Code-Agent-Id"), ex.reqHeader.Get("X-Claude-Code-Parent-Agent-Id")
		if row.Session != session || row.HostAgent != agent || row.ParentAgent != parent {
			t.Errorf("%s: the row of a call with session %q, agent %q, parent %q has %q, %q, %q", what, session, agent, parent, row.Session, row.HostAgent, row.ParentAgent)
		}
		if agent != "" {
			agents++
		}
	}
	if len(sessions) != 1 || sessions[""] {
		t.Errorf("%s: want one session id on every call, got %v", what, slices.Collect(maps.Keys(sessions)))
	}
	if subagent && agents == 0 {
		t.Errorf("%s: no call came from a subagent (X-Claude-Code-Agent-Id)", what)
	}
	if !subagent && agents != 0 {
		t.Errorf("%s: %d calls came from a subagent", what, agents)
	}
}

// tap is a reverse proxy on loopback between a host CLI and the gateway
// that records every exchange as the CLI saw it: the request as the CLI
// sent it, the answer's status, headers and body as the gateway sent it.
type tap struct {
	url      string
	mu       sync.Mutex
	log      []*exchange
	inflight sync.WaitGroup
}

// exchange is one request through the tap.
type exchange struct {
	method, path string
	reqHeader    http.Header
	reqBody      []byte

	mu         sync.Mutex // guards what the answer fills in
	status     int
	respHeader http.Header
	resp       bytes.Buffer
}

func (e *exchange) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resp.Write(p)
}

// body is the answer's body as the CLI got it.
func (e *exchange) body() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return bytes.Clone(e.resp.Bytes())
}

type exchangeKey struct{}

func newTap(t *testing.T, target string) *tap {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			ex := resp.Request.Context().Value(exchangeKey{}).(*exchange)
			ex.mu.Lock()
			ex.status, ex.respHeader = resp.StatusCode, resp.Header.Clone()
			ex.mu.Unlock()
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(resp.Body, ex), resp.Body}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.inflight.Add(1)
		defer tp.inflight.Done()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ex := &exchange{method: r.Method, path: r.URL.RequestURI(), reqHeader: r.Header.Clone(), reqBody: body}
		tp.mu.Lock()
		tp.log = append(tp.log, ex)
		tp.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
	}))
	t.Cleanup(srv.Close)
	tp.url = srv.URL
	return tp
}

// exchanges returns the exchanges so far, once none is in flight.
func (tp *tap) exchanges() []*exchange {
	tp.inflight.Wait()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.log)
}
