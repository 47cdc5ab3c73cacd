package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The Responses API's answer (the response object, unary or in
// response.completed, response.incomplete and response.failed events) is
// read into these structs: only what the Result needs.

// respObject is a response object.
type respObject struct {
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	Error             *respError        `json:"error"`
	IncompleteDetails *respIncomplete   `json:"incomplete_details"`
	Output            []json.RawMessage `json:"output"`
	Usage             *respUsage        `json:"usage"`
	ServiceTier       string            `json:"service_tier"`
}

type respError struct {
	Code    jsonString `json:"code"`
	Message jsonString `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

// respUsage is the Responses API's usage: input_tokens includes the
// cached ones, output_tokens the reasoning ones.
type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// usage is the usage to bill when the answer reports any tokens.
func (u *respUsage) usage() (provider.Usage, bool) {
	if u == nil || u.InputTokens <= 0 && u.OutputTokens <= 0 {
		return provider.Usage{}, false
	}
	out := provider.UsageInclusive(u.InputTokens, u.InputTokensDetails.CachedTokens, u.InputTokensDetails.CacheWriteTokens, u.OutputTokens)
	out.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
	return out, true
}

// respItem is one output item: a message, a reasoning item, a function
// or custom tool call, a hosted tool's call (web_search_call, …).
type respItem struct {
	Type      string     `json:"type"`
	ID        string     `json:"id"`
	CallID    string     `json:"call_id"`
	Name      string     `json:"name"`
	Arguments jsonString `json:"arguments"`
	Input     string     `json:"input"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// decodeResponse reads a unary answer's body.
func decodeResponse(body []byte) (*respObject, error) {
	var obj *respObject
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("error parsing response json: %w", err)
	}
	if obj == nil {
		return nil, fmt.Errorf("error parsing response json: the response is null")
	}
	return obj, nil
}

// responsesResult reads a finished response object (completed or
// incomplete) to model into a Result, priced. items, when obj has no
// output, are the output items a stream delivered (response.output_item.done),
// in order. raw is the HTTP response, for its request id.
//
// output_text parts of message items are the Content; function_call items
// are tool calls (id = call_id); a custom_tool_call is a tool call whose
// arguments are {"input": <its input>}; reasoning items are reasoning parts
// whose text is the summary (or the reasoning text) and whose Meta holds
// the item as it came, compacted ([MetaResponsesItem]); each web_search_call item is
// one web search billed.
func (a *Adapter) responsesResult(req *provider.Request, model string, obj *respObject, items []json.RawMessage, raw *http.Response) (*provider.Result, error) {
	res := &provider.Result{Provider: a.base.Name, Model: obj.Model, ToolCalls: []provider.ToolCall{}}
	if res.Model == "" {
		res.Model = model
	}
	if raw != nil {
		res.RequestID = raw.Header.Get("x-request-id")
	}
	if len(obj.Output) > 0 {
		items = obj.Output
	}
	var text strings.Builder
	var calls []int // positions in res.Parts of the tool-call parts
	refused := false
	var searches int64
	for i, rawItem := range items {
		var it respItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			var kind struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(rawItem, &kind)
			switch kind.Type {
			case "message", "reasoning", "function_call", "custom_tool_call":
				return nil, a.protocolError(model, raw, fmt.Sprintf("output[%d] (%s) is unreadable: %v", i, kind.Type, err))
			}
			continue // an item the Result does not read
		}
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
					res.Parts = append(res.Parts, provider.Part{Type: provider.PartText, Text: c.Text})
				case "refusal":
					refused = true
				}
			}
		case "reasoning":
			var summary []string
			for _, s := range it.Summary {
				summary = append(summary, s.Text)
			}
			if len(summary) == 0 {
				for _, c := range it.Content {
					summary = append(summary, c.Text)
				}
			}
			var item bytes.Buffer
			if err := json.Compact(&item, rawItem); err != nil {
				return nil, a.protocolError(model, raw, fmt.Sprintf("output[%d] (reasoning) is unreadable: %v", i, err))
			}
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartReasoning, Text: strings.Join(summary, "\n\n"),
				Meta: provider.Metadata{MetaResponsesItem: item.Bytes()}})
		case "function_call", "custom_tool_call":
			args, err := it.arguments()
			if err != nil {
				return nil, a.protocolError(model, raw, "tool call "+it.CallID+": "+err.Error())
			}
			res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
			calls = append(calls, len(res.Parts))
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall})
		case "web_search_call":
			searches++
		}
	}
	for i, p := range calls {
		res.Parts[p].ToolCall = &res.ToolCalls[i]
	}
	res.Content = text.String()
	res.RawStopReason = obj.Status
	switch {
	case obj.Status == "incomplete":
		reason := ""
		if obj.IncompleteDetails != nil {
			reason = obj.IncompleteDetails.Reason
		}
		if reason != "" {
			res.RawStopReason = reason
		}
		switch reason {
		case "max_output_tokens":
			res.StopReason = provider.StopMaxTokens
		case "content_filter":
			res.StopReason = provider.StopContentFilter
		default:
			res.StopReason = provider.StopOther
		}
	case len(res.ToolCalls) > 0:
		res.StopReason = provider.StopToolUse
	case refused:
		res.StopReason = provider.StopRefusal
	case obj.Status == "completed":
		res.StopReason = provider.StopEndTurn
	default:
		res.StopReason = provider.StopOther
	}
	if u, ok := obj.Usage.usage(); ok {
		res.Usage = u
	} else {
		res.Usage = estimateUsage(req, res)
	}
	res.Usage.WebSearchRequests = searches
	res.Usage.ServiceTier = serviceTier(obj.ServiceTier)
	var priced bool
	res.Cost, priced = a.cost(res.Model, model, res.Usage)
	res.Unpriced = !priced
	return res, nil
}

// arguments is a tool call item's arguments as a JSON object: a function
// call's arguments string, or {"input": …} for a custom tool's free-form
// input.
func (it *respItem) arguments() (json.RawMessage, error) {
	if it.Type == "custom_tool_call" {
		b, err := json.Marshal(struct {
			Input string `json:"input"`
		}{it.Input})
		return b, err
	}
	return normaliseArguments(string(it.Arguments))
}

// responseFailed is the error of a response that failed (status
// "failed", unary or in a response.failed event).
func (a *Adapter) responseFailed(model string, obj *respObject, requestID string) *provider.Error {
	var eb errBody
	if obj.Error != nil {
		eb.Code, eb.Message = string(obj.Error.Code), string(obj.Error.Message)
	}
	if eb.Message == "" {
		eb.Message = "the response failed"
	}
	return a.streamError(model, eb, requestID)
}

// streamError classifies an error the provider reported after a 200 (an
// error chunk, an error event, a failed response) by its code and
// message. The Responses API's codes for a request the model cannot
// serve (invalid_prompt, the image codes, bio_policy,
// data_residency_mismatch) are bad requests, not server failures.
func (a *Adapter) streamError(model string, eb errBody, requestID string) *provider.Error {
	if eb.Type == "error" {
		eb.Type = "" // the error event's own type, not the error's
	}
	pe := &provider.Error{Provider: a.base.Name, Model: model}
	a.fromBody(pe, http.StatusOK, eb)
	code := strings.ToLower(eb.Code)
	if pe.Kind == provider.KindServer && (strings.HasPrefix(code, "invalid_") || strings.Contains(code, "image") ||
		code == "bio_policy" || code == "data_residency_mismatch") {
		pe.Kind = provider.KindBadRequest
	}
	pe.Diagnostic.RequestID = requestID
	return a.base.Finish(pe)
}
