package openaicompat_test

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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The relay tests put a minimal gateway in front of the adapter: it takes
// an official SDK client's request, hands it to the adapter as a
// provider.Native request (every client header included, the client's own
// key and organisation among them), and writes back Result.Native, the
// stream chunks' Raw, or Error.Reply. A tap on the adapter's transport
// keeps the bytes the fake sent, to compare with what the adapter relayed.

// tap records the bytes of every response body the adapter reads.
type tap struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies []*bytes.Buffer
}

type teeBody struct {
	rc  io.ReadCloser
	buf *bytes.Buffer
	mu  *sync.Mutex
}

func (b teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.buf.Write(p[:n])
	b.mu.Unlock()
	return n, err
}

func (b teeBody) Close() error { return b.rc.Close() }

func (t *tap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	buf := &bytes.Buffer{}
	t.mu.Lock()
	t.bodies = append(t.bodies, buf)
	t.mu.Unlock()
	resp.Body = teeBody{resp.Body, buf, &t.mu}
	return resp, nil
}

// last is the body of the latest response, as read so far.
func (t *tap) last() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.bodies[len(t.bodies)-1].Bytes())
}

// relayed is what the relay saw of one call.
type relayed struct {
	req    *provider.Request
	res    *provider.Result
	chunks []provider.Chunk
	err    error
}

type relay struct {
	a   *openaicompat.Adapter
	srv *httptest.Server
	// model is the router's choice ("" keeps the client's) and maxTokens
	// the request's decoded limit.
	model     string
	maxTokens int

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a call is recorded
	started int        // calls begun
	calls   []relayed
}

func newRelay(t *testing.T, a *openaicompat.Adapter) *relay {
	r := &relay{a: a}
	r.cond = sync.NewCond(&r.mu)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *relay) serve(w http.ResponseWriter, hr *http.Request) {
	body, _ := io.ReadAll(hr.Body)
	proto := provider.ProtoChat
	if strings.HasSuffix(hr.URL.Path, "/responses") {
		proto = provider.ProtoResponses
	}
	model := r.model
	if model == "" {
		model = gjson.GetBytes(body, "model").String()
	}
	stream := gjson.GetBytes(body, "stream").Bool()
	req := &provider.Request{Model: model, Prompt: "(relayed)", MaxTokens: r.maxTokens,
		Native: &provider.Native{Protocol: proto, Body: body, Header: hr.Header.Clone(), Stream: stream}}
	rec := relayed{req: req}
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.calls = append(r.calls, rec)
		r.cond.Broadcast()
		r.mu.Unlock()
	}()
	writeReply := func(rep *provider.NativeReply, status bool) {
		if status {
			for k, v := range rep.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(rep.Status)
		}
		_, _ = w.Write(rep.Body)
	}
	ctx := hr.Context()
	if !stream {
		rec.res, rec.err = r.a.Invoke(ctx, req)
		var pe *provider.Error
		switch {
		case rec.err == nil:
			writeReply(rec.res.Native, true)
		case errors.As(rec.err, &pe) && pe.Reply != nil:
			writeReply(pe.Reply, true)
		default:
			http.Error(w, rec.err.Error(), http.StatusBadGateway)
		}
		return
	}
	s, err := r.a.Stream(ctx, req)
	if err != nil {
		rec.err = err
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer s.Close()
	rc := http.NewResponseController(w)
	started := false
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			rec.err = err
			var pe *provider.Error
			if errors.As(err, &pe) && pe.Reply != nil {
				writeReply(pe.Reply, !started)
			} else if !started {
				http.Error(w, err.Error(), http.StatusBadGateway)
			}
			return
		}
		rec.chunks = append(rec.chunks, c)
		if c.Reply != nil {
			for k, v := range c.Reply.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(c.Reply.Status)
			started = true
		}
		_, _ = w.Write(c.Raw)
		_ = rc.Flush()
		if c.Final {
			rec.res = c.Result
		}
	}
}

// lastCall is what the relay saw of the latest call, once every call
// begun is over (a client may have read the end of a stream before the
// relay's handler returns).
func (r *relay) lastCall(t *testing.T) relayed {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.calls) < r.started {
		r.cond.Wait()
	}
	if len(r.calls) == 0 {
		t.Fatal("the relay saw no call")
	}
	return r.calls[len(r.calls)-1]
}

// client is an official SDK client of the relay, sending its own key,
// organisation and a beta header.
func (r *relay) client(t *testing.T) openai.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openai.NewClient(option.WithBaseURL(r.srv.URL+"/v1/"), option.WithAPIKey("sk-client-own-key-000000"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
		option.WithHeader("OpenAI-Organization", "org-client"), option.WithHeader("OpenAI-Project", "proj-client"),
		option.WithHeader("api-key", "client-azure-key"), option.WithHeader("Cookie", "session=client"),
		option.WithHeader("OpenAI-Beta", "responses=experimental"))
}

// nativeEnv is an openai-profile adapter on a tapped transport, the fake
// behind it and a relay in front.
func nativeEnv(t *testing.T, opts ...openaifake.Option) (*openaicompat.Adapter, *openaifake.Server, *tap, *relay) {
	t.Helper()
	srv := openaifake.New(append([]openaifake.Option{openaifake.WithAPIKey(testKey)}, opts...)...)
	t.Cleanup(srv.Close)
	tp := &tap{next: &http.Transport{}}
	a, err := openaicompat.New(provider.Settings{Name: "openai", Profile: "openai", BaseURL: srv.URL() + "/v1",
		Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: &http.Client{Transport: tp}})
	if err != nil {
		t.Fatal(err)
	}
	return a, srv, tp, newRelay(t, a)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// sameJSON compares two bodies as JSON values, without the fields named.
func sameJSON(t *testing.T, got, want []byte, without ...string) {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("upstream body: %v", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("client body: %v", err)
	}
	for _, k := range without {
		delete(g, k)
		delete(w, k)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("upstream body differs from the client's:\n got %s\nwant %s", got, want)
	}
}

// checkHeaders asserts what reached the fake: the client's beta header,
// the adapter's key, never the client's key, organisation or project.
func checkHeaders(t *testing.T, rec openaifake.Recorded) {
	t.Helper()
	if rec.Header.Get("OpenAI-Beta") != "responses=experimental" {
		t.Errorf("OpenAI-Beta = %q", rec.Header.Get("OpenAI-Beta"))
	}
	if rec.APIKey() != testKey {
		t.Errorf("the upstream key is %q, want the adapter's", rec.APIKey())
	}
	for _, h := range []string{"OpenAI-Organization", "OpenAI-Project", "Api-Key", "Cookie"} {
		if v := rec.Header.Get(h); v != "" {
			t.Errorf("%s reached the provider: %q", h, v)
		}
	}
	// An edited body goes as one in a slice would: its length announced,
	// not chunked.
	if cl := rec.Header.Get("Content-Length"); cl != strconv.Itoa(len(rec.Body)) {
		t.Errorf("Content-Length %q for a body of %d bytes", cl, len(rec.Body))
	}
}

// price is the catalog's price of u for the answering model, else the
// model asked for (the adapter's rule).
func price(t *testing.T, answered, asked string, u provider.Usage) provider.Money {
	t.Helper()
	c := catalog(t)
	if m, err := c.Cost("openai", answered, u, time.Now()); err == nil {
		return m
	}
	m, err := c.Cost("openai", asked, u, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSpeaksNativePerProfile(t *testing.T) {
	for _, p := range append(slices.Clone(openaicompat.Profiles), openaicompat.Generic) {
		a, err := openaicompat.New(provider.Settings{Name: "x", Profile: p.Name, BaseURL: "http://127.0.0.1:1/v1", Credentials: map[string]string{"api_key": "k"}})
		if err != nil {
			t.Fatal(err)
		}
		want := p.Name == "openai"
		if !a.SpeaksNative(provider.ProtoChat, "m") || a.SpeaksNative(provider.ProtoResponses, "m") != want || a.SpeaksNative(provider.ProtoMessages, "m") {
			t.Errorf("profile %q: chat %v responses %v messages %v", p.Name, a.SpeaksNative(provider.ProtoChat, "m"), a.SpeaksNative(provider.ProtoResponses, "m"), a.SpeaksNative(provider.ProtoMessages, "m"))
		}
		if p.Responses != want {
			t.Errorf("profile %q Responses = %v", p.Name, p.Responses)
		}
	}
}

// A Responses request to a server without the Responses API takes the
// translated route: Chat Completions, the decoded request.
func TestResponsesTranslatedWhereNotSpoken(t *testing.T) {
	a, f := newEnv(t, flavours[1])
	f.srv.Enqueue(openaifake.TextReply("translated"))
	req := &provider.Request{Prompt: "hi", Native: &provider.Native{Protocol: provider.ProtoResponses, Body: []byte(`{"model":"llama3.2","input":"hi"}`)}}
	res, err := invoke(t, a, req)
	if err != nil || res.Content != "translated" || res.Native != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if rec := f.srv.Requests()[0]; rec.Path != "/v1/chat/completions" || len(rec.Messages()) != 1 {
		t.Errorf("sent %s %s", rec.Path, rec.Body)
	}
}

func TestNativeChatUnary(t *testing.T) {
	_, srv, tp, rl := nativeEnv(t)
	rl.model, rl.maxTokens = "gpt-5-mini", 1000
	srv.Enqueue(openaifake.Reply{Text: "Relayed.", Usage: openaifake.Usage{Prompt: 2000, Completion: 300, Cached: 1536, Reasoning: 256}})
	params := openai.ChatCompletionNewParams{
		Model:               "gpt-5",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.DeveloperMessage("Be terse."), openai.UserMessage("hi")},
		MaxCompletionTokens: openai.Int(50000),
		PromptCacheKey:      openai.String("session-7"),
		SafetyIdentifier:    openai.String("user-hash"),
		ServiceTier:         openai.ChatCompletionNewParamsServiceTierPriority,
		Store:               openai.Bool(false),
		Verbosity:           openai.ChatCompletionNewParamsVerbosityLow,
		Metadata:            shared.Metadata{"run": "42"},
		ReasoningEffort:     shared.ReasoningEffortMinimal,
	}
	var raw *http.Response
	c := rl.client(t)
	cc, err := c.Chat.Completions.New(ctx(t), params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	call := rl.lastCall(t)
	rec := srv.Requests()[0]
	sameJSON(t, rec.Body, call.req.Native.Body, "model", "max_completion_tokens")
	if rec.Model() != "gpt-5-mini" || gjson.GetBytes(rec.Body, "max_completion_tokens").Int() != 1000 {
		t.Errorf("edits not applied: %s", rec.Body)
	}
	checkHeaders(t, rec)
	res := call.res
	if !bytes.Equal(res.Native.Body, tp.last()) || res.Native.Status != 200 {
		t.Errorf("Native body differs from the fake's bytes")
	}
	if !slices.Equal(res.Native.Edits, []string{"model=gpt-5-mini", "max_completion_tokens=1000"}) {
		t.Errorf("edits %v", res.Native.Edits)
	}
	if res.Native.Header.Get("x-request-id") == "" || res.Native.Header.Get("x-ratelimit-remaining-tokens") == "" || res.Native.Header.Get("Content-Length") != "" {
		t.Errorf("native headers %v", res.Native.Header)
	}
	if cc.Choices[0].Message.Content != "Relayed." || cc.ServiceTier != "priority" || raw.Header.Get("x-request-id") != res.RequestID {
		t.Errorf("the SDK read %s", cc.RawJSON())
	}
	want := provider.Usage{InputTokens: 2000, CacheReadTokens: 1536, OutputTokens: 300, ReasoningTokens: 256, ServiceTier: "priority"}
	if res.Usage != want || res.Content != "Relayed." || res.Model != "gpt-5-mini-2025-08-07" {
		t.Errorf("result %+v usage %+v", res, res.Usage)
	}
	if res.Cost != price(t, res.Model, "gpt-5-mini", want) || res.Cost == 0 || res.Unpriced {
		t.Errorf("cost %s", res.Cost)
	}
}

func TestNativeChatStream(t *testing.T) {
	for _, clientUsage := range []bool{false, true} {
		t.Run(map[bool]string{false: "usage added", true: "usage asked"}[clientUsage], func(t *testing.T) {
			_, srv, tp, rl := nativeEnv(t)
			srv.Enqueue(openaifake.Reply{Text: "Two words", ToolCalls: []openaifake.ToolCall{{ID: "call_1", Name: "shell", Arguments: `{"command":"ls -la /tmp"}`}},
				Usage: openaifake.Usage{Prompt: 900, Completion: 60, Cached: 512, Reasoning: 20}})
			params := openai.ChatCompletionNewParams{Model: "gpt-5-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				PromptCacheKey: openai.String("k")}
			if clientUsage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			c := rl.client(t)
			s := c.Chat.Completions.NewStreaming(ctx(t), params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			call := rl.lastCall(t)
			if call.err != nil {
				t.Fatal(call.err)
			}
			rec := srv.Requests()[0]
			var raw []byte
			for _, c := range call.chunks {
				raw = append(raw, c.Raw...)
			}
			if !bytes.Equal(raw, tp.last()) || !bytes.HasSuffix(raw, []byte("data: [DONE]\n\n")) {
				t.Errorf("chunks' Raw differ from the fake's bytes:\n%s\n---\n%s", raw, tp.last())
			}
			first, last := call.chunks[0], call.chunks[len(call.chunks)-1]
			wantEdits := []string{"stream_options.include_usage=true"}
			if clientUsage {
				wantEdits = nil
				sameJSON(t, rec.Body, call.req.Native.Body)
			} else {
				sameJSON(t, rec.Body, call.req.Native.Body, "stream_options")
				if gjson.GetBytes(call.req.Native.Body, "stream_options").Exists() {
					t.Errorf("the client's bytes were changed in place: %s", call.req.Native.Body)
				}
			}
			if first.Reply == nil || first.Reply.Status != 200 || !slices.Equal(first.Reply.Edits, wantEdits) || first.Model != "gpt-5-mini-2025-08-07" {
				t.Errorf("first chunk %+v reply %+v", first, first.Reply)
			}
			if !rec.IncludeUsage() {
				t.Error("the usage chunk was not asked for")
			}
			var text, args strings.Builder
			for _, c := range call.chunks {
				if c.Raw == nil && !c.Final {
					t.Errorf("a chunk without Raw: %+v", c)
				}
				text.WriteString(c.Text)
				if c.ToolCall != nil {
					args.WriteString(c.ToolCall.Arguments)
				}
			}
			res := last.Result
			if !last.Final || res == nil || text.String() != "Two words" || args.String() != `{"command":"ls -la /tmp"}` {
				t.Fatalf("final %+v text %q args %q", last, text.String(), args.String())
			}
			want := provider.Usage{InputTokens: 900, CacheReadTokens: 512, OutputTokens: 60, ReasoningTokens: 20}
			if res.Usage != want || res.ToolCalls[0].ID != "call_1" || res.Cost != price(t, res.Model, "gpt-5-mini", want) {
				t.Errorf("result %+v", res)
			}
			if acc.Choices[0].Message.Content != "Two words" || acc.Usage.PromptTokens != 900 {
				t.Errorf("the SDK accumulated %+v", acc.ChatCompletion)
			}
		})
	}
}

// responsesParams is a Codex-like turn with what the contract does not
// model: a hosted web search tool, include, store false, a prompt cache
// key, a service tier, verbosity, metadata and client_metadata.
func responsesParams(input responses.ResponseInputParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        "gpt-5-mini",
		Instructions: openai.String("You are a coding agent."),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Store:        openai.Bool(false),
		Include:      []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		Reasoning:    shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto},
		Text:         responses.ResponseTextConfigParam{Verbosity: responses.ResponseTextConfigVerbosityLow},
		Tools: []responses.ToolUnionParam{
			{OfFunction: &responses.FunctionToolParam{Name: "shell", Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
			{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}},
		},
		PromptCacheKey:    openai.String("session-9"),
		ServiceTier:       responses.ResponseNewParamsServiceTierPriority,
		MaxOutputTokens:   openai.Int(40000),
		ParallelToolCalls: openai.Bool(false),
		Metadata:          shared.Metadata{"run": "9"},
	}
}

func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

func TestNativeResponsesUnary(t *testing.T) {
	_, srv, tp, rl := nativeEnv(t)
	rl.maxTokens = 2000
	srv.EnqueueResponses(openaifake.Reply{
		Reasoning: "Search, then list.", WebSearches: []string{"go 1.26 release", "go vet"},
		Text: "Listing now.", ToolCalls: []openaifake.ToolCall{{ID: "call_x", Name: "shell", Arguments: `{"command":"ls"}`}},
		Usage: openaifake.Usage{Prompt: 5000, Completion: 800, Cached: 4096, Reasoning: 512},
	})
	c := rl.client(t)
	resp, err := c.Responses.New(ctx(t), responsesParams(responses.ResponseInputParam{userItem("list files")}),
		option.WithJSONSet("client_metadata", map[string]string{"session": "s1"}))
	if err != nil {
		t.Fatal(err)
	}
	call := rl.lastCall(t)
	rec := srv.Requests()[0]
	if rec.Path != "/v1/responses" {
		t.Fatalf("sent to %s", rec.Path)
	}
	sameJSON(t, rec.Body, call.req.Native.Body, "max_output_tokens")
	if gjson.GetBytes(rec.Body, "max_output_tokens").Int() != 2000 || !slices.Equal(call.res.Native.Edits, []string{"max_output_tokens=2000"}) {
		t.Errorf("limit %s edits %v", gjson.GetBytes(rec.Body, "max_output_tokens"), call.res.Native.Edits)
	}
	checkHeaders(t, rec)
	res := call.res
	if !bytes.Equal(res.Native.Body, tp.last()) {
		t.Error("Native body differs from the fake's bytes")
	}
	if resp.OutputText() != "Listing now." || resp.ServiceTier != "priority" {
		t.Errorf("the SDK read %s", resp.RawJSON())
	}
	if res.Content != "Listing now." || len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "call_x" || res.ToolCalls[0].Name != "shell" ||
		string(res.ToolCalls[0].Arguments) != `{"command":"ls"}` || res.StopReason != provider.StopToolUse {
		t.Errorf("result %+v", res)
	}
	if len(res.Parts) != 3 || res.Parts[0].Type != provider.PartReasoning || res.Parts[0].Text != "Search, then list." ||
		!strings.Contains(string(res.Parts[0].Meta[openaicompat.MetaResponsesItem]), `"encrypted_content":"gAAAAAB`) ||
		res.Parts[2].ToolCall != &res.ToolCalls[0] {
		t.Errorf("parts %+v", res.Parts)
	}
	want := provider.Usage{InputTokens: 5000, CacheReadTokens: 4096, OutputTokens: 800, ReasoningTokens: 512, WebSearchRequests: 2, ServiceTier: "priority"}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if res.Cost != price(t, res.Model, "gpt-5-mini", want) || res.Cost == 0 {
		t.Errorf("cost %s", res.Cost)
	}
	// Cached tokens are billed below the input rate.
	uncached := want
	uncached.CacheReadTokens = 0
	if price(t, res.Model, "gpt-5-mini", uncached) <= res.Cost {
		t.Error("the cached tokens were not priced as cached")
	}
}

func TestNativeResponsesStream(t *testing.T) {
	_, srv, tp, rl := nativeEnv(t)
	srv.EnqueueResponses(openaifake.Reply{
		Reasoning: "Think it through.", WebSearches: []string{"q"}, Text: "Done soon.",
		ToolCalls: []openaifake.ToolCall{{ID: "call_a", Name: "shell", Arguments: `{"command":"go test ./..."}`}},
		Usage:     openaifake.Usage{Prompt: 700, Completion: 90, Cached: 256, Reasoning: 40},
	})
	c := rl.client(t)
	s := c.Responses.NewStreaming(ctx(t), responsesParams(responses.ResponseInputParam{userItem("run the tests")}))
	var sdkText strings.Builder
	var completed bool
	for s.Next() {
		ev := s.Current()
		if ev.Type == "response.output_text.delta" {
			sdkText.WriteString(ev.Delta)
		}
		completed = completed || ev.Type == "response.completed"
	}
	if s.Err() != nil || !completed || sdkText.String() != "Done soon." {
		t.Fatalf("the SDK read %q completed %v: %v", sdkText.String(), completed, s.Err())
	}
	call := rl.lastCall(t)
	if call.err != nil {
		t.Fatal(call.err)
	}
	var raw []byte
	var text, reasoning strings.Builder
	var calls []provider.ToolCallDelta
	for i, c := range call.chunks {
		if c.Raw == nil || !bytes.HasPrefix(c.Raw, []byte("event: ")) {
			t.Errorf("chunk %d Raw %q", i, c.Raw)
		}
		raw = append(raw, c.Raw...)
		text.WriteString(c.Text)
		reasoning.WriteString(c.Reasoning)
		if c.ToolCall != nil {
			calls = append(calls, *c.ToolCall)
		}
	}
	if !bytes.Equal(raw, tp.last()) {
		t.Error("chunks' Raw differ from the fake's bytes")
	}
	first, last := call.chunks[0], call.chunks[len(call.chunks)-1]
	if first.Reply == nil || first.Reply.Status != 200 || first.Reply.Header.Get("x-request-id") == "" || first.Model != "gpt-5-mini-2025-08-07" {
		t.Errorf("first chunk %+v", first)
	}
	if !bytes.HasPrefix(last.Raw, []byte("event: response.completed\n")) || !last.Final {
		t.Errorf("last chunk %q", last.Raw)
	}
	var args strings.Builder
	for _, d := range calls {
		args.WriteString(d.Arguments)
	}
	if text.String() != "Done soon." || reasoning.String() != "Think it through." || calls[0].ID != "call_a" || calls[0].Name != "shell" || args.String() != `{"command":"go test ./..."}` {
		t.Errorf("text %q reasoning %q calls %+v", text.String(), reasoning.String(), calls)
	}
	res := last.Result
	want := provider.Usage{InputTokens: 700, CacheReadTokens: 256, OutputTokens: 90, ReasoningTokens: 40, WebSearchRequests: 1, ServiceTier: "priority"}
	if res.Usage != want || res.Cost != price(t, res.Model, "gpt-5-mini", want) || res.Content != "Done soon." || string(res.ToolCalls[0].Arguments) != args.String() {
		t.Errorf("result %+v usage %+v", res, res.Usage)
	}
	if rec := srv.Requests()[0]; !bytes.Equal(rec.Body, call.req.Native.Body) {
		t.Errorf("a streamed Responses body within its limit must go as it came:\n%s\n%s", rec.Body, call.req.Native.Body)
	}
}

// codexTurn sends input as a stateless client does: items without ids,
// reasoning items carried by their encrypted_content, streamed.
func codexTurn(t *testing.T, c openai.Client, input []map[string]any) (*responses.Response, error) {
	t.Helper()
	s := c.Responses.NewStreaming(ctx(t), responsesParams(nil), option.WithJSONSet("input", input))
	var done *responses.Response
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.completed" {
			r := ev.AsResponseCompleted().Response
			done = &r
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if done == nil {
		t.Fatal("no response.completed")
	}
	return done, nil
}

// A three-turn tool loop through the relay succeeds with the reasoning
// items carried by the client, and fails, with the provider's own 400
// relayed, when they are removed.
func TestNativeResponsesToolLoop(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(map[bool]string{true: "carried", false: "removed"}[keep], func(t *testing.T) {
			_, srv, tp, rl := nativeEnv(t)
			srv.EnqueueResponses(
				openaifake.ReasoningToolCallReply("Look at the tree.", "shell", `{"command":"ls"}`),
				openaifake.ReasoningToolCallReply("Read the module file.", "shell", `{"command":"cat go.mod"}`),
				openaifake.Reply{Reasoning: "Answer.", Text: "It is example.com/m."},
			)
			c := rl.client(t)
			input := []map[string]any{{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "Which module is this?"}}}}
			for turn := 1; turn <= 3; turn++ {
				resp, err := codexTurn(t, c, input)
				if !keep && turn == 2 {
					var apiErr *openai.Error
					if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "without its required 'reasoning' item") {
						t.Fatalf("turn 2 without reasoning items: %v", err)
					}
					call := rl.lastCall(t)
					var pe *provider.Error
					if !errors.As(call.err, &pe) || pe.Kind != provider.KindBadRequest || pe.Reply == nil || pe.Reply.Status != 400 || !bytes.Equal(pe.Reply.Body, tp.last()) {
						t.Errorf("relayed error %v", call.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				if turn == 3 {
					if resp.OutputText() != "It is example.com/m." {
						t.Errorf("final answer %q", resp.OutputText())
					}
					break
				}
				for _, it := range resp.Output {
					switch it.Type {
					case "reasoning":
						if keep {
							r := it.AsReasoning()
							input = append(input, map[string]any{"type": "reasoning", "summary": json.RawMessage(gjson.Get(it.RawJSON(), "summary").Raw), "encrypted_content": r.EncryptedContent})
						}
					case "function_call":
						fc := it.AsFunctionCall()
						input = append(input,
							map[string]any{"type": "function_call", "name": fc.Name, "arguments": fc.Arguments, "call_id": fc.CallID},
							map[string]any{"type": "function_call_output", "call_id": fc.CallID, "output": "ran " + fc.Arguments})
					}
				}
			}
			if !keep {
				t.Fatal("the loop without reasoning items succeeded")
			}
			rl.lastCall(t)
			for i, rec := range srv.Requests() {
				if !bytes.Equal(rec.Body, rl.calls[i].req.Native.Body) {
					t.Errorf("turn %d went upstream changed", i+1)
				}
			}
		})
	}
}

func TestNativeErrorsByteForByte(t *testing.T) {
	tests := []struct {
		name   string
		proto  provider.Protocol
		stream bool
		reply  openaifake.Reply
		kind   provider.Kind
		retry  time.Duration
	}{
		{"chat rate limit", provider.ProtoChat, false, openaifake.RateLimited(2400 * time.Millisecond).WithRetryAfter(3 * time.Second), provider.KindRateLimit, 3 * time.Second},
		{"responses rate limit", provider.ProtoResponses, false, openaifake.RateLimited(2400 * time.Millisecond).WithRetryAfter(3 * time.Second), provider.KindRateLimit, 3 * time.Second},
		{"responses rate limit, streamed", provider.ProtoResponses, true, openaifake.RateLimitedRequests(5 * time.Second), provider.KindRateLimit, 5 * time.Second},
		{"chat overloaded, streamed", provider.ProtoChat, true, openaifake.Overloaded(), provider.KindOverloaded, 0},
		{"responses overflow", provider.ProtoResponses, false, openaifake.ResponsesContextLengthExceeded(), provider.KindContextWindowExceeded, 0},
		{"html from a proxy", provider.ProtoResponses, false, openaifake.BadGateway(), provider.KindServer, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, srv, tp, _ := nativeEnv(t)
			body := `{"model":"gpt-5-mini","messages":[{"role":"user","content":"hi"}]`
			path := "chat/completions"
			if tt.proto == provider.ProtoResponses {
				body, path = `{"model":"gpt-5-mini","input":"hi"`, "responses"
				srv.EnqueueResponses(tt.reply)
			} else {
				srv.Enqueue(tt.reply)
			}
			if tt.stream {
				body += `,"stream":true`
			}
			body += "}"
			req := &provider.Request{Model: "gpt-5-mini", Prompt: "hi", Native: &provider.Native{Protocol: tt.proto, Body: []byte(body), Stream: tt.stream}}
			var err error
			if tt.stream {
				s, serr := a.Stream(ctx(t), req)
				if serr != nil {
					t.Fatal(serr)
				}
				_, err = s.Recv()
				s.Close()
			} else {
				_, err = a.Invoke(ctx(t), req)
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.RetryAfter != tt.retry || pe.Reply == nil {
				t.Fatalf("error %v (kind %v retry %v)", err, pe.Kind, pe.RetryAfter)
			}
			rep := pe.Reply
			if rep.Status != tt.reply.Status || !bytes.Equal(rep.Body, tp.last()) || len(rep.Body) == 0 {
				t.Errorf("reply %d %q, fake sent %q", rep.Status, rep.Body, tp.last())
			}
			if srv.Requests()[0].Path != "/v1/"+path {
				t.Errorf("sent to %s", srv.Requests()[0].Path)
			}
			if tt.reply.RetryAfter > 0 && (rep.Header.Get("retry-after") != "3" || rep.Header.Get("retry-after-ms") != "3000") {
				t.Errorf("retry headers %v", rep.Header)
			}
			if tt.kind == provider.KindRateLimit && rep.Header.Get("x-ratelimit-remaining-"+map[bool]string{true: "requests", false: "tokens"}[tt.stream]) != "0" {
				t.Errorf("rate-limit headers %v", rep.Header)
			}
			if pe.Usage != nil {
				t.Errorf("an error status billed %+v", pe.Usage)
			}
		})
	}
}

// An unknown top-level field goes upstream unchanged; the Responses
// API's refusal of it comes back as it was sent.
func TestNativeUnknownFieldReachesTheProvider(t *testing.T) {
	_, srv, tp, rl := nativeEnv(t)
	c := rl.client(t)
	_, err := c.Responses.New(ctx(t), responsesParams(responses.ResponseInputParam{userItem("x")}), option.WithJSONSet("x_future_field", map[string]any{"a": []int{1, 2}}))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unknown_parameter" || apiErr.Param != "x_future_field" {
		t.Fatalf("%v", err)
	}
	if got := gjson.GetBytes(srv.Requests()[0].Body, "x_future_field").Raw; got != `{"a":[1,2]}` {
		t.Errorf("upstream x_future_field = %s", got)
	}
	var pe *provider.Error
	if call := rl.lastCall(t); !errors.As(call.err, &pe) || pe.Kind != provider.KindBadRequest || !bytes.Equal(pe.Reply.Body, tp.last()) {
		t.Errorf("relayed %v", call.err)
	}
}

// An error the provider reports after its 200 ends the stream with the
// event as it came in Reply (status 200), classified, billed for what
// was received.
func TestNativeMidStreamErrors(t *testing.T) {
	tests := []struct {
		name   string
		proto  provider.Protocol
		reply  openaifake.Reply
		kind   provider.Kind
		prefix string
	}{
		{"responses error event", provider.ProtoResponses, openaifake.Reply{Text: "one two three four", MidStreamError: &openaifake.StreamError{Message: "Rate limit reached", Code: "rate_limit_exceeded", AfterChunks: 7}}, provider.KindRateLimit, "event: error\n"},
		{"responses failed", provider.ProtoResponses, openaifake.Reply{Text: "one two three four", MidStreamError: &openaifake.StreamError{Message: "The model failed", AfterChunks: 7, Failed: true}}, provider.KindServer, "event: response.failed\n"},
		{"responses invalid prompt", provider.ProtoResponses, openaifake.Reply{Text: "one two three four", MidStreamError: &openaifake.StreamError{Message: "Invalid prompt", Code: "invalid_prompt", AfterChunks: 7, Failed: true}}, provider.KindBadRequest, "event: response.failed\n"},
		{"chat error chunk", provider.ProtoChat, openaifake.ServerErrorMidStream(3), provider.KindServer, `data: {"error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, srv, tp, _ := nativeEnv(t)
			body := `{"model":"gpt-5-mini","stream":true,"input":"hello"}`
			if tt.proto == provider.ProtoChat {
				body = `{"model":"gpt-5-mini","stream":true,"messages":[{"role":"user","content":"hello there friend"}]}`
				srv.Enqueue(tt.reply)
			} else {
				srv.EnqueueResponses(tt.reply)
			}
			s, err := a.Stream(ctx(t), &provider.Request{Model: "gpt-5-mini", Prompt: "hello", Native: &provider.Native{Protocol: tt.proto, Body: []byte(body), Stream: true}})
			if err != nil {
				t.Fatal(err)
			}
			var raw []byte
			var recvErr error
			for {
				c, err := s.Recv()
				if err != nil {
					recvErr = err
					break
				}
				raw = append(raw, c.Raw...)
			}
			s.Close()
			var pe *provider.Error
			if !errors.As(recvErr, &pe) || pe.Kind != tt.kind || pe.Reply == nil || pe.Reply.Status != 200 || !bytes.HasPrefix(pe.Reply.Body, []byte(tt.prefix)) {
				t.Fatalf("error %v reply %+v", recvErr, pe.Reply)
			}
			if !bytes.Equal(append(raw, pe.Reply.Body...), tp.last()) {
				t.Errorf("chunks + error event differ from the fake's bytes")
			}
			if pe.Usage == nil || pe.Usage.InputTokens == 0 {
				t.Errorf("a failure after output billed %+v", pe.Usage)
			}
		})
	}
}

// A stream cut before its end is a network error billed as today.
func TestNativeStreamCut(t *testing.T) {
	for _, proto := range []provider.Protocol{provider.ProtoChat, provider.ProtoResponses} {
		t.Run(string(proto), func(t *testing.T) {
			a, srv, _, _ := nativeEnv(t)
			body := `{"model":"gpt-5-mini","stream":true,"input":"hello"}`
			if proto == provider.ProtoChat {
				body = `{"model":"gpt-5-mini","stream":true,"messages":[{"role":"user","content":"hello"}]}`
				srv.Enqueue(openaifake.Reply{Text: "a b c d e f", CutAfterChunks: 4})
			} else {
				srv.EnqueueResponses(openaifake.Reply{Text: "a b c d e f", CutAfterChunks: 8})
			}
			s, err := a.Stream(ctx(t), &provider.Request{Model: "gpt-5-mini", Prompt: "hello", MaxTokens: 500, Native: &provider.Native{Protocol: proto, Body: []byte(body), Stream: true}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = provider.Collect(s)
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.KindNetwork || pe.Reply != nil || pe.Usage == nil || !pe.Usage.Estimated || pe.Usage.OutputTokens != 500 {
				t.Errorf("cut stream: %v usage %+v", err, pe.Usage)
			}
		})
	}
}

// Invoke refuses a body that asks for a stream, and Stream one that does
// not, before anything is sent.
func TestNativeStreamMismatch(t *testing.T) {
	a, srv, _, _ := nativeEnv(t)
	req := &provider.Request{Model: "gpt-5-mini", Prompt: "x", Native: &provider.Native{Protocol: provider.ProtoResponses, Body: []byte(`{"model":"gpt-5-mini","input":"x","stream":true}`), Stream: true}}
	if _, err := a.Invoke(ctx(t), req); provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "use") && !strings.Contains(err.Error(), "Stream") {
		t.Errorf("Invoke of a stream: %v", err)
	}
	req.Native.Stream = false
	if _, err := a.Stream(ctx(t), req); provider.KindOf(err) != provider.KindBadRequest {
		t.Errorf("Stream of a unary body: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// An output limit above the model's own is lowered to the catalog's
// max_output_tokens, the limit the estimate priced.
func TestNativeLimitClampedToTheModel(t *testing.T) {
	_, srv, _, rl := nativeEnv(t)
	rl.maxTokens = 900_000
	c := rl.client(t)
	p := responsesParams(responses.ResponseInputParam{userItem("x")})
	p.MaxOutputTokens = openai.Int(1_000_000)
	if _, err := c.Responses.New(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	l, err := catalog(t).Limits("openai", "gpt-5-mini")
	if err != nil || l.MaxOutputTokens <= 0 {
		t.Fatalf("catalog limits %+v %v", l, err)
	}
	got := gjson.GetBytes(srv.Requests()[0].Body, "max_output_tokens").Int()
	if got != l.MaxOutputTokens || !slices.Contains(rl.lastCall(t).res.Native.Edits, "max_output_tokens="+strconv.FormatInt(l.MaxOutputTokens, 10)) {
		t.Errorf("max_output_tokens sent %d, want %d", got, l.MaxOutputTokens)
	}
}

// What a Responses answer holds beyond text and function calls: a custom
// tool's call, an incomplete answer, a refusal.
func TestNativeResponsesResultShapes(t *testing.T) {
	a, srv, _, _ := nativeEnv(t)
	custom := `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-mini-2025-08-07","output":[` +
		`{"id":"ctc_1","type":"custom_tool_call","status":"completed","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}],` +
		`"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}}`
	refusal := `{"id":"resp_2","object":"response","status":"completed","model":"gpt-5-mini","output":[` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]}],` +
		`"service_tier":"flex","usage":{"input_tokens":10,"output_tokens":5}}`
	srv.EnqueueResponses(openaifake.Reply{Status: 200, RawBody: custom}, openaifake.Reply{Status: 200, RawBody: refusal}, openaifake.Reply{Text: "cut by the limit here", FinishReason: "length"})
	req := func(stream bool) *provider.Request {
		body := `{"model":"gpt-5-mini","input":"x"}`
		if stream {
			body = `{"model":"gpt-5-mini","input":"x","stream":true}`
		}
		return &provider.Request{Model: "gpt-5-mini", Prompt: "x", Native: &provider.Native{Protocol: provider.ProtoResponses, Body: []byte(body), Stream: stream}}
	}
	res, err := a.Invoke(ctx(t), req(false))
	if err != nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "call_p" || res.ToolCalls[0].Name != "apply_patch" ||
		string(res.ToolCalls[0].Arguments) != `{"input":"*** Begin Patch\n*** End Patch"}` || res.StopReason != provider.StopToolUse {
		t.Errorf("custom tool call: %+v %v", res, err)
	}
	res, err = a.Invoke(ctx(t), req(false))
	if err != nil || res.StopReason != provider.StopRefusal || res.Content != "" || res.Usage.ServiceTier != "flex" {
		t.Errorf("refusal: %+v %v", res, err)
	}
	s, err := a.Stream(ctx(t), req(true))
	if err != nil {
		t.Fatal(err)
	}
	var last provider.Chunk
	for c, err := range provider.Chunks(s) {
		if err != nil {
			t.Fatal(err)
		}
		last = c
	}
	if !bytes.HasPrefix(last.Raw, []byte("event: response.incomplete\n")) || last.Result == nil || last.Result.StopReason != provider.StopMaxTokens || last.Result.RawStopReason != "max_output_tokens" {
		t.Errorf("incomplete: %q %+v", last.Raw, last.Result)
	}
}
