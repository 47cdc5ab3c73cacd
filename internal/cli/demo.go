package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/internal/sim"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// demoStep is one agent's turn in the scripted task.
type demoStep struct {
	agent, prompt, note string
	needs               provider.CapabilitySet
	fault               string
	stream              bool
	task                string
}

var demoSteps = []demoStep{
	{agent: "planner", prompt: "Plan how to add a /healthz endpoint to the web service.",
		note: "reasoning_heavy: the first preferred provider's largest model"},
	{agent: "builder", prompt: "Implement the /healthz handler and its test.", fault: "anthropic:529x3",
		note: "anthropic answers 529 overloaded three times: backoff, then failover"},
	{agent: "tester_validator", prompt: "List the regression tests this change needs.", fault: "anthropic:429:retry-after=30",
		note: "anthropic rate-limits a stream; alternates are allowed, so the next provider answers at once", stream: true},
	{agent: "critic", prompt: "Review the plan and the diff for blind spots.", needs: provider.NewCapabilitySet(provider.CapLongContext1M),
		note: "needs a 1M-token context: candidates without it are dropped; anthropic waits out its rate limit, so it goes last"},
	{agent: "explore", prompt: "Summarise the repository layout.", fault: "openai:cut",
		note: "the answer is cut off mid-body: a network error, retried once on the same provider"},
	{agent: "explore", prompt: "Summarise the repository layout.",
		note: "the same read-only question again: answered from the response cache, at no cost"},
	{agent: "builder", prompt: "Refactor the handler into its own package.", task: "demo-small",
		note: "task demo-small has a $0.000001 budget, less than the smallest call: nothing is sent and the task pauses (a call that merely does not fit pauses nothing)"},
	{agent: "explore", prompt: "List the files the refactor touches.", task: "demo-small",
		note: "the paused task refuses even a small call, until its budget is raised or it is resumed"},
}

func (e *env) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run a scripted multi-agent task against the built-in simulator: routing, failures, failover, cost",
		Long: `demo starts the provider simulator on loopback (no keys, no network, no cost), points a
throw-away orchestration configuration at it, and runs five agents of a small task through the
orchestrator with injected failures, printing the route, every attempt, the failover and the cost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.demo(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

func (e *env) demo(ctx context.Context, w io.Writer) error {
	s, err := sim.Start(ctx, sim.Options{Seed: 1})
	if err != nil {
		return withCode(ExitFailure, err)
	}
	defer s.Close()
	dir, err := os.MkdirTemp("", "cortexbuild-demo-")
	if err != nil {
		return withCode(ExitFailure, err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, config.Dir, config.FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return withCode(ExitFailure, err)
	}
	if err := os.WriteFile(path, s.Config(), 0o600); err != nil {
		return withCode(ExitFailure, err)
	}
	f, err := config.Load(path, e.registry)
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("the simulator's configuration: %w", err))
	}
	de := *e
	de.lookupEnv = func(k string) (string, bool) {
		if k == sim.KeyEnv {
			return sim.Key, true
		}
		return e.lookupEnv(k)
	}
	f.Cache.Backend = config.CacheMemory // the sim's file turns the cache off; the demo shows it
	o, closeStore, err := de.engineWith(ctx, f, "", true)
	if err != nil {
		return err
	}
	defer closeStore()
	store := o.Ledger()
	if err := store.SetBudget(ctx, ledger.TaskScope("demo-small"), provider.MustMoney("0.000001")); err != nil {
		return withCode(ExitFailure, err)
	}
	fmt.Fprintf(w, "CortexBuild demo: a task through the orchestrator, against the simulator on loopback\n")
	for _, ep := range s.Endpoints() {
		fmt.Fprintf(w, "  %-9s %s\n", ep.Provider, ep.BaseURL)
	}
	fmt.Fprintf(w, "preference %s, alternates allowed, no keys, no network\n\n", strings.Join(f.Routing.Preference, " > "))

	type row struct {
		agent, where, outcome string
		usage                 provider.Usage
		cost                  provider.Money
		attempts              int
	}
	var rows []row
	var total provider.Money
	for i, st := range demoSteps {
		if st.fault != "" {
			flt, err := sim.ParseFault(st.fault)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			if err := s.Inject(flt); err != nil {
				return withCode(ExitFailure, err)
			}
		}
		task := "demo-healthz"
		if st.task != "" {
			task = st.task
		}
		call := orchestrator.Call{Agent: st.agent, Task: task, Needs: st.needs, Request: provider.Request{Prompt: st.prompt, MaxTokens: 512}}
		tr := o.Route(ctx, call)
		fmt.Fprintf(w, "%d. %s — %s\n", i+1, st.agent, st.note)
		if st.fault != "" {
			fmt.Fprintf(w, "   injected: %s\n", st.fault)
		}
		for _, line := range strings.Split(strings.TrimRight(tr.String(), "\n"), "\n")[1:] {
			fmt.Fprintf(w, "   route %s\n", strings.TrimSpace(line))
		}
		if kept := tr.Kept(); len(kept) > 0 {
			req := call.Request
			req.Model, req.Tier = kept[0].Model, kept[0].Tier
			if est, err := o.Estimate(kept[0].Provider, &req); err == nil {
				fmt.Fprintf(w, "   estimate: at most $%s\n", est)
			}
		}
		var res *provider.Result
		var attempts []orchestrator.Attempt
		if st.stream {
			stream, err := o.Stream(ctx, call)
			if err == nil {
				res, err = provider.Collect(stream)
				attempts = stream.Attempts()
			}
			if err != nil {
				return withCode(ExitFailure, fmt.Errorf("%s: %w", st.agent, err))
			}
		} else {
			out, err := o.Invoke(ctx, call)
			if st.task != "" && err != nil {
				fmt.Fprintf(w, "   %v\n\n", err)
				rows = append(rows, row{st.agent, "-", "refused", provider.Usage{}, 0, 0})
				continue
			}
			if err != nil {
				return withCode(ExitFailure, fmt.Errorf("%s: %w", st.agent, err))
			}
			res, attempts = out.Result, out.Attempts
			if out.CacheHit {
				fmt.Fprintf(w, "   cache hit: saved $%s\n", out.Saved)
			}
		}
		for j, a := range attempts {
			line := fmt.Sprintf("   attempt %d: %s/%s %s", j+1, a.Provider, a.Model, a.Outcome)
			if a.Waited > 0 {
				line += fmt.Sprintf(" (after waiting %s)", a.Waited.Round(time.Millisecond))
			}
			fmt.Fprintln(w, line)
		}
		answer := strings.TrimSpace(res.Content)
		if len(answer) > 72 {
			answer = answer[:72] + "…"
		}
		fmt.Fprintf(w, "   answer (%s/%s): %s\n", res.Provider, res.Model, answer)
		fmt.Fprintf(w, "   %d in + %d out tokens, $%s\n\n", res.Usage.InputTokens, res.Usage.OutputTokens, res.Cost)
		outcome := "ok"
		if res.CacheHit {
			outcome = "cache hit"
		}
		rows = append(rows, row{st.agent, res.Provider + "/" + res.Model, outcome, res.Usage, res.Cost, len(attempts)})
		total += res.Cost
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSERVED BY\tOUTCOME\tATTEMPTS\tTOKENS IN/OUT\tCOST")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t$%s\n", r.agent, r.where, r.outcome, r.attempts, r.usage.InputTokens, r.usage.OutputTokens, r.cost)
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t$%s\n", total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := demoCriticGate(ctx, w, o, store); err != nil {
		return err
	}
	if rep, err := store.Spend(ctx, ledger.Filter{By: ledger.ByTask}); err == nil {
		fmt.Fprintf(w, "ledger: %d attempts recorded, $%s spent, %d cache hit saving $%s\n", rep.Total.Attempts, rep.Total.Cost, rep.Total.CacheHits, rep.Total.Savings)
	}
	fmt.Fprintln(w, "\nTry it on your own configuration: 'cortexbuild sim --write-config sim.yaml', then 'CORTEXBUILD_LLM=1 cortexbuild --config sim.yaml invoke ...'.")
	return nil
}

// demoCriticGate shows the critic gate: a medium-risk task planned on one
// vendor and reviewed on another, then completed; and a high-risk task whose
// critic left out the independent_reviewer line, whose completion is refused.
func demoCriticGate(ctx context.Context, w io.Writer, o *orchestrator.Orchestrator, st ledger.Store) error {
	fmt.Fprintln(w, "\nCritic gate: medium-or-higher risk tasks need a review by a model other than the plan's author")
	persona := "You are the critic. Find the plan's blind spots. " + critic.Instruction
	for _, tc := range []struct {
		id     string
		risk   critic.Risk
		system string
	}{
		{"demo-risky", critic.Medium, persona},
		{"demo-unreviewed", critic.High, "You are the critic. Find the plan's blind spots."},
	} {
		if _, err := orchestrator.StartTask(ctx, st, tc.id, tc.risk); err != nil {
			return withCode(ExitFailure, err)
		}
		fmt.Fprintf(w, "task %s, risk %s\n", tc.id, tc.risk)
		plan, err := o.Invoke(ctx, orchestrator.Call{Agent: "planner", Task: tc.id, Request: provider.Request{Prompt: "Plan the database migration.", MaxTokens: 512}})
		if err != nil {
			return withCode(ExitFailure, fmt.Errorf("planner: %w", err))
		}
		fmt.Fprintf(w, "   planner on %s/%s authored the plan\n", plan.Provider, plan.Model)
		call := orchestrator.Call{Agent: "critic", Task: tc.id, Request: provider.Request{System: tc.system, Prompt: "Review the migration plan.", MaxTokens: 512}}
		for _, c := range o.Route(ctx, call).Candidates {
			if !c.Kept {
				fmt.Fprintf(w, "   critic route: drop %s/%s: %s\n", c.Provider, c.Model, c.Reason)
			}
		}
		out, err := o.Invoke(ctx, call)
		if err != nil {
			return withCode(ExitFailure, fmt.Errorf("critic: %w", err))
		}
		fmt.Fprintf(w, "   critic on %s/%s", out.Provider, out.Model)
		if r := out.Review; r != nil && r.Problem == "" {
			fmt.Fprintf(w, ": independent_reviewer %s recorded\n", r.Reviewer)
		} else if r != nil {
			fmt.Fprintf(w, ": %s\n", r.Problem)
		}
		if t, err := orchestrator.CompleteTask(ctx, st, tc.id); err != nil {
			fmt.Fprintf(w, "   task complete %s: refused: %v\n", tc.id, err)
		} else {
			fmt.Fprintf(w, "   task complete %s: %s\n", tc.id, t.Events[len(t.Events)-1].Detail)
		}
	}
	return nil
}
