package openaifake

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var fixedNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return fixedNow }

func TestSSEFraming(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			fake.Enqueue(streamScript())
			resp, body := post(t, fake, chatBody(modelFor(f), `"stream":true,"stream_options":{"include_usage":true}`))
			wantCT := map[Flavor]string{FlavorOpenAI: "text/event-stream; charset=utf-8", FlavorOllama: "text/event-stream", FlavorVLLM: "text/event-stream; charset=utf-8"}[f]
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != wantCT {
				t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			s := string(body)
			if !strings.HasPrefix(s, "data: {") || !strings.HasSuffix(s, "\n\ndata: [DONE]\n\n") || strings.Contains(s, "event:") || strings.Contains(s, "\r") {
				t.Fatalf("framing:\n%s", s)
			}
			events := parseSSE(t, body)
			if events[len(events)-1] != "[DONE]" || slices.Index(events, "[DONE]") != len(events)-1 {
				t.Fatalf("[DONE] not last and once: %q", events[len(events)-3:])
			}
			var id string
			for i, ev := range events[:len(events)-1] {
				m := decodeMap(t, []byte(ev))
				if m["object"] != "chat.completion.chunk" || m["model"] != modelFor(f) && f != FlavorOpenAI {
					t.Errorf("chunk %d: %s", i, ev)
				}
				if i == 0 {
					id, _ = m["id"].(string)
				} else if m["id"] != id {
					t.Errorf("chunk %d id %v != %s", i, m["id"], id)
				}
				if strings.Contains(ev, "\n") {
					t.Errorf("chunk %d spans lines", i)
				}
			}
			// The last chunk before [DONE] is the usage chunk.
			last := decodeMap(t, []byte(events[len(events)-2]))
			if choices, _ := last["choices"].([]any); choices == nil || len(choices) != 0 || last["usage"] == nil {
				t.Errorf("last chunk = %s", events[len(events)-2])
			}
		})
	}
}

// toolFragments collects the raw tool_call deltas of a stream.
func toolFragments(t *testing.T, events []string) []map[string]any {
	var out []map[string]any
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		for _, tc := range asSlice(path(decodeMap(t, []byte(ev)), "choices", 0, "delta", "tool_calls")) {
			out = append(out, tc.(map[string]any))
		}
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func TestToolCallFragments(t *testing.T) {
	script := streamScript()
	for _, f := range []Flavor{FlavorOpenAI, FlavorVLLM} {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			fake.Enqueue(script)
			_, body := post(t, fake, chatBody(modelFor(f), `"stream":true`))
			frags := toolFragments(t, parseSSE(t, body))
			args := map[int]string{}
			starts := map[int]int{}
			midToken := false
			for _, fr := range frags {
				idx := int(fr["index"].(float64))
				fn := fr["function"].(map[string]any)
				if has(fr, "id") {
					starts[idx]++
					if fr["type"] != "function" || fn["name"] != "get_weather" {
						t.Errorf("first fragment %v", fr)
					}
					if a, _ := fn["arguments"].(string); a != "" {
						t.Errorf("first fragment carries arguments %q", a)
					}
					if f == FlavorVLLM && has(fn, "arguments") {
						t.Errorf("vllm first fragment has an arguments key: %v", fr)
					}
					continue
				}
				if has(fr, "type") || has(fn, "name") {
					t.Errorf("later fragment repeats type/name: %v", fr)
				}
				a := fn["arguments"].(string)
				if !json.Valid([]byte(a)) {
					midToken = true
				}
				args[idx] += a
			}
			if starts[0] != 1 || starts[1] != 1 || len(starts) != 2 {
				t.Errorf("starts = %v", starts)
			}
			for i, want := range script.ToolCalls {
				if !jsonEqual(t, args[i], want.Arguments) {
					t.Errorf("call %d arguments %q", i, args[i])
				}
			}
			if f == FlavorVLLM && !strings.HasPrefix(args[0], `{"city": "Paris", `) {
				t.Errorf("vllm arguments not spaced like json.dumps: %q", args[0])
			}
			if f == FlavorOpenAI && args[0] != script.ToolCalls[0].Arguments {
				t.Errorf("openai arguments not verbatim: %q", args[0])
			}
			if !midToken {
				t.Error("no fragment is cut mid-token")
			}
		})
	}
	t.Run("ollama", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorOllama), WithSeed(7), WithClock(fixedClock))
		fake.Enqueue(Reply{ToolCalls: []ToolCall{{ID: "call_aaaa1111", Name: "get_weather", Arguments: `{"city": "Paris"}`}, {ID: "call_bbbb2222", Name: "get_time", Arguments: `{"tz":"CET"}`}}})
		_, body := post(t, fake, chatBody("llama3.2", `"stream":true`))
		events := parseSSE(t, body)
		want := []string{
			`{"id":"chatcmpl-%[1]s","object":"chat.completion.chunk","created":%[2]d,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_aaaa1111","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-%[1]s","object":"chat.completion.chunk","created":%[2]d,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_bbbb2222","index":0,"type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-%[1]s","object":"chat.completion.chunk","created":%[2]d,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`,
			`[DONE]`,
		}
		id := strings.TrimPrefix(decodeMap(t, []byte(events[0]))["id"].(string), "chatcmpl-")
		if len(events) != len(want) {
			t.Fatalf("events:\n%s", strings.Join(events, "\n"))
		}
		for i := range want {
			w := want[i]
			if w != "[DONE]" {
				w = fmt.Sprintf(w, id, fixedNow.Unix())
			}
			if events[i] != w {
				t.Errorf("event %d\n got %s\nwant %s", i, events[i], w)
			}
		}
	})
}

func TestResponseHeaders(t *testing.T) {
	names := func(h http.Header) []string {
		var out []string
		for k := range h {
			if k != "Date" {
				out = append(out, strings.ToLower(k))
			}
		}
		sort.Strings(out)
		return out
	}
	openAI := []string{"content-length", "content-type", "openai-processing-ms", "openai-version",
		"x-ratelimit-limit-requests", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-requests",
		"x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens", "x-request-id"}
	for _, tt := range []struct {
		f      Flavor
		stream bool
		want   []string
	}{
		{FlavorOpenAI, false, openAI},
		{FlavorOpenAI, true, append(slices.DeleteFunc(slices.Clone(openAI), func(s string) bool { return s == "content-length" }), "cache-control")},
		{FlavorOllama, false, []string{"content-length", "content-type"}},
		{FlavorOllama, true, []string{"cache-control", "content-type"}},
		{FlavorVLLM, false, []string{"content-length", "content-type"}},
		{FlavorVLLM, true, []string{"cache-control", "content-type"}},
	} {
		fake := start(t, WithFlavor(tt.f))
		extra := ""
		if tt.stream {
			extra = `"stream":true`
		}
		resp, _ := post(t, fake, chatBody(modelFor(tt.f), extra))
		want := slices.Clone(tt.want)
		sort.Strings(want)
		if got := names(resp.Header); !slices.Equal(got, want) {
			t.Errorf("%s stream=%v headers\n got %v\nwant %v", tt.f, tt.stream, got, want)
		}
	}
	// OpenAI sends its headers on errors and unknown routes too.
	fake := start(t, WithAPIKey(testKey))
	for _, p := range []string{"/v1/nope", "/v1/chat/completions"} {
		resp, _ := raw(t, fake, "POST", p, nil, "{}")
		if resp.Header.Get("x-request-id") == "" || resp.Header.Get("x-ratelimit-limit-tokens") == "" || resp.Header.Get("openai-version") == "" {
			t.Errorf("%s: %v", p, resp.Header)
		}
	}
}

func TestErrorBodiesExact(t *testing.T) {
	tests := []struct {
		name  string
		opts  []Option
		reply Reply
		want  string
	}{
		{"openai", nil, RateLimited(2400 * time.Millisecond),
			"{\n    \"error\": {\n        \"message\": \"Rate limit reached for gpt-5-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s.\",\n        \"type\": \"tokens\",\n        \"param\": null,\n        \"code\": \"rate_limit_exceeded\"\n    }\n}\n"},
		{"openai-param", nil, ContextLengthExceeded(128000, 130000),
			"{\n    \"error\": {\n        \"message\": \"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.\",\n        \"type\": \"invalid_request_error\",\n        \"param\": \"messages\",\n        \"code\": \"context_length_exceeded\"\n    }\n}\n"},
		{"ollama", []Option{WithFlavor(FlavorOllama)}, OllamaModelNotFound("x"),
			`{"error":{"message":"model \"x\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}` + "\n"},
		{"ollama-derived-type", []Option{WithFlavor(FlavorOllama)}, InsufficientQuota(),
			`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"api_error","param":null,"code":null}}` + "\n"},
		{"vllm", []Option{WithFlavor(FlavorVLLM)}, VLLMContextLengthExceeded(4096, 4000, 1000),
			`{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`},
		{"vllm-404", []Option{WithFlavor(FlavorVLLM)}, VLLMModelNotFound("x"),
			"{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\",\"param\":\"model\",\"code\":404}}"},
		{"vllm-string-code", []Option{WithFlavor(FlavorVLLM), WithErrorStyle(ErrorStyleVLLMStringCode)}, VLLMContextLengthExceeded(10, 8, 4),
			`{"error":{"message":"This model's maximum context length is 10 tokens. However, you requested 12 tokens (8 in the messages, 4 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":"context_length_exceeded"}}`},
		{"vllm-legacy", []Option{WithFlavor(FlavorVLLM), WithErrorStyle(ErrorStyleVLLMLegacy)}, ServerError(),
			`{"object":"error","message":"The server had an error while processing your request. Sorry about that!","type":"InternalServerError","param":null,"code":500}`},
		{"bare", []Option{WithErrorStyle(ErrorStyleBareString)}, InvalidRequest("something broke"), `{"error":"something broke"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := start(t, tt.opts...)
			fake.Enqueue(tt.reply)
			resp, body := post(t, fake, chatBody("m", ""))
			if resp.StatusCode != tt.reply.faultStatus() || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if string(body) != tt.want {
				t.Errorf("body\n got %s\nwant %s", body, tt.want)
			}
		})
	}
}

func TestMidStreamErrorChunks(t *testing.T) {
	tests := []struct {
		f    Flavor
		opts []Option
		want []string // the events after the 2 content chunks
	}{
		{FlavorOpenAI, nil, []string{`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`}},
		{FlavorOllama, nil, []string{`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"api_error","param":null,"code":null}}`}},
		{FlavorVLLM, nil, []string{`{"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "InternalServerError", "param": null, "code": 500}}`, "[DONE]"}},
		{FlavorVLLM, []Option{WithErrorStyle(ErrorStyleBareString)}, []string{`{"error":"The server had an error while processing your request. Sorry about that!"}`, "[DONE]"}},
	}
	for _, tt := range tests {
		fake := start(t, append([]Option{WithFlavor(tt.f)}, tt.opts...)...)
		reply := ServerErrorMidStream(2)
		reply.Text = "one two three"
		fake.Enqueue(reply)
		resp, body := post(t, fake, chatBody(modelFor(tt.f), `"stream":true`))
		events := parseSSE(t, body)
		if resp.StatusCode != 200 || len(events) != 2+len(tt.want) || !slices.Equal(events[2:], tt.want) {
			t.Errorf("%s: %d\n%s", tt.f, resp.StatusCode, strings.Join(events, "\n"))
		}
	}
}

func TestUnknownRoutes(t *testing.T) {
	tests := []struct {
		f            Flavor
		method, path string
		status       int
		ct, body     string
	}{
		{FlavorOpenAI, "GET", "/v1/nope", 404, "application/json", "{\n    \"error\": {\n        \"message\": \"Invalid URL (GET /v1/nope)\",\n        \"type\": \"invalid_request_error\",\n        \"param\": null,\n        \"code\": null\n    }\n}\n"},
		{FlavorOpenAI, "GET", "/v1/chat/completions", 404, "application/json", ""},
		{FlavorOpenAI, "GET", "/health", 404, "application/json", ""},
		{FlavorOllama, "GET", "/v1/nope", 404, "text/plain", "404 page not found"},
		{FlavorOllama, "GET", "/health", 404, "text/plain", "404 page not found"},
		{FlavorVLLM, "GET", "/v1/nope", 404, "application/json", `{"detail":"Not Found"}`},
		{FlavorVLLM, "GET", "/v1/chat/completions", 405, "application/json", `{"detail":"Method Not Allowed"}`},
		{FlavorVLLM, "GET", "/", 404, "application/json", `{"detail":"Not Found"}`},
	}
	for _, tt := range tests {
		fake := start(t, WithFlavor(tt.f))
		fake.Enqueue(TextReply("kept"))
		resp, body := raw(t, fake, tt.method, tt.path, nil, "")
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != tt.ct || (tt.body != "" && string(body) != tt.body) {
			t.Errorf("%s %s %s: %d %q %q", tt.f, tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if fake.Pending(RouteChat) != 1 || len(fake.Requests()) != 1 {
			t.Errorf("%s: queue %d, recorded %d", tt.f, fake.Pending(RouteChat), len(fake.Requests()))
		}
	}
}

func TestHealthRoutes(t *testing.T) {
	ollama := start(t, WithFlavor(FlavorOllama))
	resp, body := raw(t, ollama, "GET", "/", nil, "")
	if resp.StatusCode != 200 || string(body) != "Ollama is running" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("ollama /: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = raw(t, ollama, "HEAD", "/", nil, "")
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("ollama HEAD /: %d %q", resp.StatusCode, body)
	}
	resp, body = raw(t, ollama, "GET", "/api/version", nil, "")
	if resp.StatusCode != 200 || string(body) != `{"version":"`+DefaultOllamaVersion+`"}` {
		t.Errorf("ollama version: %d %q", resp.StatusCode, body)
	}
	ollama.EnqueueRoute(RouteHealth, Reply{Status: 500, RawBody: "boom", RawContentType: "text/plain"})
	if resp, body = raw(t, ollama, "GET", "/", nil, ""); resp.StatusCode != 500 || string(body) != "boom" {
		t.Errorf("scripted health fault: %d %q", resp.StatusCode, body)
	}

	vllm := start(t, WithFlavor(FlavorVLLM), WithAPIKey(testKey))
	resp, body = raw(t, vllm, "GET", "/health", nil, "")
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != "" {
		t.Errorf("vllm /health: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	vllm.EnqueueRoute(RouteHealth, Reply{Status: 503})
	if resp, _ = raw(t, vllm, "GET", "/health", nil, ""); resp.StatusCode != 503 {
		t.Errorf("scripted vllm health fault: %d", resp.StatusCode)
	}
}

func TestBodyValidation(t *testing.T) {
	tests := []struct {
		f              Flavor
		body           string
		message, param string
		code           any
	}{
		{FlavorOpenAI, `not json`, "We could not parse the JSON body of your request.", "", nil},
		{FlavorOpenAI, `{"messages":[{"role":"user","content":"x"}]}`, "you must provide a model parameter", "", nil},
		{FlavorOpenAI, `{"model":"gpt-4o-mini"}`, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"},
		{FlavorOpenAI, `{"model":"gpt-4o-mini","messages":[]}`, "Invalid 'messages': empty array.", "messages", "empty_array"},
		{FlavorOpenAI, `{"model":"o3","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "Unsupported parameter: 'max_tokens'", "max_tokens", "unsupported_parameter"},
		{FlavorOpenAI, `{"model":"gpt-4o-mini","stream":false,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", nil},
		{FlavorOllama, `{"model":"llama3.2","messages":[]}`, "[] is too short - 'messages'", "", nil},
		{FlavorOllama, `{"messages":[{"role":"user","content":"x"}]}`, "model is required", "", nil},
		{FlavorOllama, `{"model":`, "unexpected end of JSON input", "", nil},
		{FlavorVLLM, `{"model":"m"}`, "messages: Field required", "", float64(400)},
		{FlavorVLLM, `nope`, "JSON decode error", "", float64(400)},
	}
	for _, tt := range tests {
		fake := start(t, WithFlavor(tt.f))
		fake.Enqueue(TextReply("kept"))
		resp, body := post(t, fake, tt.body)
		e, _ := decodeMap(t, body)["error"].(map[string]any)
		msg, _ := e["message"].(string)
		var param any
		if tt.param != "" {
			param = tt.param
		}
		if resp.StatusCode != 400 || !strings.HasPrefix(msg, tt.message) || e["param"] != param || e["code"] != tt.code {
			t.Errorf("%s %s: %d %s", tt.f, tt.body, resp.StatusCode, body)
		}
		if fake.Pending(RouteChat) != 1 {
			t.Errorf("%s %s: a rejected request took a reply", tt.f, tt.body)
		}
	}
	// vLLM serves its model when the request names none.
	vllm := start(t, WithFlavor(FlavorVLLM))
	resp, body := post(t, vllm, `{"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || decodeMap(t, body)["model"] != "Qwen/Qwen2.5-7B-Instruct" {
		t.Errorf("vllm without model: %d %s", resp.StatusCode, body)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	now := fixedNow
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fake := start(t, WithClock(clock), WithRateLimits(RateLimits{Requests: 500, Tokens: 30000}))
	fake.Enqueue(Reply{Text: "a", Usage: Usage{Prompt: 1000, Completion: 200}}, Reply{Text: "b", Usage: Usage{Prompt: 100, Completion: 100}})

	check := func(step string, want map[string]string, h http.Header) {
		t.Helper()
		for k, v := range want {
			if got := h.Get("x-ratelimit-" + k); got != v {
				t.Errorf("%s: %s = %q, want %q", step, k, got, v)
			}
		}
	}
	resp, _ := post(t, fake, chatBody("gpt-4o-mini", ""))
	check("first", map[string]string{
		"limit-requests": "500", "remaining-requests": "499", "reset-requests": "120ms",
		"limit-tokens": "30000", "remaining-tokens": "28800", "reset-tokens": "2.4s",
	}, resp.Header)
	resp, _ = post(t, fake, chatBody("gpt-4o-mini", ""))
	check("second", map[string]string{"remaining-requests": "498", "reset-requests": "240ms", "remaining-tokens": "28600", "reset-tokens": "2.8s"}, resp.Header)

	// Time refills the buckets at the limit per minute.
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	resp, _ = raw(t, fake, "GET", "/v1/models", nil, "")
	check("a second later", map[string]string{"remaining-requests": "500", "reset-requests": "0s", "remaining-tokens": "29100", "reset-tokens": "1.8s"}, resp.Header)
	mu.Lock()
	now = now.Add(6 * time.Minute)
	mu.Unlock()
	resp, _ = raw(t, fake, "GET", "/v1/models", nil, "")
	check("later", map[string]string{"remaining-tokens": "30000", "reset-tokens": "0s"}, resp.Header)

	// A scripted 429 reports its bucket as exhausted.
	fake.Enqueue(RateLimited(6 * time.Minute))
	resp, _ = post(t, fake, chatBody("gpt-4o-mini", ""))
	check("429", map[string]string{"remaining-tokens": "0", "reset-tokens": "6m0s", "remaining-requests": "499"}, resp.Header)
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 12 * time.Millisecond: "12ms", 2400 * time.Millisecond: "2.4s", 6 * time.Minute: "6m0s",
		time.Second: "1s", 1234567 * time.Microsecond: "1.235s", 400 * time.Microsecond: "0s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestMaskKey(t *testing.T) {
	for key, want := range map[string]string{
		"sk-abcdefghijklmnopqrstuvwxyz": "sk-ab***yz",
		"test-key":                      "te***y",
		"abc":                           "***",
		"":                              "***",
	} {
		if got := MaskKey(key); got != want {
			t.Errorf("MaskKey(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestCountTokensFormula(t *testing.T) {
	// The keys and strings of messages and tools, a separator after each:
	// "role user content abcd a bcd " is 29 ASCII bytes, ceil(29/4) = 8.
	// Other fields and whitespace do not count.
	body := `{"model":"m", "max_tokens": 5, "tools": [ {"a": "bcd"} ],
	  "messages": [ {"role": "user", "content": "abcd"} ]}`
	if got := CountTokens([]byte(body)); got != 8 {
		t.Errorf("CountTokens = %d, want 8", got)
	}
	if got := CountTokens([]byte(`{"model":"m"}`)); got != 1 {
		t.Errorf("CountTokens of nothing = %d, want 1", got)
	}
	if got := CountTokens([]byte(`not json`)); got != 1 {
		t.Errorf("CountTokens of garbage = %d, want 1", got)
	}
}

func TestSplitters(t *testing.T) {
	text := "I'd check the weather in Zürich — naïve café. Supercalifragilisticexpialidocious!"
	pieces := splitText(text)
	if strings.Join(pieces, "") != text || len(pieces) < 8 {
		t.Errorf("splitText = %q", pieces)
	}
	for _, p := range pieces {
		if !utf8.ValidString(p) || p == "" {
			t.Errorf("bad piece %q", p)
		}
	}
	if got := splitText("Hi"); !slices.Equal(got, []string{"Hi"}) {
		t.Errorf("splitText(Hi) = %q", got)
	}
	if got := splitText(""); len(got) != 0 {
		t.Errorf("splitText(\"\") = %q", got)
	}
	args := `{"city":"Zürich","q":"a:b, \"c\""}`
	frags := splitArgs(args)
	if strings.Join(frags, "") != args || len(frags) < 4 {
		t.Errorf("splitArgs = %q", frags)
	}
	for _, f := range frags {
		if !utf8.ValidString(f) {
			t.Errorf("fragment %q splits a rune", f)
		}
	}
	if got := fakekit.SpacedJSON([]byte(`{"a":"x:y, z","b":[1,2],"c":{"d":"\"e\":"}}`)); got != `{"a": "x:y, z", "b": [1, 2], "c": {"d": "\"e\":"}}` {
		t.Errorf("spacedJSON = %s", got)
	}
}

func TestVLLMTypes(t *testing.T) {
	for status, want := range map[int]string{400: "BadRequestError", 401: "UnauthorizedError", 404: "NotFoundError", 500: "InternalServerError", 503: "ServiceUnavailableError", 799: "InternalServerError"} {
		if got := vllmType(status); got != want {
			t.Errorf("vllmType(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestRawBodyAndCutFaults(t *testing.T) {
	fake := start(t)
	fake.Enqueue(Reply{RawBody: `{"not":"a completion"`}, BadGateway(), Reply{Status: 502, RawBody: BadGatewayHTML, RawContentType: "text/html", CutAfterBytes: 30})
	resp, body := post(t, fake, chatBody("gpt-4o-mini", ""))
	if resp.StatusCode != 200 || string(body) != `{"not":"a completion"` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("raw 200: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = post(t, fake, chatBody("gpt-4o-mini", `"stream":true`))
	if resp.StatusCode != 502 || string(body) != BadGatewayHTML || resp.Header.Get("Content-Type") != "text/html" || resp.Header.Get("x-request-id") == "" {
		t.Errorf("502: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", fake.URL()+"/v1/chat/completions", strings.NewReader(chatBody("gpt-4o-mini", "")))
	resp, err := fake.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1024)
	n, _ := resp.Body.Read(buf)
	_, err = resp.Body.Read(buf[n:])
	if resp.ContentLength != int64(len(BadGatewayHTML)) || err == nil || err.Error() != "unexpected EOF" {
		t.Errorf("cut raw body: length %d, read %d, err %v", resp.ContentLength, n, err)
	}
}

func TestEnqueuePanicsOnInvalidReply(t *testing.T) {
	fake := start(t)
	for _, r := range []Reply{
		{ToolCalls: []ToolCall{{Arguments: `{}`}}},
		{Status: 42},
		{CutAfterChunks: -1},
		{Usage: Usage{Prompt: -1}},
		{MidStreamError: &StreamError{AfterChunks: -2}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic for %+v", r)
				}
			}()
			fake.Enqueue(r)
		}()
	}
	// From a default-reply function the same mistake is a 500.
	bad := start(t, WithDefaultReply(func(Recorded) Reply { return ToolCallReply("", "{}") }))
	resp, body := post(t, bad, chatBody("gpt-4o-mini", ""))
	if resp.StatusCode != 500 || !strings.Contains(string(body), "invalid scripted reply") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestConcurrentCallsTakeEachReplyOnce(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			const n = 24
			want := make([]string, n)
			for i := range n {
				want[i] = fmt.Sprintf("reply-%02d", i)
				fake.Enqueue(TextReply(want[i]))
			}
			var (
				mu  sync.Mutex
				got []string
				wg  sync.WaitGroup
			)
			for i := range n {
				wg.Go(func() {
					extra := ""
					if i%2 == 1 {
						extra = `"stream":true`
					}
					resp, body := post(t, fake, chatBody(modelFor(f), extra))
					if resp.StatusCode != 200 {
						t.Errorf("%d %s", resp.StatusCode, body)
						return
					}
					var text string
					if extra == "" {
						text, _ = path(decodeMap(t, body), "choices", 0, "message", "content").(string)
					} else {
						for _, ev := range parseSSE(t, body) {
							if ev != "[DONE]" {
								s, _ := path(decodeMap(t, []byte(ev)), "choices", 0, "delta", "content").(string)
								text += s
							}
						}
					}
					mu.Lock()
					got = append(got, text)
					mu.Unlock()
					_ = fake.Requests()
					_ = fake.OpenConns()
				})
			}
			wg.Wait()
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("got %v", got)
			}
			if len(fake.Requests()) != n || fake.Pending(RouteChat) != 0 {
				t.Errorf("recorded %d, pending %d", len(fake.Requests()), fake.Pending(RouteChat))
			}
		})
	}
}

func TestStandaloneHandler(t *testing.T) {
	fake := NewUnstarted(WithFlavor(FlavorVLLM))
	defer fake.Close()
	if fake.URL() != "" || fake.Client() != nil || fake.Flavor() != FlavorVLLM {
		t.Error("unstarted fake has a URL or client")
	}
	ts := httptest.NewUnstartedServer(fake.Handler())
	ts.Config.ConnState = fake.ConnState
	ts.Start()
	defer ts.Close()

	fake.Enqueue(TextReply("standalone"))
	tr := &http.Transport{}
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", ts.URL+"/v1/chat/completions", strings.NewReader(chatBody("m", "")))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&cc)
	resp.Body.Close()
	if err != nil || cc.Choices[0].Message.Content != "standalone" {
		t.Fatalf("%+v %v", cc, err)
	}
	if fake.OpenConns() != 1 {
		t.Errorf("OpenConns = %d", fake.OpenConns())
	}
	tr.CloseIdleConnections()
	if err := fake.WaitOpenConns(testCtx(t), 0); err != nil {
		t.Error(err)
	}
}

// TestOpenAIMatchesSpec checks the OpenAI flavour's output against the
// required fields and examples of OpenAI's OpenAPI spec (testdata/spec).
func TestOpenAIMatchesSpec(t *testing.T) {
	var required map[string][]string
	readJSON(t, "spec/required.json", &required)
	var enums struct {
		FinishReason []string `json:"finish_reason"`
	}
	readJSON(t, "spec/enums.json", &enums)
	need := func(what string, v any, schema string) {
		t.Helper()
		for _, k := range required[schema] {
			if !has(v, k) {
				t.Errorf("%s lacks required %s.%s: %v", what, schema, k, v)
			}
		}
	}

	fake := start(t, WithAPIKey(testKey))
	fake.Enqueue(Reply{Text: "Hello.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}, streamScript(), InvalidRequest("nope"))
	_, body := post(t, fake, chatBody("gpt-4o-mini", ""))
	resp := decodeMap(t, body)
	need("response", resp, "CreateChatCompletionResponse")
	choice := path(resp, "choices", 0)
	need("choice", choice, "CreateChatCompletionResponse.choices[]")
	need("message", path(choice, "message"), "ChatCompletionResponseMessage")
	tc := path(choice, "message", "tool_calls", 0)
	need("tool call", tc, "ChatCompletionMessageToolCall")
	need("tool call function", path(tc, "function"), "ChatCompletionMessageToolCall.function")
	need("usage", resp["usage"], "CompletionUsage")
	if !slices.Contains(enums.FinishReason, path(choice, "finish_reason").(string)) {
		t.Errorf("finish_reason %v", path(choice, "finish_reason"))
	}
	// Every key of the spec's example response is there.
	var example map[string]any
	readJSON(t, "spec/response_example.json", &example)
	for _, p := range keyPaths("", example) {
		if !slices.Contains(keyPaths("", resp), p) {
			t.Errorf("response lacks %s of the spec example", p)
		}
	}

	_, body = post(t, fake, chatBody("gpt-4o-mini", `"stream":true`))
	events := parseSSE(t, body)
	var fakePaths []string
	for _, ev := range events[:len(events)-1] {
		c := decodeMap(t, []byte(ev))
		need("chunk", c, "CreateChatCompletionStreamResponse")
		for _, ch := range asSlice(c["choices"]) {
			need("chunk choice", ch, "CreateChatCompletionStreamResponse.choices[]")
			for _, d := range asSlice(path(ch, "delta", "tool_calls")) {
				need("tool call chunk", d, "ChatCompletionMessageToolCallChunk")
			}
		}
		fakePaths = append(fakePaths, keyPaths("", c)...)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "spec", "chunk_examples.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		for _, p := range keyPaths("", decodeMap(t, []byte(line))) {
			if !slices.Contains(fakePaths, p) {
				t.Errorf("stream lacks %s of the spec's chunk example", p)
			}
		}
	}

	_, body = post(t, fake, chatBody("gpt-4o-mini", ""))
	e := decodeMap(t, body)
	need("error body", e, "ErrorResponse")
	need("error", e["error"], "Error")

	_, body = raw(t, fake, "GET", "/v1/models", map[string]string{"Authorization": "Bearer " + testKey}, "")
	list := decodeMap(t, body)
	need("models", list, "ListModelsResponse")
	need("model", path(list, "data", 0), "Model")
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// keyPaths lists the key paths of a decoded JSON value ("choices.delta.role"),
// looking into the first element of arrays.
func keyPaths(prefix string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for k, child := range v {
			p := prefix + k
			out = append(out, p)
			out = append(out, keyPaths(p+".", child)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, keyPaths(prefix, e)...)
		}
		return out
	}
	return nil
}

// TestGoldenTranscripts replays one scripted session per flavour and
// compares it byte for byte with testdata/golden/<flavour>.txt (run with
// -update to rewrite them).
func TestGoldenTranscripts(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f), WithSeed(42), WithClock(fixedClock), WithAPIKey(testKey))
			model := modelFor(f)
			fake.Enqueue(
				Reply{Text: "Hello <b> & welcome!", Usage: Usage{Prompt: 21, Completion: 6, Cached: 8, Reasoning: 2}},
				Reply{Text: "Checking both.", ToolCalls: []ToolCall{
					{Name: "get_weather", Arguments: `{"city":"Paris"}`},
					{Name: "get_weather", Arguments: `{"city":"Zürich"}`},
				}, Usage: Usage{Prompt: 82, Completion: 17}},
				Reply{Text: "one two three", MidStreamError: &StreamError{Message: "upstream failed", AfterChunks: 2}},
				Reply{Text: "one two three", EndAfterChunks: 2},
			)
			auth := map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json"}
			steps := []struct{ method, path, body string }{
				{"POST", "/v1/chat/completions", chatBody(model, "")},
				{"POST", "/v1/chat/completions", chatBody(model, `"stream":true,"stream_options":{"include_usage":true}`)},
				{"POST", "/v1/chat/completions", chatBody(model, `"stream":true`)},
				{"POST", "/v1/chat/completions", chatBody(model, `"stream":true`)},
				{"POST", "/v1/chat/completions", `{"model":"` + model + `","messages":[]}`},
				{"GET", "/v1/models", ""},
				{"GET", "/v1/nope", ""},
			}
			var b strings.Builder
			for _, st := range steps {
				body := st.body
				resp, out := raw(t, fake, st.method, st.path, auth, body)
				fmt.Fprintf(&b, ">>> %s %s\n", st.method, st.path)
				if body != "" {
					fmt.Fprintf(&b, "%s\n", body)
				}
				fmt.Fprintf(&b, "<<< %d\n", resp.StatusCode)
				var hs []string
				for k, v := range resp.Header {
					if k != "Date" {
						hs = append(hs, strings.ToLower(k)+": "+strings.Join(v, ", "))
					}
				}
				sort.Strings(hs)
				fmt.Fprintf(&b, "%s\n\n%s", strings.Join(hs, "\n"), out)
				if !strings.HasSuffix(string(out), "\n") {
					b.WriteString("\n")
				}
				b.WriteString("\n")
			}
			file := filepath.Join("testdata", "golden", f.String()+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("transcript differs from %s (run with -update if intended)\ngot:\n%s", file, b.String())
			}
		})
	}
}
