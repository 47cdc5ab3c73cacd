// Package cli is the cortexbuild command line and CortexBuild's composition
// root: one file per subcommand, each building the components it needs.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cortexbuild/cortexbuild/cache"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Exit codes, documented in 'cortexbuild --help' and the README.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the command ran and failed (provider error, check failed)
	ExitUsage   = 2 // wrong flags or arguments
	ExitConfig  = 3 // the configuration file is missing or invalid
)

const exitCodesHelp = `Exit codes:
  0  success
  1  the command failed (a provider error, an unhealthy check)
  2  usage error (unknown command, flag or argument)
  3  configuration error (llm-config.yaml missing or invalid)`

// errSilent fails a command that has already said why (in its JSON output).
var errSilent = errors.New("failed")

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// env is what every command shares: streams, flags, and the components the
// root builds lazily.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	configPath     string
	getenv         func(string) string
	lookupEnv      func(string) (string, bool)
	registry       *provider.Registry
	wd             string
	// resolver and dial, when set, replace the locality gate's DNS and
	// dialer (tests use recording, refusing ones).
	resolver locality.Resolver
	dial     locality.DialFunc
	// recheck bounds how often a long-running command looks at the files
	// other processes change (keys, pause, breakers); zero looks on every
	// use, which is what a one-shot command wants.
	recheck time.Duration
	// logOut is where observability.logs writes (stderr or logs.file),
	// once a command that makes calls has opened it; nil before.
	logOut io.Writer
	// fastOpts are added to the fast ledger's options (tests set its
	// clock).
	fastOpts []ledger.FastOption
	// storeCloseErr is what closing the store of a command that makes
	// calls reported (settlements it could not write): the command then
	// exits non-zero, whatever it did.
	storeCloseErr error
	// wrapStore, when set, wraps the store of a command that makes calls
	// (tests make it fail).
	wrapStore func(ledger.Store) ledger.Store
	// sleep, when set, replaces the orchestrator's waits (tests);
	// onWait is told of each wait (invoke says so on stderr).
	sleep  func(ctx context.Context, d time.Duration) error
	onWait func(provider string, d time.Duration, why string)
	// projectIDs are the ids of the loaded configurations that set no
	// project:, by file (see keepProjectID).
	projectIDs map[string]string
	// redis is the shared cache a command that makes calls opened
	// (cache.backend: redis), nil otherwise; storePing pings its
	// PostgreSQL store (store.backend: postgres), nil otherwise. serve
	// keeps the fleet-wide state in the first and checks both in /readyz.
	redis     *cache.Redis
	storePing func(context.Context) error
	// shared are the projects' shared states in PostgreSQL this process
	// opened (store.backend: postgres), closed when the command ends.
	shared *sharedStates
}

// Main runs the command line with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, lookupEnv: os.LookupEnv, registry: builtin.Registry()}
	if wd, err := os.Getwd(); err == nil {
		e.wd = wd
	}
	return e.run(ctx, args)
}

func (e *env) run(ctx context.Context, args []string) int {
	stdout := &countingWriter{w: e.stdout}
	e.stdout = stdout
	// Background work (the store's write errors, the gateway's log lines)
	// writes to standard error while the command does.
	stderr := &lockedWriter{w: e.stderr}
	e.stderr = stderr
	defer func() { e.stdout, e.stderr = stdout.w, stderr.w }()
	if e.shared == nil {
		e.shared = &sharedStates{}
	}
	defer e.shared.close()
	root := e.rootCmd()
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil && e.storeCloseErr != nil {
		// The command did its work, but not all that it paid for is in
		// the store: what is missing was printed when the store closed.
		err = withCode(ExitFailure, errors.New("the store was not closed cleanly: see above for what it could not write"))
	}
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	if !errors.Is(err, errSilent) {
		// A --json command says why on standard output too, unless it
		// already printed its output there.
		if stdout.n == 0 && wantsJSON(cmd, args) {
			writeJSON(e.stdout, map[string]jsonError{"error": {Kind: errorKind(err, code), Message: err.Error()}})
		}
		fmt.Fprintln(e.stderr, "cortexbuild:", err)
	}
	return code
}

func (e *env) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "cortexbuild",
		Short: "CortexBuild's provider layer: routing, prices and budgets for AI coding agents",
		Long: `cortexbuild configures and runs CortexBuild's LLM provider layer: the only part of
CortexBuild that talks to model providers (Anthropic, OpenAI-compatible servers, Gemini).

The project's configuration lives in .cortexbuild/llm-config.yaml (found in the current
directory or a parent); 'cortexbuild init' writes a commented starter.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&e.configPath, "config", "", "configuration file (default: .cortexbuild/llm-config.yaml in this directory or a parent)")
	root.AddCommand(e.versionCmd(), e.initCmd(), e.configCmd(), e.pricingCmd(), e.providersCmd(),
		e.invokeCmd(), e.routeCmd(), e.projectCmd(), e.consentCmd(), e.simCmd(), e.demoCmd(), e.spendCmd(), e.budgetCmd(), e.taskCmd(),
		e.renderCmd())
	root.AddCommand(e.criticCmd())
	root.AddCommand(e.serveCmd())
	root.AddCommand(e.doctorCmd())
	e.completions(root)
	return root
}

// ceilings are the directories the search for a project does not enter
// from below ([config.CeilingEnv]).
func (e *env) ceilings() []string { return config.Ceilings(e.getenv(config.CeilingEnv)) }

// loadConfig returns the project's configuration: the --config file, the
// file found from the working directory, or the defaults when there is
// none and required is false.
func (e *env) loadConfig(required bool) (*config.File, error) {
	path := e.configPath
	if path == "" {
		p, err := config.Find(e.wd, e.ceilings()...)
		if errors.Is(err, config.ErrNotFound) && !required {
			return config.Default(), nil
		}
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		path = p
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.wd, path)
	}
	f, err := config.Load(path, e.registry)
	if err != nil {
		return nil, withCode(ExitConfig, err)
	}
	// The project root (projectRoot) follows from the file's directory,
	// whatever the spelling of the path: made absolute and with its links
	// resolved (the file itself may be a link to a shared configuration).
	f.Path = filepath.Join(canonicalDir(filepath.Dir(path)), filepath.Base(path))
	// Credentials saved from the web console, asked after the file and
	// the environment.
	f.Secrets = config.OpenSecretsFile(e.secretsPath(f))
	// The id of a project without project: is kept in its state directory
	// from first use (config validate only reads the file).
	if f.Project == "" && !required {
		id, err := e.keepProjectID(f)
		if err != nil {
			return nil, withCode(ExitConfig, err)
		}
		if e.projectIDs == nil {
			e.projectIDs = map[string]string{}
		}
		e.projectIDs[f.Path] = id
	}
	return f, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
