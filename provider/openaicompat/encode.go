package openaicompat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The request body is written here, field by field, instead of by the SDK's
// reflective encoder of openai.ChatCompletionNewParams: the JSON value is
// the same (the equivalence tests compare the two on a broad table of
// requests). Inside a message the keys come in the SDK's order; elsewhere
// the order differs.

// maxOpenAIStop is how many stop sequences OpenAI takes.
const maxOpenAIStop = 4

// body encodes req as a Chat Completions request body, following the
// profile's quirks. The checks run in the order the SDK's parameters were
// built in, so that a request with several faults is refused for the same
// one.
func (a *Adapter) body(req *provider.Request, model string, stream bool) ([]byte, error) {
	b := make([]byte, 0, 512+requestSize(req))
	b = append(b, `{"model":`...)
	b = appendString(b, model)
	ns, id := a.profile.priceRef(a.baseURL, model)
	if a.profile.MaxCompletionTokens {
		b = append(b, `,"max_completion_tokens":`...)
	} else {
		b = append(b, `,"max_tokens":`...)
	}
	b = strconv.AppendInt(b, int64(a.base.MaxTokens(ns, id, req)), 10)
	if stream {
		b = append(b, `,"stream":true`...)
		if a.profile.StreamUsage {
			b = append(b, `,"stream_options":{"include_usage":true}`...)
		}
	}
	if len(req.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range req.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","function":{"name":`...)
			b = appendString(b, t.Name)
			var err error
			if b, err = appendParameters(b, t.InputSchema); err != nil {
				return nil, a.base.BadRequest(model, fmt.Sprintf("tools[%d] %q: input_schema: %v", i, t.Name, err))
			}
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = appendString(b, t.Description)
			}
			if t.Strict {
				b = append(b, `,"strict":true`...)
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	switch req.ToolChoice {
	case "":
	case provider.ToolChoiceAuto, provider.ToolChoiceNone, provider.ToolChoiceRequired:
		if len(req.Tools) > 0 {
			b = append(b, `,"tool_choice":`...)
			b = appendString(b, string(req.ToolChoice))
		}
	default:
		b = append(b, `,"tool_choice":{"type":"function","function":{"name":`...)
		b = appendString(b, string(req.ToolChoice))
		b = append(b, "}}"...)
	}
	if req.DisableParallelToolCalls && len(req.Tools) > 0 {
		b = append(b, `,"parallel_tool_calls":false`...)
	}
	b, err := a.appendSampling(b, req, model)
	if err != nil {
		return nil, err
	}
	if req.PromptCache != provider.PromptCacheOff && a.profile.PromptCaching && req.CacheKey != "" {
		b = append(b, `,"prompt_cache_key":`...)
		b = appendString(b, req.CacheKey)
	}
	b = append(b, `,"messages":[`...)
	first := true
	if req.System != "" {
		b = append(b, `{"content":`...)
		b = appendString(b, req.System)
		if a.profile.DeveloperRole {
			b = append(b, `,"role":"developer"}`...)
		} else {
			b = append(b, `,"role":"system"}`...)
		}
		first = false
	}
	for i, m := range req.Conversation() {
		if !first {
			b = append(b, ',')
		}
		if b, err = appendMessages(b, m); err != nil {
			return nil, a.base.BadRequest(model, fmt.Sprintf("messages[%d]: %v", i, err))
		}
		first = false
	}
	return append(b, "]}"...), nil
}

// requestSize guesses the encoded size of req's text, to size the buffer
// once.
func requestSize(req *provider.Request) int {
	n := len(req.System) + len(req.Prompt)
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema) + 64
	}
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			n += len(p.Text) + 32
			switch {
			case p.ToolCall != nil:
				n += len(p.ToolCall.ID) + len(p.ToolCall.Name) + len(p.ToolCall.Arguments) + 64
			case p.ToolResult != nil:
				n += len(p.ToolResult.CallID) + len(p.ToolResult.Content) + 48
			case p.Image != nil:
				n += len(p.Image.URL) + base64.StdEncoding.EncodedLen(len(p.Image.Data)) + 64
			}
		}
	}
	return n + n/16
}

// appendParameters writes a tool's "parameters": its input schema as given
// (a JSON object, which provider.Request.Validate checked), an empty object
// schema when it has none, nothing for a JSON null (which the SDK's
// parameters dropped too).
func appendParameters(b []byte, schema json.RawMessage) ([]byte, error) {
	s := bytes.TrimSpace(schema)
	switch {
	case len(s) == 0:
		return append(b, `,"parameters":{"type":"object","properties":{}}`...), nil
	case string(s) == "null":
		return b, nil
	case s[0] == '{' && json.Valid(s):
		b = append(b, `,"parameters":`...)
		return append(b, s...), nil
	}
	// Not an object: refused with the message the SDK's parameters gave.
	var p shared.FunctionParameters
	if err := json.Unmarshal(s, &p); err != nil {
		return nil, err
	}
	return nil, errors.New("not a JSON object")
}

// appendSampling writes temperature, top_p, top_k, seed, the reasoning
// effort and stop, each only when the request sets it and the model
// honours it, and the response format.
func (a *Adapter) appendSampling(b []byte, req *provider.Request, model string) ([]byte, error) {
	caps := a.ModelCapabilities(model)
	if caps.Has(provider.CapSampling) {
		if req.Temperature != nil {
			b = append(b, `,"temperature":`...)
			b = appendFloat(b, *req.Temperature)
		}
		if req.TopP != nil {
			b = append(b, `,"top_p":`...)
			b = appendFloat(b, *req.TopP)
		}
	}
	if req.TopK != nil && caps.Has(provider.CapTopK) {
		// Not in OpenAI's schema: vLLM takes it as an extra field.
		b = append(b, `,"top_k":`...)
		b = strconv.AppendInt(b, int64(*req.TopK), 10)
	}
	if req.Seed != nil && caps.Has(provider.CapSeed) {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *req.Seed, 10)
	}
	// OpenAI takes only an effort: a budget alone stands for one.
	if r := req.Reasoning; r != nil && caps.Has(provider.CapReasoning) {
		if e := r.EffectiveEffort(); e != "" {
			b = append(b, `,"reasoning_effort":`...)
			b = appendString(b, string(e))
		}
	}
	if a.profile.Name == OpenAI.Name && len(req.Stop) > maxOpenAIStop {
		return nil, a.base.BadRequest(model, fmt.Sprintf("OpenAI takes at most %d stop sequences, got %d", maxOpenAIStop, len(req.Stop)))
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	schema, err := a.base.ResponseSchema(req, model, caps)
	if err != nil || schema == nil {
		return b, err
	}
	f := req.ResponseFormat
	b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
	b = appendString(b, f.EffectiveName())
	// The schema as given: ResponseSchema checked it is a JSON object.
	b = append(b, `,"schema":`...)
	b = append(b, bytes.TrimSpace(f.Schema)...)
	if f.Strict {
		b = append(b, `,"strict":true`...)
	}
	if f.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, f.Description)
	}
	return append(b, "}}"...), nil
}

// appendMessages writes one turn as one or more messages. A user turn with
// tool results becomes one tool message per result (and a user message for
// any text); an assistant turn becomes one message with its text and tool
// calls. Several text parts stay separate content parts (one is sent as a
// plain string), images are image_url parts (inline bytes as a data URL) in
// their place among them. Reasoning parts are provider-private and not
// sent.
func appendMessages(b []byte, m provider.Message) ([]byte, error) {
	if m.Role == provider.RoleAssistant {
		return appendAssistant(b, m)
	}
	texts, images, out := 0, false, 0
	for _, p := range m.Parts {
		switch p.Type {
		case provider.PartText:
			texts++
		case provider.PartImage:
			images = true
		case provider.PartToolResult:
			// Tool results go first, each a message of its own.
			content := p.ToolResult.Content
			if p.ToolResult.IsError && !strings.HasPrefix(content, "Error") {
				content = "Error: " + content
			}
			if out > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"content":`...)
			b = appendString(b, content)
			b = append(b, `,"tool_call_id":`...)
			b = appendString(b, p.ToolResult.CallID)
			b = append(b, `,"role":"tool"}`...)
			out++
		}
	}
	switch {
	case texts == 1 && !images:
		for _, p := range m.Parts {
			if p.Type == provider.PartText {
				if out > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"content":`...)
				b = appendString(b, p.Text)
				b = append(b, `,"role":"user"}`...)
				out++
				break
			}
		}
	case texts > 0 || images:
		if out > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"content":[`...)
		n := 0
		for _, p := range m.Parts {
			switch p.Type {
			case provider.PartText:
				if n > 0 {
					b = append(b, ',')
				}
				b = appendTextPart(b, p.Text)
				n++
			case provider.PartImage:
				if n > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"image_url":{"url":`...)
				if p.Image.URL != "" {
					b = appendString(b, p.Image.URL)
				} else {
					b = append(b, `"data:`...)
					b = appendStringContent(b, p.Image.MediaType)
					b = append(b, ";base64,"...)
					b = base64.StdEncoding.AppendEncode(b, p.Image.Data)
					b = append(b, '"')
				}
				b = append(b, `},"type":"image_url"}`...)
				n++
			}
		}
		b = append(b, `],"role":"user"}`...)
		out++
	}
	if out == 0 {
		return nil, errors.New("user turn has no text and no tool results")
	}
	return b, nil
}

func appendAssistant(b []byte, m provider.Message) ([]byte, error) {
	texts, calls := 0, 0
	for _, p := range m.Parts {
		switch p.Type {
		case provider.PartText:
			texts++
		case provider.PartToolCall:
			calls++
		}
	}
	if texts == 0 && calls == 0 {
		return nil, errors.New("assistant turn has no text and no tool calls")
	}
	b = append(b, '{')
	switch {
	case texts == 1:
		for _, p := range m.Parts {
			if p.Type == provider.PartText {
				b = append(b, `"content":`...)
				b = appendString(b, p.Text)
				b = append(b, ',')
				break
			}
		}
	case texts > 1:
		b = append(b, `"content":[`...)
		n := 0
		for _, p := range m.Parts {
			if p.Type == provider.PartText {
				if n > 0 {
					b = append(b, ',')
				}
				b = appendTextPart(b, p.Text)
				n++
			}
		}
		b = append(b, "],"...)
	}
	if calls > 0 {
		b = append(b, `"tool_calls":[`...)
		n := 0
		for _, p := range m.Parts {
			if p.Type != provider.PartToolCall {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			args := string(p.ToolCall.Arguments)
			if args == "" {
				args = "{}"
			}
			b = append(b, `{"id":`...)
			b = appendString(b, p.ToolCall.ID)
			b = append(b, `,"function":{"arguments":`...)
			b = appendString(b, args)
			b = append(b, `,"name":`...)
			b = appendString(b, p.ToolCall.Name)
			b = append(b, `},"type":"function"}`...)
			n++
		}
		b = append(b, "],"...)
	}
	return append(b, `"role":"assistant"}`...), nil
}

// appendTextPart writes a text content part.
func appendTextPart(b []byte, text string) []byte {
	b = append(b, `{"text":`...)
	b = appendString(b, text)
	return append(b, `,"type":"text"}`...)
}

const hex = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does, less
// its HTML escaping: invalid UTF-8 becomes U+FFFD, and U+2028 and U+2029
// are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendStringContent(b, s)
	return append(b, '"')
}

// appendStringContent is appendString without the quotes.
func appendStringContent(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// appendFloat writes a finite f the way encoding/json does (the request's
// floats were checked to be within their ranges).
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
