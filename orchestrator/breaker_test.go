package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// fakeClock is a settable clock: breaker tests advance it instead of
// sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// breakerWorld is a world whose first choice is anthropic, with one server
// attempt per provider (so each call adds one failure), an injected clock
// and the given breaker settings.
func breakerWorld(t *testing.T, clk *fakeClock, b orchestrator.BreakerSettings, mutate func(*orchestrator.Settings)) *world {
	t.Helper()
	return newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.ServerAttempts, s.Now, s.Breaker = order("anthropic"), 1, clk.Now, b
		if mutate != nil {
			mutate(s)
		}
	})
}

func breakerOf(t *testing.T, w *world, prov string) orchestrator.BreakerState {
	t.Helper()
	for _, b := range w.o.Breakers(context.Background()) {
		if b.Provider == prov {
			return b
		}
	}
	t.Fatalf("no breaker for %s", prov)
	return orchestrator.BreakerState{}
}

func (w *world) notesOf(event string) []orchestrator.Notification {
	w.drain()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []orchestrator.Notification
	for _, n := range w.notes {
		if n.Event == event {
			out = append(out, n)
		}
	}
	return out
}

func candidate(tr orchestrator.Trace, prov string) (orchestrator.Candidate, bool) {
	for _, c := range tr.Candidates {
		if c.Provider == prov {
			return c, true
		}
	}
	return orchestrator.Candidate{}, false
}

func TestBreakerOpensAfterConsecutiveServerFailures(t *testing.T) {
	clk := newClock()
	w := breakerWorld(t, clk, orchestrator.BreakerSettings{}, nil)
	for i := 1; i <= 4; i++ {
		fault(w, "anthropic", provider.KindServer)
		out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
		if err != nil || path(out.Attempts) != "anthropic/claude-sonnet-4-6:server openai/gpt-5-mini:ok" {
			t.Fatalf("call %d: %v %v", i, out, err)
		}
		if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed || b.Failures != i || b.LastError != provider.KindServer {
			t.Fatalf("after %d failures: %+v", i, b)
		}
	}
	if n := w.notesOf("circuit_open"); len(n) != 0 {
		t.Fatalf("opened early: %+v", n)
	}
	fault(w, "anthropic", provider.KindOverloaded)
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	b := breakerOf(t, w, "anthropic")
	if b.State != orchestrator.BreakerOpen || b.Failures != 5 || b.LastError != provider.KindOverloaded || !b.OpenedAt.Equal(clk.Now()) || !b.RetryAt.Equal(clk.Now().Add(30*time.Second)) {
		t.Fatalf("after 5 failures: %+v", b)
	}
	if n := w.notesOf("circuit_open"); len(n) != 1 || n[0].Level != "warning" || n[0].Provider != "anthropic" || !strings.Contains(n[0].Message, "5 consecutive failures") {
		t.Errorf("open notification = %+v", n)
	}
	// Open: the provider is dropped, with the reason in the trace, and
	// nothing reaches it.
	before := len(w.anth.Requests())
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "openai/gpt-5-mini:ok" {
		t.Fatalf("call while open: %v %v", out, err)
	}
	c, _ := candidate(out.Trace, "anthropic")
	if c.Kept || !strings.Contains(c.Reason, "circuit open since 2026-03-02T09:00:00Z") || !strings.Contains(c.Reason, "retry at 2026-03-02T09:00:30Z") {
		t.Errorf("anthropic candidate = %+v\n%s", c, out.Trace.String())
	}
	if n := len(w.anth.Requests()); n != before {
		t.Errorf("an open breaker let %d requests through", n-before)
	}
	// Gemini and openai are untouched.
	if b := breakerOf(t, w, "openai"); b.State != orchestrator.BreakerClosed || b.Failures != 0 {
		t.Errorf("openai breaker = %+v", b)
	}
}

func TestBreakerCountsOnlyProviderFailures(t *testing.T) {
	clk := newClock()
	w := breakerWorld(t, clk, orchestrator.BreakerSettings{}, func(s *orchestrator.Settings) { s.AllowAlternates = true })
	failures := func(n int) {
		t.Helper()
		for range n {
			fault(w, "anthropic", provider.KindServer)
			if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	failures(4)
	// None of these says anything about the provider's health: they
	// neither count nor reset.
	for _, k := range []provider.Kind{provider.KindRateLimit, provider.KindBadRequest, provider.KindQuotaExhausted, provider.KindContextWindowExceeded} {
		fault(w, "anthropic", k)
		_, _ = w.invoke(t, orchestrator.Call{Agent: "builder"})
		clk.Advance(5 * time.Second) // past the rate limit's retry-after
		if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed || b.Failures != 4 {
			t.Fatalf("after %s: %+v", k, b)
		}
	}
	// A success resets the count.
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || out.Attempts[0].Provider != "anthropic" || out.Attempts[0].Outcome != "ok" {
		t.Fatalf("success: %v %v", out, err)
	}
	if b := breakerOf(t, w, "anthropic"); b.Failures != 0 || b.State != orchestrator.BreakerClosed {
		t.Fatalf("after a success: %+v", b)
	}
	failures(4)
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed {
		t.Fatalf("4 failures after a success opened the breaker: %+v", b)
	}
	failures(1)
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerOpen {
		t.Fatalf("5 consecutive failures: %+v", b)
	}
}

func TestBreakerIgnoresAnOfflineMachine(t *testing.T) {
	clk := newClock()
	w := breakerWorld(t, clk, orchestrator.BreakerSettings{Failures: 1}, nil)
	w.online = false
	w.anth.Close()
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("err = %v", err)
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed || b.Failures != 0 {
		t.Errorf("an offline machine counted against the provider: %+v", b)
	}
	w.online = true
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerOpen || b.LastError != provider.KindNetwork {
		t.Errorf("an unreachable provider did not open its breaker: %+v", b)
	}
}

func TestBreakerHalfOpenProbe(t *testing.T) {
	clk := newClock()
	w := breakerWorld(t, clk, orchestrator.BreakerSettings{Failures: 2, Cooldown: 10 * time.Second}, nil)
	for range 2 {
		fault(w, "anthropic", provider.KindServer)
		if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
			t.Fatal(err)
		}
	}
	opened := clk.Now()
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerOpen || !b.RetryAt.Equal(opened.Add(10*time.Second)) {
		t.Fatalf("breaker = %+v", b)
	}
	clk.Advance(9 * time.Second)
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerOpen {
		t.Fatalf("before the cool-down: %+v", b)
	}
	clk.Advance(time.Second)
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerHalfOpen {
		t.Fatalf("after the cool-down: %+v", b)
	}
	tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"})
	if c := tr.Kept()[0]; c.Provider != "anthropic" || !strings.Contains(c.Reason, "half-open") || !strings.Contains(c.Reason, "the next call is the probe") {
		t.Errorf("half-open route:\n%s", tr.String())
	}

	// The probe fails: open again, for twice the cool-down.
	fault(w, "anthropic", provider.KindServer)
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "anthropic/claude-sonnet-4-6:server openai/gpt-5-mini:ok" {
		t.Fatalf("failed probe: %v %v", out, err)
	}
	b := breakerOf(t, w, "anthropic")
	if b.State != orchestrator.BreakerOpen || b.Trips != 2 || !b.RetryAt.Equal(clk.Now().Add(20*time.Second)) {
		t.Fatalf("after a failed probe: %+v", b)
	}
	if n := w.notesOf("circuit_open"); len(n) != 2 || !strings.Contains(n[1].Message, "probe call failed") {
		t.Errorf("notifications = %+v", n)
	}
	clk.Advance(10 * time.Second)
	if out, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Attempts[0].Provider != "openai" {
		t.Fatalf("the doubled cool-down was not kept: %v %v", out, err)
	}

	// The probe succeeds: closed, and traffic returns.
	clk.Advance(10 * time.Second)
	out, err = w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "anthropic/claude-sonnet-4-6:ok" {
		t.Fatalf("successful probe: %v %v", out, err)
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed || b.Failures != 0 || b.Trips != 0 || !b.RetryAt.IsZero() {
		t.Fatalf("after a successful probe: %+v", b)
	}
	if n := w.notesOf("circuit_closed"); len(n) != 1 || n[0].Level != "info" || n[0].Provider != "anthropic" {
		t.Errorf("close notification = %+v", n)
	}
	// Closed again means the count starts over and the cool-down is back
	// to its base.
	for range 2 {
		fault(w, "anthropic", provider.KindServer)
		if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
			t.Fatal(err)
		}
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerOpen || !b.RetryAt.Equal(clk.Now().Add(10*time.Second)) {
		t.Errorf("reopened breaker = %+v", b)
	}
}

// barrierGate holds every caller at the locality gate, after routing and
// before the attempt, until n callers have arrived for provider: they all
// routed while the breaker was half-open with no probe taken, and then
// race for the probe.
type barrierGate struct {
	provider string
	n        int
	mu       sync.Mutex
	arrived  int
	all      chan struct{}
}

func (g *barrierGate) Check(ctx context.Context, prov, _ string) error {
	if prov != g.provider {
		return nil
	}
	g.mu.Lock()
	if g.arrived++; g.arrived == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestBreakerHalfOpenLetsExactlyOneProbeThrough(t *testing.T) {
	const callers = 8
	clk := newClock()
	gate := &barrierGate{provider: "anthropic", n: 1, all: make(chan struct{})}
	w := breakerWorld(t, clk, orchestrator.BreakerSettings{Failures: 1}, func(s *orchestrator.Settings) { s.Gate = gate })
	fault(w, "anthropic", provider.KindServer)
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(orchestrator.DefaultBreakerCooldown)
	hold := make(chan struct{})
	w.anth.Enqueue(anthropicfake.TextReply("probe answer").WithHold(hold))
	gate.mu.Lock()
	gate.n, gate.arrived, gate.all = callers, 0, make(chan struct{})
	gate.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		out *orchestrator.Outcome
		err error
	}
	results := make(chan result, callers)
	for range callers {
		go func() {
			out, err := w.o.Invoke(ctx, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi"}})
			results <- result{out, err}
		}()
	}
	// Every caller but the probe finishes on openai while the probe is
	// held at the provider.
	for i := range callers - 1 {
		select {
		case r := <-results:
			if r.err != nil || r.out.Provider != "openai" {
				t.Fatalf("caller %d: %v %v", i, r.out, r.err)
			}
			if as := r.out.Attempts; len(as) != 2 || as[0].Provider != "anthropic" || as[0].Outcome != "circuit_open" || !strings.Contains(as[0].Error, "a probe call is in flight") {
				t.Errorf("caller %d attempts = %s", i, path(as))
			}
		case <-ctx.Done():
			t.Fatal("callers did not finish while the probe was held")
		}
	}
	// The probe left the barrier with the others; it may reach the fake
	// after they finished elsewhere.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for len(w.anth.Requests()) < 2 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the probe did not reach anthropic")
		}
	}
	if n := len(w.anth.Requests()); n != 2 {
		t.Fatalf("anthropic got %d requests, want the first failure and exactly one probe", n)
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerHalfOpen || !b.Probing {
		t.Errorf("while probing: %+v", b)
	}
	// A caller routed now does not even consider the provider.
	tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"})
	if c, _ := candidate(tr, "anthropic"); c.Kept || !strings.Contains(c.Reason, "a probe call is in flight") {
		t.Errorf("route while probing:\n%s", tr.String())
	}
	close(hold)
	select {
	case r := <-results:
		if r.err != nil || r.out.Provider != "anthropic" || r.out.Content != "probe answer" {
			t.Fatalf("probe: %v %v", r.out, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the probe did not finish")
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed || b.Probing {
		t.Errorf("after the probe: %+v", b)
	}
}

func TestEveryCandidateOpenSaysSo(t *testing.T) {
	clk := newClock()
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Now, s.Breaker = clk.Now, orchestrator.BreakerSettings{Failures: 1}
		s.Agents = map[string]orchestrator.AgentSettings{"builder": {Providers: []string{"anthropic"}}}
	})
	// The first failure opens the breaker mid-call: no backoff, no retry.
	fault(w, "anthropic", provider.KindServer)
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if oe == nil || path(oe.Attempts) != "anthropic/claude-sonnet-4-6:server" || len(w.anth.Requests()) != 1 || len(w.sleeps) != 0 {
		t.Fatalf("first call: %v (%d requests, sleeps %v)", oe, len(w.anth.Requests()), w.sleeps)
	}
	if !errors.Is(oe, provider.KindServer) {
		t.Errorf("the provider's error is not kept: %v", oe.Err)
	}
	clk.Advance(12 * time.Second)
	_, oe = w.invoke(t, orchestrator.Call{Agent: "builder"})
	if oe == nil || !errors.Is(oe, orchestrator.ErrCircuitOpen) || len(oe.Attempts) != 0 {
		t.Fatalf("second call: %v", oe)
	}
	if we := waitOf(t, oe); we.Reason != orchestrator.WaitCircuitOpen || we.RetryAfter != 18*time.Second {
		t.Errorf("second call's wait = %+v; want the breaker's 18 s", we)
	}
	for _, want := range []string{"every provider that could serve this call has its circuit breaker open", "anthropic: open since 2026-03-02T09:00:00Z (1 consecutive failure, last: server)", "the first probe is let through at 2026-03-02T09:00:30Z (in 18s)", "providers health"} {
		if !strings.Contains(oe.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, oe.Error())
		}
	}
	if n := len(w.anth.Requests()); n != 1 {
		t.Errorf("anthropic got %d requests", n)
	}
}

func TestBreakerStateIsSharedThroughTheStore(t *testing.T) {
	clk := newClock()
	file := filepath.Join(t.TempDir(), "breakers.json")
	settings := func() orchestrator.BreakerSettings {
		return orchestrator.BreakerSettings{Failures: 1, Store: &orchestrator.FileBreakers{Path: file}}
	}
	a := breakerWorld(t, clk, settings(), nil)
	fault(a, "anthropic", provider.KindOverloaded)
	if _, err := a.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	// Another process (another orchestrator on the same file) sees the
	// open breaker and avoids the provider.
	b := breakerWorld(t, clk, settings(), nil)
	tr := b.o.Route(context.Background(), orchestrator.Call{Agent: "builder"})
	if c, _ := candidate(tr, "anthropic"); c.Kept || !strings.Contains(c.Reason, "circuit open") {
		t.Fatalf("second process route:\n%s", tr.String())
	}
	if st := breakerOf(t, b, "anthropic"); st.State != orchestrator.BreakerOpen || st.LastError != provider.KindOverloaded {
		t.Fatalf("second process breaker = %+v", st)
	}
	// Its probe succeeds; the first process sees the breaker closed.
	clk.Advance(time.Minute)
	if out, err := b.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Provider != "anthropic" {
		t.Fatalf("probe: %v %v", out, err)
	}
	if st := breakerOf(t, a, "anthropic"); st.State != orchestrator.BreakerClosed {
		t.Errorf("first process breaker = %+v", st)
	}
	// A corrupt file is reported once and otherwise ignored.
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.notesOf("breaker_store_failed"); len(n) != 1 || !strings.Contains(n[0].Message, "corrupt") {
		t.Errorf("store failure notes = %+v", n)
	}
}

func TestBreakerDisabled(t *testing.T) {
	clk := newClock()
	w := breakerWorld(t, clk, orchestrator.BreakerSettings{Disabled: true, Failures: 1}, nil)
	for range 3 {
		fault(w, "anthropic", provider.KindServer)
		if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(w.anth.Requests()); n != 3 {
		t.Errorf("a disabled breaker kept calls away: %d requests", n)
	}
	if b := breakerOf(t, w, "anthropic"); b.State != orchestrator.BreakerClosed {
		t.Errorf("disabled breaker = %+v", b)
	}
}

func TestFileBreakersKeepTheLaterState(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "state", "breakers.json")
	st := &orchestrator.FileBreakers{Path: file}
	if got, err := st.LoadBreakers(ctx); err != nil || len(got) != 0 {
		t.Fatalf("missing file = %v %v", got, err)
	}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	open := orchestrator.BreakerState{Provider: "b", State: orchestrator.BreakerOpen, Failures: 5, OpenedAt: t0, RetryAt: t0.Add(30 * time.Second), LastError: provider.KindServer, Trips: 1, Probing: true, UpdatedAt: t0}
	for _, s := range []orchestrator.BreakerState{open, {Provider: "a", State: orchestrator.BreakerClosed, Failures: 2, UpdatedAt: t0}} {
		if err := st.SaveBreaker(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// An older state does not overwrite a newer one.
	if err := st.SaveBreaker(ctx, orchestrator.BreakerState{Provider: "b", State: orchestrator.BreakerClosed, UpdatedAt: t0.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	got, err := (&orchestrator.FileBreakers{Path: file}).LoadBreakers(ctx)
	open.Probing = false // in-flight probes are this process's, never stored
	if err != nil || len(got) != 2 || got[0].Provider != "a" || got[1] != open {
		t.Fatalf("stored = %+v %v", got, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v %v", fi, err)
	}
	// A newer state replaces it, and a loader that read the file before
	// sees the change.
	closed := orchestrator.BreakerState{Provider: "b", State: orchestrator.BreakerClosed, UpdatedAt: t0.Add(time.Minute)}
	if err := (&orchestrator.FileBreakers{Path: file}).SaveBreaker(ctx, closed); err != nil {
		t.Fatal(err)
	}
	if got, err := st.LoadBreakers(ctx); err != nil || len(got) != 2 || got[1] != closed {
		t.Errorf("after an update by another writer = %+v %v", got, err)
	}
}

// With a recheck period a loader looks at the file once per period, but a
// save always merges with what the file holds now, so that another
// process's newer record for a different provider is kept.
func TestFileBreakersRecheck(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "breakers.json")
	st := &orchestrator.FileBreakers{Path: file, Recheck: time.Hour}
	if got, err := st.LoadBreakers(ctx); err != nil || len(got) != 0 {
		t.Fatalf("missing file = %v %v", got, err)
	}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	other := orchestrator.BreakerState{Provider: "a", State: orchestrator.BreakerOpen, UpdatedAt: t0}
	if err := (&orchestrator.FileBreakers{Path: file}).SaveBreaker(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.LoadBreakers(ctx); len(got) != 0 {
		t.Errorf("within the recheck period the file was looked at again: %+v", got)
	}
	own := orchestrator.BreakerState{Provider: "b", State: orchestrator.BreakerClosed, UpdatedAt: t0}
	if err := st.SaveBreaker(ctx, own); err != nil {
		t.Fatal(err)
	}
	if got, err := st.LoadBreakers(ctx); err != nil || len(got) != 2 || got[0] != other || got[1] != own {
		t.Errorf("after a save = %+v %v, want the other process's record and this one", got, err)
	}
}
