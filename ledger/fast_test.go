package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
	"github.com/cortexbuild/cortexbuild/provider"
)

// counting counts the calls that reach the store, and can hold settlements
// back (as a store that is down would, or a process about to be killed).
type counting struct {
	ledger.Store
	reserves, settles atomic.Int64
	block             chan struct{} // nil: settlements go through
}

func (c *counting) Reserve(ctx context.Context, r ledger.Reservation) error {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, r)
}

func (c *counting) Settle(ctx context.Context, s ledger.Settlement) error {
	if c.block != nil {
		<-c.block
		return ledger.ErrClosed
	}
	c.settles.Add(1)
	return c.Store.Settle(ctx, s)
}

type fastSite struct {
	db, journals string
}

func newFastSite(t *testing.T) fastSite {
	dir := filepath.Join(t.TempDir(), ".cortexbuild")
	return fastSite{db: filepath.Join(dir, "state.db"), journals: filepath.Join(dir, "journal")}
}

func (s fastSite) raw(t *testing.T) ledger.Store {
	t.Helper()
	st, err := ledger.OpenSQLite(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (s fastSite) fast(t *testing.T, under ledger.Store, opts ...ledger.FastOption) *ledger.Fast {
	t.Helper()
	f, err := ledger.NewFast(context.Background(), under, s.journals, append([]ledger.FastOption{ledger.FastOnError(func(err error) { t.Log(err) })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var (
	fastTask  = ledger.TaskScope("t1")
	fastMonth = ledger.Scope("month:2026-11")
)

func mustM(s string) provider.Money { return provider.MustMoney(s) }

func pair(t *testing.T, st ledger.Store, id string, est, cost provider.Money) error {
	t.Helper()
	ctx := context.Background()
	err := st.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: est, Scopes: []ledger.Scope{fastTask, fastMonth}, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		return err
	}
	return st.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: cost, Scopes: []ledger.Scope{fastTask, fastMonth},
		Entry: ledger.AttemptRow{Task: "t1", Agent: "builder", Provider: "p", Model: "m", Outcome: "ok", Cost: cost, InputTokens: 10}})
}

func TestFastAdmitsFromLeasesAndRecordsEverything(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t)}
	f := site.fast(t, c)
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("100")); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if err := pair(t, f, fmt.Sprintf("inv-%d", i), mustM("0.01"), mustM("0.007")); err != nil {
			t.Fatal(err)
		}
	}
	// An invocation whose earlier tries failed: every row, once.
	err := f.Reserve(ctx, ledger.Reservation{InvocationID: "retried", Amount: mustM("0.01"), Scopes: []ledger.Scope{fastTask, fastMonth}, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Settle(ctx, ledger.Settlement{InvocationID: "retried", Cost: mustM("0.002"), Scopes: []ledger.Scope{fastTask, fastMonth},
		Earlier: []ledger.AttemptRow{{Task: "t1", Provider: "a", Outcome: "overloaded"}, {Task: "t1", Provider: "a", Outcome: "overloaded"}},
		Entry:   ledger.AttemptRow{Task: "t1", Provider: "b", Outcome: "ok", Cost: mustM("0.002")}})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.reserves.Load(); r > 12 {
		t.Errorf("%d reservations reached the store for %d calls; leases should admit almost all of them", r, n+1)
	}
	want := mustM("0.007")*n + mustM("0.002")
	b, err := f.Budget(ctx, fastTask) // reads its own writes
	if err != nil || b.Spent != want {
		t.Fatalf("task budget = %+v, %v; want spent %s", b, err, want)
	}
	rep, err := f.Spend(ctx, ledger.Filter{Task: "t1"})
	if err != nil || rep.Total.Attempts != n+3 || rep.Total.Cost != want {
		t.Fatalf("spend = %+v, %v", rep.Total, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	raw := site.raw(t)
	defer raw.Close()
	for _, sc := range []ledger.Scope{fastTask, fastMonth} {
		b, err := raw.Budget(ctx, sc)
		if err != nil || b.Spent != want || b.Held != 0 {
			t.Errorf("%s after Close = %+v, %v; want spent %s, nothing held", sc, b, err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(site.journals, "*")); len(left) != 0 {
		t.Errorf("journals left after a clean Close: %v", left)
	}
}

// Single-process decisions match the exact store's, call for call: a
// lease never refuses what fits nor admits what does not.
func TestFastDecidesLikeTheExactStore(t *testing.T) {
	for seed := range uint64(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			exact := newFastSite(t).raw(t)
			defer exact.Close()
			site := newFastSite(t)
			f := site.fast(t, site.raw(t))
			defer f.Close()
			limit := mustM("2")
			for _, st := range []ledger.Store{exact, f} {
				if err := st.SetBudget(ctx, fastTask, limit); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			admitted := 0
			for i := range 400 {
				est := provider.Money(rng.Int64N(int64(mustM("0.05")))) + 1
				cost := provider.Money(rng.Int64N(int64(est) + 1))
				id := fmt.Sprintf("inv-%d", i)
				e1 := pair(t, exact, id, est, cost)
				e2 := pair(t, f, id, est, cost)
				if (e1 == nil) != (e2 == nil) || (e1 != nil && errors.Is(e1, ledger.ErrOverBudget) != errors.Is(e2, ledger.ErrOverBudget)) {
					t.Fatalf("call %d (estimate %s): exact store %v, fast %v", i, est, e1, e2)
				}
				if e1 == nil {
					admitted++
				}
				if errors.Is(e1, ledger.ErrOverBudget) {
					// Let the next calls go on after a refusal, as a person
					// raising the budget would.
					limit += mustM("0.01")
					for _, st := range []ledger.Store{exact, f} {
						if err := st.SetBudget(ctx, fastTask, limit); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			b1, _ := exact.Budget(ctx, fastTask)
			b2, _ := f.Budget(ctx, fastTask)
			if b1.Spent != b2.Spent || admitted == 0 || admitted == 400 {
				t.Errorf("spent: exact %s, fast %s; %d admitted", b1.Spent, b2.Spent, admitted)
			}
		})
	}
}

// Concurrent calls whose estimates together exceed the cap: exactly those
// that fit are admitted, and the spend never passes the cap.
func TestFastConcurrentCallsNeverOverspend(t *testing.T) {
	site := newFastSite(t)
	f := site.fast(t, site.raw(t))
	defer f.Close()
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("1")); err != nil {
		t.Fatal(err)
	}
	ok, refused := concurrentPairs(t, f, 16, 20)
	b, err := f.Budget(ctx, fastTask)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 100 || refused != 220 || b.Spent != mustM("1") {
		t.Errorf("admitted %d, refused %d, spent %s; want exactly 100 admitted for $1 at $0.01", ok, refused, b.Spent)
	}
}

// concurrentPairs runs goroutines × per reserve+settle pairs of $0.01 and
// counts those admitted and those refused by the budget (reaching the
// limit pauses the task, so later ones are refused as paused).
func concurrentPairs(t *testing.T, st ledger.Store, goroutines, per int) (ok, refused int64) {
	var okN, refusedN atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				switch err := pair(t, st, fmt.Sprintf("g%d-%d", g, i), mustM("0.01"), mustM("0.01")); {
				case err == nil:
					okN.Add(1)
				case errors.Is(err, ledger.ErrOverBudget), errors.Is(err, ledger.ErrPaused):
					refusedN.Add(1)
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return okN.Load(), refusedN.Load()
}

// A killed process's journal is replayed by the next one: every settlement
// once, its budget leases released.
func TestFastJournalSurvivesAKill(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t), block: make(chan struct{})}
	f := site.fast(t, c)
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("10")); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := pair(t, f, fmt.Sprintf("inv-%d", i), mustM("0.01"), mustM("0.004")); err != nil {
			t.Fatal(err)
		}
	}
	raw := site.raw(t)
	defer raw.Close()
	if b, _ := raw.Budget(ctx, fastTask); b.Spent != 0 || b.Held == 0 {
		t.Fatalf("before the kill: %+v; want nothing applied and the lease held", b)
	}
	f.Abandon() // the process dies: its journal stays, unlocked
	close(c.block)
	c.Store.Close()

	applied, err := ledger.Replay(ctx, raw, site.journals)
	if err != nil || applied != n {
		t.Fatalf("Replay = %d, %v; want %d", applied, err, n)
	}
	b, _ := raw.Budget(ctx, fastTask)
	if b.Spent != mustM("0.004")*n || b.Held != 0 {
		t.Errorf("after replay: %+v; want spent %s and nothing held", b, mustM("0.004")*n)
	}
	if rep, _ := raw.Spend(ctx, ledger.Filter{Task: "t1"}); rep.Total.Attempts != n {
		t.Errorf("%d ledger rows; want %d", rep.Total.Attempts, n)
	}
	if again, err := ledger.Replay(ctx, raw, site.journals); again != 0 || err != nil {
		t.Errorf("second replay = %d, %v", again, err)
	}
	if left, _ := filepath.Glob(filepath.Join(site.journals, "*")); len(left) != 0 {
		t.Errorf("journals left after replay: %v", left)
	}
}

// A live process's journal is never replayed by another.
func TestFastLiveJournalIsLeftAlone(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t), block: make(chan struct{})}
	f := site.fast(t, c)
	if err := pair(t, f, "inv", mustM("0.01"), mustM("0.01")); err != nil {
		t.Fatal(err)
	}
	raw := site.raw(t)
	defer raw.Close()
	if n, err := ledger.Replay(context.Background(), raw, site.journals); n != 0 || err != nil {
		t.Errorf("Replay of a live journal = %d, %v", n, err)
	}
	close(c.block)
	f.Abandon()
	c.Store.Close()
}

// A pause set by another process stops admissions once the lease window
// has passed; one set through this store stops them at once.
func TestFastSeesPauses(t *testing.T) {
	site := newFastSite(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := site.fast(t, site.raw(t), ledger.FastClock(clock), ledger.FastLeaseWindow(2*time.Second))
	defer f.Close()
	ctx := context.Background()
	if err := pair(t, f, "a", mustM("0.01"), mustM("0.01")); err != nil {
		t.Fatal(err)
	}
	other := site.raw(t)
	defer other.Close()
	if err := other.Pause(ctx, fastTask, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := pair(t, f, "b", mustM("0.01"), mustM("0.01")); err != nil {
		t.Fatalf("within the lease window: %v", err)
	}
	mu.Lock()
	now = now.Add(3 * time.Second)
	mu.Unlock()
	if err := pair(t, f, "c", mustM("0.01"), mustM("0.01")); !errors.Is(err, ledger.ErrPaused) {
		t.Fatalf("after the window: %v; want ErrPaused", err)
	}
	if err := f.Resume(ctx, fastTask); err != nil {
		t.Fatal(err)
	}
	if err := pair(t, f, "d", mustM("0.01"), mustM("0.01")); err != nil {
		t.Fatal(err)
	}
	if err := f.Pause(ctx, fastTask, "now"); err != nil {
		t.Fatal(err)
	}
	if err := pair(t, f, "e", mustM("0.01"), mustM("0.01")); !errors.Is(err, ledger.ErrPaused) {
		t.Fatalf("after this store's own pause: %v; want ErrPaused", err)
	}
}

// A released call's draw goes back to the lease; a zero-cost settlement
// (nothing billed) too.
func TestFastReleaseRefillsTheLease(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t)}
	f := site.fast(t, c, ledger.FastLeaseFactor(2))
	defer f.Close()
	ctx := context.Background()
	for i := range 50 {
		id := fmt.Sprintf("inv-%d", i)
		if err := f.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: mustM("0.01"), Scopes: []ledger.Scope{fastTask}, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			err := f.Release(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
		} else if err := f.Settle(ctx, ledger.Settlement{InvocationID: id, Scopes: []ledger.Scope{fastTask}, Entry: ledger.AttemptRow{Provider: "p", Outcome: "server"}}); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.reserves.Load(); r != 1 {
		t.Errorf("%d store reservations; want the one lease, refilled by every release", r)
	}
	if rep, _ := f.Spend(ctx, ledger.Filter{}); rep.Total.Attempts != 25 || rep.Total.Cost != 0 {
		t.Errorf("spend = %+v", rep.Total)
	}
}

// Leases that run out within a quarter of their window grow, doubling up
// to 16 times the first; one that outlives its window halves the next;
// one that runs out later keeps its size.
func TestFastLeasesGrowWhileTheyRunOutFast(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t)}
	clk := ledgertest.NewClock(ledgertest.Epoch)
	f := site.fast(t, c, ledger.FastLeaseFactor(8), ledger.FastClock(clk.Now), ledger.FastAfterFunc(clk.AfterFunc), ledger.FastLeaseWindow(2*time.Second))
	defer f.Close()
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("1000")); err != nil {
		t.Fatal(err)
	}
	n := 0
	pairs := func(k int) {
		t.Helper()
		for range k {
			n++
			if err := pair(t, f, fmt.Sprintf("inv-%d", n), mustM("0.01"), mustM("0.01")); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := func() provider.Money {
		t.Helper()
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		f.WaitGiveBacks()
		b, err := c.Store.Budget(ctx, fastTask)
		if err != nil {
			t.Fatal(err)
		}
		return b.Held
	}
	// Leases of 8, 16, 32, 64, 128 and 128 estimates.
	pairs(8 + 16 + 32 + 64 + 128 + 128)
	if r := c.reserves.Load(); r != 6 {
		t.Errorf("%d leases for %d calls at once; want 6 (8 estimates, doubling up to 128)", r, n)
	}
	// The last lease outlives its window: the next is half its size.
	clk.Advance(2 * time.Second)
	pairs(1)
	if h := held(); h != mustM("0.63") {
		t.Errorf("held after the first call on the next lease = %s; want $0.63, a lease of 64 estimates less one", h)
	}
	// It runs out after a quarter of its window: the next is as large.
	clk.Advance(time.Second)
	pairs(63 + 1)
	if h := held(); h != mustM("0.63") || c.reserves.Load() != 8 {
		t.Errorf("held after the first call on the next lease = %s, %d leases; want $0.63, 8", h, c.reserves.Load())
	}
}

func TestFastRefusesADuplicateInvocation(t *testing.T) {
	site := newFastSite(t)
	f := site.fast(t, site.raw(t))
	defer f.Close()
	r := ledger.Reservation{InvocationID: "x", Amount: mustM("0.01"), Scopes: []ledger.Scope{fastTask}, ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.Reserve(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := f.Reserve(context.Background(), r); !errors.Is(err, ledger.ErrDuplicateInvocation) {
		t.Errorf("second Reserve = %v", err)
	}
}

// The journal's hand-written lines read back as what was written, whatever
// the text holds.
func TestJournalLinesRoundTrip(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t), block: make(chan struct{})}
	f := site.fast(t, c)
	at := time.Date(2026, 11, 30, 1, 2, 3, 456789, time.UTC)
	odd := "quote \" backslash \\ newline \n tab \t bell \a esc \x1b nul-free ünïcödé 😀 <html>&"
	s := ledger.Settlement{InvocationID: "inv-odd", Cost: mustM("0.123456789"), Scopes: []ledger.Scope{fastTask, fastMonth},
		Earlier: []ledger.AttemptRow{{InvocationID: "inv-odd", Time: at, Task: "t1", Agent: odd, Provider: "p", Model: "m", Outcome: "overloaded", InputTokens: 7}},
		Entry: ledger.AttemptRow{InvocationID: "inv-odd", Time: at.Add(time.Second), Task: "t1", Agent: "a", Provider: "p2", Model: odd, Outcome: "ok",
			InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, Cost: mustM("0.123456789"), CacheHit: true, Saving: mustM("1.5"), EstimatedUsage: true, Unpriced: true}}
	if err := f.Settle(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	f.Abandon()
	close(c.block)
	c.Store.Close()
	raw := site.raw(t)
	defer raw.Close()
	if n, err := ledger.Replay(context.Background(), raw, site.journals); n != 1 || err != nil {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	rows, err := raw.Attempts(context.Background(), ledger.Filter{Task: "t1"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %+v, %v", rows, err)
	}
	if rows[0].Agent != odd || !rows[0].Time.Equal(at) || rows[0].InputTokens != 7 || rows[0].Outcome != "overloaded" {
		t.Errorf("earlier row = %+v", rows[0])
	}
	want := s.Entry
	if got := rows[1]; got.Model != odd || !got.Time.Equal(want.Time) || got.Cost != want.Cost || got.Saving != want.Saving || !got.CacheHit || !got.EstimatedUsage || !got.Unpriced || rows[0].Unpriced ||
		got.InputTokens != 1 || got.OutputTokens != 2 || got.CacheReadTokens != 3 || got.CacheWriteTokens != 4 || got.Provider != "p2" {
		t.Errorf("entry row = %+v; want %+v", got, want)
	}
}

// batchStore is a store that applies settlements in batches.
type batchStore interface {
	ledger.Store
	SettleBatch(ctx context.Context, sets []ledger.Settlement) []error
}

// One batch: lease draws and own reservations, a duplicate, an invalid
// settlement, charges summed per scope, and the pause when the sum reaches
// the limit.
func TestSQLiteSettleBatch(t *testing.T) {
	st, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testSettleBatch(t, st)
}

func TestPostgresSettleBatch(t *testing.T) {
	url := testenv.Postgres(t)
	st, err := ledger.OpenPostgres(context.Background(), url, ledger.WithSchema(newSchema(t, url)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testSettleBatch(t, st)
}

func testSettleBatch(t *testing.T, st batchStore) {
	ctx := context.Background()
	scopes := []ledger.Scope{fastTask, fastMonth}
	if err := st.SetBudget(ctx, fastTask, mustM("1")); err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	if err := st.Reserve(ctx, ledger.Reservation{InvocationID: "lease_a", Amount: mustM("0.5"), Scopes: scopes, ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	if err := st.Reserve(ctx, ledger.Reservation{InvocationID: "own", Amount: mustM("0.3"), Scopes: scopes, ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	row := ledger.AttemptRow{Task: "t1", Provider: "p", Outcome: "ok"}
	if err := st.Settle(ctx, ledger.Settlement{InvocationID: "done-before", Cost: mustM("0.1"), Scopes: scopes, Entry: row}); err != nil {
		t.Fatal(err)
	}
	sets := []ledger.Settlement{
		{InvocationID: "l1", Cost: mustM("0.2"), Scopes: scopes, Lease: "lease_a", Reserved: mustM("0.25"), Entry: row},
		{InvocationID: "l2", Cost: mustM("0.2"), Scopes: scopes, Lease: "lease_a", Reserved: mustM("0.25"), Entry: row,
			Earlier: []ledger.AttemptRow{{Task: "t1", Provider: "q", Outcome: "overloaded"}}},
		{InvocationID: "own", Cost: mustM("0.3"), Scopes: []ledger.Scope{fastMonth}, Entry: row},
		{InvocationID: "done-before", Cost: mustM("0.1"), Scopes: scopes, Entry: row},
		{InvocationID: "bad", Cost: mustM("0.1"), Scopes: scopes, Reserved: mustM("0.1"), Entry: row},
	}
	errs := st.SettleBatch(ctx, sets)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ledger.ErrAlreadySettled) || !errors.Is(errs[4], ledger.ErrInvalid) {
		t.Fatalf("errs = %v", errs)
	}
	b, _ := st.Budget(ctx, fastTask)
	// 0.1 before + 0.2 + 0.2 + 0.3 (own reservation: charged to its held
	// scopes, task included) = 0.8; the lease is drawn down to 0.
	if b.Spent != mustM("0.8") || b.Held != 0 || b.Paused {
		t.Errorf("task = %+v", b)
	}
	rep, _ := st.Spend(ctx, ledger.Filter{Task: "t1"})
	if rep.Total.Attempts != 5 {
		t.Errorf("%d rows; want 5", rep.Total.Attempts)
	}
	var l2 []string
	rows, _ := st.Attempts(ctx, ledger.Filter{Task: "t1"})
	for _, r := range rows {
		if r.InvocationID == "l2" {
			l2 = append(l2, r.Outcome)
		}
	}
	if !slices.Equal(l2, []string{"overloaded", "ok"}) {
		t.Errorf("rows of l2: %v; want the earlier one first", l2)
	}
	// The same invocation twice in one batch: applied once.
	l3 := ledger.Settlement{InvocationID: "l3", Cost: mustM("0.2"), Scopes: scopes, Entry: row}
	errs = st.SettleBatch(ctx, []ledger.Settlement{l3, l3})
	if errs[0] != nil || !errors.Is(errs[1], ledger.ErrAlreadySettled) {
		t.Fatalf("errs = %v", errs)
	}
	if b, _ := st.Budget(ctx, fastTask); b.Spent != mustM("1") || !b.Paused {
		t.Errorf("after reaching the limit: %+v; want it paused", b)
	}
}

// The fast path over PostgreSQL (settlements applied in batches there):
// decisions at the limit, spend and holds after Close.
func TestFastOnPostgres(t *testing.T) {
	url := testenv.Postgres(t)
	ctx := context.Background()
	schema := newSchema(t, url)
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ledger.NewFast(ctx, st, filepath.Join(t.TempDir(), "journal"), ledger.FastOnError(func(err error) { t.Log(err) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetBudget(ctx, fastTask, mustM("0.5")); err != nil {
		t.Fatal(err)
	}
	ok, refused := concurrentPairs(t, f, 8, 10)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b, err := raw.Budget(ctx, fastTask)
	if err != nil || ok != 50 || refused != 30 || b.Spent != mustM("0.5") || b.Held != 0 {
		t.Errorf("admitted %d, refused %d, budget %+v, %v; want 50 admitted, $0.50 spent, nothing held", ok, refused, b, err)
	}
}

// With settlements stuck (the store does not take them), a call that must
// be decided exactly, and a read, fail as unavailable instead of waiting
// for ever.
func TestFastStuckStoreIsUnavailableNotAHang(t *testing.T) {
	site := newFastSite(t)
	c := &counting{Store: site.raw(t), block: make(chan struct{})}
	f := site.fast(t, c)
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("0.05")); err != nil {
		t.Fatal(err)
	}
	if err := pair(t, f, "a", mustM("0.01"), mustM("0.01")); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	err := f.Reserve(gone, ledger.Reservation{InvocationID: "b", Amount: mustM("0.01"), Scopes: []ledger.Scope{fastTask, fastMonth}, ExpiresAt: time.Now().Add(time.Hour)})
	if !errors.Is(err, ledger.ErrUnavailable) && !errors.Is(err, context.Canceled) {
		t.Errorf("exact reservation with settlements stuck = %v; want it to give up", err)
	}
	if _, err := f.Budget(gone, fastTask); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("read with settlements stuck = %v; want ErrUnavailable", err)
	}
	f.Abandon()
	close(c.block)
	c.Store.Close()
}
