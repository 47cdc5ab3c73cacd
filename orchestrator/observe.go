package orchestrator

import (
	"context"
	"errors"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/provider"
)

// startObserved tells the observer that c starts and returns the context
// the call runs in. It names the call first, so that every report carries
// its invocation id.
func (o *Orchestrator) startObserved(ctx context.Context, c *Call, stream bool) (context.Context, observe.Invocation) {
	if c.InvocationID == "" {
		c.InvocationID = newInvocationID()
	}
	inv := observe.Invocation{ID: c.InvocationID, Agent: c.Agent, Task: c.Task, Tier: o.tierFor(c), Model: c.Request.Model, MaxTokens: c.Request.MaxTokens, Stream: stream, Start: o.s.Now()}
	a := o.s.Agents[c.Agent]
	if inv.Model == "" {
		inv.Model = a.Model
	}
	if inv.MaxTokens == 0 {
		inv.MaxTokens = a.MaxTokens
	}
	if inv.MaxTokens <= 0 {
		inv.MaxTokens = provider.DefaultMaxTokens
	}
	return o.s.Observer.StartInvocation(ctx, inv), inv
}

// endObserved reports the attempts of a call not reported yet (from the
// from-th on) and how the call ended. res is the answer of a successful
// call, saved what a cache hit saved, err the failure of another call.
func (o *Orchestrator) endObserved(ctx context.Context, inv observe.Invocation, attempts []Attempt, from int, res *provider.Result, saved provider.Money, err error) {
	o.reportAttempts(ctx, inv, attempts[from:], res)
	end := observe.End{Outcome: observedOutcome(err, attempts), Attempts: len(attempts), Saved: saved, Budget: budgetRefusal(err)}
	for _, a := range attempts {
		end.Usage = addUsage(end.Usage, a.Usage)
		end.Cost += a.Cost
	}
	if n := len(attempts); n > 0 {
		end.Provider, end.Model = attempts[n-1].Provider, attempts[n-1].Model
	}
	if res != nil {
		end.Provider, end.Model, end.FinishReason = res.Provider, res.Model, res.StopReason
	}
	end.Duration = o.s.Now().Sub(inv.Start)
	o.s.Observer.EndInvocation(ctx, inv, end)
}

// reportAttempts reports attempts to the observer; a cache hit is no
// attempt on a provider. res, when set, is the answer of the last one.
func (o *Orchestrator) reportAttempts(ctx context.Context, inv observe.Invocation, attempts []Attempt, res *provider.Result) {
	for i, a := range attempts {
		if a.Outcome == observe.OutcomeCacheHit {
			continue
		}
		oa := observe.Attempt{InvocationID: inv.ID, Agent: inv.Agent, Task: inv.Task, Provider: a.Provider, Model: a.Model, Tier: a.Tier, Outcome: a.Outcome, Stream: inv.Stream, MaxTokens: inv.MaxTokens,
			Usage: a.Usage, Cost: a.Cost, Unpriced: a.Unpriced, Start: a.StartedAt, Latency: a.Latency, Waited: a.Waited, RetryAfter: a.RetryAfter}
		if i == len(attempts)-1 && a.Outcome == observe.OutcomeOK && res != nil {
			oa.ResponseModel, oa.FinishReason = res.Model, res.StopReason
		}
		o.s.Observer.AttemptDone(ctx, oa)
	}
}

// observedOutcome names how a call ended: "ok", "cache_hit", a refusal
// before any provider was called, or the kind of the last failure.
func observedOutcome(err error, attempts []Attempt) string {
	if err == nil {
		if n := len(attempts); n > 0 && attempts[n-1].Outcome != observe.OutcomeOK {
			return attempts[n-1].Outcome // a cache hit, or a stream that failed after its first chunk
		}
		return observe.OutcomeOK
	}
	var ee *EstimateError
	switch {
	case errors.As(err, &ee), errors.Is(err, ledger.ErrOverBudget), errors.Is(err, ledger.ErrPaused):
		return observe.OutcomeBudget
	case errors.Is(err, ErrPaused):
		return observe.OutcomePaused
	case errors.Is(err, ErrUnpriced):
		return observe.OutcomeUnpriced
	case errors.Is(err, ledger.ErrUnavailable):
		return observe.OutcomeLedgerUnavailable
	case errors.Is(err, ErrNoCandidate):
		return observe.OutcomeNoCandidate
	case errors.Is(err, ErrCircuitOpen):
		return observe.OutcomeCircuitOpen
	}
	if k := provider.KindOf(err); k != provider.KindUnknown {
		return k.String()
	}
	if n := len(attempts); n > 0 {
		return attempts[n-1].Outcome // the locality gate's "refused", an open circuit
	}
	return observe.OutcomeError
}

// budgetRefusal says which budget refused a call, if one did.
func budgetRefusal(err error) observe.BudgetRefusal {
	if err == nil {
		return observe.BudgetRefusal{}
	}
	var ee *EstimateError
	var be *ledger.BudgetError
	var pe *ledger.PausedError
	switch {
	case errors.As(err, &ee):
		r := observe.BudgetRefusal{Scope: observe.ScopeAgent, Reason: observe.ReasonOverBudget, Estimate: ee.Estimate, Limit: ee.Limit}
		if ee.NeedsApproval {
			r.Reason = observe.ReasonNeedsApproval
		}
		return r
	case errors.As(err, &be):
		return observe.BudgetRefusal{Scope: be.Scope.Kind(), Reason: observe.ReasonOverBudget, Estimate: be.Asked, Limit: be.Limit}
	case errors.As(err, &pe):
		return observe.BudgetRefusal{Scope: pe.Scope.Kind(), Reason: observe.ReasonPaused}
	case errors.Is(err, ledger.ErrOverBudget):
		return observe.BudgetRefusal{Scope: "unknown", Reason: observe.ReasonOverBudget}
	case errors.Is(err, ledger.ErrPaused):
		return observe.BudgetRefusal{Scope: "unknown", Reason: observe.ReasonPaused}
	}
	return observe.BudgetRefusal{}
}

func addUsage(a, b provider.Usage) provider.Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	a.CacheWriteLongTokens += b.CacheWriteLongTokens
	a.ReasoningTokens += b.ReasoningTokens
	a.Estimated = a.Estimated || b.Estimated
	return a
}

// errAttempts returns the attempts a failed call made.
func errAttempts(err error) []Attempt {
	var oe *Error
	if errors.As(err, &oe) {
		return oe.Attempts
	}
	return nil
}

// observeBreaker reports a breaker's new state to the observer.
func (o *Orchestrator) observeBreaker(name string, phase BreakerPhase) {
	if o.s.Observer == nil {
		return
	}
	st := observe.BreakerClosed
	switch phase {
	case BreakerOpen:
		st = observe.BreakerOpen
	case BreakerHalfOpen:
		st = observe.BreakerHalfOpen
	}
	o.s.Observer.BreakerChanged(name, st)
}

// invokeObserved is Invoke with the observer told.
func (o *Orchestrator) invokeObserved(ctx context.Context, c Call) (*Outcome, error) {
	ctx, inv := o.startObserved(ctx, &c, false)
	var out *Outcome
	var err error
	if o.cacheOn(&c) {
		out, err = o.invokeCached(ctx, c)
	} else {
		out, err = o.invoke(ctx, c)
	}
	if err != nil {
		o.endObserved(ctx, inv, errAttempts(err), 0, nil, 0, err)
		return nil, err
	}
	o.endObserved(ctx, inv, out.Attempts, 0, out.Result, out.Saved, nil)
	return out, nil
}

// streamObserved is Stream with the observer told: the attempts that
// failed before the stream opened at once, the streaming attempt and the
// call when the stream ends.
func (o *Orchestrator) streamObserved(ctx context.Context, c Call) (*Stream, error) {
	ctx, inv := o.startObserved(ctx, &c, true)
	st, err := o.stream(ctx, c)
	if err != nil {
		o.endObserved(ctx, inv, errAttempts(err), 0, nil, 0, err)
		return nil, err
	}
	from := len(st.attempts) - 1
	o.reportAttempts(ctx, inv, st.attempts[:from], nil)
	ctx = context.WithoutCancel(ctx)
	st.observed = func(ok bool, as []Attempt, res *provider.Result) {
		if n := len(as); !ok && n > 0 && as[n-1].Outcome == observe.OutcomeOK {
			as = append([]Attempt(nil), as...)
			as[n-1].Outcome = observe.OutcomeCanceled // closed before its end
		}
		o.endObserved(ctx, inv, as, from, res, 0, nil)
	}
	return st, nil
}
