package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// The Messages API's request and answer as fixed Go structs. The SDK still
// sends the request (auth, headers, base URL, retries, errors); the adapter
// encodes the body itself and decodes the raw answer, which spares the SDK's
// reflective parameter and response codecs. Every field here encodes as
// anthropic.MessageNewParams does for what the adapter sets, and decodes as
// anthropic.Message does for what it reads (equivalence_test.go holds both
// to it).

// wireRequest is the body of POST /v1/messages.
type wireRequest struct {
	MaxTokens     int64             `json:"max_tokens"`
	Messages      []wireMessage     `json:"messages,omitzero"`
	Model         string            `json:"model,omitzero"`
	OutputConfig  *wireOutputConfig `json:"output_config,omitempty"`
	StopSequences []string          `json:"stop_sequences,omitzero"`
	System        []wireBlock       `json:"system,omitzero"`
	Thinking      *wireThinking     `json:"thinking,omitempty"`
	ToolChoice    *wireToolChoice   `json:"tool_choice,omitempty"`
	Tools         []wireTool        `json:"tools,omitzero"`
	Stream        bool              `json:"stream,omitempty"`
}

type wireOutputConfig struct {
	Effort string      `json:"effort,omitempty"`
	Format *wireFormat `json:"format,omitempty"`
}

// wireFormat is a json_schema output format. The schema is the decoded
// map, as the SDK sends it (numbers as float64).
type wireFormat struct {
	Schema map[string]any `json:"schema,omitzero"`
	Type   string         `json:"type"`
}

// wireThinking is {type: enabled, budget_tokens} or {type: adaptive}.
type wireThinking struct {
	BudgetTokens *int64 `json:"budget_tokens,omitempty"`
	Type         string `json:"type"`
}

// wireToolChoice is auto, any, tool (with its name) or none.
type wireToolChoice struct {
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
	Type                   string `json:"type"`
}

type wireTool struct {
	InputSchema  map[string]any `json:"input_schema,omitempty"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	Strict       bool           `json:"strict,omitempty"`
	CacheControl *wireCache     `json:"cache_control,omitempty"`
}

// wireCache is cache_control: {type: ephemeral[, ttl: 1h]}.
type wireCache struct {
	TTL  string `json:"ttl,omitempty"`
	Type string `json:"type"`
}

type wireMessage struct {
	Content []wireBlock `json:"content,omitzero"`
	Role    string      `json:"role"`
}

// wireBlock is one content block: its type, the fields of that type (one
// embedded pointer is set; encoding/json flattens it and skips the nil
// ones) and its cache mark. The fields each type requires are always sent,
// empty or not, as the SDK sends them.
type wireBlock struct {
	Type string `json:"type"`
	*textFields
	*thinkingFields
	*redactedFields
	*imageFields
	*toolUseFields
	*toolResultFields
	CacheControl *wireCache `json:"cache_control,omitempty"`
}

type textFields struct {
	Text string `json:"text"`
}

type thinkingFields struct {
	Signature string `json:"signature"`
	Thinking  string `json:"thinking"`
}

type redactedFields struct {
	Data string `json:"data"`
}

type imageFields struct {
	Source wireImageSource `json:"source"`
}

// wireImageSource is {type: url, url} or {type: base64, media_type, data}.
type wireImageSource struct {
	URL       string `json:"url,omitempty"`
	Data      string `json:"data,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Type      string `json:"type"`
}

type toolUseFields struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
	Name  string          `json:"name"`
}

type toolResultFields struct {
	ToolUseID string      `json:"tool_use_id"`
	IsError   bool        `json:"is_error"`
	Content   []wireBlock `json:"content"`
}

func textBlock(text string) wireBlock {
	return wireBlock{Type: "text", textFields: &textFields{Text: text}}
}

// encode returns the request body.
func (r *wireRequest) encode() ([]byte, error) {
	return json.Marshal(r)
}

// wireAnswer is what the adapter reads of a Message.
type wireAnswer struct {
	ID         string        `json:"id"`
	Model      string        `json:"model"`
	StopReason string        `json:"stop_reason"`
	Content    []wireContent `json:"content"`
	Usage      wireUsage     `json:"usage"`
}

// wireContent is what the adapter reads of a content block.
type wireContent struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type wireUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheCreation            struct {
		Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokensDetails struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// decodeAnswer decodes the body of a successful response whose
// Content-Type is contentType; a nil answer is a JSON null. A body the
// fixed structs do not take as they are (a number where a string belongs,
// trailing data, invalid JSON or UTF-8) goes through the SDK's own decoding, so
// that it is read, or refused, exactly as the SDK would.
func decodeAnswer(contentType string, body []byte) (*wireAnswer, error) {
	if contentType != "application/json" && !isJSON(contentType) {
		// What the SDK says of a non-JSON answer to a decoded call.
		return nil, fmt.Errorf("expected destination type of 'string' or '[]byte' for responses with content-type '%s' that is not 'application/json'", contentType)
	}
	// encoding/json would replace invalid UTF-8 with U+FFFD, which the
	// SDK keeps as it came.
	var m *wireAnswer
	if utf8.Valid(body) && json.Unmarshal(body, &m) == nil {
		return m, nil
	}
	var msg *anthropic.Message
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&msg); err != nil {
		return nil, fmt.Errorf("error parsing response json: %w", err)
	}
	if msg == nil {
		return nil, nil
	}
	return answerOf(msg), nil
}

// isJSON reports whether the SDK takes contentType for JSON.
func isJSON(contentType string) bool {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	return strings.Contains(mediaType, "application/json") || strings.HasSuffix(mediaType, "+json")
}

// answerOf is what the adapter reads of msg.
func answerOf(msg *anthropic.Message) *wireAnswer {
	m := &wireAnswer{ID: msg.ID, Model: string(msg.Model), StopReason: string(msg.StopReason), Content: make([]wireContent, len(msg.Content))}
	for i, b := range msg.Content {
		m.Content[i] = wireContent{Type: b.Type, Text: b.Text, Thinking: b.Thinking, Signature: b.Signature, Data: b.Data, ID: b.ID, Name: b.Name, Input: b.Input}
	}
	u := msg.Usage
	m.Usage = wireUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens}
	m.Usage.CacheCreation.Ephemeral1hInputTokens = u.CacheCreation.Ephemeral1hInputTokens
	m.Usage.OutputTokensDetails.ThinkingTokens = u.OutputTokensDetails.ThinkingTokens
	return m
}

// wireEvent is what the adapter reads of one server-sent event of a
// streamed answer.
type wireEvent struct {
	Type         string         `json:"type"`
	Index        int64          `json:"index"`
	Message      wireAnswer     `json:"message"`
	ContentBlock wireBlockStart `json:"content_block"`
	Delta        wireDelta      `json:"delta"`
	Usage        wireUsage      `json:"usage"`
}

// wireBlockStart is what the stream reads of a content_block_start's
// block (a tool_use's input comes in its deltas).
type wireBlockStart struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	ID        string `json:"id"`
	Name      string `json:"name"`
}

// wireDelta is a content_block_delta's delta, or a message_delta's.
type wireDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	StopReason  string `json:"stop_reason"`
}

// decodeEvent is json.Unmarshal(data, e) in one pass over an event the
// fixed struct reads: json.Unmarshal would scan the event once to
// validate it before handing it to UnmarshalJSON, which decodes it
// (validating it again). Any other event is decoded by json.Unmarshal,
// so that the SDK's lenient decoding still sees only valid JSON.
func decodeEvent(data []byte, e *wireEvent) error {
	if decodeDelta(data, e) {
		return nil
	}
	*e = wireEvent{}
	type plain wireEvent
	if utf8.Valid(data) && json.Unmarshal(data, (*plain)(e)) == nil {
		return nil
	}
	*e = wireEvent{}
	return json.Unmarshal(data, e)
}

// deltaPrefix starts the data of nearly every event of a streamed answer.
var deltaPrefix = []byte(`{"type":"content_block_delta"`)

// decodeDelta is decodeEvent's fast path for the event a streamed answer
// is made of, a content_block_delta, written as the API writes it: valid
// UTF-8 and JSON, the members type, index and delta once each, index an
// integer, delta's members those wireDelta reads, each a string, once.
// It decodes data as json.Unmarshal would and reports true; for anything
// else it reports false (e may then hold part of data) and json.Unmarshal
// decides.
func decodeDelta(data []byte, e *wireEvent) bool {
	if !bytes.HasPrefix(data, deltaPrefix) || !utf8.Valid(data) {
		return false
	}
	*e = wireEvent{}
	cur := adapterkit.NewJSONCursor(data)
	var seen uint
	ok := cur.Object(func(key []byte) bool {
		var bit uint
		var ok bool
		switch string(key) {
		case "type":
			bit = 1
			e.Type, ok = cur.String()
		case "index":
			bit = 2
			e.Index, ok = cur.Int()
		case "delta":
			bit = 4
			ok = decodeWireDelta(&cur, &e.Delta)
		}
		ok = ok && seen&bit == 0
		seen |= bit
		return ok
	})
	return ok && cur.End() && seen == 7 && e.Type == "content_block_delta"
}

// decodeWireDelta reads the object at cur, a content_block_delta's
// delta, for decodeDelta.
func decodeWireDelta(cur *adapterkit.JSONCursor, d *wireDelta) bool {
	var seen uint
	return cur.Object(func(key []byte) bool {
		var f *string
		var bit uint
		switch string(key) {
		case "type":
			f, bit = &d.Type, 1
		case "text":
			f, bit = &d.Text, 2
		case "partial_json":
			f, bit = &d.PartialJSON, 4
		case "thinking":
			f, bit = &d.Thinking, 8
		case "signature":
			f, bit = &d.Signature, 16
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		var ok bool
		*f, ok = cur.String()
		return ok
	})
}

// UnmarshalJSON decodes an event's data into the fixed structs, or, for
// data they do not take as they are, through the SDK's own event type
// (see [decodeAnswer]).
func (e *wireEvent) UnmarshalJSON(data []byte) error {
	type plain wireEvent
	if utf8.Valid(data) && json.Unmarshal(data, (*plain)(e)) == nil {
		return nil
	}
	var u anthropic.MessageStreamEventUnion
	if err := u.UnmarshalJSON(data); err != nil {
		return err
	}
	*e = wireEvent{Type: u.Type, Index: u.Index, Message: *answerOf(&u.Message)}
	cb := u.ContentBlock
	e.ContentBlock = wireBlockStart{Type: cb.Type, Text: cb.Text, Thinking: cb.Thinking, Signature: cb.Signature, Data: cb.Data, ID: cb.ID, Name: cb.Name}
	d := u.Delta
	e.Delta = wireDelta{Type: d.Type, Text: d.Text, PartialJSON: d.PartialJSON, Thinking: d.Thinking, Signature: d.Signature, StopReason: string(d.StopReason)}
	us := u.Usage
	e.Usage = wireUsage{InputTokens: us.InputTokens, OutputTokens: us.OutputTokens, CacheReadInputTokens: us.CacheReadInputTokens, CacheCreationInputTokens: us.CacheCreationInputTokens}
	e.Usage.OutputTokensDetails.ThinkingTokens = us.OutputTokensDetails.ThinkingTokens
	return nil
}
