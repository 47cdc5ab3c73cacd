package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// withStore opens the project's ledger for a command and closes it after.
// A report (readOnly) outside any project is refused rather than creating
// an empty ledger where it runs.
func (e *env) withStore(cmd *cobra.Command, readOnly bool, fn func(f *config.File, st ledger.Store) error) error {
	f, err := e.loadConfig(false)
	if err != nil {
		return err
	}
	if readOnly {
		if err := e.needProject(f); err != nil {
			return err
		}
	}
	st, err := e.openLedger(cmd.Context(), f)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := applyBudgets(cmd.Context(), st, f, ""); err != nil {
		return withCode(ExitFailure, err)
	}
	return fn(f, st)
}

func (e *env) spendCmd() *cobra.Command {
	var task, agent, key, session, by string
	var month, asJSON bool
	cmd := &cobra.Command{
		Use:   "spend [--task T] [--agent A] [--key ID] [--session S] [--by task|agent|model|month|key|session|host_agent] [--month]",
		Short: "What was spent, from the ledger: cost, tokens, attempts, cache hits and savings",
		Long: `What was spent, from the ledger: cost, tokens, attempts, cache hits and savings, in total
and grouped with --by.

Calls a coding agent (Claude Code, Codex) makes through the gateway carry its session id:
--by session groups the spend per host session, --session S keeps one session's calls, and
--by host_agent groups them per subagent of the host ("(main agent)" for the session's own
calls); with --session, each subagent is shown with the agent that started it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt := ledger.Filter{Task: task, Agent: agent, Key: gateway.PublicID(key), Session: session, By: ledger.GroupBy(by)}
			if !slices.Contains(ledger.GroupBys(), flt.By) {
				return withCode(ExitUsage, fmt.Errorf("--by %q: use task, agent, model, month, key, session or host_agent", by))
			}
			return e.withStore(cmd, true, func(f *config.File, st ledger.Store) error {
				flt.Location = budgetLocation(f)
				if month {
					now := time.Now().In(flt.Location)
					flt.From = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, flt.Location)
					flt.To = flt.From.AddDate(0, 1, 0)
				}
				rep, err := st.Spend(cmd.Context(), flt)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				w := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(w, rep)
				}
				var parents map[string]string
				if flt.By == ledger.ByHostAgent && flt.Session != "" {
					if parents, err = hostParents(cmd.Context(), st, flt); err != nil {
						return withCode(ExitFailure, err)
					}
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tCOST\tATTEMPTS\tTOKENS IN/OUT\tCACHE HITS\tSAVED")
				line := func(k string, t ledger.Totals) {
					fmt.Fprintf(tw, "%s\t$%s\t%d\t%d/%d\t%d\t$%s\n", k, t.Cost, t.Attempts, t.InputTokens, t.OutputTokens, t.CacheHits, t.Savings)
				}
				for _, g := range rep.Groups {
					line(groupName(flt, g.Key, parents), g.Totals)
				}
				line("total", rep.Total)
				if err := tw.Flush(); err != nil {
					return err
				}
				if rep.Total.Unpriced > 0 {
					_, names, _ := unpricedModels(cmd.Context(), st)
					fmt.Fprintf(w, "unpriced: %d attempt(s) charged their reservation, since the price catalog lists neither the model that answered nor the one requested (%s): %s\n", rep.Total.Unpriced, names, unpricedFix)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&task, "task", "", "only this task")
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent")
	cmd.Flags().StringVar(&key, "key", "", "only the calls made with this virtual key (its id, as 'serve keys list' shows it)")
	cmd.Flags().StringVar(&session, "session", "", "only the calls of this host session (a coding agent's session id, as 'spend --by session' shows it)")
	cmd.Flags().StringVar(&by, "by", "", "group by task, agent, model, month, key (the virtual key's id), session (the host's session id) or host_agent (the host's subagent id)")
	_ = cmd.RegisterFlagCompletionFunc("by", func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var names []string
		for _, g := range ledger.GroupBys()[1:] {
			names = append(names, string(g))
		}
		return candidates(names, prefix)
	})
	cmd.Flags().BoolVar(&month, "month", false, "only the current calendar month (budgets.timezone)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// groupName is how the spend table names a group of rows grouped by
// flt.By: the group's key, or what its empty key stands for; a subagent
// with its parent when parents knows it.
func groupName(flt ledger.Filter, key string, parents map[string]string) string {
	switch {
	case key != "" && parents[key] != "":
		return key + " (started by " + parents[key] + ")"
	case key != "":
		return key
	}
	switch flt.By {
	case ledger.ByKey:
		return "(no key)"
	case ledger.BySession:
		return "(no session)"
	case ledger.ByHostAgent:
		if flt.Session != "" {
			return "(main agent)"
		}
		return "(main agent, or no session)"
	}
	return key
}

// hostParents maps each subagent among the rows flt selects to the agent
// that started it, as the rows recorded it.
func hostParents(ctx context.Context, st ledger.Store, flt ledger.Filter) (map[string]string, error) {
	flt.By = ledger.ByNone
	rows, err := st.Attempts(ctx, flt)
	if err != nil {
		return nil, err
	}
	parents := map[string]string{}
	for _, r := range rows {
		if r.HostAgent != "" && r.ParentAgent != "" {
			parents[r.HostAgent] = r.ParentAgent
		}
	}
	return parents, nil
}

// parseScope reads "task:ID", "month:YYYY-MM" or "month" (this month).
func parseScope(s string, f *config.File) (ledger.Scope, error) {
	if s == "month" {
		return ledger.MonthScope(time.Now().In(budgetLocation(f))), nil
	}
	sc, err := ledger.ParseScope(s)
	if err != nil {
		return "", withCode(ExitUsage, fmt.Errorf("%v: write task:ID, month:YYYY-MM, month or key:ID[@YYYY-MM|@YYYY-MM-DD]", err))
	}
	return sc, nil
}

func (e *env) budgetCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "budget", Short: "Show and set task and monthly budgets"}
	var asJSON bool
	show := &cobra.Command{
		Use: "show", Short: "Every budget: limit, spent, held, remaining, paused", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withStore(cmd, true, func(f *config.File, st ledger.Store) error {
				bs, err := st.Budgets(cmd.Context())
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if asJSON {
					if bs == nil {
						bs = []ledger.Budget{}
					}
					return writeJSON(cmd.OutOrStdout(), bs)
				}
				as, err := st.Alerts(cmd.Context(), recentAlerts)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				w := cmd.OutOrStdout()
				if len(bs) == 0 {
					fmt.Fprintln(w, "no budgets: set budgets.task / budgets.project_monthly in llm-config.yaml or run 'cortexbuild budget set month AMOUNT'")
				} else {
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "SCOPE\tLIMIT\tSPENT\tHELD\tREMAINING\tSTATE")
					for _, b := range bs {
						rem, _ := b.Remaining()
						state := "active"
						if b.Paused {
							state = "paused: " + b.PauseReason
						}
						fmt.Fprintf(tw, "%s\t$%s\t$%s\t$%s\t$%s\t%s\n", b.Scope, b.Limit, b.Spent, b.Held, rem, state)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				if len(as) == 0 {
					return nil
				}
				fmt.Fprintf(w, "\nalerts, newest first (the last %d; 'cortexbuild budget alerts' lists them all):\n", recentAlerts)
				return writeAlerts(w, as)
			})
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var limit int
	alerts := &cobra.Command{
		Use: "alerts [--limit N] [--json]", Short: "The budget alerts: each threshold of a budget (budgets.alerts) its spend crossed, newest first, and whether it was announced", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return withCode(ExitUsage, fmt.Errorf("--limit %d: give how many of the newest alerts to list, or 0 for all", limit))
			}
			return e.withStore(cmd, true, func(f *config.File, st ledger.Store) error {
				as, err := st.Alerts(cmd.Context(), limit)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), as)
				}
				if len(as) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no budget alerts: no budget's spend has crossed a threshold of budgets.alerts")
					return nil
				}
				return writeAlerts(cmd.OutOrStdout(), as)
			})
		},
	}
	alerts.Flags().IntVar(&limit, "limit", 0, "only the N newest (0: all)")
	alerts.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	set := &cobra.Command{
		Use: "set SCOPE AMOUNT", Short: "Set a limit in USD (task:ID, month:YYYY-MM or month), kept in the ledger; it wins over the configuration's default for that scope until 'budget unset'; raising it lifts a budget pause", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, false, func(f *config.File, st ledger.Store) error {
				sc, err := parseScope(args[0], f)
				if err != nil {
					return err
				}
				m, err := provider.ParseMoney(args[1])
				if err != nil || m < 0 {
					return withCode(ExitUsage, fmt.Errorf("amount %q: write a non-negative USD amount such as 25.00", args[1]))
				}
				old, err := st.Budget(cmd.Context(), sc)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if err := st.SetBudget(cmd.Context(), sc, m); err != nil {
					return withCode(ExitFailure, err)
				}
				b, _ := st.Budget(cmd.Context(), sc)
				was := "none"
				if old.Limited {
					was = "$" + old.Limit.String()
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "%s: limit $%s (was %s), spent $%s%s\n", sc, b.Limit, was, b.Spent, pausedNote(b))
				fmt.Fprintf(w, "recorded in %s", e.storeName(f))
				if def, key, pos := configuredBudget(f, sc); def != nil {
					fmt.Fprintf(w, "; it overrides %s ($%s, %s) for %s until 'cortexbuild budget unset %s'", key, def, pos, sc, sc)
				}
				fmt.Fprintln(w)
				return nil
			})
		},
	}
	unset := &cobra.Command{
		Use: "unset SCOPE", Short: "Remove the limit set with 'budget set' (task:ID, month:YYYY-MM or month): the configuration's default applies again, if it sets one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, false, func(f *config.File, st ledger.Store) error {
				sc, err := parseScope(args[0], f)
				if err != nil {
					return err
				}
				if err := st.RemoveBudget(cmd.Context(), sc); err != nil {
					return withCode(ExitFailure, err)
				}
				w := cmd.OutOrStdout()
				def, key, pos := configuredBudget(f, sc)
				if def == nil {
					b, _ := st.Budget(cmd.Context(), sc)
					fmt.Fprintf(w, "%s: no limit now (spent $%s), in %s\n", sc, b.Spent, e.storeName(f))
					return nil
				}
				if _, err := st.SetDefaultBudget(cmd.Context(), sc, *def); err != nil {
					return withCode(ExitFailure, err)
				}
				b, _ := st.Budget(cmd.Context(), sc)
				fmt.Fprintf(w, "%s: limit $%s from %s (%s), spent $%s%s, in %s\n", sc, b.Limit, key, pos, b.Spent, pausedNote(b), e.storeName(f))
				return nil
			})
		},
	}
	resume := &cobra.Command{
		Use: "resume SCOPE", Short: "Lift the pause of a scope (task:ID, month:YYYY-MM or month); raising its budget lifts a budget pause too", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withStore(cmd, false, func(f *config.File, st ledger.Store) error {
				sc, err := parseScope(args[0], f)
				if err != nil {
					return err
				}
				if err := st.Resume(cmd.Context(), sc); err != nil {
					return withCode(ExitFailure, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s resumed\n", sc)
				return nil
			})
		},
	}
	cmd.AddCommand(show, alerts, set, unset, resume)
	return cmd
}

// recentAlerts is how many alerts 'budget show' lists.
const recentAlerts = 10

// writeAlerts lists budget alerts as a table.
func writeAlerts(w io.Writer, as []ledger.Alert) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CROSSED\tSCOPE\tTHRESHOLD\tSPENT\tLIMIT\tANNOUNCED")
	for _, a := range as {
		announced := "not yet"
		if !a.NotifiedAt.IsZero() {
			announced = a.NotifiedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d%%\t$%s\t$%s\t%s\n", a.CrossedAt.Format(time.RFC3339), a.Scope, a.Threshold, a.Spent, a.Limit, announced)
	}
	return tw.Flush()
}

func pausedNote(b ledger.Budget) string {
	if b.Paused {
		return " (still paused: " + b.PauseReason + ")"
	}
	return ""
}

func limitOf(m *provider.Money) string {
	if m == nil {
		return ""
	}
	return m.String()
}

// needProject refuses a command that reads a project's records where there
// is no project: no llm-config.yaml was found in the directory or above it,
// and no ledger was ever written there.
func (e *env) needProject(f *config.File) error {
	if f.Path != "" || f.Store.Backend == config.StorePostgres {
		return nil
	}
	path := e.sqlitePath(f)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return withCode(ExitConfig, fmt.Errorf("no CortexBuild project in %s: no %s there or in a parent directory, and no ledger (%s); run this in a project's directory, or start one with 'cortexbuild init'", e.projectDir(f), filepath.Join(config.Dir, config.FileName), filepath.Join(config.Dir, "state.db")))
}
