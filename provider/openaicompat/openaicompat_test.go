package openaicompat_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

func invoke(t *testing.T, a *openaicompat.Adapter, req *provider.Request) (*provider.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return a.Invoke(ctx, req)
}

func TestErrorCasesThroughTheWire(t *testing.T) {
	tests := []struct {
		name   string
		fl     flavour
		opts   []openaifake.Option
		reply  openaifake.Reply
		kind   provider.Kind
		retry  time.Duration
		inDiag string
	}{
		{"openai overflow", flavours[0], nil, openaifake.ContextLengthExceeded(128000, 130000), provider.KindContextWindowExceeded, 0, "maximum context length"},
		{"vllm overflow int code", flavours[2], nil, openaifake.VLLMContextLengthExceeded(4096, 4000, 1000), provider.KindContextWindowExceeded, 0, "maximum context length"},
		{"vllm overflow string code", flavours[2], []openaifake.Option{openaifake.WithErrorStyle(openaifake.ErrorStyleVLLMStringCode)}, openaifake.VLLMContextLengthExceeded(4096, 4000, 1000), provider.KindContextWindowExceeded, 0, "maximum context length"},
		{"vllm legacy top-level error", flavours[2], []openaifake.Option{openaifake.WithErrorStyle(openaifake.ErrorStyleVLLMLegacy)}, openaifake.InvalidRequest("bad field"), provider.KindBadRequest, 0, "bad field"},
		{"bare string error", flavours[0], []openaifake.Option{openaifake.WithErrorStyle(openaifake.ErrorStyleBareString)}, openaifake.ServerError(), provider.KindServer, 0, ""},
		{"invalid key", flavours[0], nil, openaifake.InvalidAPIKey(testKey), provider.KindAuth, 0, "Incorrect API key"},
		{"rate limit, message delay", flavours[0], nil, openaifake.RateLimited(2400 * time.Millisecond), provider.KindRateLimit, 2400 * time.Millisecond, "try again"},
		{"rate limit, retry-after headers", flavours[0], nil, openaifake.RateLimitedRequests(5 * time.Second).WithRetryAfter(3 * time.Second), provider.KindRateLimit, 3 * time.Second, ""},
		{"insufficient quota", flavours[0], nil, openaifake.InsufficientQuota(), provider.KindQuotaExhausted, 0, "quota"},
		{"overloaded", flavours[0], nil, openaifake.Overloaded(), provider.KindOverloaded, 0, "overloaded"},
		{"html 502 from a proxy", flavours[0], nil, openaifake.BadGateway(), provider.KindServer, 0, "non-JSON error page from an intermediary (proxy or gateway): 502 Bad Gateway"},
		{"ollama unknown model", flavours[1], nil, openaifake.OllamaModelNotFound("llama9"), provider.KindBadRequest, 0, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, f := newEnv(t, tt.fl, tt.opts...)
			f.srv.Enqueue(tt.reply)
			_, err := invoke(t, a, &provider.Request{Prompt: "hi"})
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
			}
			if pe.Kind != tt.kind || pe.RetryAfter != tt.retry {
				t.Errorf("kind %s retry %s, want %s %s: %v", pe.Kind, pe.RetryAfter, tt.kind, tt.retry, err)
			}
			if !strings.Contains(pe.Diagnostic.Message, tt.inDiag) {
				t.Errorf("diagnostic %q lacks %q", pe.Diagnostic.Message, tt.inDiag)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the key: %v", err)
			}
		})
	}
}

// Servers that send no usage in a stream get an estimate, marked as such.
func TestStreamUsageEstimatedWithoutUsageChunk(t *testing.T) {
	srv := openaifake.New(openaifake.WithFlavor(openaifake.FlavorVLLM))
	t.Cleanup(srv.Close)
	a, err := openaicompat.New(provider.Settings{Name: "lm", Profile: "lmstudio", BaseURL: srv.URL() + "/v1", Models: map[provider.Tier]string{provider.TierBalanced: "qwen2.5"}, Pricer: catalog(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(openaifake.TextReply("Four score and seven years ago our fathers brought forth"))
	s, err := a.Stream(context.Background(), &provider.Request{Prompt: "recite"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := provider.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Requests()[0].IncludeUsage() {
		t.Error("lmstudio profile asked for include_usage")
	}
	if !res.Usage.Estimated || res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 || res.Cost != 0 {
		t.Errorf("usage %+v cost %s: want an estimate and zero cost on a local server", res.Usage, res.Cost)
	}
}

// A stream that ends cleanly without [DONE] but with its finish reason is
// complete; one that ends before its finish reason is truncated.
func TestStreamEndWithoutDone(t *testing.T) {
	a, f := newEnv(t, flavours[0], openaifake.WithoutDone())
	f.srv.Enqueue(openaifake.TextReply("complete answer"))
	s, _ := a.Stream(context.Background(), &provider.Request{Prompt: "hi"})
	if res, err := provider.Collect(s); err != nil || res.Content != "complete answer" || res.Usage.Estimated {
		t.Errorf("no [DONE]: %+v %v", res, err)
	}
	f.srv.Enqueue(openaifake.Reply{Text: "an answer that stops early without a finish reason", EndAfterChunks: 2})
	s, _ = a.Stream(context.Background(), &provider.Request{Prompt: "hi"})
	_, err := provider.Collect(s)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.KindNetwork || pe.Usage == nil || !pe.Usage.Estimated {
		t.Errorf("early end = %v (usage %+v), want truncated network error with estimated partial usage", err, pe)
	}
}

func TestWireShapePerProfile(t *testing.T) {
	for _, fl := range flavours {
		t.Run(fl.profile, func(t *testing.T) {
			a, f := newEnv(t, fl)
			f.srv.Enqueue(openaifake.TextReply("ok"))
			s, err := a.Stream(context.Background(), &provider.Request{System: "Be terse.", Prompt: "hi", MaxTokens: 77})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := provider.Collect(s); err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			r := f.srv.Requests()[0]
			_ = r.Decode(&body)
			_, mct := body["max_completion_tokens"]
			_, mt := body["max_tokens"]
			role := r.Messages()[0].Role
			if fl.profile == "openai" {
				if !mct || mt || role != "developer" {
					t.Errorf("openai: max_completion_tokens %v max_tokens %v role %s", mct, mt, role)
				}
			} else if mct || !mt || role != "system" {
				t.Errorf("%s: max_completion_tokens %v max_tokens %v role %s", fl.profile, mct, mt, role)
			}
			if !r.IncludeUsage() {
				t.Errorf("%s: include_usage not requested", fl.profile)
			}
		})
	}
}

// Nothing from the environment reaches the server: not the key, not the
// base URL, not an organisation or custom header.
func TestEnvironmentIsIgnored(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env-WRONG")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	t.Setenv("OPENAI_PROJECT_ID", "proj-from-env")
	t.Setenv("OPENAI_ADMIN_KEY", "sk-admin-from-env-WRONG")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: secret-from-env")
	a, f := newEnv(t, flavours[0])
	f.srv.Enqueue(openaifake.TextReply("ok"))
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	h := f.srv.Requests()[0].Header
	if h.Get("Authorization") != "Bearer "+testKey || h.Get("OpenAI-Organization") != "" || h.Get("OpenAI-Project") != "" || h.Get("X-Leak") != "" {
		t.Errorf("headers sent: %v", h)
	}
}

func TestNoSDKRetries(t *testing.T) {
	a, f := newEnv(t, flavours[0])
	f.srv.Enqueue(openaifake.ServerError(), openaifake.TextReply("second"))
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); provider.KindOf(err) != provider.KindServer {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.srv.Requests()); n != 1 {
		t.Errorf("%d requests for one invoke: the SDK retried", n)
	}
}

func TestProfilesAndSettings(t *testing.T) {
	if _, err := openaicompat.New(provider.Settings{Profile: "openai"}); err == nil {
		t.Error("the openai profile started without a key")
	}
	if _, err := openaicompat.New(provider.Settings{Profile: "gateway"}); err == nil {
		t.Error("the gateway profile started without a base_url")
	}
	if _, err := openaicompat.New(provider.Settings{Profile: "olama"}); err == nil {
		t.Error("an unknown profile was accepted")
	}
	a, err := openaicompat.New(provider.Settings{Profile: "ollama", Capabilities: provider.NewCapabilitySet(provider.CapVision)})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Capabilities().Has(provider.CapVision) || a.Capabilities().Has(provider.CapPromptCaching) {
		t.Errorf("ollama capabilities = %v", a.Capabilities())
	}
	if _, err := a.Invoke(context.Background(), &provider.Request{Prompt: "hi"}); provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "models.balanced") {
		t.Errorf("no model configured: %v", err)
	}
	o, _ := openaicompat.New(provider.Settings{Profile: "openai", Credentials: map[string]string{"api_key": "k"}, Pricer: catalog(t)})
	caps := o.ModelCapabilities("gpt-5.4")
	if !caps.Has(provider.CapLongContext1M) || !caps.Has(provider.CapPromptCaching) || !caps.Has(provider.CapToolUse) {
		t.Errorf("gpt-5.4 capabilities = %v", caps)
	}
	reg := openaicompat.Registration()
	if f, _ := reg.Credential("api_key"); !f.RequiredFor("openai") || f.RequiredFor("ollama") {
		t.Errorf("credential schema = %+v", f)
	}
}

func TestRateLimitStatusAndHealth(t *testing.T) {
	a, f := newEnv(t, flavours[0])
	f.srv.Enqueue(openaifake.TextReply("ok"))
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	st := a.RateLimitStatus(context.Background())
	if st.RequestsRemaining == nil || *st.RequestsRemaining != 4999 || st.ResetAt.IsZero() {
		t.Errorf("status = %+v", st)
	}
	if h := a.HealthCheck(context.Background()); !h.Healthy {
		t.Errorf("health = %+v", h)
	}
	if r := f.srv.Requests(); r[len(r)-1].Path != "/v1/models" {
		t.Errorf("health probe hit %s", r[len(r)-1].Path)
	}
}

// Strict tools and parallel tool calls off reach Chat Completions as
// function.strict and parallel_tool_calls: false; neither is sent unset.
func TestStrictToolsAndSerialCalls(t *testing.T) {
	a, f := newEnv(t, flavours[0])
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`)
	for _, serial := range []bool{true, false} {
		req := &provider.Request{Prompt: "hi", DisableParallelToolCalls: serial, Tools: []provider.ToolDef{{Name: "a", Strict: serial, InputSchema: schema}}}
		if _, err := invoke(t, a, req); err != nil {
			t.Fatal(err)
		}
		reqs := f.srv.Requests()
		var body struct {
			ParallelToolCalls *bool `json:"parallel_tool_calls"`
			Tools             []struct {
				Function struct{ Strict *bool } `json:"function"`
			} `json:"tools"`
		}
		if err := reqs[len(reqs)-1].Decode(&body); err != nil {
			t.Fatal(err)
		}
		if serial && (body.ParallelToolCalls == nil || *body.ParallelToolCalls || body.Tools[0].Function.Strict == nil || !*body.Tools[0].Function.Strict) {
			t.Errorf("set: parallel_tool_calls %v, strict %v", body.ParallelToolCalls, body.Tools[0].Function.Strict)
		}
		if !serial && (body.ParallelToolCalls != nil || body.Tools[0].Function.Strict != nil) {
			t.Errorf("unset: parallel_tool_calls %v, strict %v", body.ParallelToolCalls, body.Tools[0].Function.Strict)
		}
	}
}
