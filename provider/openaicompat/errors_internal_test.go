package openaicompat

import (
	"net/http"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"

	"github.com/cortexbuild/cortexbuild/provider"
)

func TestParseErrorBodyLeniently(t *testing.T) {
	tests := []struct {
		name, body string
		want       errBody
		ok         bool
	}{
		{"openai", `{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, errBody{"invalid_request_error", "context_length_exceeded", "bad", "messages"}, true},
		{"vllm int code", `{"error":{"message":"too long","type":"BadRequestError","param":null,"code":400}}`, errBody{"BadRequestError", "400", "too long", ""}, true},
		{"vllm top level", `{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}`, errBody{"BadRequestError", "400", "too long", ""}, true},
		{"bare string", `{"error":"something broke"}`, errBody{Message: "something broke"}, true},
		{"fastapi detail", `{"detail":"Not Found"}`, errBody{Message: "Not Found"}, true},
		{"html", `<html><title>502 Bad Gateway</title></html>`, errBody{}, false},
		{"empty", ``, errBody{}, false},
		{"unrelated json", `{"foo":1}`, errBody{}, false},
	}
	for _, tt := range tests {
		got, ok := parseErrorBody([]byte(tt.body))
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: got %+v %v, want %+v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestClassifyBody(t *testing.T) {
	a := &Adapter{base: adapterkit.Base{Name: "x", Now: time.Now}}
	tests := []struct {
		name   string
		status int
		body   string
		hdr    map[string]string
		kind   provider.Kind
		retry  time.Duration
	}{
		{"openai overflow", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, nil, provider.KindContextWindowExceeded, 0},
		{"vllm overflow wording", 400, `{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","code":400}}`, nil, provider.KindContextWindowExceeded, 0},
		{"bad key", 401, `{"error":{"message":"Incorrect API key provided: sk-ab***yz.","type":"invalid_request_error","code":"invalid_api_key"}}`, nil, provider.KindAuth, 0},
		{"rate limit from message", 429, `{"error":{"message":"Rate limit reached ... Please try again in 2.4s.","type":"tokens","code":"rate_limit_exceeded"}}`, nil, provider.KindRateLimit, 2400 * time.Millisecond},
		{"rate limit ms header", 429, `{"error":{"message":"slow","code":"rate_limit_exceeded"}}`, map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, provider.KindRateLimit, 1500 * time.Millisecond},
		{"rate limit reset window", 429, `{"error":{"message":"slow","code":"rate_limit_exceeded"}}`, map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-requests": "10", "x-ratelimit-reset-requests": "12ms"}, provider.KindRateLimit, 6 * time.Minute},
		{"no quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, nil, provider.KindQuotaExhausted, 0},
		{"server", 500, `{"error":{"message":"The server had an error","type":"server_error"}}`, nil, provider.KindServer, 0},
		{"overloaded", 503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`, nil, provider.KindOverloaded, 0},
		{"html 502", 502, `<html><head><title>502 Bad Gateway</title></head></html>`, map[string]string{"content-type": "text/html"}, provider.KindServer, 0},
		{"ollama not found", 404, `{"error":{"message":"model \"x\" not found, try pulling it first","type":"not_found_error"}}`, nil, provider.KindBadRequest, 0},
		{"gateway bare string", 400, `{"error":"invalid model"}`, nil, provider.KindBadRequest, 0},
		{"gateway timeout", 504, `upstream timed out`, nil, provider.KindTimeout, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.hdr {
				h.Set(k, v)
			}
			pe := &provider.Error{}
			a.fromHTTP(pe, tt.status, h, []byte(tt.body))
			if pe.Kind != tt.kind || pe.RetryAfter != tt.retry {
				t.Errorf("kind %s retry %s, want %s %s (%v)", pe.Kind, pe.RetryAfter, tt.kind, tt.retry, pe)
			}
			if pe.Diagnostic.Message == "" {
				t.Error("no diagnostic message")
			}
		})
	}
}

func TestPriceRef(t *testing.T) {
	tests := []struct {
		p             Profile
		base, model   string
		wantNS, wantM string
	}{
		{OpenAI, "https://api.openai.com/v1/", "gpt-5", "openai", "gpt-5"},
		{Ollama, "http://10.1.2.3:11434/v1/", "llama3.2", "ollama", "llama3.2"},
		{Gateway, "https://gw.example/v1/", "anthropic/claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6"},
		{Gateway, "https://gw.example/v1/", "google/gemini-2.5-flash", "gemini", "gemini-2.5-flash"},
		{Gateway, "https://gw.example/v1/", "gpt-5-mini", "openai", "gpt-5-mini"},
		{Generic, "http://127.0.0.1:9999/v1/", "my-local", "ollama", "my-local"},
		{Generic, "http://[::1]:9999/v1/", "my-local", "ollama", "my-local"},
		{Generic, "https://llm.corp/v1/", "gpt-5", "openai", "gpt-5"},
	}
	for _, tt := range tests {
		ns, m := tt.p.priceRef(tt.base, tt.model)
		if ns != tt.wantNS || m != tt.wantM {
			t.Errorf("%s %s %s = %s/%s, want %s/%s", tt.p.Name, tt.base, tt.model, ns, m, tt.wantNS, tt.wantM)
		}
	}
}
