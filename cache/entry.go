package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// ErrUncacheable is wrapped by the error [Cache.Put] returns for a result
// that must not be stored, and reported in [Outcome.Uncacheable] by
// [Cache.Do].
var ErrUncacheable = errors.New("not cacheable")

// Entry is what a [Store] keeps for one response: what is needed to rebuild
// the [provider.Result], the original cost and usage (the saving a hit
// reports), and when it was stored. Its JSON form is the Redis value.
type Entry struct {
	Content       string              `json:"content"`
	ToolCalls     []provider.ToolCall `json:"tool_calls,omitempty"`
	Parts         []provider.Part     `json:"parts,omitempty"`
	Usage         provider.Usage      `json:"usage"`
	Cost          provider.Money      `json:"cost_usd"`
	Provider      string              `json:"provider"`
	Model         string              `json:"model_used"`
	StopReason    provider.StopReason `json:"stop_reason"`
	RawStopReason string              `json:"raw_stop_reason,omitempty"`
	// RequestID is the provider's id for the original call.
	RequestID string `json:"request_id,omitempty"`
	// Native is the provider's answer as it came, for a request relayed
	// in its client's protocol: a hit answers with it.
	Native *provider.NativeReply `json:"native,omitempty"`
	// StoredAt is when the original answer was stored.
	StoredAt time.Time `json:"stored_at"`
}

// storable reports why res must not be stored, or nil. Only answers the
// model finished are stored: end_turn, tool_use and stop_sequence. Cut
// answers (max_tokens, context_window, pause) are partial; content_filter
// withheld output; a refusal and "other" may well change on a retry, which a
// stored copy would prevent for a day.
func storable(res *provider.Result) error {
	if res == nil {
		return fmt.Errorf("%w: no result", ErrUncacheable)
	}
	switch res.StopReason {
	case provider.StopEndTurn, provider.StopToolUse, provider.StopSequence:
		return nil
	case "":
		return fmt.Errorf("%w: the result has no stop reason, so it may be partial", ErrUncacheable)
	case provider.StopMaxTokens, provider.StopContextWindow, provider.StopPause:
		return fmt.Errorf("%w: stop reason %q means the answer was cut", ErrUncacheable, res.StopReason)
	default:
		return fmt.Errorf("%w: stop reason %q is not a finished answer", ErrUncacheable, res.StopReason)
	}
}

// entryOf returns the entry for res, stored at at. It shares res's slices
// and maps: copy it (Entry.Clone) before keeping it beyond the call.
func entryOf(res *provider.Result, at time.Time) Entry {
	return Entry{
		Content:       res.Content,
		ToolCalls:     res.ToolCalls,
		Parts:         res.Parts,
		Usage:         res.Usage,
		Cost:          res.Cost,
		Provider:      res.Provider,
		Model:         res.Model,
		StopReason:    res.StopReason,
		RawStopReason: res.RawStopReason,
		RequestID:     res.RequestID,
		Native:        res.Native,
		StoredAt:      at,
	}
}

// hitResult rebuilds the result a hit returns: the stored answer, marked as
// a cache hit, with no cost and no usage (the call that used them was paid
// for once, when it was made). It takes e's slices and maps; callers pass a
// copy they own.
func hitResult(e Entry, latency time.Duration) *provider.Result {
	return &provider.Result{
		Content:       e.Content,
		ToolCalls:     e.ToolCalls,
		Parts:         e.Parts,
		Latency:       latency,
		Provider:      e.Provider,
		Model:         e.Model,
		CacheHit:      true,
		StopReason:    e.StopReason,
		RawStopReason: e.RawStopReason,
		RequestID:     e.RequestID,
		Native:        e.Native,
	}
}

// Clone returns a deep copy of e: no slice, map or JSON value is shared.
func (e Entry) Clone() Entry {
	e.ToolCalls = cloneToolCalls(e.ToolCalls)
	e.Parts = cloneParts(e.Parts)
	e.Native = e.Native.Clone()
	return e
}

func cloneToolCalls(in []provider.ToolCall) []provider.ToolCall {
	if in == nil {
		return nil
	}
	out := make([]provider.ToolCall, len(in))
	for i := range in {
		out[i] = cloneToolCall(in[i])
	}
	return out
}

func cloneToolCall(c provider.ToolCall) provider.ToolCall {
	c.Arguments = cloneRaw(c.Arguments)
	c.Meta = cloneMeta(c.Meta)
	return c
}

func cloneParts(in []provider.Part) []provider.Part {
	if in == nil {
		return nil
	}
	out := make([]provider.Part, len(in))
	for i, p := range in {
		if p.ToolCall != nil {
			c := cloneToolCall(*p.ToolCall)
			p.ToolCall = &c
		}
		if p.ToolResult != nil {
			r := *p.ToolResult
			p.ToolResult = &r
		}
		p.Meta = cloneMeta(p.Meta)
		out[i] = p
	}
	return out
}

func cloneMeta(m provider.Metadata) provider.Metadata {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		out[k] = cloneRaw(v)
	}
	return out
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage{}, r...)
}
