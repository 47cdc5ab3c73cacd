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

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The processes of the pairs runs: each opens its own fast path (its own
// journal) on one PostgreSQL schema, and runs reserve+settle pairs against
// the budgets every process shares.

// Environment of a pairs process.
const (
	envPairs = "LEDGER_PAIRS_PROCESS" // url schema journal-dir prefix attempts goroutines stop-on-refusal mode
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
// all (nanoseconds: user and system). In mode crash it goes on
// with pairs until killed, and says "flushed <n>" once n admitted pairs,
// at least its attempts, are in the store.
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
	f, err := ledger.NewFast(ctx, st, dir, ledger.FastOnError(func(err error) { fmt.Fprintln(os.Stderr, err) }))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(pairsLine + "ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		t.Fatalf("stdin said %q, %v; want go", in.Text(), in.Err())
	}
	var seq, admitted, refused atomic.Int64
	var flushed sync.Once
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for {
				i := seq.Add(1)
				if i > int64(attempts) && !crash {
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
				if admitted.Add(1) >= int64(attempts) && crash {
					flushed.Do(func() {
						n := admitted.Load()
						if err := f.Flush(ctx); err != nil {
							t.Error(err)
						}
						fmt.Printf(pairsLine+"flushed %d\n", n)
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

func startPairsProcess(tb testing.TB, spec string) *pairsProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPairsProcess$", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), envPairs+"="+spec)
	p := &pairsProcess{cmd: cmd, lines: make(chan string, 4)}
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
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), pairsLine); ok {
				p.lines <- line
			}
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

// Three processes are killed while they run pairs, some of their
// settlements in the store and others only in their journals; replaying
// the journals (in batches) applies every settlement exactly once: one
// ledger row per invocation, spend equal to the rows' cost on every scope,
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
		ps = append(ps, startPairsProcess(t, r.spec(url, schema, dir, i, "crash")))
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
	journaled := 0
	for i := range r.procs {
		files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("journal-%d", i), "*"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			journaled += bytes.Count(data, []byte(`"op":"settle"`))
		}
	}
	applied := 0
	for i := range r.procs {
		rep, err := ledger.ReplayJournals(ctx, st, filepath.Join(dir, fmt.Sprintf("journal-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range rep.KeptAside {
			if !k.Torn { // a torn last record: its call was never answered
				t.Error(k)
			}
		}
		applied += rep.Applied
	}
	rows, err := st.Attempts(ctx, ledger.Filter{})
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
	if int64(len(rows)) < flushed {
		t.Errorf("%d rows; want at least the %d pairs in the store before the kill", len(rows), flushed)
	}
	want := provider.Money(len(rows)) * pairsCost
	for _, sc := range pairsScopes {
		b, err := st.Budget(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		if b.Spent != want || b.Held != 0 {
			t.Errorf("%s after the replay: %+v; want spent $%s (%d rows), nothing held", sc, b, want, len(rows))
		}
	}
	t.Logf("%d pairs in the store before the kill, %d settlements in the journals, %d applied by the replay, %d rows", flushed, journaled, applied, len(rows))
}
