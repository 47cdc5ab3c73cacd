package anthropic

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// attempt is one call's prepared parameters and bounded context.
type attempt struct {
	model  string
	params anthropic.MessageNewParams
	ctx    context.Context
	cancel context.CancelFunc
	raw    *http.Response
	opts   []option.RequestOption
}

// begin validates and maps req and bounds the attempt by its timeout. The
// per-request timeout also goes to the SDK, which otherwise refuses large
// max_tokens on non-streaming calls.
func (a *Adapter) begin(ctx context.Context, req *provider.Request) (*attempt, error) {
	at := &attempt{model: a.base.Model(req)}
	var err error
	if at.params, err = a.params(req, at.model); err != nil {
		return nil, err
	}
	bs, err := betas(req)
	if err != nil {
		return nil, a.base.BadRequest(at.model, err.Error())
	}
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	at.opts = []option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&at.raw)}
	for _, b := range bs {
		at.opts = append(at.opts, option.WithHeaderAdd("anthropic-beta", b))
	}
	return at, nil
}

// Invoke runs req to completion.
func (a *Adapter) Invoke(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	at, err := a.begin(ctx, req)
	if err != nil {
		return nil, err
	}
	defer at.cancel()
	start := a.base.Now()
	msg, err := a.client.Messages.New(at.ctx, at.params, at.opts...)
	latency := a.base.Now().Sub(start)
	if at.raw != nil {
		a.observe(at.raw.Header, 0)
	}
	if err != nil {
		return nil, a.classify(at.ctx, err, at.model)
	}
	if msg == nil {
		id := ""
		if at.raw != nil {
			id = at.raw.Header.Get("request-id")
		}
		return nil, a.base.Protocol(at.model, id, "the response is null")
	}
	res := a.result(msg, at.model)
	res.Latency = latency
	if at.raw != nil {
		res.RequestID = at.raw.Header.Get("request-id")
	}
	return res, nil
}

func usage(u anthropic.Usage) provider.Usage {
	out := provider.UsageExclusive(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	out.CacheWriteLongTokens = u.CacheCreation.Ephemeral1hInputTokens
	out.ReasoningTokens = u.OutputTokensDetails.ThinkingTokens
	return out
}

// result converts a complete message.
func (a *Adapter) result(msg *anthropic.Message, requested string) *provider.Result {
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
	// Parts point into ToolCalls; rebuild the pointers now the slice is final.
	relink(res)
	res.Content = strings.Join(text, "")
	res.Usage = usage(msg.Usage)
	var priced bool
	res.Cost, priced = a.base.Price(res.Usage, adapterkit.PriceRef{NS: Namespace, Model: res.Model}, adapterkit.PriceRef{NS: Namespace, Model: requested})
	res.Unpriced = !priced
	return res
}

func relink(res *provider.Result) {
	i := 0
	for p := range res.Parts {
		if res.Parts[p].Type == provider.PartToolCall {
			res.Parts[p].ToolCall = &res.ToolCalls[i]
			i++
		}
	}
}

func reasoningPart(text, key, value string) provider.Part {
	v, _ := json.Marshal(value)
	return provider.Part{Type: provider.PartReasoning, Text: text, Meta: provider.Metadata{key: v}}
}

func stopReason(s string) provider.StopReason {
	switch s {
	case "end_turn":
		return provider.StopEndTurn
	case "max_tokens":
		return provider.StopMaxTokens
	case "stop_sequence":
		return provider.StopSequence
	case "tool_use":
		return provider.StopToolUse
	case "pause_turn":
		return provider.StopPause
	case "refusal":
		return provider.StopRefusal
	case "model_context_window_exceeded":
		return provider.StopContextWindow
	}
	return provider.StopOther
}
