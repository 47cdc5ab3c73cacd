package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// The router's choice in these tests: the model and output limit the
// relay sends upstream in place of the client's.
const (
	routedModel = "claude-sonnet-4-6"
	routedLimit = 8000
)

// relayed is what the test relay saw of one call.
type relayed struct {
	body   []byte      // the client's body
	header http.Header // the client's headers
	res    *provider.Result
	chunks []provider.Chunk
	err    error
}

// relay stands in for the gateway: it takes a Messages request from a
// client, hands it to the adapter as a native request (with the client's
// anthropic-* headers, and its credentials too, which the adapter must
// drop) and writes back what the adapter returns as it came.
type relay struct {
	t *testing.T
	a *anthropic.Adapter

	mu   sync.Mutex
	last relayed
}

func newRelay(t *testing.T, a *anthropic.Adapter) (*relay, *httptest.Server) {
	rl := &relay{t: t, a: a}
	srv := httptest.NewServer(rl)
	t.Cleanup(srv.Close)
	return rl, srv
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	h := http.Header{}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, "Anthropic-") || k == "X-Api-Key" || k == "Authorization" || k == "Cookie" {
			h[k] = vs
		}
	}
	var b struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &b)
	req := &provider.Request{Model: routedModel, MaxTokens: routedLimit, Prompt: "(decoded for routing)",
		Native: &provider.Native{Protocol: provider.ProtoMessages, Body: body, Header: h, Stream: b.Stream}}
	rec := relayed{body: body, header: r.Header.Clone()}
	defer func() {
		rl.mu.Lock()
		rl.last = rec
		rl.mu.Unlock()
	}()
	writeReply := func(rep *provider.NativeReply, withHeader bool) {
		if withHeader {
			for k, vs := range rep.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(rep.Status)
		}
		_, _ = w.Write(rep.Body)
	}
	if !b.Stream {
		rec.res, rec.err = rl.a.Invoke(r.Context(), req)
		var pe *provider.Error
		switch {
		case rec.err == nil:
			writeReply(rec.res.Native, true)
		case errors.As(rec.err, &pe) && pe.Reply != nil:
			writeReply(pe.Reply, true)
		default:
			http.Error(w, rec.err.Error(), 502)
		}
		return
	}
	st, err := rl.a.Stream(r.Context(), req)
	if err != nil {
		rec.err = err
		http.Error(w, err.Error(), 502)
		return
	}
	defer st.Close()
	started := false
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			rec.err = err
			var pe *provider.Error
			if errors.As(err, &pe) && pe.Reply != nil {
				writeReply(pe.Reply, !started)
			}
			return
		}
		rec.chunks = append(rec.chunks, c)
		if c.Reply != nil {
			started = true
			for k, vs := range c.Reply.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(c.Reply.Status)
		}
		_, _ = w.Write(c.Raw)
		_ = http.NewResponseController(w).Flush()
	}
}

func (rl *relay) take() relayed {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	r := rl.last
	rl.last = relayed{}
	return r
}

// clientKey is the client's own credential: it must never reach the
// provider.
const clientKey = "sk-ant-client-credential-must-not-travel"

// relayClient is an official SDK client of the relay, speaking
// anthropic-version 2023-06-01 as Claude Code does.
func relayClient(srv *httptest.Server, opts ...option.RequestOption) sdk.Client {
	return sdk.NewClient(append([]option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(srv.URL),
		option.WithAPIKey(clientKey),
		option.WithMaxRetries(0),
		// A timeout lets the SDK send a large max_tokens without streaming.
		option.WithRequestTimeout(30 * time.Second),
		option.WithHeader("anthropic-version", "2023-06-01"),
		option.WithHeaderAdd("Cookie", "session=client-session-cookie"),
	}, opts...)...)
}

// futureBeta is a beta value no one knows yet: it travels as it came.
const futureBeta = "some-future-beta-2099-01-01"

// claudeCodeParams is a request with what Claude Code sends and the
// gateway does not model: the web search server tool next to a function
// tool, context_management, metadata.user_id, thinking, and a field the
// API has added since (future_knob).
func claudeCodeParams() (sdk.BetaMessageNewParams, []option.RequestOption) {
	p := sdk.BetaMessageNewParams{
		Model:     "claude-opus-4-7",
		MaxTokens: 64000,
		Betas:     []sdk.AnthropicBeta{sdk.AnthropicBetaContextManagement2025_06_27, "interleaved-thinking-2025-05-14", futureBeta},
		System:    []sdk.BetaTextBlockParam{{Text: "You are Claude Code."}},
		Messages:  []sdk.BetaMessageParam{sdk.NewBetaUserMessage(sdk.NewBetaTextBlock("What changed in Go 1.26? Check the web."))},
		Metadata:  sdk.BetaMetadataParam{UserID: sdk.String("user_3f2a_account_9c1d_session_77")},
		Thinking:  sdk.BetaThinkingConfigParamUnion{OfEnabled: &sdk.BetaThinkingConfigEnabledParam{BudgetTokens: 2048}},
		Tools: []sdk.BetaToolUnionParam{
			{OfWebSearchTool20250305: &sdk.BetaWebSearchTool20250305Param{MaxUses: sdk.Int(4)}},
			{OfTool: &sdk.BetaToolParam{Name: "Read", Description: sdk.String("Read a file"),
				InputSchema: sdk.BetaToolInputSchemaParam{Properties: map[string]any{"file_path": map[string]any{"type": "string"}}, Required: []string{"file_path"}}}},
		},
		ContextManagement: sdk.BetaContextManagementConfigParam{Edits: []sdk.BetaContextManagementConfigEditUnionParam{
			{OfClearThinking20251015: &sdk.BetaClearThinking20251015EditParam{}},
			{OfClearToolUses20250919: &sdk.BetaClearToolUses20250919EditParam{}},
		}},
	}
	return p, []option.RequestOption{option.WithJSONSet("future_knob", map[string]any{"level": 3})}
}

var goSearch = anthropicfake.WebSearch{Query: "Go 1.26 release notes", Results: []anthropicfake.SearchResult{
	{URL: "https://go.dev/doc/go1.26", Title: "Go 1.26 Release Notes", PageAge: "February 10, 2026", CitedText: "Go 1.26 adds"},
}}

// relayEnv is a fake that knows future_knob, the adapter on it, and the
// relay in front of the adapter.
func relayEnv(t *testing.T) (*anthropicfake.Server, *relay, *httptest.Server) {
	a, f := newEnv(t, anthropicfake.WithAcceptedFields("future_knob"))
	rl, srv := newRelay(t, a)
	return f.srv, rl, srv
}

// lastMessages is the fake's last POST /v1/messages.
func lastMessages(t *testing.T, fake *anthropicfake.Server) anthropicfake.Recorded {
	t.Helper()
	reqs := fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == "/v1/messages" {
			return reqs[i]
		}
	}
	t.Fatal("no request reached the fake")
	return anthropicfake.Recorded{}
}

// checkRelayedRequest: the request reached the fake as the client sent it,
// but for the model and the clamped max_tokens, with the client's
// anthropic-* headers and the adapter's credential only.
func checkRelayedRequest(t *testing.T, got anthropicfake.Recorded, sent relayed) {
	t.Helper()
	var up, down map[string]any
	if err := json.Unmarshal(got.Body, &up); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sent.body, &down); err != nil {
		t.Fatal(err)
	}
	if up["model"] != routedModel || up["max_tokens"] != float64(routedLimit) {
		t.Errorf("upstream model %v max_tokens %v, want %s %d", up["model"], up["max_tokens"], routedModel, routedLimit)
	}
	if down["model"] != "claude-opus-4-7" || down["max_tokens"] != float64(64000) {
		t.Fatalf("the client sent model %v max_tokens %v", down["model"], down["max_tokens"])
	}
	for _, k := range []string{"model", "max_tokens"} {
		delete(up, k)
		delete(down, k)
	}
	for _, k := range []string{"tools", "context_management", "metadata", "thinking", "future_knob", "system", "messages"} {
		if _, ok := down[k]; !ok {
			t.Fatalf("the client's request lacks %s: %s", k, sent.body)
		}
	}
	if !reflect.DeepEqual(up, down) {
		t.Errorf("the body changed on the way:\nclient %s\nfake   %s", sent.body, got.Body)
	}
	for k, vs := range sent.header {
		if strings.HasPrefix(k, "Anthropic-") && !reflect.DeepEqual(got.Header[k], vs) {
			t.Errorf("header %s: fake got %q, client sent %q", k, got.Header[k], vs)
		}
	}
	if v := got.Header.Get("anthropic-version"); v != "2023-06-01" {
		t.Errorf("anthropic-version %q", v)
	}
	// The edited body goes as one in a slice would: its length announced,
	// not chunked.
	if cl := got.Header.Get("Content-Length"); cl != strconv.Itoa(len(got.Body)) {
		t.Errorf("Content-Length %q for a body of %d bytes", cl, len(got.Body))
	}
	if !slices.Contains(got.Betas(), futureBeta) || !slices.Contains(got.Betas(), anthropicfake.BetaContextManagement) {
		t.Errorf("betas %q", got.Betas())
	}
	if got.APIKey() != testKey || got.Header.Get("Cookie") != "" || got.Header.Get("X-Api-Key") != "" {
		t.Errorf("credentials upstream: key %q, cookie %q, x-api-key %q", got.APIKey(), got.Header.Get("Cookie"), got.Header.Get("X-Api-Key"))
	}
	for k, vs := range got.Header {
		for _, v := range vs {
			if strings.Contains(v, clientKey) || strings.Contains(v, "client-session-cookie") {
				t.Errorf("the client's credential went upstream in %s", k)
			}
		}
	}
}

// A Claude Code request goes upstream as the client sent it, and its
// answer comes back as the provider sent it, decoded for the accounting.
func TestRelayUnary(t *testing.T) {
	fake, rl, srv := relayEnv(t)
	fake.Enqueue(anthropicfake.Reply{WebSearches: []anthropicfake.WebSearch{goSearch}, Text: "Go 1.26 adds new features.",
		AppliedEdits: []anthropicfake.AppliedEdit{{Type: anthropicfake.EditClearThinking, ClearedThinkingTurns: 1, ClearedInputTokens: 1}}})
	p, opts := claudeCodeParams()
	client := relayClient(srv)
	msg, err := client.Beta.Messages.New(context.Background(), p, opts...)
	got := rl.take()
	if err != nil {
		t.Fatalf("client: %v (adapter: %v)", err, got.err)
	}
	up := lastMessages(t, fake)
	checkRelayedRequest(t, up, got)

	res := got.res
	sent := fake.Sent(up.RequestID)
	if res.Native == nil || !bytes.Equal(res.Native.Body, sent) || res.Native.Status != 200 {
		t.Fatalf("Result.Native differs from what the fake sent:\n%+v\n%s", res.Native, sent)
	}
	if msg.RawJSON() != string(sent) {
		t.Errorf("the client read\n%s\nthe fake sent\n%s", msg.RawJSON(), sent)
	}
	if h := res.Native.Header; h.Get("request-id") != up.RequestID || h.Get("anthropic-ratelimit-requests-limit") == "" || h.Get("Content-Length") != "" {
		t.Errorf("reply headers %v", h)
	}
	if want := []string{"model=" + routedModel, "max_tokens=8000"}; !reflect.DeepEqual(res.Native.Edits, want) {
		t.Errorf("edits %q, want %q", res.Native.Edits, want)
	}
	// The accounting reads the answer as a translated call's.
	if res.Content != "Go 1.26 adds new features." || len(res.ToolCalls) != 0 || res.Model != routedModel || res.RequestID != up.RequestID {
		t.Errorf("result %+v", res)
	}
	if res.Usage.WebSearchRequests != 1 || res.Usage.ServiceTier != "" || res.Usage.OutputTokens == 0 || res.Cost <= 0 {
		t.Errorf("usage %+v cost %v", res.Usage, res.Cost)
	}
	if len(msg.Content) != 3 || msg.Content[1].Type != "web_search_tool_result" || len(msg.ContextManagement.AppliedEdits) != 1 {
		t.Errorf("the client's message %s", msg.RawJSON())
	}
}

// Streamed, every event is one chunk with its bytes: their concatenation
// is what the fake sent, pings included, and the client accumulates it.
func TestRelayStream(t *testing.T) {
	fake, rl, srv := relayEnv(t)
	fake.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: "Let me search."}, WebSearches: []anthropicfake.WebSearch{goSearch},
		Text: "Go 1.26 adds new features.", ToolUses: []anthropicfake.ToolUse{{Name: "Read", Input: json.RawMessage(`{"file_path":"go.mod"}`)}}})
	p, opts := claudeCodeParams()
	client := relayClient(srv)
	st := client.Beta.Messages.NewStreaming(context.Background(), p, opts...)
	var acc sdk.BetaMessage
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	got := rl.take()
	if err := st.Err(); err != nil {
		t.Fatalf("client: %v (adapter: %v)", err, got.err)
	}
	up := lastMessages(t, fake)
	checkRelayedRequest(t, up, got)

	var raw bytes.Buffer
	pings := 0
	for i, c := range got.chunks {
		raw.Write(c.Raw)
		if bytes.HasPrefix(c.Raw, []byte("event: ping\n")) {
			pings++
		}
		if (i == 0) != (c.Reply != nil) {
			t.Errorf("chunk %d reply %+v", i, c.Reply)
		}
	}
	if sent := fake.Sent(up.RequestID); !bytes.Equal(raw.Bytes(), sent) || pings == 0 {
		t.Fatalf("the chunks' bytes (%d pings) differ from what the fake sent:\n%s\n---\n%s", pings, raw.Bytes(), sent)
	}
	first := got.chunks[0]
	if first.Reply.Status != 200 || first.Reply.Header.Get("request-id") != up.RequestID || first.Model != routedModel || first.Usage == nil ||
		!strings.HasPrefix(first.Reply.Header.Get("Content-Type"), "text/event-stream") || len(first.Reply.Edits) != 2 {
		t.Errorf("first chunk %+v reply %+v", first, first.Reply)
	}
	var text, reasoning strings.Builder
	var calls []provider.ToolCallDelta
	for _, c := range got.chunks {
		text.WriteString(c.Text)
		reasoning.WriteString(c.Reasoning)
		if c.ToolCall != nil {
			calls = append(calls, *c.ToolCall)
		}
	}
	last := got.chunks[len(got.chunks)-1]
	if !last.Final || last.Result == nil || !bytes.HasPrefix(last.Raw, []byte("event: message_stop")) {
		t.Fatalf("last chunk %+v", last)
	}
	res := last.Result
	if text.String() != "Go 1.26 adds new features." || reasoning.String() != "Let me search." || res.Content != text.String() {
		t.Errorf("text %q reasoning %q content %q", text.String(), reasoning.String(), res.Content)
	}
	// The server tool's input is no call of the client's.
	if len(calls) == 0 || calls[0].Name != "Read" || len(res.ToolCalls) != 1 || string(res.ToolCalls[0].Arguments) != `{"file_path": "go.mod"}` {
		t.Errorf("tool calls %+v result %+v", calls, res.ToolCalls)
	}
	for _, c := range calls {
		if c.Index != 0 || strings.Contains(c.Arguments, "query") {
			t.Errorf("a tool-call delta of the server tool: %+v", c)
		}
	}
	if res.Usage.WebSearchRequests != 1 || res.Usage.OutputTokens == 0 || res.Cost <= 0 {
		t.Errorf("usage %+v", res.Usage)
	}
	if len(acc.Content) != 5 || acc.Content[2].Type != "web_search_tool_result" || acc.Usage.ServerToolUse.WebSearchRequests != 1 {
		t.Errorf("the client's message %s", acc.RawJSON())
	}
}

// nativeReq is a relayed request with body and headers h.
func nativeReq(body string, h http.Header) *provider.Request {
	var b struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal([]byte(body), &b)
	return &provider.Request{Model: routedModel, MaxTokens: routedLimit, Prompt: "hi",
		Native: &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(body), Header: h, Stream: b.Stream}}
}

const plainBody = `{"model":"claude-sonnet-4-6","max_tokens":512,"messages":[{"role":"user","content":"hi"}]}`
const streamBody = `{"model":"claude-sonnet-4-6","max_tokens":512,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

func versionHeader() http.Header { return http.Header{"Anthropic-Version": {"2023-06-01"}} }

// collect reads s to its end: its chunks and the error that ended it.
func collect(t *testing.T, s provider.Stream) ([]provider.Chunk, error) {
	t.Helper()
	defer s.Close()
	var out []provider.Chunk
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, c)
		if len(out) > 10_000 {
			t.Fatal("endless stream")
		}
	}
}

func rawOf(chunks []provider.Chunk) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		b.Write(c.Raw)
	}
	return b.Bytes()
}

// An error status comes back as the provider sent it, classified as
// today: the body byte for byte, with its request-id header.
func TestRelayErrorReply(t *testing.T) {
	const msg = "messages.0.content.0.type: Input tag 'mystery' found using 'type' does not match any of the expected tags"
	for _, stream := range []bool{false, true} {
		a, f := newEnv(t)
		f.srv.Enqueue(anthropicfake.InvalidRequest(msg))
		var err error
		if stream {
			var s provider.Stream
			if s, err = a.Stream(context.Background(), nativeReq(streamBody, versionHeader())); err == nil {
				var chunks []provider.Chunk
				chunks, err = collect(t, s)
				if len(chunks) != 0 {
					t.Errorf("chunks before the error: %d", len(chunks))
				}
			}
		} else {
			_, err = invoke(t, a, nativeReq(plainBody, versionHeader()))
		}
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Reply == nil {
			t.Fatalf("stream=%v: error %v has no reply", stream, err)
		}
		up := lastMessages(t, f.srv)
		if pe.Kind != provider.KindBadRequest || pe.Diagnostic.Message != msg || pe.Diagnostic.RequestID != up.RequestID {
			t.Errorf("stream=%v: classified %s %+v", stream, pe.Kind, pe.Diagnostic)
		}
		if r := pe.Reply; r.Status != 400 || !bytes.Equal(r.Body, f.srv.Sent(up.RequestID)) || r.Header.Get("request-id") != up.RequestID ||
			!strings.Contains(string(r.Body), msg) {
			t.Errorf("stream=%v: reply %d %v %s", stream, r.Status, r.Header, r.Body)
		}
	}
}

// A 429 keeps its retry-after and rate-limit headers in the reply, and
// its delay in the error.
func TestRelayRateLimited(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.RateLimited("7"))
	_, err := invoke(t, a, nativeReq(plainBody, versionHeader()))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Reply == nil {
		t.Fatalf("error %v", err)
	}
	h := pe.Reply.Header
	if pe.Kind != provider.KindRateLimit || pe.RetryAfter != 7*time.Second || pe.Reply.Status != 429 || h.Get("retry-after") != "7" ||
		h.Get("anthropic-ratelimit-requests-remaining") == "" || h.Get("anthropic-ratelimit-tokens-reset") == "" {
		t.Errorf("%s retry %s reply %d %v", pe.Kind, pe.RetryAfter, pe.Reply.Status, h)
	}
	if !bytes.Equal(pe.Reply.Body, f.srv.Sent(lastMessages(t, f.srv).RequestID)) {
		t.Errorf("body %s", pe.Reply.Body)
	}
}

// An error event ends a relayed stream as the SDK would classify it, with
// the event's bytes in the reply; what came before is billed.
func TestRelayStreamErrorEvent(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.Reply{Text: "The first part of an answer that", MidStreamError: &anthropicfake.StreamError{Type: "overloaded_error", Message: "Overloaded", AfterEvents: 5}})
	s, err := a.Stream(context.Background(), nativeReq(streamBody, versionHeader()))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Reply == nil || len(chunks) != 5 {
		t.Fatalf("%d chunks, error %v", len(chunks), err)
	}
	up := lastMessages(t, f.srv)
	sent := f.srv.Sent(up.RequestID)
	if pe.Kind != provider.KindOverloaded || pe.Reply.Status != 200 || !bytes.HasPrefix(pe.Reply.Body, []byte("event: error\n")) ||
		!bytes.Equal(append(rawOf(chunks), pe.Reply.Body...), sent) {
		t.Errorf("%s reply %d %q\nsent %q", pe.Kind, pe.Reply.Status, pe.Reply.Body, sent)
	}
	if pe.Diagnostic.RequestID != up.RequestID || pe.Usage == nil || pe.Usage.InputTokens == 0 || pe.Usage.OutputTokens == 0 {
		t.Errorf("diagnostic %+v usage %+v", pe.Diagnostic, pe.Usage)
	}
}

// A stream cut midway, between events or inside one, is a truncated
// (network) answer billed for what was received.
func TestRelayStreamCut(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply anthropicfake.Reply
	}{
		{"between events", anthropicfake.Reply{Text: "An answer that will be cut before its end marker arrives.", CutAfterEvents: 6}},
		{"inside an event", anthropicfake.Reply{Text: "An answer that will be cut before its end marker arrives.", CutAfterBytes: 1500}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, f := newEnv(t, anthropicfake.WithoutPadding())
			f.srv.Enqueue(tt.reply)
			s, err := a.Stream(context.Background(), nativeReq(streamBody, versionHeader()))
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := collect(t, s)
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.KindNetwork {
				t.Fatalf("error %v", err)
			}
			sent := f.srv.Sent(lastMessages(t, f.srv).RequestID)
			got := rawOf(chunks)
			if !bytes.HasPrefix(sent, got) || !bytes.HasSuffix(got, []byte("\n\n")) || len(chunks) < 4 {
				t.Errorf("%d chunks %q of sent %q", len(chunks), got, sent)
			}
			if tt.reply.CutAfterBytes > 0 && (len(sent) != tt.reply.CutAfterBytes || bytes.HasSuffix(sent, []byte("\n\n"))) {
				t.Errorf("sent %d bytes", len(sent))
			}
			var text strings.Builder
			for _, c := range chunks {
				text.WriteString(c.Text)
			}
			if text.Len() == 0 || pe.Usage == nil || pe.Usage.InputTokens == 0 || pe.Usage.OutputTokens == 0 || pe.Cost <= 0 {
				t.Errorf("text %q billed %+v cost %v", text.String(), pe.Usage, pe.Cost)
			}
		})
	}
}

// Headers: without the client's anthropic-version the SDK's stays; the
// betas the translated path derives from Request.Meta are not added; the
// client's credentials never travel, whatever their header.
func TestRelayHeaders(t *testing.T) {
	a, f := newEnv(t)
	h := http.Header{
		"Anthropic-Beta":      {"b1,b2", "b3"},
		"X-Api-Key":           {clientKey},
		"Authorization":       {"Bearer " + clientKey},
		"Proxy-Authorization": {"Basic " + clientKey},
		"X-Auth-Token":        {clientKey},
		"Connection":          {"close"},
	}
	req := nativeReq(plainBody, h)
	req.Meta = provider.Metadata{anthropic.MetaBeta: json.RawMessage(`["meta-beta-2025-01-01"]`)}
	if _, err := invoke(t, a, req); err != nil {
		t.Fatal(err)
	}
	up := lastMessages(t, f.srv)
	if v := up.Header.Get("anthropic-version"); v != anthropicfake.APIVersion2026 {
		t.Errorf("anthropic-version %q, want the SDK's", v)
	}
	if got := up.Header.Values("anthropic-beta"); !reflect.DeepEqual(got, []string{"b1,b2", "b3"}) {
		t.Errorf("anthropic-beta %q", got)
	}
	if up.APIKey() != testKey || up.Header.Get("Proxy-Authorization") != "" || up.Header.Get("X-Auth-Token") != "" || up.Header.Get("X-Api-Key") != "" {
		t.Errorf("credentials upstream: %v", up.Header)
	}
}

// What the adapter does not speak natively, and a request without Native,
// take the translated path; a body that asks for the other kind of call
// is refused.
func TestRelayOnlyWhatItSpeaks(t *testing.T) {
	a, f := newEnv(t, anthropicfake.WithAcceptedFields("future_knob"))
	if !a.SpeaksNative(provider.ProtoMessages, routedModel) || a.SpeaksNative(provider.ProtoChat, routedModel) || a.SpeaksNative(provider.ProtoResponses, routedModel) {
		t.Fatal("SpeaksNative")
	}
	req := nativeReq(`{"model":"gpt-5","max_tokens":10,"future_knob":1,"messages":[{"role":"user","content":"hi"}]}`, versionHeader())
	req.Native.Protocol = provider.ProtoChat
	res, err := invoke(t, a, req)
	if err != nil {
		t.Fatal(err)
	}
	if up := lastMessages(t, f.srv); res.Native != nil || strings.Contains(string(up.Body), "future_knob") || up.Header.Get("anthropic-version") != anthropicfake.APIVersion2026 {
		t.Errorf("a chat request was relayed: %s", up.Body)
	}

	if _, err := invoke(t, a, nativeReq(streamBody, nil)); err == nil || !strings.Contains(err.Error(), `"stream": true`) {
		t.Errorf("Invoke of a streaming body: %v", err)
	}
	if _, err := a.Stream(context.Background(), nativeReq(plainBody, nil)); err == nil || !strings.Contains(err.Error(), `"stream": false`) {
		t.Errorf("Stream of a unary body: %v", err)
	}
}

// A relayed event the adapter cannot read ends the stream with the error
// its decoding gives, after the events before it; an event in a shape the
// fixed structs refuse but the SDK reads is read as the SDK reads it.
func TestRelayStreamUnreadableEvent(t *testing.T) {
	start := `event: message_start` + "\n" + `data: {"type":"message_start","message":{"model":"claude-sonnet-4-6","id":"msg_01X","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":1}}}` + "\n\n" +
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n"
	delta := `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n"
	end := `event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}` + "\n\n" +
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}` + "\n\n"
	run := func(body string) ([]provider.Chunk, error) {
		a, f := newEnv(t)
		f.srv.Enqueue(anthropicfake.Reply{RawBody: body, RawContentType: "text/event-stream; charset=utf-8"})
		s, err := a.Stream(context.Background(), nativeReq(streamBody, versionHeader()))
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, s)
	}
	chunks, err := run(start + delta + end)
	if err != nil || string(rawOf(chunks)) != start+delta+end {
		t.Fatalf("a well-formed stream: %v, %d chunks", err, len(chunks))
	}

	bad := `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":` + "\n\n"
	chunks, err = run(start + delta + bad + end)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.KindServer || !strings.Contains(err.Error(), "unreadable response") || !strings.Contains(err.Error(), "unexpected end of JSON input") {
		t.Errorf("an event that is not JSON: %v (%+v), want the decoder's error", err, pe)
	}
	if len(chunks) != 3 {
		t.Errorf("%d chunks before the unreadable event, want 3", len(chunks))
	}

	// index as a string of digits: encoding/json refuses it, the SDK reads it.
	lenient := strings.Replace(delta, `"index":0`, `"index":"0"`, 1)
	chunks, err = run(start + lenient + end)
	var text strings.Builder
	for _, c := range chunks {
		text.WriteString(c.Text)
	}
	if err != nil || text.String() != "Hello" {
		t.Errorf("a lenient event: %v, text %q", err, text.String())
	}
}
