package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

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

func cacheControl(ttl provider.PromptCache) anthropic.CacheControlEphemeralParam {
	cc := anthropic.NewCacheControlEphemeralParam()
	if ttl == provider.PromptCache1h {
		cc.TTL = anthropic.CacheControlEphemeralTTLTTL1h
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

// params turns a request into the SDK's parameters.
func (a *Adapter) params(req *provider.Request, model string) (anthropic.MessageNewParams, error) {
	if err := a.base.Validate(req, model); err != nil {
		return anthropic.MessageNewParams{}, err
	}
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: int64(a.base.MaxTokens(Namespace, model, req))}
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
		p.OutputConfig.Format = anthropic.JSONOutputFormatParam{Schema: schema}
	}
	if err := a.thinking(&p, req, model); err != nil {
		return p, err
	}
	if req.System != "" {
		sys := anthropic.TextBlockParam{Text: req.System}
		if marks.System {
			sys.CacheControl = cacheControl(req.PromptCache)
		}
		p.System = []anthropic.TextBlockParam{sys}
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
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	var serial param.Opt[bool] // disable_parallel_tool_use, sent only when set
	if req.DisableParallelToolCalls {
		serial = anthropic.Bool(true)
	}
	switch req.ToolChoice {
	case "", provider.ToolChoiceAuto:
		if serial.Valid() && len(req.Tools) > 0 {
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: serial}}
		}
	case provider.ToolChoiceNone:
		if len(req.Tools) > 0 {
			none := anthropic.NewToolChoiceNoneParam()
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &none}
		}
	case provider.ToolChoiceRequired:
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: serial}}
	default:
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: string(req.ToolChoice), DisableParallelToolUse: serial}}
	}
	for i, m := range req.Conversation() {
		blocks := make([]anthropic.ContentBlockParamUnion, 0, len(m.Parts))
		for j, part := range m.Parts {
			b, err := contentBlock(part)
			if err != nil {
				return p, a.base.BadRequest(model, fmt.Sprintf("messages[%d].parts[%d]: %v", i, j, err))
			}
			if b != nil {
				blocks = append(blocks, *b)
			}
		}
		if len(blocks) == 0 {
			return p, a.base.BadRequest(model, fmt.Sprintf("messages[%d] has no content", i))
		}
		if m.Role == provider.RoleAssistant {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
		}
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
func (a *Adapter) thinking(p *anthropic.MessageNewParams, req *provider.Request, model string) error {
	r := req.Reasoning
	if r == nil || !a.ModelCapabilities(model).Has(provider.CapReasoning) {
		return nil
	}
	if c := req.ToolChoice; c != "" && c != provider.ToolChoiceAuto && c != provider.ToolChoiceNone {
		return a.base.BadRequest(model, fmt.Sprintf("reasoning: Claude does not think when tool_choice forces tool use (%q): drop the reasoning setting or let the model choose", string(c)))
	}
	adaptive := anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
	switch styleOf(model) {
	case thinkingAdaptive:
		p.Thinking = adaptive
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(r.EffectiveEffort())
	case thinkingBoth:
		p.Thinking = adaptive
		if r.Budget > 0 {
			p.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(r.Budget))
		}
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(r.Effort)
	default:
		budget := min(r.EffectiveBudget(), int(p.MaxTokens)-1)
		if r.Budget == 0 && r.Effort == "" {
			budget = provider.MinReasoningBudget
		}
		if budget < provider.MinReasoningBudget {
			return a.base.BadRequest(model, fmt.Sprintf("reasoning: max_tokens %d leaves no room for thinking on %s, whose budget_tokens must be at least %d and below max_tokens", p.MaxTokens, model, provider.MinReasoningBudget))
		}
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(budget))
	}
	return nil
}

// toolParam maps a JSON Schema onto Anthropic's input_schema: properties and
// required have fields of their own, every other keyword rides along as is.
func toolParam(t provider.ToolDef) (*anthropic.ToolParam, error) {
	tp := &anthropic.ToolParam{Name: t.Name}
	if t.Description != "" {
		tp.Description = anthropic.String(t.Description)
	}
	if t.Strict {
		tp.Strict = anthropic.Bool(true)
	}
	schema := map[string]any{}
	if len(t.InputSchema) > 0 {
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return nil, fmt.Errorf("input_schema: %w", err)
		}
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return nil, fmt.Errorf(`input_schema must have "type": "object", got %v`, typ)
	}
	delete(schema, "type")
	// The API requires input_schema: a tool without arguments gets empty
	// properties, which the SDK would otherwise leave out with the schema.
	tp.InputSchema.Properties = map[string]any{}
	if props, ok := schema["properties"]; ok {
		tp.InputSchema.Properties = props
		delete(schema, "properties")
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				tp.InputSchema.Required = append(tp.InputSchema.Required, s)
			}
		}
		delete(schema, "required")
	}
	if len(schema) > 0 {
		tp.InputSchema.ExtraFields = schema
	}
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
// signature (from another provider) are dropped, as the API would reject
// them.
func contentBlock(part provider.Part) (*anthropic.ContentBlockParamUnion, error) {
	var b anthropic.ContentBlockParamUnion
	switch part.Type {
	case provider.PartText:
		if part.Text == "" {
			return nil, nil
		}
		b = anthropic.NewTextBlock(part.Text)
	case provider.PartReasoning:
		if data, ok := metaString(part.Meta, MetaRedactedThinking); ok {
			b = anthropic.NewRedactedThinkingBlock(data)
		} else if sig, ok := metaString(part.Meta, MetaSignature); ok {
			b = anthropic.NewThinkingBlock(sig, part.Text)
		} else {
			return nil, nil
		}
	case provider.PartImage:
		if im := part.Image; im.URL != "" {
			b = anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: im.URL})
		} else {
			b = anthropic.NewImageBlockBase64(im.MediaType, base64.StdEncoding.EncodeToString(im.Data))
		}
	case provider.PartToolCall:
		var input any = map[string]any{}
		if len(part.ToolCall.Arguments) > 0 {
			input = json.RawMessage(part.ToolCall.Arguments)
		}
		b = anthropic.NewToolUseBlock(part.ToolCall.ID, input, part.ToolCall.Name)
	case provider.PartToolResult:
		b = anthropic.NewToolResultBlock(part.ToolResult.CallID, part.ToolResult.Content, part.ToolResult.IsError)
	default:
		return nil, fmt.Errorf("unsupported part type %q", part.Type)
	}
	if part.Cache != provider.PromptCacheOff {
		if cp := b.GetCacheControl(); cp != nil {
			*cp = cacheControl(part.Cache)
		}
	}
	return &b, nil
}
