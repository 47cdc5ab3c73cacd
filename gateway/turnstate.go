package gateway

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Defaults of the turn state's bounds.
const (
	DefaultTurnStateTTL   = 24 * time.Hour
	DefaultTurnStateBytes = 64 << 20
)

// turnState keeps what a provider's answer carries that the client's
// protocol has no place for, so that the next turn of the conversation
// sends it back upstream: the metadata of each tool call (a Gemini
// thought signature, the mark of a call id the adapter made up) and the
// reasoning parts with their signatures (Anthropic thinking blocks, Gemini
// thoughts). An OpenAI tool_calls entry or an Anthropic tool_use block has
// no field for either, and the providers refuse a tool loop without them.
//
// An answer's state is kept under each of its tool call ids, for the
// virtual key that made the call (another key's conversation cannot draw
// on it), for at most ttl after the answer and within maxBytes, the least
// recently used dropped first. A turn whose state is gone goes upstream as
// the client sent it.
type turnState struct {
	ttl      time.Duration
	maxBytes int
	now      func() time.Time

	mu    sync.Mutex
	bytes int
	ids   map[turnKey]*list.Element // of *turnEntry
	lru   list.List                 // most recently used first
}

type turnKey struct{ key, callID string }

type turnEntry struct {
	key       string
	ids       []string                     // the answer's tool call ids
	calls     map[string]provider.Metadata // call id -> its metadata
	reasoning []provider.Part              // the reasoning parts that carry metadata, in order
	size      int
	expires   time.Time
}

func newTurnState(ttl time.Duration, maxBytes int, now func() time.Time) *turnState {
	return &turnState{ttl: ttl, maxBytes: maxBytes, now: now, ids: map[turnKey]*list.Element{}}
}

// newTurnEntry is the provider state of res, an answer to the client with
// key, when it made tool calls and carries any; nil otherwise.
func newTurnEntry(key string, res *provider.Result) *turnEntry {
	if res == nil || len(res.ToolCalls) == 0 {
		return nil
	}
	e := &turnEntry{key: key, calls: map[string]provider.Metadata{}}
	for _, tc := range res.ToolCalls {
		e.ids = append(e.ids, tc.ID)
		e.size += len(tc.ID) + len(key)
		if len(tc.Meta) > 0 {
			e.calls[tc.ID] = tc.Meta
			e.size += metaSize(tc.Meta)
		}
	}
	for _, p := range res.Parts {
		if p.Type == provider.PartReasoning && len(p.Meta) > 0 {
			e.reasoning = append(e.reasoning, provider.Part{Type: p.Type, Text: p.Text, Meta: p.Meta})
			e.size += len(p.Text) + metaSize(p.Meta)
		}
	}
	if len(e.calls) == 0 && len(e.reasoning) == 0 {
		return nil
	}
	return e
}

// keep records the provider state of res, an answer to the client with
// key, when it made tool calls and carries any.
func (s *turnState) keep(key string, res *provider.Result) {
	e := newTurnEntry(key, res)
	if e == nil || e.size > s.maxBytes {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e.expires = now.Add(s.ttl)
	for _, id := range e.ids {
		if el, ok := s.ids[turnKey{key, id}]; ok {
			s.removeLocked(el) // a provider that sends the same call id again replaces what was kept
		}
	}
	el := s.lru.PushFront(e)
	for _, id := range e.ids {
		s.ids[turnKey{key, id}] = el
	}
	s.bytes += e.size
	for s.bytes > s.maxBytes || s.expiredLocked(s.lru.Back(), now) {
		s.removeLocked(s.lru.Back())
	}
}

// restore gives the assistant turns of req that the client sent back
// without their provider state the state kept for them: each tool call's
// metadata, and the turn's reasoning parts when none of the client's
// carries a signature. An answer's state is restored once, into the first
// turn naming one of its calls: a request naming a call in many turns is
// not amplified. When the state would add more than room bytes, req is
// left as it was and restore returns how many it would add, and false.
func (s *turnState) restore(key string, req *provider.Request, room int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return 0, true
	}
	now := s.now()
	return restoreTurns(req, room, func(m *provider.Message) *turnEntry { return s.entryLocked(key, m, now) })
}

// restoreTurns is restore with find giving the kept state of an assistant
// turn (the same *turnEntry for every turn naming one of its calls), nil
// when none is kept.
func restoreTurns(req *provider.Request, room int64, find func(m *provider.Message) *turnEntry) (int64, bool) {
	type restoring struct {
		i     int // the message
		e     *turnEntry
		parts []provider.Part
	}
	var plan []restoring
	var added int64
	done := map[*turnEntry]bool{}
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != provider.RoleAssistant {
			continue
		}
		e := find(m)
		if e == nil || done[e] {
			continue
		}
		done[e] = true
		signed := false
		for _, p := range m.Parts {
			if p.Type == provider.PartReasoning && len(p.Meta) > 0 {
				signed = true
			}
		}
		parts := make([]provider.Part, 0, len(m.Parts)+len(e.reasoning))
		if !signed {
			parts = append(parts, e.reasoning...)
			for _, p := range e.reasoning {
				added += int64(len(p.Text) + metaSize(p.Meta))
			}
		}
		for _, p := range m.Parts {
			switch {
			case p.Type == provider.PartReasoning && !signed && len(e.reasoning) > 0:
				continue // the kept parts stand for the client's copy
			case p.Type == provider.PartToolCall && p.ToolCall != nil && len(p.ToolCall.Meta) == 0 && e.calls[p.ToolCall.ID] != nil:
				tc := *p.ToolCall
				tc.Meta = e.calls[tc.ID]
				p.ToolCall = &tc
				added += int64(metaSize(tc.Meta))
			}
			parts = append(parts, p)
		}
		plan = append(plan, restoring{i: i, e: e, parts: parts})
	}
	if added > room {
		return added, false
	}
	for _, r := range plan {
		req.Messages[r.i].Parts = r.parts
	}
	return added, true
}

// entryLocked finds the kept state of an assistant turn by its tool calls.
func (s *turnState) entryLocked(key string, m *provider.Message, now time.Time) *turnEntry {
	for _, p := range m.Parts {
		if p.Type != provider.PartToolCall || p.ToolCall == nil {
			continue
		}
		el, ok := s.ids[turnKey{key, p.ToolCall.ID}]
		if !ok {
			continue
		}
		if s.expiredLocked(el, now) {
			s.removeLocked(el)
			continue
		}
		s.lru.MoveToFront(el)
		return el.Value.(*turnEntry)
	}
	return nil
}

func (s *turnState) expiredLocked(el *list.Element, now time.Time) bool {
	return el != nil && !now.Before(el.Value.(*turnEntry).expires)
}

func (s *turnState) removeLocked(el *list.Element) {
	e := s.lru.Remove(el).(*turnEntry)
	s.bytes -= e.size
	for _, id := range e.ids {
		if k := (turnKey{e.key, id}); s.ids[k] == el {
			delete(s.ids, k)
		}
	}
}

// size is how many tool calls have state kept.
func (s *turnState) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func metaSize(m provider.Metadata) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// keyID names a client for the turn state: the virtual key's id, "" when
// the gateway runs without keys.
func keyID(k *Key) string {
	if k == nil {
		return ""
	}
	return k.ID
}

// invoke makes call for the client with key and keeps the answer's
// provider state for the conversation's next turn.
func (g *Gateway) invoke(ctx context.Context, call orchestrator.Call, key string) (*orchestrator.Outcome, error) {
	out, err := g.opts.Orchestrator.Invoke(ctx, call)
	if err != nil {
		g.rates.settle(ctx, call.Key, call.InvocationID, provider.Usage{}, true) // nothing served
		return out, err
	}
	g.turns.keep(ctx, key, out.Result)
	g.rates.settle(ctx, call.Key, call.InvocationID, out.Usage, true)
	return out, nil
}

// stream opens call's stream for the client with key; its final answer's
// provider state is kept for the conversation's next turn.
func (g *Gateway) stream(ctx context.Context, call orchestrator.Call, key string) (*keptStream, error) {
	s, err := g.opts.Orchestrator.Stream(ctx, call)
	if err != nil {
		g.rates.settle(ctx, call.Key, call.InvocationID, provider.Usage{}, true) // nothing served
		return nil, err
	}
	var proto provider.Protocol
	if call.Request.Native != nil {
		proto = call.Request.Native.Protocol
	}
	return &keptStream{Stream: s, proto: proto, keep: func(res *provider.Result) {
		g.turns.keep(ctx, key, res)
		g.rates.settle(ctx, call.Key, call.InvocationID, res.Usage, true)
	}, end: func() {
		// A stream that ended before its final answer keeps its estimate.
		g.rates.settle(ctx, call.Key, call.InvocationID, provider.Usage{}, false)
	}}, nil
}

// keptStream is an orchestrator stream whose final answer is kept.
type keptStream struct {
	*orchestrator.Stream
	// proto is the protocol the client speaks, when it is a provider's.
	proto provider.Protocol
	keep  func(*provider.Result)
	end   func()
}

func (s *keptStream) Recv() (provider.Chunk, error) {
	c, err := s.Stream.Recv()
	if err == nil && c.Final && c.Result != nil {
		s.keep(c.Result)
	}
	return c, err
}

func (s *keptStream) Close() error {
	s.end()
	return s.Stream.Close()
}
