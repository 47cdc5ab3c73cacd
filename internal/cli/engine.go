package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/ledger"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// projectDir returns the project root of a configuration (the directory
// holding .cortexbuild/), or the working directory for the defaults: an
// absolute path with its symbolic links resolved ([env.loadConfig] resolves
// the configuration's), so that it does not depend on how --config or the
// working directory were written.
func (e *env) projectDir(f *config.File) string {
	if f.Path != "" {
		return projectRoot(f.Path)
	}
	return canonicalDir(e.wd)
}

// projectRoot is the project root of the configuration file at path: the
// directory holding its .cortexbuild/, or, for a file kept elsewhere
// (--config sim.yaml), the file's own directory, so that two such files
// in sibling directories are two projects, never one in their parent.
func projectRoot(path string) string {
	dir := filepath.Dir(path)
	if filepath.Base(dir) == config.Dir {
		return filepath.Dir(dir)
	}
	return dir
}

// canonicalDir returns dir made absolute, with its symbolic links
// resolved when it exists.
func canonicalDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir
}

// project returns the project's id: the project: key, else the id kept in
// its state directory (keepProjectID), else, for no configuration file,
// derived from the directory. Its budgets, ledger rows, tasks, cache
// entries and gateway keys belong to it.
func (e *env) project(f *config.File) string {
	if id, ok := e.projectIDs[f.Path]; ok && f.Project == "" && f.Path != "" {
		return id
	}
	return f.ProjectID(e.projectDir(f))
}

// keepProjectID returns the id of a project whose configuration sets no
// project:, kept in .cortexbuild/project-id. On first use it is written
// there: the id derived from the project's path when the project already
// has state recorded under that id (its SQLite ledger, its gateway keys or
// a settlement journal), so that an existing project keeps its id; else a
// new one with a random part, so that two deployments at the same path
// (every container's /data) are two projects. Two processes starting at
// once agree: the first file written wins.
func (e *env) keepProjectID(f *config.File) (string, error) {
	path := filepath.Join(e.stateDir(f), config.ProjectIDFile)
	read := func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		id := strings.TrimSpace(string(b))
		if !config.ValidProjectID(id) {
			return "", fmt.Errorf("%s: %.40q is not a project id (lower-case letters, digits, '.', '_' and '-'); restore it, or set project: in %s", path, id, f.Path)
		}
		return id, nil
	}
	id, err := read()
	if !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	root := e.projectDir(f)
	id = config.NewProjectID(root)
	if e.hasDerivedIDState(f) {
		id = config.DeriveProjectID(root)
	}
	if err := os.MkdirAll(e.stateDir(f), 0o700); err != nil {
		return "", fmt.Errorf("keeping the project id: %w; or set project: in %s", err, f.Path)
	}
	tmp, err := os.CreateTemp(e.stateDir(f), config.ProjectIDFile+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("keeping the project id: %w; or set project: in %s", err, f.Path)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(id + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A link fails when the file exists: another process wrote it
		// first, and its id is the project's.
		if err = os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
			return read()
		}
	}
	if err != nil {
		return "", fmt.Errorf("keeping the project id in %s: %w; or set project: in %s", path, err, f.Path)
	}
	return id, nil
}

// hasDerivedIDState reports whether the project has state recorded under
// the id derived from its path, as every version before the kept id did:
// its SQLite ledger file, its gateway keys or its settlement journal.
func (e *env) hasDerivedIDState(f *config.File) bool {
	paths := []string{e.keyPath(f), e.journalDir(f)}
	if f.Store.Backend != config.StorePostgres {
		paths = append(paths, e.sqlitePath(f))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func (e *env) stateDir(f *config.File) string { return filepath.Join(e.projectDir(f), config.Dir) }

// gate builds the locality gate of a project: its mode and its consent
// file.
func (e *env) gate(f *config.File) *locality.Gate {
	mode := locality.ModeConsent
	if f.Locality.Mode == config.LocalityLocalOnly {
		mode = locality.ModeLocalOnly
	}
	return &locality.Gate{Mode: mode, Consents: e.consentStore(f), Resolver: e.resolver, Dial: e.dial}
}

// The connections a project makes that are not provider calls. Each passes
// the locality gate under its service rule: loopback (or a unix socket)
// always; anything else only in consent mode, because the configuration
// names it. See docs/locality.md, "What leaves the machine".
var (
	svcStore   = locality.Service{Name: "store postgres", Key: "store.dsn"}
	svcCache   = locality.Service{Name: "cache redis", Key: "cache.url"}
	svcWebhook = locality.Service{Name: "webhook", Key: "notifications.webhook_url"}
	svcTraces  = locality.Service{Name: "trace exporter", Key: "observability.traces.endpoint"}
	// svcPagerDuty is where providers smoke sends its PagerDuty events.
	svcPagerDuty = locality.Service{Name: "PagerDuty events API", Key: "$" + pagerDutyURLEnv}
)

// refusedAt returns err as a configuration error at pos (where the
// refused endpoint is configured; the zero Pos for an endpoint from the
// environment) when it holds the locality gate's refusal, and nil
// otherwise. A client library wraps its dialer's errors in its own; the
// user reads what was refused and why, not a connect error.
func refusedAt(pos yamlx.Pos, err error) error {
	var le *locality.Error
	if !errors.As(err, &le) {
		return nil
	}
	if pos.File == "" {
		return withCode(ExitConfig, le)
	}
	return withCode(ExitConfig, pos.Errorf("%v", le))
}

// checkServiceURL decides at start-up whether svc may reach the host of
// raw, an http(s) URL, so that a refusal is reported before the first
// connection; pos is where raw is configured. Its connections are decided
// again when they are dialed (ServiceClient).
func checkServiceURL(g *locality.Gate, svc locality.Service, pos yamlx.Pos, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil // the URL's own check reports it
	}
	_, err = g.CheckService(context.Background(), svc, u.Hostname())
	if r := refusedAt(pos, err); r != nil {
		return r
	}
	return withCode(ExitConfig, err) // an unknown locality mode; nil when allowed
}

// gateCheck adapts the locality gate to the orchestrator's Gate.
type gateCheck struct{ g *locality.Gate }

func (c gateCheck) Check(ctx context.Context, prov, baseURL string) error {
	_, err := c.g.Check(ctx, prov, baseURL)
	return err
}

func (c gateCheck) CheckImageURLs() error { return c.g.CheckImageURLs() }

// openLedger opens the project's store: SQLite under .cortexbuild/ by
// default, PostgreSQL when configured.
func (e *env) openLedger(ctx context.Context, f *config.File) (ledger.Store, error) {
	st, err := e.openRawLedger(ctx, f)
	if err != nil {
		return nil, err
	}
	// Settlements a killed process left in its journal are applied first,
	// so that every report counts them.
	if err := e.replay(ctx, st, f); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// replay applies the journals killed processes left, and says on stderr
// where the records it could not apply are kept.
func (e *env) replay(ctx context.Context, st ledger.Store, f *config.File) error {
	rep, err := ledger.ReplayJournals(ctx, st, e.journalDir(f), e.replayOptions(f)...)
	for _, k := range rep.KeptAside {
		fmt.Fprintln(e.stderr, "cortexbuild:", k)
	}
	if err != nil {
		return withCode(ExitFailure, fmt.Errorf("store: %w", err))
	}
	return nil
}

// openFastLedger opens the store for invocations: with the fast path on
// (the default), calls are admitted against budget leases and settled
// through the journal.
func (e *env) openFastLedger(ctx context.Context, f *config.File) (ledger.Store, error) {
	fastPath := f.Store.FastPath == nil || *f.Store.FastPath
	var sqliteOpts []ledger.Option
	if fastPath && !f.Store.JournalSync {
		// Every settlement is in the journal before the call returns and
		// the journal is not synced, so a power cut may lose the last ones
		// whatever SQLite does: its commits need not wait for the disk
		// either. With journal_sync both do.
		sqliteOpts = append(sqliteOpts, ledger.WithSynchronousNormal())
	}
	st, err := e.openRawLedger(ctx, f, sqliteOpts...)
	if err != nil {
		return nil, err
	}
	if e.wrapStore != nil {
		st = e.wrapStore(st)
	}
	if !fastPath {
		if err := e.replay(ctx, st, f); err != nil {
			st.Close()
			return nil, err
		}
		return st, nil
	}
	opts := []ledger.FastOption{ledger.FastOnError(func(err error) { fmt.Fprintln(e.stderr, "cortexbuild:", err) })}
	if f.Store.JournalSync {
		opts = append(opts, ledger.FastSync())
	}
	if p := e.rowPricer(f); p != nil {
		opts = append(opts, ledger.FastPrices(p))
	}
	opts = append(opts, e.fastOpts...)
	fast, err := ledger.NewFast(ctx, st, e.journalDir(f), opts...)
	if errors.Is(err, ledger.ErrNoJournal) {
		return st, nil
	}
	if err != nil {
		st.Close()
		return nil, withCode(ExitFailure, fmt.Errorf("store: %w", err))
	}
	return fast, nil
}

// journalDir is where the fast path's journals live: next to the embedded
// database, or in the project's state directory.
func (e *env) journalDir(f *config.File) string {
	if f.Store.Backend == config.StorePostgres {
		return filepath.Join(e.stateDir(f), "journal")
	}
	return filepath.Join(filepath.Dir(e.sqlitePath(f)), "journal")
}

func (e *env) sqlitePath(f *config.File) string {
	path := f.Store.Path
	if path == "" {
		path = filepath.Join(config.Dir, "state.db")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.projectDir(f), path)
	}
	return path
}

func (e *env) openRawLedger(ctx context.Context, f *config.File, opts ...ledger.Option) (ledger.Store, error) {
	// Every process that settles (a command replaying a journal included)
	// records the thresholds its settlements cross.
	opts = append(opts, ledger.WithAlerts(f.Budgets.AlertThresholds()...))
	if f.Store.Backend == config.StorePostgres {
		dsn, err := f.Store.DSN.Resolve(e.lookupEnv)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		opts = append(opts, ledger.WithProject(e.project(f)), ledger.WithDialer(e.gate(f).ServiceDial(svcStore)))
		st, err := ledger.OpenPostgres(ctx, dsn, opts...)
		if r := refusedAt(f.Store.DSN.Pos(), err); r != nil {
			return nil, r
		}
		if err != nil {
			return nil, withCode(ExitFailure, fmt.Errorf("store: %w", err))
		}
		e.storePing = st.Ping
		return st, nil
	}
	path := e.sqlitePath(f)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, withCode(ExitFailure, err)
	}
	st, err := ledger.OpenSQLite(ctx, path, append(opts, ledger.WithProject(e.project(f)))...)
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("store: %w", err))
	}
	return st, nil
}

// openCache opens the project's response cache (nil when off).
func (e *env) openCache(ctx context.Context, f *config.File) (*cache.Cache, error) {
	opts := cache.Options{TTL: f.Cache.TTL}
	switch f.Cache.Backend {
	case config.CacheOff:
		return nil, nil
	case config.CacheRedis:
		u, err := f.Cache.URL.Resolve(e.lookupEnv)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		r, err := cache.OpenRedis(ctx, u, cache.RedisOptions{Dialer: e.gate(f).ServiceDial(svcCache), Logger: e.logger(f)})
		if r := refusedAt(f.Cache.URL.Pos(), err); r != nil {
			return nil, r
		}
		if err != nil {
			return nil, withCode(ExitFailure, fmt.Errorf("cache: %w", err))
		}
		e.redis = r
		return cache.New(r, opts), nil
	}
	return cache.New(cache.NewMemory(cache.MemoryOptions{MaxEntries: f.Cache.MaxEntries}), opts), nil
}

// budgetLocation is the time zone of the monthly budget.
func budgetLocation(f *config.File) *time.Location {
	if f.Budgets.Timezone != "" {
		if loc, err := time.LoadLocation(f.Budgets.Timezone); err == nil {
			return loc
		}
	}
	return time.UTC
}

// applyBudgets writes the configured limits into the store as defaults:
// this month's project budget and, for a task, the default task budget
// unless the task already has one. A limit set with 'cortexbuild budget
// set' (or 'task start --budget') wins over them until 'budget unset'
// ([ledger.Store.SetDefaultBudget]).
func applyBudgets(ctx context.Context, st ledger.Store, f *config.File, task string) error {
	if m := f.Budgets.ProjectMonthly; m != nil {
		scope := ledger.MonthScope(time.Now().In(budgetLocation(f)))
		if b, err := st.Budget(ctx, scope); err != nil {
			return err
		} else if !b.Limited || b.Limit != *m {
			if _, err := st.SetDefaultBudget(ctx, scope, *m); err != nil {
				return err
			}
		}
	}
	if t := f.Budgets.Task; t != nil && task != "" {
		scope := ledger.TaskScope(task)
		if b, err := st.Budget(ctx, scope); err != nil {
			return err
		} else if !b.Limited {
			_, err := st.SetDefaultBudget(ctx, scope, *t)
			return err
		}
	}
	return nil
}

// configuredBudget returns the configuration's default limit of a scope
// and where the configuration sets it: budgets.project_monthly for the
// current month, budgets.task for a task; nil when it sets none.
func configuredBudget(f *config.File, sc ledger.Scope) (*provider.Money, string, string) {
	switch sc.Kind() {
	case ledger.KindMonth:
		if sc == ledger.MonthScope(time.Now().In(budgetLocation(f))) && f.Budgets.ProjectMonthly != nil {
			return f.Budgets.ProjectMonthly, "budgets.project_monthly", f.Budgets.Pos.Key("project_monthly").String()
		}
	case ledger.KindTask:
		if f.Budgets.Task != nil {
			return f.Budgets.Task, "budgets.task", f.Budgets.Pos.Key("task").String()
		}
	}
	return nil, "", ""
}

// storeName says where the project's budgets are kept, for messages.
func (e *env) storeName(f *config.File) string {
	if f.Store.Backend == config.StorePostgres {
		return "the PostgreSQL ledger (store.dsn), project " + e.project(f)
	}
	return "the ledger " + e.sqlitePath(f)
}

// engine builds the orchestrator of a project from its configuration: one
// adapter per configured provider, each connecting only through the
// locality gate, priced by the catalog, with the project's pause state,
// notification sinks, ledger, budgets and cache. close releases the store.
func (e *env) engine(f *config.File) (*orchestrator.Orchestrator, error) {
	o, _, err := e.engineWith(context.Background(), f, "", false)
	return o, err
}

func (e *env) engineWith(ctx context.Context, f *config.File, task string, withStore bool) (*orchestrator.Orchestrator, func(), error) {
	closer := func() {}
	var st ledger.Store
	var c *cache.Cache
	if withStore {
		var err error
		if st, err = e.openFastLedger(ctx, f); err != nil {
			return nil, closer, err
		}
		closer = func() {
			// Settlements the store could not take are said here, loudly:
			// they were paid for.
			if err := st.Close(); err != nil {
				e.storeCloseErr = err
				fmt.Fprintln(e.stderr, "cortexbuild: closing the store:", err)
			}
		}
		if err := applyBudgets(ctx, st, f, task); err != nil {
			closer()
			return nil, func() {}, withCode(ExitFailure, fmt.Errorf("budgets: %w", err))
		}
	}
	// A command that makes calls also gets the logs, traces and metrics
	// the configuration asks for; they are flushed and stopped with it.
	// They are opened before the cache, which logs where they do.
	var obs observe.Observer
	if withStore {
		tel, err := e.openTelemetry(ctx, f)
		if err != nil {
			closer()
			return nil, func() {}, err
		}
		closeStore := closer
		closer = func() { closeStore(); tel.close() }
		obs = tel.observer
		if c, err = e.openCache(ctx, f); err != nil {
			closer()
			return nil, func() {}, err
		}
	}
	o, err := e.buildEngine(f, st, c, obs)
	if err != nil {
		closer()
		return nil, func() {}, err
	}
	if withStore {
		closer = e.watchAlerts(ctx, o, st, closer)
	}
	return o, e.drainNotifications(ctx, o, closer), nil
}

// notifyDrain bounds how long a command that ends waits for the
// notifications it queued to be sent; what is left is dropped, each with a
// log line.
const notifyDrain = 5 * time.Second

// drainNotifications returns a closer that sends what the orchestrator
// still has queued to notify (within notifyDrain), then runs next.
func (e *env) drainNotifications(ctx context.Context, o *orchestrator.Orchestrator, next func()) func() {
	return func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyDrain)
		defer cancel()
		if err := o.Drain(dctx); err != nil {
			fmt.Fprintf(e.stderr, "cortexbuild: notifications not sent within %s were dropped\n", notifyDrain)
		}
		next()
	}
}

// alertPoll is how often a command that makes calls looks for budget
// alerts to announce.
const alertPoll = 5 * time.Second

// watchAlerts announces the budget alerts of the ledger while the command
// runs (those other processes recorded too, once between them), and once
// more when it ends, after its own settlements are in the store; then it
// runs closeStore. A failed announcement is said on stderr and retried by
// a later pass, of this process or another.
func (e *env) watchAlerts(ctx context.Context, o *orchestrator.Orchestrator, st ledger.Store, closeStore func()) func() {
	report := func(err error) { fmt.Fprintln(e.stderr, "cortexbuild:", err) }
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.WatchAlerts(wctx, alertPoll, report)
	}()
	return func() {
		stop()
		<-done
		actx := context.WithoutCancel(ctx)
		if f, ok := st.(*ledger.Fast); ok {
			// Briefly: a store that does not take the settlements is
			// reported by closeStore, and their alerts are announced by
			// the process that applies them.
			fctx, cancel := context.WithTimeout(actx, 2*time.Second)
			_ = f.Flush(fctx)
			cancel()
		}
		actx, cancel := context.WithTimeout(actx, 15*time.Second)
		defer cancel()
		if _, err := o.AnnounceAlerts(actx); err != nil && !errors.Is(err, ledger.ErrUnavailable) {
			report(err)
		}
		closeStore()
	}
}

func (e *env) buildEngine(f *config.File, st ledger.Store, c *cache.Cache, obs observe.Observer) (*orchestrator.Orchestrator, error) {
	cat, err := e.catalog(f)
	if err != nil {
		return nil, err
	}
	g := e.gate(f)
	build := func(name string) (orchestrator.Endpoint, credentialSum, error) {
		return e.buildEndpoint(f, name, cat, g)
	}
	// The secrets file's state is taken before the endpoints are built,
	// so that a change made while they are is seen by the first request.
	live := e.liveCredentials(f, build)
	var eps []orchestrator.Endpoint
	for _, name := range f.ProviderNames() {
		ep, sum, err := build(name)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		if ep.Unavailable != "" {
			fmt.Fprintf(e.stderr, "provider %s is unavailable: %s\n", name, ep.Unavailable)
		}
		eps = append(eps, ep)
		if live != nil {
			live.seen(ep, sum)
		}
	}
	var updates orchestrator.EndpointUpdater
	if live != nil {
		updates = live
	}
	agents := map[string]orchestrator.AgentSettings{}
	budgets := map[string]orchestrator.AgentBudget{}
	caching := map[string]*bool{}
	for name, a := range f.Agents {
		agents[name] = orchestrator.AgentSettings{Tier: a.Tier, Model: a.Model, Providers: a.Providers, MaxTokens: a.MaxTokens}
		if a.Budget != nil {
			budgets[name] = orchestrator.AgentBudget{Limit: *a.Budget, Escalate: a.OverBudget == config.OverBudgetEscalate}
		}
		caching[name] = a.Cache
	}
	failsOpen := f.Store.LoopbackFailsOpen == nil || *f.Store.LoopbackFailsOpen
	sinks := orchestrator.Notifiers{orchestrator.LogNotifier{Logger: slog.New(slog.NewTextHandler(e.stderr, nil))}}
	if u := f.Notifications.WebhookURL; !u.IsZero() {
		raw, err := u.Resolve(e.lookupEnv)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		if pu, err := url.Parse(raw); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
			return nil, withCode(ExitConfig, u.Pos().Errorf("notifications.webhook_url is not an http(s) URL"))
		}
		if err := checkServiceURL(g, svcWebhook, u.Pos(), raw); err != nil {
			return nil, err
		}
		sinks = append(sinks, orchestrator.WebhookNotifier{URL: raw, Client: g.ServiceClient(svcWebhook, &http.Client{Timeout: 10 * time.Second})})
	}
	return orchestrator.New(orchestrator.Settings{
		Project:         e.project(f),
		Endpoints:       eps,
		Preference:      f.Routing.Preference,
		Agents:          agents,
		AllowAlternates: f.Routing.AllowAlternates,
		MaxRetryAfter:   f.Routing.MaxRetryAfter,
		Gate:            gateCheck{g},
		Notifier:        sinks,
		Notify:          orchestrator.NotifySettings{Logger: e.logger(f)},
		Observer:        obs,
		State:           e.projectState(f),
		Ledger:          st,
		AgentBudgets:    budgets,
		Location:        budgetLocation(f),
		FreeFailsOpen:   failsOpen,
		Cache:           c,
		CacheAgents:     caching,
		Critic:          orchestrator.CriticSettings{RequireDifferentVendor: f.Critic.RequireDifferentVendor},
		Breaker:         e.breakerSettings(f),
		Headroom:        f.Routing.RateLimitHeadroom.Settings(),
		Updates:         updates,
		Sleep:           e.sleep,
		OnWait:          e.onWait,
	})
}

// buildEndpoint builds one configured provider's endpoint through the
// locality gate: its adapter, or, when its credentials are not set or the
// secrets file it needs cannot be read, the reason it is unavailable
// (only this provider needs them: the others serve). sum identifies the
// credentials it was built with. An error is a configuration the adapter
// cannot be built from.
func (e *env) buildEndpoint(f *config.File, name string, cat provider.Pricer, g *locality.Gate) (orchestrator.Endpoint, credentialSum, error) {
	p := f.Providers[name]
	s, err := f.Resolve(name, e.registry, e.lookupEnv)
	var mc *config.MissingCredentialError
	if errors.As(err, &mc) {
		return orchestrator.Endpoint{Name: name, Unavailable: strings.ReplaceAll(mc.Error(), "\n", "; ")}, credentialSum{}, nil
	}
	if err != nil {
		return orchestrator.Endpoint{}, credentialSum{}, err
	}
	s.Pricer = cat
	s.HTTPClient = g.Client(name, providerClient())
	a, err := e.registry.New(p.Type, s)
	if err != nil {
		return orchestrator.Endpoint{}, credentialSum{}, fmt.Errorf("providers.%s: %w", name, err)
	}
	return orchestrator.Endpoint{Name: name, Adapter: a, AllowImageURLs: p.AllowImageURLs}, sumCredentials(s.Credentials), nil
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
	if l, ok := r.(*lockedWriter); ok {
		r = l.w
	}
	f, ok := r.(*os.File)
	// A character device is not enough: /dev/null is one, and a command
	// run by a script or CI with its input from there has nobody to ask.
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirm asks a yes/no question on a terminal.
func (e *env) confirm(question string) bool {
	fmt.Fprint(e.stderr, question+" [y/N] ")
	var answer string
	fmt.Fscanln(e.stdin, &answer)
	return strings.EqualFold(strings.TrimSpace(answer), "y") || strings.EqualFold(strings.TrimSpace(answer), "yes")
}

// providerClient is the base HTTP client of provider calls: Go's default
// transport settings, but keeping up to 256 idle connections per host
// instead of 2, so that concurrent calls (a gateway under load) reuse their
// connections instead of opening one per call.
func providerClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}}
}
