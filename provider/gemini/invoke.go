package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// attempt is one call's prepared request and bounded context.
type attempt struct {
	model  string
	body   *generateRequest
	ctx    context.Context
	cancel context.CancelFunc
}

func (a *Adapter) begin(ctx context.Context, req *provider.Request) (*attempt, error) {
	at := &attempt{model: a.base.Model(req)}
	if err := a.base.Validate(req, at.model); err != nil {
		return nil, err
	}
	var err error
	if at.body, err = a.config(req, at.model); err != nil {
		return nil, err
	}
	if at.body.Contents, err = a.contents(req, at.model); err != nil {
		return nil, err
	}
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
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
	resp, err := a.client.generate(at.ctx, at.model, at.body)
	latency := a.base.Now().Sub(start)
	var mal *errMalformed
	if errors.As(err, &mal) {
		return nil, a.base.Protocol(at.model, "", mal.Error())
	}
	if err != nil {
		return nil, a.classify(at.ctx, err, at.model)
	}
	var acc accumulator
	if err := acc.add(resp); err != nil {
		return nil, a.blocked(at.model, err)
	}
	res, err := a.result(&acc, at.model)
	if err != nil {
		return nil, err
	}
	res.Latency = latency
	return res, nil
}

// errBlocked reports a prompt Gemini refused (HTTP 200, no candidates).
type errBlocked struct{ reason, message string }

func (e *errBlocked) Error() string {
	s := "prompt blocked by Gemini: " + e.reason
	if e.message != "" {
		s += ": " + e.message
	}
	return s
}

func (a *Adapter) blocked(model string, err error) *provider.Error {
	return &provider.Error{Kind: provider.KindBadRequest, Provider: a.base.Name, Model: model, Diagnostic: provider.Diagnostic{Status: 200, Type: "blocked_prompt", Message: err.Error()}}
}

// accumulator gathers one answer from one response or a stream of them:
// text arrives as deltas, function calls whole, usage cumulatively.
type accumulator struct {
	parts     []provider.Part
	calls     []provider.ToolCall
	text      strings.Builder
	usage     *usageMetadata
	finish    string
	model     string
	requestID string
}

// add folds one response in. A blocked prompt is an *errBlocked.
func (acc *accumulator) add(r *generateResponse) error {
	if r.ModelVersion != "" {
		acc.model = r.ModelVersion
	}
	if r.ResponseID != "" {
		acc.requestID = r.ResponseID
	}
	if r.UsageMetadata != nil {
		acc.usage = r.UsageMetadata
	}
	if len(r.Candidates) == 0 {
		if fb := r.PromptFeedback; fb != nil && fb.BlockReason != "" {
			return &errBlocked{reason: fb.BlockReason, message: fb.BlockReasonMessage}
		}
		return nil
	}
	c := r.Candidates[0]
	if c.FinishReason != "" {
		acc.finish = c.FinishReason
	}
	if c.Content == nil {
		return nil
	}
	for _, p := range c.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			args, _ := json.Marshal(p.FunctionCall.Args)
			if p.FunctionCall.Args == nil {
				args = []byte(`{}`)
			}
			tc := provider.ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Arguments: args, Meta: signatureMeta(p.ThoughtSignature)}
			if tc.ID == "" {
				tc.ID = syntheticID()
				if tc.Meta == nil {
					tc.Meta = provider.Metadata{}
				}
				tc.Meta[MetaSyntheticID] = json.RawMessage(`true`)
			}
			acc.calls = append(acc.calls, tc)
			acc.parts = append(acc.parts, provider.Part{Type: provider.PartToolCall})
		case p.Thought:
			acc.parts = append(acc.parts, provider.Part{Type: provider.PartReasoning, Text: p.Text, Meta: signatureMeta(p.ThoughtSignature)})
		case p.Text != "" || len(p.ThoughtSignature) > 0:
			acc.text.WriteString(p.Text)
			n := len(acc.parts)
			if n > 0 && acc.parts[n-1].Type == provider.PartText && len(p.ThoughtSignature) == 0 {
				acc.parts[n-1].Text += p.Text
			} else {
				acc.parts = append(acc.parts, provider.Part{Type: provider.PartText, Text: p.Text, Meta: signatureMeta(p.ThoughtSignature)})
			}
		}
	}
	return nil
}

// result builds the final Result. promptTokenCount already includes the
// cached tokens; thoughts are billed as output.
func (a *Adapter) result(acc *accumulator, requested string) (*provider.Result, error) {
	res := &provider.Result{Provider: a.base.Name, Model: acc.model, Content: acc.text.String(), ToolCalls: acc.calls, Parts: acc.parts, RawStopReason: acc.finish, RequestID: acc.requestID}
	if res.ToolCalls == nil {
		res.ToolCalls = []provider.ToolCall{}
	}
	if res.Model == "" {
		res.Model = requested
	}
	i := 0
	for p := range res.Parts {
		if res.Parts[p].Type == provider.PartToolCall {
			res.Parts[p].ToolCall = &res.ToolCalls[i]
			i++
		}
	}
	res.StopReason = stopReason(acc.finish, len(res.ToolCalls) > 0)
	if u := acc.usage; u != nil {
		res.Usage = usageOf(u)
	}
	var priced bool
	res.Cost, priced = a.base.Price(res.Usage, adapterkit.PriceRef{NS: Namespace, Model: res.Model}, adapterkit.PriceRef{NS: Namespace, Model: requested})
	res.Unpriced = !priced
	return res, nil
}

// usageOf is the usage a usage metadata reports.
func usageOf(u *usageMetadata) provider.Usage {
	out := provider.UsageInclusive(int64(u.PromptTokenCount)+int64(u.ToolUsePromptTokenCount), int64(u.CachedContentTokenCount), 0, int64(u.CandidatesTokenCount)+int64(u.ThoughtsTokenCount))
	out.ReasoningTokens = int64(u.ThoughtsTokenCount)
	return out
}

// stopReason maps finishReason; Gemini has no tool-specific reason, so the
// function-call parts decide.
func stopReason(f string, calls bool) provider.StopReason {
	if calls && (f == finishStop || f == "") {
		return provider.StopToolUse
	}
	switch f {
	case finishStop:
		return provider.StopEndTurn
	case finishMaxTokens:
		return provider.StopMaxTokens
	case finishSafety, finishRecitation, finishBlocklist, finishProhibitedContent, finishSPII,
		finishImageSafety, finishImageProhibitedContent, finishImageRecitation:
		return provider.StopContentFilter
	}
	return provider.StopOther
}
