package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
)

// projectDir returns the project root of a configuration (the directory
// holding .cortexbuild/), or the working directory for the defaults.
func (e *env) projectDir(f *config.File) string {
	if f.Path != "" {
		return filepath.Dir(filepath.Dir(f.Path))
	}
	return e.wd
}

func (e *env) stateDir(f *config.File) string { return filepath.Join(e.projectDir(f), config.Dir) }

// gate builds the locality gate of a project: its mode and its consent
// file.
func (e *env) gate(f *config.File) *locality.Gate {
	mode := locality.ModeConsent
	if f.Locality.Mode == config.LocalityLocalOnly {
		mode = locality.ModeLocalOnly
	}
	return &locality.Gate{Mode: mode, Consents: locality.NewFileStore(filepath.Join(e.stateDir(f), "consent.json")), Resolver: e.resolver, Dial: e.dial}
}

// gateCheck adapts the locality gate to the orchestrator's Gate.
type gateCheck struct{ g *locality.Gate }

func (c gateCheck) Check(ctx context.Context, prov, baseURL string) error {
	_, err := c.g.Check(ctx, prov, baseURL)
	return err
}

// engine builds the orchestrator of a project from its configuration: one
// adapter per configured provider, each connecting only through the
// locality gate, priced by the catalog, with the project's pause state and
// notification sinks.
func (e *env) engine(f *config.File) (*orchestrator.Orchestrator, error) {
	cat, err := e.catalog(f)
	if err != nil {
		return nil, err
	}
	g := e.gate(f)
	var eps []orchestrator.Endpoint
	for _, name := range f.ProviderNames() {
		p := f.Providers[name]
		s, err := f.Resolve(name, e.registry, e.lookupEnv)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		s.Pricer = cat
		s.HTTPClient = g.Client(name, nil)
		a, err := e.registry.New(p.Type, s)
		if err != nil {
			return nil, withCode(ExitConfig, fmt.Errorf("providers.%s: %w", name, err))
		}
		eps = append(eps, orchestrator.Endpoint{Name: name, Adapter: a})
	}
	agents := map[string]orchestrator.AgentSettings{}
	for name, a := range f.Agents {
		agents[name] = orchestrator.AgentSettings{Tier: a.Tier, Model: a.Model, Providers: a.Providers, MaxTokens: a.MaxTokens}
	}
	sinks := orchestrator.Notifiers{orchestrator.LogNotifier{Logger: slog.New(slog.NewTextHandler(e.stderr, nil))}}
	if u := f.Notifications.WebhookURL; !u.IsZero() {
		raw, err := u.Resolve(e.lookupEnv)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		if pu, err := url.Parse(raw); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
			return nil, withCode(ExitConfig, u.Pos().Errorf("notifications.webhook_url is not an http(s) URL"))
		}
		sinks = append(sinks, orchestrator.WebhookNotifier{URL: raw})
	}
	return orchestrator.New(orchestrator.Settings{
		Project:         filepath.Base(e.projectDir(f)),
		Endpoints:       eps,
		Preference:      f.Routing.Preference,
		Agents:          agents,
		AllowAlternates: f.Routing.AllowAlternates,
		MaxRetryAfter:   f.Routing.MaxRetryAfter,
		Gate:            gateCheck{g},
		Notifier:        sinks,
		State:           &orchestrator.FileState{Path: filepath.Join(e.stateDir(f), "project-state.json")},
	})
}

// renderedModeHelp explains why invoke refuses outside orchestration mode.
const renderedModeHelp = `orchestration is off: this project runs in rendered mode, where the host tool
(Claude Code, Codex CLI, Copilot, Cursor) runs the models on its vendor's account and
CortexBuild only renders rules and agents into it; no provider key is needed.
To let CortexBuild call providers itself, set CORTEXBUILD_LLM=1 or write
'orchestration: true' in .cortexbuild/llm-config.yaml`

func (e *env) requireOrchestration(f *config.File) error {
	if !f.OrchestrationEnabled(e.getenv) {
		return withCode(ExitFailure, fmt.Errorf("%s", renderedModeHelp))
	}
	return nil
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// confirm asks a yes/no question on a terminal.
func (e *env) confirm(question string) bool {
	fmt.Fprint(e.stderr, question+" [y/N] ")
	var answer string
	fmt.Fscanln(e.stdin, &answer)
	return strings.EqualFold(strings.TrimSpace(answer), "y") || strings.EqualFold(strings.TrimSpace(answer), "yes")
}
