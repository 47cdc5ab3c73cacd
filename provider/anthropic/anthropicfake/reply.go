package anthropicfake

import (
	"encoding/json"
	"fmt"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Reply scripts the answer to one call. The zero Reply is the default echo
// reply (see [Echo]).
//
// A Reply is either a success (the content fields) or a fault (Status,
// ErrorType or RawBody set); stream faults (MidStreamError, CutAfterEvents,
// StallAfterEvents)
// are applied on top of a success. Hold delays either kind.
type Reply struct {
	// ID is the message id; empty means a generated "msg_01…" id.
	ID string
	// Model is the model reported back; empty means the request's model.
	Model string
	// Thinking, when set, is emitted as the first content block.
	Thinking *Thinking
	// Text, when non-empty, is emitted as a text block after Thinking.
	Text string
	// ToolUses are emitted as tool_use blocks after Text, in order.
	ToolUses []ToolUse
	// WebSearches are the searches the model runs with the web search
	// server tool, after Thinking and before Text: each is a
	// server_tool_use block and its web_search_tool_result (streamed as
	// the API streams them), and Text then carries a citation of every
	// result with a CitedText; usage reports
	// server_tool_use.web_search_requests. The request must offer the
	// tool (see [Recorded.WebSearchTool]), else the fake answers 500: a
	// scripting mistake. Searches past the tool's max_uses fail with
	// max_uses_exceeded.
	WebSearches []WebSearch
	// AppliedEdits are reported in context_management.applied_edits of
	// the answer (an empty list when nil) to a request with
	// context_management; scripted for a request without it, the fake
	// answers 500.
	AppliedEdits []AppliedEdit
	// StopReason defaults to "tool_use" when ToolUses is non-empty and
	// "end_turn" otherwise.
	StopReason string
	// StopSequence is reported when non-empty (use with StopReason
	// "stop_sequence").
	StopSequence string
	// Usage is reported as given; the zero Usage means "derive it": input
	// tokens are [CountTokens] of the request, split into cache reads,
	// cache writes and the rest by the fake's prompt cache (see the package
	// doc), and output tokens are one per
	// four bytes of generated content (at least 1), at most the request's
	// max_tokens (the text is then cut, with stop_reason max_tokens).
	Usage Usage

	// Status is the HTTP status of a fault. Zero means 200 for successes
	// and RawBody, or the status of ErrorType (see [StatusForType]) when
	// ErrorType is set.
	Status int
	// ErrorType is error.type of the error body; empty with a Status >= 400
	// means the type of that status (see [TypeForStatus]).
	ErrorType string
	// ErrorMessage is error.message of the error body.
	ErrorMessage string
	// ErrorCode, when set, is sent as error.details.error_code.
	ErrorCode string
	// Headers are added to the response (e.g. "retry-after": "2",
	// "retry-after-ms": "1500", "x-should-retry": "false"). They are set
	// after the standard headers, so they can also override them; an empty
	// value removes a header (e.g. "request-id", as a proxy that strips it).
	Headers map[string]string
	// RawBody, when non-empty, replaces the body entirely (e.g. a proxy's
	// HTML 502 page), for streaming requests too.
	RawBody string
	// RawContentType is the content-type of RawBody; default
	// "application/json".
	RawContentType string

	// MidStreamError makes a streaming response (HTTP 200) end with an
	// `event: error` after MidStreamError.AfterEvents events. A
	// non-streaming request gets the same error as an HTTP error instead,
	// with the status of its type.
	MidStreamError *StreamError
	// CutAfterEvents > 0 closes the connection abruptly after that many
	// events of a streaming response (no message_stop, no terminating
	// chunk). For a non-streaming request it cuts the body in half.
	CutAfterEvents int
	// StallAfterEvents > 0 pauses a streaming response after that many
	// events (pings included) until Stall is closed (or receives), the
	// client goes away or the server is closed: a model still generating,
	// or a server that stops sending mid-stream. With Stall nil the pause
	// lasts until the client gives up.
	StallAfterEvents int
	// Stall releases a stall (see StallAfterEvents).
	Stall <-chan struct{}
	// CutAfterBytes > 0 writes the full Content-Length header but only that
	// many bytes of a non-streaming (or RawBody) response, then closes the
	// connection abruptly. On a streaming response it closes the
	// connection after that many bytes of the event stream, wherever they
	// end (inside an event, say).
	CutAfterBytes int
	// Hold, when non-nil, delays the response: nothing is written until
	// Hold is closed (or receives), the client goes away, or the server is
	// closed. The request is recorded before the wait starts.
	Hold <-chan struct{}
}

// Thinking is an extended-thinking block.
type Thinking struct {
	Text string
	// Signature defaults to a value derived from Text.
	Signature string
}

// ToolUse is one tool call of the assistant.
type ToolUse struct {
	// ID defaults to a generated "toolu_01…" id.
	ID   string
	Name string
	// Input must be a JSON object; nil means {}.
	Input json.RawMessage
}

// Usage is the token accounting of a reply. Input excludes cached tokens,
// as the real API's input_tokens does.
type Usage struct {
	Input           int
	Output          int
	CacheRead       int
	CacheCreation5m int
	CacheCreation1h int
}

// StreamError is an error event sent inside a 200 stream.
type StreamError struct {
	// Type is error.type, e.g. "overloaded_error".
	Type string
	// Message is error.message, e.g. "Overloaded".
	Message string
	// AfterEvents is how many events are written before the error event
	// (pings included). 0 sends the error as the very first event.
	AfterEvents int
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

// isFault reports whether r answers with an HTTP error or a raw body instead
// of a message.
func (r *Reply) isFault() bool {
	return r.Status >= 400 || r.ErrorType != "" || r.RawBody != ""
}

// hasContent reports whether r scripts any content block.
func (r *Reply) hasContent() bool {
	return r.Thinking != nil || r.Text != "" || len(r.ToolUses) > 0
}

// faultStatusAndType resolves the status and error type of a fault.
func (r *Reply) faultStatusAndType() (int, string) {
	status, typ := r.Status, r.ErrorType
	if status == 0 {
		if typ == "" {
			return 200, ""
		}
		status = StatusForType(typ)
	}
	if typ == "" && status >= 400 {
		typ = TypeForStatus(status)
	}
	return status, typ
}

// validate reports a scripting mistake that the fake cannot turn into a
// wire-valid response.
func (r *Reply) validate() error {
	for i, tu := range r.ToolUses {
		if tu.Name == "" {
			return fmt.Errorf("ToolUses[%d]: empty Name", i)
		}
		if len(tu.Input) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(tu.Input, &obj); err != nil || obj == nil {
			return fmt.Errorf("ToolUses[%d] (%s): Input must be a JSON object: %q", i, tu.Name, tu.Input)
		}
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 999) {
		return fmt.Errorf("invalid Status %d", r.Status)
	}
	if r.CutAfterEvents < 0 || r.CutAfterBytes < 0 || r.StallAfterEvents < 0 {
		return fmt.Errorf("negative cut")
	}
	if r.MidStreamError != nil && r.MidStreamError.AfterEvents < 0 {
		return fmt.Errorf("negative MidStreamError.AfterEvents")
	}
	return r.validateServerTools()
}

// TextReply is a success reply with one text block.
func TextReply(text string) Reply { return Reply{Text: text} }

// ToolUseReply is a success reply that calls one tool, with stop_reason
// "tool_use". input must be a JSON object.
func ToolUseReply(name string, input string) Reply {
	return Reply{ToolUses: []ToolUse{{Name: name, Input: json.RawMessage(input)}}}
}
