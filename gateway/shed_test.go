package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// Over gateway.max_in_flight, a request is refused at once with the
// protocol's overloaded error and retry-after: 1, and served again once a
// slot is free.
func TestMaxInFlightShedsLoad(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	w := newWorld(t, withGateway(func(o *gateway.Options) {
		o.MaxInFlight = 1
		o.Prepare = func(ctx context.Context, c *orchestrator.Call) error {
			if c.Agent == "planner" { // the call that holds the only slot
				once.Do(func() { close(entered) })
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}
	}))
	ctx := ctxT(t)
	held := make(chan error, 1)
	go func() {
		_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "planner", Messages: userMsg("hold")})
		held <- err
	}()
	<-entered

	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	e := openAIErr(t, err)
	if e.StatusCode != 503 || e.Response.Header.Get("Retry-After") != "1" || !strings.Contains(e.Message, "gateway.max_in_flight") {
		t.Errorf("OpenAI client over the limit = %d %q retry-after %q", e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
	}
	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 10, Messages: userMsgA("hi")})
	ae := anthropicErr(t, err)
	if ae.StatusCode != 529 || ae.Type() != "overloaded_error" || ae.Response.Header.Get("Retry-After") != "1" {
		t.Errorf("Anthropic client over the limit = %d %q retry-after %q", ae.StatusCode, ae.Type(), ae.Response.Header.Get("Retry-After"))
	}

	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the held request = %v", err)
	}
	if _, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")}); err != nil {
		t.Errorf("with the slot free again = %v", err)
	}
}

// A JSON answer says its length, whatever its size: it is never sent in
// chunks (the model list of the test world is larger than net/http's own
// buffer, past which it would be chunked).
func TestJSONAnswersCarryTheirLength(t *testing.T) {
	w := newWorld(t)
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, w.url+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.key)
	resp, err := w.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || len(b) <= 2048 {
		t.Fatalf("GET /v1/models = %d, %d bytes; want a 200 above 2 KiB", resp.StatusCode, len(b))
	}
	if resp.ContentLength != int64(len(b)) || len(resp.TransferEncoding) > 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %q for a %d-byte answer; want the length, not chunks", resp.ContentLength, resp.TransferEncoding, len(b))
	}
}
