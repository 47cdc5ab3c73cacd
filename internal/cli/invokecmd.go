package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

func (e *env) invokeCmd() *cobra.Command {
	var agent, task, tier, model, needs, system string
	var maxTokens int
	var stream, asJSON, yes bool
	cmd := &cobra.Command{
		Use:   "invoke [flags] [PROMPT]",
		Short: "Send one prompt through the orchestrator (orchestration mode only)",
		Long: `invoke routes a prompt as the given agent would: the agent's tier, the providers that have
the capabilities it needs, in preference order, with the failure policy applied. It shows the
cost estimate before calling; on a terminal it asks for confirmation above budgets.confirm_above.
It then prints the answer and, on standard error, the model used, tokens, cost, latency and
every attempt. The prompt comes from the argument or, when absent, standard input.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			if err := e.requireOrchestration(f); err != nil {
				return err
			}
			prompt := ""
			if len(args) == 1 {
				prompt = args[0]
			} else {
				b, err := io.ReadAll(e.stdin)
				if err != nil {
					return withCode(ExitFailure, err)
				}
				prompt = strings.TrimSpace(string(b))
			}
			if prompt == "" {
				return withCode(ExitUsage, errors.New("no prompt: pass it as an argument or on standard input"))
			}
			if cmd.Flags().Changed("max-tokens") && maxTokens < 1 {
				return withCode(ExitUsage, fmt.Errorf("--max-tokens must be at least 1, got %d: give the output token limit, or leave the flag out for the agent's", maxTokens))
			}
			if err := checkAgent(f, "--agent", agent); err != nil {
				return err
			}
			call := orchestrator.Call{Agent: agent, Task: task, Request: provider.Request{System: system, Prompt: prompt, Model: model, MaxTokens: maxTokens}}
			if err := routingFlags(&call, tier, needs); err != nil {
				return err
			}
			e.onWait = e.sayWait
			o, closeStore, err := e.engineWith(cmd.Context(), f, task, true)
			if err != nil {
				return err
			}
			defer closeStore()
			if n, ok := o.OutputLimit(cmd.Context(), call); ok && maxTokens > n {
				fmt.Fprintf(e.stderr, "max tokens: %d is above the model's output limit; clamped to %d\n", maxTokens, n)
				call.Request.MaxTokens = n
			}
			if tr := o.Route(cmd.Context(), call); len(tr.Kept()) > 0 {
				kept := tr.Kept()
				e.askConsent(cmd, f, kept[0].Provider)
			}
			if est, where, ok := e.estimate(cmd.Context(), o, call); ok {
				fmt.Fprintf(e.stderr, "estimate: at most $%s on %s\n", est, where)
				if limit := f.Budgets.ConfirmAbove; limit != nil && est > *limit && !yes {
					if !isTerminal(e.stdin) {
						return withCode(ExitFailure, fmt.Errorf("the estimate $%s is above budgets.confirm_above ($%s): pass --yes to go ahead", est, limit))
					}
					if !e.confirm(fmt.Sprintf("estimate $%s is above $%s; invoke?", est, limit)) {
						return withCode(ExitFailure, errors.New("not confirmed"))
					}
				}
			}
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			var oc orchestrator.Outcome
			if stream {
				s, err := o.Stream(ctx, call)
				if errors.As(err, new(*orchestrator.EstimateError)) {
					if call, err = e.approve(call, err); err == nil {
						s, err = o.Stream(ctx, call)
					}
				}
				if err != nil {
					return e.invokeFailed(err)
				}
				for c, err := range provider.Chunks(s) {
					if err != nil {
						e.printAttempts(s.Attempts())
						return e.invokeFailed(err)
					}
					if !asJSON {
						fmt.Fprint(w, c.Text)
					}
					if c.Final {
						oc.Result = c.Result
					}
				}
				oc.Attempts, oc.Trace, oc.Review, oc.InvocationID, oc.Estimate = s.Attempts(), s.Trace(), s.Review(), s.InvocationID(), s.Estimate()
				if !asJSON {
					fmt.Fprintln(w)
				}
			} else {
				out, err := o.Invoke(ctx, call)
				if errors.As(err, new(*orchestrator.EstimateError)) {
					if call, err = e.approve(call, err); err == nil {
						out, err = o.Invoke(ctx, call)
					}
				}
				if err != nil {
					return e.invokeFailed(err)
				}
				oc = *out
				res := oc.Result
				if !asJSON {
					fmt.Fprintln(w, res.Content)
					for _, tc := range res.ToolCalls {
						fmt.Fprintf(w, "tool call %s %s(%s)\n", tc.ID, tc.Name, tc.Arguments)
					}
				}
			}
			if asJSON {
				return writeJSON(w, oc)
			}
			res, review := oc.Result, oc.Review
			if review != nil {
				if review.Problem == "" {
					fmt.Fprintf(e.stderr, "critic gate (task %s, risk %s): independent_reviewer %s recorded\n", review.Task, review.Risk, review.Reviewer)
				} else {
					fmt.Fprintf(e.stderr, "critic gate (task %s, risk %s): this review does not count: %s\n", review.Task, review.Risk, review.Problem)
				}
			}
			fmt.Fprintf(e.stderr, "model %s on %s · %d in (%d cached) + %d out tokens%s · $%s · %s\n",
				res.Model, res.Provider, res.Usage.InputTokens, res.Usage.CacheReadTokens, res.Usage.OutputTokens, estimatedMark(res.Usage), res.Cost, res.Latency.Round(time.Millisecond))
			e.printAttempts(oc.Attempts)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&agent, "agent", "", "route as this agent (planner, critic, builder, …)")
	fl.StringVar(&task, "task", "", "task id the invocation belongs to")
	fl.StringVar(&system, "system", "", "system prompt (an agent persona)")
	fl.StringVar(&tier, "tier", "", "tier: reasoning_heavy, balanced or fast_cheap (default: the agent's)")
	fl.StringVar(&model, "model", "", "exact model, overriding the tier")
	fl.StringVar(&needs, "needs", "", "required capabilities, comma-separated (e.g. tool_use,long_context_1m)")
	fl.IntVar(&maxTokens, "max-tokens", 0, "output token limit (default: the agent's, else 4096)")
	fl.BoolVar(&stream, "stream", false, "print the answer as it arrives")
	fl.BoolVar(&asJSON, "json", false, "print the result object as JSON")
	fl.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation above budgets.confirm_above")
	return cmd
}

// approve asks on a terminal whether a call above its agent's escalating
// budget may run; elsewhere the estimate error stands.
func (e *env) approve(call orchestrator.Call, err error) (orchestrator.Call, error) {
	var ee *orchestrator.EstimateError
	if !errors.As(err, &ee) || !ee.NeedsApproval || !isTerminal(e.stdin) {
		return call, err
	}
	if !e.confirm(ee.Error() + "; approve?") {
		return call, err
	}
	call.Approved = true
	return call, nil
}

// routingFlags applies --tier and --needs to a call.
func routingFlags(call *orchestrator.Call, tier, needs string) error {
	if tier != "" {
		t, err := provider.ParseTier(tier)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		call.Request.Tier = t
	}
	if needs != "" {
		s, err := provider.ParseCapabilitySet(needs)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		call.Needs = s
	}
	return nil
}

func estimatedMark(u provider.Usage) string {
	if u.Estimated {
		return " (estimated)"
	}
	return ""
}

// estimate prices the call on the provider the router would try first.
func (e *env) estimate(ctx context.Context, o *orchestrator.Orchestrator, c orchestrator.Call) (provider.Money, string, bool) {
	tr := o.Route(ctx, c)
	kept := tr.Kept()
	if len(kept) == 0 {
		return 0, "", false
	}
	req := c.Request
	req.Model, req.Tier = kept[0].Model, kept[0].Tier
	est, err := o.Estimate(kept[0].Provider, &req)
	if err != nil {
		fmt.Fprintf(e.stderr, "estimate: unavailable (%v)\n", err)
		return 0, "", false
	}
	return est, kept[0].Provider + "/" + kept[0].Model, true
}

func (e *env) printAttempts(as []orchestrator.Attempt) {
	if len(as) < 2 && (len(as) == 0 || as[0].Outcome == "ok") {
		return
	}
	fmt.Fprintln(e.stderr, "attempts:")
	for i, a := range as {
		line := fmt.Sprintf("  %d. %s/%s (%s): %s", i+1, a.Provider, a.Model, a.Tier, a.Outcome)
		if a.Waited > 0 {
			line += fmt.Sprintf(" after waiting %s", a.Waited.Round(time.Millisecond))
		}
		if a.Error != "" {
			line += " — " + a.Error
		}
		fmt.Fprintln(e.stderr, line)
	}
}

func (e *env) invokeFailed(err error) error {
	var oe *orchestrator.Error
	if errors.As(err, &oe) {
		e.printAttempts(oe.Attempts)
	}
	return withCode(ExitFailure, err)
}

func (e *env) routeCmd() *cobra.Command {
	var agent, tier, needs, task string
	var asJSON, explain bool
	cmd := &cobra.Command{
		Use:   "route --agent AGENT [--task T] [--needs CAPS] [--explain]",
		Short: "Explain where an agent's call would go: every candidate and why it was kept or dropped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			if err := checkAgent(f, "--agent", agent); err != nil {
				return err
			}
			o, closeStore, err := e.engineWith(cmd.Context(), f, "", task != "")
			if err != nil {
				return err
			}
			defer closeStore()
			call := orchestrator.Call{Agent: agent, Task: task}
			if err := routingFlags(&call, tier, needs); err != nil {
				return err
			}
			tr := o.Route(cmd.Context(), call)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), tr)
			}
			fmt.Fprint(cmd.OutOrStdout(), tr.String())
			if len(tr.Kept()) == 0 {
				return withCode(ExitFailure, errors.New("no candidate can serve this call"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent to route as")
	cmd.Flags().StringVar(&tier, "tier", "", "override the agent's tier")
	cmd.Flags().StringVar(&task, "task", "", "route as a call on this task (a critic on a medium-or-higher risk task avoids the plan author's model)")
	cmd.Flags().StringVar(&needs, "needs", "", "required capabilities, comma-separated")
	cmd.Flags().BoolVar(&explain, "explain", true, "print every candidate and the reason (always on; kept for scripts)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the trace as JSON")
	return cmd
}

func (e *env) projectCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "project", Short: "Project state: pause after refused credentials, and resume"}
	status := &cobra.Command{
		Use: "status", Short: "Say whether the project is paused and why", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			st := e.projectState(f)
			reason, paused, err := st.Paused(cmd.Context())
			if err != nil {
				return withCode(ExitFailure, err)
			}
			if paused {
				fmt.Fprintf(cmd.OutOrStdout(), "paused: %s\nresume with: cortexbuild project resume\n", reason)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), "active")
			return nil
		},
	}
	resume := &cobra.Command{
		Use: "resume", Short: "Lift the pause once the cause (for example a revoked key) is fixed", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			st := e.projectState(f)
			if err := st.Resume(cmd.Context()); err != nil {
				return withCode(ExitFailure, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "resumed")
			return nil
		},
	}
	cmd.AddCommand(status, resume)
	return cmd
}

// sayWait tells the person running invoke that the call waits, for whom,
// how long and until when, so that a rate limit's wait is not silence.
// Waits under a second pass unsaid.
func (e *env) sayWait(prov string, d time.Duration, why string) {
	if d < time.Second {
		return
	}
	fmt.Fprintf(e.stderr, "cortexbuild: %s %s: waiting %s, until %s (Ctrl-C stops the call)\n", prov, why, d.Round(time.Second), time.Now().Add(d).Format("15:04:05"))
}
