package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

func userMsg(s string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(s)}
}

func userMsgA(s string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))}
}

func openAIErr(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *openai.Error", err, err)
	}
	return e
}

func anthropicErr(t *testing.T, err error) *anthropic.Error {
	t.Helper()
	var e *anthropic.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *anthropic.Error", err, err)
	}
	return e
}

// Missing, wrong and revoked keys get a 401 in each protocol's shape, on
// either header; the secret never comes back.
func TestAuth(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	_, err := w.openai("").Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 401 || e.Code != "invalid_api_key" || !strings.Contains(e.Message, "missing API key") {
		t.Errorf("no key = %d %q %q", e.StatusCode, e.Code, e.Message)
	}
	wrong := "cbk_0123456789abcdef_notthesecret"
	_, err = w.anthropic(wrong).Messages.New(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 10, Messages: userMsgA("hi")})
	if e := anthropicErr(t, err); e.StatusCode != 401 || e.Type() != "authentication_error" || strings.Contains(e.Error(), wrong) {
		t.Errorf("wrong key = %d %q: %v", e.StatusCode, e.Type(), e)
	}
	// x-api-key works on the OpenAI route too, Bearer on the Anthropic one.
	req, _ := http.NewRequestWithContext(ctx, "POST", w.url+"/v1/chat/completions", strings.NewReader(`{"model":"builder","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", w.key)
	resp, err := w.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("x-api-key on chat completions = %d", resp.StatusCode)
	}
	// Revoke: the running gateway sees it at once.
	token, k, err := w.keys.Create(gateway.KeySpec{Name: "short-lived", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.openai(token).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")}); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.OpenKeyStore(w.keys.Path()).Revoke(k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.openai(token).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 401 || !strings.Contains(e.Message, "revoked") {
		t.Errorf("revoked key = %d %q", e.StatusCode, e.Message)
	}
	// The listing needs a key too.
	oc := w.openai("")
	if _, err := oc.Models.List(ctx); openAIErr(t, err).StatusCode != 401 {
		t.Errorf("models without a key = %v", err)
	}
}

// A key bound to an agent or a task cannot call as another.
func TestKeyBindings(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	token, _, err := w.keys.Create(gateway.KeySpec{Project: "demo", Agent: "explore", Task: "T-1"})
	if err != nil {
		t.Fatal(err)
	}
	c := w.openai(token)
	if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "explore", Messages: userMsg("hi")}); err != nil {
		t.Fatalf("its own agent under a bound key: %v", err)
	}
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast_cheap", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "bound to agent explore") {
		t.Errorf("a tier under a key bound to an agent = %d %q", e.StatusCode, e.Message)
	}
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "planner", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "bound to agent explore") {
		t.Errorf("other agent = %d %q", e.StatusCode, e.Message)
	}
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "explore", Messages: userMsg("hi")}, ooptionHeader(gateway.HeaderTask, "T-2"))
	if e := openAIErr(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "bound to task T-1") {
		t.Errorf("other task = %d %q", e.StatusCode, e.Message)
	}
	_, err = w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast_cheap", Messages: userMsg("hi")}, ooptionHeader(gateway.HeaderAgent, "wizard"))
	if e := openAIErr(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, `unknown agent "wizard"`) {
		t.Errorf("unknown agent header = %d %q", e.StatusCode, e.Message)
	}
	_, err = w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-9000", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 400 || e.Code != "model_not_found" || e.Param != "model" {
		t.Errorf("unknown model = %d %q %q", e.StatusCode, e.Code, e.Param)
	}
}

// A rate limit the orchestrator will not wait out comes back as a 429
// with retry-after, in both protocols.
func TestRateLimitCarriesRetryAfter(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	ctx := ctxT(t)
	w.anth.Enqueue(anthropicfake.RateLimited("30"))
	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude/claude-sonnet-4-6", Messages: userMsg("hi")})
	e := openAIErr(t, err)
	if e.StatusCode != 429 || e.Code != "rate_limit_exceeded" || e.Response.Header.Get("Retry-After") != "30" || e.Response.Header.Get("Retry-After-Ms") != "30000" {
		t.Errorf("429 = %d %q retry-after %q", e.StatusCode, e.Code, e.Response.Header.Get("Retry-After"))
	}

	w2 := newWorld(t, serveOn("gpt"))
	w2.oai.Enqueue(openaifake.RateLimited(time.Minute).WithRetryAfter(45 * time.Second))
	_, err = w2.anthropic(w2.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt/gpt-5-mini", MaxTokens: 10, Messages: userMsgA("hi")})
	ae := anthropicErr(t, err)
	if ae.StatusCode != 429 || ae.Type() != "rate_limit_error" || ae.Response.Header.Get("Retry-After") != "45" {
		t.Errorf("429 = %d %q retry-after %q", ae.StatusCode, ae.Type(), ae.Response.Header.Get("Retry-After"))
	}
}

// Budget refusals: an agent's per-call budget and the ledger's monthly
// budget. OpenAI clients get 429 insufficient_quota, Anthropic clients
// 402 billing_error, both marked not to retry.
func TestBudgetRefusals(t *testing.T) {
	w := newWorld(t, withOrch(func(s *orchestrator.Settings) {
		s.AgentBudgets = map[string]orchestrator.AgentBudget{"critic": {Limit: provider.MustMoney("0.000001")}}
	}))
	ctx := ctxT(t)
	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "critic", Messages: userMsg("review")})
	e := openAIErr(t, err)
	if e.StatusCode != 429 || e.Code != "insufficient_quota" || e.Type != "insufficient_quota" || !strings.Contains(e.Message, "CortexBuild budget: agent critic") || e.Response.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("agent budget = %d %q %q %q", e.StatusCode, e.Code, e.Message, e.Response.Header.Get("X-Should-Retry"))
	}

	// Codex gets the refusal as a 400, which it shows as it is.
	_, err = w.openai(w.key, ooption.WithHeader("Originator", "codex_exec")).Responses.New(ctx, responses.ResponseNewParams{Model: "critic",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("review")}})
	e = openAIErr(t, err)
	if e.StatusCode != 400 || e.Code != "budget_exceeded" || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "CortexBuild budget: agent critic") {
		t.Errorf("agent budget, to Codex = %d %q %q %q", e.StatusCode, e.Code, e.Type, e.Message)
	}

	wl := newWorld(t, withLedger)
	month := ledger.MonthScope(time.Now().UTC())
	if err := wl.store.SetBudget(ctx, month, provider.MustMoney("0.000001")); err != nil {
		t.Fatal(err)
	}
	_, err = wl.anthropic(wl.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 100, Messages: userMsgA("hi")})
	ae := anthropicErr(t, err)
	if ae.StatusCode != 402 || ae.Type() != "billing_error" || !strings.Contains(ae.Error(), "does not fit the budget") {
		t.Errorf("month budget = %d %q: %v", ae.StatusCode, ae.Type(), ae)
	}
	if n := len(wl.anth.Requests()) + len(wl.oai.Requests()); n != 0 {
		t.Errorf("%d provider calls despite the refusal", n)
	}
}

// A prompt too long for the context window is a 400 worded as the
// caller's vendor words it, whichever provider refused.
func TestContextWindowWording(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	ctx := ctxT(t)
	w.anth.Enqueue(anthropicfake.PromptTooLong(1250000, 1000000))
	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("long")})
	e := openAIErr(t, err)
	if e.StatusCode != 400 || e.Code != "context_length_exceeded" || !strings.Contains(e.Message, "maximum context length is 1000000 tokens. However, your messages resulted in 1250000 tokens") {
		t.Errorf("context window (OpenAI) = %d %q %q", e.StatusCode, e.Code, e.Message)
	}
	w2 := newWorld(t, serveOn("gpt"))
	w2.oai.Enqueue(openaifake.ContextLengthExceeded(400000, 512000))
	_, err = w2.anthropic(w2.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "pinned-gpt", MaxTokens: 10, Messages: userMsgA("long")})
	ae := anthropicErr(t, err)
	if ae.StatusCode != 400 || ae.Type() != "invalid_request_error" || !strings.Contains(ae.Error(), "prompt is too long: 512000 tokens > 400000 maximum") {
		t.Errorf("context window (Anthropic) = %d %v", ae.StatusCode, ae)
	}
}

// A stream that fails after its first bytes ends with the protocol's
// in-stream error, never a finish: OpenAI gets an error object and no
// [DONE], Anthropic an error event and no message_stop.
func TestMidStreamFailure(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	ctx := ctxT(t)
	w.anth.Enqueue(anthropicfake.Reply{Text: "one two three four five six", MidStreamError: &anthropicfake.StreamError{Type: "overloaded_error", Message: "Overloaded", AfterEvents: 5}})
	stream := w.openai(w.key).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	var text strings.Builder
	finished := false
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
			finished = finished || c.FinishReason != ""
		}
	}
	var se *ssestream.StreamError
	if err := stream.Err(); !errors.As(err, &se) || !strings.Contains(se.Message, "overloaded") || finished || text.Len() == 0 {
		t.Errorf("OpenAI mid-stream failure: err %v, finished %v, text %q", err, finished, text.String())
	}

	w2 := newWorld(t, serveOn("gpt"))
	w2.oai.Enqueue(openaifake.Reply{Text: "one two three four five six", MidStreamError: &openaifake.StreamError{Message: "The server had an error", AfterChunks: 3}})
	as := w2.anthropic(w2.key).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 100, Messages: userMsgA("hi")})
	var events []string
	for as.Next() {
		events = append(events, as.Current().Type)
	}
	err := as.Err()
	ae := anthropicErr(t, err)
	if ae.Type() != "api_error" || strings.Contains(strings.Join(events, " "), "message_stop") || len(events) < 3 {
		t.Errorf("Anthropic mid-stream failure: %v after %v", err, events)
	}
}

// Raw HTTP: strict decoding names the field, unknown parameters are
// listed (or refused when strict), bodies over the limit get a 413. The
// gateway decodes for a route that translates: each protocol is sent
// where only the other vendor serves (a route that relays a request as
// sent leaves its judgment to the provider: TestMessagesRelayedAsSent).
func TestDecodingAndLimits(t *testing.T) {
	limit := withGateway(func(o *gateway.Options) { o.MaxBodyBytes = 4096 })
	w := newWorld(t, limit, only("claude")) // OpenAI protocols, translated
	wm := newWorld(t, limit, only("gpt"))   // Messages, translated
	ctx := ctxT(t)
	post := func(path, body string, hdr ...string) (*http.Response, map[string]any) {
		t.Helper()
		if path == "/v1/messages" {
			return rawPost(t, wm, wm.key, path, body, hdr...)
		}
		return rawPost(t, w, w.key, path, body, hdr...)
	}
	errMsg := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		s, _ := e["message"].(string)
		return s
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"builder","messages":[{"role":"user","content":5}]}`, "messages[0].content: want a string or an array of content parts, got a number"},
		{"/v1/chat/completions", `{"model":"builder","messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, "stream: want a boolean, got string"},
		{"/v1/chat/completions", `{"model":"builder","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].image_url.url: want an http or https URL, or a base64 data URL"},
		{"/v1/chat/completions", `{"model":"builder","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments: must be a JSON object"},
		{"/v1/chat/completions", `{"model":"builder","messages":[{"role":"user","content":"hi"}],"n":3}`, "n: only one choice per request is supported"},
		{"/v1/chat/completions", `{"model":"builder","messages":[]`, "the request body is not valid JSON"},
		{"/v1/chat/completions", `[1,2]`, "the request body must be a JSON object, got an array"},
		{"/v1/messages", `{"model":"builder","max_tokens":"ten","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: want an integer, got string"},
		{"/v1/messages", `{"model":"builder","max_tokens":10,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "thinking.budget_tokens: must be less than max_tokens (10), got 1024"},
		{"/v1/messages", `{"model":"builder","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":100},"messages":[{"role":"user","content":"hi"}]}`, "thinking.budget_tokens: Input should be greater than or equal to 1024, got 100"},
		{"/v1/chat/completions", `{"model":"builder","reasoning_effort":"extreme","messages":[{"role":"user","content":"hi"}]}`, `reasoning_effort: "extreme" is not a reasoning effort`},
		{"/v1/messages", `{"model":"builder","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{}}]}]}`, "messages[0].content[1].source.type: \"\" image sources are not supported by the gateway"},
	} {
		resp, m := post(tc.path, tc.body)
		if resp.StatusCode != 400 || !strings.Contains(errMsg(m), tc.want) {
			t.Errorf("%s %s = %d %q, want 400 with %q", tc.path, tc.body, resp.StatusCode, errMsg(m), tc.want)
		}
	}
	// Unknown and unapplied parameters are named in a header.
	resp, _ := post("/v1/chat/completions", `{"model":"builder","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"user":"u1","frobnicate":true}`)
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderIgnored) != "frobnicate, temperature" {
		t.Errorf("ignored params = %d %q", resp.StatusCode, resp.Header.Get(gateway.HeaderIgnored))
	}
	resp, _ = post("/v1/messages", `{"model":"builder","max_tokens":10,"context_management":{},"metadata":{"user_id":"u"},"messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderIgnored) != "context_management" {
		t.Errorf("ignored params = %d %q", resp.StatusCode, resp.Header.Get(gateway.HeaderIgnored))
	}
	// Server tools are dropped and named.
	resp, _ = post("/v1/messages", `{"model":"builder","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderIgnored) != "tools[0](web_search_20250305)" {
		t.Errorf("server tool = %d %q", resp.StatusCode, resp.Header.Get(gateway.HeaderIgnored))
	}
	// Over the limit: 413 in each shape, before the body is read.
	big := `{"model":"builder","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	resp, m := post("/v1/chat/completions", big)
	if resp.StatusCode != 413 || !strings.Contains(errMsg(m), "larger than the gateway's limit of 4096 bytes") {
		t.Errorf("413 (OpenAI) = %d %v", resp.StatusCode, m)
	}
	_, err := w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 10, Messages: userMsgA(strings.Repeat("x", 5000))})
	if ae := anthropicErr(t, err); ae.StatusCode != 413 || ae.Type() != "request_too_large" {
		t.Errorf("413 (Anthropic) = %d %q", ae.StatusCode, ae.Type())
	}
	// Wrong method, unknown route.
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/messages", nil)
	r2, err := w.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 405 || r2.Header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/messages = %d", r2.StatusCode)
	}

	strict := newWorld(t, withGateway(func(o *gateway.Options) { o.StrictParams = true }), only("claude"))
	_, err = strict.openai(strict.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi"), Temperature: openai.Float(0.3)})
	if e := openAIErr(t, err); e.StatusCode != 400 || e.Param != "temperature" || !strings.Contains(e.Message, "strict_params") {
		t.Errorf("strict = %d %q %q", e.StatusCode, e.Param, e.Message)
	}
}

// Without auth the gateway binds only loopback, and refuses before
// binding anything else.
func TestNoAuthOnlyOnLoopback(t *testing.T) {
	w := newWorld(t)
	g, err := gateway.New(gateway.Options{Orchestrator: w.o, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.com:0"} {
		if _, err := g.Listen(addr); !errors.Is(err, gateway.ErrNoAuthNotLoopback) {
			t.Errorf("Listen(%s) without auth = %v", addr, err)
		}
	}
	srv, err := g.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Shutdown(context.Background())
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/chat/completions", bytes.NewReader([]byte(`{"model":"builder","messages":[{"role":"user","content":"hi"}]}`)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("no-auth request = %d", resp.StatusCode)
	}
	if _, err := gateway.New(gateway.Options{Orchestrator: w.o}); err == nil {
		t.Error("a gateway with neither keys nor NoAuth was built")
	}
}
