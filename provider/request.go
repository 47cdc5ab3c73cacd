package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults applied by [Request] when a field is left at its zero value; they
// are the spec's defaults.
const (
	DefaultMaxTokens = 4096
	DefaultTimeout   = 300 * time.Second
)

// ToolDef declares a tool the model may call. InputSchema is a JSON Schema
// object describing the arguments; adapters translate it to each vendor's
// tool format.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Strict asks that the model's arguments follow InputSchema exactly
	// (OpenAI's strict functions, Anthropic's strict tool use).
	Strict bool `json:"strict,omitempty"`
	// Cache is a prompt-cache breakpoint after this tool, with its
	// lifetime, where the caller placed it; "" for none.
	Cache PromptCache `json:"cache,omitempty"`
}

// Role is the speaker of a [Message].
type Role string

// The two conversational roles. System instructions go in [Request.System].
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// PartType says what a [Part] holds.
type PartType string

// Part types.
const (
	PartText       PartType = "text"        // Text
	PartToolCall   PartType = "tool_call"   // ToolCall (assistant turns)
	PartToolResult PartType = "tool_result" // ToolResult (user turns)
	PartReasoning  PartType = "reasoning"   // model reasoning (Text, with signatures in Meta)
	PartImage      PartType = "image"       // Image (user turns)
)

// Image is an image input: a URL the provider fetches, or the bytes
// themselves with their media type.
type Image struct {
	// URL is an http or https URL; empty when Data is set.
	URL string `json:"url,omitempty"`
	// Data is the image file's bytes; empty when URL is set.
	Data []byte `json:"data,omitempty"`
	// MediaType is the type of Data: image/png, image/jpeg, image/gif or
	// image/webp (every provider takes these four). Optional with URL.
	MediaType string `json:"media_type,omitempty"`
}

// ImageMediaTypes are the media types every provider takes inline.
var ImageMediaTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Part is one piece of a message, in order. Meta carries provider data that
// must be sent back unchanged on the next turn (thinking signatures, opaque
// reasoning); adapters read only their own keys.
type Part struct {
	Type       PartType    `json:"type"`
	Text       string      `json:"text,omitempty"`
	ToolCall   *ToolCall   `json:"tool_call,omitempty"`
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	Image      *Image      `json:"image,omitempty"`
	Meta       Metadata    `json:"meta,omitempty"`
	// Cache is a prompt-cache breakpoint after this part, with its
	// lifetime, where the caller placed it (a growing conversation is
	// cached up to its latest turns this way); "" for none. Providers that
	// cache on their own ignore it.
	Cache PromptCache `json:"cache,omitempty"`
}

// Message is one turn of a conversation.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// UserText returns a user message holding text.
func UserText(text string) Message {
	return Message{Role: RoleUser, Parts: []Part{{Type: PartText, Text: text}}}
}

// ToolResults returns the user message that answers tool calls.
func ToolResults(results ...ToolResult) Message {
	m := Message{Role: RoleUser}
	for i := range results {
		m.Parts = append(m.Parts, Part{Type: PartToolResult, ToolResult: &results[i]})
	}
	return m
}

// ToolCall is a model's request to run a tool. Arguments is always a JSON
// object (adapters normalise vendors that send a string or fragments). Meta
// carries provider data tied to the call, such as a thought signature.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      Metadata        `json:"meta,omitempty"`
}

// ToolResult is the outcome of running a tool, sent back in a user turn.
// Name repeats the tool's name (some providers need it).
type ToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// Metadata is provider-owned data that must round-trip unchanged. Keys are
// namespaced by provider ("anthropic.signature", "gemini.thought_signature").
type Metadata map[string]json.RawMessage

// ToolChoice constrains tool use: "" or "auto" lets the model decide, "none"
// forbids tools, "required" forces some tool, and any other value forces the
// tool of that name.
type ToolChoice string

// Tool choices with fixed meanings.
const (
	ToolChoiceAuto     ToolChoice = "auto"
	ToolChoiceNone     ToolChoice = "none"
	ToolChoiceRequired ToolChoice = "required"
)

// PromptCache asks the provider to cache the stable prefix of a request
// (tools, then system). "" leaves caching to the provider's defaults.
type PromptCache string

// Prompt-cache lifetimes.
const (
	PromptCacheOff PromptCache = ""
	PromptCache5m  PromptCache = "5m"
	PromptCache1h  PromptCache = "1h"
)

func (c PromptCache) valid() bool {
	return c == PromptCacheOff || c == PromptCache5m || c == PromptCache1h
}

// ResponseFormat asks for an answer that is a JSON value matching Schema,
// returned as the answer's text.
type ResponseFormat struct {
	// Name names the format (OpenAI requires one: letters, digits, _ and -,
	// at most 64); "" means "response".
	Name string `json:"name,omitempty"`
	// Description tells the model what the format is for.
	Description string `json:"description,omitempty"`
	// Schema is a JSON Schema object. Required.
	Schema json.RawMessage `json:"schema"`
	// Strict asks the provider to enforce the schema exactly where it
	// distinguishes (OpenAI); Anthropic and Gemini always constrain.
	Strict bool `json:"strict,omitempty"`
}

// EffectiveName returns Name, or "response" when unset.
func (f *ResponseFormat) EffectiveName() string {
	if f.Name == "" {
		return "response"
	}
	return f.Name
}

// ReasoningEffort is how hard a reasoning model thinks before answering.
type ReasoningEffort string

// Reasoning efforts: the three every reasoning provider takes.
const (
	EffortLow    ReasoningEffort = "low"
	EffortMedium ReasoningEffort = "medium"
	EffortHigh   ReasoningEffort = "high"
)

// MinReasoningBudget is the smallest thinking budget any provider takes
// (Anthropic's minimum for budget_tokens).
const MinReasoningBudget = 1024

// Reasoning asks a model to think before it answers: with an effort, a
// token budget, both, or neither (the provider's default depth). Each
// adapter maps it onto its provider's own setting; see
// docs/providers/*.md.
type Reasoning struct {
	// Effort is "low", "medium" or "high"; "" leaves it to Budget or
	// to the provider.
	Effort ReasoningEffort `json:"effort,omitempty"`
	// Budget is the most tokens the model should spend thinking, at least
	// [MinReasoningBudget] and below the output limit; 0 for none.
	Budget int `json:"budget_tokens,omitempty"`
}

// reasoningBudgets are the budgets an effort stands for at a provider
// that takes only budgets.
var reasoningBudgets = map[ReasoningEffort]int{EffortLow: 1024, EffortMedium: 8192, EffortHigh: 24576}

// EffectiveBudget returns Budget, or the budget Effort stands for (low
// 1024, medium 8192, high 24576), or 0 when neither is set.
func (r *Reasoning) EffectiveBudget() int {
	if r.Budget > 0 {
		return r.Budget
	}
	return reasoningBudgets[r.Effort]
}

// EffectiveEffort returns Effort, or the effort a Budget stands for at a
// provider that takes only efforts (below 4096 low, below 16384 medium,
// else high), or "" when neither is set.
func (r *Reasoning) EffectiveEffort() ReasoningEffort {
	switch {
	case r.Effort != "":
		return r.Effort
	case r.Budget == 0:
		return ""
	case r.Budget < 4096:
		return EffortLow
	case r.Budget < 16384:
		return EffortMedium
	}
	return EffortHigh
}

// Request is one model invocation: the spec's parameters plus a multi-turn
// conversation. The zero value of each optional field takes the default
// named in its comment.
type Request struct {
	// Prompt, when set, is sent as a final user turn after Messages.
	Prompt string `json:"prompt,omitempty"`
	// System is the system prompt.
	System string `json:"system,omitempty"`
	// Messages is the conversation so far (user and assistant turns, tool
	// calls and tool results).
	Messages []Message `json:"messages,omitempty"`
	// Tools the model may call.
	Tools []ToolDef `json:"tools,omitempty"`
	// ToolChoice; "" means auto.
	ToolChoice ToolChoice `json:"tool_choice,omitempty"`
	// Tier is the model hint; "" means balanced.
	Tier Tier `json:"tier,omitempty"`
	// Model names an exact model and overrides Tier; "" lets the adapter map
	// Tier to its configured model.
	Model string `json:"model,omitempty"`
	// MaxTokens bounds the output; 0 means 4096.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Timeout bounds one attempt; 0 means 300 s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// CacheKey is the caller's namespace for the response cache; "" means
	// responses are not cached.
	CacheKey string `json:"cache_key,omitempty"`
	// PromptCache asks the provider to cache the stable prefix.
	PromptCache PromptCache `json:"prompt_cache,omitempty"`
	// DisableParallelToolCalls lets the model call at most one tool per
	// turn.
	DisableParallelToolCalls bool `json:"disable_parallel_tool_calls,omitempty"`
	// Temperature is the sampling temperature, 0 to 2 (Anthropic-style
	// ranges of 0 to 1 are checked by the adapter); nil leaves the
	// provider's default. Best effort: a model without [CapSampling]
	// drops it.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP is nucleus sampling's probability mass, 0 to 1; nil leaves the
	// provider's default. Best effort, like Temperature.
	TopP *float64 `json:"top_p,omitempty"`
	// TopK samples from the K likeliest tokens (K ≥ 1); nil leaves the
	// provider's default. Best effort: a model without [CapTopK] drops it.
	TopK *int `json:"top_k,omitempty"`
	// Seed asks for repeatable sampling; nil sends none. Best effort: a
	// model without [CapSeed] drops it.
	Seed *int64 `json:"seed,omitempty"`
	// Stop lists sequences that end the answer when generated (not
	// included in it). Every provider honours them; each bounds how many.
	Stop []string `json:"stop,omitempty"`
	// ResponseFormat, when set, asks for JSON matching a schema; only a
	// model with [CapStructuredOutput] can serve the request.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// Reasoning, when set, asks the model to think first. Best effort: a
	// model without [CapReasoning] drops it.
	Reasoning *Reasoning `json:"reasoning,omitempty"`
	// Meta carries provider-specific request options that must reach the
	// adapter unchanged.
	Meta Metadata `json:"meta,omitempty"`
	// CeilingEstimate asks EstimateCost for the cheap bound of the prompt:
	// every byte of its text a token (the most any byte-level tokenizer
	// counts), without running a tokenizer. The orchestrator admits a call
	// with it and estimates exactly only when it does not fit a budget. It
	// is never sent.
	CeilingEstimate bool `json:"-"`
	// Native, when set, is the request as the client sent it in a
	// provider's protocol: an adapter that speaks it relays it unchanged
	// (see [Native]); the other fields are its decoded form, for routing,
	// estimates and translated routes. It is never cached or recorded.
	Native *Native `json:"-"`
}

// CacheMarks are the prompt-cache breakpoints of a request on a provider
// that takes at most a few per request (see [Request.CacheMarks]).
type CacheMarks struct {
	// Caller counts the caller's own marks: parts and tools with Cache.
	Caller int
	// System and LastTool report the marks PromptCache places: on the
	// system prompt and on the last tool.
	System, LastTool bool
	// Dropped names the marks PromptCache asks for that did not fit:
	// "system", "tools".
	Dropped []string
}

// CacheMarks places r's prompt-cache breakpoints within limit marks: the
// caller's own always (more than limit is the caller's error, for the
// provider to refuse), then PromptCache's, on the system prompt first and
// then on the last tool (which needs none more when the caller marked
// it), while there is room.
func (r *Request) CacheMarks(limit int) CacheMarks {
	var m CacheMarks
	for i := range r.Tools {
		if r.Tools[i].Cache != PromptCacheOff {
			m.Caller++
		}
	}
	for _, msg := range r.Messages {
		for _, p := range msg.Parts {
			if p.Cache != PromptCacheOff {
				m.Caller++
			}
		}
	}
	if r.PromptCache == PromptCacheOff {
		return m
	}
	n := m.Caller
	if r.System != "" {
		if m.System = n < limit; m.System {
			n++
		} else {
			m.Dropped = append(m.Dropped, "system")
		}
	}
	if len(r.Tools) > 0 && r.Tools[len(r.Tools)-1].Cache == PromptCacheOff {
		if m.LastTool = n < limit; !m.LastTool {
			m.Dropped = append(m.Dropped, "tools")
		}
	}
	return m
}

// EffectiveTier returns Tier, or balanced when unset.
func (r *Request) EffectiveTier() Tier {
	if r.Tier == "" {
		return TierBalanced
	}
	return r.Tier
}

// EffectiveMaxTokens returns MaxTokens, or 4096 when unset.
func (r *Request) EffectiveMaxTokens() int {
	if r.MaxTokens <= 0 {
		return DefaultMaxTokens
	}
	return r.MaxTokens
}

// EffectiveTimeout returns Timeout, or 300 s when unset.
func (r *Request) EffectiveTimeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

// Conversation returns Messages followed by Prompt as a user turn.
func (r *Request) Conversation() []Message {
	if r.Prompt == "" {
		return r.Messages
	}
	out := make([]Message, 0, len(r.Messages)+1)
	out = append(out, r.Messages...)
	return append(out, UserText(r.Prompt))
}

// RequiredCapabilities returns what any provider serving r must be able to
// do: tool use when tools are declared, prompt caching when asked for,
// structured output when a response format is set, vision when a message
// holds an image.
func (r *Request) RequiredCapabilities() CapabilitySet {
	var s CapabilitySet
	if len(r.Tools) > 0 {
		s = s.With(CapToolUse)
	}
	if r.hasImage() {
		s = s.With(CapVision)
	}
	if r.ResponseFormat != nil {
		s = s.With(CapStructuredOutput)
	}
	if r.PromptCache != PromptCacheOff {
		s = s.With(CapPromptCaching)
	}
	return s
}

// HasImageURL reports whether an image of r is given by URL, which the
// server it is sent to fetches.
func (r *Request) HasImageURL() bool {
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Type == PartImage && p.Image != nil && p.Image.URL != "" {
				return true
			}
		}
	}
	return false
}

func (r *Request) hasImage() bool {
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Type == PartImage {
				return true
			}
		}
	}
	return false
}

// SamplingCapabilities returns what a model must have to honour every
// best-effort sampling setting of r.
func (r *Request) SamplingCapabilities() CapabilitySet {
	var s CapabilitySet
	if r.Temperature != nil || r.TopP != nil {
		s = s.With(CapSampling)
	}
	if r.TopK != nil {
		s = s.With(CapTopK)
	}
	if r.Seed != nil {
		s = s.With(CapSeed)
	}
	if r.Reasoning != nil {
		s = s.With(CapReasoning)
	}
	return s
}

// Unhonoured returns the names of the best-effort sampling settings r
// carries that a model with capabilities caps drops: "temperature",
// "top_p", "top_k", "seed", "reasoning".
func (r *Request) Unhonoured(caps CapabilitySet) []string {
	var out []string
	if !caps.Has(CapSampling) {
		if r.Temperature != nil {
			out = append(out, "temperature")
		}
		if r.TopP != nil {
			out = append(out, "top_p")
		}
	}
	if r.TopK != nil && !caps.Has(CapTopK) {
		out = append(out, "top_k")
	}
	if r.Seed != nil && !caps.Has(CapSeed) {
		out = append(out, "seed")
	}
	if r.Reasoning != nil && !caps.Has(CapReasoning) {
		out = append(out, "reasoning")
	}
	return out
}

// Validate reports the first structural problem in r as a bad-request
// [*Error]: an empty conversation, an unknown tier, a sampling setting out
// of range, an empty stop sequence, a tool without a name or with a schema
// that is not a JSON object, a tool result without a call id.
func (r *Request) Validate() error {
	bad := func(format string, args ...any) error {
		return &Error{Kind: KindBadRequest, Diagnostic: Diagnostic{Message: fmt.Sprintf(format, args...)}}
	}
	if r.Tier != "" && !r.Tier.Valid() {
		_, err := ParseTier(string(r.Tier))
		return bad("%v", err)
	}
	if r.MaxTokens < 0 {
		return bad("max_tokens must not be negative, got %d", r.MaxTokens)
	}
	if t := r.Temperature; t != nil && !(*t >= 0 && *t <= 2) {
		return bad("temperature must be between 0 and 2, got %v", *t)
	}
	if p := r.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		return bad("top_p must be between 0 and 1, got %v", *p)
	}
	if k := r.TopK; k != nil && *k < 1 {
		return bad("top_k must be at least 1, got %d", *k)
	}
	if rs := r.Reasoning; rs != nil {
		switch rs.Effort {
		case "", EffortLow, EffortMedium, EffortHigh:
		default:
			return bad("reasoning.effort must be \"low\", \"medium\" or \"high\", got %q", string(rs.Effort))
		}
		if rs.Budget != 0 && rs.Budget < MinReasoningBudget {
			return bad("reasoning.budget_tokens must be at least %d, got %d", MinReasoningBudget, rs.Budget)
		}
		if rs.Budget >= r.EffectiveMaxTokens() {
			return bad("reasoning.budget_tokens (%d) must be below max_tokens (%d): the thinking counts towards the output limit", rs.Budget, r.EffectiveMaxTokens())
		}
	}
	for i, s := range r.Stop {
		if s == "" {
			return bad("stop[%d] is empty: a stop sequence needs at least one character", i)
		}
	}
	if f := r.ResponseFormat; f != nil {
		if f.Name != "" && !validFormatName(f.Name) {
			return bad("response_format.name %q: use letters, digits, _ and - (at most 64)", f.Name)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(f.Schema, &obj); err != nil || obj == nil {
			return bad("response_format.schema must be a JSON Schema object")
		}
	}
	if !r.PromptCache.valid() {
		return bad("prompt_cache must be \"\", \"5m\" or \"1h\", got %q", string(r.PromptCache))
	}
	conv := r.Conversation()
	if len(conv) == 0 && (r.Native == nil || r.Native.Required == "") {
		// A request the gateway could not decode goes only to an adapter
		// that relays its body, which holds the conversation.
		return bad("the request has no prompt and no messages")
	}
	seen := map[string]bool{}
	for i, t := range r.Tools {
		if t.Name == "" {
			return bad("tools[%d] has no name", i)
		}
		if !t.Cache.valid() {
			return bad("tools[%d] %q: cache must be \"\", \"5m\" or \"1h\", got %q", i, t.Name, string(t.Cache))
		}
		if seen[t.Name] {
			return bad("tools[%d]: tool %q is declared twice", i, t.Name)
		}
		seen[t.Name] = true
		if len(t.InputSchema) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(t.InputSchema, &obj); err != nil {
				return bad("tools[%d] %q: input_schema must be a JSON object: %v", i, t.Name, err)
			}
		}
	}
	switch r.ToolChoice {
	case "", ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
	default:
		// A relay-only request's body declares tools its decoded form
		// does not hold (the provider's own): the provider judges it.
		if !seen[string(r.ToolChoice)] && (r.Native == nil || r.Native.Required == "") {
			return bad("tool_choice names tool %q, which is not declared", string(r.ToolChoice))
		}
	}
	for i, m := range conv {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return bad("messages[%d]: role must be \"user\" or \"assistant\", got %q", i, string(m.Role))
		}
		for j, p := range m.Parts {
			if !p.Cache.valid() {
				return bad("messages[%d].parts[%d]: cache must be \"\", \"5m\" or \"1h\", got %q", i, j, string(p.Cache))
			}
			switch p.Type {
			case PartText, PartReasoning:
			case PartToolCall:
				if p.ToolCall == nil || p.ToolCall.ID == "" || p.ToolCall.Name == "" {
					return bad("messages[%d].parts[%d]: a tool call needs an id and a name", i, j)
				}
				if m.Role != RoleAssistant {
					return bad("messages[%d].parts[%d]: tool calls belong to assistant turns", i, j)
				}
			case PartImage:
				if err := p.Image.check(); err != nil {
					return bad("messages[%d].parts[%d]: %v", i, j, err)
				}
				if m.Role != RoleUser {
					return bad("messages[%d].parts[%d]: images belong to user turns", i, j)
				}
			case PartToolResult:
				if p.ToolResult == nil || p.ToolResult.CallID == "" {
					return bad("messages[%d].parts[%d]: a tool result needs the call id it answers", i, j)
				}
				if m.Role != RoleUser {
					return bad("messages[%d].parts[%d]: tool results belong to user turns", i, j)
				}
			default:
				return bad("messages[%d].parts[%d]: unknown part type %q", i, j, string(p.Type))
			}
		}
	}
	return nil
}

// validFormatName reports whether name fits OpenAI's rule for format names,
// the strictest provider's.
func validFormatName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// check reports what is wrong with an image part's image.
func (im *Image) check() error {
	switch {
	case im == nil:
		return fmt.Errorf("an image part needs an image")
	case (im.URL == "") == (len(im.Data) == 0):
		return fmt.Errorf("an image needs exactly one of a URL and its bytes")
	case im.URL != "" && !strings.HasPrefix(im.URL, "https://") && !strings.HasPrefix(im.URL, "http://"):
		return fmt.Errorf("image URL %.40q: want an http or https URL (send other images as bytes)", im.URL)
	case len(im.Data) > 0 && !slices.Contains(ImageMediaTypes, im.MediaType):
		return fmt.Errorf("image media type %q: want one of %s", im.MediaType, strings.Join(ImageMediaTypes, ", "))
	}
	return nil
}
