package openaifake

import (
	"fmt"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Reply scripts the answer to one call. The zero Reply is the default echo
// reply (see [Echo]).
//
// A Reply is either a success (the content fields) or a fault (Status,
// ErrorType, ErrorMessage or RawBody set); the stream faults
// (MidStreamError, CutAfterChunks, EndAfterChunks, StallAfterChunks) apply
// on top of a success. Hold delays either kind.
type Reply struct {
	// ID is the completion id; empty means a generated one in the
	// flavour's format (chatcmpl-<29 base62>, chatcmpl-<0..998>,
	// chatcmpl-<32 hex>).
	ID string
	// Model is the model reported back; empty means the request's model
	// (on OpenAI, the catalogue's dated Snapshot of it when it has one).
	Model string
	// Text is the assistant's content.
	Text string
	// ToolCalls are the function calls of the assistant, in order.
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when ToolCalls is non-empty
	// and "stop" otherwise ("length" and "content_filter" must be asked
	// for).
	FinishReason string
	// Usage is reported as given; the zero Usage means "derive it" (see
	// [CountTokens]): prompt = [CountTokens], completion = ceil(generated
	// bytes / 4) but at most the request's output limit, no cached or
	// reasoning tokens (on the Responses API, a reasoning item's tokens
	// are ceil(bytes of its summary / 4), at least 1, part of the
	// completion).
	Usage Usage

	// Reasoning is the summary text of the reasoning item a Responses
	// answer starts with. A reasoning model (gpt-5*, o*) always starts
	// with a reasoning item, with an empty summary when Reasoning is "";
	// another model has one only when Reasoning is set. Chat Completions
	// ignores it.
	Reasoning string
	// WebSearches are the queries of the web_search_call items a
	// Responses answer holds (after its reasoning item, before its
	// message), each one web search billed. Chat Completions ignores it.
	WebSearches []string

	// Status is the HTTP status of a fault. Zero means 200 for a RawBody
	// and 400 for an error given only by ErrorType or ErrorMessage.
	Status int
	// ErrorType is error.type on OpenAI. Ollama and vLLM always derive
	// the type from the status, as the real servers do.
	ErrorType string
	// ErrorMessage is error.message.
	ErrorMessage string
	// ErrorCode is error.code on OpenAI (e.g. "rate_limit_exceeded"), and
	// on vLLM with [ErrorStyleVLLMStringCode]; empty sends null (OpenAI)
	// or the integer status (vLLM). Ollama always sends null.
	ErrorCode string
	// ErrorParam is error.param (e.g. "messages"); empty sends null.
	// Ollama always sends null.
	ErrorParam string
	// Headers are added to the response (any flavour). They are set after
	// the standard headers, so they can also override them.
	Headers map[string]string
	// RetryAfter > 0 sends retry-after (whole seconds, rounded up) and
	// retry-after-ms, on any flavour.
	RetryAfter time.Duration
	// RateLimitReset > 0 makes the OpenAI flavour report the bucket this
	// fault exhausted as empty: x-ratelimit-remaining-<bucket>: 0 and
	// x-ratelimit-reset-<bucket>: RateLimitReset. The bucket is
	// "requests" when ErrorType is "requests", else "tokens".
	RateLimitReset time.Duration
	// RawBody, when non-empty, replaces the body entirely (e.g. a proxy's
	// HTML 502 page), for streaming requests too.
	RawBody string
	// RawContentType is the content-type of RawBody; default
	// "application/json".
	RawContentType string

	// MidStreamError makes a streaming response (HTTP 200) end with an
	// error chunk `data: {"error":{…}}` after MidStreamError.AfterChunks
	// chunks. A non-streaming request gets the same error as an HTTP
	// error instead (status MidStreamError.Status, default 500).
	MidStreamError *StreamError
	// CutAfterChunks > 0 closes the connection abruptly after that many
	// chunks of a streaming response (no finish_reason, no [DONE], no
	// terminating chunk). For a non-streaming request it cuts the body in
	// half.
	CutAfterChunks int
	// EndAfterChunks > 0 ends a streaming response cleanly after that many
	// chunks, without finish_reason or [DONE]: a truncated stream that
	// looks complete at the HTTP level.
	EndAfterChunks int
	// StallAfterChunks > 0 pauses a streaming response after that many
	// chunks until Stall is closed (or receives), the client goes away or
	// the server is closed: a server that stops sending mid-stream. With
	// Stall nil the pause lasts until the client gives up.
	StallAfterChunks int
	// Stall releases a stall (see StallAfterChunks).
	Stall <-chan struct{}
	// CutAfterBytes > 0 writes the full Content-Length header but only that
	// many bytes of a non-streaming (or RawBody) response, then closes the
	// connection abruptly.
	CutAfterBytes int
	// Hold, when non-nil, delays the response: nothing is written until
	// Hold is closed (or receives), the client goes away, or the server is
	// closed. The request is recorded before the wait starts.
	Hold <-chan struct{}
}

// ToolCall is one function call of the assistant.
type ToolCall struct {
	// ID defaults to a generated id in the flavour's format (call_<24
	// base62>, call_<8 [a-z0-9]>, chatcmpl-tool-<32 hex>). On the
	// Responses API it is the call_id (call_<24 base62>); the item's own
	// id is fc_<50 hex>.
	ID   string
	Name string
	// Arguments is the JSON text of the arguments, sent as a JSON string
	// (OpenAI verbatim, Ollama compacted, vLLM re-spaced as Python's
	// json.dumps writes it, when it is valid JSON). Empty means "{}". It
	// need not be valid JSON, to test clients on malformed arguments.
	// For a Custom call it is the call's input text, sent as it is.
	Arguments string
	// Custom makes the call, on the Responses API, a custom_tool_call
	// item (id ctc_<50 hex>) of a custom (freeform) tool, whose input is
	// Arguments. Chat Completions ignores it: the call is a function call.
	Custom bool
	// Namespace, on the Responses API, is the namespace of the tool called
	// (a tool of a {"type":"namespace"} the request declared), sent as the
	// item's namespace. Chat Completions ignores it.
	Namespace string
}

// Usage is the token accounting of a reply. Cached is part of Prompt and
// Reasoning part of Completion, as on the wire.
type Usage struct {
	Prompt     int
	Completion int
	Cached     int
	Reasoning  int
}

// StreamError is an error chunk sent inside a 200 stream.
type StreamError struct {
	// Message is error.message.
	Message string
	// Type is error.type on OpenAI (default "server_error"); Ollama sends
	// "api_error" and vLLM the type of Status.
	Type string
	// Code is error.code on OpenAI; empty sends null.
	Code string
	// Status is the integer code vLLM puts in the chunk and the HTTP
	// status a non-streaming request gets instead (default 500).
	Status int
	// AfterChunks is how many chunks are written before the error chunk.
	// 0 sends the error as the very first chunk. On the Responses API a
	// chunk is an event: 0 sends the error before response.created.
	AfterChunks int
	// Failed, on the Responses API, ends the stream with a
	// response.failed event (the response with status "failed" and
	// error {code: Code or "server_error", message}) instead of an error
	// event ({"type":"error","code","message","param"}).
	Failed bool
}

// WithHeader returns a copy of r with one more response header.
func (r Reply) WithHeader(name, value string) Reply {
	r.Headers = fakekit.WithHeader(r.Headers, name, value)
	return r
}

// WithHold returns a copy of r that waits for gate (see Reply.Hold).
func (r Reply) WithHold(gate <-chan struct{}) Reply {
	r.Hold = gate
	return r
}

// WithRetryAfter returns a copy of r that sends retry-after and
// retry-after-ms for d.
func (r Reply) WithRetryAfter(d time.Duration) Reply {
	r.RetryAfter = d
	return r
}

// isFault reports whether r answers with an HTTP error or a raw body instead
// of a completion.
func (r *Reply) isFault() bool {
	return r.Status >= 400 || r.ErrorType != "" || r.ErrorMessage != "" || r.RawBody != ""
}

// hasContent reports whether r scripts any content.
func (r *Reply) hasContent() bool {
	return r.Text != "" || len(r.ToolCalls) > 0
}

// ReasoningToolCallReply is a Responses answer of a reasoning model that
// thinks (summary) and then calls one function, arguments being its JSON
// text: the turn whose reasoning item the next turn must send back.
func ReasoningToolCallReply(summary, name, arguments string) Reply {
	return Reply{Reasoning: summary, ToolCalls: []ToolCall{{Name: name, Arguments: arguments}}}
}

// faultStatus resolves the status of a fault.
func (r *Reply) faultStatus() int {
	switch {
	case r.Status != 0:
		return r.Status
	case r.RawBody != "" && r.ErrorType == "" && r.ErrorMessage == "":
		return 200
	}
	return 400
}

// validate reports a scripting mistake that the fake cannot turn into a
// wire-valid response.
func (r *Reply) validate() error {
	for i, tc := range r.ToolCalls {
		if tc.Name == "" {
			return fmt.Errorf("ToolCalls[%d]: empty Name", i)
		}
	}
	for i, q := range r.WebSearches {
		if q == "" {
			return fmt.Errorf("WebSearches[%d]: empty query", i)
		}
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 999) {
		return fmt.Errorf("invalid Status %d", r.Status)
	}
	if r.CutAfterChunks < 0 || r.CutAfterBytes < 0 || r.EndAfterChunks < 0 || r.StallAfterChunks < 0 {
		return fmt.Errorf("negative cut")
	}
	if me := r.MidStreamError; me != nil && (me.AfterChunks < 0 || (me.Status != 0 && (me.Status < 100 || me.Status > 999))) {
		return fmt.Errorf("invalid MidStreamError %+v", *me)
	}
	if u := r.Usage; u.Prompt < 0 || u.Completion < 0 || u.Cached < 0 || u.Reasoning < 0 {
		return fmt.Errorf("negative usage %+v", u)
	}
	return nil
}

// TextReply is a success reply with text content and finish_reason "stop".
func TextReply(text string) Reply { return Reply{Text: text} }

// ToolCallReply is a success reply that calls one function, with
// finish_reason "tool_calls". arguments is the JSON text of the arguments.
func ToolCallReply(name, arguments string) Reply {
	return Reply{ToolCalls: []ToolCall{{Name: name, Arguments: arguments}}}
}

// ToolCallsReply is a success reply with parallel function calls.
func ToolCallsReply(calls ...ToolCall) Reply {
	return Reply{ToolCalls: calls}
}
