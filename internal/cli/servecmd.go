package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// defaultShutdownTimeout is how long in-flight requests may run after
// SIGTERM when gateway.shutdown_timeout is not set.
const defaultShutdownTimeout = 30 * time.Second

func (e *env) serveCmd() *cobra.Command {
	var listen string
	var noAuth bool
	var grace time.Duration
	var allowHosts []string
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:8787] [--no-auth]",
		Short: "Serve the OpenAI- and Anthropic-compatible gateway over the orchestrator (orchestration mode only)",
		Long: `serve runs CortexBuild's gateway: OpenAI-compatible POST /v1/chat/completions, POST /v1/responses
(stateless) and GET /v1/models, Anthropic-compatible POST /v1/messages and POST /v1/messages/count_tokens. Every request goes
through the orchestrator, so routing, budgets, the response cache, the locality gate, the critic
gate and failover apply to Claude Code, Codex CLI or any SDK pointed at it.

The model name a client sends is an agent (builder, planner, …), a tier (reasoning_heavy,
balanced, fast_cheap), provider/model, or a name from gateway.models in llm-config.yaml. The
X-CortexBuild-Agent and X-CortexBuild-Task headers name the agent and the task.

Clients authenticate with virtual keys ('cortexbuild serve keys create'), sent as a bearer
token or in the Anthropic API-key header: the SDKs' api_key settings do either. --no-auth turns
that off, and is refused unless the gateway listens on a loopback address.

SIGINT or SIGTERM stops accepting connections and lets in-flight requests finish for
gateway.shutdown_timeout (30s by default); the rest are cancelled, their reservations
released and their attempts recorded. See docs/gateway.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			if err := e.requireOrchestration(f); err != nil {
				return err
			}
			if listen == "" {
				listen = f.Gateway.Listen
			}
			if listen == "" {
				listen = gateway.DefaultListen
			}
			f.Gateway.AllowedHosts = append(f.Gateway.AllowedHosts, allowHosts...)
			if !cmd.Flags().Changed("shutdown-timeout") && f.Gateway.ShutdownTimeout > 0 {
				grace = f.Gateway.ShutdownTimeout
			}
			return e.serve(cmd.Context(), f, listen, noAuth, grace)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default: gateway.listen, else "+gateway.DefaultListen+")")
	cmd.Flags().BoolVar(&noAuth, "no-auth", false, "serve without keys (refused unless the address is loopback)")
	cmd.Flags().StringArrayVar(&allowHosts, "allow-host", nil, "a Host name (name or name:port) to answer besides the listen address, added to gateway.allowed_hosts; repeatable")
	cmd.Flags().DurationVar(&grace, "shutdown-timeout", defaultShutdownTimeout, "how long in-flight requests may run after SIGTERM (default: gateway.shutdown_timeout, else 30s)")
	cmd.AddCommand(e.serveKeysCmd())
	return cmd
}

// logger is where the process writes its own lines (the gateway's: a line
// per request at debug, refusals at info, failures at warn; dropped
// notifications; the cache's Redis warnings): with observability.logs set
// and opened, at its level and format, beside the invocation lines
// (stderr or logs.file); else at info as text on stderr.
func (e *env) logger(f *config.File) *slog.Logger {
	if l := f.Observability.Logs; l.Level != "" && e.logOut != nil {
		return slog.New(logHandler(e.logOut, l.Format, l.Level))
	}
	return slog.New(slog.NewTextHandler(e.stderr, nil))
}

// sharedFileRecheck is how long a change another process makes to the
// keys, the pause or the breakers (cortexbuild serve keys revoke, project
// resume) can go unseen by a running server.
const sharedFileRecheck = 100 * time.Millisecond

// serve runs the gateway until ctx ends or a signal arrives.
func (e *env) serve(parent context.Context, f *config.File, listen string, noAuth bool, grace time.Duration) error {
	if err := e.requireExplicitProject(f); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	project := e.project(f)
	// The server looks at the shared files (keys, pause, breakers) at most
	// every sharedFileRecheck, not on every request.
	e.recheck = sharedFileRecheck
	keys, err := e.keyStore(ctx, f)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	keys.SetRecheck(sharedFileRecheck)
	active := 0
	if !noAuth {
		ks, err := keys.List()
		if err != nil {
			return withCode(ExitFailure, err)
		}
		for _, k := range ks {
			if k.Active() {
				active++
			}
		}
	}
	o, closeStore, err := e.engineWith(ctx, f, "", true)
	if err != nil {
		return err
	}
	defer closeStore() // a store that does not close cleanly fails the command (run)
	// Budgets (a task seen for the first time gets the default task
	// budget) and the console use the engine's store: the process opens
	// the store once.
	budgets := o.Ledger()
	cat, err := e.catalog(f)
	if err != nil {
		return err
	}
	opts := gateway.Options{
		Orchestrator:      o,
		Project:           project,
		NoAuth:            noAuth,
		Models:            gatewayModels(f),
		Agents:            agentNames(f),
		Providers:         f.ProviderNames(),
		MaxBodyBytes:      f.Gateway.MaxBodyBytes,
		MaxInFlight:       f.Gateway.MaxInFlight,
		MaxInFlightPerKey: f.Gateway.MaxInFlightPerKey,
		HeaderTimeout:     f.Gateway.HeaderTimeout,
		BodyTimeout:       f.Gateway.BodyTimeout,
		AllowedHosts:      f.Gateway.AllowedHosts,
		StrictParams:      f.Gateway.StrictParams,
		CountTokens:       tokenCounter(f, cat),
		Prepare:           taskBudgets(budgets, f),
		Logger:            e.logger(f),
	}
	if !noAuth {
		opts.Keys = keys
	}
	// A fleet's replicas count the keys' rates and keep the provider state
	// between turns in the shared cache, and /readyz checks the engines.
	if p := e.storePing; p != nil {
		opts.Ready = append(opts.Ready, gateway.Engine{Name: "postgres", Required: true, Ping: p})
	}
	if r := e.redis; r != nil {
		opts.Shared = r
		opts.Ready = append(opts.Ready, gateway.Engine{Name: "redis", Ping: func(ctx context.Context) error { return r.Ping(ctx, gateway.ReadyTimeout) }})
	}
	g, err := gateway.New(opts)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if err := e.mountConsole(ctx, g, f, o, opts.Keys, keys, project, opts.Logger); err != nil {
		return withCode(ExitFailure, err)
	}
	srv, err := g.Listen(listen)
	if errors.Is(err, gateway.ErrNoAuthNotLoopback) {
		return withCode(ExitUsage, err)
	}
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("listen: %w", err))
	}
	out := e.stdout
	base := srv.URL()
	fmt.Fprintf(out, "CortexBuild gateway for project %s listening on %s\n", project, base)
	fmt.Fprintf(out, "  OpenAI-compatible:    %s/v1  (POST /v1/chat/completions, POST /v1/responses, GET /v1/models)\n", base)
	fmt.Fprintf(out, "  Anthropic-compatible: %s  (POST /v1/messages, POST /v1/messages/count_tokens)\n", base)
	fmt.Fprintf(out, "  Web console:          %s/console/\n", base)
	if noAuth {
		fmt.Fprintf(out, "  auth: off (loopback only)\n")
	} else {
		where := keys.Path()
		if keys.Shared() {
			where = "the shared state (PostgreSQL, store.dsn)"
		}
		fmt.Fprintf(out, "  auth: virtual keys in %s (%d active)\n", where, active)
		if active == 0 {
			fmt.Fprintln(e.stderr, "cortexbuild: no active key: every request will be refused until you run 'cortexbuild serve keys create'")
		}
	}
	fmt.Fprintf(out, "SIGINT or SIGTERM stops it; in-flight requests get %s to finish.\n", grace)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	select {
	case err := <-served:
		if err != nil {
			return withCode(ExitFailure, err)
		}
		return nil
	case <-ctx.Done():
	}
	fmt.Fprintf(e.stderr, "cortexbuild: shutting down: %d requests in flight, waiting up to %s\n", srv.InFlight(), grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	serr := srv.Shutdown(sctx)
	if err := <-served; err != nil {
		return withCode(ExitFailure, err)
	}
	if serr != nil {
		fmt.Fprintln(e.stderr, "cortexbuild:", serr)
	}
	fmt.Fprintln(e.stderr, "cortexbuild: gateway stopped")
	return nil
}

// requireExplicitProject refuses to serve a project on a shared store or
// cache (store.backend postgres, cache.backend redis) unless its
// configuration names it with project:. A kept or derived id is this
// directory's; every deployment of the same image has the same directory
// and several may share one database.
func (e *env) requireExplicitProject(f *config.File) error {
	if f.Project != "" {
		return nil
	}
	var key string
	var pos yamlx.Pos
	switch {
	case f.Store.Backend == config.StorePostgres:
		key, pos = "store.backend: postgres", f.Store.Pos.Key("backend")
	case f.Cache.Backend == config.CacheRedis:
		key, pos = "cache.backend: redis", f.Cache.Pos.Key("backend")
	default:
		return nil
	}
	return withCode(ExitConfig, pos.Errorf("%s is shared with other projects, so serve needs the project's id: set project: in %s (1 to 100 lower-case letters, digits, '.', '_' and '-'; to keep what this project has recorded so far, its current id %s)", key, f.Path, e.project(f)))
}

func (e *env) keyPath(f *config.File) string {
	return filepath.Join(e.stateDir(f), gateway.KeyFileName)
}

// gatewayModels turns gateway.models into the gateway's targets.
func gatewayModels(f *config.File) map[string]gateway.Target {
	out := map[string]gateway.Target{}
	for name, m := range f.Gateway.Models {
		if m != nil {
			out[name] = gateway.Target{Agent: m.Agent, Tier: m.Tier, Model: m.Model, Provider: m.Provider}
		}
	}
	return out
}

// agentNames lists the spec's agents and the project's custom ones.
func agentNames(f *config.File) []string {
	names := orchestrator.AgentNames()
	for _, n := range slices.Sorted(maps.Keys(f.Agents)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// checkAgent refuses a flag naming an agent that is neither built in nor
// defined under agents:, as the configuration and the gateway do, with the
// closest name and the list; an empty value (no agent) passes.
func checkAgent(f *config.File, flag, agent string) error {
	names := agentNames(f)
	if agent == "" || slices.Contains(names, agent) {
		return nil
	}
	hint := ""
	if c := provider.Closest(agent, names); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	return withCode(ExitUsage, fmt.Errorf("%s %q: unknown agent%s; the agents are %s, or one defined under agents: in llm-config.yaml", flag, agent, hint, strings.Join(names, ", ")))
}

// checkModels refuses a --models name the gateway would not resolve (so a
// typo does not make a key that every request is refused with): each is
// an alias of gateway.models, a tier, an agent or provider/model of a
// configured provider.
func checkModels(f *config.File, flag string, models []string) error {
	names := slices.Sorted(maps.Keys(f.Gateway.Models))
	for _, t := range provider.Tiers {
		names = append(names, string(t))
	}
	names = append(names, agentNames(f)...)
	for _, m := range models {
		if prov, model, ok := strings.Cut(m, "/"); ok && model != "" && f.Providers[prov] != nil {
			continue
		}
		if slices.Contains(names, m) {
			continue
		}
		hint := ""
		if c := provider.Closest(m, names); c != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", c)
		}
		return withCode(ExitUsage, fmt.Errorf("%s %q: the gateway resolves no such model name%s; use a name 'GET /v1/models' lists or PROVIDER/MODEL of a configured provider", flag, m, hint))
	}
	return nil
}

// tokenCounter counts a prompt offline for count_tokens, scaled by the
// token factor of the serving provider's price namespace.
func tokenCounter(f *config.File, cat *pricing.Catalog) func(string, *provider.Request) int64 {
	return func(name string, req *provider.Request) int64 {
		n := pricing.CountRequestTokens(req)
		p := f.Providers[name]
		if p == nil {
			return n
		}
		ns := p.Type
		if p.Type == "openai_compatible" {
			ns = p.Profile
			if ns == "" {
				ns = "openai"
			}
		}
		if s := cat.Namespaces[ns]; s != nil && !s.Local {
			return s.TokenFactor.Scale(n)
		}
		return n
	}
}

// taskBudgets applies the configured budgets as calls arrive: the default
// task budget to a task seen for the first time, and the monthly budget
// when a new month starts.
func taskBudgets(st ledger.Store, f *config.File) func(context.Context, *orchestrator.Call) error {
	if f.Budgets.Task == nil && f.Budgets.ProjectMonthly == nil {
		return nil
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	month := time.Now().In(budgetLocation(f)).Format("2006-01")
	return func(ctx context.Context, c *orchestrator.Call) error {
		now := time.Now().In(budgetLocation(f)).Format("2006-01")
		mu.Lock()
		defer mu.Unlock()
		task := c.Task
		if f.Budgets.Task == nil || seen[task] {
			task = ""
		}
		if task == "" && now == month {
			return nil
		}
		if err := applyBudgets(ctx, st, f, task); err != nil {
			return err
		}
		seen[task], month = true, now
		return nil
	}
}

func (e *env) serveKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage the gateway's virtual keys (stored hashed in .cortexbuild/" + gateway.KeyFileName + ")"}
	var name, agent, task, role string
	var models []string
	var asJSON bool
	var limits keyLimitFlags
	create := &cobra.Command{
		Use:   "create [--name N] [--role call|admin] [--agent A] [--agents A,...] [--task T] [--models M,...] [--budget USD --period day|month|total] [--rpm N] [--tpm N] [--expires WHEN]",
		Short: "Create a key and print it once (only its hash is kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			if err := checkAgent(f, "--agent", agent); err != nil {
				return err
			}
			if err := checkModels(f, "--models", models); err != nil {
				return err
			}
			var lk gateway.Key
			if err := limits.apply(f, cmd.Flags(), &lk, time.Now()); err != nil {
				return withCode(ExitUsage, err)
			}
			spec := gateway.KeySpec{Name: name, Project: e.project(f), Role: gateway.Role(role), Agent: agent, Task: task, Models: models,
				Agents: lk.Agents, KeyLimits: lk.KeyLimits}
			if err := spec.Check(); err != nil {
				return withCode(ExitUsage, err)
			}
			ks, err := e.keyStore(cmd.Context(), f)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			token, k, err := ks.Create(spec)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					gateway.Key
					Token string `json:"key"`
				}{k, token})
			}
			fmt.Fprintln(cmd.OutOrStdout(), token)
			if k.Admin() {
				fmt.Fprintf(e.stderr, "created admin key %s; this is the only time it is shown: store it now; it logs in to the console at /console/ and makes no model calls\n", k.ID)
				return nil
			}
			fmt.Fprintf(e.stderr, "created call key %s%s; this is the only time it is shown: store it now (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY of the client)\n", k.ID, bound(k))
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "a label for the key (who or what uses it)")
	create.Flags().StringVar(&role, "role", string(gateway.RoleCall), "call: model calls (the /v1/ routes) only; admin: the web console only (provider keys, consent, pause)")
	create.Flags().StringSliceVar(&models, "models", nil, "allow the key only these model names (comma-separated, as 'GET /v1/models' lists them), served as each is when sent alone: a persona's line or X-CortexBuild-Agent serving another agent is refused")
	create.Flags().StringVar(&agent, "agent", "", "bind the key to this agent: its calls are made as it, and no other")
	create.Flags().StringVar(&task, "task", "", "bind the key to this task: its calls count against it, and no other")
	create.Flags().BoolVar(&asJSON, "json", false, "print the key and its description as JSON")
	limits.add(create.Flags(), false)

	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			ks, err := e.keyStore(cmd.Context(), f)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			keys, err := ks.List()
			if err != nil {
				return withCode(ExitFailure, err)
			}
			now := time.Now()
			spent := e.keysSpend(cmd.Context(), f, keys, now)
			if listJSON {
				type listed struct {
					gateway.Key
					Expired bool `json:"expired,omitempty"`
					// Spent is what the key's calls cost in the period of
					// its budget (the month without one); absent when the
					// ledger could not be read.
					Spent *provider.Money `json:"spent_usd,omitempty"`
				}
				out := []listed{}
				for _, k := range keys {
					l := listed{Key: k, Expired: k.Expired(now)}
					if m, ok := spent[k.ID]; ok {
						l.Spent = &m
					}
					out = append(out, l)
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if len(keys) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no keys: create one with 'cortexbuild serve keys create'")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tNAME\tROLE\tAGENT\tTASK\tMODELS\tLIMITS\tSPENT\tCREATED\tSTATUS")
			for _, k := range keys {
				status := "active"
				switch {
				case !k.Active():
					status = "revoked " + k.RevokedAt.Format(time.DateOnly)
				case k.Expired(now):
					status = "expired " + k.ExpiresAt.UTC().Format(time.RFC3339)
				}
				spend := "?"
				if m, ok := spent[k.ID]; ok {
					spend = "$" + m.String() + map[string]string{ledger.PeriodDay: " today", ledger.PeriodMonth: " this month", ledger.PeriodTotal: " in total"}[k.BudgetPeriod()]
				}
				role := gateway.RoleCall
				if k.Admin() {
					role = gateway.RoleAdmin
				}
				agent := orDash(cmp.Or(k.Agent, strings.Join(k.Agents, ",")))
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Hint(), orDash(k.Name), role, agent, orDash(k.Task), orDash(strings.Join(k.Models, ",")),
					k.LimitsText(), spend, k.CreatedAt.Format(time.DateOnly), status)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print the keys as JSON")

	revoke := &cobra.Command{
		Use:   "revoke KEY-ID",
		Short: "Revoke a key; a running gateway refuses it from the next request on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			ks, err := e.keyStore(cmd.Context(), f)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			k, err := ks.Revoke(args[0])
			if errors.Is(err, gateway.ErrNoSuchKey) {
				return withCode(ExitUsage, fmt.Errorf("%w: 'cortexbuild serve keys list' shows the keys", err))
			}
			if err != nil {
				return withCode(ExitFailure, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", k.Hint())
			return nil
		},
	}
	cmd.AddCommand(create, list, e.keysUpdateCmd(), revoke)
	return cmd
}

func bound(k gateway.Key) string {
	var parts []string
	if k.Agent != "" {
		parts = append(parts, "agent "+k.Agent)
	}
	if k.Task != "" {
		parts = append(parts, "task "+k.Task)
	}
	if len(k.Models) > 0 {
		parts = append(parts, "models "+strings.Join(k.Models, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (bound to " + strings.Join(parts, ", ") + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
