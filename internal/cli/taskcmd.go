package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

func (e *env) taskCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Tasks: risk, budget, spend, pause, critic review and completion"}
	var budget, risk string
	start := &cobra.Command{
		Use:   "start ID [--risk low|medium|high|critical] [--budget AMOUNT]",
		Short: "Start a task with a risk level (default low) and a budget (default budgets.task)",
		Long: `start records a task with its risk level. On a task of medium risk or more the critic
must run on a model other than the one that authored the plan, and the task can be completed
only after such a review. Starting a task again changes its budget, or raises its risk; a risk
is never lowered.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, false, func(f *config.File, st ledger.Store) error {
				ctx, id := cmd.Context(), args[0]
				sc := ledger.TaskScope(id)
				if err := sc.Validate(); err != nil {
					return withCode(ExitUsage, err)
				}
				lvl := critic.Low
				if risk != "" {
					r, err := critic.ParseRisk(risk)
					if err != nil {
						return withCode(ExitUsage, fmt.Errorf("--risk: %w", err))
					}
					lvl = r
				} else if t, err := st.Task(ctx, id); err == nil {
					lvl, _ = critic.ParseRisk(t.Risk)
				}
				limit := f.Budgets.Task
				if budget != "" {
					m, err := provider.ParseMoney(budget)
					if err != nil || m < 0 {
						return withCode(ExitUsage, fmt.Errorf("--budget %q: write a non-negative USD amount", budget))
					}
					limit = &m
				}
				t, err := orchestrator.StartTask(ctx, st, id, lvl)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if limit != nil {
					if err := st.SetBudget(ctx, sc, *limit); err != nil {
						return withCode(ExitFailure, err)
					}
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "task %s started, risk %s, %s\n", id, t.Risk, map[bool]string{true: "budget $" + limitOf(limit), false: "no budget"}[limit != nil])
				if lvl.Gated() {
					fmt.Fprintf(w, "completion needs a critic review on a model other than the plan's author ('cortexbuild task complete %s')\n", id)
				}
				return nil
			})
		},
	}
	start.Flags().StringVar(&budget, "budget", "", "limit in USD")
	start.Flags().StringVar(&risk, "risk", "", "risk level: low, medium, high or critical (default: low, or the task's current one)")

	var asJSON bool
	show := &cobra.Command{
		Use: "show ID [--json]", Short: "A task's audit trail: risk, plan author, reviewer, decision, budget, spend and every attempt", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, true, func(f *config.File, st ledger.Store) error {
				return e.showTask(cmd, st, args[0], asJSON)
			})
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var completeJSON bool
	complete := &cobra.Command{
		Use: "complete ID", Short: "Complete a task; medium-or-higher risk needs a valid independent critic review", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, false, func(f *config.File, st ledger.Store) error {
				t, err := orchestrator.CompleteTask(cmd.Context(), st, args[0])
				var rj *critic.Rejection
				switch {
				case errors.As(err, &rj):
					return withCode(ExitFailure, fmt.Errorf("task %s cannot be completed: %s; %s", args[0], rj.Reason, rj.Fix))
				case err != nil:
					return withCode(ExitFailure, err)
				}
				if completeJSON {
					return writeJSON(cmd.OutOrStdout(), t)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "task %s completed: %s\n", t.ID, t.Events[len(t.Events)-1].Detail)
				return nil
			})
		},
	}
	complete.Flags().BoolVar(&completeJSON, "json", false, "print the completed task as JSON")

	resume := &cobra.Command{
		Use: "resume ID", Short: "Lift a task's pause (raising its budget does too)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, false, func(f *config.File, st ledger.Store) error {
				if err := st.Resume(cmd.Context(), ledger.TaskScope(args[0])); err != nil {
					return withCode(ExitFailure, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "task %s resumed\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(start, show, complete, resume)
	return cmd
}

// taskView is what 'task show --json' prints.
type taskView struct {
	ID       string              `json:"id"`
	Started  bool                `json:"started"`
	Risk     string              `json:"risk,omitempty"`
	State    string              `json:"state,omitempty"`
	Authors  []string            `json:"plan_authors"`
	Reviewer string              `json:"reviewer,omitempty"`
	Decision string              `json:"decision,omitempty"`
	Budget   ledger.Budget       `json:"budget"`
	Cost     provider.Money      `json:"cost_usd"`
	Events   []ledger.TaskEvent  `json:"events"`
	Attempts []ledger.AttemptRow `json:"attempts"`
}

func (e *env) showTask(cmd *cobra.Command, st ledger.Store, id string, asJSON bool) error {
	ctx := cmd.Context()
	v := taskView{ID: id, Authors: []string{}, Events: []ledger.TaskEvent{}, Attempts: []ledger.AttemptRow{}}
	t, err := st.Task(ctx, id)
	switch {
	case err == nil:
		v.Started, v.Risk, v.State, v.Events = true, t.Risk, t.State, t.Events
	case !errors.Is(err, ledger.ErrNoTask):
		return withCode(ExitFailure, err)
	}
	if v.Budget, err = st.Budget(ctx, ledger.TaskScope(id)); err != nil {
		return withCode(ExitFailure, err)
	}
	rows, err := st.Attempts(ctx, ledger.Filter{Task: id})
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if !v.Started && len(rows) == 0 && !v.Budget.Limited {
		return withCode(ExitFailure, fmt.Errorf("task %s does not exist: no task was started with that id and no invocation names it ('cortexbuild task start %s')", id, id))
	}
	if rows != nil {
		v.Attempts = rows
	}
	for _, r := range rows {
		v.Cost += r.Cost
	}
	for _, ev := range v.Events {
		switch ev.Kind {
		case ledger.EventPlan:
			v.Authors = appendModel(v.Authors, ev.Model)
		case ledger.EventReview:
			v.Reviewer = ev.Reviewer
		case ledger.EventCompleted, ledger.EventRejected:
			v.Decision = ev.Kind + ": " + ev.Detail
		}
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	printTask(cmd.OutOrStdout(), v)
	return nil
}

func appendModel(ms []string, m string) []string {
	for _, x := range ms {
		if critic.SameModel(x, m) {
			return ms
		}
	}
	return append(ms, m)
}

func printTask(w io.Writer, v taskView) {
	if v.Started {
		fmt.Fprintf(w, "task %s: risk %s, %s\n", v.ID, v.Risk, v.State)
	} else {
		fmt.Fprintf(w, "task %s: not started with 'task start' (risk low, not gated)\n", v.ID)
	}
	fmt.Fprintf(w, "plan author: %s\n", orNone(strings.Join(v.Authors, ", ")))
	fmt.Fprintf(w, "reviewer:    %s\n", orNone(v.Reviewer))
	fmt.Fprintf(w, "decision:    %s\n", orNone(v.Decision))
	if v.Budget.Limited {
		rem, _ := v.Budget.Remaining()
		fmt.Fprintf(w, "spend:       $%s of $%s (remaining $%s)%s\n", v.Budget.Spent, v.Budget.Limit, rem, pausedNote(v.Budget))
	} else {
		fmt.Fprintf(w, "spend:       $%s, no budget\n", v.Budget.Spent)
	}
	if len(v.Events) > 0 {
		fmt.Fprintln(w, "\nTRAIL")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, ev := range v.Events {
			who := ev.Agent
			if ev.Model != "" {
				who += " on " + ev.Provider + "/" + ev.Model
			}
			what := ev.Detail
			if ev.Kind == ledger.EventReview {
				what = "independent_reviewer " + orNone(ev.Reviewer)
				if ev.Detail != "" {
					what += " (does not count: " + ev.Detail + ")"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ev.Time.Format(time.RFC3339), ev.Kind, orNone(who), what)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nATTEMPTS")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tAGENT\tPROVIDER/MODEL\tOUTCOME\tTOKENS IN/OUT\tCOST")
	for _, r := range v.Attempts {
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%d/%d\t$%s\n", r.Time.Format(time.RFC3339), r.Agent, r.Provider, r.Model, r.Outcome, r.InputTokens, r.OutputTokens, r.Cost)
	}
	tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
