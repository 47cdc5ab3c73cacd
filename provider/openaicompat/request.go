package openaicompat

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

// MetaReasoning carries a server's non-standard reasoning text (Ollama's
// message.reasoning) on a reasoning part; it is not sent back.
const MetaReasoning = "openai.reasoning"

// attempt is one call's prepared parameters and bounded context.
type attempt struct {
	model  string
	params openai.ChatCompletionNewParams
	ctx    context.Context
	cancel context.CancelFunc
	raw    *http.Response
	opts   []option.RequestOption
}

// begin validates and maps req and bounds the attempt by its timeout.
func (a *Adapter) begin(ctx context.Context, req *provider.Request, stream bool) (*attempt, error) {
	at := &attempt{model: a.base.Model(req)}
	if at.model == "" {
		return nil, a.base.BadRequest("", fmt.Sprintf("no model for tier %s: set providers.%s.models.%s in llm-config.yaml", req.EffectiveTier(), a.base.Name, req.EffectiveTier()))
	}
	if err := a.base.Validate(req, at.model); err != nil {
		return nil, err
	}
	var err error
	if at.params, err = a.params(req, at.model, stream); err != nil {
		return nil, err
	}
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	at.opts = []option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&at.raw)}
	return at, nil
}

// params turns a request into Chat Completions parameters, following the
// profile's quirks.
func (a *Adapter) params(req *provider.Request, model string, stream bool) (openai.ChatCompletionNewParams, error) {
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
	if err := a.sampling(&p, req, model); err != nil {
		return p, err
	}
	if req.PromptCache != provider.PromptCacheOff && a.profile.PromptCaching && req.CacheKey != "" {
		p.PromptCacheKey = openai.String(req.CacheKey)
	}
	for i, m := range req.Conversation() {
		msgs, err := messages(m)
		if err != nil {
			return p, a.base.BadRequest(model, fmt.Sprintf("messages[%d]: %v", i, err))
		}
		p.Messages = append(p.Messages, msgs...)
	}
	return p, nil
}

// maxOpenAIStop is how many stop sequences OpenAI takes.
const maxOpenAIStop = 4

// sampling sets temperature, top_p, top_k, seed, stop and the reasoning
// effort, each only when the request sets it and the model honours it,
// and the response format.
func (a *Adapter) sampling(p *openai.ChatCompletionNewParams, req *provider.Request, model string) error {
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
func messages(m provider.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
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
