package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// TestRepeatedKeysAreRefused: a body naming a key twice where the relay
// reads it (the top level, a tool, the tool choice) is refused before any
// provider sees it, naming the key: the gateway reads the first value, a
// provider's parser may read the last, and the call would be priced and
// routed as one model (or output limit, or number of searches) and run
// as another.
func TestRepeatedKeysAreRefused(t *testing.T) {
	w := newWorld(t, withLedger)
	cases := []struct{ path, body, param string }{
		{"/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"model":"claude-opus-4-1"}`, "model"},
		{"/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"max_tok\u0065ns":64000}`, "max_tokens"},
		{"/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}],` +
			`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1,"max_uses":1000}]}`, "tools[0].max_uses"},
		{"/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}],` +
			`"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"auto","type":"tool","name":"web_search"}}`, "tool_choice.type"},
		{"/v1/chat/completions", `{"model":"gpt-5-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":16,"max_completion_tokens":100000}`, "max_completion_tokens"},
	}
	for _, c := range cases {
		resp, body := w.sendRaw(t, c.path, c.body, "anthropic-version", "2023-06-01")
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		if resp.StatusCode != 400 || !strings.Contains(string(body), c.param) || !strings.Contains(string(body), "twice") {
			t.Errorf("%s %s: %d %s; want 400 naming %s twice", c.path, c.body, resp.StatusCode, body, c.param)
		}
	}
	if n := len(w.anth.Requests()) + len(w.oai.Requests()); n != 0 {
		t.Errorf("%d requests reached a provider", n)
	}
}

// TestRelayOnlyRoutesSkipTheFullDecoder: a request whose every candidate
// relays it is read at its top level only (the full decoder does not run)
// and still reaches the provider as sent and is priced exactly; one with a
// translating candidate in its route, or with content the estimate prices
// by decoding it (an image), is decoded in full, so that a failover can
// translate it and the image is bounded by its size.
func TestRelayOnlyRoutesSkipTheFullDecoder(t *testing.T) {
	w := newWorld(t, withLedger, only("claude"))
	w.anth.Enqueue(anthropicfake.Reply{RawBody: webSearchAnswer})
	resp, body := w.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27")
	if resp.StatusCode != 200 || string(body) != webSearchAnswer {
		t.Fatalf("status %d: %s; want the provider's answer as sent", resp.StatusCode, body)
	}
	if n := w.g.FullDecodes(); n != 0 {
		t.Errorf("%d full decodes of a request every candidate relays", n)
	}
	reqs := w.anth.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the provider", len(reqs))
	}
	sameJSONExcept(t, reqs[0].Body, []byte(claudeCodeTurn), "model")
	cat, _ := pricing.Default()
	u := provider.UsageExclusive(2100, 1500, 0, 180)
	u.WebSearchRequests, u.ServiceTier = 1, "standard"
	want, err := cat.Cost("anthropic", "claude-sonnet-4-6", u, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := w.store.Attempts(ctxT(t), ledger.Filter{}); err != nil || len(rows) != 1 || rows[0].Cost != want {
		t.Errorf("ledger rows %+v, %v; want one costing %s", rows, err, want)
	}

	image := `{"model":"claude-sonnet-4-6","max_tokens":16,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="}},{"type":"text","text":"what is it?"}]}]}`
	if resp, body := w.sendRaw(t, "/v1/messages", image, "anthropic-version", "2023-06-01"); resp.StatusCode != 200 {
		t.Fatalf("image: %d %s", resp.StatusCode, body)
	}
	if n := w.g.FullDecodes(); n != 1 {
		t.Errorf("%d full decodes after a request with an image; want 1", n)
	}

	// claude first, gpt (which would translate) behind it.
	x := newWorld(t, withLedger, withOrch(func(s *orchestrator.Settings) { s.AllowAlternates = true }))
	if resp, body := x.sendRaw(t, "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01"); resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRelayed) == "" {
		t.Fatalf("status %d, relayed %q: %s", resp.StatusCode, resp.Header.Get(gateway.HeaderRelayed), body)
	}
	if n := x.g.FullDecodes(); n != 1 {
		t.Errorf("%d full decodes of a request a candidate would translate; want 1", n)
	}
}

// TestRelayOnlyEstimateIsExactNearALimit: the cheap bound of a request
// read at its top level counts every byte of its body as a token; when
// that does not fit the budget, the call is estimated exactly from its
// body decoded then, as a fully decoded call is: a body padded with
// whitespace is admitted under a budget its bytes alone would exceed.
func TestRelayOnlyEstimateIsExactNearALimit(t *testing.T) {
	w := newWorld(t, withLedger, only("claude"))
	task := ledger.TaskScope("padded")
	if err := w.store.SetBudget(ctxT(t), task, provider.MustMoney("0.05")); err != nil {
		t.Fatal(err)
	}
	// 60,000 bytes of whitespace: $0.23 at $3.75 a million as bytes, a
	// few tokens decoded.
	body := `{"model":"claude-sonnet-4-6",` + strings.Repeat(" ", 60_000) + `"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	resp, got := w.sendRaw(t, "/v1/messages", body, "anthropic-version", "2023-06-01", "X-CortexBuild-Task", "padded")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRelayed) == "" {
		t.Fatalf("status %d (relayed %q): %s; want the call admitted on its exact estimate and relayed", resp.StatusCode, resp.Header.Get(gateway.HeaderRelayed), got)
	}
	if n := w.g.FullDecodes(); n != 1 {
		t.Errorf("%d full decodes; want the one the exact estimate made", n)
	}
	// A body that does not fit even exactly is refused, unsent.
	big := `{"model":"claude-sonnet-4-6","max_tokens":16,"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 4000) + `"}]}`
	if resp, got := w.sendRaw(t, "/v1/messages", big, "anthropic-version", "2023-06-01", "X-CortexBuild-Task", "padded"); resp.StatusCode == 200 {
		t.Errorf("a prompt over the budget was admitted: %s", got)
	}
	if n := len(w.anth.Requests()); n != 1 {
		t.Errorf("%d requests reached the provider; want 1", n)
	}
}
