package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// NewEnv builds a fresh adapter and fake for one check; the fake must be
// closed by t.Cleanup.
type NewEnv func(t *testing.T) *Env

var weatherTool = provider.ToolDef{
	Name:        "get_weather",
	Description: "Current weather for a city",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

// Run runs the conformance suite.
func Run(t *testing.T, newEnv NewEnv) {
	checks := []struct {
		name string
		fn   func(*testing.T, *Env)
	}{
		{"PlainCompletion", plainCompletion},
		{"SystemPromptDelivered", systemPrompt},
		{"SamplingSent", samplingSent},
		{"ReasoningSent", reasoningSent},
		{"StructuredOutput", structuredOutput},
		{"ImageInput", imageInput},
		{"ToolCallReturned", toolCall},
		{"ToolResultRoundTrip", toolResultRoundTrip},
		{"StreamText", streamText},
		{"StreamReasoning", streamReasoning},
		{"StreamToolCalls", streamToolCalls},
		{"StreamEarlyCloseReleasesConnection", streamEarlyClose},
		{"StreamContextCancel", streamContextCancel},
		{"StreamCutBeforeEndBillsReceived", streamCutBeforeEnd},
		{"ErrorKinds", errorKinds},
		{"StreamErrorBeforeFirstChunk", streamErrorBeforeFirstChunk},
		{"MidStreamError", midStreamError},
		{"TruncatedStream", truncatedStream},
		{"ResponseCap", responseCap},
		{"Health", health},
		{"RateLimitStatus", rateLimitStatus},
		{"EstimateBoundsBilledCost", estimateBound},
		{"EstimateBoundsAdversarialPrompts", estimateBoundAdversarial},
		{"EstimateBoundsImages", estimateBoundImages},
		{"EstimateBoundsLargeImage", estimateBoundLargeImage},
		{"InvalidRequestNeverSent", invalidRequest},
		{"UnlistedAnswerModelPricedAsRequested", unlistedAnswerModel},
		{"UnpricedAnswerIsFlagged", unpricedAnswer},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newEnv(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

func checkUsage(t *testing.T, what string, got, want provider.Usage) {
	t.Helper()
	if got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens || got.CacheReadTokens != want.CacheReadTokens || got.CacheWriteTokens != want.CacheWriteTokens {
		t.Errorf("%s usage = %+v, want %+v", what, got, want)
	}
	if got.Estimated {
		t.Errorf("%s usage marked estimated although the provider reported it", what)
	}
}

func checkCost(t *testing.T, e *Env, res *provider.Result) {
	t.Helper()
	if e.Pricer == nil {
		return
	}
	want, err := e.Pricer.Cost(e.Namespace, res.Model, res.Usage, time.Time{})
	if err != nil {
		t.Errorf("result model %q cannot be priced: %v", res.Model, err)
		return
	}
	if res.Cost != want || (res.Usage.TotalTokens() > 0 && want == 0) {
		t.Errorf("cost = %s, want %s for %+v", res.Cost, want, res.Usage)
	}
}

func plainCompletion(t *testing.T, e *Env) {
	u := provider.Usage{InputTokens: 25, OutputTokens: 7}
	e.Fake.Script(Reply{Text: "Hello! How can I help?", Usage: u})
	res, err := e.Adapter.Invoke(ctx(t), &provider.Request{Prompt: "Say hello", MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Hello! How can I help?" || len(res.ToolCalls) != 0 {
		t.Errorf("content = %q, tool calls %v", res.Content, res.ToolCalls)
	}
	if res.StopReason != provider.StopEndTurn {
		t.Errorf("stop reason = %q (raw %q), want end_turn", res.StopReason, res.RawStopReason)
	}
	if res.Provider != e.Adapter.Name() || res.Model == "" {
		t.Errorf("provider %q model %q", res.Provider, res.Model)
	}
	checkUsage(t, "invoke", res.Usage, u)
	checkCost(t, e, res)
	got := e.Fake.Last()
	if got.Model != e.Model || got.MaxTokens != 100 || got.Stream {
		t.Errorf("request sent model %q max_tokens %d stream %v; want %q 100 false", got.Model, got.MaxTokens, got.Stream, e.Model)
	}
}

func systemPrompt(t *testing.T, e *Env) {
	e.Fake.Script(Reply{Text: "ok", Usage: provider.Usage{InputTokens: 10, OutputTokens: 1}})
	if _, err := e.Adapter.Invoke(ctx(t), &provider.Request{System: "You are terse.", Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := e.Fake.Last().System; got != "You are terse." {
		t.Errorf("system prompt delivered as %q", got)
	}
}

func toolCall(t *testing.T, e *Env) {
	call := provider.ToolCall{ID: "call_001", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	e.Fake.Script(Reply{ToolCalls: []provider.ToolCall{call}, Usage: provider.Usage{InputTokens: 80, OutputTokens: 20}})
	res, err := e.Adapter.Invoke(ctx(t), &provider.Request{Prompt: "Weather in Paris?", Tools: []provider.ToolDef{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	if tools := e.Fake.Last().Tools; len(tools) != 1 || tools[0] != "get_weather" {
		t.Errorf("tools delivered = %v", tools)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "get_weather" || res.ToolCalls[0].ID == "" || !sameJSON(res.ToolCalls[0].Arguments, call.Arguments) {
		t.Fatalf("tool calls = %+v", res.ToolCalls)
	}
	if res.StopReason != provider.StopToolUse {
		t.Errorf("stop reason = %q, want tool_use", res.StopReason)
	}
	if m := res.Message(); m.Role != provider.RoleAssistant || len(m.Parts) == 0 {
		t.Errorf("assistant message = %+v", m)
	}
}

func toolResultRoundTrip(t *testing.T, e *Env) {
	call := provider.ToolCall{ID: "call_001", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	e.Fake.Script(Reply{ToolCalls: []provider.ToolCall{call}, Usage: provider.Usage{InputTokens: 80, OutputTokens: 20}})
	req := &provider.Request{Prompt: "Weather in Paris?", Tools: []provider.ToolDef{weatherTool}}
	first, err := e.Adapter.Invoke(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.ToolCalls) != 1 {
		t.Fatalf("no tool call to answer: %+v", first.ToolCalls)
	}
	id := first.ToolCalls[0].ID
	next := &provider.Request{Tools: req.Tools, Messages: []provider.Message{
		provider.UserText(req.Prompt),
		first.Message(),
		provider.ToolResults(provider.ToolResult{CallID: id, Name: "get_weather", Content: "18C and sunny"}),
	}}
	e.Fake.Script(Reply{Text: "It is 18C and sunny in Paris.", Usage: provider.Usage{InputTokens: 120, OutputTokens: 12}})
	res, err := e.Adapter.Invoke(ctx(t), next)
	if err != nil {
		t.Fatal(err)
	}
	got := e.Fake.Last()
	if len(got.ToolCalls) != 1 || got.ToolCalls[0].ID != id || !sameJSON(got.ToolCalls[0].Arguments, call.Arguments) {
		t.Errorf("assistant tool call sent back as %+v", got.ToolCalls)
	}
	if len(got.ToolResults) != 1 || got.ToolResults[0].CallID != id || !strings.Contains(got.ToolResults[0].Content, "18C and sunny") {
		t.Errorf("tool result sent as %+v", got.ToolResults)
	}
	if res.Content != "It is 18C and sunny in Paris." {
		t.Errorf("final answer %q", res.Content)
	}
}

// drain reads a stream to its end and returns text, tool calls assembled
// from deltas, the final result and the error.
func drain(s provider.Stream) (string, map[int]*provider.ToolCall, *provider.Result, int, error) {
	var text strings.Builder
	calls := map[int]*provider.ToolCall{}
	args := map[int]*strings.Builder{}
	chunks := 0
	for c, err := range provider.Chunks(s) {
		if err != nil {
			return text.String(), calls, nil, chunks, err
		}
		chunks++
		text.WriteString(c.Text)
		if d := c.ToolCall; d != nil {
			tc := calls[d.Index]
			if tc == nil {
				tc = &provider.ToolCall{}
				calls[d.Index] = tc
				args[d.Index] = &strings.Builder{}
			}
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Name != "" {
				tc.Name = d.Name
			}
			args[d.Index].WriteString(d.Arguments)
			tc.Arguments = json.RawMessage(args[d.Index].String())
		}
		if c.Final {
			return text.String(), calls, c.Result, chunks, nil
		}
	}
	return text.String(), calls, nil, chunks, errors.New("stream ended without a final chunk and without an error")
}

func streamText(t *testing.T, e *Env) {
	u := provider.Usage{InputTokens: 30, OutputTokens: 9}
	want := "The quick brown fox jumps over the lazy dog."
	e.Fake.Script(Reply{Text: want, Usage: u})
	s, err := e.Adapter.Stream(ctx(t), &provider.Request{Prompt: "pangram please"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	text, _, res, chunks, err := drain(s)
	if err != nil {
		t.Fatal(err)
	}
	text, chunks = first.Text+text, chunks+1
	// A caller that starts its own stream on the first chunk names the
	// model answering, and the input count when the provider already
	// said it.
	if first.Model == "" || first.Model != res.Model {
		t.Errorf("the first chunk names the model %q, the answer %q: the first chunk must name the model answering", first.Model, res.Model)
	}
	if first.Usage != nil && (first.Usage.InputTokens != res.Usage.InputTokens || first.Usage.CacheReadTokens != res.Usage.CacheReadTokens) {
		t.Errorf("the first chunk reports usage %+v; the answer %+v", *first.Usage, res.Usage)
	}
	if text != want || res.Content != want {
		t.Errorf("streamed %q, final %q; want %q", text, res.Content, want)
	}
	if chunks < 3 {
		t.Errorf("only %d chunks: the fake must split text so streaming is exercised", chunks)
	}
	if !e.Fake.Last().Stream {
		t.Error("the request was not sent as a stream")
	}
	checkUsage(t, "stream", res.Usage, u)
	checkCost(t, e, res)
	if res.StopReason != provider.StopEndTurn {
		t.Errorf("stop reason %q", res.StopReason)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after the final chunk = %v, want io.EOF", err)
	}
}

func streamToolCalls(t *testing.T, e *Env) {
	calls := []provider.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"San Francisco"}`)},
		{ID: "call_b", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
	}
	e.Fake.Script(Reply{Text: "Checking both.", ToolCalls: calls, Usage: provider.Usage{InputTokens: 90, OutputTokens: 40}})
	s, err := e.Adapter.Stream(ctx(t), &provider.Request{Prompt: "Weather in SF and Paris?", Tools: []provider.ToolDef{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	_, deltas, res, _, err := drain(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 2 || len(deltas) != 2 {
		t.Fatalf("final tool calls %+v, delta-assembled %d", res.ToolCalls, len(deltas))
	}
	for i, want := range calls {
		got := res.ToolCalls[i]
		if got.Name != want.Name || got.ID == "" || !sameJSON(got.Arguments, want.Arguments) {
			t.Errorf("final call %d = %+v, want %+v", i, got, want)
		}
		d := deltas[i]
		if d == nil || d.ID != got.ID || d.Name != got.Name || !sameJSON(d.Arguments, want.Arguments) {
			t.Errorf("delta-assembled call %d = %+v, want %+v", i, d, got)
		}
	}
	if res.StopReason != provider.StopToolUse {
		t.Errorf("stop reason %q", res.StopReason)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Errorf("no usage after the stream: %+v", res.Usage)
	}
}

func waitIdle(t *testing.T, e *Env) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Fake.WaitIdle(c); err != nil {
		t.Errorf("connection still open after the stream ended: %v", err)
	}
}

// waitGoroutines yields until at most n goroutines run, and reports a leak
// when they do not wind down within a generous bound. It never sleeps.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutine leak: %d running, %d before the stream\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
			return
		}
		runtime.Gosched()
	}
}

func longReply() Reply {
	return Reply{Text: strings.Repeat("All work and no play makes Jack a dull boy. ", 40), Usage: provider.Usage{InputTokens: 20, OutputTokens: 400}}
}

func streamEarlyClose(t *testing.T, e *Env) {
	e.Fake.Script(longReply())
	baseline := runtime.NumGoroutine()
	s, err := e.Adapter.Stream(ctx(t), &provider.Request{Prompt: "write a lot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.Recv(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("Recv after Close = %v, want an error that says the stream was closed", err)
	}
	waitIdle(t, e)
	waitGoroutines(t, baseline)
}

func streamContextCancel(t *testing.T, e *Env) {
	e.Fake.Script(longReply())
	baseline := runtime.NumGoroutine()
	c, cancel := context.WithCancel(ctx(t))
	s, err := e.Adapter.Stream(c, &provider.Request{Prompt: "write a lot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	var last error
	for range 10000 {
		if _, last = s.Recv(); last != nil {
			break
		}
	}
	if provider.KindOf(last) != provider.KindCanceled {
		t.Errorf("after cancel Recv = %v (kind %s), want canceled", last, provider.KindOf(last))
	}
	s.Close()
	waitIdle(t, e)
	waitGoroutines(t, baseline)
}

// cutWords are one-token words of o200k (a space and a common word): an
// answer of n of them is n tokens, so the text a fake streams agrees with
// the output count it reports, as a real provider's does.
var cutWords = strings.Fields("the of and to in is was for on that with as by at from this be are it an or have not but were which had their one all been has more can its who also")

// cutOutput is the output count of the answer cut before its end.
const cutOutput = 4000

// cutReply is an answer of cutOutput one-token words (each fake streams
// it as many text deltas) that reports cutOutput output tokens at its end.
func cutReply() (Reply, string) {
	var b strings.Builder
	for i := range cutOutput {
		b.WriteString(" " + cutWords[i%len(cutWords)])
	}
	text := strings.TrimPrefix(b.String(), " ")
	return Reply{Text: text, Usage: provider.Usage{InputTokens: 30, OutputTokens: cutOutput}}, text
}

// streamCutBeforeEnd streams an answer of N text deltas that reports its
// output count only at its end, and leaves one delta before the end (the
// caller closes the stream, or cancels its context): the stream ends
// canceled, billed at least an upper bound of the text it received, never
// the few tokens the provider reported before the answer, and marked
// estimated.
func streamCutBeforeEnd(t *testing.T, e *Env) {
	reply, text := cutReply()
	req := &provider.Request{Prompt: "write a long answer", MaxTokens: 8192}
	// A first read counts the fake's deltas.
	e.Fake.Script(reply)
	s, err := e.Adapter.Stream(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	got, _, res, n, err := drain(s)
	if err != nil || got != text || res.Usage.OutputTokens != cutOutput {
		t.Fatalf("the whole answer: %d chunks, err %v, text intact %v, usage %+v", n, err, got == text, res)
	}
	n-- // the final chunk
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			e.Fake.Script(reply)
			c, cancel := context.WithCancel(ctx(t))
			defer cancel()
			s, err := e.Adapter.Stream(c, req)
			if err != nil {
				t.Fatal(err)
			}
			var received strings.Builder
			for i := range n - 1 {
				ch, err := s.Recv()
				if err != nil || ch.Final {
					t.Fatalf("chunk %d of %d: final %v, %v", i+1, n, ch.Final, err)
				}
				received.WriteString(ch.Text)
			}
			if how == "close" {
				s.Close()
			} else {
				cancel()
			}
			_, err = s.Recv()
			s.Close()
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.KindCanceled {
				t.Fatalf("after %d of %d deltas, Recv = %v; want canceled", n-1, n, err)
			}
			if pe.Usage == nil {
				t.Fatalf("a stream left %d deltas into %d carries no usage: the provider bills what it generated", n-1, n)
			}
			u := *pe.Usage
			// Each word received is a token at least; with prices, the
			// bound is the catalog's, capped at the output limit sent.
			floor := int64(len(strings.Fields(received.String())))
			if e.Pricer != nil {
				floor = max(floor, min(e.Pricer.BoundText(e.Namespace, received.String()), int64(req.MaxTokens)))
			}
			if u.OutputTokens < floor {
				t.Errorf("left %d deltas into %d (%d words of %d): billed %d output tokens, want at least %d, the bound of the text received (the provider reports %d at the end)",
					n-1, n, len(strings.Fields(received.String())), cutOutput, u.OutputTokens, floor, cutOutput)
			}
			if !u.Estimated {
				t.Errorf("usage %+v bounded from the text received is not marked estimated", u)
			}
			if e.Pricer != nil {
				want, err := e.Pricer.Cost(e.Namespace, e.Model, u, time.Time{})
				if err != nil || pe.Cost != want || want == 0 {
					t.Errorf("cost %s for %+v; want %s (%v)", pe.Cost, u, want, err)
				}
			}
			waitIdle(t, e)
		})
	}
}

// faultKinds are the kinds a protocol can produce; fakes report which ones
// theirs can.
var faultKinds = []provider.Kind{
	provider.KindRateLimit, provider.KindQuotaExhausted, provider.KindAuth, provider.KindBadRequest,
	provider.KindContextWindowExceeded, provider.KindServer, provider.KindOverloaded, provider.KindTimeout,
}

func errorKinds(t *testing.T, e *Env) {
	for _, k := range faultKinds {
		t.Run(k.String(), func(t *testing.T) {
			ra := time.Duration(0)
			if k == provider.KindRateLimit {
				ra = 7 * time.Second
			}
			if !e.Fake.Fail(k, ra) {
				t.Skipf("the %T protocol has no %s failure", e.Fake, k)
			}
			_, err := e.Adapter.Invoke(ctx(t), &provider.Request{Prompt: "hi"})
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
			}
			if pe.Kind != k {
				t.Errorf("kind = %s, want %s: %v", pe.Kind, k, err)
			}
			if pe.Provider != e.Adapter.Name() {
				t.Errorf("error names provider %q", pe.Provider)
			}
			if ra > 0 && pe.RetryAfter != ra {
				t.Errorf("retry after = %s, want %s", pe.RetryAfter, ra)
			}
			if pe.Diagnostic.Status == 0 && pe.Diagnostic.Message == "" {
				t.Errorf("no diagnostic: %v", err)
			}
		})
	}
}

func streamErrorBeforeFirstChunk(t *testing.T, e *Env) {
	if !e.Fake.Fail(provider.KindOverloaded, 0) {
		t.Skip("no overload failure in this protocol")
	}
	s, err := e.Adapter.Stream(ctx(t), &provider.Request{Prompt: "hi"})
	if err == nil {
		_, err = provider.Collect(s)
	}
	if provider.KindOf(err) != provider.KindOverloaded {
		t.Errorf("stream error = %v, want overloaded", err)
	}
	waitIdle(t, e)
}

func midStreamError(t *testing.T, e *Env) {
	if !e.Fake.FailMidStream(provider.KindOverloaded) {
		t.Skip("no in-stream errors in this protocol")
	}
	s, err := e.Adapter.Stream(ctx(t), &provider.Request{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, chunks, err := drain(s)
	if provider.KindOf(err) != provider.KindOverloaded {
		t.Errorf("mid-stream error = %v (kind %s), want overloaded", err, provider.KindOf(err))
	}
	if chunks == 0 {
		t.Error("the fake sent no output before the error")
	}
	waitIdle(t, e)
}

func truncatedStream(t *testing.T, e *Env) {
	if !e.Fake.Truncate() {
		t.Skip("the fake cannot truncate")
	}
	s, err := e.Adapter.Stream(ctx(t), &provider.Request{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	text, _, res, _, err := drain(s)
	if err == nil {
		t.Fatalf("a truncated stream ended cleanly with %q (final %+v)", text, res)
	}
	if provider.KindOf(err) != provider.KindNetwork {
		t.Errorf("truncated stream error = %v (kind %s), want network", err, provider.KindOf(err))
	}
	waitIdle(t, e)
}

// responseCap checks max_response_bytes, unary and streamed: an answer
// exactly as large as the cap passes; with a cap half its size, the call
// is a server error that names the provider and the cap, a stream ends
// with it after the chunks that fit (carrying the usage so far), and the
// connection is released.
func responseCap(t *testing.T, e *Env) {
	if e.WithSettings == nil {
		t.Skip("the environment cannot build an adapter with another response cap (Env.WithSettings)")
	}
	call := func(stream bool, edit func(*provider.Settings)) (chunks int, err error) {
		a := e.WithSettings(edit)
		req := &provider.Request{Prompt: "write a lot"}
		if !stream {
			_, err = a.Invoke(ctx(t), req)
			return 0, err
		}
		s, err := a.Stream(ctx(t), req)
		if err != nil {
			return 0, err
		}
		_, _, _, chunks, err = drain(s)
		return chunks, err
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "invoke", true: "stream"}[stream], func(t *testing.T) {
			// The fake pads its events at random, so the answer is kept
			// and replayed to the adapter under a cap of its exact size.
			rec := &recordedAnswer{}
			e.Fake.Script(longReply())
			if _, err := call(stream, func(s *provider.Settings) { s.HTTPClient = &http.Client{Transport: rec} }); err != nil {
				t.Fatal(err)
			}
			size := int64(len(rec.body))
			rec.replay = true
			if _, err := call(stream, func(s *provider.Settings) {
				s.HTTPClient, s.MaxResponseBytes = &http.Client{Transport: rec}, size
			}); err != nil {
				t.Errorf("a %d-byte answer under a cap of as many bytes: %v", size, err)
			}
			if !stream { // a unary answer is read to its end
				_, err := call(stream, func(s *provider.Settings) {
					s.HTTPClient, s.MaxResponseBytes = &http.Client{Transport: rec}, size-1
				})
				if provider.KindOf(err) != provider.KindServer {
					t.Errorf("a %d-byte answer under a cap of one byte less: %v; want a server error", size, err)
				}
			}

			limit := size / 2
			e.Fake.Script(longReply())
			chunks, err := call(stream, func(s *provider.Settings) { s.MaxResponseBytes = limit })
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("a %d-byte answer under a cap of %d bytes: %v (%T); want a *provider.Error", size, limit, err, err)
			}
			want := fmt.Sprintf("response from %s exceeded max_response_bytes (%d)", e.Adapter.Name(), limit)
			if pe.Kind != provider.KindServer || !strings.Contains(pe.Error(), want) {
				t.Errorf("a %d-byte answer under a cap of %d bytes: %v (kind %s); want a server error saying %q", size, limit, err, pe.Kind, want)
			}
			if stream && chunks == 0 {
				t.Errorf("no chunk before the cap: the check wants the cap reached mid-stream")
			}
			if stream && pe.Usage == nil {
				t.Errorf("the stream past the cap carries no usage after %d chunks", chunks)
			}
			waitIdle(t, e)
		})
	}
}

// recordedAnswer is a transport that reads each response whole and keeps
// it; once replay is set, it answers every request with the kept
// response again, without sending the request.
type recordedAnswer struct {
	replay bool
	status int
	header http.Header
	body   []byte
}

func (r *recordedAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !r.replay {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if r.body, err = io.ReadAll(resp.Body); err != nil {
			return nil, err
		}
		r.status, r.header = resp.StatusCode, resp.Header
	}
	return &http.Response{StatusCode: r.status, Status: http.StatusText(r.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.header.Clone(), Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: req}, nil
}

func health(t *testing.T, e *Env) {
	st := e.Adapter.HealthCheck(ctx(t))
	if !st.Healthy || st.Error != "" || st.CheckedAt.IsZero() {
		t.Errorf("healthy fake reported %+v", st)
	}
	if e.Fake.Fail(provider.KindAuth, 0) {
		st = e.Adapter.HealthCheck(ctx(t))
		if st.Healthy || st.Kind != provider.KindAuth || st.Error == "" {
			t.Errorf("auth failure reported as %+v", st)
		}
	}
}

func rateLimitStatus(t *testing.T, e *Env) {
	supported := e.Fake.SetRateLimits(41, 9000)
	e.Fake.Script(Reply{Text: "ok", Usage: provider.Usage{InputTokens: 5, OutputTokens: 1}})
	if _, err := e.Adapter.Invoke(ctx(t), &provider.Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	st := e.Adapter.RateLimitStatus(ctx(t))
	if !supported {
		if st.RequestsRemaining != nil || st.TokensRemaining != nil {
			t.Errorf("the protocol reports no limits, yet the adapter says %+v", st)
		}
		return
	}
	if st.RequestsRemaining == nil || *st.RequestsRemaining != 41 || st.TokensRemaining == nil || *st.TokensRemaining != 9000 || st.ObservedAt.IsZero() {
		t.Errorf("rate-limit status = %+v, want 41 requests and 9000 tokens remaining", st)
	}
}

func estimateBound(t *testing.T, e *Env) {
	if e.Pricer == nil {
		t.Skip("no prices: a local server")
	}
	req := &provider.Request{System: "You review Go code.", Prompt: strings.Repeat("Check this function for races: func f() { go g() }. ", 30), MaxTokens: 300}
	est, err := e.Adapter.EstimateCost(req)
	if err != nil {
		t.Fatal(err)
	}
	// The provider bills its own count of the prompt; model it as the
	// offline count of the text plus 10% (vendor tokenizers differ), and the
	// whole output budget.
	text := int64(len(req.System)+len(req.Prompt)) / 4
	billed := provider.Usage{InputTokens: text + text/10, OutputTokens: 300}
	e.Fake.Script(Reply{Text: strings.Repeat("x", 300), Usage: billed})
	res, err := e.Adapter.Invoke(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cost == 0 || est < res.Cost {
		t.Errorf("estimate %s does not bound the billed cost %s (usage %+v)", est, res.Cost, res.Usage)
	}
}

func invalidRequest(t *testing.T, e *Env) {
	before := e.Fake.Last()
	_, err := e.Adapter.Invoke(ctx(t), &provider.Request{})
	if provider.KindOf(err) != provider.KindBadRequest {
		t.Errorf("empty request error = %v, want bad request", err)
	}
	if after := e.Fake.Last(); after.Model != before.Model || after.System != before.System {
		t.Error("an invalid request reached the provider")
	}
}

// answer makes one call, streamed or not, and returns the result.
func answer(t *testing.T, a provider.Adapter, stream bool, req *provider.Request) *provider.Result {
	t.Helper()
	if !stream {
		res, err := a.Invoke(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	s, err := a.Stream(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	_, _, res, _, err := drain(s)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An answer naming a model the catalog does not list (a new dated
// snapshot, a fine-tune, a deployment name) is priced as the model the
// request asked for, never at zero.
func unlistedAnswerModel(t *testing.T, e *Env) {
	if e.Pricer == nil {
		t.Skip("a local server: every model is free")
	}
	const unlisted = "acme-unlisted-snapshot-0042"
	u := provider.Usage{InputTokens: 40, OutputTokens: 9}
	for _, stream := range []bool{false, true} {
		e.Fake.Script(Reply{Text: "priced", Usage: u, Model: unlisted})
		res := answer(t, e.Adapter, stream, &provider.Request{Prompt: "hi", MaxTokens: 50})
		want, err := e.Pricer.Cost(e.Namespace, e.Model, res.Usage, time.Time{})
		if err != nil || want == 0 {
			t.Fatalf("the requested model %s cannot be priced: %v", e.Model, err)
		}
		if res.Model != unlisted || res.Cost != want || res.Unpriced {
			t.Errorf("stream %v: answer model %q cost %s unpriced %v; want %q priced as %s: %s", stream, res.Model, res.Cost, res.Unpriced, unlisted, e.Model, want)
		}
	}
}

// refusingPricer lists no model at all.
type refusingPricer struct{ provider.Pricer }

var errUnlisted = errors.New("not in the catalog")

func (refusingPricer) Cost(string, string, provider.Usage, time.Time) (provider.Money, error) {
	return 0, errUnlisted
}

// When the catalog lists neither the model the answer names nor the one
// requested, the result says it is unpriced (its zero cost is no price).
func unpricedAnswer(t *testing.T, e *Env) {
	if e.Pricer == nil || e.WithSettings == nil {
		t.Skip("a local server, or no way to build the adapter with another catalog")
	}
	a := e.WithSettings(func(s *provider.Settings) { s.Pricer = refusingPricer{s.Pricer} })
	u := provider.Usage{InputTokens: 40, OutputTokens: 9}
	for _, stream := range []bool{false, true} {
		e.Fake.Script(Reply{Text: "unpriced", Usage: u, Model: "acme-unlisted-snapshot-0042"})
		res := answer(t, a, stream, &provider.Request{Prompt: "hi", MaxTokens: 50})
		if !res.Unpriced || res.Cost != 0 {
			t.Errorf("stream %v: cost %s unpriced %v; want flagged unpriced", stream, res.Cost, res.Unpriced)
		}
	}
	// So is the usage a broken stream billed.
	if !e.Fake.FailMidStream(provider.KindOverloaded) {
		return
	}
	s, err := a.Stream(ctx(t), &provider.Request{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, _, err = drain(s)
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("mid-stream error = %v", err)
	}
	if pe.Usage != nil && pe.Usage.TotalTokens() > 0 && (!pe.Unpriced || pe.Cost != 0) {
		t.Errorf("broken stream billed %+v at %s, unpriced %v; want flagged unpriced", *pe.Usage, pe.Cost, pe.Unpriced)
	}
	waitIdle(t, e)
}
