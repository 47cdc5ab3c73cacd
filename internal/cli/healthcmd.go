package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// breakerFile holds the project's circuit breaker states, shared by every
// cortexbuild process of the project.
const breakerFile = "breakers.json"

// breakerSettings are the orchestrator's breaker settings from the
// configuration, with the project's shared store.
func (e *env) breakerSettings(f *config.File) orchestrator.BreakerSettings {
	s := f.Routing.CircuitBreaker.Settings()
	s.Store = e.breakerStore(f)
	return s
}

// breakerStore is where the project's circuit breakers are kept: the
// shared state when the project's store is PostgreSQL (opened on first
// use), else .cortexbuild/breakers.json.
func (e *env) breakerStore(f *config.File) orchestrator.BreakerStore {
	if sharedPostgres(f) {
		return &sharedBreakers{e: e, f: f}
	}
	return &orchestrator.FileBreakers{Path: filepath.Join(e.stateDir(f), breakerFile), Recheck: e.recheck}
}

// Provider health statuses.
const (
	healthOK         = "healthy"
	healthFailed     = "unhealthy"
	healthNotChecked = "not_checked"
)

// healthReport is one provider's line of 'providers health'.
type healthReport struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Endpoint  string `json:"endpoint,omitempty"`
	Status    string `json:"status"`
	Healthy   bool   `json:"healthy"`
	LatencyMS int64  `json:"latency_ms"`
	// Kind classifies a failure (a provider error kind, or "config" for a
	// configuration the adapter could not be built from).
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
	// Reason says why a provider was not checked.
	Reason    string    `json:"reason,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// RateLimit is what the provider reported about its limits during the
	// check; nil when it reported nothing.
	RateLimit *provider.RateLimitStatus `json:"rate_limit"`
	Breaker   orchestrator.BreakerState `json:"breaker"`
}

type healthSummary struct {
	Healthy   bool           `json:"healthy"`
	CheckedAt time.Time      `json:"checked_at"`
	Providers []healthReport `json:"providers"`
}

func (e *env) providersHealthCmd() *cobra.Command {
	var asJSON bool
	timeout := 30 * time.Second
	cmd := &cobra.Command{
		Use:   "health [--json] [--timeout D]",
		Short: "Check every configured provider now (concurrently) and show its rate-limit headroom and circuit breaker",
		Long: `health checks every configured provider at once with its adapter's health check (a
model listing: no tokens are spent), through the locality gate: an endpoint the project may not
reach is reported as not checked and is not contacted. For each provider it prints the status,
latency and error, the rate-limit headroom the provider reported, and its circuit breaker (opened
by live calls; see docs/orchestration.md).

Exit status 1 when any checked provider is unhealthy, 0 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return withCode(ExitUsage, errors.New("--timeout must be positive"))
			}
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			sum := e.checkHealth(ctx, f)
			w := cmd.OutOrStdout()
			var bad []string
			for _, r := range sum.Providers {
				if r.Status == healthFailed {
					bad = append(bad, r.Name)
				}
			}
			if asJSON {
				var ferr error
				if len(bad) > 0 {
					ferr = withCode(ExitFailure, withKind("unhealthy", fmt.Errorf("%d of %d providers unhealthy: %s", len(bad), len(sum.Providers), strings.Join(bad, ", "))))
				}
				return writeReport(w, sum, ferr)
			}
			if err := writeHealth(w, sum); err != nil {
				return err
			}
			if len(bad) > 0 {
				return withCode(ExitFailure, fmt.Errorf("%d of %d providers unhealthy: %s", len(bad), len(sum.Providers), strings.Join(bad, ", ")))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "time allowed for all the checks")
	return cmd
}

// checkHealth checks every configured provider concurrently. Progress goes
// to standard error when it is a terminal.
func (e *env) checkHealth(ctx context.Context, f *config.File) healthSummary {
	names := f.ProviderNames()
	sum := healthSummary{Healthy: true, CheckedAt: time.Now().UTC(), Providers: make([]healthReport, len(names))}
	breakers := map[string]orchestrator.BreakerState{}
	store := e.breakerStore(f)
	if recs, err := store.LoadBreakers(ctx); err != nil {
		fmt.Fprintf(e.stderr, "cortexbuild: circuit breaker states unreadable: %v\n", err)
	} else {
		for _, r := range recs {
			breakers[r.Provider] = r
		}
	}
	g := e.gate(f)
	cat, catErr := e.catalog(f)
	prog := newHealthProgress(e.stderr, isTerminal(e.stderr), names)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			r := e.checkOne(ctx, f, g, cat, catErr, name)
			b, ok := breakers[name]
			if !ok {
				b = orchestrator.BreakerState{Provider: name}
			}
			r.Breaker = b.At(time.Now())
			sum.Providers[i] = r
			prog.done(name, r.Status)
		})
	}
	wg.Wait()
	prog.close()
	for _, r := range sum.Providers {
		if r.Status == healthFailed {
			sum.Healthy = false
		}
	}
	return sum
}

// checkOne checks one provider: build its adapter (credentials resolved,
// HTTP only through the locality gate), ask the gate, then HealthCheck.
func (e *env) checkOne(ctx context.Context, f *config.File, g *locality.Gate, cat provider.Pricer, catErr error, name string) healthReport {
	p := f.Providers[name]
	r := healthReport{Name: name, Type: p.Type, Status: healthFailed}
	if p.Profile != "" {
		r.Type += "/" + p.Profile
	}
	fail := func(kind string, err error, secrets ...string) healthReport {
		r.Kind, r.Error = kind, provider.Redact(err.Error(), secrets...)
		return r
	}
	if catErr != nil {
		return fail("config", catErr)
	}
	s, err := f.Resolve(name, e.registry, e.lookupEnv)
	secrets := slices.Collect(maps.Values(s.Credentials))
	if err != nil {
		return fail("config", err, secrets...)
	}
	s.Pricer = cat
	s.HTTPClient = g.Client(name, nil)
	a, err := e.registry.New(p.Type, s)
	if err != nil {
		return fail("config", fmt.Errorf("providers.%s: %w", name, err), secrets...)
	}
	if ep, ok := a.(provider.Endpointer); ok {
		r.Endpoint = ep.BaseURL()
	}
	if _, err := g.Check(ctx, name, r.Endpoint); err != nil {
		var le *locality.Error
		switch {
		case errors.Is(err, locality.ReasonNoConsent):
			r.Status, r.Reason = healthNotChecked, "not checked: no consent (run 'cortexbuild consent grant "+name+"')"
			return r
		case errors.Is(err, locality.ReasonLocalOnly):
			r.Status, r.Reason = healthNotChecked, "not checked: the endpoint is not on this machine and locality.mode is local-only"
			return r
		case errors.As(err, &le) && le.Reason == locality.ReasonResolve:
			return fail(provider.KindNetwork.String(), err, secrets...)
		default:
			r.Status, r.Reason = healthNotChecked, "not checked: "+provider.Redact(err.Error(), secrets...)
			return r
		}
	}
	hs := a.HealthCheck(ctx)
	r.LatencyMS, r.CheckedAt = hs.Latency.Milliseconds(), hs.CheckedAt.UTC()
	if rl := a.RateLimitStatus(ctx); rl.Known() {
		r.RateLimit = &rl
	}
	if !hs.Healthy {
		kind := hs.Kind.String()
		if hs.Kind == provider.KindUnknown {
			kind = ""
		}
		return fail(kind, errors.New(hs.Error), secrets...)
	}
	r.Status, r.Healthy = healthOK, true
	return r
}

// writeHealth prints the reports as a table, then a one-line summary.
func writeHealth(w io.Writer, sum healthSummary) error {
	if len(sum.Providers) == 0 {
		_, err := fmt.Fprintln(w, "no providers are configured: add one under providers: in llm-config.yaml")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSTATUS\tLATENCY\tRATE LIMIT\tBREAKER\tERROR")
	counts := map[string]int{}
	for _, r := range sum.Providers {
		counts[r.Status]++
		latency := "-"
		if r.Status != healthNotChecked && (r.LatencyMS > 0 || r.Healthy) {
			latency = fmt.Sprintf("%dms", r.LatencyMS)
		}
		detail := r.Error
		if r.Reason != "" {
			detail = r.Reason
		}
		if r.Kind != "" && detail != "" {
			detail = "[" + r.Kind + "] " + detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, strings.ReplaceAll(r.Status, "_", " "), latency, headroomText(r.RateLimit), breakerText(r.Breaker), oneLine(detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d healthy, %d unhealthy, %d not checked\n", counts[healthOK], counts[healthFailed], counts[healthNotChecked])
	return err
}

// headroomText renders what a provider reported about its limits; counts
// it did not report are left out, never guessed.
func headroomText(s *provider.RateLimitStatus) string {
	if s == nil {
		return "unknown"
	}
	var parts []string
	if s.RequestsRemaining != nil {
		parts = append(parts, fmt.Sprintf("%d requests", *s.RequestsRemaining))
	}
	if s.TokensRemaining != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", *s.TokensRemaining))
	}
	out := "unknown"
	if len(parts) > 0 {
		out = strings.Join(parts, ", ") + " left"
	}
	if !s.ResetAt.IsZero() {
		out += ", resets " + s.ResetAt.UTC().Format("15:04:05Z")
	}
	return out
}

func breakerText(b orchestrator.BreakerState) string {
	switch b.State {
	case orchestrator.BreakerOpen:
		return fmt.Sprintf("open until %s (%d× %s)", b.RetryAt.UTC().Format("15:04:05Z"), b.Failures, b.LastError.String())
	case orchestrator.BreakerHalfOpen:
		return "half-open (next call probes)"
	}
	if b.Failures > 0 {
		return fmt.Sprintf("closed (%d× %s)", b.Failures, b.LastError.String())
	}
	return "closed"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// healthProgress shows, on a terminal, which checks are still running; it
// writes nothing elsewhere.
type healthProgress struct {
	w       io.Writer
	on      bool
	mu      sync.Mutex
	total   int
	pending []string
}

func newHealthProgress(w io.Writer, on bool, names []string) *healthProgress {
	p := &healthProgress{w: w, on: on && len(names) > 0, total: len(names), pending: slices.Clone(names)}
	p.render("")
	return p
}

func (p *healthProgress) done(name, status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = slices.DeleteFunc(p.pending, func(n string) bool { return n == name })
	p.render(name + " " + strings.ReplaceAll(status, "_", " "))
}

func (p *healthProgress) render(last string) {
	if !p.on {
		return
	}
	line := fmt.Sprintf("checking %d providers: %d done", p.total, p.total-len(p.pending))
	if last != "" {
		line += " (" + last + ")"
	}
	if len(p.pending) > 0 {
		line += ", waiting for " + strings.Join(p.pending, ", ")
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

// close erases the progress line.
func (p *healthProgress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
