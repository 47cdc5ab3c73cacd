package ledgertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Site is one place a store lives (a database file, a PostgreSQL schema)
// that can be opened several times, by this process and by helper
// processes.
type Site struct {
	// ID names the site to the open function of [HelperProcess] in another
	// process; it is opaque to this package.
	ID string
	// Open opens a new handle on the site.
	Open func(ctx context.Context, opts ...ledger.Option) (ledger.Store, error)
	// Versions lists the versions recorded in the site's schema_version
	// table, in order.
	Versions func(ctx context.Context) ([]int, error)
	// ForceVersion records version in schema_version, as a newer program
	// would have.
	ForceVersion func(ctx context.Context, version int) error
	// CreateAt creates the site with only the first version migrations
	// applied, as an older program would have left it. Optional: the
	// upgrade tests are skipped without it (or without Exec).
	CreateAt func(ctx context.Context, version int) error
	// Exec runs one statement on the site's database outside any store;
	// "_S_." in it stands for the schema of the tables, as in the
	// migrations.
	Exec func(ctx context.Context, query string, args ...any) error
}

// SiteMaker makes a fresh, empty site and arranges for its removal when t
// ends.
type SiteMaker func(t *testing.T) Site

// needOlderVersions skips the test when the site cannot be created at an
// older schema version (its maker sets no CreateAt or no Exec), saying so.
func needOlderVersions(t *testing.T, site Site) {
	t.Helper()
	if site.CreateAt == nil || site.Exec == nil {
		t.Skipf("site %s cannot be created at an older schema version: its SiteMaker sets no CreateAt or no Exec", site.ID)
	}
}

func openSite(t *testing.T, site Site, opts ...ledger.Option) ledger.Store {
	t.Helper()
	s, err := site.Open(t.Context(), opts...)
	if err != nil {
		t.Fatalf("open %s: %v", site.ID, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func wantVersions(t *testing.T, site Site) {
	t.Helper()
	got, err := site.Versions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.SchemaVersions()
	if !slices.Equal(got, want) {
		t.Errorf("schema_version rows = %v; want %v (each migration once)", got, want)
	}
}

// RunSiteTests checks re-opening, migrations (including upgrades of a site
// an older program created), and two handles sharing one site.
func RunSiteTests(t *testing.T, newSite SiteMaker) {
	t.Run("ReopenKeepsDataAndMigratesOnce", func(t *testing.T) {
		site := newSite(t)
		clock := NewClock(Epoch)
		s := openSite(t, site, ledger.WithClock(clock.Now))
		ctx := t.Context()
		if err := s.SetBudget(ctx, taskA, M("10")); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(ctx, ledger.Reservation{InvocationID: "a", Amount: M("2"), Scopes: []ledger.Scope{taskA}, ExpiresAt: Epoch.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(ctx, ledger.Reservation{InvocationID: "b", Amount: M("3"), Scopes: []ledger.Scope{taskA}, ExpiresAt: Epoch.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, ledger.Settlement{InvocationID: "a", Cost: M("1.000000007"), Scopes: []ledger.Scope{taskA},
			Entry: ledger.AttemptRow{Task: "task-a", Provider: "p", Outcome: "ok", Cost: M("1.000000007")}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			s2 := openSite(t, site, ledger.WithClock(clock.Now))
			b, err := s2.Budget(ctx, taskA)
			if err != nil {
				t.Fatal(err)
			}
			if want := (ledger.Budget{Scope: taskA, Limited: true, Limit: M("10"), Spent: M("1.000000007"), Held: M("3")}); b != want {
				t.Errorf("after reopening: %+v; want %+v", b, want)
			}
			if rep, err := s2.Spend(ctx, ledger.Filter{}); err != nil || rep.Total.Cost != M("1.000000007") || rep.Total.Attempts != 1 {
				t.Errorf("Spend after reopening = %+v, %v", rep, err)
			}
			if err := s2.Settle(ctx, ledger.Settlement{InvocationID: "a", Cost: 1, Scopes: []ledger.Scope{taskA}}); !errors.Is(err, ledger.ErrAlreadySettled) {
				t.Errorf("settling again after reopening: %v", err)
			}
			s2.Close()
		}
		wantVersions(t, site)
	})

	t.Run("ConcurrentFirstOpen", func(t *testing.T) {
		site := newSite(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				s, err := site.Open(t.Context())
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		wantVersions(t, site)
	})

	t.Run("NewerSchemaIsRefused", func(t *testing.T) {
		site := newSite(t)
		s := openSite(t, site)
		s.Close()
		if err := site.ForceVersion(t.Context(), ledger.LatestSchemaVersion+1); err != nil {
			t.Fatal(err)
		}
		s, err := site.Open(t.Context())
		if !errors.Is(err, ledger.ErrSchemaTooNew) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("opening a newer schema: %v; want ErrSchemaTooNew", err)
		}
	})

	t.Run("TwoHandlesShareOneBudget", func(t *testing.T) {
		site := newSite(t)
		clock := NewClock(Epoch)
		a := openSite(t, site, ledger.WithClock(clock.Now))
		b := openSite(t, site, ledger.WithClock(clock.Now))
		limit, estimate := M("4"), M("0.3")
		if err := a.SetBudget(t.Context(), taskA, limit); err != nil {
			t.Fatal(err)
		}
		outs, err := ReserveAll(t.Context(), estimate, Epoch.Add(time.Hour),
			Batch{Store: a, Prefix: "a", N: 20, Scopes: []ledger.Scope{taskA}},
			Batch{Store: b, Prefix: "b", N: 20, Scopes: []ledger.Scope{taskA}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := outs[0].Admitted+outs[1].Admitted, int(limit/estimate); got != want {
			t.Errorf("admitted %d; want %d", got, want)
		}
		bud, err := b.Budget(t.Context(), taskA)
		if err != nil {
			t.Fatal(err)
		}
		if bud.Spent != outs[0].Spent+outs[1].Spent || bud.Held != 0 || bud.Spent > limit {
			t.Errorf("budget %+v; want spent $%s", bud, outs[0].Spent+outs[1].Spent)
		}
	})

	runTaskSiteTests(t, newSite)
	runProjectSiteTests(t, newSite)
	runAlertSiteTests(t, newSite)
	runSessionSiteTests(t, newSite)
	runMigrationGapTests(t, newSite)
}

// Environment of a helper process.
const (
	envMode = "LEDGERTEST_HELPER" // batch or crash
	envSite = "LEDGERTEST_SITE"
	envArgs = "LEDGERTEST_ARGS" // space-separated, by mode
)

const linePrefix = "LEDGERTEST "

// HelperProcess is the body of the TestHelperProcess function of a back
// end's test package: outside a helper process (no LEDGERTEST_HELPER in the
// environment) it returns at once. open opens the site named by a
// [Site.ID].
func HelperProcess(t *testing.T, open func(ctx context.Context, siteID string, opts ...ledger.Option) (ledger.Store, error)) {
	mode := os.Getenv(envMode)
	if mode == "" {
		return
	}
	ctx := t.Context()
	clock := NewClock(Epoch)
	s, err := open(ctx, os.Getenv(envSite), ledger.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	args := strings.Fields(os.Getenv(envArgs))
	if len(args) != 4 {
		t.Fatalf("%s=%q: want prefix n estimate scope", envArgs, os.Getenv(envArgs))
	}
	prefix, scope := args[0], ledger.Scope(args[3])
	n, err := strconv.Atoi(args[1])
	if err != nil {
		t.Fatal(err)
	}
	estimate := M(args[2])
	say := func(format string, a ...any) { fmt.Printf(linePrefix+format+"\n", a...) }
	switch mode {
	case "batch":
		admitted, refused, err := reserveN(ctx, s, prefix, n, estimate, Epoch.Add(time.Hour), scope)
		if err != nil {
			t.Fatal(err)
		}
		say("reserved %d %d", len(admitted), refused)
		io.Copy(io.Discard, os.Stdin) // the parent closes stdin once every helper has reserved
		spent, err := settleAll(ctx, s, admitted, estimate, scope)
		if err != nil {
			t.Fatal(err)
		}
		say("settled %d", spent.Nanos())
	case "alerts":
		// Settle n calls of estimate each, then, once the parent says so
		// (closing stdin), announce every alert this process can claim.
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		}
		if err := settleEach(ctx, s, ids, estimate, scope); err != nil {
			t.Fatal(err)
		}
		say("settled %d", n)
		io.Copy(io.Discard, os.Stdin)
		for {
			as, err := s.ClaimAlerts(ctx, time.Minute, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(as) == 0 {
				break
			}
			for _, a := range as {
				if err := s.AlertNotified(ctx, a.ID); err != nil {
					t.Fatal(err)
				}
				say("announced %s %d", a.Scope, a.Threshold)
			}
		}
		say("done")
	case "crash":
		err := s.Reserve(ctx, ledger.Reservation{InvocationID: prefix, Amount: estimate, Scopes: []ledger.Scope{scope},
			ExpiresAt: Epoch.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		say("reserved 1 0")
		io.Copy(io.Discard, os.Stdin) // killed here, before settling
		t.Fatal("the parent did not kill the helper")
	default:
		t.Fatalf("%s=%q: unknown mode", envMode, mode)
	}
}

// reserveN reserves n invocations concurrently and returns the admitted
// ids and the number refused by a budget.
func reserveN(ctx context.Context, s ledger.Store, prefix string, n int, estimate provider.Money, expires time.Time, scopes ...ledger.Scope) (admitted []string, refused int, err error) {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("%s-%03d", prefix, i)
			err := s.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: estimate, Scopes: scopes, ExpiresAt: expires})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted = append(admitted, id)
			case errors.Is(err, ledger.ErrOverBudget):
				refused++
			default:
				errs = append(errs, fmt.Errorf("Reserve(%s): %w", id, err))
			}
		})
	}
	wg.Wait()
	slices.Sort(admitted)
	return admitted, refused, errors.Join(errs...)
}

// settleAll settles ids concurrently at [ActualCost] and returns the sum.
func settleAll(ctx context.Context, s ledger.Store, ids []string, estimate provider.Money, scopes ...ledger.Scope) (provider.Money, error) {
	return settleCosts(ctx, s, ids, func(i int) provider.Money { return ActualCost(estimate, i) }, scopes...)
}

// settleEach settles ids concurrently at cost each.
func settleEach(ctx context.Context, s ledger.Store, ids []string, cost provider.Money, scopes ...ledger.Scope) error {
	_, err := settleCosts(ctx, s, ids, func(int) provider.Money { return cost }, scopes...)
	return err
}

// settleCosts settles ids concurrently, the i-th at costOf(i), and returns
// the sum.
func settleCosts(ctx context.Context, s ledger.Store, ids []string, costOf func(i int) provider.Money, scopes ...ledger.Scope) (provider.Money, error) {
	var spent provider.Money
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, id := range ids {
		cost := costOf(i)
		spent += cost
		wg.Go(func() {
			err := s.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: cost, Scopes: scopes,
				Entry: ledger.AttemptRow{Provider: "sim", Outcome: "ok", Cost: cost}})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("Settle(%s): %w", id, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return spent, errors.Join(errs...)
}

// helper is a running helper process.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stdout []string      // other lines of stdout; read only once lines is closed
	stderr *bytes.Buffer // read only after cmd.Wait
}

func startHelper(t *testing.T, site Site, mode string, args ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envMode+"="+mode, envSite+"="+site.ID, envArgs+"="+strings.Join(args, " "))
	h := &helper{cmd: cmd, lines: make(chan string, 16), stderr: &bytes.Buffer{}}
	cmd.Stderr = h.stderr
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), linePrefix); ok {
				h.lines <- line
			} else {
				h.stdout = append(h.stdout, sc.Text())
			}
		}
	}()
	return h
}

// next returns the helper's next report line, failing the test if the
// helper ends without one.
func (h *helper) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if ok {
			return line
		}
		err := h.cmd.Wait()
		t.Fatalf("helper ended without reporting (%v):\n%s\n%s", err, strings.Join(h.stdout, "\n"), h.stderr)
	case <-time.After(2 * time.Minute):
		h.cmd.Process.Kill()
		h.cmd.Wait()
		t.Fatalf("helper reported nothing for 2 minutes:\n%s", h.stderr)
	}
	return ""
}

// wait waits for the helper to end, failing the test if it failed.
func (h *helper) wait(t *testing.T) {
	t.Helper()
	if err := h.cmd.Wait(); err != nil {
		for range h.lines {
		}
		t.Fatalf("helper: %v\n%s\n%s", err, strings.Join(h.stdout, "\n"), h.stderr)
	}
}

// RunProcessTests checks a budget shared by three processes, and that a
// process killed while holding a reservation leaks nothing past its expiry.
func RunProcessTests(t *testing.T, newSite SiteMaker) {
	// A task's budget, and a virtual key's budget for a month.
	for _, scope := range []ledger.Scope{ledger.TaskScope("shared"), "key:shared@2026-05"} {
		t.Run("ThreeProcessesShareABudget/"+scope.Kind(), func(t *testing.T) { testThreeProcesses(t, newSite, scope) })
	}
	runProcessCrashTests(t, newSite)
}

// testThreeProcesses has three processes reserve against the budget of
// scope at once: they admit exactly what fits, and spend no more.
func testThreeProcesses(t *testing.T, newSite SiteMaker, scope ledger.Scope) {
	site := newSite(t)
	s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
	limit, estimate := M("5"), M("0.3")
	if err := s.SetBudget(t.Context(), scope, limit); err != nil {
		t.Fatal(err)
	}
	const procs, each = 3, 24
	var hs []*helper
	for i := range procs {
		hs = append(hs, startHelper(t, site, "batch", fmt.Sprintf("p%d", i), strconv.Itoa(each), estimate.String(), string(scope)))
	}
	admitted, refused := 0, 0
	for _, h := range hs {
		var a, r int
		if _, err := fmt.Sscanf(h.next(t), "reserved %d %d", &a, &r); err != nil {
			t.Fatal(err)
		}
		admitted, refused = admitted+a, refused+r
	}
	if want := int(limit / estimate); admitted != want || refused != procs*each-want {
		t.Errorf("admitted %d, refused %d across %d processes; want %d and %d", admitted, refused, procs, want, procs*each-want)
	}
	b, err := s.Budget(t.Context(), scope)
	if err != nil {
		t.Fatal(err)
	}
	if b.Held != provider.Money(admitted)*estimate || b.Spent != 0 {
		t.Errorf("while held: %+v; want held $%s", b, provider.Money(admitted)*estimate)
	}
	// Every helper has reserved: let them settle.
	var spent provider.Money
	for _, h := range hs {
		h.stdin.Close()
	}
	for _, h := range hs {
		var n int64
		if _, err := fmt.Sscanf(h.next(t), "settled %d", &n); err != nil {
			t.Fatal(err)
		}
		spent += provider.Money(n)
		h.wait(t)
	}
	b, err = s.Budget(t.Context(), scope)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spent != spent || b.Held != 0 || b.Spent > limit {
		t.Errorf("after settling: %+v; want spent $%s (cap $%s), nothing held", b, spent, limit)
	}
	rep, err := s.Spend(t.Context(), ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Cost != spent || rep.Total.Attempts != int64(admitted) {
		t.Errorf("ledger total %+v; want $%s over %d attempts", rep.Total, spent, admitted)
	}
}

// runProcessCrashTests checks that a process killed while holding a
// reservation leaks nothing past its expiry.
func runProcessCrashTests(t *testing.T, newSite SiteMaker) {

	t.Run("ThreeProcessesAnnounceEachAlertOnce", func(t *testing.T) { testAlertsAcrossProcesses(t, newSite(t)) })

	t.Run("CrashLeavesNoStuckReservation", func(t *testing.T) {
		site := newSite(t)
		s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
		ctx := t.Context()
		scope := ledger.TaskScope("crash")
		if err := s.SetBudget(ctx, scope, M("1")); err != nil {
			t.Fatal(err)
		}
		h := startHelper(t, site, "crash", "doomed", "1", "1", string(scope))
		if line := h.next(t); line != "reserved 1 0" {
			t.Fatalf("helper said %q", line)
		}
		if err := h.cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code runs
			t.Fatal(err)
		}
		h.cmd.Wait()
		if b, err := s.Budget(ctx, scope); err != nil || b.Held != M("1") {
			t.Fatalf("after the crash: %+v, %v; want $1 held", b, err)
		}
		if err := s.Reserve(ctx, ledger.Reservation{InvocationID: "next", Amount: M("0.01"), Scopes: []ledger.Scope{scope}, ExpiresAt: Epoch.Add(time.Hour)}); !errors.Is(err, ledger.ErrOverBudget) {
			t.Fatalf("Reserve while the dead process's hold is live: %v; want ErrOverBudget", err)
		}
		if n, err := s.ExpireReservations(ctx, Epoch.Add(time.Minute)); err != nil || n != 1 {
			t.Fatalf("ExpireReservations = %d, %v; want 1", n, err)
		}
		if b, err := s.Budget(ctx, scope); err != nil || b.Held != 0 || b.Spent != 0 {
			t.Fatalf("after expiry: %+v, %v; want the budget whole", b, err)
		}
		if err := s.Reserve(ctx, ledger.Reservation{InvocationID: "next", Amount: M("1"), Scopes: []ledger.Scope{scope}, ExpiresAt: Epoch.Add(time.Hour)}); err != nil {
			t.Fatalf("Reserve of the whole budget after expiry: %v", err)
		}
	})
}

// BenchReserveSettle measures reserve+settle pairs on s, run in parallel
// (b.RunParallel, one goroutine per GOMAXPROCS unless b.SetParallelism
// says otherwise). Each pair holds an estimate against a task and the
// month, both capped, and settles below it. It reports pairs/s and the
// 99th-percentile latency of a pair (p99-µs), and fails if the budgets do
// not account for every settlement exactly or were overspent. The median
// latency (p50-µs) is reported too.
func BenchReserveSettle(b *testing.B, s ledger.Store) {
	ctx := b.Context()
	task, month := ledger.TaskScope("bench"), ledger.MonthScope(time.Now())
	estimate, cost := M("0.02"), M("0.013")
	limit := provider.Money(b.N+1) * estimate
	for _, sc := range []ledger.Scope{task, month} {
		if err := s.SetBudget(ctx, sc, limit); err != nil {
			b.Fatal(err)
		}
	}
	var (
		seq     atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		refused atomic.Int64
	)
	expires := time.Now().Add(time.Hour)
	scopes := []ledger.Scope{task, month}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 4096)
		for pb.Next() {
			id := "bench-" + strconv.FormatInt(seq.Add(1), 10)
			t0 := time.Now()
			err := s.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: estimate, Scopes: scopes, ExpiresAt: expires})
			if errors.Is(err, ledger.ErrOverBudget) {
				refused.Add(1)
				continue
			}
			if err != nil {
				b.Error(err)
				return
			}
			err = s.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: cost, Scopes: scopes,
				Entry: ledger.AttemptRow{Task: "bench", Agent: "bench", Provider: "sim", Model: "m", Outcome: "ok",
					InputTokens: 1000, OutputTokens: 100, Cost: cost}})
			if err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	// A store that applies writes in the background (ledger.Fast) counts
	// the time to apply them, and gives its budget leases back.
	if d, ok := s.(interface{ Drain(context.Context) error }); ok {
		if err := d.Drain(ctx); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if refused.Load() != 0 {
		b.Errorf("%d reservations refused under a cap that fits them all", refused.Load())
	}
	for _, sc := range scopes {
		bud, err := s.Budget(ctx, sc)
		if err != nil {
			b.Fatal(err)
		}
		if want := provider.Money(len(lat)) * cost; bud.Spent != want || bud.Held != 0 || bud.Spent > bud.Limit {
			b.Errorf("%s: %+v; want spent $%s, nothing held", sc, bud, want)
		}
	}
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op") // pairs/s says it, per pair and in parallel
}
