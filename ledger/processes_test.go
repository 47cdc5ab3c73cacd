package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The processes of the pairs runs: each opens its own fast path (its own
// journal) on one PostgreSQL schema, and runs reserve+settle pairs against
// the budgets every process shares.

// Environment of a pairs process.
const (
	envPairs    = "LEDGER_PAIRS_PROCESS" // url schema journal-dir prefix attempts goroutines stop-on-refusal mode
	envPairsTTL = "LEDGER_PAIRS_TTL"     // the holds' TTL (ledger.FastHoldTTL), when set
	// envPairsWindow is the leases' window (ledger.FastLeaseWindow), when set.
	envPairsWindow = "LEDGER_PAIRS_WINDOW"
)

const pairsLine = "PAIRS "

var (
	pairsTask     = ledger.TaskScope("pairs")
	pairsMonth    = ledger.MonthScope(time.Now())
	pairsKey      = ledger.Scope("key:pairs@" + time.Now().Format("2006-01"))
	pairsScopes   = []ledger.Scope{pairsTask, pairsMonth, pairsKey}
	pairsEstimate = provider.MustMoney("0.02")
	pairsCost     = provider.MustMoney("0.013")
)

// TestPairsProcess is the body of a pairs process; run normally, it does
// nothing. It says "ready" once its store is open, starts when its stdin
// says "go", and says "done <admitted> <refused>" once every settlement is
// in the store and its leases are given back, with the CPU time it used in
// all (nanoseconds: user and system). In mode probe it makes the calls its
// stdin asks for, one at a time (see probePairs). In mode crash it goes on
// with pairs until killed (or until its stdin says "stop": it then says
// "done" as above), says "settled <id>" as each settlement returns, and
// "flushed <n>" once n admitted pairs, at least its attempts, are in the
// store.
func TestPairsProcess(t *testing.T) {
	spec := os.Getenv(envPairs)
	if spec == "" {
		return
	}
	args := strings.Fields(spec)
	if len(args) != 8 {
		t.Fatalf("%s=%q: want url schema dir prefix attempts goroutines stop-on-refusal mode", envPairs, spec)
	}
	crash := args[7] == "crash"
	url, schema, dir, prefix := args[0], args[1], args[2], args[3]
	attempts, err1 := strconv.Atoi(args[4])
	goroutines, err2 := strconv.Atoi(args[5])
	stop, err3 := strconv.ParseBool(args[6])
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema), ledger.WithMaxConns(8))
	if err != nil {
		t.Fatal(err)
	}
	opts := []ledger.FastOption{ledger.FastOnError(func(err error) { fmt.Fprintln(os.Stderr, err) })}
	if ttl := os.Getenv(envPairsTTL); ttl != "" {
		d, err := time.ParseDuration(ttl)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, ledger.FastHoldTTL(d))
	}
	if w := os.Getenv(envPairsWindow); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, ledger.FastLeaseWindow(d))
	}
	f, err := ledger.NewFast(ctx, st, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(pairsLine + "ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		t.Fatalf("stdin said %q, %v; want go", in.Text(), in.Err())
	}
	if args[7] == "probe" {
		probePairs(t, f, in)
		return
	}
	var stopped atomic.Bool
	if crash {
		go func() {
			for in.Scan() {
				if in.Text() == "stop" {
					stopped.Store(true)
				}
			}
		}()
	}
	var out sync.Mutex // one line at a time on stdout
	var seq, admitted, refused atomic.Int64
	var flushed sync.Once
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for {
				i := seq.Add(1)
				if i > int64(attempts) && !crash || stopped.Load() {
					return
				}
				id := prefix + strconv.FormatInt(i, 10)
				err := f.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: pairsEstimate, Scopes: pairsScopes, ExpiresAt: time.Now().Add(time.Hour)})
				if errors.Is(err, ledger.ErrOverBudget) || errors.Is(err, ledger.ErrPaused) {
					refused.Add(1)
					if stop {
						return
					}
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				err = f.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: pairsCost, Scopes: pairsScopes,
					Entry: ledger.AttemptRow{Task: "pairs", Agent: "bench", Provider: "sim", Model: "m", Outcome: "ok",
						InputTokens: 1000, OutputTokens: 100, Cost: pairsCost}})
				if err != nil {
					t.Error(err)
					return
				}
				if crash {
					// The caller of a call would now have its answer.
					out.Lock()
					fmt.Printf(pairsLine+"settled %s\n", id)
					out.Unlock()
				}
				if admitted.Add(1) >= int64(attempts) && crash {
					flushed.Do(func() {
						n := admitted.Load()
						if err := f.Flush(ctx); err != nil {
							t.Error(err)
						}
						out.Lock()
						fmt.Printf(pairsLine+"flushed %d\n", n)
						out.Unlock()
					})
				}
			}
		})
	}
	wg.Wait()
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf(pairsLine+"done %d %d %d\n", admitted.Load(), refused.Load(), cpu.Nanoseconds())
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// pairsRun is a run of pairs processes.
type pairsRun struct {
	procs, goroutines int // goroutines per process
	attempts          int // in all, shared out among the processes
	limit             provider.Money
	stopOnRefusal     bool // a goroutine stops at its first refusal
}

func (r pairsRun) spec(url, schema, dir string, i int, mode string) string {
	n := r.attempts / r.procs
	if i < r.attempts%r.procs {
		n++
	}
	return strings.Join([]string{url, schema, filepath.Join(dir, fmt.Sprintf("journal-%d", i)), fmt.Sprintf("p%d-", i),
		strconv.Itoa(n), strconv.Itoa(r.goroutines), strconv.FormatBool(r.stopOnRefusal), mode}, " ")
}

// pairsOutcome is what the processes of a run did.
type pairsOutcome struct {
	admitted, refused int64
	elapsed           time.Duration // from "go" until every process is done
	cpu               time.Duration // used by the processes, from their start
}

type pairsProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	errs  bytes.Buffer // read once the process has ended
	// settled are the invocations it said were settled; eof is closed
	// once its stdout has ended.
	mu      sync.Mutex
	settled []string
	eof     chan struct{}
}

// settledIDs returns the invocations the process said were settled, once
// its output has ended (it was killed or exited).
func (p *pairsProcess) settledIDs() []string {
	<-p.eof
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled
}

// runPairs starts the processes of r on a new schema with the budgets set
// to r.limit, lets them run, and checks the store afterwards: spend equal
// to the admitted pairs' costs on every scope, nothing held, no scope over
// its limit, and one ledger row per admitted pair.
func runPairs(tb testing.TB, r pairsRun, stopTimer, startTimer func()) pairsOutcome {
	tb.Helper()
	stopTimer()
	url := testenv.Postgres(tb)
	schema := newSchema(tb, url)
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	for _, sc := range pairsScopes {
		if err := st.SetBudget(ctx, sc, r.limit); err != nil {
			tb.Fatal(err)
		}
	}
	dir := tb.TempDir()
	var ps []*pairsProcess
	for i := range r.procs {
		ps = append(ps, startPairsProcess(tb, r.spec(url, schema, dir, i, "run")))
	}
	for _, p := range ps {
		if line := p.next(tb); line != "ready" {
			tb.Fatalf("pairs process said %q; want ready", line)
		}
	}
	startTimer()
	start := time.Now()
	for _, p := range ps {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			tb.Fatal(err)
		}
	}
	var out pairsOutcome
	for _, p := range ps {
		var a, ref, cpu int64
		if _, err := fmt.Sscanf(p.next(tb), "done %d %d %d", &a, &ref, &cpu); err != nil {
			tb.Fatal(err)
		}
		out.admitted += a
		out.refused += ref
		out.cpu += time.Duration(cpu)
	}
	out.elapsed = time.Since(start)
	stopTimer()
	for _, p := range ps {
		p.stdin.Close()
		if err := p.cmd.Wait(); err != nil {
			tb.Fatalf("pairs process: %v\n%s", err, p.errs.String())
		}
	}
	want := provider.Money(out.admitted) * pairsCost
	for _, sc := range pairsScopes {
		b, err := st.Budget(ctx, sc)
		if err != nil {
			tb.Fatal(err)
		}
		if b.Spent != want || b.Held != 0 || b.Spent > r.limit {
			tb.Errorf("%s: %+v; want spent $%s (%d pairs at $%s), nothing held, at most $%s", sc, b, want, out.admitted, pairsCost, r.limit)
		}
	}
	rep, err := st.Spend(ctx, ledger.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	if rep.Total.Cost != want || rep.Total.Attempts != out.admitted {
		tb.Errorf("ledger: %d rows, $%s; want %d rows, $%s", rep.Total.Attempts, rep.Total.Cost, out.admitted, want)
	}
	return out
}

func startPairsProcess(tb testing.TB, spec string, env ...string) *pairsProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPairsProcess$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(append(os.Environ(), envPairs+"="+spec), env...)
	p := &pairsProcess{cmd: cmd, lines: make(chan string, 4), eof: make(chan struct{})}
	cmd.Stderr = &p.errs
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	go func() {
		defer close(p.eof)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), pairsLine)
			if !ok {
				continue
			}
			if id, ok := strings.CutPrefix(line, "settled "); ok {
				p.mu.Lock()
				p.settled = append(p.settled, id)
				p.mu.Unlock()
				continue
			}
			p.lines <- line
		}
	}()
	return p
}

// next returns the process's next report line, failing if it ends
// without one.
func (p *pairsProcess) next(tb testing.TB) string {
	tb.Helper()
	line, ok := <-p.lines
	if !ok {
		err := p.cmd.Wait()
		tb.Fatalf("pairs process ended without reporting (%v):\n%s", err, p.errs.String())
	}
	return line
}

// Three processes share a budget that runs out while they run: some calls
// are refused, the budget is never overspent, and the store has exactly
// what was admitted.
func TestReserveSettleProcesses(t *testing.T) {
	const attempts = 600
	// Room for about half of the attempts' estimates.
	limit := provider.Money(attempts/2) * pairsEstimate
	out := runPairs(t, pairsRun{procs: 3, goroutines: 4, attempts: attempts, limit: limit}, func() {}, func() {})
	if out.admitted == 0 || out.refused == 0 || out.admitted+out.refused != attempts {
		t.Errorf("admitted %d, refused %d of %d attempts; want both, adding up", out.admitted, out.refused, attempts)
	}
	t.Logf("admitted %d, refused %d, spent $%s of $%s", out.admitted, out.refused, provider.Money(out.admitted)*pairsCost, limit)
}

// pairsTTL is the holds' TTL of the processes the crash tests kill.
const pairsTTL = 2 * time.Second

// Three processes sharing a PostgreSQL budget are killed (SIGKILL) while
// they run pairs, and their directories (their journal files) deleted, as
// when containers die with their disks. Every settlement a process had
// returned is in the store: the next process, started a TTL after the kill
// (its clock and its store's set there), finds one ledger row per
// invocation (the rows of the settlements still in the journal table
// applied by it), spend equal to the rows' cost on every scope, and
// nothing held.
func TestReserveSettleProcessesCrash(t *testing.T) {
	url := testenv.Postgres(t)
	schema := newSchema(t, url)
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, sc := range pairsScopes {
		if err := st.SetBudget(ctx, sc, provider.MustMoney("1000")); err != nil {
			t.Fatal(err)
		}
	}
	r := pairsRun{procs: 3, goroutines: 4, attempts: 300}
	dir := t.TempDir()
	var ps []*pairsProcess
	for i := range r.procs {
		ps = append(ps, startPairsProcess(t, r.spec(url, schema, dir, i, "crash"), envPairsTTL+"="+pairsTTL.String()))
	}
	for _, p := range ps {
		if line := p.next(t); line != "ready" {
			t.Fatalf("pairs process said %q; want ready", line)
		}
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var flushed int64
	for _, p := range ps {
		var n int64
		if _, err := fmt.Sscanf(p.next(t), "flushed %d", &n); err != nil {
			t.Fatal(err)
		}
		flushed += n
	}
	for _, p := range ps {
		if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code runs
			t.Fatal(err)
		}
		p.cmd.Wait()
	}
	killed := time.Now()
	var settled []string
	for _, p := range ps {
		settled = append(settled, p.settledIDs()...)
	}
	if err := os.RemoveAll(dir); err != nil { // the disks are gone
		t.Fatal(err)
	}
	journaled := countJournalTable(t, url, schema)
	bound := killed.Add(pairsTTL)
	next, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema), ledger.WithClock(func() time.Time { return bound }))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ledger.NewFast(ctx, next, t.TempDir(), ledger.FastClock(func() time.Time { return bound }), ledger.FastHoldTTL(pairsTTL),
		ledger.FastAfterFunc(func(time.Duration, func()) func() bool { return func() bool { return true } }))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := checkOneRowEach(t, st, settled)
	if int64(len(rows)) < flushed {
		t.Errorf("%d rows; want at least the %d pairs in the store before the kill", len(rows), flushed)
	}
	want := provider.Money(len(rows)) * pairsCost
	for _, sc := range pairsScopes {
		b, err := f.Budget(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		if b.Spent != want || b.Held != 0 {
			t.Errorf("%s a TTL after the kill: %+v; want spent $%s (%d rows), nothing held", sc, b, want, len(rows))
		}
	}
	if n := countJournalTable(t, url, schema); n != 0 {
		t.Errorf("%d settlements left in the journal table", n)
	}
	t.Logf("%d pairs in the store before the kill, %d settled in all, %d in the journal table at the kill, %d rows", flushed, len(settled), journaled, len(rows))
}

// countJournalTable counts the settlements in the journal table of schema.
func countJournalTable(t *testing.T, url, schema string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".journal").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkOneRowEach checks that the store has no invocation twice and every
// invocation of settled once, and returns its rows.
func checkOneRowEach(t *testing.T, st ledger.Store, settled []string) []ledger.AttemptRow {
	t.Helper()
	rows, err := st.Attempts(context.Background(), ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, row := range rows {
		if ids[row.InvocationID] {
			t.Errorf("invocation %s recorded twice", row.InvocationID)
		}
		ids[row.InvocationID] = true
	}
	missing := 0
	for _, id := range settled {
		if !ids[id] {
			missing++
			if missing <= 5 {
				t.Errorf("invocation %s was settled, and has no ledger row", id)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d settled invocations have no ledger row", missing, len(settled))
	}
	return rows
}

// Three processes share a task budget on one PostgreSQL under load; one is
// killed (SIGKILL) and its directory deleted, as a replica dying with its
// disk. The others go on and, within the stated bound (a TTL and a fifth
// after the kill), apply what it left in the journal table; once they
// stop, every call any of them settled has exactly one ledger row, spend
// equals the rows and never passes the budget, and the room the dead
// process held, counted at the kill, is back a TTL after it.
func TestReserveSettleProcessKilledWithItsDisk(t *testing.T) {
	url := testenv.Postgres(t)
	schema := newSchema(t, url)
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Some 460 calls: the budget runs out soon after the kill, which comes
	// once the victim has settled 100.
	limit := provider.MustMoney("6")
	for _, sc := range pairsScopes {
		if err := st.SetBudget(ctx, sc, limit); err != nil {
			t.Fatal(err)
		}
	}
	r := pairsRun{procs: 3, goroutines: 4, attempts: 300}
	root := t.TempDir()
	var ps []*pairsProcess
	for i := range r.procs {
		ps = append(ps, startPairsProcess(t, r.spec(url, schema, filepath.Join(root, fmt.Sprint(i)), i, "crash"), envPairsTTL+"="+pairsTTL.String()))
	}
	for _, p := range ps {
		if line := p.next(t); line != "ready" {
			t.Fatalf("pairs process said %q; want ready", line)
		}
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	victim := ps[0]
	if line := victim.next(t); !strings.HasPrefix(line, "flushed ") {
		t.Fatalf("pairs process said %q; want flushed", line)
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.cmd.Wait()
	killed := time.Now()
	if err := os.RemoveAll(filepath.Join(root, "0")); err != nil {
		t.Fatal(err)
	}
	// The survivors apply what the dead process left in the journal table
	// (a real effect of other processes, awaited with a deadline).
	bound := pairsTTL + pairsTTL/5
	left := -1
	deadline := killed.Add(bound + 10*time.Second) // slack for a loaded machine
	for time.Now().Before(deadline) {
		if left = countJournalBefore(t, url, schema, killed); left == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	applied := time.Since(killed)
	if left != 0 {
		t.Fatalf("%d settlements of the dead process still in the journal table %s after the kill", left, applied)
	}
	if applied > bound+2*time.Second {
		t.Errorf("the dead process's settlements were applied %s after the kill; the bound is %s", applied, bound)
	}
	for _, p := range ps[1:] {
		if _, err := io.WriteString(p.stdin, "stop\n"); err != nil {
			t.Fatal(err)
		}
	}
	var settled []string
	for _, p := range ps[1:] {
		if line := p.next(t); !strings.HasPrefix(line, "flushed ") && !strings.HasPrefix(line, "done ") {
			t.Fatalf("pairs process said %q", line)
		} else if strings.HasPrefix(line, "flushed ") {
			p.next(t) // done
		}
		p.stdin.Close()
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("pairs process: %v\n%s", err, p.errs.String())
		}
	}
	for _, p := range ps {
		settled = append(settled, p.settledIDs()...)
	}
	rows := checkOneRowEach(t, st, settled)
	want := provider.Money(len(rows)) * pairsCost
	// The survivors have given back their leases: the holds left are the
	// dead process's (those the survivors have not dropped as expired
	// already), and each expires within a TTL of the kill.
	left, latest := heldRows(t, url, schema)
	if latest.After(killed.Add(pairsTTL)) {
		t.Errorf("a hold of the dead process expires at %s, %s after the kill; the bound is %s", latest, latest.Sub(killed), pairsTTL)
	}
	afterTTL, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema), ledger.WithClock(func() time.Time { return killed.Add(pairsTTL) }))
	if err != nil {
		t.Fatal(err)
	}
	defer afterTTL.Close()
	for _, sc := range pairsScopes {
		b, err := afterTTL.Budget(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		if b.Spent != want || b.Spent > limit || b.Held != 0 {
			t.Errorf("%s a TTL (%s) after the kill: %+v; want spent $%s (%d rows) within $%s, nothing held", sc, pairsTTL, b, want, len(rows), limit)
		}
		if sc == pairsTask {
			t.Logf("%s: spent $%s of $%s; %d holds of the dead process left in the store, none counted %s after the kill", sc, b.Spent, limit, left, pairsTTL)
		}
	}
	// The room is back: what the budget has left can be reserved whole.
	if rest := limit - want; rest > 0 {
		err := afterTTL.Reserve(ctx, ledger.Reservation{InvocationID: "the-rest", Amount: rest, Scopes: pairsScopes, ExpiresAt: killed.Add(time.Hour)})
		if err != nil {
			t.Errorf("reserving the $%s the budget has left, a TTL after the kill: %v", rest, err)
		}
	}
	t.Logf("%d calls settled (%d by the killed process), %d rows; its journaled settlements applied by the others %s after the kill",
		len(settled), len(victim.settledIDs()), len(rows), applied.Round(time.Millisecond))
}

// countJournalBefore counts the settlements in the journal table of schema
// written at or before t.
func countJournalBefore(t *testing.T, url, schema string, at time.Time) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".journal WHERE written_at <= $1", at.UnixNano()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// heldRows returns how many reservations schema holds, and the latest
// expiry among them.
func heldRows(t *testing.T, url, schema string) (int, time.Time) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	var latest int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*), coalesce(max(expires_at), 0) FROM "+pgx.Identifier{schema}.Sanitize()+".reservations").Scan(&n, &latest); err != nil {
		t.Fatal(err)
	}
	return n, time.Unix(0, latest)
}
