package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestTierText(t *testing.T) {
	for _, tier := range Tiers {
		b, err := tier.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Tier
		if err := back.UnmarshalText(b); err != nil || back != tier {
			t.Errorf("round trip %q: %v %v", tier, back, err)
		}
	}
	var bad Tier
	err := bad.UnmarshalText([]byte("reasoning-heavy"))
	if err == nil || !strings.Contains(err.Error(), `did you mean "reasoning_heavy"`) {
		t.Errorf("misspelt tier error = %v", err)
	}
	if err := bad.UnmarshalText([]byte("premium")); err == nil || !strings.Contains(err.Error(), "valid tiers") {
		t.Errorf("unknown tier error = %v", err)
	}
	if s, ok := TierReasoningHeavy.Smaller(); !ok || s != TierBalanced {
		t.Errorf("Smaller(reasoning_heavy) = %v %v", s, ok)
	}
	if _, ok := TierFastCheap.Smaller(); ok {
		t.Error("fast_cheap has no smaller tier")
	}
	b, _ := json.Marshal(map[Tier]string{TierFastCheap: "m"})
	if string(b) != `{"fast_cheap":"m"}` {
		t.Errorf("tier map JSON = %s", b)
	}
}

func TestCapabilitySet(t *testing.T) {
	if len(Capabilities) != 14 {
		t.Fatalf("the spec's nine capabilities, three sampling ones, structured output and reasoning make 14, got %d", len(Capabilities))
	}
	s, err := ParseCapabilitySet("tool_use, long_context_1m,streaming")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Has(CapToolUse) || !s.Has(CapLongContext1M) || s.Has(CapVision) || s.Len() != 3 {
		t.Errorf("set = %v", s)
	}
	need := NewCapabilitySet(CapToolUse, CapVision)
	if got := s.Missing(need); got != NewCapabilitySet(CapVision) {
		t.Errorf("Missing = %v", got)
	}
	if s.Contains(need) || !s.Contains(NewCapabilitySet(CapToolUse)) {
		t.Error("Contains wrong")
	}
	b, _ := json.Marshal(s)
	if string(b) != `["long_context_1m","tool_use","streaming"]` {
		t.Errorf("JSON = %s", b)
	}
	var back CapabilitySet
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Errorf("round trip = %v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`["tool-use"]`), &back); err == nil || !strings.Contains(err.Error(), `did you mean "tool_use"`) {
		t.Errorf("misspelt capability error = %v", err)
	}
	if _, err := ParseCapabilitySet("telepathy"); err == nil {
		t.Error("unknown capability accepted")
	}
	if s.Without(CapToolUse).Has(CapToolUse) {
		t.Error("Without kept the capability")
	}
}

func TestErrorKinds(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	err := fmt.Errorf("invoke: %w", &Error{Kind: KindRateLimit, Provider: "anthropic", Model: "claude-sonnet-4-6", RetryAfter: 2 * time.Second,
		Diagnostic: Diagnostic{Status: 429, Type: "rate_limit_error", Message: "Number of requests exceeded", RequestID: "req_1"}, Err: cause})
	if !errors.Is(err, KindRateLimit) || errors.Is(err, KindServer) {
		t.Error("errors.Is by kind broken")
	}
	if !errors.Is(err, cause) {
		t.Error("cause not unwrapped")
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Diagnostic.RequestID != "req_1" {
		t.Error("errors.As broken")
	}
	if KindOf(err) != KindRateLimit || RetryAfterOf(err) != 2*time.Second {
		t.Errorf("KindOf/RetryAfterOf = %v %v", KindOf(err), RetryAfterOf(err))
	}
	msg := err.Error()
	for _, want := range []string{"anthropic (claude-sonnet-4-6)", "rate limit", "429", "rate_limit_error", "Number of requests exceeded", "req_1", "retry after 2s", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if KindOf(context.Canceled) != KindCanceled || KindOf(fmt.Errorf("x: %w", context.DeadlineExceeded)) != KindTimeout || KindOf(io.EOF) != KindUnknown || KindOf(nil) != KindUnknown {
		t.Error("KindOf on bare errors wrong")
	}
	seen := map[string]bool{}
	for _, k := range Kinds() {
		n := k.String()
		if seen[n] || strings.HasPrefix(n, "kind(") {
			t.Errorf("kind name %q duplicated or missing", n)
		}
		seen[n] = true
		var back Kind
		if err := back.UnmarshalText([]byte(n)); err != nil || back != k {
			t.Errorf("kind round trip %q", n)
		}
	}
	if !KindOverloaded.ServerClass() || !KindServer.ServerClass() || KindRateLimit.ServerClass() {
		t.Error("ServerClass wrong")
	}
	capErr := ErrCapabilityMissing("ollama", "llama3.2", CapVision)
	if !errors.Is(capErr, KindCapabilityMissing) || !strings.Contains(capErr.Error(), "missing vision") {
		t.Errorf("capability error = %v", capErr)
	}
}

func TestRedact(t *testing.T) {
	got := Redact("Incorrect API key provided: sk-secret-123456", "sk-secret-123456", "")
	if strings.Contains(got, "sk-secret") || !strings.Contains(got, "[REDACTED]") {
		t.Errorf("Redact = %q", got)
	}
}

func TestRequestDefaultsAndValidate(t *testing.T) {
	r := &Request{Prompt: "hi"}
	if r.EffectiveTier() != TierBalanced || r.EffectiveMaxTokens() != 4096 || r.EffectiveTimeout() != 300*time.Second {
		t.Error("spec defaults not applied")
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)
	call := &ToolCall{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	good := &Request{
		Tools: []ToolDef{{Name: "get_weather", InputSchema: schema}},
		Messages: []Message{
			UserText("weather?"),
			{Role: RoleAssistant, Parts: []Part{{Type: PartToolCall, ToolCall: call}}},
			ToolResults(ToolResult{CallID: "c1", Name: "get_weather", Content: "18C"}),
		},
		ToolChoice:  "get_weather",
		PromptCache: PromptCache1h,
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid multi-turn request rejected: %v", err)
	}
	if got := good.RequiredCapabilities(); !got.Has(CapToolUse) || !got.Has(CapPromptCaching) {
		t.Errorf("RequiredCapabilities = %v", got)
	}
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"empty", Request{}, "no prompt and no messages"},
		{"bad tier", Request{Prompt: "x", Tier: "gold"}, "unknown tier"},
		{"negative max", Request{Prompt: "x", MaxTokens: -1}, "max_tokens"},
		{"nameless tool", Request{Prompt: "x", Tools: []ToolDef{{}}}, "tools[0] has no name"},
		{"dup tool", Request{Prompt: "x", Tools: []ToolDef{{Name: "a"}, {Name: "a"}}}, "declared twice"},
		{"schema not object", Request{Prompt: "x", Tools: []ToolDef{{Name: "a", InputSchema: json.RawMessage(`[1]`)}}}, "JSON object"},
		{"choice unknown tool", Request{Prompt: "x", ToolChoice: "nope"}, `"nope"`},
		{"bad role", Request{Messages: []Message{{Role: "system"}}}, "role"},
		{"result without id", Request{Messages: []Message{ToolResults(ToolResult{Content: "x"})}}, "call id"},
		{"call in user turn", Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: PartToolCall, ToolCall: call}}}}}, "assistant turns"},
		{"bad prompt cache", Request{Prompt: "x", PromptCache: "1d"}, "prompt_cache"},
		{"bad tool cache mark", Request{Prompt: "x", Tools: []ToolDef{{Name: "a", Cache: "2h"}}}, `tools[0] "a": cache`},
		{"bad part cache mark", Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: PartText, Text: "x", Cache: "forever"}}}}}, "messages[0].parts[0]: cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if !errors.Is(err, KindBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want bad request containing %q", err, tt.want)
			}
		})
	}
	conv := (&Request{Prompt: "last", Messages: []Message{UserText("first")}}).Conversation()
	if len(conv) != 2 || conv[1].Parts[0].Text != "last" {
		t.Errorf("Conversation = %+v", conv)
	}
}

func TestUsageConventions(t *testing.T) {
	// OpenAI: prompt_tokens 1000 of which 800 cached; Anthropic: input_tokens 200 + cache read 800.
	inc := UsageInclusive(1000, 800, 0, 50)
	exc := UsageExclusive(200, 800, 0, 50)
	if inc != exc {
		t.Errorf("conventions disagree: %+v vs %+v", inc, exc)
	}
	if inc.UncachedInputTokens() != 200 || inc.TotalTokens() != 1050 {
		t.Errorf("derived counts wrong: %+v", inc)
	}
}

func TestResultJSONAndMessage(t *testing.T) {
	r := Result{Content: "hi", ToolCalls: []ToolCall{{ID: "1", Name: "t", Arguments: json.RawMessage(`{}`)}}, Cost: MustMoney("0.0021"), Latency: 1500 * time.Millisecond, Model: "m"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"latency_ms":1500`, `"cost_usd":"0.0021"`, `"model_used":"m"`, `"cache_hit":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	m := r.Message()
	if m.Role != RoleAssistant || len(m.Parts) != 2 || m.Parts[1].ToolCall.ID != "1" {
		t.Errorf("Message = %+v", m)
	}
}

// sliceStream is a Stream over fixed chunks that records Close.
type sliceStream struct {
	chunks []Chunk
	err    error
	closed int
}

func (s *sliceStream) Recv() (Chunk, error) {
	if len(s.chunks) == 0 {
		if s.err != nil {
			return Chunk{}, s.err
		}
		return Chunk{}, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *sliceStream) Close() error { s.closed++; return nil }

func TestChunksAndCollect(t *testing.T) {
	final := &Result{Content: "ab"}
	s := &sliceStream{chunks: []Chunk{{Text: "a"}, {Text: "b"}, {Final: true, Result: final}}}
	got, err := Collect(s)
	if err != nil || got != final || s.closed != 1 {
		t.Errorf("Collect = %v %v, closed %d", got, err, s.closed)
	}
	// Breaking out of the loop early still closes the stream.
	s = &sliceStream{chunks: []Chunk{{Text: "a"}, {Text: "b"}}}
	for range Chunks(s) {
		break
	}
	if s.closed != 1 {
		t.Errorf("early break closed %d times", s.closed)
	}
	// A stream without a final chunk is a truncation, a network-kind error.
	if _, err := Collect(&sliceStream{chunks: []Chunk{{Text: "a"}}}); !errors.Is(err, KindNetwork) {
		t.Errorf("truncated Collect = %v", err)
	}
	mid := &Error{Kind: KindOverloaded}
	if _, err := Collect(&sliceStream{chunks: []Chunk{{Text: "a"}}, err: mid}); !errors.Is(err, KindOverloaded) {
		t.Errorf("mid-stream error = %v", err)
	}
}

type nopAdapter struct{ name string }

func (a nopAdapter) Name() string                                    { return a.name }
func (nopAdapter) Invoke(context.Context, *Request) (*Result, error) { return &Result{}, nil }
func (nopAdapter) Stream(context.Context, *Request) (Stream, error)  { return &sliceStream{}, nil }
func (nopAdapter) EstimateCost(*Request) (Money, error)              { return 0, nil }
func (nopAdapter) Capabilities() CapabilitySet                       { return 0 }
func (nopAdapter) RateLimitStatus(context.Context) RateLimitStatus   { return RateLimitStatus{} }
func (nopAdapter) HealthCheck(context.Context) HealthStatus          { return HealthStatus{Healthy: true} }

func TestRegistry(t *testing.T) {
	newNop := func(s Settings) (Adapter, error) { return nopAdapter{s.Name}, nil }
	r, err := NewRegistry(
		Registration{Type: "anthropic", New: newNop, DefaultModels: map[Tier]string{TierBalanced: "m"}},
		Registration{Type: "gemini", New: newNop},
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Types(), ","); got != "anthropic,gemini" {
		t.Errorf("Types = %s", got)
	}
	a, err := r.New("gemini", Settings{Name: "g1"})
	if err != nil || a.Name() != "g1" {
		t.Errorf("New = %v %v", a, err)
	}
	_, err = r.Lookup("antropic")
	if err == nil || !strings.Contains(err.Error(), `did you mean "anthropic"`) || !strings.Contains(err.Error(), `"gemini"`) {
		t.Errorf("unknown type error = %v", err)
	}
	for name, regs := range map[string][]Registration{
		"duplicate":  {{Type: "a", New: newNop}, {Type: "a", New: newNop}},
		"no type":    {{New: newNop}},
		"no factory": {{Type: "a"}},
		"bad tier":   {{Type: "a", New: newNop, DefaultModels: map[Tier]string{"gold": "x"}}},
	} {
		if _, err := NewRegistry(regs...); err == nil {
			t.Errorf("%s: NewRegistry accepted it", name)
		}
	}
	empty, _ := NewRegistry()
	if _, err := empty.Lookup("x"); err == nil || !strings.Contains(err.Error(), "no provider types") {
		t.Errorf("empty registry error = %v", err)
	}
	f := CredentialField{Name: "api_key", Secret: true}
	if m := f.Mask("sk-abcdef"); strings.Contains(m, "abc") || strings.Contains(m, "9") {
		t.Errorf("Mask leaks: %q", m)
	}
}
