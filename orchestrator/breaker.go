package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Circuit breaker defaults.
const (
	DefaultBreakerFailures    = 5
	DefaultBreakerCooldown    = 30 * time.Second
	DefaultBreakerMaxCooldown = 5 * time.Minute
)

// BreakerSettings configure the per-provider circuit breakers (passive
// health). A provider's breaker opens after Failures consecutive server,
// overload, network or timeout failures of live calls; while it is open the
// router drops the provider's candidates. After the cool-down exactly one
// probe call is let through (half-open): its success closes the breaker,
// its failure opens it again for twice the previous cool-down. Rate
// limits, exhausted quotas, refused credentials, bad requests and missing
// capabilities never count: they say nothing about the provider's health.
// The zero value of each field is the default named in its comment.
type BreakerSettings struct {
	// Disabled turns the breakers off: every provider is always tried.
	Disabled bool
	// Failures is how many consecutive counted failures open a breaker.
	// Default 5.
	Failures int
	// Cooldown is how long a breaker stays open before it lets one probe
	// call through. Default 30 s.
	Cooldown time.Duration
	// MaxCooldown caps the cool-down, which doubles after each failed
	// probe. Default 5 min (never below Cooldown).
	MaxCooldown time.Duration
	// Store shares breaker states between processes (each CLI command is
	// one); nil keeps them in this process. A store that cannot be read or
	// written is reported once through the Notifier and otherwise ignored:
	// the breakers then work from what this process saw.
	Store BreakerStore
}

// BreakerStore keeps breaker states where other processes of the project
// see them. LoadBreakers is read before every routing decision; SaveBreaker
// is called when a breaker changes, and keeps the record whose UpdatedAt is
// the latest.
type BreakerStore interface {
	LoadBreakers(ctx context.Context) ([]BreakerState, error)
	SaveBreaker(ctx context.Context, s BreakerState) error
}

// BreakerPhase is the state of a circuit breaker.
type BreakerPhase string

// The phases.
const (
	// BreakerClosed: calls flow; consecutive failures are counted.
	BreakerClosed BreakerPhase = "closed"
	// BreakerOpen: the provider's candidates are dropped until RetryAt.
	BreakerOpen BreakerPhase = "open"
	// BreakerHalfOpen: the cool-down is over; the next call is the probe,
	// and while it runs other calls still avoid the provider.
	BreakerHalfOpen BreakerPhase = "half_open"
)

// BreakerState is one provider's circuit breaker as seen at a moment.
type BreakerState struct {
	Provider string       `json:"provider"`
	State    BreakerPhase `json:"state"`
	// Failures counts the consecutive counted failures since the last
	// success.
	Failures int `json:"consecutive_failures"`
	// OpenedAt is when the breaker last opened; RetryAt when it lets the
	// next probe through. Both are zero while closed.
	OpenedAt time.Time `json:"opened_at,omitzero"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	// LastError is the kind of the last counted failure.
	LastError provider.Kind `json:"last_error_kind,omitempty"`
	// Trips counts the openings since the breaker last closed; the
	// cool-down doubles with each.
	Trips int `json:"trips,omitempty"`
	// Probing is true while this process's probe call runs.
	Probing bool `json:"probing,omitempty"`
	// UpdatedAt is when the state last changed.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// At returns s as seen at now: an open breaker whose cool-down is over is
// half-open. Stored states are only ever closed or open.
func (s BreakerState) At(now time.Time) BreakerState {
	if s.State == "" {
		s.State = BreakerClosed
	}
	if s.State == BreakerOpen && !now.Before(s.RetryAt) {
		s.State = BreakerHalfOpen
	}
	return s
}

// String says what the breaker does, for people: "closed", "closed (2
// consecutive failures)", "open since … (5 consecutive failures, last:
// server); retry at …", "half-open: …".
func (s BreakerState) String() string {
	switch s.State {
	case BreakerOpen:
		return fmt.Sprintf("open since %s (%s); retry at %s", clock(s.OpenedAt), s.failures(), clock(s.RetryAt))
	case BreakerHalfOpen:
		if s.Probing {
			return fmt.Sprintf("half-open since %s (%s): a probe call is in flight", clock(s.RetryAt), s.failures())
		}
		return fmt.Sprintf("half-open since %s (%s): the next call is the probe", clock(s.RetryAt), s.failures())
	}
	if s.Failures > 0 {
		return fmt.Sprintf("closed (%s)", s.failures())
	}
	return "closed"
}

func (s BreakerState) failures() string {
	f := fmt.Sprintf("%d consecutive failure", s.Failures)
	if s.Failures != 1 {
		f += "s"
	}
	if s.LastError != provider.KindUnknown {
		f += ", last: " + s.LastError.String()
	}
	return f
}

func clock(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ErrCircuitOpen is wrapped when a call finds the circuit breaker of every
// provider that could serve it open.
var ErrCircuitOpen = errors.New("circuit breaker open")

// breakers holds the per-provider breaker states of one orchestrator.
type breakers struct {
	mu       sync.Mutex
	m        map[string]*BreakerState
	reported bool // a store failure was notified
}

func (b *breakers) getLocked(name string) *BreakerState {
	if b.m == nil {
		b.m = map[string]*BreakerState{}
	}
	s := b.m[name]
	if s == nil {
		s = &BreakerState{Provider: name, State: BreakerClosed}
		b.m[name] = s
	}
	return s
}

func (o *Orchestrator) breakerDefaults() {
	bs := &o.s.Breaker
	if bs.Failures <= 0 {
		bs.Failures = DefaultBreakerFailures
	}
	if bs.Cooldown <= 0 {
		bs.Cooldown = DefaultBreakerCooldown
	}
	if bs.MaxCooldown <= 0 {
		bs.MaxCooldown = DefaultBreakerMaxCooldown
	}
	bs.MaxCooldown = max(bs.MaxCooldown, bs.Cooldown)
}

// cooldown is the cool-down after the trips-th opening: Cooldown doubled
// for each failed probe, capped at MaxCooldown.
func (o *Orchestrator) cooldown(trips int) time.Duration {
	d := o.s.Breaker.Cooldown
	for i := 1; i < trips && d < o.s.Breaker.MaxCooldown; i++ {
		d *= 2
	}
	return min(d, o.s.Breaker.MaxCooldown)
}

// counts reports whether a failure of kind k counts against a breaker.
func counts(k provider.Kind) bool {
	switch k {
	case provider.KindServer, provider.KindOverloaded, provider.KindNetwork, provider.KindTimeout:
		return true
	}
	return false
}

// Breakers returns the circuit breaker of every configured provider, in
// order of preference, as seen now (after reading the store, if any).
func (o *Orchestrator) Breakers(ctx context.Context) []BreakerState {
	o.syncBreakers(ctx)
	now := o.s.Now()
	out := make([]BreakerState, 0, len(o.order))
	for _, name := range o.order {
		out = append(out, o.breakerAt(name, now))
	}
	return out
}

// breakerAt returns provider name's breaker as seen at now.
func (o *Orchestrator) breakerAt(name string, now time.Time) BreakerState {
	o.brk.mu.Lock()
	defer o.brk.mu.Unlock()
	return o.brk.getLocked(name).At(now)
}

// syncBreakers adopts the states other processes stored since this one
// last changed them.
func (o *Orchestrator) syncBreakers(ctx context.Context) {
	st := o.s.Breaker.Store
	if st == nil || o.s.Breaker.Disabled {
		return
	}
	recs, err := st.LoadBreakers(ctx)
	if err != nil {
		o.storeFailed(ctx, "read", err)
		return
	}
	o.brk.mu.Lock()
	defer o.brk.mu.Unlock()
	for _, r := range recs {
		if _, ok := o.endpoints()[r.Provider]; !ok || (r.State != BreakerOpen && r.State != BreakerClosed) {
			continue
		}
		cur := o.brk.getLocked(r.Provider)
		if r.UpdatedAt.After(cur.UpdatedAt) {
			probing, was := cur.Probing, cur.State
			*cur = r
			cur.Probing = probing
			if r.State != was {
				o.observeBreaker(r.Provider, r.State) // another process saw it change
			}
		}
	}
}

func (o *Orchestrator) storeFailed(ctx context.Context, op string, err error) {
	o.brk.mu.Lock()
	first := !o.brk.reported
	o.brk.reported = true
	o.brk.mu.Unlock()
	if first {
		o.notify(ctx, "warning", "breaker_store_failed", "", fmt.Sprintf("circuit breaker states could not be %s (%v); breakers work from this process's calls only", op, err))
	}
}

// circuitRoute drops the kept candidates of providers whose breaker is
// open, or half-open with a probe in flight, and notes a half-open one.
func (o *Orchestrator) circuitRoute(t *Trace) {
	if o.s.Breaker.Disabled {
		return
	}
	now := o.s.Now()
	for i := range t.Candidates {
		c := &t.Candidates[i]
		if !c.Kept {
			continue
		}
		st := o.breakerAt(c.Provider, now)
		switch {
		case st.State == BreakerOpen || (st.State == BreakerHalfOpen && st.Probing):
			c.Kept, c.circuit, c.Reason = false, true, "circuit "+st.String()
		case st.State == BreakerHalfOpen:
			c.Reason += "; circuit " + st.String()
		}
	}
}

// circuitsOpen explains a call whose every capable candidate was dropped
// by its breaker; nil when breakers are not the reason.
func (o *Orchestrator) circuitsOpen(t Trace) error {
	now := o.s.Now()
	seen := map[string]bool{}
	var parts []string
	var first time.Time
	probing := false
	for _, c := range t.Candidates {
		if !c.circuit || seen[c.Provider] {
			continue
		}
		seen[c.Provider] = true
		st := o.breakerAt(c.Provider, now)
		parts = append(parts, c.Provider+": "+st.String())
		if st.State == BreakerOpen && (first.IsZero() || st.RetryAt.Before(first)) {
			first = st.RetryAt
		}
		probing = probing || st.State == BreakerHalfOpen
	}
	if len(parts) == 0 {
		return nil
	}
	next := "a call may try again when the probe in flight succeeds"
	if !first.IsZero() && !probing {
		next = fmt.Sprintf("the first probe is let through at %s (in %s)", clock(first), first.Sub(now).Round(time.Second))
	}
	var wait time.Duration
	if !first.IsZero() && !probing {
		wait = first.Sub(now)
	}
	open := &WaitError{Reason: WaitCircuitOpen, RetryAfter: wait, Err: fmt.Errorf("%w: %s", ErrCircuitOpen, strings.Join(parts, "; "))}
	return &Error{Err: open, Trace: t, Summary: fmt.Sprintf(
		"every provider that could serve this call has its circuit breaker open after repeated server or network failures; %s (see 'cortexbuild providers health')", next)}
}

// admit decides whether an attempt on provider name may start now: always
// while its breaker is closed; as the one probe once the cool-down is
// over. A refusal is returned as the attempt to record.
func (o *Orchestrator) admit(name, model string, tier provider.Tier) (probe bool, refused *Attempt) {
	if o.s.Breaker.Disabled {
		return false, nil
	}
	now := o.s.Now()
	o.brk.mu.Lock()
	defer o.brk.mu.Unlock()
	b := o.brk.getLocked(name)
	switch st := b.At(now); {
	case st.State == BreakerClosed:
		return false, nil
	case st.State == BreakerHalfOpen && !b.Probing:
		b.Probing = true
		o.observeBreaker(name, BreakerHalfOpen)
		return true, nil
	default:
		return false, &Attempt{Provider: name, Model: model, Tier: tier, Outcome: "circuit_open", Error: name + ": circuit " + st.String(), StartedAt: now}
	}
}

// tripped reports whether provider name's breaker keeps calls away now
// (open, or half-open with a probe in flight).
func (o *Orchestrator) tripped(name string) bool {
	if o.s.Breaker.Disabled {
		return false
	}
	st := o.breakerAt(name, o.s.Now())
	return st.State == BreakerOpen || (st.State == BreakerHalfOpen && st.Probing)
}

// record feeds an attempt's outcome to provider name's breaker. A success
// closes it; a counted failure (server, overload, network while this
// machine is online, timeout while the caller still waits) adds up to an
// opening, and a failed probe reopens it with a longer cool-down. Other
// outcomes only release the probe.
func (o *Orchestrator) record(ctx context.Context, name string, err error, probe bool) {
	if o.s.Breaker.Disabled {
		return
	}
	kind := provider.KindOf(err)
	counted := err != nil && counts(kind) && ctx.Err() == nil
	if counted && kind == provider.KindNetwork && !o.s.Online(ctx) {
		counted = false // this machine is offline: not the provider's fault
	}
	now := o.s.Now()
	var note *Notification
	o.brk.mu.Lock()
	b := o.brk.getLocked(name)
	if probe {
		b.Probing = false
	}
	changed := false
	switch {
	case err == nil:
		if b.State == BreakerOpen {
			note = &Notification{Level: "info", Event: "circuit_closed", Message: fmt.Sprintf(
				"%s: circuit breaker closed: a call succeeded (it was open since %s after %s)", name, clock(b.OpenedAt), b.failures())}
		}
		if b.State != BreakerClosed || b.Failures > 0 {
			*b = BreakerState{Provider: name, State: BreakerClosed, Probing: b.Probing}
			changed = true
		}
	case counted:
		b.Failures++
		b.LastError = kind
		changed = true
		switch {
		case b.State == BreakerOpen && (probe || !now.Before(b.RetryAt)):
			b.Trips++
			d := o.cooldown(b.Trips)
			b.OpenedAt, b.RetryAt = now, now.Add(d)
			note = &Notification{Level: "warning", Event: "circuit_open", Message: fmt.Sprintf(
				"%s: the probe call failed (%s); circuit breaker open again for %s, until %s", name, kind, d, clock(b.RetryAt))}
		case b.State == BreakerClosed && b.Failures >= o.s.Breaker.Failures:
			b.State, b.Trips = BreakerOpen, 1
			d := o.cooldown(1)
			b.OpenedAt, b.RetryAt = now, now.Add(d)
			note = &Notification{Level: "warning", Event: "circuit_open", Message: fmt.Sprintf(
				"%s: circuit breaker open after %s; its calls go to other providers until %s, then one probe call is let through", name, b.failures(), clock(b.RetryAt))}
		}
	}
	var snap BreakerState
	if changed {
		b.UpdatedAt = now
		snap = *b
		snap.Probing = false
	}
	o.brk.mu.Unlock()
	if changed && o.s.Breaker.Store != nil {
		if err := o.s.Breaker.Store.SaveBreaker(context.WithoutCancel(ctx), snap); err != nil {
			o.storeFailed(ctx, "saved", err)
		}
	}
	if note != nil {
		o.notify(context.WithoutCancel(ctx), note.Level, note.Event, name, note.Message)
		o.observeBreaker(name, snap.State)
	}
}
