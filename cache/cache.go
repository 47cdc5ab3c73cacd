package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// DefaultTTL is how long an answer is kept when Options.TTL is zero: the
// spec's 24 hours.
const DefaultTTL = 24 * time.Hour

// Options configure [New].
type Options struct {
	// TTL is how long an answer is kept. Zero means DefaultTTL.
	TTL time.Duration
	// Now is the clock, for StoredAt and the latency of hits. Default
	// time.Now.
	Now func() time.Time
	// Orphaned, when set, hears about a result whose call completed after
	// every caller waiting for it had given up: it was paid for, and no
	// caller received it, so the ledger can still record the spend. It runs
	// on the goroutine that made the call.
	Orphaned func(key Key, res *provider.Result)
}

// Outcome says what the cache did for one call, for logs and the ledger.
type Outcome struct {
	// Hit is true when the answer came from the store.
	Hit bool
	// Shared is true when the answer came from a concurrent identical call
	// made for another caller.
	Shared bool
	// Saved is what the original call cost, on a hit or a shared answer:
	// the saving to record. SavedUsage is its usage.
	Saved      provider.Money
	SavedUsage provider.Usage
	// StoredAt is when a hit's answer was stored.
	StoredAt time.Time
	// Stored is true when the answer of this call was written to the store.
	Stored bool
	// Uncacheable, when set, says why a fresh answer was not stored (it
	// wraps ErrUncacheable): for example it was cut at max_tokens.
	Uncacheable error
	// StoreErr is a back-end failure (a lookup or a write) that did not fail
	// the call; log it.
	StoreErr error
}

// Cache is the response cache: a [Store] plus the time to live, the rules of
// what is stored, and one call per key at a time within the process. It is
// safe for concurrent use.
type Cache struct {
	store    Store
	ttl      time.Duration
	now      func() time.Time
	orphaned func(Key, *provider.Result)

	mu      sync.Mutex
	flights map[Key]*flight

	joined func(Key) // test hook: called when a caller waits for a flight
	left   func(Key) // test hook: called when a caller gives up its wait
}

// New returns a cache over store.
func New(store Store, opts Options) *Cache {
	c := &Cache{store: store, ttl: opts.TTL, now: opts.Now, orphaned: opts.Orphaned, flights: map[Key]*flight{}}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Get looks key up. On a hit it returns the stored answer with CacheHit
// set, zero Cost and zero Usage, and the original cost and usage in the
// Outcome. On a miss the result is nil. An error means the store failed: it
// is a miss too, and the caller should log the error and go on.
func (c *Cache) Get(ctx context.Context, key Key) (*provider.Result, Outcome, error) {
	start := c.now()
	e, ok, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, Outcome{StoreErr: err}, err
	}
	if !ok {
		return nil, Outcome{}, nil
	}
	// The store's Get returns a copy that is ours to hand out.
	return hitResult(e, c.now().Sub(start)), hitOutcome(&e), nil
}

// Put stores res under key. It refuses (with an error wrapping
// [ErrUncacheable]) a result that is not a finished answer; see the package
// documentation.
func (c *Cache) Put(ctx context.Context, key Key, res *provider.Result) error {
	if key.IsZero() {
		return errors.New("cache: zero key")
	}
	if err := storable(res); err != nil {
		return fmt.Errorf("cache: result not stored: %w", err)
	}
	// The store keeps its own copy.
	return c.store.Put(ctx, key, entryOf(res, c.now()), c.ttl)
}

// Do returns the answer for key: from the store when it is there, otherwise
// from fill, whose result is then stored if it is a finished answer (the
// rules of [Cache.Put]). Errors are never stored.
//
// Concurrent calls with the same key make one call to fill: the first
// starts it and the others wait for it. Exactly one caller receives fill's
// result as is, cost included; the others receive a copy marked CacheHit
// with zero Cost and Usage (Outcome.Shared and Saved say so). When fill
// fails, every waiting caller receives its error.
//
// fill runs on the first caller's goroutine with a context that carries
// that caller's values but not its cancellation or deadline (the adapter
// applies the request's timeout). A caller whose ctx ends gives up its wait
// and gets ctx's error, and the call goes on for the others: a waiting
// caller returns at once, the first caller when fill returns. The call is
// cancelled only when every waiting caller has given up. A panic in fill is
// returned as an error.
//
// A back-end failure never fails Do: it is reported in Outcome.StoreErr and
// the call is made as on a miss.
func (c *Cache) Do(ctx context.Context, key Key, fill func(ctx context.Context) (*provider.Result, error)) (*provider.Result, Outcome, error) {
	if key.IsZero() {
		return nil, Outcome{}, errors.New("cache: zero key")
	}
	start := c.now()
	res, out, err := c.Get(ctx, key)
	if res != nil {
		return res, out, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, Outcome{}, ctxErr
	}
	recheck := err == nil // a failing store is not asked twice

	c.mu.Lock()
	f := c.flights[key]
	var fctx context.Context
	if f == nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		c.flights[key] = f
	}
	f.waiters++
	c.mu.Unlock()
	if c.joined != nil {
		c.joined(key)
	}
	if fctx != nil && !c.lead(ctx, fctx, key, f, fill, recheck) {
		return nil, Outcome{StoreErr: out.StoreErr}, ctx.Err()
	}
	return c.wait(ctx, key, f, start, out.StoreErr)
}

// lead makes f's call, with context fctx, on the first caller's goroutine,
// whose stack the adapter's deep call chain has usually grown already
// (a fresh goroutine would grow its stack again on every miss). fctx
// carries the caller's values but not its cancellation: when the caller's
// ctx ends, it leaves the flight like any waiter (the call is cancelled if
// nobody else waits) and returns ctx's error once the call has ended. It
// reports whether the caller is still waiting for the answer.
func (c *Cache) lead(ctx, fctx context.Context, key Key, f *flight, fill func(context.Context) (*provider.Result, error), recheck bool) bool {
	left := make(chan bool, 1)
	stop := context.AfterFunc(ctx, func() { left <- c.leave(key, f) })
	c.run(fctx, key, f, fill, recheck)
	if stop() {
		return true
	}
	return !<-left
}

// leave takes a waiter whose ctx ended off f before its call ends,
// cancelling the call when nobody else waits. It reports whether it did:
// once the call has ended the answer is there to take.
func (c *Cache) leave(key Key, f *flight) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.ended {
		return false
	}
	if c.left != nil {
		defer c.left(key)
	}
	f.waiters--
	if f.waiters == 0 {
		// Nobody is waiting any more: stop the call, and let the next
		// caller start afresh rather than join a cancelled one.
		if c.flights[key] == f {
			delete(c.flights, key)
		}
		f.cancel()
	}
	return true
}

// flight is one call to fill, shared by the callers waiting for it.
type flight struct {
	done   chan struct{}
	cancel context.CancelFunc

	// Guarded by Cache.mu.
	waiters int
	claimed bool
	ended   bool // done is closed

	// Written before done is closed, read after.
	res   *provider.Result // fill's answer, for the first caller to take it
	snap  *Entry           // res as an entry, copied for the others before res is taken (it may change then)
	entry *Entry           // or the stored answer, found by the re-check
	err   error
	out   Outcome // Stored, Uncacheable, StoreErr
}

// run makes the call for f and publishes the outcome.
func (c *Cache) run(ctx context.Context, key Key, f *flight, fill func(context.Context) (*provider.Result, error), recheck bool) {
	defer f.cancel()
	c.call(ctx, key, f, fill, recheck)

	c.mu.Lock()
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	if f.snap != nil && f.waiters > 1 {
		// Others wait beside the caller who will take res: they get
		// copies of a snapshot made now, before res is handed out and
		// may change. No waiter joins once the flight has ended.
		snap := f.snap.Clone()
		f.snap = &snap
	}
	orphan := f.waiters == 0 && f.res != nil
	f.ended = true
	close(f.done)
	c.mu.Unlock()
	if orphan && c.orphaned != nil {
		c.orphaned(key, f.res)
	}
}

func (c *Cache) call(ctx context.Context, key Key, f *flight, fill func(context.Context) (*provider.Result, error), recheck bool) {
	// Another flight for this key may have stored its answer between this
	// caller's lookup and the start of this flight.
	if recheck {
		e, ok, err := c.store.Get(ctx, key)
		if ok {
			f.entry = &e
			return
		}
		f.out.StoreErr = err
	}
	res, err := safeFill(ctx, fill)
	if err != nil {
		f.err = err
		return
	}
	if res == nil {
		f.err = errors.New("cache: fill returned neither a result nor an error")
		return
	}
	// e shares res's memory until run copies it for the other waiters
	// (when there are any); the store keeps its own copy.
	e := entryOf(res, c.now())
	f.res, f.snap = res, &e
	if err := storable(res); err != nil {
		f.out.Uncacheable = fmt.Errorf("cache: result not stored: %w", err)
		return
	}
	// The answer is paid for: store it even if every caller has gone.
	if err := c.put(context.WithoutCancel(ctx), key, e); err != nil {
		f.out.StoreErr = errors.Join(f.out.StoreErr, err)
		return
	}
	f.out.Stored = true
}

// put stores snap, the flight's snapshot of an answer.
func (c *Cache) put(ctx context.Context, key Key, snap Entry) error {
	return c.store.Put(ctx, key, snap, c.ttl)
}

func safeFill(ctx context.Context, fill func(context.Context) (*provider.Result, error)) (res *provider.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("cache: fill panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fill(ctx)
}

// wait waits for f or for ctx, and shapes what this caller receives.
func (c *Cache) wait(ctx context.Context, key Key, f *flight, start time.Time, lookupErr error) (*provider.Result, Outcome, error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		if c.leave(key, f) {
			return nil, Outcome{StoreErr: lookupErr}, ctx.Err()
		}
		// The answer is already there: take it.
	}

	c.mu.Lock()
	f.waiters--
	first := f.res != nil && !f.claimed
	if first {
		f.claimed = true
	}
	c.mu.Unlock()

	out := f.out
	out.StoreErr = errors.Join(lookupErr, out.StoreErr)
	switch {
	case f.err != nil:
		return nil, out, f.err
	case f.entry != nil:
		hit := hitOutcome(f.entry)
		hit.StoreErr = out.StoreErr
		return hitResult(f.entry.Clone(), c.now().Sub(start)), hit, nil
	case first:
		return f.res, out, nil
	default:
		out.Shared = true
		out.Saved, out.SavedUsage = f.snap.Cost, f.snap.Usage
		return hitResult(f.snap.Clone(), c.now().Sub(start)), out, nil
	}
}

func hitOutcome(e *Entry) Outcome {
	return Outcome{Hit: true, Saved: e.Cost, SavedUsage: e.Usage, StoredAt: e.StoredAt}
}
