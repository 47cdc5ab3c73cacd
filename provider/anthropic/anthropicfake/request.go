package anthropicfake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Recorded is one request the fake received, as sent (auth headers
// included, so tests can assert them).
type Recorded struct {
	fakekit.RecordedBase // Method, Path, RawQuery, Header, Body; Query, Decode
	// RequestID is the request-id header the fake answered with.
	RequestID string
}

// clone deep-copies r's header and body for [Server.Requests].
func (r Recorded) clone() Recorded {
	r.RecordedBase = fakekit.CloneBase(r.RecordedBase)
	return r
}

// APIKey is the key the request authenticated with: x-api-key if present
// (the real API prefers it when both are sent), else the Bearer token.
func (r Recorded) APIKey() string {
	return apiKey(r.Header)
}

// Stream reports whether the body asked for a streamed reply.
func (r Recorded) Stream() bool {
	var b struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Stream
}

// LastUserText is the text of the last user message: its string content,
// or its text blocks and tool_result contents joined by newlines.
func (r Recorded) LastUserText() string {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return ""
	}
	for i := len(body.Messages) - 1; i >= 0; i-- {
		if m := body.Messages[i]; m.Role == "user" {
			return contentText(m.Content)
		}
	}
	return ""
}

// contentText flattens a content value (string or block list) to text.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_result":
			if len(b.Content) > 0 {
				parts = append(parts, contentText(b.Content))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// ResponseSchema is output_config.format.schema (nil when the body asks
// for no JSON output).
func (r Recorded) ResponseSchema() json.RawMessage {
	var b struct {
		OutputConfig struct {
			Format struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"output_config"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return nil
	}
	return b.OutputConfig.Format.Schema
}

// Echo is the default reply: one text block "echo: <last user text>"
// (truncated to 200 runes), with derived usage. To a request offering the
// web search tool it first runs one search for that text (see
// [WebSearch]), which the text cites.
func Echo(r Recorded) Reply {
	if schema := r.ResponseSchema(); schema != nil {
		return Reply{Text: string(fakekit.SchemaInstance(schema))}
	}
	text := r.LastUserText()
	if utf8.RuneCountInString(text) > 200 {
		text = string([]rune(text)[:200])
	}
	if strings.TrimSpace(text) == "" {
		text = "(empty)"
	}
	reply := Reply{Text: "echo: " + text}
	if r.WebSearchTool() != nil {
		// A model offered web search searches for what it was asked.
		reply.WebSearches = []WebSearch{{Query: text}}
	}
	return reply
}

// CountTokens is the fake's deterministic token count of a request body,
// used by /v1/messages/count_tokens and as the default input_tokens:
// [fakekit.PromptTokens] of the "system", "messages" and "tools" values (one
// token per 4 ASCII bytes of their keys, strings and numbers, one per byte
// outside ASCII; each image by its pixels as the body's model bills it,
// see imageBill), at least 1. It is not the real tokenizer, but never more
// lenient than one on the texts where tokenizers differ most.
func CountTokens(body []byte) int {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return 1
	}
	var model string
	_ = json.Unmarshal(fields["model"], &model)
	var vals []json.RawMessage
	for _, k := range []string{"system", "messages", "tools"} {
		if v, ok := fields[k]; ok {
			vals = append(vals, v)
		}
	}
	return max(1, fakekit.PromptTokens(imageBill(model), vals...))
}

// maxTokens is the body's max_tokens (0 when absent or unreadable).
func maxTokens(body []byte) int {
	var f struct {
		MaxTokens int `json:"max_tokens"`
	}
	_ = json.Unmarshal(body, &f)
	return f.MaxTokens
}

// apiKey extracts the credential from x-api-key or Authorization: Bearer.
func apiKey(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// validAPIVersions are the anthropic-version values the API accepts.
var validAPIVersions = map[string]bool{"2023-01-01": true, "2023-06-01": true, "2026-10-21": true}

// APIVersion2026 is the API version that removed sampling parameters.
const APIVersion2026 = "2026-10-21"

// KnownFields are the top-level fields of a POST /v1/messages body the
// API defines (those of the SDK's MessageNewParams and
// BetaMessageNewParams, with stream and the sampling parameters of the
// 2023-06-01 version). [WithAcceptedFields] adds others.
var KnownFields = []string{
	"billing_policy", "cache_control", "compaction", "container", "context_management", "diagnostics",
	"fallback_credit_token", "fallbacks", "inference_geo", "max_tokens", "mcp_servers", "messages", "metadata",
	"model", "output_config", "output_format", "service_tier", "speed", "stop_sequences", "stream", "system",
	"temperature", "thinking", "thread", "tool_choice", "tools", "top_k", "top_p",
}

var knownFields = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range KnownFields {
		m[f] = true
	}
	return m
}()

// validateBody checks a /v1/messages or count_tokens body the way the real
// API's validator words its messages ("<field>: <problem>"). betas are the
// request's anthropic-beta values; accepted, fields of a messages body
// accepted beyond [KnownFields]. It returns the parsed fields and "" when
// valid.
func validateBody(body []byte, needMaxTokens bool, version string, betas []string, accepted map[string]bool) (map[string]json.RawMessage, string) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, "There was an error parsing the body of your request. Please ensure the body is valid JSON."
	}
	if needMaxTokens {
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if !knownFields[k] && !accepted[k] {
				return nil, k + ": Extra inputs are not permitted"
			}
		}
	}
	if v, ok := fields["context_management"]; ok && string(v) != "null" {
		if !slices.Contains(betas, BetaContextManagement) {
			return nil, "context_management: Extra inputs are not permitted"
		}
		var cm map[string]json.RawMessage
		if json.Unmarshal(v, &cm) != nil || cm == nil {
			return nil, "context_management: Input should be a valid dictionary"
		}
		if e, ok := cm["edits"]; ok {
			var list []json.RawMessage
			if json.Unmarshal(e, &list) != nil {
				return nil, "context_management.edits: Input should be a valid list"
			}
		}
	}
	if version == APIVersion2026 && needMaxTokens {
		for _, k := range []string{"temperature", "top_p", "top_k"} {
			if _, ok := fields[k]; ok {
				return nil, k + ": Extra inputs are not permitted"
			}
		}
	}
	if msg := checkField(fields, "model", func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "Input should be a valid string"
		}
		if s == "" {
			return "String should have at least 1 character"
		}
		return ""
	}); msg != "" {
		return nil, msg
	}
	if needMaxTokens {
		if msg := checkField(fields, "max_tokens", func(v json.RawMessage) string {
			var n json.Number
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if d.Decode(&n) != nil {
				return "Input should be a valid integer"
			}
			i, err := n.Int64()
			if err != nil {
				return "Input should be a valid integer"
			}
			if i < 1 {
				return "Input should be greater than or equal to 1"
			}
			return ""
		}); msg != "" {
			return nil, msg
		}
	}
	if msg := checkField(fields, "messages", func(v json.RawMessage) string {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil || list == nil {
			return "Input should be a valid list"
		}
		if len(list) == 0 {
			return "at least one message is required"
		}
		return ""
	}); msg != "" {
		return nil, msg
	}
	if v, ok := fields["stop_sequences"]; ok && string(v) != "null" {
		var list []string
		if json.Unmarshal(v, &list) != nil {
			return nil, "stop_sequences: Input should be a valid list of strings"
		}
		for i, s := range list {
			if strings.TrimSpace(s) == "" {
				return nil, fmt.Sprintf("stop_sequences.%d: each stop sequence must contain non-whitespace", i)
			}
		}
	}
	if msg := checkImages(fields["messages"]); msg != "" {
		return nil, msg
	}
	if v, ok := fields["output_config"]; ok && string(v) != "null" {
		if msg := checkOutputConfig(v); msg != "" {
			return nil, msg
		}
	}
	if msg := checkThinking(fields); msg != "" {
		return nil, msg
	}
	if v, ok := fields["stream"]; ok {
		var b bool
		if json.Unmarshal(v, &b) != nil && string(v) != "null" {
			return nil, "stream: Input should be a valid boolean"
		}
	}
	if msg := checkTools(fields["tools"]); msg != "" {
		return nil, msg
	}
	if msg := checkToolPairs(fields["messages"]); msg != "" {
		return nil, msg
	}
	return fields, ""
}

// checkTools refuses a custom tool (no type, or "custom") without an
// input_schema object with a type, in the API's words.
func checkTools(raw json.RawMessage) string {
	if raw == nil {
		return ""
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return "tools: Input should be a valid list"
	}
	for i, t := range tools {
		var typ string
		_ = json.Unmarshal(t["type"], &typ)
		if typ != "" && typ != "custom" {
			continue // a server tool, with a schema of its own
		}
		path := fmt.Sprintf("tools.%d.custom", i)
		if _, ok := t["name"]; !ok {
			return path + ".name: Field required"
		}
		schema, ok := t["input_schema"]
		if !ok || string(schema) == "null" {
			return path + ".input_schema: Field required"
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(schema, &obj) != nil {
			return path + ".input_schema: Input should be a valid dictionary"
		}
		if _, ok := obj["type"]; !ok {
			return path + ".input_schema.type: Field required"
		}
	}
	return ""
}

// checkToolPairs refuses what the API refuses of tool use in a
// conversation: a tool_result whose tool_use_id is not a tool_use of the
// previous (assistant) message, and an assistant message's tool_use
// without a tool_result in the next message.
func checkToolPairs(raw json.RawMessage) string {
	type block struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		ToolUseID string `json:"tool_use_id"`
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &msgs) != nil {
		return ""
	}
	blocks := make([][]block, len(msgs))
	for i, m := range msgs {
		_ = json.Unmarshal(m.Content, &blocks[i]) // a string content has no blocks
	}
	uses := func(i int) map[string]bool {
		ids := map[string]bool{}
		if i >= 0 && msgs[i].Role == "assistant" {
			for _, b := range blocks[i] {
				if b.Type == "tool_use" {
					ids[b.ID] = true
				}
			}
		}
		return ids
	}
	for i := range msgs {
		prev := uses(i - 1)
		answered := map[string]bool{}
		for j, b := range blocks[i] {
			if b.Type != "tool_result" {
				continue
			}
			if !prev[b.ToolUseID] {
				return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
			}
			answered[b.ToolUseID] = true
		}
		if i == 0 || len(prev) == 0 {
			continue
		}
		var missing []string
		for _, b := range blocks[i-1] {
			if b.Type == "tool_use" && !answered[b.ID] {
				missing = append(missing, b.ID)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", "))
		}
	}
	return ""
}

// checkField runs check on a required field, prefixing its complaint with
// the field name.
func checkField(fields map[string]json.RawMessage, name string, check func(json.RawMessage) string) string {
	v, ok := fields[name]
	if !ok || string(v) == "null" {
		return name + ": Field required"
	}
	if msg := check(v); msg != "" {
		return name + ": " + msg
	}
	return ""
}

// checkOutputConfig validates output_config: an effort the API knows, and
// a format of type json_schema whose schema is a closed object schema.
func checkOutputConfig(raw json.RawMessage) string {
	var oc struct {
		Effort *string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	}
	if json.Unmarshal(raw, &oc) != nil {
		return "output_config: Input should be a valid dictionary"
	}
	if e := oc.Effort; e != nil {
		switch *e {
		case "low", "medium", "high", "xhigh", "max":
		default:
			return "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
		}
	}
	if f := oc.Format; f != nil {
		if f.Type != "json_schema" {
			return "output_config.format.type: Input should be 'json_schema'"
		}
		if len(f.Schema) == 0 || string(f.Schema) == "null" {
			return "output_config.format.schema: Field required"
		}
		if msg := fakekit.ClosedSchemaProblem(f.Schema, false); msg != "" {
			return "output_config.format.schema: " + msg
		}
	}
	return ""
}

// checkThinking validates thinking and output_config.effort against the
// model, as the API does: budget_tokens of at least 1024 and below
// max_tokens; no manual budget on Claude 5 and later; adaptive thinking
// and effort only on models that have them (Opus and Sonnet 4.6, Claude 5
// and later); no thinking with a tool_choice that forces tool use.
func checkThinking(fields map[string]json.RawMessage) string {
	var b struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Thinking  *struct {
			Type         string `json:"type"`
			BudgetTokens *int   `json:"budget_tokens"`
		} `json:"thinking"`
		ToolChoice *struct {
			Type string `json:"type"`
		} `json:"tool_choice"`
		OutputConfig struct {
			Effort *string `json:"effort"`
		} `json:"output_config"`
	}
	raw, _ := json.Marshal(fields)
	if json.Unmarshal(raw, &b) != nil {
		return ""
	}
	gen := modelGeneration(b.Model)
	if b.OutputConfig.Effort != nil && gen == genBudgetOnly {
		return "output_config.effort: This model does not support the effort parameter."
	}
	t := b.Thinking
	if t == nil {
		return ""
	}
	switch t.Type {
	case "enabled":
		switch {
		case t.BudgetTokens == nil:
			return "thinking.enabled.budget_tokens: Field required"
		case *t.BudgetTokens < 1024:
			return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
		case *t.BudgetTokens >= b.MaxTokens:
			return "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
		case gen == genAdaptiveOnly:
			return "thinking.type.enabled: manual thinking budgets are not supported on this model; use thinking.type.adaptive with output_config.effort"
		}
	case "adaptive":
		if gen == genBudgetOnly {
			return "thinking.type.adaptive: adaptive thinking is not supported on this model"
		}
	case "disabled":
		return ""
	default:
		return "thinking: Input tag '" + t.Type + "' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"
	}
	if tc := b.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
		return "Thinking may not be enabled when tool_choice forces tool use."
	}
	return ""
}

// Model generations, as far as thinking goes.
const (
	genBudgetOnly   = iota // thinking with budget_tokens only
	genBoth                // budget_tokens, adaptive and effort
	genAdaptiveOnly        // adaptive and effort; budget_tokens refused
)

// modelGeneration places a model id (claude-<family>-<major>[-<minor>]).
func modelGeneration(model string) int {
	f := strings.Split(model, "-")
	if len(f) < 3 {
		return genBudgetOnly
	}
	major, _ := strconv.Atoi(f[2])
	minor := 0
	if len(f) > 3 && len(f[3]) <= 2 {
		minor, _ = strconv.Atoi(f[3])
	}
	switch {
	case major >= 5:
		return genAdaptiveOnly
	case major == 4 && minor >= 6 && f[1] != "haiku":
		return genBoth
	}
	return genBudgetOnly
}

// imageMediaTypes are the media types the API takes for base64 images.
var imageMediaTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// checkImages validates the image blocks of messages: a base64 source
// with a known media type and valid base64 data, or an http(s) url
// source, in user turns only.
func checkImages(raw json.RawMessage) string {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &msgs) != nil {
		return ""
	}
	for i, m := range msgs {
		var blocks []struct {
			Type   string `json:"type"`
			Source *struct {
				Type      string `json:"type"`
				MediaType string `json:"media_type"`
				Data      string `json:"data"`
				URL       string `json:"url"`
			} `json:"source"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for j, b := range blocks {
			if b.Type != "image" {
				continue
			}
			at := fmt.Sprintf("messages.%d.content.%d.image.source", i, j)
			switch src := b.Source; {
			case src == nil:
				return at + ": Field required"
			case m.Role != "user":
				return fmt.Sprintf("messages.%d.content.%d: image blocks are only allowed in user messages", i, j)
			case src.Type == "base64":
				if !imageMediaTypes[src.MediaType] {
					return at + ".base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
				}
				if _, err := base64.StdEncoding.DecodeString(src.Data); err != nil || src.Data == "" {
					return at + ".base64.data: Invalid base64 data"
				}
			case src.Type == "url":
				if !strings.HasPrefix(src.URL, "https://") && !strings.HasPrefix(src.URL, "http://") {
					return at + ".url.url: Input should be a valid URL"
				}
			default:
				return at + ": Input tag '" + src.Type + "' found using 'type' does not match any of the expected tags: 'base64', 'url', 'file'"
			}
		}
	}
	return ""
}
