package cache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/cache/cachetest"
	"github.com/cortexbuild/cortexbuild/provider"
)

func sampleResult() *provider.Result {
	call := provider.ToolCall{ID: "toolu_9", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}
	return &provider.Result{
		Content:   "Here is the summary.",
		ToolCalls: []provider.ToolCall{call},
		Parts: []provider.Part{
			{Type: provider.PartReasoning, Text: "hmm", Meta: provider.Metadata{"anthropic.signature": json.RawMessage(`"s"`)}},
			{Type: provider.PartText, Text: "Here is the summary."},
			{Type: provider.PartToolCall, ToolCall: &call},
		},
		Usage:         provider.Usage{InputTokens: 5000, OutputTokens: 700, CacheReadTokens: 4000},
		Cost:          provider.MustMoney("0.0123"),
		Latency:       2 * time.Second,
		Provider:      "anthropic-main",
		Model:         "claude-haiku-4-5",
		StopReason:    provider.StopToolUse,
		RawStopReason: "tool_use",
		RequestID:     "req_1",
	}
}

func newMemoryCache(clock *cachetest.Clock) (*cache.Cache, *cache.Memory) {
	m := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
	return cache.New(m, cache.Options{Now: clock.Now}), m
}

func TestHitIsFreeAndReportsTheSaving(t *testing.T) {
	ctx := context.Background()
	clock := new(cachetest.Clock)
	c, _ := newMemoryCache(clock)
	key := mustKey(t, baseScope(), baseRequest())
	orig := sampleResult()
	if err := c.Put(ctx, key, orig); err != nil {
		t.Fatal(err)
	}
	stored := clock.Now()
	clock.Advance(time.Minute)

	got, out, err := c.Get(ctx, key)
	if err != nil || got == nil {
		t.Fatalf("Get = %v, %v; want a hit", got, err)
	}
	want := *sampleResult()
	want.CacheHit, want.Cost, want.Usage, want.Latency = true, 0, provider.Usage{}, 0
	assertResult(t, got, &want)
	if !out.Hit || out.Shared || out.Saved != orig.Cost || out.SavedUsage != orig.Usage || !out.StoredAt.Equal(stored) {
		t.Errorf("outcome = %+v; want a hit saving %v and usage %+v, stored at %v", out, orig.Cost, orig.Usage, stored)
	}

	// The hit is the caller's own copy.
	got.ToolCalls[0].Arguments[2] = 'X'
	got.Parts[0].Meta["anthropic.signature"][1] = 'X'
	again, _, _ := c.Get(ctx, key)
	assertResult(t, again, &want)
	// And the stored answer did not share memory with what was put.
	orig.Parts[1].Text = "changed"
	again, _, _ = c.Get(ctx, key)
	assertResult(t, again, &want)
}

func assertResult(t *testing.T, got, want *provider.Result) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("result:\n got %s\nwant %s", g, w)
	}
}

func TestPutStoresOnlyFinishedAnswers(t *testing.T) {
	ctx := context.Background()
	key := mustKey(t, baseScope(), baseRequest())
	for _, tc := range []struct {
		stop   provider.StopReason
		stored bool
	}{
		{provider.StopEndTurn, true},
		{provider.StopToolUse, true},
		{provider.StopSequence, true},
		{provider.StopMaxTokens, false},
		{provider.StopContextWindow, false},
		{provider.StopPause, false},
		{provider.StopContentFilter, false},
		{provider.StopRefusal, false},
		{provider.StopOther, false},
		{"", false},
	} {
		t.Run(string(tc.stop), func(t *testing.T) {
			c, m := newMemoryCache(new(cachetest.Clock))
			res := sampleResult()
			res.StopReason = tc.stop
			err := c.Put(ctx, key, res)
			if tc.stored != (err == nil) {
				t.Fatalf("Put = %v; want stored %v", err, tc.stored)
			}
			if !tc.stored && !errors.Is(err, cache.ErrUncacheable) {
				t.Fatalf("Put error %v does not wrap ErrUncacheable", err)
			}
			if m.Len() != map[bool]int{true: 1, false: 0}[tc.stored] {
				t.Fatalf("store holds %d entries", m.Len())
			}

			// Do returns the answer either way, and says whether it stored it.
			c2, m2 := newMemoryCache(new(cachetest.Clock))
			got, out, err := c2.Do(ctx, key, func(context.Context) (*provider.Result, error) { return res, nil })
			if err != nil || got != res || out.Stored != tc.stored || (out.Uncacheable != nil) == tc.stored || m2.Len() != map[bool]int{true: 1, false: 0}[tc.stored] {
				t.Fatalf("Do = %p, %+v, %v; want the fill's result, stored %v", got, out, err, tc.stored)
			}
		})
	}
	c, _ := newMemoryCache(new(cachetest.Clock))
	if err := c.Put(ctx, key, nil); !errors.Is(err, cache.ErrUncacheable) {
		t.Errorf("Put(nil) = %v; want ErrUncacheable", err)
	}
	if err := c.Put(ctx, cache.Key{}, sampleResult()); err == nil {
		t.Error("Put with the zero key succeeded")
	}
}

func TestDoMissThenHit(t *testing.T) {
	ctx := context.Background()
	c, _ := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	var fills atomic.Int32
	fill := func(context.Context) (*provider.Result, error) { fills.Add(1); return sampleResult(), nil }

	first, out, err := c.Do(ctx, key, fill)
	if err != nil || first.CacheHit || first.Cost != sampleResult().Cost || out.Hit || out.Shared || !out.Stored || out.Saved != 0 {
		t.Fatalf("first Do = %+v, %+v, %v; want the fresh answer, stored", first, out, err)
	}
	second, out, err := c.Do(ctx, key, fill)
	if err != nil || !second.CacheHit || second.Cost != 0 || !out.Hit || out.Saved != sampleResult().Cost {
		t.Fatalf("second Do = %+v, %+v, %v; want a free hit saving the original cost", second, out, err)
	}
	if n := fills.Load(); n != 1 {
		t.Fatalf("fill ran %d times; want 1", n)
	}
}

// The store keeps the cache's own snapshot of an answer without copying
// it again, so nothing the first caller does to its result may reach it.
func TestDoStoredAnswerIsNotTheCallersResult(t *testing.T) {
	ctx := context.Background()
	c, _ := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	fill := func(context.Context) (*provider.Result, error) {
		r := sampleResult()
		r.Native = &provider.NativeReply{Status: 200, Header: map[string][]string{"Request-Id": {"req_1"}}, Body: []byte(`{"id":"msg_1"}`)}
		return r, nil
	}
	first, _, err := c.Do(ctx, key, fill)
	if err != nil {
		t.Fatal(err)
	}
	first.Content = "changed"
	first.Parts[0].Text = "changed"
	first.Parts[0].Meta["anthropic.signature"] = json.RawMessage(`"x"`)
	first.ToolCalls[0].Arguments[2] = 'X'
	first.Native.Body[2] = 'X'
	first.Native.Header.Set("Request-Id", "changed")

	hit, out, err := c.Do(ctx, key, fill)
	if err != nil || !out.Hit {
		t.Fatalf("second Do: %+v, %v; want a hit", out, err)
	}
	if hit.Content != "Here is the summary." || hit.Parts[0].Text != "hmm" ||
		string(hit.Parts[0].Meta["anthropic.signature"]) != `"s"` ||
		string(hit.ToolCalls[0].Arguments) != `{"path":"a.go"}` ||
		string(hit.Native.Body) != `{"id":"msg_1"}` || hit.Native.Header.Get("Request-Id") != "req_1" {
		t.Fatalf("the stored answer changed with the first caller's result: %+v, native %q %v", hit, hit.Native.Body, hit.Native.Header)
	}
}

func TestDoIsolatesProjects(t *testing.T) {
	ctx := context.Background()
	c, _ := newMemoryCache(new(cachetest.Clock))
	var fills atomic.Int32
	fill := func(project string) func(context.Context) (*provider.Result, error) {
		return func(context.Context) (*provider.Result, error) {
			fills.Add(1)
			r := sampleResult()
			r.Content = "answer for " + project
			return r, nil
		}
	}
	for _, project := range []string{"proj-a", "proj-b", "proj-a", "proj-b"} {
		s := baseScope()
		s.Project = project
		res, _, err := c.Do(ctx, mustKey(t, s, baseRequest()), fill(project))
		if err != nil || res.Content != "answer for "+project {
			t.Fatalf("project %s got %q, %v", project, res.Content, err)
		}
	}
	if n := fills.Load(); n != 2 {
		t.Fatalf("fill ran %d times; want once per project", n)
	}
}

// joinCounter releases fills once n callers wait for the flight.
func joinCounter(c *cache.Cache, n int) (all <-chan struct{}) {
	ch := make(chan struct{})
	var joined atomic.Int32
	cache.SetJoinHook(c, func(cache.Key) {
		if joined.Add(1) == int32(n) {
			close(ch)
		}
	})
	return ch
}

func TestDoConcurrentMissesMakeOneCall(t *testing.T) {
	const n = 50
	ctx := context.Background()
	c, m := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	allWaiting := joinCounter(c, n)
	var fills atomic.Int32
	fill := func(context.Context) (*provider.Result, error) {
		fills.Add(1)
		<-allWaiting
		return sampleResult(), nil
	}

	type reply struct {
		res *provider.Result
		out cache.Outcome
		err error
	}
	replies := make(chan reply, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, out, err := c.Do(ctx, key, fill)
			replies <- reply{res, out, err}
		})
	}
	wg.Wait()
	close(replies)

	if got := fills.Load(); got != 1 {
		t.Fatalf("%d concurrent identical misses made %d calls; want 1", n, got)
	}
	var paid, shared int
	for r := range replies {
		switch {
		case r.err != nil:
			t.Fatalf("Do: %v", r.err)
		case r.out.Shared && r.res.CacheHit && r.res.Cost == 0 && r.res.Usage == (provider.Usage{}) && r.out.Saved == sampleResult().Cost:
			shared++
		case !r.out.Shared && !r.res.CacheHit && r.res.Cost == sampleResult().Cost && r.out.Stored:
			paid++
		default:
			t.Fatalf("unexpected reply %+v, %+v", r.res, r.out)
		}
		if r.res.Content != sampleResult().Content {
			t.Fatalf("content %q", r.res.Content)
		}
	}
	if paid != 1 || shared != n-1 {
		t.Fatalf("%d callers paid and %d shared; want 1 and %d (the cost is recorded once)", paid, shared, n-1)
	}
	if m.Len() != 1 {
		t.Fatalf("store holds %d entries; want 1", m.Len())
	}
}

// TestDoSharedCopiesAreNotThePayersResult: the caller who receives the
// answer as is may change it at once; the callers who share it get
// copies made before it was handed out (the race detector also sees any
// read of the payer's memory by a sharing caller).
func TestDoSharedCopiesAreNotThePayersResult(t *testing.T) {
	const n = 8
	ctx := context.Background()
	c, _ := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	allWaiting := joinCounter(c, n)
	fill := func(context.Context) (*provider.Result, error) {
		<-allWaiting
		r := sampleResult()
		r.Native = &provider.NativeReply{Status: 200, Header: map[string][]string{"Request-Id": {"req_1"}}, Body: []byte(`{"id":"msg_1"}`)}
		return r, nil
	}
	shared := make(chan *provider.Result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, out, err := c.Do(ctx, key, fill)
			if err != nil {
				t.Error(err)
				return
			}
			if !out.Shared {
				// The payer changes what it got, as a caller may.
				res.Content = "changed"
				res.ToolCalls[0].Arguments[2] = 'X'
				res.Native.Body[2] = 'X'
				res.Native.Header["Request-Id"][0] = "changed"
				return
			}
			shared <- res
		})
	}
	wg.Wait()
	close(shared)
	count := 0
	for r := range shared {
		count++
		if r.Content != "Here is the summary." || string(r.ToolCalls[0].Arguments) != `{"path":"a.go"}` ||
			string(r.Native.Body) != `{"id":"msg_1"}` || r.Native.Header.Get("Request-Id") != "req_1" {
			t.Fatalf("a sharing caller's copy changed with the payer's result: %+v, native %q %v", r, r.Native.Body, r.Native.Header)
		}
	}
	if count != n-1 {
		t.Fatalf("%d callers shared the answer; want %d", count, n-1)
	}
}

func TestDoSharesErrorsAndNeverStoresThem(t *testing.T) {
	const n = 50
	ctx := context.Background()
	c, m := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	allWaiting := joinCounter(c, n)
	boom := &provider.Error{Kind: provider.KindServer, Diagnostic: provider.Diagnostic{Message: "overloaded"}}
	var fills atomic.Int32
	fill := func(context.Context) (*provider.Result, error) {
		if fills.Add(1) == 1 {
			<-allWaiting
			return nil, boom
		}
		return sampleResult(), nil
	}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, _, err := c.Do(ctx, key, fill)
			if res != nil {
				err = errors.New("a result came with the error")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("a waiter got %v; want the fill's error", err)
		}
	}
	if got := fills.Load(); got != 1 || m.Len() != 0 {
		t.Fatalf("fills = %d, entries = %d; want one call and nothing stored", got, m.Len())
	}
	// The error was not cached: the next call tries again.
	res, _, err := c.Do(ctx, key, fill)
	if err != nil || res == nil || fills.Load() != 2 {
		t.Fatalf("Do after a failure = %v, %v with %d fills; want a new call", res, err, fills.Load())
	}
}

func TestDoCancelledWaiterLeavesTheCallRunning(t *testing.T) {
	// Either caller gives up: the one that waits returns at once, the one
	// making the call (the first) when the call returns; neither stops the
	// call for the other, who receives the paid answer.
	for _, quitter := range []string{"waiting", "calling"} {
		t.Run(quitter, func(t *testing.T) {
			c, _ := newMemoryCache(new(cachetest.Clock))
			key := mustKey(t, baseScope(), baseRequest())
			leaderIn := joinCounter(c, 1)
			release := make(chan struct{})
			fillCtxErr := make(chan error, 1)
			var calls atomic.Int32
			fill := func(ctx context.Context) (*provider.Result, error) {
				calls.Add(1)
				<-release
				fillCtxErr <- ctx.Err()
				return sampleResult(), nil
			}
			type answer struct {
				res *provider.Result
				err error
			}
			do := func(ctx context.Context, to chan<- answer) {
				res, _, err := c.Do(ctx, key, fill)
				to <- answer{res, err}
			}
			leaderCtx, cancelLeader := context.WithCancel(context.Background())
			defer cancelLeader()
			leader := make(chan answer, 1)
			go do(leaderCtx, leader)
			<-leaderIn
			otherIn := joinCounter(c, 1)
			otherCtx, cancelOther := context.WithCancel(context.Background())
			defer cancelOther()
			other := make(chan answer, 1)
			go do(otherCtx, other)
			<-otherIn

			stays, quits, cancel := other, leader, cancelLeader
			if quitter == "waiting" {
				stays, quits, cancel = leader, other, cancelOther
				cancel()
				// The waiting caller returns while the call is still blocked.
				if a := <-quits; !errors.Is(a.err, context.Canceled) || provider.KindOf(a.err) != provider.KindCanceled {
					t.Fatalf("cancelled caller got %v; want context.Canceled", a.err)
				}
				close(release)
			} else {
				gone := make(chan struct{})
				cache.SetLeaveHook(c, func(cache.Key) { close(gone) })
				cancel()
				<-gone
				close(release)
				if a := <-quits; !errors.Is(a.err, context.Canceled) || a.res != nil {
					t.Fatalf("cancelled first caller got %v, %v; want context.Canceled and no answer", a.res, a.err)
				}
			}
			if err := <-fillCtxErr; err != nil {
				t.Fatalf("the call's context ended (%v) when one of two callers gave up", err)
			}
			a := <-stays
			// The caller that stayed is the only one to receive the answer: it pays.
			if a.err != nil || a.res == nil || a.res.CacheHit || a.res.Cost != sampleResult().Cost {
				t.Fatalf("remaining caller got %+v, %v; want the paid answer", a.res, a.err)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d calls; want 1", n)
			}
		})
	}
}

func TestDoLastWaiterCancelStopsTheCall(t *testing.T) {
	var orphans atomic.Int32
	m := cache.NewMemory(cache.MemoryOptions{})
	c := cache.New(m, cache.Options{Orphaned: func(cache.Key, *provider.Result) { orphans.Add(1) }})
	key := mustKey(t, baseScope(), baseRequest())
	allWaiting := joinCounter(c, 1)
	stopped := make(chan error, 1)
	fill := func(ctx context.Context) (*provider.Result, error) {
		<-ctx.Done()
		stopped <- ctx.Err()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Do(ctx, key, fill)
		done <- err
	}()
	<-allWaiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v; want context.Canceled", err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call's context ended with %v; want it cancelled once nobody waits", err)
	}
	// A later caller starts a fresh call rather than joining the cancelled one.
	res, _, err := c.Do(context.Background(), key, func(context.Context) (*provider.Result, error) { return sampleResult(), nil })
	if err != nil || res == nil || res.CacheHit {
		t.Fatalf("Do after the abandoned call = %v, %v", res, err)
	}
	if orphans.Load() != 0 {
		t.Fatalf("an abandoned call that failed was reported as orphaned")
	}
}

func TestDoReportsOrphanedResults(t *testing.T) {
	orphaned := make(chan *provider.Result, 1)
	m := cache.NewMemory(cache.MemoryOptions{})
	c := cache.New(m, cache.Options{Orphaned: func(_ cache.Key, r *provider.Result) { orphaned <- r }})
	key := mustKey(t, baseScope(), baseRequest())
	allWaiting := joinCounter(c, 1)
	release := make(chan struct{})
	fill := func(ctx context.Context) (*provider.Result, error) {
		<-release // the provider answers although the caller has gone
		return sampleResult(), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Do(ctx, key, fill)
		done <- err
	}()
	<-allWaiting
	gone := make(chan struct{})
	cache.SetLeaveHook(c, func(cache.Key) { close(gone) })
	cancel()
	<-gone
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v; want context.Canceled", err)
	}
	if r := <-orphaned; r.Cost != sampleResult().Cost {
		t.Fatalf("orphaned result cost %v", r.Cost)
	}
	// It was paid for, so it was stored.
	if res, _, _ := c.Get(context.Background(), key); res == nil {
		t.Fatal("the orphaned answer was not stored")
	}
}

func TestDoPanicIsAnError(t *testing.T) {
	c, m := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	_, _, err := c.Do(context.Background(), key, func(context.Context) (*provider.Result, error) { panic("adapter bug") })
	if err == nil || !strings.Contains(err.Error(), "adapter bug") || m.Len() != 0 {
		t.Fatalf("Do with a panicking fill = %v; want an error naming the panic, nothing stored", err)
	}
	_, _, err = c.Do(context.Background(), key, func(context.Context) (*provider.Result, error) { return nil, nil })
	if err == nil {
		t.Fatal("Do with a fill returning nothing succeeded")
	}
}

// failingStore fails every operation.
type failingStore struct{ err error }

func (f failingStore) Get(context.Context, cache.Key) (cache.Entry, bool, error) {
	return cachetest.SampleEntry("must not be used"), true, f.err
}

func (f failingStore) Put(context.Context, cache.Key, cache.Entry, time.Duration) error {
	return f.err
}

func TestStoreFailureIsAMissNeverAHit(t *testing.T) {
	ctx := context.Background()
	down := errors.New("connection refused")
	c := cache.New(failingStore{down}, cache.Options{})
	key := mustKey(t, baseScope(), baseRequest())

	res, out, err := c.Get(ctx, key)
	if res != nil || !errors.Is(err, down) || !errors.Is(out.StoreErr, down) {
		t.Fatalf("Get on a failing store = %v, %+v, %v; want a miss with the error", res, out, err)
	}
	var fills atomic.Int32
	res, out, err = c.Do(ctx, key, func(context.Context) (*provider.Result, error) { fills.Add(1); return sampleResult(), nil })
	if err != nil || res == nil || res.CacheHit || fills.Load() != 1 || out.Stored || !errors.Is(out.StoreErr, down) {
		t.Fatalf("Do on a failing store = %+v, %+v, %v; want the fresh answer with the store error reported", res, out, err)
	}
}

func TestDoRejectsZeroKeyAndDeadContext(t *testing.T) {
	c, _ := newMemoryCache(new(cachetest.Clock))
	fill := func(context.Context) (*provider.Result, error) { t.Error("fill called"); return nil, nil }
	if _, _, err := c.Do(context.Background(), cache.Key{}, fill); err == nil {
		t.Error("Do with the zero key succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, out, err := c.Do(ctx, mustKey(t, baseScope(), baseRequest()), fill)
	if !errors.Is(err, context.Canceled) || out.StoreErr != nil {
		t.Errorf("Do with a cancelled context = %+v, %v; want context.Canceled and no store error", out, err)
	}
}

// lateStore misses on its first Get, as if another process stored the
// answer just after this caller looked.
type lateStore struct {
	cache.Store
	gets atomic.Int32
}

func (s *lateStore) Get(ctx context.Context, k cache.Key) (cache.Entry, bool, error) {
	if s.gets.Add(1) == 1 {
		return cache.Entry{}, false, nil
	}
	return s.Store.Get(ctx, k)
}

func TestDoLooksAgainBeforeCalling(t *testing.T) {
	ctx := context.Background()
	mem := cache.NewMemory(cache.MemoryOptions{})
	key := mustKey(t, baseScope(), baseRequest())
	if err := cache.New(mem, cache.Options{}).Put(ctx, key, sampleResult()); err != nil {
		t.Fatal(err)
	}
	c := cache.New(&lateStore{Store: mem}, cache.Options{})
	res, out, err := c.Do(ctx, key, func(context.Context) (*provider.Result, error) {
		t.Error("fill called although the answer was stored")
		return nil, errors.New("unexpected")
	})
	if err != nil || !res.CacheHit || !out.Hit || out.Saved != sampleResult().Cost {
		t.Fatalf("Do = %+v, %+v, %v; want the stored answer", res, out, err)
	}
}

// A miss makes its call on the caller's goroutine: a fresh goroutine per
// miss would grow a new stack through the adapter's deep call chain on
// every call.
func TestDoCallsOnTheCallersGoroutine(t *testing.T) {
	c, _ := newMemoryCache(new(cachetest.Clock))
	key := mustKey(t, baseScope(), baseRequest())
	var stack []byte
	_, _, err := c.Do(context.Background(), key, func(context.Context) (*provider.Result, error) {
		stack = make([]byte, 64<<10)
		stack = stack[:runtime.Stack(stack, false)]
		return sampleResult(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(stack, []byte(".TestDoCallsOnTheCallersGoroutine(")) {
		t.Fatalf("the call ran on another goroutine:\n%s", stack)
	}
}
