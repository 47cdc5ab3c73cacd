package openaicompat

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Invoke runs req to completion. A request relayed in a protocol the
// adapter speaks ([Adapter.SpeaksNative]) goes upstream as it came.
func (a *Adapter) Invoke(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	if provider.SpeaksNative(a, req, a.base.Model(req)) {
		return a.invokeNative(ctx, req)
	}
	at, err := a.begin(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer at.cancel()
	start := a.base.Now()
	var body []byte
	err = a.client.Post(at.ctx, chatPath, at.body, &body, at.opts...)
	var cc *completion
	if err == nil {
		cc, err = decodeCompletion(at.raw, body)
	}
	latency := a.base.Now().Sub(start)
	if err != nil {
		return nil, a.classify(at.ctx, err, at.raw, at.model)
	}
	if at.raw != nil {
		a.observe(at.raw.Header, 0)
	}
	res, err := a.completionResult(req, at.model, cc, at.raw, "")
	if err != nil {
		return nil, err
	}
	res.Latency = latency
	return res, nil
}

// completionResult reads a decoded Chat Completions answer (cc, nil for a
// JSON null) to model into a Result, priced; raw is the HTTP response it
// came in, for its request id, and tier the service_tier it reported
// ("" when not read).
func (a *Adapter) completionResult(req *provider.Request, model string, cc *completion, raw *http.Response, tier string) (*provider.Result, error) {
	if cc == nil {
		return nil, a.protocolError(model, raw, "the response is null")
	}
	if len(cc.Choices) == 0 {
		return nil, a.protocolError(model, raw, "the response has no choices")
	}
	ch := cc.Choices[0]
	res := &provider.Result{Provider: a.base.Name, Model: cc.Model, RawStopReason: ch.FinishReason, ToolCalls: []provider.ToolCall{}}
	if res.Model == "" {
		res.Model = model
	}
	if ch.Message.Content != "" {
		res.Content = ch.Message.Content
		res.Parts = append(res.Parts, provider.Part{Type: provider.PartText, Text: ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		args, err := normaliseArguments(tc.Function.Arguments)
		if err != nil {
			return nil, a.protocolError(model, raw, "tool call "+tc.ID+": "+err.Error())
		}
		res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	for i := range res.ToolCalls {
		res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall, ToolCall: &res.ToolCalls[i]})
	}
	res.StopReason = stopReason(ch.FinishReason, len(res.ToolCalls) > 0)
	if u, ok := cc.Usage.usage(); ok {
		res.Usage = u
	} else {
		res.Usage = estimateUsage(req, res)
	}
	res.Usage.ServiceTier = serviceTier(tier)
	var priced bool
	res.Cost, priced = a.cost(res.Model, model, res.Usage)
	res.Unpriced = !priced
	if raw != nil {
		res.RequestID = raw.Header.Get("x-request-id")
	}
	return res, nil
}

// normaliseArguments turns the arguments string into a JSON object; an
// empty string (a call without arguments) is {}.
func normaliseArguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return nil, &argumentsError{err}
	}
	return json.RawMessage(s), nil
}

type argumentsError struct{ err error }

func (e *argumentsError) Error() string { return "arguments are not a JSON object: " + e.err.Error() }

// stopReason maps finish_reason. Some servers say "stop" after tool calls
// (Google's compatibility layer); the calls decide.
func stopReason(s string, calls bool) provider.StopReason {
	if calls && (s == "stop" || s == "tool_calls" || s == "function_call" || s == "") {
		return provider.StopToolUse
	}
	switch s {
	case "stop":
		return provider.StopEndTurn
	case "length":
		return provider.StopMaxTokens
	case "tool_calls", "function_call":
		return provider.StopToolUse
	case "content_filter":
		return provider.StopContentFilter
	}
	return provider.StopOther
}
