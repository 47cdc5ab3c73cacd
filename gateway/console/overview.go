package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Alert is a budget alert: a scope whose spend crossed Threshold percent
// of its limit, announced at At.
type Alert struct {
	Scope     string
	Threshold int
	Spent     provider.Money
	Limit     provider.Money
	At        time.Time
}

// failureWindow is how far back the overview looks for failed attempts.
const failureWindow = 30 * 24 * time.Hour

// maxFailures is how many failed attempts the overview lists.
const maxFailures = 10

// budgetUse is one scope with a limit, as the overview shows it.
type budgetUse struct {
	Scope              string
	Spent, Held, Limit provider.Money
	Percent            int
	Paused             bool
	Reason             string
	Over, Near         bool
}

type pausedScope struct {
	Scope, Reason string
}

type configuredBudget struct {
	Name, Value string
}

type failureView struct {
	Time                         time.Time
	Agent, Task, Provider, Model string
	Outcome, Detail              string
}

type overviewData struct {
	Health []healthRow

	Day, Month            string
	Today, MonthTotal     provider.Money
	MonthLimited          bool
	MonthLimit, MonthLeft provider.Money
	MonthPercent          int
	Configured            []configuredBudget
	Budgets               []budgetUse
	ProjectPaused         bool
	ProjectReason         string
	Paused                []pausedScope
	Failures              []failureView
	FailureDays           int
	AlertsOn              bool
	Alerts                []Alert
	AlertsError           string
}

// percent is spent as a whole percentage of limit, rounded down.
func percent(spent, limit provider.Money) int {
	if limit <= 0 {
		return 0
	}
	return int(float64(spent) * 100 / float64(limit))
}

// outcomeText says in a few words what a ledger outcome (a failure kind)
// means: the ledger keeps the kind of a failure, not its message.
var outcomeText = map[string]string{
	"timeout":                 "the attempt ran out of time",
	"rate_limit":              "rate limited by the provider",
	"auth":                    "the provider refused the credentials",
	"bad_request":             "the provider refused the request as malformed",
	"server":                  "the provider failed (5xx)",
	"network":                 "the provider could not be reached",
	"capability_missing":      "the model cannot do what the request needs",
	"quota_exhausted":         "the provider's quota is used up",
	"context_window_exceeded": "the prompt does not fit the model's context window",
	"overloaded":              "the provider is overloaded",
	"canceled":                "the caller cancelled the call",
	"unknown":                 "an unclassified failure",
}

func (c *Console) overviewData(ctx context.Context) (overviewData, error) {
	st := c.opts.Ledger
	now := c.opts.Now().In(c.opts.Location)
	today := dayStart(now)
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, c.opts.Location)
	d := overviewData{Health: c.healthRows(ctx), Day: today.Format(time.DateOnly), Month: monthStart.Format("2006-01"),
		FailureDays: int(failureWindow / (24 * time.Hour))}
	var errs []error
	if rep, err := st.Spend(ctx, ledger.Filter{From: today, To: today.AddDate(0, 0, 1)}); err == nil {
		d.Today = rep.Total.Cost
	} else {
		errs = append(errs, err)
	}
	if rep, err := st.Spend(ctx, ledger.Filter{From: monthStart, To: monthStart.AddDate(0, 1, 0)}); err == nil {
		d.MonthTotal = rep.Total.Cost
	} else {
		errs = append(errs, err)
	}
	monthScope := ledger.MonthScope(now)
	budgets, err := st.Budgets(ctx)
	errs = append(errs, err)
	for _, b := range budgets {
		u := budgetUse{Scope: b.Scope.String(), Spent: b.Spent, Held: b.Held, Limit: b.Limit, Percent: percent(b.Spent, b.Limit),
			Paused: b.Paused, Reason: b.PauseReason}
		u.Over, u.Near = u.Percent >= 100, u.Percent >= 80
		d.Budgets = append(d.Budgets, u)
		if b.Scope == monthScope {
			d.MonthLimited, d.MonthLimit, d.MonthPercent = true, b.Limit, u.Percent
			d.MonthLeft, _ = b.Remaining()
		}
	}
	b := c.opts.Config.Budgets
	for _, cb := range []struct {
		name string
		v    *provider.Money
	}{{"project_monthly", b.ProjectMonthly}, {"task (each task)", b.Task}, {"confirm_above (one invocation)", b.ConfirmAbove}} {
		if cb.v != nil {
			d.Configured = append(d.Configured, configuredBudget{Name: cb.name, Value: "$" + cb.v.String()})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.opts.AgentBudgets)) {
		d.Configured = append(d.Configured, configuredBudget{Name: "agent " + name + " (per call)", Value: "$" + c.opts.AgentBudgets[name].String()})
	}

	reason, paused, err := c.opts.State.Paused(ctx)
	errs = append(errs, err)
	d.ProjectPaused, d.ProjectReason = paused, reason
	tasks, err := c.taskStates(ctx, budgets)
	errs = append(errs, err)
	for _, t := range tasks {
		if t.Paused {
			d.Paused = append(d.Paused, pausedScope{Scope: ledger.TaskScope(t.ID).String(), Reason: t.Reason})
		}
	}
	for _, b := range budgets {
		if b.Paused && b.Scope.Kind() != ledger.KindTask {
			d.Paused = append(d.Paused, pausedScope{Scope: b.Scope.String(), Reason: b.PauseReason})
		}
	}

	if rows, err := st.Attempts(ctx, ledger.Filter{From: now.Add(-failureWindow)}); err == nil {
		for i := len(rows) - 1; i >= 0 && len(d.Failures) < maxFailures; i-- {
			a := rows[i]
			if a.Outcome == "ok" {
				continue
			}
			d.Failures = append(d.Failures, failureView{Time: a.Time, Agent: a.Agent, Task: a.Task, Provider: a.Provider, Model: a.Model,
				Outcome: a.Outcome, Detail: outcomeText[a.Outcome]})
		}
	} else {
		errs = append(errs, err)
	}

	if c.opts.Alerts != nil {
		d.AlertsOn = true
		alerts, err := c.opts.Alerts(ctx)
		if err != nil {
			d.AlertsError = "The alerts could not be read: " + err.Error()
		}
		d.Alerts = alerts
		slices.SortStableFunc(d.Alerts, func(a, b Alert) int { return b.At.Compare(a.At) })
	}
	return d, errors.Join(errs...)
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := c.overviewData(r.Context())
	p := c.page(r, s, "overview", "Overview", overviewView(d))
	if err != nil {
		p.Error = "Part of the overview could not be read: " + err.Error()
	}
	c.render(w, http.StatusOK, p)
}
