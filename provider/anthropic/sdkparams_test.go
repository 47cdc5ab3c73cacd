package anthropic

// The SDK-parameter builder the adapter used before its fixed wire codec,
// kept to prove the fixed encoding sends the same JSON value.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

func sdkCacheControl(ttl provider.PromptCache) anthropic.CacheControlEphemeralParam {
	cc := anthropic.NewCacheControlEphemeralParam()
	if ttl == provider.PromptCache1h {
		cc.TTL = anthropic.CacheControlEphemeralTTLTTL1h
	}
	return cc
}

// sdkParams turns a request into the SDK's parameters.
func (a *Adapter) sdkParams(req *provider.Request, model string) (anthropic.MessageNewParams, error) {
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
	if err := a.sdkThinking(&p, req, model); err != nil {
		return p, err
	}
	if req.System != "" {
		sys := anthropic.TextBlockParam{Text: req.System}
		if marks.System {
			sys.CacheControl = sdkCacheControl(req.PromptCache)
		}
		p.System = []anthropic.TextBlockParam{sys}
	}
	for i, t := range req.Tools {
		tp, err := sdkToolParam(t)
		if err != nil {
			return p, a.base.BadRequest(model, fmt.Sprintf("tools[%d] %q: %v", i, t.Name, err))
		}
		switch {
		case t.Cache != provider.PromptCacheOff:
			tp.CacheControl = sdkCacheControl(t.Cache)
		case i == len(req.Tools)-1 && marks.LastTool:
			tp.CacheControl = sdkCacheControl(req.PromptCache)
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
			b, err := sdkContentBlock(part)
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

// sdkThinking maps req.Reasoning onto model's own settings: a budget as
// thinking {type: enabled, budget_tokens} where the model takes one, an
// effort as output_config.effort with adaptive thinking where it takes
// that, and on a model with only one of the two the other stands for it
// ([provider.Reasoning.EffectiveBudget], EffectiveEffort).
func (a *Adapter) sdkThinking(p *anthropic.MessageNewParams, req *provider.Request, model string) error {
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

// sdkToolParam maps a JSON Schema onto Anthropic's input_schema: properties and
// required have fields of their own, every other keyword rides along as is.
func sdkToolParam(t provider.ToolDef) (*anthropic.ToolParam, error) {
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

// sdkContentBlock maps one part; reasoning parts without an Anthropic
// signature (from another provider) are dropped, as the API would reject
// them.
func sdkContentBlock(part provider.Part) (*anthropic.ContentBlockParamUnion, error) {
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
			*cp = sdkCacheControl(part.Cache)
		}
	}
	return &b, nil
}

// sdkResult converts a complete message as decoded by the SDK.
func (a *Adapter) sdkResult(msg *anthropic.Message, requested string) *provider.Result {
	res := &provider.Result{Provider: a.base.Name, Model: string(msg.Model), RawStopReason: string(msg.StopReason), StopReason: stopReason(string(msg.StopReason)), ToolCalls: []provider.ToolCall{}}
	if res.Model == "" {
		res.Model = requested
	}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartText, Text: b.Text})
		case "thinking":
			res.Parts = append(res.Parts, reasoningPart(b.Thinking, MetaSignature, b.Signature))
		case "redacted_thinking":
			res.Parts = append(res.Parts, reasoningPart("", MetaRedactedThinking, b.Data))
		case "tool_use":
			args := b.Input
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage(`{}`)
			}
			tc := provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: args}
			res.ToolCalls = append(res.ToolCalls, tc)
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall, ToolCall: &res.ToolCalls[len(res.ToolCalls)-1]})
		}
	}
	relink(res)
	res.Content = strings.Join(text, "")
	res.Usage = usage(msg.Usage)
	var priced bool
	res.Cost, priced = a.base.Price(res.Usage, adapterkit.PriceRef{NS: Namespace, Model: res.Model}, adapterkit.PriceRef{NS: Namespace, Model: requested})
	res.Unpriced = !priced
	return res
}

func usage(u anthropic.Usage) provider.Usage {
	out := provider.UsageExclusive(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	out.CacheWriteLongTokens = u.CacheCreation.Ephemeral1hInputTokens
	out.ReasoningTokens = u.OutputTokensDetails.ThinkingTokens
	return out
}
