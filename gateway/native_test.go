package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// claudeCodeTurn is a Messages request as Claude Code sends it through a
// gateway: its web search server tool beside function tools, context
// management, metadata, and a field the gateway's contract does not know.
const claudeCodeTurn = `{"model":"claude-sonnet-4-6","max_tokens":32000,"stream":false,` +
	`"system":[{"type":"text","text":"You are Claude Code."}],` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"What changed in Go 1.26?","cache_control":{"type":"ephemeral"}}]}],` +
	`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8},` +
	`{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
	`"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},` +
	`"metadata":{"user_id":"user_abc_account__session_123"},` +
	`"service_tier":"auto","inference_geo":"us"}`

// webSearchAnswer is an upstream answer with a search in it, as the
// Messages API sends one.
const webSearchAnswer = `{"id":"msg_01UpstreamId","type":"message","role":"assistant","model":"claude-sonnet-4-6",` +
	`"content":[{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"Go 1.26 release notes"}},` +
	`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01","content":[{"type":"web_search_result","url":"https://go.dev/doc/go1.26","title":"Go 1.26 Release Notes","encrypted_content":"EqgfCioIAhgB","page_age":null}]},` +
	`{"type":"text","text":"Go 1.26 adds ...","citations":[{"type":"web_search_result_location","url":"https://go.dev/doc/go1.26","title":"Go 1.26 Release Notes","encrypted_index":"Eo8BCioIAhgB","cited_text":"Go 1.26 ..."}]}],` +
	`"stop_reason":"end_turn","stop_sequence":null,` +
	`"usage":{"input_tokens":2100,"cache_creation_input_tokens":0,"cache_read_input_tokens":1500,"output_tokens":180,` +
	`"server_tool_use":{"web_search_requests":1},"service_tier":"standard"},` +
	`"context_management":{"applied_edits":[]}}`

// sendRaw posts body as is with the world's key in x-api-key, as Claude
// Code does, and hdr as name, value pairs (a name may repeat).
func (w *world) sendRaw(t *testing.T, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", w.key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// sameJSONExcept checks that got and want are the same JSON value once
// the top-level fields named in except are removed from both.
func sameJSONExcept(t *testing.T, got, want []byte, except ...string) {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("upstream body: %v", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("client body: %v", err)
	}
	for _, k := range except {
		delete(g, k)
		delete(w, k)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("the provider did not get the client's request:\n got  %s\n want %s", asJSON(g), asJSON(w))
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMessagesRelayedAsSent: a Claude Code turn on an Anthropic route
// reaches the provider as sent (server tools, context management,
// metadata, unknown fields, every beta and the client's version), and
// the client gets the provider's bytes, its request id and ids, while the
// ledger prices the reported usage, searches included.
func TestMessagesRelayedAsSent(t *testing.T) {
	w := newWorld(t, withLedger)
	w.anth.Enqueue(anthropicfake.Reply{RawBody: webSearchAnswer, Headers: map[string]string{"request-id": "req_upstream_42",
		"x-cortexbuild-model": "spoofed", "X-CORTEXBUILD-COST": "spoofed", "x-upstream-extra": "kept"}})
	betas := "context-management-2025-06-27,interleaved-thinking-2025-05-14,a-beta-from-2027-01-01"
	resp, body := w.sendRaw(t, "/v1/messages?beta=true&api_key=sk-client-secret", claudeCodeTurn,
		"anthropic-version", "2023-06-01", "anthropic-beta", betas, "anthropic-beta", "another-beta-2027",
		"X-Claude-Code-Session-Id", "3f0c9b1e-session", "X-CortexBuild-Agent", "builder")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if string(body) != webSearchAnswer {
		t.Errorf("the client did not get the provider's bytes:\n got  %s\n want %s", body, webSearchAnswer)
	}
	if got := resp.Header.Get("Request-Id"); got != "req_upstream_42" {
		t.Errorf("request-id %q; want the provider's", got)
	}
	// The gateway's headers are its own, whatever the provider sends.
	for k, vs := range resp.Header {
		if strings.HasPrefix(k, "X-Cortexbuild-") && slices.Contains(vs, "spoofed") {
			t.Errorf("the provider's %s reached the client", k)
		}
	}
	if got := resp.Header.Get("X-Upstream-Extra"); got != "kept" {
		t.Errorf("x-upstream-extra %q; want the provider's header", got)
	}
	inv := resp.Header.Get(gateway.HeaderInvocation)
	if !strings.HasPrefix(inv, "inv_") {
		t.Errorf("%s %q; want the gateway's invocation id", gateway.HeaderInvocation, inv)
	}
	if h := resp.Header.Get(gateway.HeaderIgnored); h != "" {
		t.Errorf("%s: %q on a relayed answer: nothing was ignored", gateway.HeaderIgnored, h)
	}
	reqs := w.anth.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests; want 1", len(reqs))
	}
	up := reqs[0]
	sameJSONExcept(t, up.Body, []byte(claudeCodeTurn), "model")
	// The query goes as sent, but for a parameter named as a credential.
	if up.RawQuery != "beta=true" {
		t.Errorf("upstream query %q; want beta=true alone", up.RawQuery)
	}
	if got := up.Header.Get("Anthropic-Version"); got != "2023-06-01" {
		t.Errorf("anthropic-version %q upstream; want the client's", got)
	}
	if got := strings.Join(up.Header.Values("Anthropic-Beta"), ","); got != betas+",another-beta-2027" {
		t.Errorf("anthropic-beta upstream %q; want every value the client sent", got)
	}
	if up.APIKey() != "ak-upstream" {
		t.Error("the provider did not get the provider's key")
	}
	for k := range up.Header {
		if strings.HasPrefix(k, "X-Cortexbuild-") {
			t.Errorf("the gateway's own header %s went upstream", k)
		}
	}
	if strings.Contains(asJSON(up.Header), w.key) {
		t.Error("the virtual key went upstream")
	}
	// The ledger row: the reported usage at the catalog's prices, the
	// search at its own.
	rows, err := w.store.Attempts(ctxT(t), ledger.Filter{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("ledger rows %d, %v; want 1", len(rows), err)
	}
	cat, _ := pricing.Default()
	u := provider.UsageExclusive(2100, 1500, 0, 180)
	u.WebSearchRequests, u.ServiceTier = 1, "standard"
	want, err := cat.Cost("anthropic", "claude-sonnet-4-6", u, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Session != "3f0c9b1e-session" {
		t.Errorf("ledger row session %q; want Claude Code's session id", rows[0].Session)
	}
	if rows[0].Cost != want || rows[0].InputTokens != 3600 || rows[0].OutputTokens != 180 || rows[0].CacheReadTokens != 1500 {
		t.Errorf("ledger row %+v; want cost %s for 3600 in (1500 cached), 180 out and a search", rows[0], want)
	}
	noSearch := u
	noSearch.WebSearchRequests = 0
	if plain, _ := cat.Cost("anthropic", "claude-sonnet-4-6", noSearch, time.Now()); plain >= want {
		t.Errorf("a search costs nothing: %s with, %s without", want, plain)
	}
}

// TestMessagesStreamRelayedAsSent: every event, pings among them, reaches
// the client byte for byte.
func TestMessagesStreamRelayedAsSent(t *testing.T) {
	w := newWorld(t, withLedger)
	events := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01Up\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-6\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n" +
		"event: a_future_event\ndata: {\"type\":\"a_future_event\",\"what\":1}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	w.anth.Enqueue(anthropicfake.Reply{RawBody: events, RawContentType: "text/event-stream; charset=utf-8"})
	body := strings.Replace(claudeCodeTurn, `"stream":false`, `"stream":true`, 1)
	resp, got := w.sendRaw(t, "/v1/messages", body, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	if string(got) != events {
		t.Errorf("the client did not get the provider's events:\n got  %q\n want %q", got, events)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("content-type %q", ct)
	}
	rows, err := w.store.Attempts(ctxT(t), ledger.Filter{})
	if err != nil || len(rows) != 1 || rows[0].InputTokens != 12 || rows[0].OutputTokens != 5 || rows[0].EstimatedUsage {
		t.Fatalf("ledger rows %+v, %v; want one with the reported 12 in, 5 out", rows, err)
	}
}

// TestUpstreamErrorsRelayedAsSent: an upstream error reaches the client
// as the provider sent it (status, body, request id, rate-limit headers),
// so that the host's recovery, which matches the provider's wording,
// works.
func TestUpstreamErrorsRelayedAsSent(t *testing.T) {
	// Anthropic alone: a rate limit the gateway gives up on is the last
	// word, not a failover.
	w := newWorld(t, withLedger, withOrch(func(s *orchestrator.Settings) { s.Endpoints, s.Preference = s.Endpoints[:1], s.Preference[:1] }))
	bad := `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid ` + "`signature`" + ` in ` + "`thinking`" + ` block"},"request_id":"req_011Upstream"}`
	w.anth.Enqueue(anthropicfake.Reply{Status: 400, RawBody: bad, Headers: map[string]string{"request-id": "req_011Upstream"}})
	resp, body := w.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27")
	if resp.StatusCode != 400 || string(body) != bad {
		t.Errorf("status %d body %s; want the provider's 400 as sent", resp.StatusCode, body)
	}
	if resp.Header.Get("Request-Id") != "req_011Upstream" {
		t.Errorf("request-id %q; want the provider's", resp.Header.Get("Request-Id"))
	}
	if !strings.HasPrefix(resp.Header.Get(gateway.HeaderInvocation), "inv_") {
		t.Error("no invocation id on a relayed error")
	}

	// A rate limit the gateway waited out in vain: the last answer, with
	// its retry-after and rate-limit headers.
	limited := `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 50 requests per minute."},"request_id":"req_429"}`
	r429 := anthropicfake.Reply{Status: 429, RawBody: limited, Headers: map[string]string{"retry-after": "1", "anthropic-ratelimit-requests-remaining": "0", "request-id": "req_429"}}
	w.anth.Enqueue(r429, r429, r429, r429)
	resp, body = w.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27")
	if resp.StatusCode != 429 || string(body) != limited {
		t.Errorf("status %d body %s; want the provider's 429 as sent", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" {
		t.Errorf("headers %v; want retry-after and the rate-limit headers", resp.Header)
	}
}

// TestWhatTheContractCannotHoldIsRelayed: a block the gateway cannot
// translate goes through on a route that relays it (routed past a
// translating candidate to one that relays), and is refused, with the
// reason, when only a translating route is left.
func TestWhatTheContractCannotHoldIsRelayed(t *testing.T) {
	doc := `{"model":"claude-sonnet-4-6","max_tokens":100,"messages":[{"role":"user","content":[` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"spec"}},{"type":"text","text":"summarise"}]}]}`
	w := newWorld(t, serveOn("gpt", "claude"))
	w.anth.Enqueue(anthropicfake.Reply{Text: "A spec."})
	resp, body := w.sendRaw(t, "/v1/messages", doc, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderProvider) != "claude" {
		t.Fatalf("status %d from %q: %s; want claude, which relays it", resp.StatusCode, resp.Header.Get(gateway.HeaderProvider), body)
	}
	sameJSONExcept(t, w.anth.Requests()[0].Body, []byte(doc), "model")
	if n := len(w.oai.Requests()); n != 0 {
		t.Errorf("%d requests reached the translating provider", n)
	}

	pinned := strings.Replace(doc, `"claude-sonnet-4-6"`, `"pinned-gpt"`, 1)
	resp, body = w.sendRaw(t, "/v1/messages", pinned, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "document") {
		t.Errorf("translated route: status %d: %s; want a 400 naming the document block", resp.StatusCode, body)
	}
	if n := len(w.oai.Requests()); n != 0 {
		t.Errorf("%d requests reached the other vendor", n)
	}
}

// TestTranslatedRouteNamesWhatItDrops: the same Claude Code turn served
// by the other vendor drops the web search tool and says so.
func TestTranslatedRouteNamesWhatItDrops(t *testing.T) {
	w := newWorld(t, serveOn("gpt"))
	resp, body := w.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	ignored := resp.Header.Get(gateway.HeaderIgnored)
	for _, want := range []string{"tools[0](web_search_20250305)", "context_management"} {
		if !strings.Contains(ignored, want) {
			t.Errorf("%s %q does not name %s", gateway.HeaderIgnored, ignored, want)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || !strings.HasPrefix(m["id"].(string), "msg_") {
		t.Errorf("a translated answer in the Messages shape: %s", body)
	}
}

// TestStrictParamsRefuseOnlyTranslation: under strict_params, what the
// gateway would ignore is refused on a translated route only.
func TestStrictParamsRefuseOnlyTranslation(t *testing.T) {
	strict := withGateway(func(o *gateway.Options) { o.StrictParams = true })
	w := newWorld(t, strict, serveOn("claude"))
	w.anth.Enqueue(anthropicfake.Reply{Text: "ok"})
	if resp, body := w.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27"); resp.StatusCode != 200 {
		t.Errorf("relayed under strict_params: %d %s", resp.StatusCode, body)
	}
	x := newWorld(t, strict, serveOn("gpt"))
	resp, body := x.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "strict_params") {
		t.Errorf("translated under strict_params: %d %s; want a 400 naming strict_params", resp.StatusCode, body)
	}
}

// TestRelayedHeadersAreFiltered: what goes upstream beside the body: the
// provider's API headers, never the client's credentials, hop-by-hop
// headers or the gateway's own.
func TestRelayedHeadersAreFiltered(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	w.anth.Enqueue(anthropicfake.Reply{Text: "ok"})
	resp, body := w.sendRaw(t, "/v1/messages", claudeCodeTurn, "anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27",
		"Authorization", "Bearer "+w.key, "Connection", "X-Secret-Hop, keep-alive", "X-Secret-Hop", "1",
		"X-CortexBuild-Task", "T-1", "Anthropic-Dangerous-Direct-Browser-Access", "true")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	up := w.anth.Requests()[0].Header
	if up.Get("Anthropic-Dangerous-Direct-Browser-Access") != "true" {
		t.Error("an anthropic-* header did not go upstream")
	}
	for _, k := range []string{"X-Secret-Hop", "X-Cortexbuild-Task", "X-Cortexbuild-Agent"} {
		if up.Get(k) != "" {
			t.Errorf("%s went upstream", k)
		}
	}
	if a := up.Get("Authorization"); a != "" && !strings.Contains(a, "ak-upstream") {
		t.Errorf("Authorization upstream %q", a)
	}
	if slices.ContainsFunc(up.Values("X-Api-Key"), func(v string) bool { return v == w.key }) {
		t.Error("the virtual key went upstream")
	}
}

// TestHostSessionAndSubagentInTheLedger: the hosts' session and subagent
// headers name the ledger rows, so that spend reads per session and per
// subagent; an id the ledger cannot keep as it is is refused.
func TestHostSessionAndSubagentInTheLedger(t *testing.T) {
	w := newWorld(t, withLedger, only("claude"))
	w.anth.Enqueue(anthropicfake.Reply{Text: "sub"}, anthropicfake.Reply{Text: "codex"})
	plain := `{"model":"claude-sonnet-4-6","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	if resp, body := w.sendRaw(t, "/v1/messages", plain, "anthropic-version", "2023-06-01",
		"X-Claude-Code-Session-Id", "sess-1", "X-Claude-Code-Agent-Id", "agent-7", "X-Claude-Code-Parent-Agent-Id", "agent-1"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	// Codex's header has an underscore, which Go does not canonicalise.
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, w.url+"/v1/messages", strings.NewReader(plain))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", w.key)
	req.Header["session_id"] = []string{"codex-conv-9"}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rows, err := w.store.Attempts(ctxT(t), ledger.Filter{})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %d, %v", len(rows), err)
	}
	got := map[string]ledger.AttemptRow{}
	for _, r := range rows {
		got[r.Session] = r
	}
	if r := got["sess-1"]; r.HostAgent != "agent-7" || r.ParentAgent != "agent-1" {
		t.Errorf("Claude Code's subagent row %+v", r)
	}
	if _, ok := got["codex-conv-9"]; !ok {
		t.Errorf("no row for Codex's session: %+v", rows)
	}
	rep, err := w.store.Spend(ctxT(t), ledger.Filter{By: ledger.BySession})
	if err != nil || len(rep.Groups) != 2 {
		t.Errorf("spend by session: %+v, %v", rep, err)
	}
	resp2, body := w.sendRaw(t, "/v1/messages", plain, "X-Claude-Code-Session-Id", strings.Repeat("s", 201))
	if resp2.StatusCode != 400 || !strings.Contains(string(body), "X-Claude-Code-Session-Id") {
		t.Errorf("an overlong session id: %d %s", resp2.StatusCode, body)
	}
}

// TestRelayedAnswerFromTheCache: a repeated relayed request of an agent
// whose answers are cached is answered with the provider's bytes as they
// came the first time, and reaches the provider once; a request that
// differs only in what the decoded form does not hold (a server tool) is
// not served from the first's entry.
func TestRelayedAnswerFromTheCache(t *testing.T) {
	w := newWorld(t, withLedger, only("claude"), withOrch(func(s *orchestrator.Settings) {
		s.Cache = cache.New(cache.NewMemory(cache.MemoryOptions{}), cache.Options{})
	}))
	w.anth.Enqueue(anthropicfake.Reply{RawBody: webSearchAnswer}, anthropicfake.Reply{Text: "another"})
	body := `{"model":"explore","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	hdr := []string{"anthropic-version", "2023-06-01"}
	_, first := w.sendRaw(t, "/v1/messages", body, hdr...)
	resp, again := w.sendRaw(t, "/v1/messages", body, hdr...)
	if resp.StatusCode != 200 || string(again) != webSearchAnswer || string(first) != webSearchAnswer {
		t.Fatalf("cached answer %d %s; want the provider's bytes", resp.StatusCode, again)
	}
	if n := len(w.anth.Requests()); n != 1 {
		t.Errorf("%d upstream requests; want 1, the second answered from the cache", n)
	}
	withTool := strings.Replace(body, `"messages"`, `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1}],"messages"`, 1)
	if _, b := w.sendRaw(t, "/v1/messages", withTool, hdr...); string(b) == webSearchAnswer {
		t.Error("a request with a server tool was answered from the entry of one without")
	}
}

// TestRelayedCallFailsOverToTranslation: when the provider that relays
// fails, the call fails over to one that translates, and the client gets
// an answer in its protocol.
func TestRelayedCallFailsOverToTranslation(t *testing.T) {
	w := newWorld(t, withLedger, withOrch(func(s *orchestrator.Settings) { s.AllowAlternates = true }))
	down := anthropicfake.Reply{Status: 500, ErrorType: "api_error"}
	w.anth.Enqueue(down, down, down)
	resp, body := w.sendRaw(t, "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderProvider) != "gpt" {
		t.Fatalf("status %d from %q: %s; want gpt's answer", resp.StatusCode, resp.Header.Get(gateway.HeaderProvider), body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m["type"] != "message" {
		t.Errorf("not a Messages answer: %s", body)
	}
	if len(w.oai.Requests()) != 1 {
		t.Errorf("%d requests reached gpt", len(w.oai.Requests()))
	}
}

// TestForcedServerToolIsNeverDropped: a request whose tool_choice forces
// a server tool goes to a provider that runs it, or is refused naming it;
// a translating route never serves it without the tool.
func TestForcedServerToolIsNeverDropped(t *testing.T) {
	forced := `{"model":"claude-sonnet-4-6","max_tokens":100,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":2}],` +
		`"tool_choice":{"type":"tool","name":"web_search"},"messages":[{"role":"user","content":"news?"}]}`
	w := newWorld(t, serveOn("gpt", "claude"))
	w.anth.Enqueue(anthropicfake.Reply{RawBody: webSearchAnswer})
	resp, body := w.sendRaw(t, "/v1/messages", forced, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderProvider) != "claude" {
		t.Errorf("status %d from %q: %s; want claude, which runs the tool", resp.StatusCode, resp.Header.Get(gateway.HeaderProvider), body)
	}
	x := newWorld(t, only("gpt"))
	resp, body = x.sendRaw(t, "/v1/messages", forced, "anthropic-version", "2023-06-01")
	if resp.StatusCode == 200 || !strings.Contains(string(body), "web_search") {
		t.Errorf("only a translating route: status %d: %s; want a refusal naming the tool", resp.StatusCode, body)
	}
	if n := len(x.oai.Requests()); n != 0 {
		t.Errorf("%d requests reached the translating provider", n)
	}
}

// TestChatRelayedToOpenAI: a Chat Completions request on an OpenAI route
// goes as sent but for what the router's choice of model demands (the
// reasoning model takes its limit as max_completion_tokens and no
// temperature), each change named; OpenAI-Beta goes, the organisation
// and the client's key do not; the answer is OpenAI's.
func TestChatRelayedToOpenAI(t *testing.T) {
	w := newWorld(t, withLedger, only("gpt"))
	body := `{"model":"builder","max_tokens":300,"temperature":0.2,"prompt_cache_key":"k1","service_tier":"flex",` +
		`"messages":[{"role":"user","content":"hi"}]}`
	resp, got := w.sendRaw(t, "/v1/chat/completions", body, "OpenAI-Beta", "assistants=v2", "OpenAI-Organization", "org-client", "X-Client-Trace", "t1")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	if resp.Header.Get(gateway.HeaderRelayed) != "openai.chat" {
		t.Errorf("%s = %q", gateway.HeaderRelayed, resp.Header.Get(gateway.HeaderRelayed))
	}
	if adj := resp.Header.Get(gateway.HeaderAdjusted); adj != "max_completion_tokens=300, temperature=dropped" {
		t.Errorf("%s = %q", gateway.HeaderAdjusted, adj)
	}
	up := w.oai.Requests()[0]
	want := `{"model":"x","max_completion_tokens":300,"prompt_cache_key":"k1","service_tier":"flex","messages":[{"role":"user","content":"hi"}]}`
	sameJSONExcept(t, up.Body, []byte(want), "model")
	if up.Header.Get("Openai-Beta") != "assistants=v2" || up.Header.Get("Openai-Organization") != "" || up.Header.Get("X-Client-Trace") != "" || up.APIKey() != "ok-upstream" {
		t.Errorf("upstream headers %v", up.Header)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || !strings.HasPrefix(m["id"].(string), "chatcmpl-") || m["service_tier"] != "flex" {
		t.Errorf("not OpenAI's answer: %s", got)
	}
	rows, err := w.store.Attempts(ctxT(t), ledger.Filter{})
	if err != nil || len(rows) != 1 || rows[0].EstimatedUsage || rows[0].InputTokens == 0 {
		t.Errorf("ledger %+v, %v; want one row with the reported usage", rows, err)
	}
}

// TestRelayedStreamCutSettlesWhatWasBilled: a relayed stream the provider
// cuts after content ends with the protocol's error event (never a
// message_stop it did not send), and the ledger settles what the provider
// can bill for what it sent.
func TestRelayedStreamCutSettlesWhatWasBilled(t *testing.T) {
	w := newWorld(t, withLedger, only("claude"))
	w.anth.Enqueue(anthropicfake.Reply{Text: strings.Repeat("words and more words ", 40), CutAfterEvents: 6})
	body := `{"model":"claude-sonnet-4-6","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"write"}]}`
	resp, got := w.sendRaw(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	if !strings.Contains(string(got), "event: message_start") || strings.Contains(string(got), "event: message_stop") || !strings.HasSuffix(string(got), "\n\n") || !strings.Contains(string(got), "event: error") {
		t.Errorf("a cut stream reached the client as:\n%s", got)
	}
	rows, err := w.store.Attempts(ctxT(t), ledger.Filter{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %d, %v", len(rows), err)
	}
	if r := rows[0]; r.Outcome != "network" || r.InputTokens == 0 || r.OutputTokens == 0 || r.Cost == 0 {
		t.Errorf("ledger row %+v; want the cut attempt billed for what was sent", r)
	}
}

// TestCountTokensRelayed: on an Anthropic route the provider counts, for
// free (the request as sent, its answer as it came, no ledger row); on a
// route to another vendor the gateway counts offline.
func TestCountTokensRelayed(t *testing.T) {
	w := newWorld(t, withLedger, serveOn("claude"))
	body := `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"How many tokens is this?"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`
	resp, got := w.sendRaw(t, "/v1/messages/count_tokens", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRelayed) != "anthropic.count_tokens" {
		t.Fatalf("status %d, relayed %q: %s", resp.StatusCode, resp.Header.Get(gateway.HeaderRelayed), got)
	}
	reqs := w.anth.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/messages/count_tokens" {
		t.Fatalf("upstream %+v", reqs)
	}
	sameJSONExcept(t, reqs[0].Body, []byte(body), "model")
	if rows, err := w.store.Attempts(ctxT(t), ledger.Filter{}); err != nil || len(rows) != 0 {
		t.Errorf("a count made %d ledger rows (%v)", len(rows), err)
	}
	x := newWorld(t, only("gpt"))
	resp, got = x.sendRaw(t, "/v1/messages/count_tokens", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderRelayed) != "" || len(x.oai.Requests()) != 0 || !strings.Contains(string(got), "input_tokens") {
		t.Errorf("offline count: %d %q %s", resp.StatusCode, resp.Header.Get(gateway.HeaderRelayed), got)
	}
}

// TestReasoningItemsBoundTheEstimate: the reasoning items a Responses
// client sends back are input the provider bills, which the decoded
// request does not hold: the estimate bounds them by their bytes, so a
// budget that fits the rest of the request but not them refuses the call.
func TestReasoningItemsBoundTheEstimate(t *testing.T) {
	w := newWorld(t, withLedger, only("gpt"))
	task := ledger.TaskScope("reasoning")
	if err := w.store.SetBudget(ctxT(t), task, provider.MustMoney("0.004")); err != nil {
		t.Fatal(err)
	}
	item := `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"` + strings.Repeat("A", 200_000) + `"}`
	body := `{"model":"builder","max_output_tokens":16,"store":false,"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"hi"},` + item + `]}`
	resp, got := w.sendRaw(t, "/v1/responses", body, "X-CortexBuild-Task", "reasoning")
	if resp.StatusCode == 200 {
		t.Errorf("a request whose reasoning items alone bound over the budget was served: %s", got)
	}
	if n := len(w.oai.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
}

// TestRelayedErrorsTheGatewayOwns: on a relayed route a refusal of the
// gateway's own credentials is not the provider's 401 (the client's key
// is fine): the project is paused and the client told so, as on a
// translated route; and a relayed error that names its wait only in
// seconds gets the gateway's retry-after-ms beside it.
func TestRelayedErrorsTheGatewayOwns(t *testing.T) {
	alone := withOrch(func(s *orchestrator.Settings) { s.Endpoints, s.Preference = s.Endpoints[:1], s.Preference[:1] })
	w := newWorld(t, alone)
	w.anth.Enqueue(anthropicfake.Reply{Status: 401, ErrorType: "authentication_error", ErrorMessage: "invalid x-api-key"})
	body := `{"model":"claude-sonnet-4-6","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	resp, got := w.sendRaw(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 400 || strings.Contains(string(got), "invalid x-api-key") || resp.Header.Get(gateway.HeaderRelayed) != "" {
		t.Errorf("the provider refused the gateway's key: %d %q %s; want the gateway's 400, not the provider's words", resp.StatusCode, resp.Header.Get(gateway.HeaderRelayed), got)
	}

	x := newWorld(t, alone)
	limited := `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
	r429 := anthropicfake.Reply{Status: 429, RawBody: limited, Headers: map[string]string{"retry-after": "2"}}
	x.anth.Enqueue(r429, r429, r429, r429)
	resp, got = x.sendRaw(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 429 || string(got) != limited || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Retry-After-Ms") == "" {
		t.Errorf("relayed 429: %d retry-after %q, -ms %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"), got)
	}
}
