package cli

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/gateway/console"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// secretsPath is the project's secrets file, where the web console saves
// provider credentials.
func (e *env) secretsPath(f *config.File) string {
	return filepath.Join(e.stateDir(f), config.SecretsFileName)
}

// secretsFile is f's secrets file: the one the configuration reads (and
// a running gateway watches, so that a key the console saves is used by
// the next call), or the project's.
func (e *env) secretsFile(f *config.File) *config.SecretsFile {
	if sf, ok := f.Secrets.(*config.SecretsFile); ok && sf != nil {
		return sf
	}
	return config.OpenSecretsFile(e.secretsPath(f))
}

// consoleAlerts is how many of the latest budget alerts the console's
// overview lists.
const consoleAlerts = 20

// mountConsole mounts the web console on the gateway: it serves under
// /console/ with the same keys (or none, on loopback with --no-auth), and
// its access keys page manages store, the project's key store. A project
// whose store is PostgreSQL is served by a fleet of replicas: its console
// sessions are kept in the shared state (a session opened on one replica
// is one on all), and its provider keys page saves no key (each replica
// reads them from its environment).
func (e *env) mountConsole(ctx context.Context, g *gateway.Gateway, f *config.File, o *orchestrator.Orchestrator, keys gateway.Authenticator, store *gateway.KeyStore, project string, logger *slog.Logger) error {
	gate := e.gate(f)
	var sessions console.SessionStore
	fleet := sharedPostgres(f)
	if fleet {
		p, err := e.sharedState(ctx, f)
		if err != nil {
			return err
		}
		sessions = p.store.Sessions()
	}
	agentBudgets := map[string]provider.Money{}
	for name, a := range f.Agents {
		if a != nil && a.Budget != nil {
			agentBudgets[name] = *a.Budget
		}
	}
	var alerts func(context.Context) ([]console.Alert, error)
	if len(f.Budgets.AlertThresholds()) > 0 {
		alerts = func(ctx context.Context) ([]console.Alert, error) {
			as, err := o.Ledger().Alerts(ctx, consoleAlerts)
			out := make([]console.Alert, len(as))
			for i, a := range as {
				out[i] = console.Alert{Scope: a.Scope.String(), Threshold: a.Threshold, Spent: a.Spent, Limit: a.Limit, At: a.CrossedAt}
			}
			return out, err
		}
	}
	c, err := console.New(console.Options{
		Alerts:   alerts,
		Project:  project,
		Keys:     keys,
		KeyStore: store,
		// The console refuses what 'serve keys create' refuses.
		CheckKey: func(spec gateway.KeySpec) error {
			if err := checkAgent(f, "agent", spec.Agent); err != nil {
				return err
			}
			for _, a := range spec.Agents {
				if err := checkAgent(f, "agents", a); err != nil {
					return err
				}
			}
			return checkModels(f, "models", spec.Models)
		},
		NoAuth:    g.NoAuth(),
		Config:    f,
		Registry:  e.registry,
		LookupEnv: e.lookupEnv,
		Secrets:   e.secretsFile(f),
		Sessions:  sessions,
		Fleet:     fleet,
		Health: func(ctx context.Context, name string) console.Health {
			cat, catErr := e.catalog(f)
			r := e.checkOne(ctx, f, gate, cat, catErr, name)
			return console.Health{Status: r.Status, Healthy: r.Healthy, Latency: time.Duration(r.LatencyMS) * time.Millisecond,
				Kind: r.Kind, Error: r.Error, Reason: r.Reason, RateLimit: r.RateLimit, CheckedAt: r.CheckedAt}
		},
		Breakers: o.Breakers,
		Ledger:   o.Ledger(),
		State:    o.State(),
		Consents: gate.Consents,
		Endpoint: func(name string) string {
			u, _ := e.endpointOf(f, name)
			return u
		},
		AgentBudgets: agentBudgets,
		Location:     budgetLocation(f),
		Logger:       logger,
	})
	if err != nil {
		return err
	}
	g.Handle(console.Prefix, c)
	g.Handle("/console", c)
	return nil
}
