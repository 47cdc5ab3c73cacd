package provider

import (
	"encoding/json"
	"time"
)

// StopReason says why the model stopped, normalised across providers.
type StopReason string

// Stop reasons.
const (
	StopEndTurn       StopReason = "end_turn"       // the model finished
	StopMaxTokens     StopReason = "max_tokens"     // cut at MaxTokens
	StopToolUse       StopReason = "tool_use"       // the model wants tool results
	StopSequence      StopReason = "stop_sequence"  // a stop sequence matched
	StopRefusal       StopReason = "refusal"        // the model refused
	StopContentFilter StopReason = "content_filter" // output withheld by a safety filter
	StopContextWindow StopReason = "context_window" // output cut at the context window
	StopPause         StopReason = "pause"          // a long turn paused; send it back to continue
	StopOther         StopReason = "other"          // anything else; see the provider's raw reason
)

// Usage counts the tokens of one invocation in one normalised convention,
// whatever the provider reports:
//
//   - InputTokens is every prompt token processed, cached or not.
//   - CacheReadTokens and CacheWriteTokens are the parts of InputTokens read
//     from or written to the provider's prompt cache; CacheWriteLongTokens is
//     the part of CacheWriteTokens written with the provider's long lifetime
//     (Anthropic 1 h, OpenAI 12 h).
//   - OutputTokens is every billed output token, reasoning included;
//     ReasoningTokens is the reasoning part.
//
// Adapters build it with [UsageInclusive] (OpenAI, Gemini: cached tokens are
// inside the prompt count) or [UsageExclusive] (Anthropic: they are not), so
// pricing never counts a cached token twice.
type Usage struct {
	InputTokens          int64 `json:"prompt_tokens"`
	OutputTokens         int64 `json:"completion_tokens"`
	CacheReadTokens      int64 `json:"cache_read_tokens"`
	CacheWriteTokens     int64 `json:"cache_write_tokens"`
	CacheWriteLongTokens int64 `json:"cache_write_long_tokens,omitempty"`
	ReasoningTokens      int64 `json:"reasoning_tokens,omitempty"`
	// WebSearchRequests counts the web searches the provider ran for the
	// call (its server tool), billed per search.
	WebSearchRequests int64 `json:"web_search_requests,omitempty"`
	// ServiceTier is the service tier the provider says it served the
	// call at ("priority", "flex", …), "" for the standard one.
	ServiceTier string `json:"service_tier,omitempty"`
	// Estimated is true when the counts, or some of them, come from the
	// offline tokenizer or a limit rather than the provider's report: it
	// reported no usage, or a stream ended before the provider reported
	// its final counts and they were bounded from what it had sent.
	Estimated bool `json:"estimated"`
}

// UsageInclusive builds Usage from a provider whose prompt count already
// includes cached tokens (OpenAI prompt_tokens, Gemini promptTokenCount).
func UsageInclusive(prompt, cacheRead, cacheWrite, output int64) Usage {
	return Usage{InputTokens: prompt, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite, OutputTokens: output}
}

// UsageExclusive builds Usage from a provider whose input count excludes
// cache reads and writes (Anthropic input_tokens).
func UsageExclusive(uncachedInput, cacheRead, cacheWrite, output int64) Usage {
	return Usage{InputTokens: uncachedInput + cacheRead + cacheWrite, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite, OutputTokens: output}
}

// UncachedInputTokens returns the prompt tokens billed at the plain input
// rate.
func (u Usage) UncachedInputTokens() int64 {
	n := u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens
	if n < 0 {
		return 0
	}
	return n
}

// TotalTokens returns input plus output tokens.
func (u Usage) TotalTokens() int64 { return u.InputTokens + u.OutputTokens }

// Result is the outcome of a successful invocation.
type Result struct {
	// Content is the text of the answer (text parts joined).
	Content string `json:"content"`
	// ToolCalls are the calls the model asked for, arguments as JSON objects.
	ToolCalls []ToolCall `json:"tool_calls"`
	// Parts is the assistant turn in order, with provider metadata, ready to
	// append to the conversation with [Result.Message].
	Parts []Part `json:"parts,omitempty"`
	// Usage is the token count; Usage.Estimated says whether the provider
	// reported it.
	Usage Usage `json:"usage"`
	// Cost is the exact price of Usage at the catalog's rates: those of
	// the model that answered, else of the model requested.
	Cost Money `json:"cost_usd"`
	// Unpriced says the catalog lists neither model, so Cost is not a
	// price (zero from the adapter; the orchestrator charges the call's
	// reservation instead).
	Unpriced bool `json:"unpriced,omitempty"`
	// Latency is the wall time of the call, first byte sent to last byte
	// received.
	Latency time.Duration `json:"-"`
	// Provider is the adapter instance that served the call.
	Provider string `json:"provider"`
	// Model is the model that answered, as the provider reports it.
	Model string `json:"model_used"`
	// CacheHit is true when the answer came from CortexBuild's response cache.
	CacheHit bool `json:"cache_hit"`
	// StopReason says why the model stopped; RawStopReason is the
	// provider's own word.
	StopReason    StopReason `json:"stop_reason"`
	RawStopReason string     `json:"raw_stop_reason,omitempty"`
	// RequestID is the provider's id for the request, for support tickets.
	RequestID string `json:"request_id,omitempty"`
	// Native is the provider's answer as it came, when the request was
	// relayed in its client's protocol ([Request.Native]); nil otherwise.
	Native *NativeReply `json:"-"`
}

// MarshalJSON adds latency_ms (the spec's field) to the JSON form.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		LatencyMS int64 `json:"latency_ms"`
	}{plain(r), r.Latency.Milliseconds()})
}

// Message returns the assistant turn of r, to append to the conversation
// before sending tool results. It keeps provider metadata (signatures) so
// the next turn echoes them unchanged.
func (r *Result) Message() Message {
	if len(r.Parts) > 0 {
		return Message{Role: RoleAssistant, Parts: r.Parts}
	}
	m := Message{Role: RoleAssistant}
	if r.Content != "" {
		m.Parts = append(m.Parts, Part{Type: PartText, Text: r.Content})
	}
	for i := range r.ToolCalls {
		m.Parts = append(m.Parts, Part{Type: PartToolCall, ToolCall: &r.ToolCalls[i]})
	}
	return m
}

// HealthStatus is the outcome of a health check.
type HealthStatus struct {
	Healthy bool `json:"healthy"`
	// Error says what failed; empty when healthy.
	Error string `json:"error,omitempty"`
	// Kind classifies the failure; zero when healthy.
	Kind      Kind          `json:"kind,omitempty"`
	Latency   time.Duration `json:"-"`
	CheckedAt time.Time     `json:"checked_at"`
}

// MarshalJSON adds latency_ms to the JSON form.
func (h HealthStatus) MarshalJSON() ([]byte, error) {
	type plain HealthStatus
	return json.Marshal(struct {
		plain
		LatencyMS int64 `json:"latency_ms"`
	}{plain(h), h.Latency.Milliseconds()})
}

// RateLimitStatus is what a provider last said about its rate limits. A nil
// count or a zero time means the provider did not say: it is never invented.
type RateLimitStatus struct {
	RequestsRemaining *int64 `json:"requests_remaining"`
	TokensRemaining   *int64 `json:"tokens_remaining"`
	// ResetAt is when the tightest limit resets; zero when unknown.
	ResetAt time.Time `json:"reset_at,omitzero"`
	// RetryAfter is the last retry delay the provider asked for.
	RetryAfter time.Duration `json:"-"`
	// ObservedAt is when these figures were read; zero when never.
	ObservedAt time.Time `json:"observed_at,omitzero"`
}

// Known reports whether the provider has reported anything at all.
func (s RateLimitStatus) Known() bool {
	return s.RequestsRemaining != nil || s.TokensRemaining != nil || !s.ResetAt.IsZero() || s.RetryAfter > 0
}
