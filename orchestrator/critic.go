package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// CriticSettings configure the critic gate: on a task of medium risk or
// more, the critic runs on a model other than the one that authored the
// plan, preferably of another vendor, and names its reviewer in its output.
type CriticSettings struct {
	// Agents are the agents whose calls are reviews. Default: critic.
	Agents []string
	// Planners are the agents whose calls author a task's plan. Default:
	// planner.
	Planners []string
	// RequireDifferentVendor refuses a critic model of the author's vendor
	// (or of an unknown vendor). By default another vendor is preferred and
	// another model of the same vendor accepted.
	RequireDifferentVendor bool
	// Known reports whether an id names a configured model or agent, for
	// the reviewer id. Default: the agents, and every model the endpoints
	// map a tier to or a call was routed to.
	Known func(id string) bool
}

// ErrNoIndependentModel is wrapped when a gated task's critic has no model
// other than the plan's author's to run on.
var ErrNoIndependentModel = errors.New("no independent model for the critic")

// ErrNoTask is wrapped when a task that was never started is completed.
var ErrNoTask = ledger.ErrNoTask

// ReviewCheck is what the gate made of a critic's output on a task.
type ReviewCheck struct {
	Task     string `json:"task"`
	Risk     string `json:"risk"`
	Reviewer string `json:"reviewer,omitempty"`
	Model    string `json:"model"`
	// Problem says why the review does not satisfy the gate ("" when it
	// does); the task cannot be completed until a valid review is made.
	Problem string `json:"problem,omitempty"`
}

// taskGate is what a call on a task needs to know of it.
type taskGate struct {
	risk    critic.Risk
	authors []string
}

func (o *Orchestrator) isCritic(agent string) bool {
	if len(o.s.Critic.Agents) == 0 {
		return agent == AgentCritic
	}
	return slices.Contains(o.s.Critic.Agents, agent)
}

func (o *Orchestrator) isPlanner(agent string) bool {
	if len(o.s.Critic.Planners) == 0 {
		return agent == AgentPlanner
	}
	return slices.Contains(o.s.Critic.Planners, agent)
}

func (o *Orchestrator) rules(g *taskGate) critic.Rules {
	agents := o.s.Critic.Agents
	if len(agents) == 0 {
		agents = []string{AgentCritic}
	}
	known := o.s.Critic.Known
	if known == nil {
		known = o.knownID
	}
	return critic.Rules{Risk: g.risk, Authors: g.authors, CriticAgents: agents, Known: known, RequireDifferentVendor: o.s.Critic.RequireDifferentVendor}
}

// knownID accepts the agents and every model an endpoint maps a tier to,
// or that an agent is pinned to.
func (o *Orchestrator) knownID(id string) bool {
	if _, ok := DefaultAgentRouting[id]; ok {
		return true
	}
	if _, ok := o.s.Agents[id]; ok {
		return true
	}
	for _, a := range o.s.Agents {
		if critic.SameModel(a.Model, id) {
			return true
		}
	}
	for _, ep := range o.endpoints() {
		if tm, ok := ep.Adapter.(provider.TierMapper); ok {
			for _, t := range provider.Tiers {
				if critic.SameModel(tm.ModelFor(t), id) {
					return true
				}
			}
		}
	}
	return false
}

// loadGate reads the task of a critic call: its risk and the models that
// authored its plan. A task that was never started is not gated.
func (o *Orchestrator) loadGate(ctx context.Context, c *Call) error {
	if c.Task == "" || o.s.Ledger == nil || !o.isCritic(c.Agent) {
		return nil
	}
	t, err := o.s.Ledger.Task(ctx, c.Task)
	if errors.Is(err, ledger.ErrNoTask) {
		return nil
	}
	if err != nil {
		return &Error{Err: err, Summary: "refused: the task's risk and plan author cannot be read, so the critic cannot be routed independently"}
	}
	risk, err := critic.ParseRisk(t.Risk)
	if err != nil {
		return &Error{Err: err, Summary: "refused: the task's recorded risk is unreadable"}
	}
	c.gate = &taskGate{risk: risk, authors: authorsOf(t)}
	return nil
}

// authorsOf lists the models that authored plans on t, oldest first.
func authorsOf(t ledger.Task) []string {
	var out []string
	for _, e := range t.Events {
		if e.Kind == ledger.EventPlan && e.Model != "" && !slices.ContainsFunc(out, func(m string) bool { return critic.SameModel(m, e.Model) }) {
			out = append(out, e.Model)
		}
	}
	return out
}

// gateRoute applies the gate to a critic's candidates: the author's model
// is dropped (another tier's model of the same endpoint is offered in its
// place unless the model is pinned), other vendors go first, and with
// RequireDifferentVendor only they are kept.
func (o *Orchestrator) gateRoute(c *Call, t *Trace, pinned bool) {
	g := c.gate
	if g == nil || !g.risk.Gated() || len(g.authors) == 0 {
		return
	}
	rules := o.rules(g)
	why := fmt.Sprintf("authored the plan of task %s (risk %s needs an independent critic)", c.Task, g.risk)
	var extra []Candidate
	for i := range t.Candidates {
		cand := &t.Candidates[i]
		if cand.Model == "" || !rules.Authored(cand.Model) {
			continue
		}
		wasKept := cand.Kept
		cand.Kept, cand.Reason = false, why
		if !wasKept || pinned {
			continue
		}
		tm, ok := cand.endpoint.Adapter.(provider.TierMapper)
		if !ok {
			continue
		}
		for _, tier := range provider.Tiers {
			m := tm.ModelFor(tier)
			same := func(x Candidate) bool { return x.Provider == cand.Provider && x.Model == m }
			if m == "" || rules.Authored(m) || slices.ContainsFunc(t.Candidates, same) || slices.ContainsFunc(extra, same) {
				continue
			}
			alt := Candidate{Provider: cand.Provider, Model: m, Tier: tier, endpoint: cand.endpoint, caps: capabilitiesOf(cand.endpoint.Adapter, m)}
			if missing := alt.caps.Missing(t.Needs); missing != 0 {
				alt.Reason = "lacks " + missing.String()
			} else {
				alt.Kept, alt.Reason = true, "another model of "+cand.Provider+" than the plan's author"
			}
			extra = append(extra, alt)
		}
	}
	t.Candidates = append(t.Candidates, extra...)
	authorVendors := map[string]bool{}
	for _, a := range g.authors {
		authorVendors[critic.VendorOf(a)] = true
	}
	other := func(m string) bool { v := critic.VendorOf(m); return v != "" && !authorVendors[v] }
	if rules.RequireDifferentVendor {
		for i := range t.Candidates {
			if cand := &t.Candidates[i]; cand.Kept && !other(cand.Model) {
				cand.Kept = false
				cand.Reason = fmt.Sprintf("vendor %s is the plan author's or unknown (critic.require_different_vendor)", orDash(critic.VendorOf(cand.Model)))
			}
		}
	}
	slices.SortStableFunc(t.Candidates, func(a, b Candidate) int {
		return rank(a, other) - rank(b, other)
	})
}

// rank orders kept candidates of another vendor first, then the other kept
// ones, then the dropped ones.
func rank(c Candidate, other func(string) bool) int {
	switch {
	case c.Kept && other(c.Model):
		return 0
	case c.Kept:
		return 1
	}
	return 2
}

// noIndependent explains a gated critic call that has nowhere to go.
func (o *Orchestrator) noIndependent(c *Call, t Trace) error {
	vendors := map[string]bool{}
	for _, a := range c.gate.authors {
		vendors[critic.VendorOf(a)] = true
	}
	fix := "configure a provider of another vendor for the critic (agents.critic.providers), or pin agents.critic.model to a model other than the author's"
	if o.s.Critic.RequireDifferentVendor {
		fix = "configure a provider serving another vendor's model (critic.require_different_vendor is on)"
	}
	return &Error{Err: ErrNoIndependentModel, Trace: t, Summary: fmt.Sprintf(
		"refused: task %s has risk %s, so its critic must run on a model other than the plan's author (%s), and no configured candidate is one; %s. The author's model is never used instead.\n%s",
		c.Task, c.gate.risk, strings.Join(c.gate.authors, ", "), fix, t.String())}
}

// recordTask appends what a successful call means to its task's trail: a
// planner's call records the plan's author, a critic's the review and
// whether it satisfies the gate. A task that was never started records
// nothing. Failing to record is reported: completion will then be refused
// for want of the record, never granted by mistake.
func (o *Orchestrator) recordTask(ctx context.Context, c *Call, invocation string, res *provider.Result, as []Attempt) *ReviewCheck {
	if c.Task == "" || o.s.Ledger == nil || res == nil || len(as) == 0 {
		return nil
	}
	last := as[len(as)-1]
	ev := ledger.TaskEvent{Task: c.Task, InvocationID: invocation, Agent: c.Agent, Provider: last.Provider, Model: last.Model}
	var rc *ReviewCheck
	switch {
	case o.isPlanner(c.Agent):
		ev.Kind = ledger.EventPlan
	case o.isCritic(c.Agent):
		ev.Kind = ledger.EventReview
		g := c.gate
		if g == nil {
			g = &taskGate{risk: critic.Low}
		}
		rev, err := critic.Verify(res.Content, last.Model, o.rules(g))
		ev.Reviewer = rev.Reviewer
		rc = &ReviewCheck{Task: c.Task, Risk: g.risk.String(), Reviewer: rev.Reviewer, Model: last.Model}
		if err != nil {
			var rj *critic.Rejection
			if errors.As(err, &rj) {
				rc.Problem = rj.Reason
			} else {
				rc.Problem = err.Error()
			}
			ev.Detail = rc.Problem
		}
	default:
		return nil
	}
	if err := o.s.Ledger.AddTaskEvent(ctx, ev); err != nil && !errors.Is(err, ledger.ErrNoTask) {
		o.notify(ctx, "critical", "task_record_failed", last.Provider, fmt.Sprintf("task %s: the %s of invocation %s was not recorded: %v", c.Task, ev.Kind, invocation, err))
		if rc != nil && rc.Problem == "" {
			rc.Problem = "the review could not be recorded: " + err.Error()
		}
	} else if errors.Is(err, ledger.ErrNoTask) {
		return nil
	}
	return rc
}
