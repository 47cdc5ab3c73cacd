package anthropicfake

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

const testKey = "test-key"

// start runs a fake requiring testKey, closed at the end of the test.
func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	fake := New(append([]Option{WithAPIKey(testKey)}, opts...)...)
	t.Cleanup(fake.Close)
	return fake
}

// sdk is an official SDK client aimed at fake, with its own transport
// (returned so tests can close its idle connections).
func sdk(t *testing.T, fake *Server, opts ...option.RequestOption) (anthropic.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	base := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(fake.URL()),
		option.WithAPIKey(testKey),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	}
	return anthropic.NewClient(append(base, opts...)...), tr
}

// testCtx is a context bounded so that a broken fake fails the test rather
// than hanging it. It is a deadline, not a sleep.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func userParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-6",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// raw sends a request with net/http, bypassing the SDK.
func raw(t *testing.T, fake *Server, method, path string, headers map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, fake.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := fake.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, b
}

// goodHeaders are the headers of a valid raw request.
func goodHeaders() map[string]string {
	return map[string]string{
		"x-api-key":         testKey,
		"anthropic-version": "2023-06-01",
		"content-type":      "application/json",
	}
}

// event is one parsed server-sent event.
type event struct {
	Name string
	Data string
}

// parseSSE splits an SSE body into events.
func parseSSE(t *testing.T, body []byte) []event {
	t.Helper()
	var evs []event
	var cur event
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Name != "" || cur.Data != "" {
				evs = append(evs, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data += strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.Name != "" || cur.Data != "" {
		evs = append(evs, cur)
	}
	return evs
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("bad JSON %q: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("bad JSON %q: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// decodeMap decodes a JSON object.
func decodeMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("bad JSON %q: %v", data, err)
	}
	return m
}

// contextWithCancel is a cancellable testCtx.
func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	return context.WithCancel(testCtx(t))
}
