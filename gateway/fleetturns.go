package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/provider"
)

// MaxSharedTurnEntry bounds one answer's provider state kept in the shared
// engine (its signatures and thinking blocks); a larger one is kept by the
// replica that served it only.
const MaxSharedTurnEntry = 4 << 20

// turnKeeper keeps provider state between a conversation's turns.
type turnKeeper interface {
	// keep records the provider state of res, an answer to key.
	keep(ctx context.Context, key string, res *provider.Result)
	// restore is [turnState.restore]; local says the shared engine could
	// not be asked, so only this process's state was restored.
	restore(ctx context.Context, key string, req *provider.Request, room int64) (added int64, ok, local bool)
}

// localTurns is the per-process keeper.
type localTurns struct{ *turnState }

func (t localTurns) keep(_ context.Context, key string, res *provider.Result) {
	t.turnState.keep(key, res)
}

func (t localTurns) restore(_ context.Context, key string, req *provider.Request, room int64) (int64, bool, bool) {
	added, ok := t.turnState.restore(key, req, room)
	return added, ok, false
}

// The shared turn state, under prefix+"turn:":
//
//	e:<entry id>  an answer's state (JSON: the client's key id, its tool
//	              call ids, each call's metadata, its signed reasoning
//	              parts), at most MaxSharedTurnEntry bytes;
//	c:<hash>      the entry id of a tool call, by SHA-256 of the key id
//	              and the call id;
//
// both written together with SET … PX the turn state's TTL, so that Redis
// drops them after it (its maxmemory policy bounds their total).
var (
	turnKeep = cache.NewScript(`
for i = 1, #KEYS do
  local v = ARGV[3]
  if i == 1 then v = ARGV[1] end
  redis.call('SET', KEYS[i], v, 'PX', ARGV[2])
end
return 1
`)
	// turnFetch answers, for each call key, its entry, or nil when the call
	// has none or its entry was answered for an earlier key.
	turnFetch = cache.NewScript(`
local out, seen = {}, {}
for i, k in ipairs(KEYS) do
  out[i] = false
  local id = redis.call('GET', k)
  if id and not seen[id] then
    seen[id] = true
    out[i] = redis.call('GET', ARGV[1] .. id)
  end
end
return out
`)
)

// turnFetchBatch is how many call keys one script asks for.
const turnFetchBatch = 500

type sharedTurnEntry struct {
	Key       string                       `json:"k"`
	IDs       []string                     `json:"ids"`
	Calls     map[string]provider.Metadata `json:"calls,omitempty"`
	Reasoning []sharedPart                 `json:"r,omitempty"`
}

type sharedPart struct {
	Text string            `json:"t,omitempty"`
	Meta provider.Metadata `json:"m"`
}

// sharedTurns keeps the state in the shared engine, so that the next turn
// finds it whichever replica serves it. When the engine cannot be reached,
// an answer's state is kept by this process (as without the engine), and a
// turn is restored from this process's state alone.
type sharedTurns struct {
	shared Shared
	prefix string
	ttl    time.Duration
	local  *turnState
	log    *slog.Logger

	mu   sync.Mutex
	down bool
}

func newSharedTurns(shared Shared, prefix string, ttl time.Duration, local *turnState, log *slog.Logger) *sharedTurns {
	return &sharedTurns{shared: shared, prefix: prefix + "turn:", ttl: ttl, local: local, log: log}
}

func (t *sharedTurns) callKey(key, callID string) string {
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(callID))
	return t.prefix + "c:" + hex.EncodeToString(h.Sum(nil))
}

func (t *sharedTurns) keep(ctx context.Context, key string, res *provider.Result) {
	e := newTurnEntry(key, res)
	if e == nil {
		return
	}
	v := sharedTurnEntry{Key: key, IDs: e.ids, Calls: e.calls}
	for _, p := range e.reasoning {
		v.Reasoning = append(v.Reasoning, sharedPart{Text: p.Text, Meta: p.Meta})
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > MaxSharedTurnEntry {
		t.local.keep(key, res)
		return
	}
	id := make([]byte, 16)
	rand.Read(id)
	eid := hex.EncodeToString(id)
	keys := []string{t.prefix + "e:" + eid}
	for _, c := range e.ids {
		keys = append(keys, t.callKey(key, c))
	}
	ms := int64((t.ttl + time.Millisecond - 1) / time.Millisecond)
	if _, err := t.shared.Eval(context.WithoutCancel(ctx), turnKeep, keys, b, ms, eid); err != nil {
		t.unreachable(err)
		t.local.keep(key, res)
		return
	}
	t.reachable()
}

func (t *sharedTurns) restore(ctx context.Context, key string, req *provider.Request, room int64) (int64, bool, bool) {
	var calls []string
	for _, m := range req.Messages {
		if m.Role != provider.RoleAssistant {
			continue
		}
		for _, p := range m.Parts {
			if p.Type == provider.PartToolCall && p.ToolCall != nil {
				calls = append(calls, p.ToolCall.ID)
			}
		}
	}
	if len(calls) == 0 {
		return 0, true, false
	}
	found, err := t.fetch(ctx, key, calls)
	if err != nil {
		if ctx.Err() == nil {
			t.unreachable(err)
		}
		added, ok := t.local.restore(key, req, room)
		return added, ok, true
	}
	t.reachable()
	local := func(*provider.Message) *turnEntry { return nil }
	if t.local.size() > 0 {
		// What this process kept while the engine was unreachable.
		t.local.mu.Lock()
		defer t.local.mu.Unlock()
		now := t.local.now()
		local = func(m *provider.Message) *turnEntry { return t.local.entryLocked(key, m, now) }
	}
	added, ok := restoreTurns(req, room, func(m *provider.Message) *turnEntry {
		for _, p := range m.Parts {
			if p.Type == provider.PartToolCall && p.ToolCall != nil {
				if e := found[p.ToolCall.ID]; e != nil {
					return e
				}
			}
		}
		return local(m)
	})
	return added, ok, false
}

// fetch gives the kept entries of calls of key, by call id (each entry
// under every one of its call ids).
func (t *sharedTurns) fetch(ctx context.Context, key string, calls []string) (map[string]*turnEntry, error) {
	found := map[string]*turnEntry{}
	for len(calls) > 0 {
		batch := calls[:min(len(calls), turnFetchBatch)]
		calls = calls[len(batch):]
		keys := make([]string, len(batch))
		for i, c := range batch {
			keys[i] = t.callKey(key, c)
		}
		reply, err := t.shared.Eval(ctx, turnFetch, keys, t.prefix+"e:")
		if err != nil {
			return nil, err
		}
		vals, ok := reply.([]any)
		if !ok || len(vals) != len(batch) {
			return nil, fmt.Errorf("%w: the turn state script answered %T", cache.ErrRedisReply, reply)
		}
		for _, x := range vals {
			s, ok := x.(string)
			if !ok {
				continue
			}
			var v sharedTurnEntry
			if err := json.Unmarshal([]byte(s), &v); err != nil || v.Key != key {
				// A value that does not decode, or is another key's, is
				// not restored: the turn goes as the client sent it.
				continue
			}
			e := &turnEntry{key: key, ids: v.IDs, calls: v.Calls}
			for _, p := range v.Reasoning {
				e.reasoning = append(e.reasoning, provider.Part{Type: provider.PartReasoning, Text: p.Text, Meta: p.Meta})
			}
			for _, id := range v.IDs {
				if _, dup := found[id]; !dup {
					found[id] = e
				}
			}
		}
	}
	return found, nil
}

func (t *sharedTurns) unreachable(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if errors.Is(err, cache.ErrRedisReply) {
		t.log.Error("gateway: the shared turn state refused a script", "error", err.Error())
	}
	if !t.down {
		t.down = true
		t.log.Warn("gateway: the shared turn state (Redis) is unreachable: answers' provider state is kept by the replica that served them, and a turn another replica serves goes without it", "error", err.Error())
	}
}

func (t *sharedTurns) reachable() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.down {
		t.down = false
		t.log.Info("gateway: the shared turn state (Redis) answers again")
	}
}
