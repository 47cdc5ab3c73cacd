package anthropic

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Metadata keys this adapter reads and writes on parts.
const (
	MetaSignature        = "anthropic.signature"         // JSON string: a thinking block's signature
	MetaRedactedThinking = "anthropic.redacted_thinking" // JSON string: a redacted thinking block's data
)

// MetaBeta is the Request.Meta key of the beta features a call asks for: a
// JSON array of anthropic-beta values, sent as that header as given.
const MetaBeta = "anthropic.beta"

// MaxCacheMarks is how many cache_control breakpoints the API takes in
// one request.
const MaxCacheMarks = 4

func cacheControl(ttl provider.PromptCache) *wireCache {
	cc := &wireCache{Type: "ephemeral"}
	if ttl == provider.PromptCache1h {
		cc.TTL = "1h"
	}
	return cc
}

// betas returns the anthropic-beta values req asks for (Meta[MetaBeta]).
func betas(req *provider.Request) ([]string, error) {
	raw, ok := req.Meta[MetaBeta]
	if !ok {
		return nil, nil
	}
	var v []string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("meta %s must be a JSON array of strings: %v", MetaBeta, err)
	}
	return v, nil
}

// params turns a request into the Messages API's request body.
func (a *Adapter) params(req *provider.Request, model string) (*wireRequest, error) {
	if err := a.base.Validate(req, model); err != nil {
		return nil, err
	}
	p := &wireRequest{Model: model, MaxTokens: int64(a.base.MaxTokens(Namespace, model, req))}
	// The caller's marks go where it put them; PromptCache's own, on the
	// stable prefix, only while the request stays within the API's limit.
	marks := req.CacheMarks(MaxCacheMarks)
	// API version 2026-10-21 has no temperature, top_p, top_k or seed: the
	// adapter's capabilities say so and they are dropped.
	p.StopSequences = req.Stop
	schema, err := a.base.ResponseSchema(req, model, a.ModelCapabilities(model))
	if err != nil {
		return p, err
	}
	if schema != nil {
		p.OutputConfig = &wireOutputConfig{Format: &wireFormat{Type: "json_schema", Schema: schema}}
	}
	if err := a.thinking(p, req, model); err != nil {
		return p, err
	}
	if req.System != "" {
		sys := textBlock(req.System)
		if marks.System {
			sys.CacheControl = cacheControl(req.PromptCache)
		}
		p.System = []wireBlock{sys}
	}
	if len(req.Tools) > 0 {
		p.Tools = make([]wireTool, 0, len(req.Tools))
	}
	for i, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return p, a.base.BadRequest(model, fmt.Sprintf("tools[%d] %q: %v", i, t.Name, err))
		}
		switch {
		case t.Cache != provider.PromptCacheOff:
			tp.CacheControl = cacheControl(t.Cache)
		case i == len(req.Tools)-1 && marks.LastTool:
			tp.CacheControl = cacheControl(req.PromptCache)
		}
		p.Tools = append(p.Tools, tp)
	}
	serial := req.DisableParallelToolCalls // disable_parallel_tool_use, sent only when set
	switch req.ToolChoice {
	case "", provider.ToolChoiceAuto:
		if serial && len(req.Tools) > 0 {
			p.ToolChoice = &wireToolChoice{Type: "auto", DisableParallelToolUse: true}
		}
	case provider.ToolChoiceNone:
		if len(req.Tools) > 0 {
			p.ToolChoice = &wireToolChoice{Type: "none"}
		}
	case provider.ToolChoiceRequired:
		p.ToolChoice = &wireToolChoice{Type: "any", DisableParallelToolUse: serial}
	default:
		p.ToolChoice = &wireToolChoice{Type: "tool", Name: string(req.ToolChoice), DisableParallelToolUse: serial}
	}
	conv := req.Conversation()
	p.Messages = make([]wireMessage, 0, len(conv))
	for i, m := range conv {
		blocks := make([]wireBlock, 0, len(m.Parts))
		for j, part := range m.Parts {
			b, ok, err := contentBlock(part)
			if err != nil {
				return p, a.base.BadRequest(model, fmt.Sprintf("messages[%d].parts[%d]: %v", i, j, err))
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			return p, a.base.BadRequest(model, fmt.Sprintf("messages[%d] has no content", i))
		}
		role := "user"
		if m.Role == provider.RoleAssistant {
			role = "assistant"
		}
		p.Messages = append(p.Messages, wireMessage{Role: role, Content: blocks})
	}
	if len(p.Messages) == 0 {
		p.Messages = nil // as the SDK leaves out an empty list
	}
	return p, nil
}

// thinkingStyle is how a Claude model takes a reasoning setting.
type thinkingStyle int

const (
	// thinkingBudget: thinking {type: enabled, budget_tokens} only
	// (Haiku 4.5 and older models).
	thinkingBudget thinkingStyle = iota
	// thinkingBoth: a budget as above, or adaptive thinking, and
	// output_config.effort (Opus and Sonnet 4.6).
	thinkingBoth
	// thinkingAdaptive: adaptive thinking and output_config.effort only;
	// a manual budget is refused (Claude 5 and later).
	thinkingAdaptive
)

// styleOf says how model takes reasoning, from its id
// (claude-<family>-<major>[-<minor>…]).
func styleOf(model string) thinkingStyle {
	f := strings.Split(model, "-")
	if len(f) < 3 || f[0] != "claude" {
		return thinkingBudget
	}
	major, _ := strconv.Atoi(f[2])
	minor := 0
	if len(f) > 3 && len(f[3]) <= 2 { // not a date snapshot
		minor, _ = strconv.Atoi(f[3])
	}
	switch {
	case major >= 5:
		return thinkingAdaptive
	case major == 4 && minor >= 6 && f[1] != "haiku":
		return thinkingBoth
	}
	return thinkingBudget
}

// thinking maps req.Reasoning onto model's own settings: a budget as
// thinking {type: enabled, budget_tokens} where the model takes one, an
// effort as output_config.effort with adaptive thinking where it takes
// that, and on a model with only one of the two the other stands for it
// ([provider.Reasoning.EffectiveBudget], EffectiveEffort).
func (a *Adapter) thinking(p *wireRequest, req *provider.Request, model string) error {
	r := req.Reasoning
	if r == nil || !a.ModelCapabilities(model).Has(provider.CapReasoning) {
		return nil
	}
	if c := req.ToolChoice; c != "" && c != provider.ToolChoiceAuto && c != provider.ToolChoiceNone {
		return a.base.BadRequest(model, fmt.Sprintf("reasoning: Claude does not think when tool_choice forces tool use (%q): drop the reasoning setting or let the model choose", string(c)))
	}
	adaptive := &wireThinking{Type: "adaptive"}
	enabled := func(budget int64) *wireThinking { return &wireThinking{Type: "enabled", BudgetTokens: &budget} }
	effort := func(e provider.ReasoningEffort) {
		if e != "" {
			p.OutputConfig = cmp.Or(p.OutputConfig, &wireOutputConfig{})
			p.OutputConfig.Effort = string(e)
		}
	}
	switch styleOf(model) {
	case thinkingAdaptive:
		p.Thinking = adaptive
		effort(r.EffectiveEffort())
	case thinkingBoth:
		p.Thinking = adaptive
		if r.Budget > 0 {
			p.Thinking = enabled(int64(r.Budget))
		}
		effort(r.Effort)
	default:
		budget := min(r.EffectiveBudget(), int(p.MaxTokens)-1)
		if r.Budget == 0 && r.Effort == "" {
			budget = provider.MinReasoningBudget
		}
		if budget < provider.MinReasoningBudget {
			return a.base.BadRequest(model, fmt.Sprintf("reasoning: max_tokens %d leaves no room for thinking on %s, whose budget_tokens must be at least %d and below max_tokens", p.MaxTokens, model, provider.MinReasoningBudget))
		}
		p.Thinking = enabled(int64(budget))
	}
	return nil
}

// toolParam maps a JSON Schema onto Anthropic's input_schema: properties and
// required have fields of their own, every other keyword rides along as is.
func toolParam(t provider.ToolDef) (wireTool, error) {
	tp := wireTool{Name: t.Name, Description: t.Description, Strict: t.Strict}
	schema := map[string]any{}
	if len(t.InputSchema) > 0 {
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return tp, fmt.Errorf("input_schema: %w", err)
		}
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return tp, fmt.Errorf(`input_schema must have "type": "object", got %v`, typ)
	}
	if schema == nil {
		schema = map[string]any{} // input_schema was null
	}
	schema["type"] = "object"
	// The API requires input_schema: a tool without arguments gets empty
	// properties. Properties given as null are left out.
	if props, ok := schema["properties"]; !ok {
		schema["properties"] = map[string]any{}
	} else if props == nil {
		delete(schema, "properties")
	}
	// required keeps its strings, and goes when none is left; a required
	// that is not an array rides along as is.
	if req, ok := schema["required"].([]any); ok {
		var names []string
		for _, r := range req {
			if s, ok := r.(string); ok {
				names = append(names, s)
			}
		}
		if names == nil {
			delete(schema, "required")
		} else {
			schema["required"] = names
		}
	}
	if len(schema) == 1 {
		// Only the type is left (properties given as null): the SDK
		// leaves such an input_schema out.
		schema = nil
	}
	tp.InputSchema = schema
	return tp, nil
}

func metaString(m provider.Metadata, key string) (string, bool) {
	raw, ok := m[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// contentBlock maps one part; reasoning parts without an Anthropic
// signature (from another provider) and empty texts are dropped (ok
// false), as the API would reject them.
func contentBlock(part provider.Part) (b wireBlock, ok bool, err error) {
	cacheable := true
	switch part.Type {
	case provider.PartText:
		if part.Text == "" {
			return b, false, nil
		}
		b = textBlock(part.Text)
	case provider.PartReasoning:
		// Thinking blocks take no cache mark.
		cacheable = false
		if data, ok := metaString(part.Meta, MetaRedactedThinking); ok {
			b = wireBlock{Type: "redacted_thinking", redactedFields: &redactedFields{Data: data}}
		} else if sig, ok := metaString(part.Meta, MetaSignature); ok {
			b = wireBlock{Type: "thinking", thinkingFields: &thinkingFields{Signature: sig, Thinking: part.Text}}
		} else {
			return b, false, nil
		}
	case provider.PartImage:
		src := wireImageSource{Type: "url", URL: part.Image.URL}
		if src.URL == "" {
			src = wireImageSource{Type: "base64", MediaType: part.Image.MediaType, Data: base64.StdEncoding.EncodeToString(part.Image.Data)}
		}
		b = wireBlock{Type: "image", imageFields: &imageFields{Source: src}}
	case provider.PartToolCall:
		input := json.RawMessage(`{}`)
		if len(part.ToolCall.Arguments) > 0 {
			input = part.ToolCall.Arguments
		}
		b = wireBlock{Type: "tool_use", toolUseFields: &toolUseFields{ID: part.ToolCall.ID, Name: part.ToolCall.Name, Input: input}}
	case provider.PartToolResult:
		tr := part.ToolResult
		b = wireBlock{Type: "tool_result", toolResultFields: &toolResultFields{ToolUseID: tr.CallID, IsError: tr.IsError, Content: []wireBlock{textBlock(tr.Content)}}}
	default:
		return b, false, fmt.Errorf("unsupported part type %q", part.Type)
	}
	if cacheable && part.Cache != provider.PromptCacheOff {
		b.CacheControl = cacheControl(part.Cache)
	}
	return b, true, nil
}
