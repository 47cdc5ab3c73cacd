package orchestrator

import (
	"fmt"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// WaitReason is why a candidate could not serve a call for now.
type WaitReason string

// The reasons that clear with time.
const (
	// WaitRateLimit: the provider rate-limited the call, or an earlier
	// call's rate-limit window is still open.
	WaitRateLimit WaitReason = "rate_limit"
	// WaitOverloaded: the provider stayed overloaded through the server
	// attempts.
	WaitOverloaded WaitReason = "overloaded"
	// WaitCircuitOpen: the provider's circuit breaker keeps calls away.
	WaitCircuitOpen WaitReason = "circuit_open"
)

// WaitError is what a failed call's [*Error] wraps when every candidate
// was skipped or failed for a reason that clears with time (a rate limit,
// an overload, an open circuit breaker): calling again after RetryAfter
// may succeed. errors.As finds it; it unwraps to the provider error (or
// [ErrCircuitOpen]) behind it, so errors.Is with a provider kind still
// works.
type WaitError struct {
	// Reason is why the candidate that frees up first cannot serve now.
	Reason WaitReason
	// RetryAfter is the shortest remaining wait over the candidates; zero
	// when none is known (a breaker whose probe call is in flight).
	RetryAfter time.Duration
	// Err is that candidate's provider error (its Diagnostic says, for a
	// rate limit, which limit was hit) or the open breaker.
	Err error
}

func (e *WaitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s; retry after %s", e.Reason, e.RetryAfter)
	}
	return e.Err.Error()
}

// Unwrap returns the error behind the wait.
func (e *WaitError) Unwrap() error { return e.Err }

// rateHold is a provider's entry in the rate-limit queue: no call before
// until, because of err.
type rateHold struct {
	until time.Time
	err   *provider.Error
}

// waits collects, over one call's candidates, why each could not serve.
// It yields a [*WaitError] only if every candidate given up on was given
// up for a reason that clears with time.
type waits struct {
	first *WaitError // the shortest known wait so far
	other bool       // a candidate failed for a reason waiting does not fix
}

// add notes a candidate that can serve again after d.
func (w *waits) add(r WaitReason, d time.Duration, err error) {
	d = max(d, 0)
	if w.first == nil || (d > 0 && (w.first.RetryAfter <= 0 || d < w.first.RetryAfter)) {
		w.first = &WaitError{Reason: r, RetryAfter: d, Err: err}
	}
}

// wrap returns err as the call's final error: the wait when every
// candidate is waiting, err otherwise.
func (w *waits) wrap(err error) error {
	if w.other || w.first == nil {
		return err
	}
	return w.first
}

// heldError is the error of a call skipped because provider name is
// waiting out a rate limit for another d: the provider's error that
// opened the window, with the remaining wait.
func (o *Orchestrator) heldError(name string, d time.Duration) error {
	o.mu.Lock()
	h := o.notBefore[name]
	o.mu.Unlock()
	pe := &provider.Error{Kind: provider.KindRateLimit, Provider: name}
	if h.err != nil {
		c := *h.err
		pe = &c
	}
	// The earlier call's usage, request id and answer are not this call's.
	pe.RetryAfter, pe.Usage, pe.Cost, pe.Diagnostic.RequestID, pe.Reply = d, nil, provider.Money(0), "", nil
	return pe
}

// breakerWait is how long provider name's breaker keeps calls away: zero
// while a probe is in flight.
func (o *Orchestrator) breakerWait(name string) time.Duration {
	now := o.s.Now()
	if st := o.breakerAt(name, now); st.State == BreakerOpen {
		return st.RetryAt.Sub(now)
	}
	return 0
}

// overloadWait is how long provider name, overloaded through tries
// attempts, should be left alone: until its breaker lets a probe through
// if the overload opened it, else what the provider asked for, else the
// backoff the next attempt would have waited.
func (o *Orchestrator) overloadWait(name string, tries int, err error) time.Duration {
	if d := o.breakerWait(name); d > 0 {
		return d
	}
	if d := provider.RetryAfterOf(err); d > 0 {
		return d
	}
	return o.s.Backoff(tries)
}

// circuitWaits adds the candidates routing dropped for an open breaker.
func (o *Orchestrator) circuitWaits(w *waits, t Trace) {
	seen := map[string]bool{}
	for _, c := range t.Candidates {
		if c.circuit && !seen[c.Provider] {
			seen[c.Provider] = true
			w.add(WaitCircuitOpen, o.breakerWait(c.Provider), fmt.Errorf("%w: %s", ErrCircuitOpen, c.Provider))
		}
	}
}
