package gemini_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
)

func invoke(t *testing.T, a *gemini.Adapter, req *provider.Request) (*provider.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return a.Invoke(ctx, req)
}

var weather = provider.ToolDef{Name: "get_weather", Description: "Weather for a city",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}

// Gemini 3 rejects a function call sent back without its thought signature;
// the adapter carries it through provider metadata, byte for byte.
func TestThoughtSignaturesSurviveATwoTurnToolLoop(t *testing.T) {
	a, f := newEnv(t, geminifake.WithRequireThoughtSignatures())
	f.srv.Enqueue(geminifake.Reply{Thought: &geminifake.Thought{Text: "The user wants weather."},
		FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}})
	req := &provider.Request{Model: "gemini-3.1-pro-preview", Prompt: "Weather in Paris?", Tools: []provider.ToolDef{weather}}
	first, err := invoke(t, a, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.ToolCalls) != 1 || first.StopReason != provider.StopToolUse {
		t.Fatalf("first turn = %+v", first)
	}
	sig := first.ToolCalls[0].Meta[gemini.MetaThoughtSignature]
	if len(sig) == 0 {
		t.Fatalf("no thought signature kept: %+v", first.ToolCalls[0])
	}
	f.srv.Enqueue(geminifake.TextReply("It is 18C in Paris."))
	next := &provider.Request{Model: req.Model, Tools: req.Tools, Messages: []provider.Message{
		provider.UserText(req.Prompt), first.Message(),
		provider.ToolResults(provider.ToolResult{CallID: first.ToolCalls[0].ID, Content: "18C"}),
	}}
	res, err := invoke(t, a, next)
	if err != nil {
		t.Fatalf("second turn refused: %v", err)
	}
	if res.Content != "It is 18C in Paris." {
		t.Errorf("answer %q", res.Content)
	}
	g, _ := f.srv.Requests()[1].Generate()
	var fr *geminifake.FunctionResponse
	for _, c := range g.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				fr = p.FunctionResponse
			}
		}
	}
	if fr == nil || fr.Name != "get_weather" || fr.ID != first.ToolCalls[0].ID {
		t.Errorf("function response = %+v", fr)
	}

	// A call whose signature was lost (a history from another provider,
	// or a client that dropped it) is one the real API refuses: the
	// adapter sends the documented value that skips the check instead.
	stripped := first.Message()
	tc := *stripped.Parts[len(stripped.Parts)-1].ToolCall
	tc.Meta = nil
	stripped.Parts = []provider.Part{{Type: provider.PartToolCall, ToolCall: &tc}}
	next.Messages[1] = stripped
	f.srv.Enqueue(geminifake.TextReply("It is 18C in Paris."))
	if _, err := invoke(t, a, next); err != nil {
		t.Fatalf("without the signature: %v", err)
	}
	g, _ = f.srv.Requests()[2].Generate()
	if sig := g.Contents[1].Parts[0].ThoughtSignature; sig != base64.StdEncoding.EncodeToString([]byte(geminifake.SkipSignatureValidator)) {
		t.Errorf("a call without its signature was sent with %q", sig)
	}
}

func TestBlockedPromptIsABadRequest(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(geminifake.BlockedPrompt("PROHIBITED_CONTENT"))
	_, err := invoke(t, a, &provider.Request{Prompt: "something bad"})
	if provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "PROHIBITED_CONTENT") {
		t.Errorf("blocked prompt = %v", err)
	}
	f.srv.Enqueue(geminifake.BlockedPrompt("SAFETY"))
	s, err := a.Stream(context.Background(), &provider.Request{Prompt: "something bad"})
	if err == nil {
		_, err = provider.Collect(s)
	}
	if provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "SAFETY") {
		t.Errorf("blocked prompt in a stream = %v", err)
	}
}

// promptTokenCount already includes cached tokens and thoughts are billed
// as output: the cost must not count either twice.
func TestCostFollowsGeminiUsageSemantics(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(geminifake.Reply{Text: "ok", Usage: geminifake.Usage{Prompt: 11000, Cached: 10000, Candidates: 200, Thoughts: 300}})
	res, err := invoke(t, a, &provider.Request{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	u := res.Usage
	if u.InputTokens != 11000 || u.CacheReadTokens != 10000 || u.OutputTokens != 500 || u.ReasoningTokens != 300 {
		t.Errorf("usage = %+v", u)
	}
	// gemini-2.5-flash: 1000×0.30 + 10000×0.03 + 500×2.50 = 300 + 300 + 1250 = 1850 per million.
	if res.Cost != provider.MustMoney("0.00185") {
		t.Errorf("cost = %s, want 0.00185", res.Cost)
	}
	cat := catalog(t)
	want, _ := cat.Cost("gemini", "gemini-2.5-flash", u, time.Time{})
	if res.Cost != want {
		t.Errorf("cost %s differs from the catalog's %s", res.Cost, want)
	}
}

func TestErrorCases(t *testing.T) {
	tests := []struct {
		name  string
		reply geminifake.Reply
		kind  provider.Kind
		retry time.Duration
		code  string
	}{
		{"400 API_KEY_INVALID is auth", geminifake.APIKeyInvalid(), provider.KindAuth, 0, "API_KEY_INVALID"},
		{"403 permission is auth", geminifake.PermissionDenied(), provider.KindAuth, 0, ""},
		{"400 token overflow", geminifake.ContextOverflow(1_200_000, 1_048_576), provider.KindContextWindowExceeded, 0, ""},
		{"400 invalid argument", geminifake.InvalidArgument("bad"), provider.KindBadRequest, 0, ""},
		{"400 billing precondition", geminifake.BillingRequired(), provider.KindQuotaExhausted, 0, ""},
		{"404 model", geminifake.ModelNotFound("gemini-9"), provider.KindBadRequest, 0, ""},
		{"429 per minute", geminifake.RateLimited("gemini-2.5-flash", 31*time.Second), provider.KindRateLimit, 31 * time.Second, ""},
		{"429 per day", geminifake.DailyQuotaExceeded("gemini-2.5-flash", 20*time.Second), provider.KindQuotaExhausted, 0, geminifake.QuotaPerDay},
		{"500", geminifake.Internal(), provider.KindServer, 0, ""},
		{"503", geminifake.Unavailable(), provider.KindOverloaded, 0, ""},
		{"504", geminifake.DeadlineExceeded(), provider.KindTimeout, 0, ""},
		{"502 html", geminifake.BadGateway(), provider.KindServer, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, f := newEnv(t)
			f.srv.Enqueue(tt.reply)
			_, err := invoke(t, a, &provider.Request{Prompt: "hi"})
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *provider.Error", err)
			}
			if pe.Kind != tt.kind || pe.RetryAfter != tt.retry {
				t.Errorf("kind %s retry %s, want %s %s: %v", pe.Kind, pe.RetryAfter, tt.kind, tt.retry, err)
			}
			if tt.code != "" && pe.Diagnostic.Code != tt.code {
				t.Errorf("code %q, want %q", pe.Diagnostic.Code, tt.code)
			}
			if tt.name == "502 html" && !strings.Contains(pe.Diagnostic.Message, "non-JSON error page") {
				t.Errorf("diagnostic %q", pe.Diagnostic.Message)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the key: %v", err)
			}
		})
	}
}

func TestRateLimitStatusIsHonest(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(geminifake.TextReply("ok"))
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	if st := a.RateLimitStatus(context.Background()); st.Known() {
		t.Errorf("Gemini sends no limits, yet status = %+v", st)
	}
	f.srv.Enqueue(geminifake.RateLimited("gemini-2.5-flash", 12*time.Second))
	_, _ = invoke(t, a, &provider.Request{Prompt: "hi"})
	st := a.RateLimitStatus(context.Background())
	if st.RetryAfter != 12*time.Second || st.RequestsRemaining != nil || st.TokensRemaining != nil {
		t.Errorf("after a 429 status = %+v", st)
	}
}

func TestRequestMapping(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(geminifake.TextReply("ok"))
	_, err := invoke(t, a, &provider.Request{System: "Be terse.", Prompt: "hi", Tier: provider.TierFastCheap, MaxTokens: 321, Tools: []provider.ToolDef{weather}, ToolChoice: "get_weather"})
	if err != nil {
		t.Fatal(err)
	}
	r := f.srv.Requests()[0]
	g, _ := r.Generate()
	if r.Model != "gemini-2.5-flash-lite" || g.SystemInstruction == nil || g.SystemInstruction.Parts[0].Text != "Be terse." || *g.GenerationConfig.MaxOutputTokens != 321 {
		t.Errorf("request = model %s %+v", r.Model, g)
	}
	fd := g.Tools[0].FunctionDeclarations[0]
	var schema map[string]any
	_ = json.Unmarshal(fd.ParametersJSONSchema, &schema)
	if fd.Name != "get_weather" || schema["additionalProperties"] != false {
		t.Errorf("declaration = %+v", fd)
	}
	var tc struct {
		FunctionCallingConfig struct {
			Mode                 string
			AllowedFunctionNames []string
		}
	}
	_ = json.Unmarshal(g.ToolConfig, &tc)
	if tc.FunctionCallingConfig.Mode != "ANY" || len(tc.FunctionCallingConfig.AllowedFunctionNames) != 1 {
		t.Errorf("tool config = %s", g.ToolConfig)
	}
	if r.APIKey() != testKey {
		t.Error("key not sent")
	}
}

func TestCapabilitiesAndRegistration(t *testing.T) {
	a, _ := newEnv(t)
	caps := a.ModelCapabilities("gemini-2.5-pro")
	for _, c := range []provider.Capability{provider.CapToolUse, provider.CapStreaming, provider.CapLongContext200K, provider.CapLongContext1M} {
		if !caps.Has(c) {
			t.Errorf("gemini-2.5-pro lacks %s", c)
		}
	}
	reg := gemini.Registration()
	if f, _ := reg.Credential("api_key"); !f.Required || f.EnvVars[0] != "GEMINI_API_KEY" {
		t.Errorf("credentials = %+v", reg.Credentials)
	}
	if _, err := gemini.New(provider.Settings{}); err == nil {
		t.Error("New without a key succeeded")
	}
}
