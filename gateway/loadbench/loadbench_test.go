package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

const testKey = "sk-bench-test"

// testCtx bounds a test so that a broken fake fails it rather than
// hanging it; a deadline, not a sleep.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startFake serves the benchmark's upstream on loopback; waits counts
// the trickle's pauses, which return at once.
func startFake(t *testing.T) (*benchFake, *httptest.Server, *atomic.Int64) {
	t.Helper()
	f := newBenchFake(testKey)
	var waits atomic.Int64
	f.wait = func(ctx context.Context, d time.Duration) bool {
		waits.Add(1)
		return ctx.Err() == nil
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv, &waits
}

func anthropicClient(srv *httptest.Server) anthropic.Client {
	return anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(srv.URL), aoption.WithAPIKey(testKey),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(srv.Client()))
}

func openAIClient(srv *httptest.Server) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(srv.URL+"/v1"), ooption.WithAPIKey(testKey),
		ooption.WithMaxRetries(0), ooption.WithHTTPClient(srv.Client()))
}

func TestParseDirective(t *testing.T) {
	pad := strings.Repeat("x", directiveWindow)
	for _, c := range []struct {
		name string
		body string
		want directive
	}{
		{"none", `{"messages":[{"role":"user","content":"hi"}]}`, directive{}},
		{"chunks", `"hello [loadbench chunks=1000]"`, directive{chunks: 1000}},
		{"both", `"slow [loadbench chunks=12 every=500ms]"`, directive{chunks: 12, every: 500 * time.Millisecond}},
		{"the last wins", `"[loadbench chunks=3] then [loadbench chunks=7]"`, directive{chunks: 7}},
		{"bad values are ignored", `"[loadbench chunks=-1 every=soon]"`, directive{}},
		{"unterminated", `"[loadbench chunks=5"`, directive{}},
		{"too far from the end", `"[loadbench chunks=5]` + pad + `"`, directive{}},
	} {
		if got := parseDirective([]byte(c.body)); got != c.want {
			t.Errorf("%s: parseDirective = %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := parseDirective([]byte(directiveText(9, time.Second))); got != (directive{chunks: 9, every: time.Second}) {
		t.Errorf("directiveText does not parse back: %+v", got)
	}
}

// The Messages side answers in the Messages format, read by the official
// SDK: usage on a unary answer; a streamed answer of chunks=N has N
// text_delta events and ends with message_delta's usage and message_stop.
func TestFakeMessagesThroughTheSDK(t *testing.T) {
	_, srv, _ := startFake(t)
	client := anthropicClient(srv)
	params := func(text string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 4096,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
	}
	msg, err := client.Messages.New(testCtx(t), params("hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 || len(msg.Content) != 1 {
		t.Errorf("unary answer: %s", msg.RawJSON())
	}

	const n = 40
	stream := client.Messages.NewStreaming(testCtx(t), params("a long one "+directiveText(n, 0)))
	var acc anthropic.Message
	deltas, events := 0, 0
	for stream.Next() {
		ev := stream.Current()
		events++
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			deltas++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas != n {
		t.Errorf("%d text_delta events, want %d", deltas, n)
	}
	// message_start, content_block_start, the deltas, content_block_stop,
	// message_delta, message_stop; the SDK does not hand out the ping
	// (TestSendCountsEvents counts it).
	if events != n+5 {
		t.Errorf("%d events, want %d", events, n+5)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != words(2*n-1) || acc.Usage.OutputTokens == 0 {
		t.Errorf("accumulated %+v, usage %+v", acc.Content, acc.Usage)
	}

	// The key is checked, as the API does.
	bad := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("sk-wrong"),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(srv.Client()))
	if _, err := bad.Messages.New(testCtx(t), params("hi")); err == nil {
		t.Error("a wrong key was accepted")
	}
}

// The Chat side answers in the Chat Completions format, read by the
// official SDK: chunks=N streams N content chunks, then the usage chunk.
func TestFakeChatThroughTheSDK(t *testing.T) {
	_, srv, _ := startFake(t)
	client := openAIClient(srv)
	const n = 40
	stream := client.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{
		Model:         "gpt-5-mini",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a long one " + directiveText(n, 0))},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	content := 0
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			content++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content != n {
		t.Errorf("%d content chunks, want %d", content, n)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != words(n) || acc.Usage.CompletionTokens == 0 {
		t.Errorf("accumulated %q, usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}
}

// every=D pauses before each event, never before the headers.
func TestTrickleWaitsBeforeEachEvent(t *testing.T) {
	_, srv, waits := startFake(t)
	c := &coder{client: srv.Client()}
	tgt := ctarget{url: srv.URL, headers: http.Header{"Authorization": {"Bearer " + testKey}}}
	for _, r := range []route{{label: "messages", proto: "messages", model: "claude-sonnet-4-6"}, {label: "chat", proto: "chat", model: "gpt-5-mini"}} {
		waits.Store(0)
		body := smallBody(r.proto, r.model, 1024, true, "slow "+directiveText(5, time.Hour))
		events, err := c.send(testCtx(t), c.client, tgt, r, body, true, nil)
		if err != nil {
			t.Fatalf("%s: %v", r.label, err)
		}
		if got := waits.Load(); got != events {
			t.Errorf("%s: %d pauses for %d events; want one before each event", r.label, got, events)
		}
	}
}

// send counts every event of a stream, the denominator of CPU per event:
// chunks=N is N+6 events on Messages, N+4 on Chat (the role chunk, the
// finish chunk, the usage chunk and [DONE]).
func TestSendCountsEvents(t *testing.T) {
	_, srv, _ := startFake(t)
	c := &coder{client: srv.Client()}
	tgt := ctarget{url: srv.URL, headers: http.Header{"Authorization": {"Bearer " + testKey}}}
	const n = 25
	for _, x := range []struct {
		r    route
		want int64
	}{
		{route{label: "messages", proto: "messages", model: "claude-sonnet-4-6"}, n + 6},
		{route{label: "chat", proto: "chat", model: "gpt-5-mini"}, n + 4},
	} {
		first := 0
		events, err := c.send(testCtx(t), c.client, tgt, x.r, smallBody(x.r.proto, x.r.model, 1024, true, "long "+directiveText(n, 0)), true, func() { first++ })
		if err != nil {
			t.Fatalf("%s: %v", x.r.label, err)
		}
		if events != x.want || first != 1 {
			t.Errorf("%s: %d events (first called %d times), want %d", x.r.label, events, first, x.want)
		}
		if _, err := c.send(testCtx(t), c.client, tgt, x.r, smallBody(x.r.proto, x.r.model, 64, false, "hi"), false, nil); err != nil {
			t.Errorf("%s unary: %v", x.r.label, err)
		}
	}
	// A refusal is an error with its status.
	bad := ctarget{url: srv.URL, headers: http.Header{"Authorization": {"Bearer sk-wrong"}}}
	r := route{label: "chat", proto: "chat", model: "gpt-5-mini"}
	var se *statusError
	if _, err := c.send(testCtx(t), c.client, bad, r, smallBody("chat", "gpt-5-mini", 64, false, "hi"), false, nil); err == nil || !errors.As(err, &se) || se.status != 401 {
		t.Errorf("wrong key: %v, want a 401", err)
	}
}

// The big prompts are valid requests of their protocol, of the size
// asked for, that the fakes accept (a tool_result pairs with the
// tool_use before it), and differ only in their final message.
func TestBigBodies(t *testing.T) {
	_, srv, _ := startFake(t)
	c := &coder{client: srv.Client()}
	tgt := ctarget{url: srv.URL, headers: http.Header{"Authorization": {"Bearer " + testKey}}}
	for _, r := range []route{{label: "messages", proto: "messages", model: "claude-sonnet-4-6"}, {label: "chat", proto: "chat", model: "gpt-5-mini"}} {
		bb, err := newBigBodies(r.proto, 200_000)
		if err != nil {
			t.Fatal(err)
		}
		a := bb.body(r.proto, r.model, 1024, false, "Go on, request 1.")
		b := bb.body(r.proto, r.model, 1024, false, "Go on, request 2.")
		if len(a) < 200_000 || len(a) > 230_000 {
			t.Errorf("%s: %d bytes, want about 200 KB", r.label, len(a))
		}
		var doc map[string]any
		if err := json.Unmarshal(a, &doc); err != nil {
			t.Fatalf("%s: %v", r.label, err)
		}
		if doc["model"] != r.model || doc["stream"] != false {
			t.Errorf("%s: model %v, stream %v", r.label, doc["model"], doc["stream"])
		}
		if bytes.Equal(a, b) || !bytes.Contains(a, []byte("Go on, request 1.")) {
			t.Errorf("%s: the final message is not in the body", r.label)
		}
		if _, err := c.send(testCtx(t), c.client, tgt, r, a, false, nil); err != nil {
			t.Errorf("%s: the fake refused the big prompt: %v", r.label, err)
		}
	}
}
