package anthropic

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// attempt is one call's prepared body and bounded context.
type attempt struct {
	model string
	// body is a translated call's; a relayed one is sent from nbody.
	body  []byte
	nbody adapterkit.Body
	// encodeErr is a body that could not be encoded (a tool call's
	// arguments that are not JSON): the call fails with it as the SDK's
	// own encoding failed.
	encodeErr error
	ctx       context.Context
	cancel    context.CancelFunc
	raw       *http.Response
	opts      []option.RequestOption
	// thinks says the request asks the model to think: Claude bills
	// thinking it streams only a summary of, or redacts.
	thinks bool
	// native says the body is the client's, relayed ([provider.Native]);
	// edits names what was changed in it.
	native bool
	edits  []string
}

// messagesPath is the Messages endpoint, relative to the base URL as the
// SDK's Messages.New sends it.
const messagesPath = "v1/messages"

// begin validates and encodes req and bounds the attempt by its timeout.
// The per-request timeout also goes to the SDK (as X-Stainless-Timeout and
// the bound of its attempt), as Messages.New sends it.
func (a *Adapter) begin(ctx context.Context, req *provider.Request, stream bool) (*attempt, error) {
	at := &attempt{model: a.base.Model(req)}
	p, err := a.params(req, at.model)
	if err != nil {
		return nil, err
	}
	bs, err := betas(req)
	if err != nil {
		return nil, a.base.BadRequest(at.model, err.Error())
	}
	p.Stream = stream
	at.thinks = p.Thinking != nil
	at.body, at.encodeErr = p.encode()
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	at.opts = make([]option.RequestOption, 0, 2+len(bs))
	at.opts = append(at.opts, option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&at.raw))
	for _, b := range bs {
		at.opts = append(at.opts, option.WithHeaderAdd("anthropic-beta", b))
	}
	return at, nil
}

// Invoke runs req to completion. The SDK sends the encoded body and hands
// back the raw answer; an error status comes back as its *anthropic.Error.
func (a *Adapter) Invoke(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	if provider.SpeaksNative(a, req, a.base.Model(req)) {
		return a.invokeNative(ctx, req)
	}
	at, err := a.begin(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer at.cancel()
	if at.encodeErr != nil {
		return nil, a.classify(at.ctx, at.encodeErr, at.model)
	}
	start := a.base.Now()
	var body []byte
	err = a.client.Post(at.ctx, messagesPath, at.body, &body, at.opts...)
	var msg *wireAnswer
	if err == nil && at.raw != nil {
		msg, err = decodeAnswer(at.raw.Header.Get("content-type"), body)
	}
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

func (u *wireUsage) usage() provider.Usage {
	out := provider.UsageExclusive(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	out.CacheWriteLongTokens = u.CacheCreation.Ephemeral1hInputTokens
	out.ReasoningTokens = u.OutputTokensDetails.ThinkingTokens
	return out
}

// result converts a complete message.
func (a *Adapter) result(msg *wireAnswer, requested string) *provider.Result {
	return a.resultWith(msg, requested, msg.Usage.usage())
}

// resultWith converts a complete message whose usage is u.
func (a *Adapter) resultWith(msg *wireAnswer, requested string, u provider.Usage) *provider.Result {
	res := &provider.Result{Provider: a.base.Name, Model: msg.Model, RawStopReason: msg.StopReason, StopReason: stopReason(msg.StopReason), ToolCalls: []provider.ToolCall{}}
	if res.Model == "" {
		res.Model = requested
	}
	var text []string
	for i := range msg.Content {
		b := &msg.Content[i]
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
			res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall})
		}
	}
	// Parts point into ToolCalls, linked now the slice is final.
	relink(res)
	res.Content = strings.Join(text, "")
	res.Usage = u
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
