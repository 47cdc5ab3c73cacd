package openaicompat

// The adapter as it was before it encoded requests and decoded answers
// with fixed structs: the SDK's ChatCompletionNewParams, its reflective
// encoder and decoder. The equivalence tests and the codec benchmark run it
// next to the adapter.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/provider"
)

// legacyAttempt is attempt with the SDK's parameters.
type legacyAttempt struct {
	model  string
	params openai.ChatCompletionNewParams
	ctx    context.Context
	cancel context.CancelFunc
	raw    *http.Response
	opts   []option.RequestOption
}

// legacyBegin is begin building the SDK's parameters.
func (a *Adapter) legacyBegin(ctx context.Context, req *provider.Request, stream bool) (*legacyAttempt, error) {
	at := &legacyAttempt{model: a.base.Model(req)}
	if at.model == "" {
		return nil, a.base.BadRequest("", fmt.Sprintf("no model for tier %s: set providers.%s.models.%s in llm-config.yaml", req.EffectiveTier(), a.base.Name, req.EffectiveTier()))
	}
	if err := a.base.Validate(req, at.model); err != nil {
		return nil, err
	}
	var err error
	if at.params, err = a.legacyParams(req, at.model, stream); err != nil {
		return nil, err
	}
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	at.opts = []option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&at.raw)}
	return at, nil
}

// legacyInvoke is Invoke as it was before the fixed codec: the SDK
// encodes ChatCompletionNewParams and decodes the answer.
func (a *Adapter) legacyInvoke(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	at, err := a.legacyBegin(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer at.cancel()
	start := a.base.Now()
	cc, err := a.client.Chat.Completions.New(at.ctx, at.params, at.opts...)
	latency := a.base.Now().Sub(start)
	if err != nil {
		return nil, a.classify(at.ctx, err, at.raw, at.model)
	}
	if at.raw != nil {
		a.observe(at.raw.Header, 0)
	}
	if cc == nil {
		return nil, a.protocolError(at.model, at.raw, "the response is null")
	}
	if len(cc.Choices) == 0 {
		return nil, a.protocolError(at.model, at.raw, "the response has no choices")
	}
	ch := cc.Choices[0]
	res := &provider.Result{Provider: a.base.Name, Model: cc.Model, RawStopReason: ch.FinishReason, ToolCalls: []provider.ToolCall{}}
	if res.Model == "" {
		res.Model = at.model
	}
	if ch.Message.Content != "" {
		res.Content = ch.Message.Content
		res.Parts = append(res.Parts, provider.Part{Type: provider.PartText, Text: ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		args, err := normaliseArguments(tc.Function.Arguments)
		if err != nil {
			return nil, a.protocolError(at.model, at.raw, "tool call "+tc.ID+": "+err.Error())
		}
		res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	for i := range res.ToolCalls {
		res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall, ToolCall: &res.ToolCalls[i]})
	}
	res.StopReason = stopReason(ch.FinishReason, len(res.ToolCalls) > 0)
	if cc.JSON.Usage.Valid() && (cc.Usage.PromptTokens > 0 || cc.Usage.CompletionTokens > 0) {
		res.Usage = legacyUsage(cc.Usage)
	} else {
		res.Usage = estimateUsage(req, res)
	}
	var priced bool
	res.Cost, priced = a.cost(res.Model, at.model, res.Usage)
	res.Unpriced = !priced
	res.Latency = latency
	if at.raw != nil {
		res.RequestID = at.raw.Header.Get("x-request-id")
	}
	return res, nil
}

func legacyUsage(u openai.CompletionUsage) provider.Usage {
	out := provider.UsageInclusive(u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CacheWriteTokens, u.CompletionTokens)
	out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	return out
}

// params turns a request into Chat Completions parameters, following the
// profile's quirks.
func (a *Adapter) legacyParams(req *provider.Request, model string, stream bool) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	ns, id := a.profile.priceRef(a.baseURL, model)
	max := int64(a.base.MaxTokens(ns, id, req))
	if a.profile.MaxCompletionTokens {
		p.MaxCompletionTokens = openai.Int(max)
	} else {
		p.MaxTokens = openai.Int(max)
	}
	if stream && a.profile.StreamUsage {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	if req.System != "" {
		if a.profile.DeveloperRole {
			p.Messages = append(p.Messages, openai.DeveloperMessage(req.System))
		} else {
			p.Messages = append(p.Messages, openai.SystemMessage(req.System))
		}
	}
	for i, t := range req.Tools {
		params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(t.InputSchema) > 0 {
			params = shared.FunctionParameters{}
			if err := json.Unmarshal(t.InputSchema, &params); err != nil {
				return p, a.base.BadRequest(model, fmt.Sprintf("tools[%d] %q: input_schema: %v", i, t.Name, err))
			}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		if t.Strict {
			def.Strict = openai.Bool(true)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(def))
	}
	switch req.ToolChoice {
	case "":
	case provider.ToolChoiceAuto, provider.ToolChoiceNone, provider.ToolChoiceRequired:
		if len(req.Tools) > 0 {
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(string(req.ToolChoice))}
		}
	default:
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: string(req.ToolChoice)}}}
	}
	if req.DisableParallelToolCalls && len(req.Tools) > 0 {
		p.ParallelToolCalls = openai.Bool(false)
	}
	if err := a.legacySampling(&p, req, model); err != nil {
		return p, err
	}
	if req.PromptCache != provider.PromptCacheOff && a.profile.PromptCaching && req.CacheKey != "" {
		p.PromptCacheKey = openai.String(req.CacheKey)
	}
	for i, m := range req.Conversation() {
		msgs, err := legacyMessages(m)
		if err != nil {
			return p, a.base.BadRequest(model, fmt.Sprintf("messages[%d]: %v", i, err))
		}
		p.Messages = append(p.Messages, msgs...)
	}
	return p, nil
}

// sampling sets temperature, top_p, top_k, seed, stop and the reasoning
// effort, each only when the request sets it and the model honours it,
// and the response format.
func (a *Adapter) legacySampling(p *openai.ChatCompletionNewParams, req *provider.Request, model string) error {
	caps := a.ModelCapabilities(model)
	if caps.Has(provider.CapSampling) {
		if req.Temperature != nil {
			p.Temperature = openai.Float(*req.Temperature)
		}
		if req.TopP != nil {
			p.TopP = openai.Float(*req.TopP)
		}
	}
	if req.TopK != nil && caps.Has(provider.CapTopK) {
		p.SetExtraFields(map[string]any{"top_k": *req.TopK})
	}
	if req.Seed != nil && caps.Has(provider.CapSeed) {
		p.Seed = openai.Int(*req.Seed)
	}
	// OpenAI takes only an effort: a budget alone stands for one.
	if r := req.Reasoning; r != nil && caps.Has(provider.CapReasoning) {
		if e := r.EffectiveEffort(); e != "" {
			p.ReasoningEffort = shared.ReasoningEffort(e)
		}
	}
	if a.profile.Name == OpenAI.Name && len(req.Stop) > maxOpenAIStop {
		return a.base.BadRequest(model, fmt.Sprintf("OpenAI takes at most %d stop sequences, got %d", maxOpenAIStop, len(req.Stop)))
	}
	if len(req.Stop) > 0 {
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: req.Stop}
	}
	schema, err := a.base.ResponseSchema(req, model, caps)
	if err != nil || schema == nil {
		return err
	}
	f := req.ResponseFormat
	js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.EffectiveName(), Schema: schema}
	if f.Strict {
		js.Strict = openai.Bool(true)
	}
	if f.Description != "" {
		js.Description = openai.String(f.Description)
	}
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	return nil
}

// messages maps one turn. A user turn with tool results becomes one tool
// message per result (and a user message for any text); an assistant turn
// becomes one message with its text and tool calls. Several text parts stay
// separate content parts (one is sent as a plain string), images are
// image_url parts (inline bytes as a data URL) in their place among them.
// Reasoning parts are provider-private and not sent.
func legacyMessages(m provider.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	var text []string
	var out []openai.ChatCompletionMessageParamUnion
	if m.Role == provider.RoleAssistant {
		asst := openai.ChatCompletionAssistantMessageParam{}
		for _, p := range m.Parts {
			switch p.Type {
			case provider.PartText:
				text = append(text, p.Text)
			case provider.PartToolCall:
				args := string(p.ToolCall.Arguments)
				if args == "" {
					args = "{}"
				}
				asst.ToolCalls = append(asst.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: p.ToolCall.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: p.ToolCall.Name, Arguments: args}}})
			}
		}
		switch {
		case len(text) == 1:
			asst.Content.OfString = openai.String(text[0])
		case len(text) > 1:
			for _, t := range text {
				asst.Content.OfArrayOfContentParts = append(asst.Content.OfArrayOfContentParts,
					openai.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{OfText: &openai.ChatCompletionContentPartTextParam{Text: t}})
			}
		}
		if len(text) == 0 && len(asst.ToolCalls) == 0 {
			return nil, errors.New("assistant turn has no text and no tool calls")
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &asst}}, nil
	}
	var parts []openai.ChatCompletionContentPartUnionParam // text and images, in order
	images := false
	for _, p := range m.Parts {
		switch p.Type {
		case provider.PartText:
			text = append(text, p.Text)
			parts = append(parts, openai.TextContentPart(p.Text))
		case provider.PartImage:
			images = true
			url := p.Image.URL
			if url == "" {
				url = "data:" + p.Image.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Image.Data)
			}
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
		case provider.PartToolResult:
			content := p.ToolResult.Content
			if p.ToolResult.IsError && !strings.HasPrefix(content, "Error") {
				content = "Error: " + content
			}
			out = append(out, openai.ToolMessage(content, p.ToolResult.CallID))
		}
	}
	switch {
	case len(text) == 1 && !images:
		out = append(out, openai.UserMessage(text[0]))
	case len(parts) > 0:
		out = append(out, openai.UserMessage(parts))
	}
	if len(out) == 0 {
		return nil, errors.New("user turn has no text and no tool results")
	}
	return out, nil
}
