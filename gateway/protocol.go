package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// protocol is the wire protocol a request speaks; errors answer in it.
type protocol uint8

const (
	protoOpenAI protocol = iota
	protoAnthropic
	protoAuto // decided per request by protocolOf
)

// protocolOf tells the protocol of a request on a route both serve
// (GET /v1/models): Anthropic clients send their API version header.
func protocolOf(r *http.Request) protocol {
	if r.Header.Get("Anthropic-Version") != "" || strings.HasPrefix(r.URL.Path, "/v1/messages") {
		return protoAnthropic
	}
	return protoOpenAI
}

// writeError answers with f in p's error shape.
func (p protocol) writeError(w http.ResponseWriter, r *http.Request, f *failure) {
	if p == protoAuto {
		p = protocolOf(r)
	}
	if p == protoAnthropic {
		s := anthropicShapes[f.class]
		errorHeaders(w.Header(), f, s)
		writeJSON(w, s.status, anthropicError(w, f))
		return
	}
	s := openAIShapes[f.class]
	body := openAIError(f)
	if f.class == classBudget && fromCodex(r) {
		// Codex CLI shows a 400's error as it is, but words a 429
		// insufficient_quota as its own "Quota exceeded. Check your plan
		// and billing details." and retries a 402 five times before
		// showing it: its user gets the reason at once this way.
		s.status, body.Error.Type = http.StatusBadRequest, "invalid_request_error"
		if f.code != "" {
			body.Error.Code = &f.code
		}
	}
	errorHeaders(w.Header(), f, s)
	writeJSON(w, s.status, body)
}

// fromCodex reports whether r comes from Codex (CLI, exec or IDE), which
// names itself in its originator header (codex_exec, codex_cli_rs, …).
func fromCodex(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Originator"), "codex")
}

// openAIErrorBody is {"error":{"message","type","param","code"}}.
type openAIErrorBody struct {
	Error openAIErrorObject `json:"error"`
}

type openAIErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIError(f *failure) openAIErrorBody {
	s := openAIShapes[f.class]
	e := openAIErrorObject{Message: f.openAIMessage(), Type: s.typ}
	if f.typ != "" {
		e.Type = f.typ
	}
	if f.param != "" {
		e.Param = &f.param
	}
	code := s.code
	if f.code != "" && f.class != classContext && f.class != classRateLimit && f.class != classBudget && f.class != classAuth {
		code = f.code
	}
	if code != "" {
		e.Code = &code
	}
	return openAIErrorBody{Error: e}
}

// anthropicErrorBody is {"type":"error","error":{"type","message"},
// "request_id"}.
type anthropicErrorBody struct {
	Type      string               `json:"type"`
	Error     anthropicErrorObject `json:"error"`
	RequestID string               `json:"request_id,omitempty"`
}

type anthropicErrorObject struct {
	Type    string                 `json:"type"`
	Message string                 `json:"message"`
	Details *anthropicErrorDetails `json:"details,omitempty"`
}

type anthropicErrorDetails struct {
	ErrorCode string `json:"error_code"`
}

func anthropicError(w http.ResponseWriter, f *failure) anthropicErrorBody {
	b := anthropicErrorBody{Type: "error", Error: anthropicErrorObject{Type: anthropicShapes[f.class].typ, Message: f.anthropicMessage()}}
	if f.errorCode != "" {
		b.Error.Details = &anthropicErrorDetails{ErrorCode: f.errorCode}
	}
	if w != nil {
		b.RequestID = w.Header().Get("Request-Id")
	}
	return b
}

// countTokens is the default offline count: the price catalog's o200k
// count of the whole prompt, framing included.
func countTokens(req *provider.Request) int64 { return pricing.CountRequestTokens(req) }

// mustJSON marshals v, which the gateway builds itself and so always
// encodes, without escaping <, > and & (the vendors' APIs do not).
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("gateway: cannot encode " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// anthropicUsage is the usage object of the Messages API, from the
// normalised usage: input_tokens there excludes cache reads and writes.
type anthropicUsage struct {
	InputTokens              int64                  `json:"input_tokens"`
	OutputTokens             int64                  `json:"output_tokens"`
	CacheCreationInputTokens int64                  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64                  `json:"cache_read_input_tokens"`
	CacheCreation            anthropicCacheCreation `json:"cache_creation"`
}

type anthropicCacheCreation struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

func toAnthropicUsage(u provider.Usage) anthropicUsage {
	long := min(u.CacheWriteLongTokens, u.CacheWriteTokens)
	return anthropicUsage{InputTokens: u.UncachedInputTokens(), OutputTokens: u.OutputTokens,
		CacheCreationInputTokens: u.CacheWriteTokens, CacheReadInputTokens: u.CacheReadTokens,
		CacheCreation: anthropicCacheCreation{Ephemeral5m: u.CacheWriteTokens - long, Ephemeral1h: long}}
}

// openAIUsage is the usage object of Chat Completions: prompt_tokens
// includes cached tokens.
type openAIUsage struct {
	PromptTokens            int64               `json:"prompt_tokens"`
	CompletionTokens        int64               `json:"completion_tokens"`
	TotalTokens             int64               `json:"total_tokens"`
	PromptTokensDetails     openAIPromptDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails openAICompletion    `json:"completion_tokens_details"`
}

type openAIPromptDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

type openAICompletion struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func toOpenAIUsage(u provider.Usage) openAIUsage {
	return openAIUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens(),
		PromptTokensDetails:     openAIPromptDetails{CachedTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens},
		CompletionTokensDetails: openAICompletion{ReasoningTokens: u.ReasoningTokens}}
}

// finishReason maps a stop reason to Chat Completions' finish_reason.
func finishReason(r *provider.Result) string {
	if len(r.ToolCalls) > 0 && (r.StopReason == provider.StopEndTurn || r.StopReason == provider.StopOther || r.StopReason == provider.StopToolUse || r.StopReason == "") {
		return "tool_calls"
	}
	switch r.StopReason {
	case provider.StopMaxTokens, provider.StopContextWindow:
		return "length"
	case provider.StopToolUse:
		return "tool_calls"
	case provider.StopContentFilter, provider.StopRefusal:
		return "content_filter"
	}
	return "stop"
}

// stopReason maps a stop reason to the Messages API's stop_reason.
func stopReason(r *provider.Result) string {
	if len(r.ToolCalls) > 0 && (r.StopReason == provider.StopEndTurn || r.StopReason == provider.StopOther || r.StopReason == "") {
		return "tool_use"
	}
	switch r.StopReason {
	case provider.StopMaxTokens:
		return "max_tokens"
	case provider.StopToolUse:
		return "tool_use"
	case provider.StopSequence:
		return "stop_sequence"
	case provider.StopRefusal, provider.StopContentFilter:
		return "refusal"
	case provider.StopPause:
		return "pause_turn"
	case provider.StopContextWindow:
		return "model_context_window_exceeded"
	}
	return "end_turn"
}
