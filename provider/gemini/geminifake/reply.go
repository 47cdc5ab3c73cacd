package geminifake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Reply scripts the answer to one call. The zero Reply is the default echo
// reply (see [Echo]).
//
// A Reply is either a success (the content fields), a blocked prompt
// (BlockReason) or a fault (Code >= 400, Status or RawBody set); stream
// faults (MidStreamError, CutAfterChunks) are applied on top of a success.
// Hold delays any of them.
type Reply struct {
	// Thought, when set, is emitted first as a thought-summary part
	// ({"text":…,"thought":true}).
	Thought *Thought
	// Text, when non-empty, is emitted as a text part after Thought. A
	// streamed reply sends it in several chunks, each holding only new text.
	Text string
	// FunctionCalls are emitted as functionCall parts after Text, in order.
	// Each arrives whole, in one chunk, when streamed.
	FunctionCalls []FunctionCall
	// FinishReason defaults to "STOP" (also for function calls: the API has
	// no tool-specific finish reason).
	FinishReason string
	// FinishMessage is candidates[0].finishMessage; with function calls it
	// defaults to "Model generated function call(s).", as Gemini 3 sends.
	FinishMessage string
	// ModelVersion is the modelVersion reported; empty means the request's
	// model.
	ModelVersion string
	// ResponseID is the responseId; empty means a generated one.
	ResponseID string
	// Usage is reported as given; the zero Usage means "derive it": the
	// prompt is [CountTokens] of the request, candidates one token per four
	// bytes of text and function calls (at least 1), thoughts one per four
	// bytes of Thought.Text.
	Usage Usage
	// TextSignature is the thoughtSignature of the (last) text part. Empty
	// means generated for Gemini 3+ models when the reply has no function
	// call (the signature then travels on the first call), none otherwise.
	TextSignature string
	// OmitSignatures turns off every generated thought signature of this
	// reply (explicit ones are still sent).
	OmitSignatures bool
	// OmitCallIDs sends the function calls without an id, as the
	// Developer API often does; a call's explicit ID is still sent.
	OmitCallIDs bool

	// BlockReason, when set, answers with a blocked prompt: HTTP 200, no
	// candidates, promptFeedback.blockReason (SAFETY, OTHER, BLOCKLIST,
	// PROHIBITED_CONTENT, IMAGE_SAFETY). Content fields are ignored.
	BlockReason string
	// SafetyRatings go to promptFeedback for a blocked prompt (default for
	// SAFETY: [DefaultSafetyRatings]) and to the candidate otherwise.
	SafetyRatings []SafetyRating

	// Code is the HTTP status of a fault (and error.code of its body). Zero
	// means 200 for successes and RawBody, or the code of Status (see
	// [CodeForStatus]) when Status is set.
	Code int
	// Status is error.status of the error body, e.g. "RESOURCE_EXHAUSTED";
	// empty with a Code >= 400 means the status of that code (see
	// [StatusForCode]).
	Status string
	// Message is error.message; empty means a default for the status.
	Message string
	// Details are the error.details objects (google.rpc.QuotaFailure,
	// RetryInfo, ErrorInfo, Help, …), each a JSON object with an "@type".
	// See [RetryInfoDetail] and its siblings.
	Details []json.RawMessage
	// Headers are added to the response. They are set after the standard
	// headers, so they can also override them.
	Headers map[string]string
	// RawBody, when non-empty, replaces the body entirely (e.g. a proxy's
	// HTML 502 page), for streaming requests too.
	RawBody string
	// RawContentType is the content-type of RawBody; default
	// "application/json; charset=UTF-8".
	RawContentType string

	// MidStreamError makes a streamed response (HTTP 200) end with a
	// `data: {"error":{…}}` chunk after MidStreamError.AfterChunks chunks.
	// A non-streaming request gets the same error as an HTTP error instead.
	MidStreamError *StreamError
	// CutAfterChunks > 0 closes the connection abruptly after that many
	// chunks of a streamed response (no terminating chunk). For a
	// non-streaming request it cuts the body in half.
	CutAfterChunks int
	// CutAfterBytes > 0 writes the full Content-Length header but only that
	// many bytes of a non-streaming (or RawBody) response, then closes the
	// connection abruptly.
	CutAfterBytes int
	// Hold, when non-nil, delays the response: nothing is written until
	// Hold is closed (or receives), the client goes away, or the server is
	// closed. The request is recorded before the wait starts.
	Hold <-chan struct{}
}

// Thought is a thought-summary part.
type Thought struct {
	Text string
	// Signature is its thoughtSignature (base64); empty sends none.
	Signature string
}

// FunctionCall is one functionCall part of a reply (or of a recorded
// request).
type FunctionCall struct {
	// ID defaults to a generated 8-character id (e.g. "bu4kjcsx").
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
	// ThoughtSignature is the part's thoughtSignature (base64, standard
	// alphabet with padding, as the API sends it). In a reply, empty means
	// generated for the first call when the model thinks, none for the
	// others (parallel calls carry one signature). It is not part of the
	// functionCall object on the wire but of its enclosing part.
	ThoughtSignature string `json:"-"`
}

// Usage is the token accounting of a reply. Prompt INCLUDES Cached, as the
// real promptTokenCount includes cachedContentTokenCount; totalTokenCount
// is Prompt + Candidates + Thoughts + ToolUsePrompt.
type Usage struct {
	Prompt        int
	Candidates    int
	Thoughts      int
	Cached        int
	ToolUsePrompt int
}

// Total is totalTokenCount: Prompt + Candidates + Thoughts + ToolUsePrompt.
func (u Usage) Total() int { return u.Prompt + u.Candidates + u.Thoughts + u.ToolUsePrompt }

// SafetyRating is one entry of safetyRatings.
type SafetyRating struct {
	Category    string `json:"category"`
	Probability string `json:"probability"`
	Blocked     bool   `json:"blocked,omitempty"`
}

// DefaultSafetyRatings are the ratings of a prompt blocked for SAFETY.
func DefaultSafetyRatings() []SafetyRating {
	return []SafetyRating{
		{Category: "HARM_CATEGORY_SEXUALLY_EXPLICIT", Probability: "NEGLIGIBLE"},
		{Category: "HARM_CATEGORY_HATE_SPEECH", Probability: "NEGLIGIBLE"},
		{Category: "HARM_CATEGORY_HARASSMENT", Probability: "NEGLIGIBLE"},
		{Category: "HARM_CATEGORY_DANGEROUS_CONTENT", Probability: "HIGH", Blocked: true},
	}
}

// StreamError is an error chunk sent inside a 200 stream.
type StreamError struct {
	// Code is error.code, e.g. 503; zero means the code of Status.
	Code int
	// Status is error.status, e.g. "UNAVAILABLE"; empty means the status
	// of Code.
	Status string
	// Message is error.message; empty means the default of the status.
	Message string
	// AfterChunks is how many chunks are written before the error chunk.
	// 0 sends the error as the very first chunk.
	AfterChunks int
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

// isFault reports whether r answers with an HTTP error or a raw body
// instead of a GenerateContentResponse.
func (r *Reply) isFault() bool {
	return r.Code >= 400 || r.Status != "" || r.RawBody != ""
}

// hasContent reports whether r scripts any part.
func (r *Reply) hasContent() bool {
	return r.Thought != nil || r.Text != "" || len(r.FunctionCalls) > 0
}

// faultCodeAndStatus resolves the HTTP code and status of a fault.
func (r *Reply) faultCodeAndStatus() (int, string) {
	code, status := r.Code, r.Status
	if code == 0 {
		if status == "" {
			return 200, ""
		}
		code = CodeForStatus(status)
	}
	if status == "" && code >= 400 {
		status = StatusForCode(code)
	}
	return code, status
}

// validate reports a scripting mistake that the fake cannot turn into a
// wire-valid response.
func (r *Reply) validate() error {
	for i, fc := range r.FunctionCalls {
		if fc.Name == "" {
			return fmt.Errorf("FunctionCalls[%d]: empty Name", i)
		}
		if len(fc.Args) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(fc.Args, &obj); err != nil || obj == nil {
				return fmt.Errorf("FunctionCalls[%d] (%s): Args must be a JSON object: %q", i, fc.Name, fc.Args)
			}
		}
		if err := checkSignature(fc.ThoughtSignature); err != nil {
			return fmt.Errorf("FunctionCalls[%d] (%s): ThoughtSignature: %v", i, fc.Name, err)
		}
	}
	if r.Thought != nil {
		if err := checkSignature(r.Thought.Signature); err != nil {
			return fmt.Errorf("Thought.Signature: %v", err)
		}
	}
	if err := checkSignature(r.TextSignature); err != nil {
		return fmt.Errorf("TextSignature: %v", err)
	}
	for i, d := range r.Details {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(d, &obj); err != nil || obj == nil {
			return fmt.Errorf("Details[%d] must be a JSON object: %q", i, d)
		}
	}
	u := r.Usage
	if u.Prompt < 0 || u.Candidates < 0 || u.Thoughts < 0 || u.Cached < 0 || u.ToolUsePrompt < 0 {
		return fmt.Errorf("negative Usage %+v", u)
	}
	if u.Cached > u.Prompt {
		return fmt.Errorf("Usage.Cached %d > Usage.Prompt %d (the prompt count includes cached tokens)", u.Cached, u.Prompt)
	}
	if r.Code != 0 && (r.Code < 100 || r.Code > 999) {
		return fmt.Errorf("invalid Code %d", r.Code)
	}
	if r.CutAfterChunks < 0 || r.CutAfterBytes < 0 {
		return fmt.Errorf("negative cut")
	}
	if r.MidStreamError != nil && r.MidStreamError.AfterChunks < 0 {
		return fmt.Errorf("negative MidStreamError.AfterChunks")
	}
	return nil
}

// checkSignature accepts "" or canonical standard base64 (what the SDK,
// which holds signatures as []byte, sends back byte for byte).
func checkSignature(sig string) error {
	if sig == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || base64.StdEncoding.EncodeToString(b) != sig {
		return fmt.Errorf("%q is not canonical standard base64", sig)
	}
	return nil
}

// TextReply is a success reply with one text part.
func TextReply(text string) Reply { return Reply{Text: text} }

// FunctionCallReply is a success reply that calls one function (finish
// reason STOP). args must be a JSON object.
func FunctionCallReply(name, args string) Reply {
	return Reply{FunctionCalls: []FunctionCall{{Name: name, Args: json.RawMessage(args)}}}
}

// BlockedPrompt is the HTTP 200 answer to a prompt the API refuses: no
// candidates, promptFeedback.blockReason = reason (e.g. "SAFETY",
// "PROHIBITED_CONTENT").
func BlockedPrompt(reason string) Reply { return Reply{BlockReason: reason} }
