package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Shared is the engine the replicas of a fleet keep their fleet-wide state
// in: each key's request and token counters and the provider state
// between turns. *cache.Redis implements it (cache.backend: redis).
type Shared interface {
	// Eval runs a script atomically on the server.
	Eval(ctx context.Context, s *cache.Script, keys []string, args ...any) (any, error)
}

// DefaultSharedPrefix starts every key the gateway writes in the shared
// engine, followed by the project in braces: "cortexbuild:gateway:v1:{demo}:".
const DefaultSharedPrefix = "cortexbuild:gateway:v1:"

// RateHold bounds how long a call's token estimate stays reserved in the
// shared counters: a replica killed with calls in flight holds their room
// at most this long.
const RateHold = 10 * time.Minute

// rateLimiter counts each key's requests and tokens per minute.
type rateLimiter interface {
	// admit counts a request of key k, the call inv, or refuses it. local
	// says it was counted by this process alone, the shared counters being
	// unreachable.
	admit(ctx context.Context, k *Key, inv string, estimate func() int64) (f *failure, local bool)
	// settle ends the reservation of call inv of key id.
	settle(ctx context.Context, id, inv string, u provider.Usage, used bool)
}

// localRates is the per-process limiter.
type localRates struct{ *keyRates }

func (r localRates) admit(_ context.Context, k *Key, inv string, estimate func() int64) (*failure, bool) {
	return r.keyRates.admit(k, inv, estimate), false
}

func (r localRates) settle(_ context.Context, id, inv string, u provider.Usage, used bool) {
	r.keyRates.settle(id, inv, u, used)
}

// The shared counters of a key, under prefix+"rate:"+id+":":
//
//	req   sorted set: one member per admitted request (its invocation id),
//	      scored by its time in ms; members older than the window are
//	      dropped; the key expires a window after the last write.
//	tok   sorted set: one member "<n>:<invocation>" per settled call, scored
//	      by its time; same window and expiry.
//	held  sorted set: one member "<n>:<invocation>" per call in flight,
//	      scored by when its reservation lapses (now + RateHold); expires
//	      RateHold after the last write.
//	sum   hash: tok and held, the sums of the two sets, kept with them so
//	      that no call sums a set; reset when its set is empty; expires
//	      with the longer of the two.
//
// rateClean is the scripts' common start: it drops what is out of the
// window or lapsed, keeping the sums.
const rateClean = `
local now, win, hold = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local function drop(set, field, upto)
  local gone = redis.call('ZRANGEBYSCORE', set, '-inf', upto)
  if #gone > 0 then
    local n = 0
    for _, m in ipairs(gone) do n = n + tonumber(string.match(m, '^(%d+):')) end
    redis.call('ZREMRANGEBYSCORE', set, '-inf', upto)
    redis.call('HINCRBY', KEYS[4], field, -n)
  end
  if redis.call('ZCARD', set) == 0 then redis.call('HSET', KEYS[4], field, 0) end
  return math.max(0, tonumber(redis.call('HGET', KEYS[4], field) or '0'))
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local total = drop(KEYS[2], 'tok', now - win)
local reserved = drop(KEYS[3], 'held', now)
`

// rateAdmit admits a request (ARGV: now, window, hold, rpm, tpm,
// invocation, estimate) or refuses it: {0} admitted, {1, wait ms} over
// the rpm, {2, wait ms, used, reserved} over the tpm.
var rateAdmit = cache.NewScript(rateClean + `
local rpm, tpm, inv, est = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]
if rpm > 0 then
  local n = redis.call('ZCARD', KEYS[1])
  if n >= rpm then
    local at = redis.call('ZRANGE', KEYS[1], n - rpm, n - rpm, 'WITHSCORES')
    return {1, tonumber(at[2]) + win - now}
  end
end
if tpm > 0 and total + reserved >= tpm then
  local left, wait = total + reserved, 1000
  local ms = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  for i = 1, #ms, 2 do
    left = left - tonumber(string.match(ms[i], '^(%d+):'))
    if left < tpm then wait = tonumber(ms[i + 1]) + win - now break end
  end
  return {2, wait, total, reserved}
end
redis.call('ZADD', KEYS[1], now, inv)
redis.call('PEXPIRE', KEYS[1], win)
if tpm > 0 then
  redis.call('ZADD', KEYS[3], now + hold, est .. ':' .. inv)
  redis.call('HINCRBY', KEYS[4], 'held', tonumber(est))
  redis.call('PEXPIRE', KEYS[3], hold)
end
redis.call('PEXPIRE', KEYS[4], math.max(win, hold))
return {0}
`)

// rateSettle ends a reservation (ARGV: now, window, hold, invocation, the
// estimate reserved or 0, the tokens to count) and counts the tokens;
// it returns 1 when the reservation was still held.
var rateSettle = cache.NewScript(rateClean + `
local inv, est, n = ARGV[4], ARGV[5], ARGV[6]
local removed = 0
if tonumber(est) > 0 then removed = redis.call('ZREM', KEYS[3], est .. ':' .. inv) end
if removed == 1 then redis.call('HINCRBY', KEYS[4], 'held', -tonumber(est)) end
if tonumber(n) > 0 then
  redis.call('ZADD', KEYS[2], now, n .. ':' .. inv)
  redis.call('HINCRBY', KEYS[4], 'tok', n)
  redis.call('PEXPIRE', KEYS[2], win)
  redis.call('PEXPIRE', KEYS[4], math.max(win, hold))
end
return removed
`)

// sharedRates counts in the shared engine, so that a key's limits hold
// across every replica; when the engine cannot be reached, the call is
// counted by this process's own counters instead (and said so), and the
// next call tries the engine again.
type sharedRates struct {
	shared Shared
	prefix string
	local  *keyRates
	now    func() time.Time
	log    *slog.Logger

	mu sync.Mutex
	// calls are the admitted calls of limited keys, by invocation id.
	calls map[string]sharedCall
	// down is set while the engine is unreachable, for the log.
	down bool
}

type sharedCall struct {
	key    string
	n      int64 // the estimate reserved; 0 without a token limit
	shared bool  // counted in the shared engine
}

func newSharedRates(shared Shared, prefix string, local *keyRates, now func() time.Time, log *slog.Logger) *sharedRates {
	return &sharedRates{shared: shared, prefix: prefix, local: local, now: now, log: log, calls: map[string]sharedCall{}}
}

func (r *sharedRates) keys(id string) []string {
	p := r.prefix + "rate:" + id + ":"
	return []string{p + "req", p + "tok", p + "held", p + "sum"}
}

func (r *sharedRates) admit(ctx context.Context, k *Key, inv string, estimate func() int64) (*failure, bool) {
	if k == nil || (k.RPM <= 0 && k.TPM <= 0) {
		return nil, false
	}
	var n int64
	if k.TPM > 0 {
		n = max(estimate(), 1)
	}
	now := r.now().UnixMilli()
	reply, err := r.shared.Eval(ctx, rateAdmit, r.keys(k.ID), now, rateWindow.Milliseconds(), RateHold.Milliseconds(), k.RPM, k.TPM, inv, n)
	var v []int64
	if err == nil {
		v, err = ints(reply)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.unreachable(err)
		}
		f := r.local.admit(k, inv, func() int64 { return n })
		if f == nil {
			r.mu.Lock()
			r.calls[inv] = sharedCall{key: k.ID, n: n}
			r.mu.Unlock()
		}
		return f, true
	}
	r.reachable()
	switch v[0] {
	case 0:
		r.mu.Lock()
		r.calls[inv] = sharedCall{key: k.ID, n: n, shared: true}
		r.mu.Unlock()
		return nil, false
	case 1:
		wait := time.Duration(max(v[1], 0)) * time.Millisecond
		f := fail(classRateLimit, "this API key's limit of %d requests per minute is reached (its rpm; 'cortexbuild serve keys update %s --rpm N' changes it): retry in %s", k.RPM, k.ID, roundUp(wait))
		f.typ, f.retryAfter = "requests", wait
		return f, false
	default:
		if len(v) < 4 {
			return fail(classInternal, "the shared rate counters answered %v", v), false
		}
		wait := time.Duration(max(v[1], 0)) * time.Millisecond
		f := fail(classRateLimit, "this API key's limit of %d tokens per minute is reached (its tpm; 'cortexbuild serve keys update %s --tpm N' changes it): %d used in the last minute and %d reserved by its calls in flight; retry in %s", k.TPM, k.ID, v[2], v[3], roundUp(wait))
		f.typ, f.retryAfter = "tokens", wait
		return f, false
	}
}

func (r *sharedRates) settle(ctx context.Context, id, inv string, u provider.Usage, used bool) {
	r.mu.Lock()
	c, ok := r.calls[inv]
	delete(r.calls, inv)
	r.mu.Unlock()
	if !ok || id == "" {
		return // the key has no rate limits, or the call was settled
	}
	if !c.shared {
		r.local.settle(id, inv, u, used)
		return
	}
	n := u.InputTokens + u.OutputTokens
	if !used {
		n = c.n
	}
	// The settlement is made even when the request's context is over: the
	// call was made.
	ctx = context.WithoutCancel(ctx)
	if _, err := r.shared.Eval(ctx, rateSettle, r.keys(id), r.now().UnixMilli(), rateWindow.Milliseconds(), RateHold.Milliseconds(), inv, c.n, max(n, 0)); err != nil {
		// Its reservation lapses RateHold after the call was admitted.
		r.unreachable(err)
	}
}

func (r *sharedRates) unreachable(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(err, cache.ErrRedisReply) {
		r.log.Error("gateway: the shared rate counters refused a script; this process counts the keys' rates itself meanwhile", "error", err.Error())
	}
	if !r.down {
		r.down = true
		r.log.Warn("gateway: the shared rate counters (Redis) are unreachable: each replica counts the keys' rpm and tpm by itself until they answer again", "error", err.Error())
	}
}

func (r *sharedRates) reachable() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.down = false
		r.log.Info("gateway: the shared rate counters (Redis) answer again: the keys' rpm and tpm are counted across the fleet")
	}
}

// ints reads a script's array of integers.
func ints(reply any) ([]int64, error) {
	a, ok := reply.([]any)
	if !ok || len(a) == 0 {
		return nil, fmt.Errorf("%w: the script answered %T, not an array", cache.ErrRedisReply, reply)
	}
	out := make([]int64, len(a))
	for i, x := range a {
		switch v := x.(type) {
		case int64:
			out[i] = v
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: the script answered %q", cache.ErrRedisReply, v)
			}
			out[i] = n
		default:
			return nil, fmt.Errorf("%w: the script answered %T in an array", cache.ErrRedisReply, x)
		}
	}
	return out, nil
}
