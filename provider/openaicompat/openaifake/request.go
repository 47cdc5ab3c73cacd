package openaifake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Recorded is one request the fake received, as sent (auth headers
// included, so tests can assert them).
type Recorded struct {
	fakekit.RecordedBase // Method, Path, RawQuery, Header, Body; Query, Decode
	// RequestID is the x-request-id the OpenAI flavour answered with ("" on
	// the other flavours, which send none).
	RequestID string
}

// clone deep-copies r's header and body for [Server.Requests].
func (r Recorded) clone() Recorded {
	r.RecordedBase = fakekit.CloneBase(r.RecordedBase)
	return r
}

// APIKey is the Bearer token of the Authorization header ("" if none).
func (r Recorded) APIKey() string {
	return bearer(r.Header)
}

// Model is the body's "model".
func (r Recorded) Model() string {
	var b struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Model
}

// Stream reports whether the body asked for a streamed reply.
func (r Recorded) Stream() bool {
	var b struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Stream
}

// IncludeUsage reports whether the body asked for the final usage chunk
// (stream_options.include_usage).
func (r Recorded) IncludeUsage() bool {
	var b struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.StreamOptions.IncludeUsage
}

// Message is one message of a recorded request, flattened for assertions.
type Message struct {
	Role string
	// Content is the string content, or the text parts joined by newlines.
	Content    string
	ToolCallID string
	ToolCalls  []ToolCall
}

// Messages parses the body's messages (nil if it has none or is not JSON).
func (r Recorded) Messages() []Message {
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil
	}
	var out []Message
	for _, m := range body.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out = append(out, msg)
	}
	return out
}

// LastUserText is the text of the last user message.
func (r Recorded) LastUserText() string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// contentText flattens a content value (string or part list) to text.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// ResponseSchema is response_format.json_schema.schema (nil when the body
// asks for no JSON schema).
func (r Recorded) ResponseSchema() json.RawMessage {
	var b struct {
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if json.Unmarshal(r.Body, &b) != nil || b.ResponseFormat.Type != "json_schema" {
		return nil
	}
	return b.ResponseFormat.JSONSchema.Schema
}

// Echo is the default reply: the text "echo: <last user text>" (truncated
// to 200 runes), with derived usage; for a request with a JSON schema
// response format (a Responses request's text.format), a JSON value
// matching the schema.
func Echo(r Recorded) Reply {
	schema, text := r.ResponseSchema(), r.LastUserText()
	if isResponses(r) {
		schema, text = responsesSchema(r), responsesText(r)
	}
	if schema != nil {
		return Reply{Text: string(fakekit.SchemaInstance(schema))}
	}
	if utf8.RuneCountInString(text) > 200 {
		text = string([]rune(text)[:200])
	}
	if strings.TrimSpace(text) == "" {
		text = "(empty)"
	}
	return Reply{Text: "echo: " + text}
}

// CountTokens is the fake's deterministic prompt-token count of a request
// body, used when a reply's Usage is zero and for the context-window
// checks: [fakekit.PromptTokens] of its "messages", "instructions",
// "input" and "tools" values (messages for Chat Completions, instructions
// and input for the Responses API): one token per 4 ASCII bytes of their
// keys, strings and numbers, one per byte outside ASCII; each image_url
// part by its pixels as the body's model bills it (see imageBill); at
// least 1. It is not the real tokenizer, but never more lenient than one
// on the texts where tokenizers differ most.
func CountTokens(body []byte) int {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return 1
	}
	var model string
	_ = json.Unmarshal(fields["model"], &model)
	var vals []json.RawMessage
	for _, k := range []string{"messages", "instructions", "input", "tools"} {
		if v, ok := fields[k]; ok {
			vals = append(vals, v)
		}
	}
	return max(1, fakekit.PromptTokens(imageBill(model), vals...))
}

// servedTier is the service_tier an OpenAI answer reports for the one
// asked for: "default" for none or "auto", else the tier asked for
// ("flex", "priority", "scale").
func servedTier(asked string) string {
	if asked == "" || asked == "auto" {
		return "default"
	}
	return asked
}

// completionTokens is the derived completion count: ceil(bytes/4), at
// least 1.
func completionTokens(generatedBytes int) int {
	return max(1, (generatedBytes+3)/4)
}

// bearer extracts the token of Authorization: Bearer.
func bearer(h http.Header) string {
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// chatRequest is what the fake reads from a chat body.
type chatRequest struct {
	model               string
	hasModel            bool
	stream              bool
	includeUsage        bool
	hasStreamOptions    bool
	noObfuscation       bool
	hasMaxTokens        bool
	maxTokens           int
	maxCompletionTokens int
	serviceTier         string
}

// parseChat validates a chat body the way the flavour's server does and
// returns its fields, or the error the server would send.
func (s *Server) parseChat(body []byte) (chatRequest, *apiError) {
	var req chatRequest
	bad := func(msg, param, code string) (chatRequest, *apiError) {
		return req, &apiError{status: 400, typ: TypeInvalidRequest, message: msg, param: param, code: code}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		switch s.cfg.flavor {
		case FlavorOllama:
			if err == nil {
				return bad("invalid request body", "", "")
			}
			return bad(err.Error(), "", "")
		case FlavorVLLM:
			return bad("JSON decode error", "", "")
		}
		return bad("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)", "", "")
	}
	present := func(k string) bool {
		v, ok := fields[k]
		return ok && string(v) != "null"
	}
	if present("model") {
		req.hasModel = json.Unmarshal(fields["model"], &req.model) == nil && req.model != ""
	}
	if present("stream") {
		_ = json.Unmarshal(fields["stream"], &req.stream)
	}
	if present("stream_options") {
		req.hasStreamOptions = true
		var so struct {
			IncludeUsage       bool  `json:"include_usage"`
			IncludeObfuscation *bool `json:"include_obfuscation"`
		}
		_ = json.Unmarshal(fields["stream_options"], &so)
		req.includeUsage = so.IncludeUsage
		req.noObfuscation = so.IncludeObfuscation != nil && !*so.IncludeObfuscation
	}
	if present("max_tokens") {
		req.hasMaxTokens = true
		_ = json.Unmarshal(fields["max_tokens"], &req.maxTokens)
	}
	if present("max_completion_tokens") {
		_ = json.Unmarshal(fields["max_completion_tokens"], &req.maxCompletionTokens)
	}
	if present("service_tier") {
		_ = json.Unmarshal(fields["service_tier"], &req.serviceTier)
	}
	var msgs []json.RawMessage
	msgsOK := present("messages") && json.Unmarshal(fields["messages"], &msgs) == nil

	switch s.cfg.flavor {
	case FlavorOllama:
		if !msgsOK || len(msgs) == 0 {
			return bad("[] is too short - 'messages'", "", "")
		}
		if !req.hasModel {
			return bad("model is required", "", "")
		}
	case FlavorVLLM:
		if !msgsOK {
			return bad("messages: Field required", "", "")
		}
		if !req.hasModel && len(s.cfg.models) > 0 {
			// vLLM serves its one model when the request names none.
			req.model, req.hasModel = s.cfg.models[0].ID, true
		}
	default:
		if !req.hasModel {
			return bad("you must provide a model parameter", "", "")
		}
		if !present("messages") {
			return bad("Missing required parameter: 'messages'.", "messages", CodeMissingRequiredParam)
		}
		if !msgsOK {
			return bad("Invalid type for 'messages': expected an array of objects, but got a value instead.", "messages", "invalid_type")
		}
		if len(msgs) == 0 {
			return bad("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages", CodeEmptyArray)
		}
		if req.hasMaxTokens && reasoningModel(req.model) {
			return bad(messageMaxTokensNotAllowed, "max_tokens", CodeUnsupportedParameter)
		}
		if e := checkSampling(fields, req.model); e != nil {
			return req, e
		}
		if e := checkImages(msgs); e != nil {
			return req, e
		}
		if req.hasStreamOptions && !req.stream {
			return bad("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "")
		}
	}
	return req, nil
}

// checkSampling validates temperature, top_p, stop and top_k the way
// OpenAI's platform does: ranges, at most four stop sequences, no top_k,
// reasoning models refusing any temperature or top_p but the default 1,
// and reasoning_effort only for reasoning models, with a known value.
func checkSampling(fields map[string]json.RawMessage, model string) *apiError {
	bad := func(msg, param, code string) *apiError {
		return &apiError{status: 400, typ: TypeInvalidRequest, message: msg, param: param, code: code}
	}
	for _, k := range []struct {
		name string
		max  float64
	}{{"temperature", 2}, {"top_p", 1}} {
		raw, ok := fields[k.name]
		if !ok || string(raw) == "null" {
			continue
		}
		var v float64
		if json.Unmarshal(raw, &v) != nil {
			return bad(fmt.Sprintf("Invalid type for '%s': expected a decimal, but got a value instead.", k.name), k.name, "invalid_type")
		}
		switch {
		case v < 0:
			return bad(fmt.Sprintf("Invalid '%s': decimal below minimum value. Expected a value >= 0, but got %v instead.", k.name, v), k.name, "decimal_below_min_value")
		case v > k.max:
			return bad(fmt.Sprintf("Invalid '%s': decimal above maximum value. Expected a value <= %v, but got %v instead.", k.name, k.max, v), k.name, "decimal_above_max_value")
		case v != 1 && reasoningModel(model):
			return bad(fmt.Sprintf("Unsupported value: '%s' does not support %v with this model. Only the default (1) value is supported.", k.name, v), k.name, CodeUnsupportedValue)
		}
	}
	if raw, ok := fields["stop"]; ok && string(raw) != "null" {
		var one string
		var list []string
		switch {
		case json.Unmarshal(raw, &one) == nil:
		case json.Unmarshal(raw, &list) == nil:
			if len(list) > 4 {
				return bad(fmt.Sprintf("Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length %d instead.", len(list)), "stop", "array_above_max_length")
			}
		default:
			return bad("Invalid type for 'stop': expected one of a string or an array of strings, but got a value instead.", "stop", "invalid_type")
		}
	}
	if _, ok := fields["top_k"]; ok {
		return bad("Unrecognized request argument supplied: top_k", "", "")
	}
	if raw, ok := fields["reasoning_effort"]; ok && string(raw) != "null" {
		var e string
		_ = json.Unmarshal(raw, &e)
		switch {
		case !reasoningModel(model):
			return bad("Unsupported parameter: 'reasoning_effort' is not supported with this model.", "reasoning_effort", CodeUnsupportedParameter)
		case !slices.Contains([]string{"none", "minimal", "low", "medium", "high", "xhigh"}, e):
			return bad(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', and 'xhigh'.", e), "reasoning_effort", "invalid_value")
		}
	}
	return checkResponseFormat(fields["response_format"])
}

// checkResponseFormat validates response_format as OpenAI does: a known
// type; for json_schema a valid name and, under strict, a closed schema.
func checkResponseFormat(raw json.RawMessage) *apiError {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	bad := func(msg, param, code string) *apiError {
		return &apiError{status: 400, typ: TypeInvalidRequest, message: msg, param: param, code: code}
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   *string         `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return bad("Invalid type for 'response_format': expected an object, but got a value instead.", "response_format", "invalid_type")
	}
	switch rf.Type {
	case "text", "json_object":
		return nil
	case "json_schema":
	default:
		return bad(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", rf.Type), "response_format.type", "invalid_value")
	}
	if rf.JSONSchema == nil {
		return bad("Missing required parameter: 'response_format.json_schema'.", "response_format.json_schema", CodeMissingRequiredParam)
	}
	if rf.JSONSchema.Name == nil {
		return bad("Missing required parameter: 'response_format.json_schema.name'.", "response_format.json_schema.name", CodeMissingRequiredParam)
	}
	name := *rf.JSONSchema.Name
	if !formatName.MatchString(name) {
		return bad("Invalid 'response_format.json_schema.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", "response_format.json_schema.name", "invalid_value")
	}
	if rf.JSONSchema.Strict {
		if msg := fakekit.ClosedSchemaProblem(rf.JSONSchema.Schema, true); msg != "" {
			ctx, what, _ := strings.Cut(msg, ": ")
			if ctx == "(root)" {
				ctx = ""
			}
			return bad(fmt.Sprintf("Invalid schema for response_format '%s': In context=(%s), %s.", name, ctx, what), "response_format", "invalid_json_schema")
		}
	}
	return nil
}

// formatName is the pattern OpenAI holds response format names to.
var formatName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkImages validates image_url content parts as OpenAI does: in user
// messages only, with an http(s) URL or a base64 data URL of an image
// type.
func checkImages(msgs []json.RawMessage) *apiError {
	for i, raw := range msgs {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		var parts []struct {
			Type     string `json:"type"`
			ImageURL *struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.Unmarshal(raw, &m) != nil || json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for j, p := range parts {
			if p.Type != "image_url" {
				continue
			}
			param := fmt.Sprintf("messages[%d].content[%d].image_url.url", i, j)
			if m.Role != "user" {
				return &apiError{status: 400, typ: TypeInvalidRequest, param: fmt.Sprintf("messages[%d].content[%d].type", i, j), code: "invalid_value",
					message: "Invalid value: 'image_url'. Supported values are: 'text' and 'refusal'."}
			}
			if p.ImageURL == nil {
				return &apiError{status: 400, typ: TypeInvalidRequest, param: fmt.Sprintf("messages[%d].content[%d].image_url", i, j), code: CodeMissingRequiredParam,
					message: fmt.Sprintf("Missing required parameter: 'messages[%d].content[%d].image_url'.", i, j)}
			}
			if msg := imageURLProblem(p.ImageURL.URL); msg != "" {
				return &apiError{status: 400, typ: TypeInvalidRequest, param: param, code: "invalid_value", message: fmt.Sprintf("Invalid '%s'. %s", param, msg)}
			}
		}
	}
	return nil
}

func imageURLProblem(u string) string {
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return ""
	}
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "Expected a valid URL, but got a value with an invalid format."
	}
	mime, data, ok := strings.Cut(rest, ";base64,")
	switch {
	case !ok:
		return "Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value with an invalid format."
	case mime != "image/png" && mime != "image/jpeg" && mime != "image/gif" && mime != "image/webp":
		return fmt.Sprintf("Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type '%s'.", mime)
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return "Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got invalid base64 data."
	}
	return ""
}
