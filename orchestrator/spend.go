package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// AgentBudget limits the estimate of one invocation by an agent.
type AgentBudget struct {
	Limit provider.Money
	// Escalate asks for approval instead of refusing: the call fails with
	// an [*EstimateError] whose NeedsApproval is true, and runs once the
	// caller sets Call.Approved.
	Escalate bool
}

// KeyBudget is the budget of a virtual key: what the calls made with it
// may cost per period (ledger.PeriodDay, PeriodMonth or PeriodTotal; days
// and months in Settings.Location).
type KeyBudget struct {
	Limit  provider.Money
	Period string
}

// keyScopes returns the ledger scopes a call made with c.Key holds: the
// key's lifetime scope (key:ID), held by every call made with the key
// from its first, budget or not, so that a budget over the key's life
// (period total), given at creation or later with 'keys update', counts
// all the key's spend; and, with a budget per day or month, the scope of
// that period at now. Each budget's limit is written into its scope once
// per process and limit, as a default, so that a limit set by an
// operator on the scope ('cortexbuild budget set') wins; a budget changed
// in the key file is set by the next call of each process that sees the
// change. While the key has no lifetime budget, a limit left on its
// lifetime scope by a former total budget is removed, once per process; a
// limit an operator set there (cortexbuild budget set key:ID) stays.
func (o *Orchestrator) keyScopes(ctx context.Context, c *Call, now time.Time) ([]ledger.Scope, error) {
	life, err := ledger.KeyScope(c.Key, ledger.PeriodTotal, now)
	if err != nil {
		return nil, err
	}
	scopes := []ledger.Scope{life}
	var lifeLimit *provider.Money
	if c.KeyBudget != nil && c.KeyBudget.Period == ledger.PeriodTotal {
		lifeLimit = &c.KeyBudget.Limit
	} else if c.KeyBudget != nil {
		sc, err := ledger.KeyScope(c.Key, c.KeyBudget.Period, now.In(o.s.Location))
		if err != nil {
			return nil, err
		}
		if err := o.keyLimit(ctx, sc, &c.KeyBudget.Limit); err != nil {
			return nil, err
		}
		scopes = append(scopes, sc)
	}
	return scopes, o.keyLimit(ctx, life, lifeLimit)
}

// noKeyLimit is what keyLimits holds for a scope this process found or
// left without a limit.
type noKeyLimit struct{}

// keyLimit makes limit (nil: none) the default limit of a key's scope,
// once per process and limit.
func (o *Orchestrator) keyLimit(ctx context.Context, sc ledger.Scope, limit *provider.Money) error {
	var want any = noKeyLimit{}
	if limit != nil {
		want = *limit
	}
	if set, ok := o.keyLimits.Load(sc); ok && set == want {
		return nil
	}
	if limit != nil {
		if _, err := o.s.Ledger.SetDefaultBudget(ctx, sc, *limit); err != nil {
			return err
		}
	} else if _, err := o.s.Ledger.RemoveDefaultBudget(ctx, sc); err != nil {
		return err
	}
	o.keyLimits.Store(sc, want)
	return nil
}

// EstimateError refuses a call whose estimate exceeds its agent's budget.
type EstimateError struct {
	Agent         string
	Estimate      provider.Money
	Limit         provider.Money
	NeedsApproval bool
}

func (e *EstimateError) Error() string {
	if e.NeedsApproval {
		return fmt.Sprintf("agent %s: the estimate $%s is above its budget of $%s and needs approval", e.Agent, e.Estimate, e.Limit)
	}
	return fmt.Sprintf("agent %s: the estimate $%s is above its budget of $%s (agents.%s.budget); the call was not made", e.Agent, e.Estimate, e.Limit, e.Agent)
}

// ErrUnpriced is wrapped when a paid endpoint cannot price a request: such
// a call is refused rather than run unbudgeted.
var ErrUnpriced = errors.New("the request cannot be priced")

// hold is a call's reservation.
type hold struct {
	id       string
	estimate provider.Money
	scopes   []ledger.Scope
	ledger   ledger.Store // nil when nothing is recorded
}

func newInvocationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "inv_" + hex.EncodeToString(b[:])
}

// estimate bounds the cost of c over the candidates it may use: the largest
// estimate among them, with the output limit the call will be sent with
// (the agent's max_tokens when the request sets none). The first candidate
// must be priceable. floor is what the smallest plausible call (a
// one-character prompt, one output token) would hold on the same
// candidates, the largest of its estimates as for any call: a budget with
// less than that left cannot admit any call of this routing.
//
// With ceiling, the prompt is bounded by its bytes (see
// [provider.Request.CeilingEstimate]): no tokenizer runs, and the bound is
// looser. reserve admits with it, and estimates exactly only when it does
// not fit.
func (o *Orchestrator) estimate(c *Call, ceiling bool) (est, floor provider.Money, err error) {
	tr := o.route(c, o.tierFor(c), c.Needs.Union(c.Request.RequiredCapabilities()))
	for i, k := range tr.Kept() {
		req := c.Request
		req.Model, req.Tier, req.CeilingEstimate = k.Model, k.Tier, ceiling
		if req.MaxTokens == 0 {
			req.MaxTokens = o.s.Agents[c.Agent].MaxTokens
		}
		if !k.Native {
			// A translated route sends only the decoded request: what the
			// body holds beyond it (server tools, a tier) does not go.
			req.Native = nil
		}
		if f, ferr := k.endpoint.Adapter.EstimateCost(&provider.Request{Prompt: "x", MaxTokens: 1, Model: k.Model, Tier: k.Tier}); ferr == nil {
			floor = max(floor, f)
		}
		e, err := k.endpoint.Adapter.EstimateCost(&req)
		if err != nil {
			if i == 0 {
				return 0, 0, fmt.Errorf("%w on %s/%s: %v", ErrUnpriced, k.Provider, k.Model, err)
			}
			continue
		}
		est = max(est, e)
	}
	return est, floor, nil
}

// OutputLimit returns the output limit c is sent with to its first
// candidate: the request's max tokens (the agent's when it sets none, else
// the default), clamped by the adapter to the model's output limit. ok is
// false when no candidate is kept or its adapter does not clamp.
func (o *Orchestrator) OutputLimit(ctx context.Context, c Call) (int, bool) {
	tr := o.Route(ctx, c)
	kept := tr.Kept()
	if len(kept) == 0 {
		return 0, false
	}
	l, ok := kept[0].endpoint.Adapter.(interface{ MaxTokens(*provider.Request) int })
	if !ok {
		return 0, false
	}
	req := c.Request
	req.Model, req.Tier = kept[0].Model, kept[0].Tier
	if req.MaxTokens == 0 {
		req.MaxTokens = o.s.Agents[c.Agent].MaxTokens
	}
	return l.MaxTokens(&req), true
}

// reserve checks the agent's budget and holds the estimate against the
// month's and the task's budgets, all or nothing.
func (o *Orchestrator) reserve(ctx context.Context, c *Call) (*hold, error) {
	h := &hold{id: c.InvocationID}
	if h.id == "" {
		h.id = newInvocationID()
	}
	ab, limited := o.s.AgentBudgets[c.Agent]
	if o.s.Ledger == nil && !limited {
		return h, nil
	}
	// The cheap ceiling admits most calls; the exact bound (a tokenizer
	// over the prompt) is computed only for a call the ceiling does not
	// let through, and decides it.
	est, floor, err := o.estimate(c, true)
	if err != nil {
		return nil, &Error{Err: err, Summary: "refused: add the model's prices (pricing.catalog_files) so the call can be budgeted"}
	}
	exact := false
	tighten := func() error {
		e, _, err := o.estimate(c, false)
		if err != nil {
			return &Error{Err: err, Summary: "refused: add the model's prices (pricing.catalog_files) so the call can be budgeted"}
		}
		est, exact = e, true
		return nil
	}
	overAgent := func() bool { return limited && ab.Limit > 0 && est > ab.Limit && !(ab.Escalate && c.Approved) }
	if overAgent() {
		if err := tighten(); err != nil {
			return nil, err
		}
		if overAgent() {
			return nil, &Error{Err: &EstimateError{Agent: c.Agent, Estimate: est, Limit: ab.Limit, NeedsApproval: ab.Escalate}}
		}
	}
	h.estimate = est
	if o.s.Ledger == nil {
		return h, nil
	}
	now := o.s.Now()
	h.scopes = []ledger.Scope{ledger.MonthScope(now.In(o.s.Location))}
	if c.Task != "" {
		h.scopes = append(h.scopes, ledger.TaskScope(c.Task))
	}
	if c.Key != "" {
		scopes, err := o.keyScopes(ctx, c, now)
		switch {
		case errors.Is(err, ledger.ErrUnavailable):
			return nil, &Error{Err: err, Summary: "refused: the ledger cannot be reached, and paid calls are never made unrecorded"}
		case err != nil:
			return nil, &Error{Err: err, Summary: "refused: the key's budget cannot be applied"}
		}
		h.scopes = append(h.scopes, scopes...)
	}
	reserve := func() error {
		return o.s.Ledger.Reserve(ctx, ledger.Reservation{InvocationID: h.id, Amount: est, Scopes: h.scopes, ExpiresAt: now.Add(o.s.ReservationTTL)})
	}
	err = reserve()
	if errors.Is(err, ledger.ErrOverBudget) && !exact {
		// A refused reservation holds nothing: try again with the exact bound.
		if terr := tighten(); terr != nil {
			return nil, terr
		}
		h.estimate = est
		err = reserve()
	}
	switch {
	case err == nil:
		h.ledger = o.s.Ledger
		return h, nil
	case errors.Is(err, ledger.ErrUnavailable) && est == 0 && o.s.FreeFailsOpen:
		o.notify(ctx, "warning", "ledger_unavailable", "", "the ledger is unreachable; a free (local) call runs unrecorded: "+err.Error())
		return h, nil
	case errors.Is(err, ledger.ErrUnavailable):
		return nil, &Error{Err: err, Summary: "refused: the ledger cannot be reached, and paid calls are never made unrecorded"}
	case errors.Is(err, ledger.ErrPaused):
		summary := "refused: a budget is paused (see 'cortexbuild budget show')"
		var pe *ledger.PausedError
		if errors.As(err, &pe) {
			summary = fmt.Sprintf("refused: %s is paused until %s", pe.Scope, liftPause(pe.Scope))
		}
		return nil, &Error{Err: err, Summary: summary}
	case errors.Is(err, ledger.ErrOverBudget):
		return nil, &Error{Err: err, Summary: o.overBudget(ctx, c, h.scopes, est, floor, err)}
	}
	return nil, &Error{Err: err, Summary: "refused: the reservation failed"}
}

// liftPause names the commands that lift the pause of a scope.
func liftPause(sc ledger.Scope) string {
	resume := "cortexbuild budget resume " + shellArg(string(sc))
	raise := "cortexbuild budget set " + shellArg(string(sc)) + " AMOUNT"
	switch sc.Kind() {
	case ledger.KindTask:
		resume = "cortexbuild task resume " + shellArg(sc.ID())
	case ledger.KindKey:
		raise = "cortexbuild serve keys update " + sc.Key() + " --budget AMOUNT"
	}
	return fmt.Sprintf("its budget is raised ('%s') or it is resumed ('%s')", raise, resume)
}

// budgetName names the budget of a scope in a refusal: "the budget of
// task:x", or the key's "the budget of API key k1 for 2026-12".
func budgetName(sc ledger.Scope) string {
	if sc.Kind() != ledger.KindKey {
		return "the budget of " + string(sc)
	}
	if p := sc.Period(); p != "" {
		return "the budget of API key " + sc.Key() + " for " + p + " (" + string(sc) + ")"
	}
	return "the total budget of API key " + sc.Key() + " (" + string(sc) + ")"
}

// shellArg writes s as one argument of a POSIX shell command: as it is
// when that is safe, else in double quotes.
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@%+=,-") == "" {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`").Replace(s) + `"`
}

// overBudget explains a reservation the budgets refused, and pauses a scope
// only when it is exhausted: what is left of it (limit − spent; holds
// come back when their calls settle) is below floor, the smallest
// plausible call, so that no call can fit until its budget is raised. A
// call that merely does not fit (a large max_tokens, a long prompt, money
// held by calls in flight) is refused and pauses nothing. A call bound to
// a task can pause at most that task, never the month it shares with
// every other caller.
func (o *Orchestrator) overBudget(ctx context.Context, c *Call, scopes []ledger.Scope, est, floor provider.Money, err error) string {
	summary := fmt.Sprintf("refused: the estimate $%s does not fit the budget", est)
	var be *ledger.BudgetError
	if errors.As(err, &be) {
		summary = fmt.Sprintf("refused: the estimate $%s does not fit %s ($%s spent and $%s held of $%s); nothing was paused: lower max_tokens or shorten the prompt, or raise the budget", est, budgetName(be.Scope), be.Spent, be.Held, be.Limit)
	}
	for _, s := range scopes {
		if c.Task != "" && s.Kind() != ledger.KindTask {
			continue
		}
		b, berr := o.s.Ledger.Budget(ctx, s)
		if berr != nil || !b.Limited || b.Paused {
			continue
		}
		if left := b.Limit - min(b.Spent, b.Limit); left > 0 && left >= floor {
			continue
		}
		reason := fmt.Sprintf("budget reached: $%s spent of $%s, less than the smallest call ($%s) left", b.Spent, b.Limit, floor)
		if perr := o.s.Ledger.PauseForBudget(ctx, s, reason); perr == nil {
			summary = fmt.Sprintf("refused: the estimate $%s does not fit %s; %s is paused, being exhausted ($%s spent of $%s, less than the smallest call left), until %s", est, budgetName(s), s, b.Spent, b.Limit, liftPause(s))
			o.notify(ctx, "warning", "budget_paused", "", string(s)+": "+reason)
		}
	}
	return summary
}

// settle records every attempt and turns the hold into the actual spend
// (the sum of what the attempts billed; zero releases it). Failing to
// record is reported loudly: the money was spent.
func (o *Orchestrator) settle(ctx context.Context, h *hold, c *Call, attempts []Attempt, _ bool) {
	if h == nil {
		return
	}
	o.chargeUnpriced(ctx, h, attempts)
	o.reportOverEstimate(ctx, h, attempts)
	if h.ledger == nil {
		return
	}
	var total provider.Money
	rows := make([]ledger.AttemptRow, len(attempts))
	for i, a := range attempts {
		total += a.Cost
		rows[i] = c.ledgerRow(h.id, a)
		rows[i].InputTokens, rows[i].OutputTokens = a.Usage.InputTokens, a.Usage.OutputTokens
		rows[i].CacheReadTokens, rows[i].CacheWriteTokens = a.Usage.CacheReadTokens, a.Usage.CacheWriteTokens
		rows[i].Cost, rows[i].EstimatedUsage, rows[i].Unpriced = a.Cost, a.Estimated, a.Unpriced
	}
	report := func(err error) {
		if err != nil && !errors.Is(err, ledger.ErrAlreadySettled) {
			o.notify(ctx, "critical", "ledger_write_failed", "", fmt.Sprintf("invocation %s spent $%s but the ledger write failed: %v", h.id, total, err))
		}
	}
	if len(rows) == 0 {
		report(h.ledger.Release(ctx, h.id))
		return
	}
	// One settlement carries every row of the invocation, so that they are
	// recorded exactly once with it; nothing billed settles at zero, which
	// releases the hold.
	last := len(rows) - 1
	report(h.ledger.Settle(ctx, ledger.Settlement{InvocationID: h.id, Cost: total, Scopes: h.scopes, Entry: rows[last], Earlier: rows[:last]}))
}

// chargeUnpriced charges each attempt the catalog could not price (it
// lists neither the model that answered nor the one requested) the call's
// reservation, the upper bound of what the request can cost, rather than
// the zero the adapter reported, and says so at once. A free endpoint's
// reservation is zero, so its calls stay free.
func (o *Orchestrator) chargeUnpriced(ctx context.Context, h *hold, attempts []Attempt) {
	for i := range attempts {
		a := &attempts[i]
		if !a.Unpriced {
			continue
		}
		a.Cost = max(a.Cost, h.estimate)
		o.notify(ctx, "warning", "unpriced_call", a.Provider, fmt.Sprintf(
			"invocation %s: the price catalog lists no model %q on %s, so its %d input and %d output tokens were charged the reservation, $%s: add the model's prices (pricing.catalog_files)",
			h.id, a.Model, a.Provider, a.Usage.InputTokens, a.Usage.OutputTokens, a.Cost))
	}
}

// chargedResult gives an unpriced answer the cost its attempt was charged.
func chargedResult(res *provider.Result, attempts []Attempt) {
	if n := len(attempts); res != nil && n > 0 && attempts[n-1].Unpriced {
		res.Cost = attempts[n-1].Cost
	}
}

// reportOverEstimate warns when the attempts of a call billed more than its
// estimate, the amount held against its budgets. The estimate bounds what
// a provider can bill within the request's own limits (prompt bounded by
// bytes, output by the max tokens sent), so this means a provider billed
// beyond them; the actual cost is still settled in full, and this names
// who billed it.
func (o *Orchestrator) reportOverEstimate(ctx context.Context, h *hold, attempts []Attempt) {
	var total provider.Money
	for _, a := range attempts {
		total += a.Cost
	}
	if total <= h.estimate || h.estimate == 0 {
		return
	}
	var who []string
	prov := ""
	for _, a := range attempts {
		if a.Cost > 0 {
			prov = a.Provider
			who = append(who, fmt.Sprintf("%s/%s $%s (%d input, %d output tokens)", a.Provider, a.Model, a.Cost, a.Usage.InputTokens, a.Usage.OutputTokens))
		}
	}
	o.notify(ctx, "warning", "over_estimate", prov, fmt.Sprintf("invocation %s cost $%s, above its estimate $%s: billed by %s; the full cost is recorded, and a budget near its limit may end above it",
		h.id, total, h.estimate, strings.Join(who, ", ")))
}

// cacheOn reports whether c may be answered from the cache.
func (o *Orchestrator) cacheOn(c *Call) bool {
	return o.s.Cache != nil && cache.Enabled(c.Agent, o.s.CacheAgents[c.Agent])
}

// invokeCached answers c from the cache when an identical request was
// answered in the last TTL; concurrent identical misses make one provider
// call. A hit costs nothing, and the ledger records it with its saving.
func (o *Orchestrator) invokeCached(ctx context.Context, c Call) (*Outcome, error) {
	trace := o.Route(ctx, c)
	kept := trace.Kept()
	if len(kept) == 0 {
		return o.invoke(ctx, c)
	}
	req := c.Request
	if req.CacheKey == "" {
		req.CacheKey = "agent:" + c.Agent
	}
	key, err := cache.NewKey(cache.Scope{Project: o.s.Project, Provider: kept[0].Provider, Model: kept[0].Model}, &req)
	if err != nil {
		return o.invoke(ctx, c)
	}
	var filled *Outcome
	res, oc, err := o.s.Cache.Do(ctx, key, func(ctx context.Context) (*provider.Result, error) {
		out, err := o.invoke(ctx, c)
		if err != nil {
			return nil, err
		}
		filled = out
		return out.Result, nil
	})
	if err != nil {
		return nil, err
	}
	if filled != nil && !oc.Hit && !oc.Shared {
		return filled, nil
	}
	id := c.InvocationID
	if id == "" {
		id = newInvocationID()
	}
	a := Attempt{Provider: res.Provider, Model: res.Model, Tier: kept[0].Tier, Outcome: "cache_hit", StartedAt: o.s.Now()}
	if o.s.Ledger != nil {
		row := c.ledgerRow(id, a)
		row.CacheHit, row.Saving = true, oc.Saved
		if err := o.s.Ledger.RecordAttempt(ctx, row); err != nil {
			o.notify(ctx, "warning", "ledger_write_failed", "", "a cache hit was not recorded: "+err.Error())
		}
	}
	return &Outcome{Result: res, Attempts: []Attempt{a}, Trace: trace, InvocationID: id, Saved: oc.Saved}, nil
}

// ledgerRow is the ledger row of attempt a of invocation id with what the
// call says of itself (task, agent, key, host session and agents); the
// caller adds the usage and cost.
func (c *Call) ledgerRow(id string, a Attempt) ledger.AttemptRow {
	return ledger.AttemptRow{InvocationID: id, Time: a.StartedAt, Task: c.Task, Agent: c.Agent, Key: c.Key,
		Session: c.Session, HostAgent: c.HostAgent, ParentAgent: c.ParentAgent,
		Provider: a.Provider, Model: a.Model, Outcome: a.Outcome}
}
