package geminifake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Recorded is one request the fake received, as sent (the API key header
// included, so tests can assert it).
type Recorded struct {
	fakekit.RecordedBase // Method, Path, RawQuery, Header, Body; Query (Decode is shadowed)
	// Model is the bare model name of the path ("gemini-2.5-flash"), or ""
	// for a route without one.
	Model string
	// Action is the method after the colon ("generateContent",
	// "streamGenerateContent", "countTokens"), or "" for GET routes.
	Action string
}

// clone deep-copies r's header and body for [Server.Requests].
func (r Recorded) clone() Recorded {
	r.RecordedBase = fakekit.CloneBase(r.RecordedBase)
	return r
}

// APIKey is the key the request authenticated with: the x-goog-api-key
// header, else the key query parameter.
func (r Recorded) APIKey() string { return apiKey(r.Header, r.Query()) }

// Stream reports whether the request asked for a streamed reply.
func (r Recorded) Stream() bool { return r.Action == "streamGenerateContent" }

// CamelBody is the JSON body with every proto field name in its lowerCamel
// (JSON) spelling, whether the client sent camelCase or snake_case; the
// free-form values (functionCall.args, functionResponse.response,
// parametersJsonSchema, responseJsonSchema, schema property names, …) are
// left as sent. A body that is not a JSON object is returned unchanged.
func (r Recorded) CamelBody() []byte {
	b, err := normalizeBody(r.Body)
	if err != nil {
		return r.Body
	}
	return b
}

// Decode unmarshals the camelCase form of the body (see
// [Recorded.CamelBody]) into v, so the same struct tags work for both
// spellings.
func (r Recorded) Decode(v any) error {
	b, err := normalizeBody(r.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Generate decodes the body as a GenerateContentRequest. For countTokens
// it decodes {"contents":…} or the wrapped {"generateContentRequest":…}.
func (r Recorded) Generate() (GenerateRequest, error) {
	var req GenerateRequest
	b, err := normalizeBody(r.Body)
	if err != nil {
		return req, err
	}
	var wrap struct {
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if json.Unmarshal(b, &wrap) == nil && len(wrap.GenerateContentRequest) > 0 && string(wrap.GenerateContentRequest) != "null" {
		b = wrap.GenerateContentRequest
	}
	err = json.Unmarshal(b, &req)
	return req, err
}

// LastUserText is the text of the last user content: its text parts joined
// by newlines, or, for a tool-result turn, "name: <response JSON>" per
// functionResponse part.
func (r Recorded) LastUserText() string {
	req, err := r.Generate()
	if err != nil {
		return ""
	}
	for i := len(req.Contents) - 1; i >= 0; i-- {
		c := req.Contents[i]
		if c.Role != "user" && c.Role != "" {
			continue
		}
		var parts []string
		for _, p := range c.Parts {
			switch {
			case p.Text != "" && !p.Thought:
				parts = append(parts, p.Text)
			case p.FunctionResponse != nil:
				parts = append(parts, p.FunctionResponse.Name+": "+string(compactJSON(p.FunctionResponse.Response)))
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// GenerateRequest is the decoded (camelCase) form of a generateContent
// request. Fields the fake does not model are reachable through
// [Recorded.Decode].
type GenerateRequest struct {
	Model             string            `json:"model,omitempty"`
	Contents          []Content         `json:"contents"`
	SystemInstruction *Content          `json:"systemInstruction,omitempty"`
	Tools             []Tool            `json:"tools,omitempty"`
	ToolConfig        json.RawMessage   `json:"toolConfig,omitempty"`
	SafetySettings    json.RawMessage   `json:"safetySettings,omitempty"`
	GenerationConfig  *GenerationConfig `json:"generationConfig,omitempty"`
	CachedContent     string            `json:"cachedContent,omitempty"`
	ServiceTier       string            `json:"serviceTier,omitempty"`
}

// Content is one turn.
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// Part is one part of a turn.
type Part struct {
	Text             string            `json:"text,omitempty"`
	InlineData       json.RawMessage   `json:"inlineData,omitempty"`
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
	FileData         json.RawMessage   `json:"fileData,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

// FunctionResponse is a tool result sent back by the client.
type FunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response,omitempty"`
}

// Tool is one entry of tools.
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations,omitempty"`
	GoogleSearch         json.RawMessage       `json:"googleSearch,omitempty"`
	CodeExecution        json.RawMessage       `json:"codeExecution,omitempty"`
	URLContext           json.RawMessage       `json:"urlContext,omitempty"`
}

// FunctionDeclaration declares a function the model may call.
type FunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
	Response             json.RawMessage `json:"response,omitempty"`
	ResponseJSONSchema   json.RawMessage `json:"responseJsonSchema,omitempty"`
}

// GenerationConfig is generationConfig.
type GenerationConfig struct {
	MaxOutputTokens    *int            `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *float64        `json:"topK,omitempty"`
	CandidateCount     *int            `json:"candidateCount,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	ResponseMIMEType   string          `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage `json:"responseSchema,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *ThinkingConfig `json:"thinkingConfig,omitempty"`
}

// ThinkingConfig is generationConfig.thinkingConfig.
type ThinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// Echo is the default reply: one text part "echo: <last user text>"
// (truncated to 200 runes), with derived usage.
func Echo(r Recorded) Reply {
	if req, err := r.Generate(); err == nil && req.GenerationConfig != nil {
		gc := req.GenerationConfig
		schema := gc.ResponseJSONSchema
		if len(schema) == 0 {
			schema = gc.ResponseSchema
		}
		if len(schema) > 0 {
			return Reply{Text: string(fakekit.SchemaInstance(schema))}
		}
	}
	text := r.LastUserText()
	if utf8.RuneCountInString(text) > 200 {
		text = string([]rune(text)[:200])
	}
	if strings.TrimSpace(text) == "" {
		text = "(empty)"
	}
	return Reply{Text: "echo: " + text}
}

// CountTokens is the fake's deterministic token count of a request body,
// used by countTokens and as the default promptTokenCount:
// [fakekit.PromptTokens] of the camelCase "contents", "systemInstruction" and
// "tools" values (of the body, or of its "generateContentRequest"): one
// token per 4 ASCII bytes of their keys, strings and numbers, one per byte
// outside ASCII, each image by its pixels as model bills it (see
// imageBill), at least 1. It is not the real tokenizer, but never more
// lenient than one on the texts where tokenizers differ most.
func CountTokens(model string, body []byte) int {
	fields := requestFields(body)
	if fields == nil {
		return 1
	}
	var vals []json.RawMessage
	for _, k := range []string{"contents", "systemInstruction", "tools"} {
		if v, ok := fields[k]; ok {
			vals = append(vals, v)
		}
	}
	return max(1, fakekit.PromptTokens(imageBill(model), vals...))
}

// requestFields returns the camelCase fields of a request body (of its
// "generateContentRequest" when it has one); nil when it is not JSON.
func requestFields(body []byte) map[string]json.RawMessage {
	norm, err := normalizeBody(body)
	if err != nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(norm, &fields) != nil {
		return nil
	}
	if inner, ok := fields["generateContentRequest"]; ok {
		var f map[string]json.RawMessage
		if json.Unmarshal(inner, &f) == nil && f != nil {
			fields = f
		}
	}
	return fields
}

// maxOutputTokens is the body's generationConfig.maxOutputTokens (0 when
// absent).
func maxOutputTokens(body []byte) int {
	var gc struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	}
	_ = json.Unmarshal(requestFields(body)["generationConfig"], &gc)
	return gc.MaxOutputTokens
}

func compactJSON(v json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}

// apiKey extracts the credential: x-goog-api-key, else ?key=.
func apiKey(h http.Header, q url.Values) string {
	if k := h.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	return q.Get("key")
}

// opaqueFields hold free-form JSON (google.protobuf.Struct or Value, or
// maps) whose keys are data, not proto field names: they are never
// renamed.
var opaqueFields = map[string]bool{
	"args": true, "response": true, "parametersJsonSchema": true, "responseJsonSchema": true,
	"example": true, "default": true, "labels": true, "partMetadata": true, "extraBody": true,
}

// normalizeBody rewrites every snake_case proto field name of a JSON
// object body to lowerCamel, leaving opaque values untouched. Key order is
// preserved.
func normalizeBody(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := normalizeValue(dec, &buf, ""); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return buf.Bytes(), nil
}

// normalizeValue copies one JSON value from dec to out. parent is the
// camelCase name of the field holding it ("properties" maps keep their
// keys but normalize their values).
func normalizeValue(dec *json.Decoder, out *bytes.Buffer, parent string) error {
	if opaqueFields[parent] {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		out.Write(compactJSON(raw))
		return nil
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			out.WriteByte('{')
			first := true
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key := kt.(string)
				name := key
				if parent != "properties" {
					name = snakeToCamel(key)
				}
				if !first {
					out.WriteByte(',')
				}
				first = false
				out.Write(marshal(name))
				out.WriteByte(':')
				child := name
				if parent == "properties" {
					child = "" // a property's value is a Schema
				}
				if err := normalizeValue(dec, out, child); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			first := true
			for dec.More() {
				if !first {
					out.WriteByte(',')
				}
				first = false
				if err := normalizeValue(dec, out, parent); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			out.WriteByte(']')
		}
	default:
		out.Write(marshal(t))
	}
	return nil
}

// snakeToCamel turns a proto field name into its JSON name
// ("max_output_tokens" → "maxOutputTokens"); a name without "_" is kept.
func snakeToCamel(s string) string {
	if !strings.Contains(s, "_") || strings.HasPrefix(s, "@") {
		return s
	}
	var b strings.Builder
	up := false
	for i, r := range s {
		switch {
		case r == '_' && i > 0:
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// knownRequestFields are the GenerateContentRequest fields (camelCase).
var knownRequestFields = map[string]bool{
	"model": true, "contents": true, "systemInstruction": true, "tools": true, "toolConfig": true,
	"safetySettings": true, "generationConfig": true, "cachedContent": true, "serviceTier": true,
	"labels": true, "store": true, "modelArmorConfig": true,
}

// requestError is a 400 the fake detected in a request body.
type requestError struct {
	message string
	details []json.RawMessage
}

// parseGenerate parses and validates a generateContent body (or a
// countTokens one when count is true), wording problems like the real
// API.
func parseGenerate(body []byte, count bool) (GenerateRequest, *requestError) {
	var req GenerateRequest
	norm, err := normalizeBody(body)
	var fields map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(norm, &fields)
	}
	if err != nil || fields == nil {
		msg := "Invalid JSON payload received. Unexpected token."
		return req, &requestError{msg, []json.RawMessage{BadRequestDetail("", msg)}}
	}
	prefix := "GenerateContentRequest"
	if count {
		prefix = "CountTokensRequest"
		if inner, ok := fields["generateContentRequest"]; ok {
			fields = nil
			if json.Unmarshal(inner, &fields) != nil || fields == nil {
				msg := "Invalid JSON payload received. Unexpected token."
				return req, &requestError{msg, []json.RawMessage{BadRequestDetail("generate_content_request", msg)}}
			}
			norm = inner
			prefix = "CountTokensRequest.generate_content_request"
		} else {
			delete(fields, "model")
		}
	}
	var unknown []string
	for k := range fields {
		if !knownRequestFields[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		msg := fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", unknown[0])
		return req, &requestError{msg, []json.RawMessage{BadRequestDetail("", msg)}}
	}
	if err := json.Unmarshal(norm, &req); err != nil {
		msg := "Invalid JSON payload received. " + err.Error()
		return req, &requestError{msg, []json.RawMessage{BadRequestDetail("", msg)}}
	}
	if len(req.Contents) == 0 {
		return req, fieldError(prefix+".contents", "contents is not specified")
	}
	for i, c := range req.Contents {
		if c.Role != "" && c.Role != "user" && c.Role != "model" {
			msg := "Please use a valid role: user, model."
			return req, &requestError{msg, []json.RawMessage{BadRequestDetail(fmt.Sprintf("contents[%d].role", i), msg)}}
		}
		if len(c.Parts) == 0 {
			return req, fieldError(fmt.Sprintf("%s.contents[%d].parts", prefix, i), "contents.parts must not be empty.")
		}
		for j, p := range c.Parts {
			if p.FunctionCall != nil && p.FunctionCall.Name == "" {
				return req, fieldError(fmt.Sprintf("%s.contents[%d].parts[%d].function_call.name", prefix, i, j), "Name cannot be empty.")
			}
			if len(p.InlineData) > 0 {
				var blob struct {
					MIMEType string `json:"mimeType"`
					Data     string `json:"data"`
				}
				at := fmt.Sprintf("%s.contents[%d].parts[%d].inline_data", prefix, i, j)
				if json.Unmarshal(p.InlineData, &blob) != nil || blob.MIMEType == "" {
					return req, fieldError(at+".mime_type", "mime_type is required.")
				}
				if _, err := base64.StdEncoding.DecodeString(blob.Data); err != nil || blob.Data == "" {
					return req, fieldError(at+".data", "Invalid value (bytes): base64 decoding failed.")
				}
			}
			if p.FunctionResponse != nil && p.FunctionResponse.Name == "" {
				return req, fieldError(fmt.Sprintf("%s.contents[%d].parts[%d].function_response.name", prefix, i, j), "Name cannot be empty.")
			}
		}
	}
	for i, t := range req.Tools {
		for j, d := range t.FunctionDeclarations {
			if d.Name == "" {
				return req, fieldError(fmt.Sprintf("%s.tools[%d].function_declarations[%d].name", prefix, i, j), "Name cannot be empty.")
			}
			if len(d.Parameters) > 0 && len(d.ParametersJSONSchema) > 0 {
				return req, fieldError(fmt.Sprintf("%s.tools[%d].function_declarations[%d].parameters_json_schema", prefix, i, j),
					"parameters_json_schema must not be set when parameters is set.")
			}
		}
	}
	if gc := req.GenerationConfig; gc != nil {
		if rerr := checkSampling(gc, prefix); rerr != nil {
			return req, rerr
		}
	}
	return req, nil
}

// checkSampling validates generationConfig's sampling fields as the API
// does: temperature 0 to 2, topP 0 to 1, topK positive, a 32-bit seed and
// at most five stop sequences.
func checkSampling(gc *GenerationConfig, prefix string) *requestError {
	field := prefix + ".generation_config."
	switch {
	case gc.Temperature != nil && (*gc.Temperature < 0 || *gc.Temperature > 2):
		return fieldError(field+"temperature", fmt.Sprintf("temperature must be in the range [0.0, 2.0], got %v.", *gc.Temperature))
	case gc.TopP != nil && (*gc.TopP < 0 || *gc.TopP > 1):
		return fieldError(field+"top_p", fmt.Sprintf("top_p must be in the range [0.0, 1.0], got %v.", *gc.TopP))
	case gc.TopK != nil && *gc.TopK < 1:
		return fieldError(field+"top_k", fmt.Sprintf("top_k must be positive, got %v.", *gc.TopK))
	case gc.Seed != nil && (*gc.Seed < math.MinInt32 || *gc.Seed > math.MaxInt32):
		return fieldError(field+"seed", fmt.Sprintf("Invalid value %d: seed must be a 32-bit integer.", *gc.Seed))
	case len(gc.StopSequences) > 5:
		return fieldError(field+"stop_sequences", fmt.Sprintf("at most 5 stop sequences are allowed, got %d.", len(gc.StopSequences)))
	case len(gc.ResponseSchema) > 0 && len(gc.ResponseJSONSchema) > 0:
		return fieldError(field+"response_json_schema", "response_json_schema must not be set when response_schema is set.")
	case (len(gc.ResponseSchema) > 0 || len(gc.ResponseJSONSchema) > 0) && gc.ResponseMIMEType != "application/json":
		return fieldError(field+"response_mime_type", "When response_schema or response_json_schema is set, response_mime_type must be application/json.")
	}
	return nil
}

// checkThinking validates thinkingConfig against model as the API does:
// a thinkingLevel only on Gemini 3 and later, never together with a
// thinkingBudget; a budget of -1 (dynamic) or within the model's range
// (2.5 Pro 128 to 32768, which cannot turn thinking off; the others 0 to
// 24576, Flash-Lite at least 512 when on).
func checkThinking(tc *ThinkingConfig, model string) *requestError {
	if tc == nil {
		return nil
	}
	const field = "GenerateContentRequest.generation_config.thinking_config."
	if tc.ThinkingLevel != "" {
		switch {
		case !requiresSignatures(model):
			return fieldError(field+"thinking_level", "Thinking level is not supported for this model.")
		case tc.ThinkingBudget != nil:
			return fieldError(field+"thinking_level", "thinking_budget and thinking_level cannot both be set.")
		case !slices.Contains([]string{"MINIMAL", "LOW", "MEDIUM", "HIGH"}, tc.ThinkingLevel):
			return fieldError(field+"thinking_level", fmt.Sprintf("Invalid value %q: want MINIMAL, LOW, MEDIUM or HIGH.", tc.ThinkingLevel))
		}
	}
	b := tc.ThinkingBudget
	if b == nil || *b == -1 || requiresSignatures(model) {
		return nil
	}
	lo, hi := 0, 24576
	switch name := bareModel(model); {
	case strings.HasPrefix(name, "gemini-2.5-pro"):
		lo, hi = 128, 32768
	case strings.HasPrefix(name, "gemini-2.5-flash-lite") && *b != 0:
		lo = 512
	}
	if *b < lo || *b > hi {
		return fieldError(field+"thinking_budget", fmt.Sprintf("The thinking budget %d is invalid. Please choose a value between %d and %d.", *b, lo, hi))
	}
	return nil
}

// fieldError words a field violation like the API: "* Field: problem\n"
// (with no details).
func fieldError(field, problem string) *requestError {
	return &requestError{message: "* " + field + ": " + problem + "\n"}
}
