package geminifake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
)

const testKey = "test-key"

// start runs a fake requiring testKey, closed at the end of the test.
func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	fake := New(append([]Option{WithAPIKey(testKey)}, opts...)...)
	t.Cleanup(fake.Close)
	return fake
}

// isolateEnv makes sure no environment variable can point the SDK at the
// real API or give it a real key.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL",
		"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_CLOUD_PROJECT",
		"GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "GOOGLE_APPLICATION_CREDENTIALS",
	} {
		t.Setenv(k, "")
	}
}

// sdk is an official SDK client aimed at fake, with its own transport
// (returned so tests can close its idle connections).
func sdk(t *testing.T, fake *Server) (*genai.Client, *http.Transport) {
	t.Helper()
	return sdkWithKey(t, fake, testKey)
}

func sdkWithKey(t *testing.T, fake *Server, key string) (*genai.Client, *http.Transport) {
	t.Helper()
	isolateEnv(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client, err := genai.NewClient(testCtx(t), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: tr},
		HTTPOptions: genai.HTTPOptions{BaseURL: fake.URL(), APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client, tr
}

// testCtx is a context bounded so that a broken fake fails the test rather
// than hanging it. It is a deadline, not a sleep.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
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
	return map[string]string{"x-goog-api-key": testKey, "content-type": "application/json"}
}

// splitSSE splits a data-only SSE body framed by sep into its data
// payloads, failing on anything else.
func splitSSE(t *testing.T, body []byte, sep string) []string {
	t.Helper()
	s := string(body)
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, sep) {
		t.Fatalf("stream does not end with %q: %q", sep, s)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, sep), sep) {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.ContainsAny(data, "\r\n") {
			t.Fatalf("bad event %q", ev)
		}
		out = append(out, data)
	}
	return out
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

// errorOf decodes the "error" object of a google.rpc.Status body.
func errorOf(t *testing.T, body []byte) map[string]any {
	t.Helper()
	e, ok := decodeMap(t, body)["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %s", body)
	}
	return e
}

// detail finds the detail of a given @type suffix.
func detail(details []map[string]any, typeSuffix string) map[string]any {
	for _, d := range details {
		if s, _ := d["@type"].(string); strings.HasSuffix(s, typeSuffix) {
			return d
		}
	}
	return nil
}

// apiError extracts a genai.APIError (a value type).
func apiError(t *testing.T, err error) genai.APIError {
	t.Helper()
	var e genai.APIError
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want genai.APIError", err, err)
	}
	return e
}

func weatherTool() *genai.Tool {
	return &genai.Tool{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name:        "get_weather",
		Description: "Get weather",
		ParametersJsonSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required":   []string{"city"},
		},
	}}}
}

// contextWithCancel is a cancellable testCtx.
func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	return context.WithCancel(testCtx(t))
}
