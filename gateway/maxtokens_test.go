package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// rawPost sends body to path with key (and hdr as name, value pairs) and
// returns the response's status and headers and its decoded JSON body.
func rawPost(t *testing.T, w *world, key, path, body string, hdr ...string) (*http.Response, map[string]any) {
	t.Helper()
	st, h, b := w.postAs(t, key, path, body, hdr...)
	var m map[string]any
	_ = json.Unmarshal([]byte(b), &m)
	return &http.Response{StatusCode: st, Header: h}, m
}

// An output limit far above the model's (2^31 tokens, $32,212 on Sonnet
// unclamped) is clamped to the model's own limit and said so in a header;
// a call that still does not fit its budget is refused without pausing
// anything, so another client of the same month is still served. Every
// protocol's limit field is clamped; a negative one is a 400 naming it.
func TestHugeMaxTokensIsClampedAndPausesNothing(t *testing.T) {
	w := newWorld(t, withLedger, serveOn("claude"))
	ctx := context.Background()
	bound, _, err := w.keys.Create(gateway.KeySpec{Name: "bound", Project: "demo", Task: "bound"})
	if err != nil {
		t.Fatal(err)
	}
	month, task := ledger.MonthScope(time.Now().UTC()), ledger.TaskScope("bound")
	for sc, limit := range map[ledger.Scope]string{month: "0.50", task: "5"} {
		if err := w.store.SetBudget(ctx, sc, provider.MustMoney(limit)); err != nil {
			t.Fatal(err)
		}
	}
	huge := `{"model":"claude-sonnet-4-6","max_tokens":2147483648,"messages":[{"role":"user","content":"hello"}]}`
	resp, m := rawPost(t, w, bound, "/v1/messages", huge)
	if resp.StatusCode != http.StatusPaymentRequired || !strings.Contains(jsonString(m, "error", "message"), "nothing was paused") {
		t.Fatalf("huge max_tokens over the month's budget: %d %v", resp.StatusCode, m)
	}
	if got := resp.Header.Get(gateway.HeaderAdjusted); got != "max_tokens=64000" {
		t.Errorf("%s = %q, want max_tokens=64000", gateway.HeaderAdjusted, got)
	}
	for _, sc := range []ledger.Scope{month, task} {
		if _, paused, _ := w.store.Paused(ctx, sc); paused {
			t.Errorf("%s paused by a call that did not fit", sc)
		}
	}
	if n := len(w.anth.Requests()); n != 0 {
		t.Errorf("%d upstream requests for a refused call", n)
	}
	// A second client, with no task, is served.
	if resp, m := rawPost(t, w, w.key, "/v1/chat/completions", `{"model":"claude-sonnet-4-6","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("second client: %d %v", resp.StatusCode, m)
	}

	// With room for the model's limit, the clamped call is served and the
	// upstream gets the model's limit, in every protocol.
	if err := w.store.SetBudget(ctx, month, provider.MustMoney("50")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", huge},
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","max_completion_tokens":99999999999,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"claude-sonnet-4-6","max_output_tokens":2147483648,"input":"hi"}`},
	} {
		resp, m := rawPost(t, w, bound, c.path, c.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s clamped call: %d %v", c.path, resp.StatusCode, m)
		}
		if got := resp.Header.Get(gateway.HeaderAdjusted); got != "max_tokens=64000" {
			t.Errorf("%s: %s = %q", c.path, gateway.HeaderAdjusted, got)
		}
		reqs := w.anth.Requests()
		if sent := string(reqs[len(reqs)-1].Body); !strings.Contains(sent, `"max_tokens":64000`) {
			t.Errorf("%s: upstream got %s, want max_tokens 64000", c.path, sent)
		}
	}
	// A limit within the model's is not adjusted.
	if resp, _ := rawPost(t, w, bound, "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`); resp.Header.Get(gateway.HeaderAdjusted) != "" {
		t.Errorf("max_tokens 100 reported adjusted: %q", resp.Header.Get(gateway.HeaderAdjusted))
	}
	// Negative limits, and 0 (which the OpenAI APIs refuse too; leaving
	// the field out asks for the model's maximum), are refused, naming the
	// field given, in the caller's shape.
	for _, c := range []struct{ path, body, want string }{
		{"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":-5,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens: must not be negative, got -5"},
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","max_tokens":-5,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens: must be at least 1, got -5"},
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens: must be at least 1, got 0: give the output token limit, or leave max_tokens out for the model's maximum"},
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","max_completion_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens: must be at least 1, got 0"},
		{"/v1/responses", `{"model":"claude-sonnet-4-6","max_output_tokens":-5,"input":"hi"}`, "max_output_tokens: must be at least 1, got -5"},
		{"/v1/responses", `{"model":"claude-sonnet-4-6","max_output_tokens":0,"input":"hi"}`, "max_output_tokens: must be at least 1, got 0"},
	} {
		before := len(w.anth.Requests())
		resp, m := rawPost(t, w, bound, c.path, c.body)
		if msg := jsonString(m, "error", "message"); resp.StatusCode != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %d %v; want 400 %q", c.path, c.body, resp.StatusCode, m, c.want)
		}
		if n := len(w.anth.Requests()) - before; n != 0 {
			t.Errorf("%s %s: the refused call reached the provider", c.path, c.body)
		}
	}
}

func jsonString(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		o, _ := v.(map[string]any)
		v = o[k]
	}
	s, _ := v.(string)
	return s
}

// Eight clients sending prompts that o200k compresses well but the
// provider does not (40,000 '=', billed by the fake as 10,000 tokens where
// o200k counts 625) never take a task past its budget: each call holds an
// upper bound of its cost.
func TestAdversarialPromptsNeverOverspendATask(t *testing.T) {
	w := newWorld(t, withLedger, serveOn("claude"))
	ctx := context.Background()
	key, _, err := w.keys.Create(gateway.KeySpec{Name: "eq", Project: "demo", Task: "eq"})
	if err != nil {
		t.Fatal(err)
	}
	task := ledger.TaskScope("eq")
	limit := provider.MustMoney("0.20")
	if err := w.store.SetBudget(ctx, task, limit); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-6", "max_tokens": 100,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("=", 40000)}}})
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				req, _ := http.NewRequestWithContext(ctx, "POST", w.url+"/v1/messages", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := w.http().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					served.Add(1)
				case http.StatusPaymentRequired:
					refused.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	b, err := w.store.Budget(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spent > limit || b.Held != 0 {
		t.Errorf("task spent $%s (held $%s) of $%s after %d calls served, %d refused", b.Spent, b.Held, limit, served.Load(), refused.Load())
	}
	if served.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d served, %d refused: want the budget to run out", served.Load(), refused.Load())
	}
}

// Each protocol's own meaning of "no output limit": Chat Completions and
// Responses mean the model's maximum, so the upstream gets the served
// model's limit from the catalog (not the agent default), the Responses
// object reports the limit applied, streamed or not, and the call is
// admitted as what that limit can cost; a model the catalog gives no limit
// gets the agent default, named in X-CortexBuild-Adjusted-Params. The
// Messages API has no default: a request without max_tokens, or with 0, is
// refused as the real API refuses it.
func TestOutputLimitFollowsTheProtocol(t *testing.T) {
	w := newWorld(t, withLedger, serveOn("claude"))
	ctx := ctxT(t)
	sentMax := func() float64 {
		reqs := w.anth.Requests()
		v, _ := body(t, reqs[len(reqs)-1].Body)["max_tokens"].(float64)
		return v
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"claude-sonnet-4-6","input":"hi"}`},
	} {
		resp, m := rawPost(t, w, w.key, c.path, c.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", c.path, c.body, resp.StatusCode, m)
		}
		if got := sentMax(); got != 64000 {
			t.Errorf("%s %s: upstream max_tokens = %v, want Sonnet's 64000", c.path, c.body, got)
		}
		if got := resp.Header.Get(gateway.HeaderAdjusted); got != "" {
			t.Errorf("%s: the model's maximum reported as an adjustment: %q", c.path, got)
		}
		if c.path == "/v1/responses" && m["max_output_tokens"] != float64(64000) {
			t.Errorf("Responses max_output_tokens = %v, want the 64000 applied", m["max_output_tokens"])
		}
	}
	// A limit sent is the one reported.
	if _, m := rawPost(t, w, w.key, "/v1/responses", `{"model":"claude-sonnet-4-6","max_output_tokens":100,"input":"hi"}`); m["max_output_tokens"] != float64(100) || sentMax() != 100 {
		t.Errorf("max_output_tokens 100: response says %v, upstream got %v", m["max_output_tokens"], sentMax())
	}
	// Streamed, the response object of every event says so too.
	st := w.openai(w.key).Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "claude-sonnet-4-6",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	events := 0
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.created" || ev.Type == "response.completed" {
			events++
			if ev.Response.MaxOutputTokens != 64000 {
				t.Errorf("%s: max_output_tokens = %d, want 64000", ev.Type, ev.Response.MaxOutputTokens)
			}
		}
	}
	if err := st.Err(); err != nil || events != 2 {
		t.Fatalf("stream: %v, %d response events", err, events)
	}

	// The admission estimate is the model's maximum: $0.96 of Sonnet
	// output does not fit a $0.50 task budget, where the 4096-token
	// default ($0.06) would have.
	small, _, err := w.keys.Create(gateway.KeySpec{Name: "small", Project: "demo", Task: "small"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.store.SetBudget(context.Background(), ledger.TaskScope("small"), provider.MustMoney("0.50")); err != nil {
		t.Fatal(err)
	}
	before := len(w.anth.Requests())
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"claude-sonnet-4-6","input":"hi"}`},
	} {
		resp, m := rawPost(t, w, small, c.path, c.body)
		if msg := jsonString(m, "error", "message"); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(msg, "the estimate $0.96") || !strings.Contains(msg, "does not fit") {
			t.Errorf("%s without a limit under a $0.50 budget: %d %v, want the 429 insufficient_quota refusal", c.path, resp.StatusCode, m)
		}
	}
	if resp, m := rawPost(t, w, small, "/v1/chat/completions", `{"model":"claude-sonnet-4-6","max_tokens":4096,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Errorf("max_tokens 4096 under a $0.50 budget: %d %v", resp.StatusCode, m)
	}
	if n := len(w.anth.Requests()) - before; n != 1 {
		t.Errorf("%d upstream requests, want the one that fits", n)
	}

	// Messages: max_tokens is required and at least 1.
	for _, c := range []struct{ body, want string }{
		{`{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{`{"model":"claude-sonnet-4-6","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Input should be greater than or equal to 1"},
	} {
		resp, m := rawPost(t, w, w.key, "/v1/messages", c.body)
		if resp.StatusCode != 400 || jsonString(m, "error", "type") != "invalid_request_error" || !strings.HasPrefix(jsonString(m, "error", "message"), c.want) {
			t.Errorf("%s: %d %v, want 400 %q", c.body, resp.StatusCode, m, c.want)
		}
	}
	if n := len(w.anth.Requests()) - before; n != 1 {
		t.Errorf("refused Messages calls reached the provider")
	}
}

// A model the catalog gives no output limit gets the agent default
// without a limit asked for, named as an adjustment and reported by the
// Responses object.
func TestOutputLimitOfAModelWithoutOne(t *testing.T) {
	w := newWorld(t, serveOn("gpt"), translating)
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		b := `{"model":"gpt/my-finetune","messages":[{"role":"user","content":"hi"}]}`
		if path == "/v1/responses" {
			b = `{"model":"gpt/my-finetune","input":"hi"}`
		}
		resp, m := rawPost(t, w, w.key, path, b)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, m)
		}
		if got := resp.Header.Get(gateway.HeaderAdjusted); got != "max_tokens=4096" {
			t.Errorf("%s: %s = %q, want max_tokens=4096", path, gateway.HeaderAdjusted, got)
		}
		reqs := w.oai.Requests()
		if got := body(t, reqs[len(reqs)-1].Body)["max_completion_tokens"]; got != float64(4096) {
			t.Errorf("%s: upstream max_completion_tokens = %v", path, got)
		}
		if path == "/v1/responses" && m["max_output_tokens"] != float64(4096) {
			t.Errorf("Responses max_output_tokens = %v, want 4096", m["max_output_tokens"])
		}
	}
}
