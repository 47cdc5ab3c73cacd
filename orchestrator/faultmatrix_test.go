package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The fault matrix: every failure of the spec and the field, injected on
// the wire by each adapter's fake, through the orchestrator with
// ledger.Fast over SQLite and a task budget, streamed and not. Each cell
// asserts the spec's response (the failure table: kind, retries, failover,
// waits, pause) and that the ledger is consistent once drained: every
// attempt recorded exactly once under its invocation, spent equal to the
// sum of the rows (nothing billed twice), nothing held.

// fmMode is how a cell calls the orchestrator.
type fmMode string

const (
	fmInvoke fmMode = "invoke"
	fmStream fmMode = "stream"
)

// fmHoldTimeout is the attempt timeout of the faulted adapter in the cases
// whose first byte never comes: the only wall-clock wait of the matrix.
const fmHoldTimeout = 100 * time.Millisecond

// fmMaxResponse is the faulted adapter's max_response_bytes in the cases
// whose answer is larger; fmLong is larger in any protocol, unary or
// streamed, and its stream's first events fit.
const fmMaxResponse = 4096

var fmLong = strings.Repeat("All work and no play makes Jack a dull boy. ", 400)

// fmWant is the spec's response to a fault. Paths name the faulted
// provider P and the next in preference N: "P:server P:server N:ok".
type fmWant struct {
	// result is "ok" or the kind of the error the caller sees.
	result string
	path   string
	// sleeps is how many waits (backoff or retry-after) the loop made.
	sleeps int
	// paused: the project is paused after the call.
	paused bool
	// midStream: the error came after the first chunk (a stream that
	// opened), so no failover was possible.
	midStream bool
	// billed: the failed attempt on P carries partial usage and a cost.
	billed bool
	// maxWait bounds every wait the loop made (0: no bound checked).
	maxWait time.Duration
	// notes are the events notified, in order ("" for none).
	notes string
}

// fmFault is one row of the matrix.
type fmFault struct {
	name string
	// script enqueues the fault on prov's fake; it returns "" or, when the
	// fault has no meaning for prov in mode, why.
	script     func(w *world, prov string, mode fmMode) (na string)
	alternates bool
	hold       bool // the faulted adapter gets fmHoldTimeout
	capped     bool // the faulted adapter gets fmMaxResponse
	want       map[fmMode]fmWant
}

// never is a hold that is never released: the first byte never comes (the
// fake lets go when the client does).
var never = make(chan struct{})

const fmPartial = "a partial answer that is cut off before it ends, long enough for several events"

func fmFaults() []fmFault {
	serverThenFailover := fmWant{result: "ok", path: "P:server P:server P:server N:ok", sleeps: 2}
	return []fmFault{
		{
			name: "error event in a 200 stream, before any content",
			script: func(w *world, p string, m fmMode) string {
				if m == fmInvoke {
					return "no stream (a non-streaming request gets the HTTP error instead: TestFailureTable)"
				}
				switch p {
				case "anthropic":
					w.anth.Enqueue(anthropicfake.OverloadedMidStream(0))
				case "openai":
					w.oai.Enqueue(openaifake.ServerErrorMidStream(0))
				case "gemini":
					w.gem.Enqueue(geminifake.OverloadedMidStream(0))
				}
				return ""
			},
			want: map[fmMode]fmWant{fmStream: {result: "ok", path: "P:{srv} P:ok", sleeps: 1}},
		},
		{
			name: "error event in a 200 stream, after content",
			script: func(w *world, p string, m fmMode) string {
				if m == fmInvoke {
					return "no stream (a non-streaming request gets the HTTP error instead: TestFailureTable)"
				}
				switch p {
				case "anthropic":
					w.anth.Enqueue(anthropicfake.Reply{Text: fmPartial, Usage: anthropicfake.Usage{Input: 2000, Output: 50},
						MidStreamError: &anthropicfake.StreamError{Type: anthropicfake.TypeOverloaded, Message: "Overloaded", AfterEvents: 5}})
				case "openai":
					w.oai.Enqueue(openaifake.Reply{Text: fmPartial, Usage: openaifake.Usage{Prompt: 2000, Completion: 50},
						MidStreamError: &openaifake.StreamError{Message: "The server had an error while processing your request.", Type: "server_error", AfterChunks: 3}})
				case "gemini":
					w.gem.Enqueue(geminifake.Reply{Text: fmPartial, Usage: geminifake.Usage{Prompt: 2000, Candidates: 50},
						MidStreamError: &geminifake.StreamError{Code: 503, Status: geminifake.StatusUnavailable, AfterChunks: 2}})
				}
				return ""
			},
			want: map[fmMode]fmWant{fmStream: {result: "{srv}", path: "P:{srv}", midStream: true, billed: true}},
		},
		{
			name: "stream cut before its end marker, after content",
			script: func(w *world, p string, m fmMode) string {
				switch p {
				case "anthropic":
					w.anth.Enqueue(anthropicfake.Reply{Text: fmPartial, CutAfterEvents: 5})
				case "openai":
					w.oai.Enqueue(openaifake.Reply{Text: fmPartial, CutAfterChunks: 3})
				case "gemini":
					w.gem.Enqueue(geminifake.Reply{Text: fmPartial, CutAfterChunks: 2})
				}
				return ""
			},
			want: map[fmMode]fmWant{
				// Unary: the body is cut in half; a network failure is
				// retried once on the same provider.
				fmInvoke: {result: "ok", path: "P:network P:ok"},
				fmStream: {result: "network", path: "P:network", midStream: true},
			},
		},
		{
			name: "malformed JSON in a 200 body: truncated document",
			script: func(w *world, p string, m fmMode) string {
				for range 3 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.Malformed(m == fmStream, false))
					case "openai":
						w.oai.Enqueue(openaifake.Malformed(m == fmStream, false))
					case "gemini":
						w.gem.Enqueue(geminifake.Malformed(m == fmStream, false))
					}
				}
				return ""
			},
			// A server failure (the provider broke its protocol), not a
			// network one: the provider was reached and answered.
			want: map[fmMode]fmWant{fmInvoke: serverThenFailover, fmStream: serverThenFailover},
		},
		{
			name: "malformed JSON in a 200 body: invalid syntax",
			script: func(w *world, p string, m fmMode) string {
				for range 3 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.Malformed(m == fmStream, true))
					case "openai":
						w.oai.Enqueue(openaifake.Malformed(m == fmStream, true))
					case "gemini":
						w.gem.Enqueue(geminifake.Malformed(m == fmStream, true))
					}
				}
				return ""
			},
			want: map[fmMode]fmWant{fmInvoke: serverThenFailover, fmStream: serverThenFailover},
		},
		{
			name: "HTML 502 from a proxy",
			script: func(w *world, p string, m fmMode) string {
				for range 3 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.BadGateway())
					case "openai":
						w.oai.Enqueue(openaifake.BadGateway())
					case "gemini":
						w.gem.Enqueue(geminifake.BadGateway())
					}
				}
				return ""
			},
			want: map[fmMode]fmWant{fmInvoke: serverThenFailover, fmStream: serverThenFailover},
		},
		{
			name:   "response larger than max_response_bytes (4 KiB)",
			capped: true,
			script: func(w *world, p string, m fmMode) string {
				for range 3 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.Reply{Text: fmLong, Usage: anthropicfake.Usage{Input: 2000, Output: 4000}})
					case "openai":
						w.oai.Enqueue(openaifake.Reply{Text: fmLong, Usage: openaifake.Usage{Prompt: 2000, Completion: 4000}})
					case "gemini":
						w.gem.Enqueue(geminifake.Reply{Text: fmLong, Usage: geminifake.Usage{Prompt: 2000, Candidates: 4000}})
					}
				}
				return ""
			},
			// A server failure, as a malformed answer is; a stream that
			// passes the cap after its first chunk cannot fail over and
			// bills what it reported so far.
			want: map[fmMode]fmWant{
				fmInvoke: serverThenFailover,
				fmStream: {result: "server", path: "P:server", midStream: true, billed: true},
			},
		},
		{
			name: "first byte never comes",
			hold: true,
			script: func(w *world, p string, m fmMode) string {
				for range 2 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.TextReply("late").WithHold(never))
					case "openai":
						w.oai.Enqueue(openaifake.TextReply("late").WithHold(never))
					case "gemini":
						w.gem.Enqueue(geminifake.TextReply("late").WithHold(never))
					}
				}
				return ""
			},
			// Timeout: once more on the smaller tier, then the next provider.
			want: map[fmMode]fmWant{
				fmInvoke: {result: "ok", path: "P:timeout P:timeout N:ok"},
				fmStream: {result: "ok", path: "P:timeout P:timeout N:ok"},
			},
		},
		{
			name: "absurd retry-after (86400 s)",
			script: func(w *world, p string, m fmMode) string {
				switch p {
				case "anthropic":
					w.anth.Enqueue(anthropicfake.RateLimited("86400"))
				case "openai":
					w.oai.Enqueue(openaifake.RateLimited(24 * time.Hour).WithRetryAfter(24 * time.Hour))
				case "gemini":
					w.gem.Enqueue(geminifake.RateLimited("gemini-2.5-pro", 24*time.Hour))
				}
				return ""
			},
			// Above routing.max_retry_after: not waited, the next provider
			// answers, even without alternates.
			want: map[fmMode]fmWant{
				fmInvoke: {result: "ok", path: "P:rate_limit N:ok"},
				fmStream: {result: "ok", path: "P:rate_limit N:ok"},
			},
		},
		{
			name: "bad key (Gemini: 400 API_KEY_INVALID; others: their 401)",
			script: func(w *world, p string, m fmMode) string {
				switch p {
				case "anthropic":
					w.anth.Enqueue(anthropicfake.AuthError())
				case "openai":
					w.oai.Enqueue(openaifake.InvalidAPIKey("sk-wrong-000000"))
				case "gemini":
					w.gem.Enqueue(geminifake.APIKeyInvalid())
				}
				return ""
			},
			alternates: true,
			want: map[fmMode]fmWant{
				fmInvoke: {result: "auth", path: "P:auth", paused: true, notes: "project_paused"},
				fmStream: {result: "auth", path: "P:auth", paused: true, notes: "project_paused"},
			},
		},
		{
			name: "429 that will not clear (per-minute limit, repeated)",
			script: func(w *world, p string, m fmMode) string {
				for range 8 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.RateLimited("2"))
					case "openai":
						w.oai.Enqueue(openaifake.RateLimited(2 * time.Second).WithRetryAfter(2 * time.Second))
					case "gemini":
						w.gem.Enqueue(geminifake.RateLimited("gemini-2.5-pro", 2*time.Second))
					}
				}
				return ""
			},
			// Waited out three times, then the next provider.
			want: map[fmMode]fmWant{
				fmInvoke: {result: "ok", path: "P:rate_limit P:rate_limit P:rate_limit P:rate_limit N:ok", sleeps: 3, maxWait: 2 * time.Second},
				fmStream: {result: "ok", path: "P:rate_limit P:rate_limit P:rate_limit P:rate_limit N:ok", sleeps: 3, maxWait: 2 * time.Second},
			},
		},
		{
			name: "quota 429 that will not clear (billing, spend limit, daily quota)",
			script: func(w *world, p string, m fmMode) string {
				for range 4 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.SpendLimitReached())
					case "openai":
						w.oai.Enqueue(openaifake.InsufficientQuota())
					case "gemini":
						w.gem.Enqueue(geminifake.DailyQuotaExceeded("gemini-2.5-pro", 10*time.Second))
					}
				}
				return ""
			},
			// Without alternates: surfaced at once, nothing waited.
			want: map[fmMode]fmWant{
				fmInvoke: {result: "quota_exhausted", path: "P:quota_exhausted", notes: "quota_exhausted"},
				fmStream: {result: "quota_exhausted", path: "P:quota_exhausted", notes: "quota_exhausted"},
			},
		},
		{
			name:       "quota 429 that will not clear, alternates allowed",
			alternates: true,
			script: func(w *world, p string, m fmMode) string {
				for range 4 {
					switch p {
					case "anthropic":
						w.anth.Enqueue(anthropicfake.SpendLimitReached())
					case "openai":
						w.oai.Enqueue(openaifake.InsufficientQuota())
					case "gemini":
						w.gem.Enqueue(geminifake.DailyQuotaExceeded("gemini-2.5-pro", 10*time.Second))
					}
				}
				return ""
			},
			want: map[fmMode]fmWant{
				fmInvoke: {result: "ok", path: "P:quota_exhausted N:ok", notes: "quota_exhausted"},
				fmStream: {result: "ok", path: "P:quota_exhausted N:ok", notes: "quota_exhausted"},
			},
		},
	}
}

// fmServerKind is the kind each provider's in-stream error has: Anthropic's
// and Gemini's are overloaded, OpenAI's a server error.
var fmServerKind = map[string]string{"anthropic": "overloaded", "openai": "server", "gemini": "overloaded"}

// fmCell is what one cell of the matrix did.
type fmCell struct {
	result   string
	path     string
	attempts []orchestrator.Attempt
	opened   bool
}

// newFaultWorld is newWorld with ledger.Fast over a fresh SQLite store, a
// task budget, and, on the faulted provider's adapter, a short attempt
// timeout when f.hold is set, a small response cap when f.capped is.
func newFaultWorld(t *testing.T, prov string, f fmFault) (*world, *ledger.Fast) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := ledger.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	fast, err := ledger.NewFast(ctx, st, dir)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { fast.Close() })
	if err := fast.SetBudget(ctx, ledger.TaskScope(fmTask), provider.MustMoney("5")); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.AllowAlternates, s.Ledger = order(prov), f.alternates, fast
		if !f.hold && !f.capped {
			return
		}
		var timeout time.Duration
		var maxResponse int64
		if f.hold {
			timeout = fmHoldTimeout
		}
		if f.capped {
			maxResponse = fmMaxResponse
		}
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if ep.Name != prov {
				continue
			}
			base := ep.Adapter.(provider.Endpointer).BaseURL()
			var a provider.Adapter
			switch prov {
			case "anthropic":
				a, err = anthropic.New(provider.Settings{Name: prov, BaseURL: base, Credentials: map[string]string{"api_key": "ak"}, Pricer: cat, Timeout: timeout, MaxResponseBytes: maxResponse})
			case "openai":
				a, err = openaicompat.New(provider.Settings{Name: prov, Profile: "openai", BaseURL: base, Credentials: map[string]string{"api_key": "ok"}, Pricer: cat, Timeout: timeout, MaxResponseBytes: maxResponse})
			case "gemini":
				a, err = gemini.New(provider.Settings{Name: prov, BaseURL: base, Credentials: map[string]string{"api_key": "gk"}, Pricer: cat, Timeout: timeout, MaxResponseBytes: maxResponse})
			}
			if err != nil {
				t.Fatal(err)
			}
			ep.Adapter = a
		}
	})
	return w, fast
}

const fmTask = "faults"

// run makes the cell's one call and returns what the caller saw.
func (c *fmCell) run(t *testing.T, w *world, mode fmMode, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := orchestrator.Call{Agent: "builder", Task: fmTask, InvocationID: id, Request: provider.Request{Prompt: "hello", MaxTokens: 1000}}
	var err error
	switch mode {
	case fmInvoke:
		var out *orchestrator.Outcome
		out, err = w.o.Invoke(ctx, call)
		if err == nil {
			c.attempts = out.Attempts
			if out.InvocationID != id {
				t.Errorf("invocation id %q, want %q", out.InvocationID, id)
			}
		}
	case fmStream:
		var s *orchestrator.Stream
		s, err = w.o.Stream(ctx, call)
		if err == nil {
			c.opened = true
			_, err = provider.Collect(s)
			s.Close()
			c.attempts = s.Attempts()
			if err != nil {
				c.result = provider.KindOf(err).String()
			}
		}
	}
	if err != nil && !c.opened {
		var oe *orchestrator.Error
		if !errors.As(err, &oe) {
			t.Fatalf("error %v (%T) is not an *orchestrator.Error", err, err)
		}
		c.attempts = oe.Attempts
		c.result = provider.KindOf(err).String()
	}
	if err == nil {
		c.result = "ok"
	}
	var parts []string
	for _, a := range c.attempts {
		parts = append(parts, a.Provider+":"+a.Outcome)
	}
	c.path = strings.Join(parts, " ")
}

// checkLedger drains the journal and the leases, then checks that the
// ledger holds exactly the attempts the caller was told of.
func checkLedger(t *testing.T, fast *ledger.Fast, invocations map[string][]orchestrator.Attempt) {
	t.Helper()
	ctx := context.Background()
	if err := fast.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	rows, err := fast.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][]string{}
	var sum provider.Money
	for _, r := range rows {
		if r.Task != fmTask {
			t.Errorf("row outside the task: %+v", r)
		}
		byID[r.InvocationID] = append(byID[r.InvocationID], fmt.Sprintf("%s/%s:%s $%s", r.Provider, r.Model, r.Outcome, r.Cost))
		sum += r.Cost
	}
	var billed provider.Money
	for id, as := range invocations {
		var want []string
		for _, a := range as {
			want = append(want, fmt.Sprintf("%s/%s:%s $%s", a.Provider, a.Model, a.Outcome, a.Cost))
			billed += a.Cost
		}
		got := byID[id]
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("ledger rows of %s:\n  got  %q\n  want %q (the attempts the caller saw, each once)", id, got, want)
		}
		delete(byID, id)
	}
	for id, got := range byID {
		t.Errorf("rows of an invocation the caller never made: %s %q", id, got)
	}
	if sum != billed {
		t.Errorf("rows sum to $%s; the attempts billed $%s", sum, billed)
	}
	bs, err := fast.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sawTask bool
	for _, b := range bs {
		if b.Held != 0 {
			t.Errorf("%s still holds $%s after the drain", b.Scope, b.Held)
		}
		if b.Spent != sum {
			t.Errorf("%s spent $%s; its rows sum to $%s", b.Scope, b.Spent, sum)
		}
		sawTask = sawTask || b.Scope == ledger.TaskScope(fmTask)
	}
	if !sawTask {
		t.Errorf("no budget for the task among %+v", bs)
	}
	rep, err := fast.Spend(ctx, ledger.Filter{Task: fmTask})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Cost != sum || rep.Total.Attempts != int64(len(rows)) {
		t.Errorf("spend report %+v; rows: %d costing $%s", rep.Total, len(rows), sum)
	}
}

func TestFaultMatrix(t *testing.T) {
	type line struct{ fault, prov, mode, got string }
	var summary []line
	for _, f := range fmFaults() {
		for _, p := range primaries {
			for _, mode := range []fmMode{fmInvoke, fmStream} {
				name := fmt.Sprintf("%s/%s/%s", f.name, p, mode)
				t.Run(name, func(t *testing.T) {
					w, fast := newFaultWorld(t, p, f)
					if na := f.script(w, p, mode); na != "" {
						summary = append(summary, line{f.name, p, string(mode), "n/a: " + na})
						t.Skip(na)
					}
					want := f.want[mode]
					second := order(p)[1]
					expand := func(s string) string {
						s = strings.ReplaceAll(s, "{srv}", fmServerKind[p])
						s = strings.ReplaceAll(s, "P:", p+":")
						return strings.ReplaceAll(s, "N:", second+":")
					}
					var c fmCell
					id := "inv_fault_1"
					c.run(t, w, mode, id)
					got := c.result + " (" + c.path + ")"
					if c.opened && c.result != "ok" {
						got += ", after the first chunk"
					}
					if n := len(w.sleeps); n > 0 {
						got += fmt.Sprintf(", waited %v", w.sleeps)
					}
					if _, paused, _ := w.state.Paused(context.Background()); paused {
						got += ", project paused"
					}
					var events []string
					w.drain()
					for _, n := range w.notes {
						events = append(events, n.Event)
					}
					notes := strings.Join(events, " ")
					if notes != "" {
						got += ", notified " + notes
					}
					summary = append(summary, line{f.name, p, string(mode), got})

					if c.result != expand(want.result) || c.path != expand(want.path) {
						t.Errorf("got %s %q; the spec says %s %q", c.result, c.path, expand(want.result), expand(want.path))
					}
					if len(w.sleeps) != want.sleeps {
						t.Errorf("waits %v; want %d", w.sleeps, want.sleeps)
					}
					for _, d := range w.sleeps {
						if want.maxWait > 0 && d > want.maxWait {
							t.Errorf("waited %v, more than %v", d, want.maxWait)
						}
					}
					if want.midStream != (c.opened && c.result != "ok") {
						t.Errorf("error after the first chunk: %v; want %v", c.opened && c.result != "ok", want.midStream)
					}
					if notes != want.notes {
						t.Errorf("notified %q; want %q", notes, want.notes)
					}
					if _, paused, _ := w.state.Paused(context.Background()); paused != want.paused {
						t.Errorf("project paused: %v; want %v", paused, want.paused)
					}
					if want.billed && (len(c.attempts) == 0 || c.attempts[0].Cost == 0 || c.attempts[0].Usage.InputTokens == 0) {
						t.Errorf("the broken attempt billed nothing: %+v", c.attempts)
					}
					checkLedger(t, fast, map[string][]orchestrator.Attempt{id: c.attempts})
				})
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-70s %-9s %-6s %s\n", "fault", "adapter", "mode", "outcome")
	for _, l := range summary {
		fmt.Fprintf(&b, "%-70s %-9s %-6s %s\n", l.fault, l.prov, l.mode, l.got)
	}
	t.Log(b.String())
}
