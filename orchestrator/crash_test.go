package orchestrator_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The crash test runs an orchestrator in a child process (this test binary
// again, told so by its environment), SIGKILLs it once it has reported a
// chosen number of settled invocations, and checks the store after a
// restart.
const (
	envCrashChild   = "CORTEXBUILD_CRASH_CHILD" // sqlite or postgres
	envCrashSite    = "CORTEXBUILD_CRASH_SITE"  // database path, or schema and URL
	envCrashJournal = "CORTEXBUILD_CRASH_JOURNAL"
	envCrashStall   = "CORTEXBUILD_CRASH_STALL" // settlements the store applies before it stalls; -1 never
	envCrashSeed    = "CORTEXBUILD_CRASH_SEED"  // reproduces a run's kill points
)

const (
	crashTask    = "crash"
	crashWorkers = 8
)

// openCrashSite opens the store a crash run uses.
func openCrashSite(ctx context.Context, kind, site string) (ledger.Store, error) {
	switch kind {
	case "sqlite":
		return ledger.OpenSQLite(ctx, site)
	case "postgres":
		schema, url, _ := strings.Cut(site, ":")
		return ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	}
	return nil, fmt.Errorf("unknown store %q", kind)
}

// stallingStore applies the first n settlements, then holds every later
// one until the process dies: a store that fell behind, so that what the
// process reported settled is, at the kill, only in its journal.
type stallingStore struct {
	ledger.Store
	left atomic.Int64
}

func (s *stallingStore) Settle(ctx context.Context, st ledger.Settlement) error {
	if s.left.Add(-1) < 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Settle(ctx, st)
}

// TestCrashChildProcess is the child's body; it does nothing in a normal
// test run.
func TestCrashChildProcess(t *testing.T) {
	kind := os.Getenv(envCrashChild)
	if kind == "" {
		return
	}
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("CRASH "+format+"\n", a...)
	}
	ctx := context.Background()
	st, err := openCrashSite(ctx, kind, os.Getenv(envCrashSite))
	if err != nil {
		t.Fatal(err)
	}
	inner := st
	if n, _ := strconv.Atoi(os.Getenv(envCrashStall)); n >= 0 {
		ss := &stallingStore{Store: st}
		ss.left.Store(int64(n))
		inner = ss
	}
	fast, err := ledger.NewFast(ctx, inner, os.Getenv(envCrashJournal), ledger.FastLeaseWindow(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	srv := openaifake.New()
	defer srv.Close()
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := openaicompat.New(provider.Settings{Name: "gpt", Profile: "openai", BaseURL: srv.URL() + "/v1", Credentials: map[string]string{"api_key": "sk-crash"}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	var writeFailures atomic.Int64
	o, err := orchestrator.New(orchestrator.Settings{
		Project:   "crash",
		Endpoints: []orchestrator.Endpoint{{Name: "gpt", Adapter: a}},
		Sleep:     func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		Backoff:   func(int) time.Duration { return time.Millisecond },
		Online:    func(context.Context) bool { return true },
		State:     &orchestrator.MemoryState{},
		Ledger:    fast,
		Notifier: notifierFunc(func(n orchestrator.Notification) {
			if n.Event == "ledger_write_failed" {
				writeFailures.Add(1)
				say("failed %s", n.Message)
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{Prompt: "Say hello.", MaxTokens: 64}
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			for n := 0; ; n++ {
				id := fmt.Sprintf("inv-%d-%05d", w, n)
				out, err := o.Invoke(ctx, orchestrator.Call{Task: crashTask, InvocationID: id, Request: req})
				switch {
				case errors.Is(err, ledger.ErrOverBudget) || errors.Is(err, ledger.ErrPaused):
					return
				case err != nil:
					say("failed %s: %v", id, err)
					return
				}
				var cost provider.Money
				for _, at := range out.Attempts {
					cost += at.Cost
				}
				// Settle has returned: the invocation is in the journal.
				say("settled %s %d %d", id, cost.Nanos(), out.Estimate.Nanos())
			}
		})
	}
	wg.Wait()
	say("exhausted")
	select {} // the parent kills the process
}

type notifierFunc func(orchestrator.Notification)

func (f notifierFunc) Notify(_ context.Context, n orchestrator.Notification) error {
	f(n)
	return nil
}

// crashSite is where one crash run keeps its store and journals.
type crashSite struct {
	kind, site, journal string
}

func sqliteCrashSite(t *testing.T) crashSite {
	dir := t.TempDir()
	return crashSite{kind: "sqlite", site: filepath.Join(dir, "state.db"), journal: dir}
}

func postgresCrashSite(t *testing.T) crashSite {
	url := testenv.Postgres(t)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "crashtest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	return crashSite{kind: "postgres", site: schema + ":" + url, journal: t.TempDir()}
}

// settledCall is what the child reported of one invocation.
type settledCall struct {
	cost, estimate provider.Money
}

// crashOnce runs the child until it has reported killAfter settled
// invocations (or run out of budget), SIGKILLs it, and returns what it
// reported.
func crashOnce(t *testing.T, cs crashSite, killAfter, stall int) (settled map[string]settledCall, exhausted bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envCrashChild+"="+cs.kind, envCrashSite+"="+cs.site, envCrashJournal+"="+cs.journal, envCrashStall+"="+strconv.Itoa(stall))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "CRASH "); ok {
				lines <- l
			}
		}
	}()
	settled = map[string]settledCall{}
	record := func(line string) {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "settled":
			cost, _ := strconv.ParseInt(f[2], 10, 64)
			est, _ := strconv.ParseInt(f[3], 10, 64)
			if _, dup := settled[f[1]]; dup {
				t.Errorf("the child reported %s twice", f[1])
			}
			settled[f[1]] = settledCall{cost: provider.Money(cost), estimate: provider.Money(est)}
		case len(f) == 1 && f[0] == "exhausted":
			exhausted = true
		default:
			t.Errorf("child: %s", line)
		}
	}
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
wait:
	for len(settled) < killAfter {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				t.Fatalf("the child ended before the kill (%v):\n%s", err, stderr.String())
			}
			record(line)
			if line == "exhausted" {
				break wait
			}
		case <-timeout.C:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child reported %d settled invocations in a minute; want %d:\n%s", len(settled), killAfter, stderr.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: nothing deferred runs
		t.Fatal(err)
	}
	// What was in the pipe when the child died was reported too.
	for line := range lines {
		record(line)
	}
	cmd.Wait()
	return settled, exhausted
}

// checkAfterCrash restarts on cs (replaying the dead child's journal) and
// checks the store against what the child reported.
func checkAfterCrash(t *testing.T, cs crashSite, settled map[string]settledCall, exhausted bool, taskLimit, monthLimit provider.Money) {
	t.Helper()
	ctx := t.Context()
	st, err := openCrashSite(ctx, cs.kind, cs.site)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	applied, err := ledger.Replay(ctx, st, cs.journal)
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cs.journal, "*.journal")); len(left) > 0 {
		t.Errorf("journals left after replay: %v", left)
	}
	rows, err := st.Attempts(ctx, ledger.Filter{Task: crashTask})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][]ledger.AttemptRow{}
	var rowsCost provider.Money
	for _, r := range rows {
		byID[r.InvocationID] = append(byID[r.InvocationID], r)
		rowsCost += r.Cost
	}
	for id, rs := range byID {
		if len(rs) != 1 {
			t.Errorf("invocation %s has %d ledger rows; want 1", id, len(rs))
		}
	}
	missing := 0
	for id, sc := range settled {
		rs := byID[id]
		if len(rs) == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("invocation %s was settled before the crash but is not in the ledger", id)
			}
			continue
		}
		if rs[0].Cost != sc.cost || rs[0].Outcome != "ok" {
			t.Errorf("invocation %s: row %+v; the child settled $%s", id, rs[0], sc.cost)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d settled invocations lost", missing, len(settled))
	}
	t.Logf("%d settled reported (exhausted: %t), %d in the ledger, %d journal settlements replayed (idempotently)", len(settled), exhausted, len(byID), applied)
	// Holds of calls in flight at the kill lapse at their expiry; the dead
	// process's leases were released by the replay.
	if _, err := st.ExpireReservations(ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	budgets, err := st.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Spend(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, b := range budgets {
		var want provider.Money
		switch {
		case b.Scope == ledger.TaskScope(crashTask):
			want = rowsCost
			if b.Limit != taskLimit {
				t.Errorf("%s limit $%s; want $%s", b.Scope, b.Limit, taskLimit)
			}
		case strings.HasPrefix(string(b.Scope), "month:"):
			want = all.Total.Cost
			if b.Limit != monthLimit {
				t.Errorf("%s limit $%s; want $%s", b.Scope, b.Limit, monthLimit)
			}
		default:
			continue
		}
		seen++
		if b.Held != 0 {
			t.Errorf("%s: $%s still held after replay and expiry", b.Scope, b.Held)
		}
		if b.Spent != want {
			t.Errorf("%s: spent $%s; the ledger rows add up to $%s", b.Scope, b.Spent, want)
		}
		if b.Spent > b.Limit {
			t.Errorf("%s: spent $%s over the limit $%s", b.Scope, b.Spent, b.Limit)
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the 2 budgets (task, month): %+v", seen, budgets)
	}
}

// runCrashTest kills the child at random points, several times on fresh
// sites, with and without a store that fell behind its journal.
func runCrashTest(t *testing.T, newSite func(*testing.T) crashSite) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envCrashSeed); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("%s=%d reproduces these kill points", envCrashSeed, seed)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	for round := range 4 {
		killAfter := 1 + rng.IntN(120)
		stall := -1
		if round%2 == 1 {
			stall = rng.IntN(killAfter)
		}
		t.Run(fmt.Sprintf("round-%d-kill-after-%d-stall-%d", round, killAfter, stall), func(t *testing.T) {
			cs := newSite(t)
			// The budgets: the task's holds 10 estimates, a few dozen calls
			// at their actual cost, so that some runs end on it before the
			// kill; the month's is far above. A stalled store pins the
			// leases a call near the limit waits for, so those runs get
			// room to reach the kill.
			est, exact := crashEstimate(t)
			taskLimit, monthLimit := 10*est, 10000*est
			if stall >= 0 {
				taskLimit = 2000 * est
			}
			setup, err := openCrashSite(t.Context(), cs.kind, cs.site)
			if err != nil {
				t.Fatal(err)
			}
			for sc, limit := range map[ledger.Scope]provider.Money{ledger.TaskScope(crashTask): taskLimit, ledger.MonthScope(time.Now().UTC()): monthLimit} {
				if err := setup.SetBudget(t.Context(), sc, limit); err != nil {
					t.Fatal(err)
				}
			}
			setup.Close()
			settled, exhausted := crashOnce(t, cs, killAfter, stall)
			if len(settled) == 0 {
				t.Fatal("the child settled nothing")
			}
			for id, sc := range settled {
				if sc.estimate != est && sc.estimate != exact {
					t.Fatalf("invocation %s reserved $%s; the test budgets for $%s (the exact bound near the limit: $%s)", id, sc.estimate, est, exact)
				}
			}
			checkAfterCrash(t, cs, settled, exhausted, taskLimit, monthLimit)
		})
	}
}

// crashEstimate is what the child's orchestrator reserves per call: the
// prompt's byte ceiling, or the exact bound for a call the ceiling does not
// fit.
func crashEstimate(t *testing.T) (ceiling, exact provider.Money) {
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := openaicompat.New(provider.Settings{Name: "gpt", Profile: "openai", BaseURL: "http://127.0.0.1:1/v1", Credentials: map[string]string{"api_key": "sk-crash"}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{Prompt: "Say hello.", MaxTokens: 64, Model: a.ModelFor(provider.TierBalanced), Tier: provider.TierBalanced}
	exact, err = a.EstimateCost(&req)
	if err != nil {
		t.Fatal(err)
	}
	req.CeilingEstimate = true
	ceiling, err = a.EstimateCost(&req)
	if err != nil {
		t.Fatal(err)
	}
	return ceiling, exact
}

// TestCrashConsistencySQLite SIGKILLs an orchestrator on ledger.Fast over
// the embedded store mid-load and checks, after the restart's replay, that
// every settled invocation is in the ledger once, nothing stays held, and
// the budgets add up and were not overspent.
func TestCrashConsistencySQLite(t *testing.T) { runCrashTest(t, sqliteCrashSite) }

// TestCrashConsistencyPostgres is the same on PostgreSQL.
func TestCrashConsistencyPostgres(t *testing.T) { runCrashTest(t, postgresCrashSite) }
