package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/render"
	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

// Doctor check statuses.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
)

// doctorCheck is one line of 'cortexbuild doctor': what was checked, the
// verdict, and the one-line fix when it is not ok.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

type doctorReport struct {
	OK     bool          `json:"ok"`
	Dir    string        `json:"dir"`
	Mode   string        `json:"mode"` // rendered or orchestration
	Checks []doctorCheck `json:"checks"`

	// Project is the project's id (see config.File.ProjectID).
	Project string `json:"project,omitempty"`
}

// doctor gathers the checks of one run.
type doctor struct {
	e           *env
	strict      bool
	execTimeout time.Duration
	checks      []doctorCheck
}

func (d *doctor) add(name, status, detail, fix string) {
	if status == checkOK {
		fix = ""
	}
	d.checks = append(d.checks, doctorCheck{Name: name, Status: status, Detail: detail, Fix: fix})
}

// failOrWarn is fail when cond holds, else warn.
func failOrWarn(cond bool) string {
	if cond {
		return checkFail
	}
	return checkWarn
}

func (e *env) doctorCmd() *cobra.Command {
	var (
		asJSON, strict bool
		versionsFile   string
		execTimeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the host CLIs against their pinned versions and the project's setup",
		Long: `doctor checks, each with ok, warn or fail and a one-line fix:

  host CLIs       gh, claude (Claude Code), codex (Codex CLI) and copilot (Copilot CLI)
                  found on PATH, at the versions CortexBuild pins (tools/hostversions/host-versions.yaml, built in);
                  a missing or different CLI is a warning (a failure with --strict)
  config          .cortexbuild/llm-config.yaml is valid, or absent (rendered mode)
  credentials     every configured provider's credentials resolve
  store           the ledger is reachable: the SQLite file (or its directory) is writable,
                  or PostgreSQL answers; its integrity check finds nothing wrong (SQLite's
                  integrity_check, then the ledger's own invariants); a configured Redis
                  cache answers
  journal         no journal record was kept aside by a replay (a torn last record is a
                  warning, a damaged one a failure)
  consent         every configured provider off this machine has recorded consent (and
                  none is configured off this machine in local-only mode)
  rendered files  the files 'cortexbuild render' writes are up to date

In rendered mode (orchestration off) provider problems are warnings. It exits 1
when any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if execTimeout <= 0 {
				return withCode(ExitUsage, errors.New("--exec-timeout must be positive"))
			}
			d := &doctor{e: e, strict: strict, execTimeout: execTimeout}
			ctx := cmd.Context()
			d.hostCLIs(ctx, versionsFile)
			f, orchestration := d.config()
			rep := doctorReport{Dir: e.wd, Mode: "rendered"}
			if orchestration {
				rep.Mode = "orchestration"
			}
			if f != nil {
				rep.Dir, rep.Project = e.projectDir(f), e.project(f)
				d.credentials(f, orchestration)
				d.store(ctx, f)
				d.journals(f)
				d.consent(ctx, f, orchestration)
			} else {
				d.add("store", checkWarn, "not checked: the configuration is invalid", "fix the configuration first")
			}
			d.renderedFiles(projectDir(e.wd, e.ceilings()), orchestration)

			rep.Checks = d.checks
			failed := 0
			for _, c := range d.checks {
				if c.Status == checkFail {
					failed++
				}
			}
			rep.OK = failed == 0
			w := cmd.OutOrStdout()
			if asJSON {
				var ferr error
				if !rep.OK {
					ferr = withCode(ExitFailure, withKind("check_failed", fmt.Errorf("%d check(s) failed", failed)))
				}
				return writeReport(w, rep, ferr)
			}
			printDoctor(w, rep)
			if !rep.OK {
				return withCode(ExitFailure, fmt.Errorf("%d check(s) failed", failed))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	fl.BoolVar(&strict, "strict", false, "fail (not warn) when a host CLI is missing or not at its pinned version, as the VM image requires")
	fl.StringVar(&versionsFile, "versions", "", "host CLI pins file to compare with (default: the pins built into cortexbuild)")
	fl.DurationVar(&execTimeout, "exec-timeout", 10*time.Second, "time allowed for each host CLI to print its version")
	return cmd
}

// lookPath finds an executable called name in the directories of path (a
// PATH value), as the shell would.
func doctorLookPath(name, path string) (string, bool) {
	if strings.ContainsRune(name, filepath.Separator) {
		return "", false
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue // an empty entry means the working directory: never trusted here
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// hostCLIs compares each pinned host CLI found on PATH with its pin.
func (d *doctor) hostCLIs(ctx context.Context, versionsFile string) {
	var pins *hostversions.Pins
	var err error
	if versionsFile != "" {
		data, rerr := os.ReadFile(versionsFile)
		if rerr != nil {
			d.add("host CLIs", checkFail, rerr.Error(), "pass an existing file to --versions, or drop the flag to use the built-in pins")
			return
		}
		pins, err = hostversions.Parse(versionsFile, data)
	} else {
		pins, err = hostversions.Default()
	}
	if err != nil {
		d.add("host CLIs", checkFail, "the pins file is invalid: "+err.Error(), "correct the file it names")
		return
	}
	path := d.e.getenv("PATH")
	for _, t := range pins.Tools {
		name := "host " + t.Name
		fix := "install " + t.Title + " " + t.Version + ": " + t.Install
		exe, ok := doctorLookPath(t.VersionCommand[0], path)
		if !ok {
			d.add(name, failOrWarn(d.strict), fmt.Sprintf("%s is not on PATH (pinned %s)", t.Title, t.Version), fix)
			continue
		}
		got, err := d.version(ctx, exe, t.VersionCommand[1:], path)
		switch {
		case err != nil:
			d.add(name, failOrWarn(d.strict), fmt.Sprintf("'%s' %v (pinned %s)", strings.Join(t.VersionCommand, " "), err, t.Version), "reinstall: "+t.Install)
		case got != t.Version:
			d.add(name, failOrWarn(d.strict), fmt.Sprintf("%s %s installed at %s, pinned %s", t.Title, got, exe, t.Version), fix)
		default:
			d.add(name, checkOK, fmt.Sprintf("%s %s (pinned) at %s", t.Title, got, exe), "")
		}
	}
}

// version runs a version command with a timeout and extracts the version.
func (d *doctor) version(ctx context.Context, exe string, args []string, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d.execTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, exe, args...)
	env := []string{"PATH=" + path}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	c.Env = env
	c.Stdin = nil
	c.WaitDelay = time.Second // a child that keeps the output open cannot hold the doctor
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		return "", fmt.Errorf("did not answer within %s", d.execTimeout)
	}
	if err != nil {
		return "", fmt.Errorf("failed: %v", err)
	}
	v := hostversions.ExtractVersion(string(out))
	if v == "" {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return "", fmt.Errorf("printed no version (%q)", clipText(first, 80))
	}
	return v, nil
}

// config checks the configuration; it returns nil when it is invalid.
func (d *doctor) config() (*config.File, bool) {
	e := d.e
	f, err := e.loadConfig(false)
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		d.add("config", checkFail, "invalid: "+first, "run 'cortexbuild config validate' and correct each line it reports")
		return nil, false
	}
	orchestration := f.OrchestrationEnabled(e.getenv)
	mode := "rendered mode: the host tools run the models"
	if orchestration {
		mode = "orchestration mode: CortexBuild calls the providers"
	}
	if f.Path == "" {
		d.add("config", checkOK, "no llm-config.yaml: "+mode, "")
		return f, orchestration
	}
	d.add("config", checkOK, fmt.Sprintf("valid: %s (%d provider(s); %s)", f.Path, len(f.Providers), mode), "")
	for _, w := range f.Warnings() {
		d.add("config", checkWarn, w, "see docs/configuration.md")
	}
	return f, orchestration
}

func (d *doctor) credentials(f *config.File, orchestration bool) {
	if len(f.Providers) == 0 {
		return
	}
	var bad []string
	onlyMissing := true
	for _, name := range f.ProviderNames() {
		if _, err := f.Resolve(name, d.e.registry, d.e.lookupEnv); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			bad = append(bad, first)
			if !errors.As(err, new(*config.MissingCredentialError)) {
				onlyMissing = false
			}
		}
	}
	if len(bad) == 0 {
		d.add("credentials", checkOK, fmt.Sprintf("every provider's credentials resolve (%s)", strings.Join(f.ProviderNames(), ", ")), "")
		return
	}
	status := failOrWarn(orchestration)
	if onlyMissing && len(bad) < len(f.ProviderNames()) {
		// The providers without their credential are unavailable; the
		// others serve.
		status = checkWarn
	}
	d.add("credentials", status, strings.Join(bad, "; "), "export the variables named (see 'cortexbuild providers list') or save the key in the console of 'cortexbuild serve', then 'cortexbuild config validate'")
}

// store checks that the ledger (and a Redis cache) can be reached,
// without creating anything that is not there yet.
func (d *doctor) store(ctx context.Context, f *config.File) {
	e := d.e
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g := e.gate(f) // the store and the cache connect only where it allows
	if f.Store.Backend == config.StorePostgres {
		dsn, err := f.Store.DSN.Resolve(e.lookupEnv)
		if err != nil {
			d.add("store", checkFail, "store.dsn: "+err.Error(), "export the variable store.dsn names")
		} else if st, err := ledger.OpenPostgres(ctx, dsn, ledger.WithProject(e.project(f)), ledger.WithDialer(g.ServiceDial(svcStore))); err != nil {
			if r := refusedAt(f.Store.DSN.Pos(), err); r != nil {
				d.add("store", checkFail, r.Error(), "point store.dsn at this machine or set locality.mode: consent")
			} else {
				d.add("store", checkFail, "PostgreSQL: "+redactDSN(err.Error(), dsn), "start PostgreSQL or correct store.dsn")
			}
		} else {
			d.check(ctx, st, "PostgreSQL reachable, schema current", func(msg string) string { return redactDSN(msg, dsn) },
				"stop the processes using the schema, take a dump of it (pg_dump), and correct or restore the rows named")
			d.unpriced(ctx, st)
			d.costs(ctx, st, f)
			st.Close()
		}
	} else {
		path := f.Store.Path
		if path == "" {
			path = filepath.Join(config.Dir, "state.db")
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(e.projectDir(f), path)
		}
		d.sqlite(ctx, path, f)
	}
	if f.Cache.Backend == config.CacheRedis {
		u, err := f.Cache.URL.Resolve(e.lookupEnv)
		if err != nil {
			d.add("cache", checkFail, "cache.url: "+err.Error(), "export the variable cache.url names")
		} else if r, err := cache.OpenRedis(ctx, u, cache.RedisOptions{Dialer: g.ServiceDial(svcCache)}); err != nil {
			if r := refusedAt(f.Cache.URL.Pos(), err); r != nil {
				d.add("cache", checkFail, r.Error(), "point cache.url at this machine or set locality.mode: consent")
			} else {
				d.add("cache", checkFail, redactDSN(err.Error(), u), "start Redis or correct cache.url")
			}
		} else {
			r.Close()
			d.add("cache", checkOK, "Redis reachable", "")
		}
	}
}

// redactDSN removes a connection string's password from msg.
func redactDSN(msg, dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			msg = provider.Redact(msg, pw)
		}
	}
	return provider.Redact(msg, dsn)
}

// corruptFix is what to do about a damaged SQLite ledger.
const corruptFix = "stop every cortexbuild process using it, copy the file (and its -wal) aside, then restore a backup or salvage the rows with 'sqlite3 FILE .recover'"

func (d *doctor) sqlite(ctx context.Context, path string, f *config.File) {
	if _, err := os.Stat(path); err == nil {
		st, err := ledger.OpenSQLite(ctx, path, ledger.WithProject(d.e.project(f)))
		if err != nil {
			fix := "check the file's permissions, or move it aside to start a new ledger"
			if strings.Contains(err.Error(), "malformed") || strings.Contains(err.Error(), "not a database") {
				fix = corruptFix
			}
			d.add("store", checkFail, "SQLite "+path+": "+err.Error(), fix)
			return
		}
		d.check(ctx, st, "SQLite "+path+" opens, schema current", func(msg string) string { return msg }, corruptFix)
		d.unpriced(ctx, st)
		d.costs(ctx, st, f)
		st.Close()
		return
	}
	// Not created yet: the nearest existing directory must be writable.
	dir := filepath.Dir(path)
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			break
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.add("store", checkFail, "SQLite "+path+": "+err.Error(), "make "+dir+" accessible")
			return
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	tmp, err := os.CreateTemp(dir, ".cortexbuild-doctor-*")
	if err != nil {
		d.add("store", checkFail, "SQLite "+path+" cannot be created: "+dir+" is not writable", "make "+dir+" writable, or set store.path to a writable place")
		return
	}
	tmp.Close()
	os.Remove(tmp.Name())
	d.add("store", checkOK, "SQLite "+path+" will be created on first use ("+dir+" is writable)", "")
}

// check runs the store's integrity check and reports it as the store
// line: ok with what was checked, or fail with the first problems.
func (d *doctor) check(ctx context.Context, st ledger.Store, opened string, redact func(string) string, fix string) {
	ck, ok := st.(ledger.Checker)
	if !ok {
		d.add("store", checkOK, opened+" (no integrity check for this store)", "")
		return
	}
	c, err := ck.Check(ctx)
	switch {
	case err != nil:
		d.add("store", checkFail, opened+", but its integrity check could not run: "+redact(err.Error()), fix)
	case len(c.Problems) > 0:
		shown := c.Problems
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(c.Problems)-3))
		}
		d.add("store", checkFail, opened+", but it is damaged: "+redact(strings.Join(shown, "; "))+" (checked: "+c.Checked+")", fix)
	default:
		d.add("store", checkOK, opened+", integrity ok (checked: "+c.Checked+")", "")
	}
}

// journals lists the journal records a replay kept aside.
func (d *doctor) journals(f *config.File) {
	dir := d.e.journalDir(f)
	var torn, corrupt, repriced []string
	for kind, list := range map[string]*[]string{ledger.KeptAsideTorn: &torn, ledger.KeptAsideCorrupt: &corrupt, ledger.KeptAsideRepriced: &repriced} {
		found, _ := filepath.Glob(filepath.Join(dir, "*.journal."+kind+"-*"))
		*list = found
	}
	if len(repriced) > 0 {
		d.add("journal", checkFail, fmt.Sprintf("%d file(s) of journal settlements that cost less than their usage (changed after they were written), applied at their usage's price: %s", len(repriced), strings.Join(repriced, ", ")),
			"find out what changed the journal (each line names its invocation and both figures in the replay's message), then remove each file")
	}
	switch {
	case len(corrupt) > 0:
		detail := fmt.Sprintf("%d file(s) of damaged journal records kept aside, not applied: %s", len(corrupt), strings.Join(corrupt, ", "))
		if len(torn) > 0 {
			detail += fmt.Sprintf("; and %d of torn last records: %s", len(torn), strings.Join(torn, ", "))
		}
		d.add("journal", checkFail, detail,
			"read them and compare with 'cortexbuild spend' (a settlement missing there was paid and is not counted), then remove each file once accounted for")
	case len(torn) > 0:
		d.add("journal", checkWarn, fmt.Sprintf("%d torn last record(s) kept aside, not applied (cut short as their process died: never acknowledged): %s", len(torn), strings.Join(torn, ", ")),
			"compare them with 'cortexbuild spend', then remove each file")
	}
}

// consent checks every configured provider's endpoint against the
// locality gate: resolved, but never connected to.
func (d *doctor) consent(ctx context.Context, f *config.File, orchestration bool) {
	e := d.e
	g := e.gate(f)
	for _, name := range f.ProviderNames() {
		check := "consent " + name
		endpoint, err := d.endpoint(f, name)
		if err != nil || endpoint == "" {
			d.add(check, checkWarn, "endpoint unknown: "+fmt.Sprint(err), "set providers."+name+".base_url")
			continue
		}
		shown := displayURL(endpoint)
		dec, err := g.Check(ctx, name, endpoint)
		switch {
		case err == nil && dec.Tier == locality.TierLoopback:
			d.add(check, checkOK, shown+" is on this machine: no consent needed", "")
		case err == nil:
			d.add(check, checkOK, shown+": "+dec.Reason, "")
		case errors.Is(err, locality.ReasonNoConsent):
			why := " is not on this machine and has no recorded consent"
			var le *locality.Error
			if errors.As(err, &le) && le.Stale {
				if le.Consented != "" {
					why = " is not on this machine and its consent covers " + le.Consented + " only"
				} else {
					why = " is not on this machine and its consent was recorded without an endpoint, so it covers none"
				}
			}
			d.add(check, failOrWarn(orchestration), shown+why, "cortexbuild consent grant "+name)
		case errors.Is(err, locality.ReasonLocalOnly):
			d.add(check, failOrWarn(orchestration), shown+" is not on this machine and locality.mode is local-only",
				"point providers."+name+".base_url at this machine, remove the provider, or set locality.mode: consent")
		case errors.Is(err, locality.ReasonResolve):
			d.add(check, checkWarn, shown+": the host does not resolve", "check providers."+name+".base_url and the network's DNS")
		default:
			d.add(check, failOrWarn(orchestration), shown+": "+err.Error(), "see docs/locality.md")
		}
	}
}

// endpoint returns the base URL provider name talks to, as its adapter
// would: building an adapter opens no connection.
func (d *doctor) endpoint(f *config.File, name string) (string, error) {
	e := d.e
	if u, err := e.endpointOf(f, name); err != nil || u != "" {
		return u, err
	}
	p := f.Providers[name]
	reg, err := e.registry.Lookup(p.Type)
	if err != nil {
		return "", err
	}
	s, _ := f.Resolve(name, e.registry, e.lookupEnv)
	for _, field := range reg.Credentials {
		if s.Credentials == nil {
			s.Credentials = map[string]string{}
		}
		if s.Credentials[field.Name] == "" {
			s.Credentials[field.Name] = "placeholder" // only to build the adapter; nothing is sent
		}
	}
	a, err := e.registry.New(p.Type, s)
	if err != nil {
		return "", err
	}
	if ep, ok := a.(provider.Endpointer); ok {
		return ep.BaseURL(), nil
	}
	return "", errors.New("the adapter does not say its endpoint")
}

// renderedFiles checks the files 'cortexbuild render' writes.
func (d *doctor) renderedFiles(dir string, orchestration bool) {
	const name = "rendered files"
	st, err := checkRenderedFiles(dir)
	var serr *render.SourceError
	switch {
	case errors.As(err, &serr):
		d.add(name, checkFail, "the personas and rules under "+render.SourceDir+" are invalid", "run 'cortexbuild render --check' and correct each line it reports")
	case err != nil:
		d.add(name, checkFail, err.Error(), "run 'cortexbuild render --check' for details")
	case !st.rendered && orchestration:
		d.add(name, checkOK, "none rendered (orchestration mode does not need them)", "")
	case !st.rendered:
		d.add(name, checkWarn, "no host files rendered in "+dir+": Claude Code, Codex CLI, Copilot and Cursor get no CortexBuild rules", "cortexbuild render")
	case st.upToDate:
		d.add(name, checkOK, fmt.Sprintf("up to date (%d files)", st.files), "")
	default:
		shown := st.changed
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(st.changed)-5))
		}
		d.add(name, checkFail, fmt.Sprintf("%d file(s) differ from what render writes: %s", len(st.changed), strings.Join(shown, ", ")),
			"cortexbuild render (hand edits: move them into "+render.AgentsDir+"/ or "+render.RulesDir+"/, or use --force)")
	}
}

// renderedState is what [checkRenderedFiles] finds.
type renderedState struct {
	rendered bool     // the project has a render manifest
	upToDate bool     // every file is as render writes it
	files    int      // files render manages
	changed  []string // files render would create, update or remove, or that were edited
}

// checkRenderedFiles is the doctor's hook into the render package: whether
// the host files in dir are as 'cortexbuild render' would write them, the
// same test as 'cortexbuild render --check' (render.NewPlan and
// Plan.UpToDate).
func checkRenderedFiles(dir string) (renderedState, error) {
	var st renderedState
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(render.ManifestPath))); errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	st.rendered = true
	plan, err := render.NewPlan(render.Options{Dir: dir})
	if err != nil {
		return st, err
	}
	st.upToDate, st.files = plan.UpToDate(), len(plan.Actions)
	for _, a := range plan.Actions {
		if a.Op == render.OpCreate || a.Op == render.OpUpdate || a.Op == render.OpRemove || a.Conflict != "" {
			st.changed = append(st.changed, a.Path)
		}
	}
	if !st.upToDate && len(st.changed) == 0 {
		st.changed = append(st.changed, render.ManifestPath)
	}
	return st, nil
}

func printDoctor(w io.Writer, rep doctorReport) {
	if rep.Project != "" {
		fmt.Fprintf(w, "cortexbuild doctor: %s, project %s (%s mode)\n\n", rep.Dir, rep.Project, rep.Mode)
	} else {
		fmt.Fprintf(w, "cortexbuild doctor: %s (%s mode)\n\n", rep.Dir, rep.Mode)
	}
	width := 0
	for _, c := range rep.Checks {
		width = max(width, len(c.Name))
	}
	warns, fails := 0, 0
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "  %-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "        %-*s  fix: %s\n", width, "", c.Fix)
		}
		switch c.Status {
		case checkWarn:
			warns++
		case checkFail:
			fails++
		}
	}
	fmt.Fprintf(w, "\n%d check(s): %d warning(s), %d failure(s)\n", len(rep.Checks), warns, fails)
}
