package openaifake

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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const testKey = "test-key"

var flavors = []Flavor{FlavorOpenAI, FlavorOllama, FlavorVLLM}

// start runs a fake, closed at the end of the test.
func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	fake := New(opts...)
	t.Cleanup(fake.Close)
	return fake
}

// sdk is an official SDK client aimed at fake, with its own transport
// (returned so tests can close its idle connections).
func sdk(t *testing.T, fake *Server, opts ...option.RequestOption) (openai.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	base := []option.RequestOption{
		option.WithBaseURL(fake.URL() + "/v1/"),
		option.WithAPIKey(testKey),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	}
	return openai.NewClient(append(base, opts...)...), tr
}

// testCtx is a context bounded so that a broken fake fails the test rather
// than hanging it. It is a deadline, not a sleep.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// modelFor is a model each flavour serves by default.
func modelFor(f Flavor) string {
	switch f {
	case FlavorOllama:
		return "llama3.2"
	case FlavorVLLM:
		return "Qwen/Qwen2.5-7B-Instruct"
	}
	return "gpt-5-mini"
}

func userParams(f Flavor, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    modelFor(f),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage(text)},
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

// post sends a chat body with the test key.
func post(t *testing.T, fake *Server, body string) (*http.Response, []byte) {
	t.Helper()
	return raw(t, fake, "POST", "/v1/chat/completions", map[string]string{
		"Authorization": "Bearer " + testKey, "Content-Type": "application/json",
	}, body)
}

// chatBody is a minimal chat request body for model.
func chatBody(model string, extra string) string {
	b := `{"model":"` + model + `","messages":[{"role":"user","content":"Weather in Paris?"}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// parseSSE splits a data-only SSE body into its data payloads, failing on
// any line that is not `data: …` or a blank separator.
func parseSSE(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case expectBlank:
			if line != "" {
				t.Fatalf("missing blank line before %q", line)
			}
			expectBlank = false
		case strings.HasPrefix(line, "data: "):
			out = append(out, strings.TrimPrefix(line, "data: "))
			expectBlank = true
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
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

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("bad JSON %q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("bad JSON %q: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// path walks a decoded JSON value by keys and indexes.
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// has reports whether a decoded JSON object has key (even with a null
// value).
func has(v any, key string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m[key]
	return ok
}

var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Get weather"),
	Parameters: openai.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []string{"city"},
	},
})

// contextWithCancel is a cancellable testCtx.
func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	return context.WithCancel(testCtx(t))
}
