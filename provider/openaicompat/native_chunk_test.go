package openaicompat_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
)

// relayChat relays a streamed Chat Completions request to a loopback
// server answering with events, and returns the chunks' bytes and the
// collected result.
func relayChat(t *testing.T, events ...string) (raw string, res *provider.Result, err error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprint(w, e)
		}
	}))
	t.Cleanup(srv.Close)
	a, err := openaicompat.New(provider.Settings{Name: "oai", Profile: "openai", BaseURL: srv.URL + "/v1",
		Credentials: map[string]string{"api_key": "sk-test"}, Pricer: catalog(t),
		Models: map[provider.Tier]string{provider.TierBalanced: "gpt-5-mini"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"model":"gpt-5-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	s, err := a.Stream(ctx, &provider.Request{Prompt: "hi", Native: &provider.Native{Protocol: provider.ProtoChat, Body: []byte(body), Stream: true}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for {
		c, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b.String(), res, nil
			}
			return b.String(), res, err
		}
		b.Write(c.Raw)
		if c.Final {
			res = c.Result
		}
	}
}

const (
	chunkHello = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini-2025-08-07","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}],"usage":null}` + "\n\n"
	chunkStop  = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini-2025-08-07","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	chunkUsage = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini-2025-08-07","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n"
	chunkDone  = "data: [DONE]\n\n"
)

// A relayed stream's chunks are read for the result (content, usage) and
// relayed byte for byte; a chunk the fixed structs refuse but the SDK
// reads (a number where the content string belongs) is read as the SDK
// reads it; a chunk that is not JSON ends the stream with an error.
func TestRelayedChatChunksAreRead(t *testing.T) {
	events := []string{chunkHello, chunkStop, chunkUsage, chunkDone}
	raw, res, err := relayChat(t, events...)
	if err != nil {
		t.Fatal(err)
	}
	if raw != strings.Join(events, "") {
		t.Errorf("relayed bytes differ:\n got  %q\n want %q", raw, strings.Join(events, ""))
	}
	if res == nil || res.Content != "Hello" || res.Usage.InputTokens != 9 || res.Usage.OutputTokens != 2 || res.Usage.Estimated {
		t.Errorf("result %+v", res)
	}

	lenient := strings.Replace(chunkHello, `"content":"Hello"`, `"content":42`, 1)
	_, res, err = relayChat(t, lenient, chunkStop, chunkUsage, chunkDone)
	if err != nil {
		t.Fatalf("lenient chunk: %v", err)
	}
	if res == nil || res.Content != "42" {
		t.Errorf("lenient chunk: result %+v, want the SDK's reading of it (42)", res)
	}

	_, _, err = relayChat(t, chunkHello, "data: {\"choices\": [\n\n", chunkStop, chunkUsage, chunkDone)
	var pe *provider.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "unreadable") {
		t.Errorf("a chunk that is not JSON: %v, want the unreadable answer's error", err)
	}
}
