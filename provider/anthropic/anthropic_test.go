package anthropic_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func invoke(t *testing.T, a *anthropic.Adapter, req *provider.Request) (*provider.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return a.Invoke(ctx, req)
}

// Every row of the error table in protocols.md §1.5, classified on body and status.
func TestErrorTable(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name  string
		reply anthropicfake.Reply
		kind  provider.Kind
		retry time.Duration // exact, or -1 for "about 90s"
		typ   string
	}{
		{"400 invalid request", anthropicfake.InvalidRequest("messages: Field required"), provider.KindBadRequest, 0, "invalid_request_error"},
		{"400 prompt too long", anthropicfake.PromptTooLong(210_345, 200_000), provider.KindContextWindowExceeded, 0, "invalid_request_error"},
		{"401 authentication", anthropicfake.AuthError(), provider.KindAuth, 0, "authentication_error"},
		{"402 billing", anthropicfake.BillingError(), provider.KindQuotaExhausted, 0, "billing_error"},
		{"403 permission", anthropicfake.PermissionError(), provider.KindAuth, 0, "permission_error"},
		{"404 not found", anthropicfake.NotFound(), provider.KindBadRequest, 0, "not_found_error"},
		{"404 unknown model", anthropicfake.ModelNotFound("claude-nope"), provider.KindBadRequest, 0, "not_found_error"},
		{"409 conflict", anthropicfake.Conflict(), provider.KindServer, 0, "conflict_error"},
		{"413 request too large", anthropicfake.RequestTooLarge(), provider.KindBadRequest, 0, "request_too_large"},
		{"429 rate limit retry-after", anthropicfake.RateLimited("2"), provider.KindRateLimit, 2 * time.Second, "rate_limit_error"},
		{"429 rate limit retry-after-ms", anthropicfake.RateLimitedMs(1500), provider.KindRateLimit, 1500 * time.Millisecond, "rate_limit_error"},
		{"429 rate limit HTTP date", anthropicfake.RateLimited(date), provider.KindRateLimit, -1, "rate_limit_error"},
		{"429 spend limit", anthropicfake.SpendLimitReached(), provider.KindQuotaExhausted, 0, "rate_limit_error"},
		{"500 api error", anthropicfake.APIError(), provider.KindServer, 0, "api_error"},
		{"502 HTML from a proxy", anthropicfake.BadGateway(), provider.KindServer, 0, ""},
		{"504 timeout", anthropicfake.TimeoutError(), provider.KindTimeout, 0, "timeout_error"},
		{"529 overloaded", anthropicfake.Overloaded(), provider.KindOverloaded, 0, "overloaded_error"},
		{"529 overloaded with retry-after", anthropicfake.Overloaded().WithHeader("retry-after", "5"), provider.KindOverloaded, 5 * time.Second, "overloaded_error"},
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
			if pe.Kind != tt.kind {
				t.Errorf("kind = %s, want %s (%v)", pe.Kind, tt.kind, err)
			}
			switch {
			case tt.retry == -1 && (pe.RetryAfter < 80*time.Second || pe.RetryAfter > 91*time.Second):
				t.Errorf("retry after = %s, want about 90s", pe.RetryAfter)
			case tt.retry >= 0 && pe.RetryAfter != tt.retry:
				t.Errorf("retry after = %s, want %s", pe.RetryAfter, tt.retry)
			}
			if pe.Diagnostic.Type != tt.typ || pe.Diagnostic.Status == 0 || !strings.HasPrefix(pe.Diagnostic.RequestID, "req_") {
				t.Errorf("diagnostic = %+v", pe.Diagnostic)
			}
			if tt.typ == "" && !strings.Contains(pe.Diagnostic.Message, "non-JSON error page") {
				t.Errorf("HTML page diagnostic = %q", pe.Diagnostic.Message)
			}
			if tt.name == "429 spend limit" && pe.Diagnostic.Code != "enforced_spend_limit_reached" {
				t.Errorf("code = %q", pe.Diagnostic.Code)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the key: %v", err)
			}
		})
	}
}

// A proxy that strips the request-id header leaves the error body's
// request_id: the diagnostic takes it from there, streamed or not.
func TestErrorRequestIDFromBody(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a, f := newEnv(t)
			f.srv.Enqueue(anthropicfake.Overloaded().WithHeader("request-id", ""))
			var err error
			if stream {
				var st provider.Stream
				if st, err = a.Stream(context.Background(), &provider.Request{Prompt: "hi"}); err == nil {
					defer st.Close()
					_, err = st.Recv()
				}
			} else {
				_, err = invoke(t, a, &provider.Request{Prompt: "hi"})
			}
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *provider.Error", err)
			}
			want := f.srv.Requests()[0].RequestID
			if !strings.HasPrefix(want, "req_") || pe.Diagnostic.RequestID != want {
				t.Errorf("request id = %q, want %q from the body", pe.Diagnostic.RequestID, want)
			}
		})
	}
}

func TestTransportFailuresAndTimeouts(t *testing.T) {
	t.Run("connection refused is a network error", func(t *testing.T) {
		a, f := newEnv(t)
		f.srv.Close()
		_, err := invoke(t, a, &provider.Request{Prompt: "hi"})
		if provider.KindOf(err) != provider.KindNetwork {
			t.Errorf("kind = %s: %v", provider.KindOf(err), err)
		}
	})
	t.Run("attempt timeout", func(t *testing.T) {
		a, f := newEnv(t)
		gate := make(chan struct{})
		defer close(gate)
		f.srv.Enqueue(anthropicfake.TextReply("late").WithHold(gate))
		_, err := invoke(t, a, &provider.Request{Prompt: "hi", Timeout: 50 * time.Millisecond})
		if provider.KindOf(err) != provider.KindTimeout {
			t.Errorf("kind = %s: %v", provider.KindOf(err), err)
		}
	})
	t.Run("caller cancel", func(t *testing.T) {
		a, f := newEnv(t)
		gate := make(chan struct{})
		defer close(gate)
		f.srv.Enqueue(anthropicfake.TextReply("never").WithHold(gate))
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_ = f.srv.WaitRequests(context.Background(), 1)
			cancel()
		}()
		_, err := a.Invoke(ctx, &provider.Request{Prompt: "hi"})
		if provider.KindOf(err) != provider.KindCanceled || !errors.Is(err, context.Canceled) {
			t.Errorf("kind = %s: %v", provider.KindOf(err), err)
		}
	})
	t.Run("cut body", func(t *testing.T) {
		a, f := newEnv(t)
		f.srv.Enqueue(anthropicfake.Reply{Text: "a complete answer that is cut", CutAfterBytes: 40})
		_, err := invoke(t, a, &provider.Request{Prompt: "hi"})
		if k := provider.KindOf(err); k != provider.KindNetwork && k != provider.KindServer {
			t.Errorf("kind = %s: %v", k, err)
		}
	})
}

// The SDK must never read ANTHROPIC_* variables behind the configuration.
func TestEnvironmentIsIgnored(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-WRONG")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env-WRONG")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.TextReply("ok"))
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	r := f.srv.Requests()[0]
	if r.APIKey() != testKey || r.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("auth sent: key %q, authorization %q", r.APIKey(), r.Header.Get("Authorization"))
	}
	if r.Header.Get("anthropic-version") == "" {
		t.Error("no anthropic-version header")
	}
}

func TestNoSDKRetries(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.Overloaded(), anthropicfake.TextReply("second"))
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); provider.KindOf(err) != provider.KindOverloaded {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.srv.Requests()); n != 1 {
		t.Errorf("%d requests for one invoke: the SDK retried", n)
	}
}

func TestPromptCachingMarksStablePrefix(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.Reply{Text: "cached", Usage: anthropicfake.Usage{Input: 10, Output: 5, CacheRead: 3000, CacheCreation1h: 500}})
	res, err := invoke(t, a, &provider.Request{System: "Long stable instructions.", Prompt: "go", PromptCache: provider.PromptCache1h,
		Tools: []provider.ToolDef{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", InputSchema: json.RawMessage(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		System []struct {
			CacheControl *struct{ Type, TTL string } `json:"cache_control"`
		} `json:"system"`
		Tools []struct {
			Name         string
			CacheControl *struct{ Type, TTL string } `json:"cache_control"`
		} `json:"tools"`
	}
	if err := f.srv.Requests()[0].Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.System) != 1 || body.System[0].CacheControl == nil || body.System[0].CacheControl.TTL != "1h" {
		t.Errorf("system cache_control = %+v", body.System)
	}
	if len(body.Tools) != 2 || body.Tools[0].CacheControl != nil || body.Tools[1].CacheControl == nil || body.Tools[1].CacheControl.Type != "ephemeral" {
		t.Errorf("tools cache_control = %+v", body.Tools)
	}
	u := res.Usage
	if u.CacheReadTokens != 3000 || u.CacheWriteTokens != 500 || u.CacheWriteLongTokens != 500 || u.InputTokens != 3510 {
		t.Errorf("usage = %+v", u)
	}
	// Sonnet 4.6: 10×3 + 3000×0.30 + 500×6 (1 h write) + 5×15 = 30+900+3000+75 = 4005 per million.
	if res.Cost != provider.MustMoney("0.004005") {
		t.Errorf("cost = %s, want 0.004005", res.Cost)
	}
}

func TestThinkingSignatureRoundTrip(t *testing.T) {
	a, f := newEnv(t)
	sig := "EqQBCkgIARABGAIiQL2tSignature+/=="
	f.srv.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: "I should call the tool.", Signature: sig},
		ToolUses: []anthropicfake.ToolUse{{ID: "toolu_01A", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}})
	req := &provider.Request{Prompt: "weather?", Tools: []provider.ToolDef{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	first, err := invoke(t, a, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Parts) != 2 || first.Parts[0].Type != provider.PartReasoning {
		t.Fatalf("parts = %+v", first.Parts)
	}
	f.srv.Enqueue(anthropicfake.TextReply("18C"))
	next := &provider.Request{Tools: req.Tools, Messages: []provider.Message{provider.UserText("weather?"), first.Message(),
		provider.ToolResults(provider.ToolResult{CallID: "toolu_01A", Content: "18C"})}}
	if _, err := invoke(t, a, next); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string
			Content []struct{ Type, Thinking, Signature string }
		}
	}
	if err := f.srv.Requests()[1].Decode(&body); err != nil {
		t.Fatal(err)
	}
	asst := body.Messages[1]
	if asst.Role != "assistant" || asst.Content[0].Type != "thinking" || asst.Content[0].Signature != sig || asst.Content[0].Thinking != "I should call the tool." {
		t.Errorf("assistant turn sent back as %+v", asst)
	}
}

func TestStreamThinkingSignature(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: "hmm", Signature: "sig-1"}, Text: "answer"})
	s, err := a.Stream(context.Background(), &provider.Request{Prompt: "q"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := provider.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Parts) != 2 || string(res.Parts[0].Meta[anthropic.MetaSignature]) != `"sig-1"` || res.Parts[0].Text != "hmm" || res.Content != "answer" {
		t.Errorf("parts = %+v", res.Parts)
	}
}

func TestRequestMapping(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.TextReply("ok"))
	schema := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false,"$defs":{"x":{"type":"number"}}}`)
	_, err := invoke(t, a, &provider.Request{Prompt: "hi", Tier: provider.TierFastCheap, MaxTokens: 64000, ToolChoice: "search",
		Tools: []provider.ToolDef{{Name: "search", Description: "Search the code", InputSchema: schema}}})
	if err != nil {
		t.Fatal(err) // also proves the SDK's long-request pre-check is bypassed
	}
	var body struct {
		Model      string
		MaxTokens  int                         `json:"max_tokens"`
		ToolChoice struct{ Type, Name string } `json:"tool_choice"`
		Tools      []struct {
			Description string
			InputSchema map[string]any `json:"input_schema"`
		}
	}
	if err := f.srv.Requests()[0].Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "claude-haiku-4-5" || body.MaxTokens != 64000 || body.ToolChoice.Type != "tool" || body.ToolChoice.Name != "search" {
		t.Errorf("body = %+v", body)
	}
	s := body.Tools[0].InputSchema
	if s["type"] != "object" || s["additionalProperties"] != false || s["$defs"] == nil || s["required"] == nil || body.Tools[0].Description != "Search the code" {
		t.Errorf("schema sent as %v", s)
	}
	// An explicit model and a configured tier mapping win over the defaults.
	b, _ := anthropic.New(provider.Settings{Name: "c", BaseURL: f.srv.URL(), Credentials: map[string]string{"api_key": testKey}, Models: map[provider.Tier]string{provider.TierBalanced: "claude-sonnet-5-5"}})
	if b.ModelFor(provider.TierBalanced) != "claude-sonnet-5-5" || b.ModelFor(provider.TierReasoningHeavy) != "claude-opus-4-7" {
		t.Errorf("tier mapping = %s / %s", b.ModelFor(provider.TierBalanced), b.ModelFor(provider.TierReasoningHeavy))
	}
	f.srv.Enqueue(anthropicfake.TextReply("ok"))
	if _, err := invoke(t, b, &provider.Request{Prompt: "hi", Model: "claude-opus-4-5"}); err != nil {
		t.Fatal(err)
	}
	var b2 struct{ Model string }
	_ = f.srv.Requests()[1].Decode(&b2)
	if b2.Model != "claude-opus-4-5" {
		t.Errorf("explicit model sent as %q", b2.Model)
	}
	if _, err := anthropic.New(provider.Settings{Name: "x"}); err == nil {
		t.Error("New without a key succeeded")
	}
	bad := &provider.Request{Prompt: "x", Tools: []provider.ToolDef{{Name: "t", InputSchema: json.RawMessage(`{"type":"array"}`)}}}
	if _, err := invoke(t, a, bad); provider.KindOf(err) != provider.KindBadRequest || len(f.srv.Requests()) != 2 {
		t.Errorf("non-object schema = %v", err)
	}
}

func TestSecretsRedactedFromProviderMessages(t *testing.T) {
	a, f := newEnv(t)
	f.srv.Enqueue(anthropicfake.ErrorReply(400, "invalid_request_error", "key "+testKey+" is not allowed here"))
	_, err := invoke(t, a, &provider.Request{Prompt: "hi"})
	if err == nil || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("error = %v", err)
	}
}

func TestCapabilitiesPerModel(t *testing.T) {
	a, _ := newEnv(t)
	opus := a.ModelCapabilities("claude-opus-4-7")
	haiku := a.ModelCapabilities("claude-haiku-4-5")
	for _, c := range []provider.Capability{provider.CapToolUse, provider.CapStreaming, provider.CapPromptCaching, provider.CapCodeExecution, provider.CapLongContext200K} {
		if !opus.Has(c) || !haiku.Has(c) {
			t.Errorf("missing %s: opus %v haiku %v", c, opus, haiku)
		}
	}
	if !opus.Has(provider.CapLongContext1M) || haiku.Has(provider.CapLongContext1M) {
		t.Errorf("1M context: opus %v haiku %v", opus, haiku)
	}
	if !a.Capabilities().Has(provider.CapLongContext1M) {
		t.Error("adapter capabilities lack 1M although opus and sonnet have it")
	}
	reg := anthropic.Registration()
	if f, ok := reg.Credential("api_key"); !ok || !f.Secret || !f.Required || f.EnvVars[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("credential schema = %+v", reg.Credentials)
	}
	if reg.DefaultModels[provider.TierReasoningHeavy] != "claude-opus-4-7" || reg.DefaultModels[provider.TierBalanced] != "claude-sonnet-4-6" || reg.DefaultModels[provider.TierFastCheap] != "claude-haiku-4-5" {
		t.Errorf("default tiers = %v", reg.DefaultModels)
	}
}

func TestRateLimitStatusFromRecordedHeaders(t *testing.T) {
	a, f := newEnv(t)
	if st := a.RateLimitStatus(context.Background()); st.Known() {
		t.Errorf("status before any call = %+v", st)
	}
	f.srv.Enqueue(anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 394, Output: 79}})
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	st := a.RateLimitStatus(context.Background())
	if st.RequestsRemaining == nil || *st.RequestsRemaining != 3999 || st.TokensRemaining == nil || *st.TokensRemaining != 279000 || st.ResetAt.IsZero() {
		t.Errorf("status = %+v", st)
	}
	// A 429 records its retry delay too.
	f.srv.Enqueue(anthropicfake.RateLimited("3"))
	_, _ = invoke(t, a, &provider.Request{Prompt: "hi"})
	if st := a.RateLimitStatus(context.Background()); st.RetryAfter != 3*time.Second {
		t.Errorf("retry after = %s", st.RetryAfter)
	}
}

func TestHealthCheckSpendsNoTokens(t *testing.T) {
	a, f := newEnv(t)
	st := a.HealthCheck(context.Background())
	if !st.Healthy {
		t.Fatalf("health = %+v", st)
	}
	r := f.srv.Requests()
	if len(r) != 1 || r[0].Path != "/v1/models" || r[0].Query().Get("limit") != "1" {
		t.Errorf("health probe = %+v", r)
	}
}

// The caller's cache marks go where it put them (parts and tools, with
// their lifetimes); PromptCache's own marks, on the system prompt and the
// last tool, fill what is left of the API's four and are the ones left
// out when there is no room (the fake refuses a fifth).
func TestCacheMarksWhereTheCallerPutThem(t *testing.T) {
	type cc = *struct{ Type, TTL string }
	type sent struct {
		System []struct {
			CacheControl cc `json:"cache_control"`
		} `json:"system"`
		Tools []struct {
			CacheControl cc `json:"cache_control"`
		} `json:"tools"`
		Messages []struct {
			Content []struct {
				Type         string
				CacheControl cc `json:"cache_control"`
			} `json:"content"`
		} `json:"messages"`
	}
	tools := func() []provider.ToolDef {
		return []provider.ToolDef{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "b"}}
	}
	conv := func(marks ...provider.PromptCache) []provider.Message {
		var msgs []provider.Message
		for i, m := range marks {
			role := provider.RoleUser
			if i%2 == 1 {
				role = provider.RoleAssistant
			}
			msgs = append(msgs, provider.Message{Role: role, Parts: []provider.Part{{Type: provider.PartText, Text: fmt.Sprintf("turn %d", i), Cache: m}}})
		}
		return msgs
	}
	ttl := func(c cc) string {
		if c == nil {
			return "-"
		}
		return cmp.Or(c.TTL, "5m") // the API's default
	}
	for _, c := range []struct {
		name     string
		req      provider.Request
		system   string // the system block's mark: "-" none, else its ttl
		tools    string // each tool's mark
		messages string // each message's mark
	}{
		{"the caller's marks and ours",
			provider.Request{System: "s", Tools: tools(), PromptCache: provider.PromptCache1h, Messages: conv("", "5m", "1h")},
			"1h", "- 1h", "- 5m 1h"},
		{"a marked tool needs no mark of ours",
			provider.Request{System: "s", Tools: []provider.ToolDef{{Name: "a"}, {Name: "b", Cache: provider.PromptCache5m}}, PromptCache: provider.PromptCache1h, Messages: conv("5m", "", "5m")},
			"1h", "- 5m", "5m - 5m"},
		{"three of the caller's: our tool mark is dropped",
			provider.Request{System: "s", Tools: tools(), PromptCache: provider.PromptCache5m, Messages: conv("5m", "5m", "5m")},
			"5m", "- -", "5m 5m 5m"},
		{"four of the caller's: both of ours are dropped",
			provider.Request{System: "s", Tools: tools(), PromptCache: provider.PromptCache5m, Messages: conv("5m", "5m", "5m", "1h")},
			"-", "- -", "5m 5m 5m 1h"},
		{"no PromptCache: only the caller's",
			provider.Request{System: "s", Tools: tools(), Messages: conv("", "1h")},
			"-", "- -", "- 1h"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, f := newEnv(t)
			if _, err := invoke(t, a, &c.req); err != nil {
				t.Fatal(err)
			}
			var body sent
			if err := f.srv.Requests()[0].Decode(&body); err != nil {
				t.Fatal(err)
			}
			var tl, ml []string
			for _, tt := range body.Tools {
				tl = append(tl, ttl(tt.CacheControl))
			}
			for _, m := range body.Messages {
				ml = append(ml, ttl(m.Content[0].CacheControl))
			}
			if got := ttl(body.System[0].CacheControl); got != c.system {
				t.Errorf("system mark = %s, want %s", got, c.system)
			}
			if got := strings.Join(tl, " "); got != c.tools {
				t.Errorf("tool marks = %s, want %s", got, c.tools)
			}
			if got := strings.Join(ml, " "); got != c.messages {
				t.Errorf("message marks = %s, want %s", got, c.messages)
			}
			m := c.req.CacheMarks(anthropic.MaxCacheMarks)
			if c.system == "-" && c.req.PromptCache != "" && !slices.Contains(m.Dropped, "system") {
				t.Errorf("dropped = %v, want the system mark named", m.Dropped)
			}
		})
	}
}

// Tool settings reach the API: every tool has an input_schema (the API
// requires one; a tool declared without arguments gets empty properties),
// strict, and disable_parallel_tool_use on every tool choice; anthropic-beta
// values from the request's metadata are sent as headers.
func TestToolSettingsAndBetas(t *testing.T) {
	for _, choice := range []provider.ToolChoice{"", provider.ToolChoiceRequired, "b"} {
		a, f := newEnv(t)
		req := &provider.Request{Prompt: "hi", ToolChoice: choice, DisableParallelToolCalls: true,
			Tools: []provider.ToolDef{{Name: "a", Strict: true, InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`)}, {Name: "b"}},
			Meta:  provider.Metadata{anthropic.MetaBeta: json.RawMessage(`["fine-grained-tool-streaming-2025-05-14","context-1m-2025-08-07"]`)}}
		if _, err := invoke(t, a, req); err != nil {
			t.Fatalf("choice %q: %v", choice, err)
		}
		rec := f.srv.Requests()[0]
		var body struct {
			Tools []struct {
				Name        string
				Strict      *bool
				InputSchema map[string]any `json:"input_schema"`
			}
			ToolChoice struct {
				Type                   string
				DisableParallelToolUse *bool `json:"disable_parallel_tool_use"`
			} `json:"tool_choice"`
		}
		if err := rec.Decode(&body); err != nil {
			t.Fatal(err)
		}
		if len(body.Tools) != 2 || body.Tools[0].Strict == nil || !*body.Tools[0].Strict || body.Tools[1].Strict != nil {
			t.Errorf("choice %q: strict = %+v", choice, body.Tools)
		}
		if s := body.Tools[1].InputSchema; s["type"] != "object" || s["properties"] == nil {
			t.Errorf("choice %q: a tool without arguments is sent with input_schema %v", choice, s)
		}
		if d := body.ToolChoice.DisableParallelToolUse; d == nil || !*d {
			t.Errorf("choice %q: tool_choice = %+v, want disable_parallel_tool_use", choice, body.ToolChoice)
		}
		if got := rec.Header.Values("anthropic-beta"); strings.Join(got, ",") != "fine-grained-tool-streaming-2025-05-14,context-1m-2025-08-07" {
			t.Errorf("anthropic-beta = %q", got)
		}
	}
	// Without the flag, no tool_choice is sent for auto.
	a, f := newEnv(t)
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi", Tools: []provider.ToolDef{{Name: "a"}}}); err != nil {
		t.Fatal(err)
	}
	if b := string(f.srv.Requests()[0].Body); strings.Contains(b, "tool_choice") || f.srv.Requests()[0].Header.Get("anthropic-beta") != "" {
		t.Errorf("defaults sent a tool_choice or a beta: %s", b)
	}
	// A malformed beta list is the caller's error.
	if _, err := invoke(t, a, &provider.Request{Prompt: "hi", Meta: provider.Metadata{anthropic.MetaBeta: json.RawMessage(`"x"`)}}); provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), anthropic.MetaBeta) {
		t.Errorf("bad beta meta: %v", err)
	}
}

// Each Claude generation gets the reasoning setting in the shape it
// takes, and the fake, which refuses the others as the API does, accepts
// it; a forced tool choice with reasoning is refused before sending.
func TestReasoningPerModel(t *testing.T) {
	a, f := newEnv(t)
	for _, tc := range []struct {
		model     string
		reasoning provider.Reasoning
		want      string // thinking and output_config as sent
	}{
		{"claude-haiku-4-5", provider.Reasoning{Effort: provider.EffortMedium}, `{"budget_tokens":8192,"type":"enabled"} {}`},
		{"claude-haiku-4-5", provider.Reasoning{Effort: provider.EffortHigh}, `{"budget_tokens":9999,"type":"enabled"} {}`},
		{"claude-sonnet-4-6", provider.Reasoning{Effort: provider.EffortHigh}, `{"type":"adaptive"} {"effort":"high"}`},
		{"claude-sonnet-4-6", provider.Reasoning{Budget: 3000}, `{"budget_tokens":3000,"type":"enabled"} {}`},
		{"claude-sonnet-5", provider.Reasoning{Budget: 3000}, `{"type":"adaptive"} {"effort":"low"}`},
		{"claude-opus-5-5", provider.Reasoning{Effort: provider.EffortMedium, Budget: 9000}, `{"type":"adaptive"} {"effort":"medium"}`},
	} {
		r := tc.reasoning
		if _, err := a.Invoke(context.Background(), &provider.Request{Prompt: "q", Model: tc.model, MaxTokens: 10000, Reasoning: &r}); err != nil {
			t.Errorf("%s %+v: %v", tc.model, r, err)
			continue
		}
		var body struct {
			Thinking     json.RawMessage `json:"thinking"`
			OutputConfig json.RawMessage `json:"output_config"`
		}
		reqs := f.srv.Requests()
		_ = json.Unmarshal(reqs[len(reqs)-1].Body, &body)
		if got := cmp.Or(string(body.Thinking), "null") + " " + cmp.Or(string(body.OutputConfig), "{}"); got != tc.want {
			t.Errorf("%s %+v: sent %s, want %s", tc.model, r, got, tc.want)
		}
	}
	before := len(f.srv.Requests())
	_, err := a.Invoke(context.Background(), &provider.Request{Prompt: "q", Reasoning: &provider.Reasoning{Effort: provider.EffortLow},
		Tools: []provider.ToolDef{{Name: "f", InputSchema: json.RawMessage(`{"type":"object"}`)}}, ToolChoice: provider.ToolChoiceRequired})
	if provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "tool_choice forces tool use") {
		t.Errorf("reasoning with a forced tool: %v, want a bad request", err)
	}
	if len(f.srv.Requests()) != before {
		t.Error("a request the API refuses was sent")
	}
}
