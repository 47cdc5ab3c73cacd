package observe

import (
	"context"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Observer hears what the orchestrator does. Implementations must be safe
// for concurrent use and must not block: they run inside the invocation
// loop.
type Observer interface {
	// StartInvocation is called when a call starts, before routing and the
	// budget reservation. The returned context (ctx itself, or a child
	// carrying a span) is the one the call runs in: AttemptDone and
	// EndInvocation receive it.
	StartInvocation(ctx context.Context, inv Invocation) context.Context
	// AttemptDone reports one attempt on one provider, with its own start
	// time and latency: a call's attempts when the call ends; for a stream,
	// the attempts that failed before it opened as it opens, and the
	// streaming attempt when the stream ends. A cache hit is no attempt.
	AttemptDone(ctx context.Context, a Attempt)
	// EndInvocation reports how a call ended, once.
	EndInvocation(ctx context.Context, inv Invocation, end End)
	// BreakerChanged reports that a provider's circuit breaker changed
	// state.
	BreakerChanged(provider string, state BreakerState)
}

// Invocation describes one call by an agent as it starts.
type Invocation struct {
	// ID names the call in the ledger.
	ID string
	// Agent and Task are the caller's agent and task ("" when unset).
	Agent string
	Task  string
	// Tier is the tier the call routes by; Model the exact model it asked
	// for ("" when the tier chooses).
	Tier  provider.Tier
	Model string
	// MaxTokens is the output limit in force.
	MaxTokens int
	// Stream says the answer is streamed.
	Stream bool
	// Start is when the call started.
	Start time.Time
}

// Invocation outcomes besides "ok" and the provider error kinds
// ("rate_limit", "server", ...; see provider.Kind).
const (
	OutcomeOK                = "ok"
	OutcomeCacheHit          = "cache_hit"
	OutcomeBudget            = "budget"             // refused by a budget; see End.Budget
	OutcomePaused            = "paused"             // the project is paused
	OutcomeUnpriced          = "unpriced"           // the call could not be priced, so not budgeted
	OutcomeLedgerUnavailable = "ledger_unavailable" // a paid call with the ledger unreachable
	OutcomeNoCandidate       = "no_candidate"       // no configured provider can serve the call
	OutcomeCircuitOpen       = "circuit_open"       // every provider that could serve it has its breaker open
	OutcomeCanceled          = "canceled"           // the caller gave up (a stream closed before its end)
	OutcomeError             = "error"              // anything else
)

// End is how a call ended.
type End struct {
	// Outcome is OutcomeOK, OutcomeCacheHit, another Outcome constant, or
	// the error kind of the last failure ("rate_limit", "refused" for the
	// locality gate, ...).
	Outcome string
	// Provider and Model are the provider instance and the model that
	// answered (the model as the provider reported it), or the last ones
	// tried; "" when nothing was tried.
	Provider string
	Model    string
	// Attempts is the number of attempts made, a cache hit counting one.
	Attempts int
	// Usage and Cost are summed over the attempts (a failed attempt may
	// have billed tokens).
	Usage provider.Usage
	Cost  provider.Money
	// Saved is what a cache hit saved.
	Saved provider.Money
	// FinishReason says why the model stopped, on success.
	FinishReason provider.StopReason
	// Budget says which budget refused the call (Outcome "budget").
	Budget BudgetRefusal
	// Duration is the call's wall time, waits included (for a stream,
	// until it ended).
	Duration time.Duration
}

// Budget refusal scopes and reasons.
const (
	ScopeAgent = "agent" // agents.<name>.budget, one invocation's estimate
	ScopeTask  = "task"  // budgets.task
	ScopeMonth = "month" // budgets.project_monthly
	ScopeKey   = "key"   // a virtual key's budget

	ReasonOverBudget    = "over_budget"    // the estimate does not fit
	ReasonNeedsApproval = "needs_approval" // over an escalating agent budget
	ReasonPaused        = "paused"         // the scope is paused
)

// BudgetRefusal says which budget refused a call; the zero value means
// none did.
type BudgetRefusal struct {
	// Scope is ScopeAgent, ScopeTask, ScopeMonth or ScopeKey.
	Scope string
	// Reason is ReasonOverBudget, ReasonNeedsApproval or ReasonPaused.
	Reason string
	// Estimate is the call's estimate and Limit the budget, when known.
	Estimate provider.Money
	Limit    provider.Money
}

// Attempt is one try on one provider.
type Attempt struct {
	// InvocationID, Agent and Task identify the call.
	InvocationID string
	Agent        string
	Task         string
	// Provider is the provider instance name; Model and Tier what was
	// asked of it.
	Provider string
	Model    string
	Tier     provider.Tier
	// Outcome is "ok" or the error kind ("rate_limit", "refused" for the
	// locality gate, "circuit_open", ...).
	Outcome string
	// Stream says the attempt streamed its answer.
	Stream bool
	// MaxTokens is the output limit sent.
	MaxTokens int
	// ResponseModel is the model that answered, as the provider reported
	// it, and FinishReason why it stopped (successful attempts only).
	ResponseModel string
	FinishReason  provider.StopReason
	// Usage and Cost are what the attempt billed. Unpriced says the price
	// catalog listed neither the answer's model nor the requested one, so
	// Cost is the reservation charged in place of a price.
	Usage    provider.Usage
	Cost     provider.Money
	Unpriced bool
	// Start is when the attempt started, Latency how long it took, Waited
	// how long the loop waited before it (backoff or a rate limit), and
	// RetryAfter the delay the provider asked for.
	Start      time.Time
	Latency    time.Duration
	Waited     time.Duration
	RetryAfter time.Duration
}

// BreakerState is the state of a provider's circuit breaker, numbered as
// the metrics gauge reports it.
type BreakerState int

// Breaker states.
const (
	BreakerClosed   BreakerState = 0
	BreakerHalfOpen BreakerState = 1
	BreakerOpen     BreakerState = 2
)

// String names the state as log lines write it: closed, half_open, open.
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half_open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// Nop is an Observer that does nothing.
type Nop struct{}

// StartInvocation returns ctx.
func (Nop) StartInvocation(ctx context.Context, _ Invocation) context.Context { return ctx }

// AttemptDone does nothing.
func (Nop) AttemptDone(context.Context, Attempt) {}

// EndInvocation does nothing.
func (Nop) EndInvocation(context.Context, Invocation, End) {}

// BreakerChanged does nothing.
func (Nop) BreakerChanged(string, BreakerState) {}

// Multi returns an Observer that reports to each of obs in order; nil
// entries are skipped. It returns nil when none is left, so that a
// configuration with everything off costs nothing.
func Multi(obs ...Observer) Observer {
	var m multi
	for _, o := range obs {
		switch x := o.(type) {
		case nil:
		case multi:
			m = append(m, x...)
		default:
			m = append(m, o)
		}
	}
	switch len(m) {
	case 0:
		return nil
	case 1:
		return m[0]
	}
	return m
}

type multi []Observer

func (m multi) StartInvocation(ctx context.Context, inv Invocation) context.Context {
	for _, o := range m {
		ctx = o.StartInvocation(ctx, inv)
	}
	return ctx
}

func (m multi) AttemptDone(ctx context.Context, a Attempt) {
	for _, o := range m {
		o.AttemptDone(ctx, a)
	}
}

func (m multi) EndInvocation(ctx context.Context, inv Invocation, end End) {
	for _, o := range m {
		o.EndInvocation(ctx, inv, end)
	}
}

func (m multi) BreakerChanged(provider string, state BreakerState) {
	for _, o := range m {
		o.BreakerChanged(provider, state)
	}
}

var (
	_ Observer = Nop{}
	_ Observer = multi(nil)
)
