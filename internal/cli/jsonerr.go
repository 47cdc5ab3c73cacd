package cli

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// jsonError is how a failed --json command says why on standard output:
// {"error": {"kind": "...", "message": "..."}}, alone or, for a command
// whose report says what failed (doctor, health, smoke, config validate,
// critic check), added to the report.
type jsonError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// kindError names the kind of a failure that the error itself does not
// tell (a failed check, a rejected review).
type kindError struct {
	kind string
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

func withKind(kind string, err error) error { return &kindError{kind: kind, err: err} }

// errorKind classifies a command's failure for --json: usage, config,
// budget, paused, unpriced, no_candidate, store, a provider error's kind
// (auth, rate_limit, timeout, …), or failure.
func errorKind(err error, code int) string {
	var ke *kindError
	switch {
	case errors.As(err, &ke):
		return ke.kind
	case code == ExitUsage:
		return "usage"
	case code == ExitConfig:
		return "config"
	case errors.As(err, new(*orchestrator.EstimateError)), errors.Is(err, ledger.ErrOverBudget), errors.Is(err, ledger.ErrPaused):
		return "budget"
	case errors.Is(err, orchestrator.ErrPaused):
		return "paused"
	case errors.Is(err, orchestrator.ErrUnpriced):
		return "unpriced"
	case errors.Is(err, orchestrator.ErrNoCandidate):
		return "no_candidate"
	case errors.Is(err, ledger.ErrUnavailable), errors.Is(err, ledger.ErrSchemaTooNew), errors.Is(err, ledger.ErrNoJournal):
		return "store"
	}
	if k := provider.KindOf(err); k != provider.KindUnknown {
		return k.String()
	}
	return "failure"
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitUsage // cobra's own errors: unknown command or flag, bad args
}

// writeReport writes a --json command's report. When failed is not nil the
// report carries it as "error" and the returned error exits with failed's
// code without saying it again.
func writeReport(w io.Writer, report any, failed error) error {
	if failed == nil {
		return writeJSON(w, report)
	}
	b, err := json.Marshal(report)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &fields); err != nil {
		return withCode(ExitFailure, err)
	}
	code := exitCode(failed)
	b, _ = json.Marshal(jsonError{Kind: errorKind(failed, code), Message: failed.Error()})
	fields["error"] = b
	if err := writeJSON(w, fields); err != nil {
		return withCode(ExitFailure, err)
	}
	return withCode(code, errSilent)
}

// wantsJSON says whether cmd was asked for --json output. When parsing the
// flags failed, the arguments say.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	if f == nil {
		return false
	}
	if f.Value.String() == "true" {
		return true
	}
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.Contains(args, "--json") || slices.Contains(args, "--json=true")
}

// countingWriter remembers whether anything was written, so that a command
// that printed its output before failing is not followed by a second JSON
// document.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// lockedWriter serialises the writes of several goroutines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
