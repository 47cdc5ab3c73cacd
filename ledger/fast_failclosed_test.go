package ledger_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
	"github.com/cortexbuild/cortexbuild/provider"
)

// fullStore is a real store whose settlements fail, while full is set, the
// way SQLite's fail on a full disk.
type fullStore struct {
	ledger.Store
	full      atomic.Bool
	noRelease atomic.Bool
}

// Release fails while noRelease is set, as Settle does while full is.
func (s *fullStore) Release(ctx context.Context, invocationID string) error {
	if s.noRelease.Load() {
		return fmt.Errorf("ledger: release: %w: database or disk is full (13)", ledger.ErrUnavailable)
	}
	return s.Store.Release(ctx, invocationID)
}

func (s *fullStore) Settle(ctx context.Context, set ledger.Settlement) error {
	if s.full.Load() {
		return fmt.Errorf("ledger: settle: %w: database or disk is full (13)", ledger.ErrUnavailable)
	}
	return s.Store.Settle(ctx, set)
}

// caller makes calls through a store and counts what reached the
// "provider" (calls admitted) and what was answered; safe for concurrent
// use.
type caller struct {
	t        *testing.T
	st       ledger.Store
	mu       sync.Mutex
	n        int
	sent     int
	answered map[string]provider.Money
}

func newCaller(t *testing.T, st ledger.Store) *caller {
	return &caller{t: t, st: st, answered: map[string]provider.Money{}}
}

// reserve admits one call, or returns the refusal.
func (c *caller) reserve() (string, error) {
	c.mu.Lock()
	c.n++
	id := fmt.Sprintf("call-%d", c.n)
	c.mu.Unlock()
	err := c.st.Reserve(context.Background(), ledger.Reservation{InvocationID: id, Amount: mustM("0.01"), Scopes: []ledger.Scope{fastTask, fastMonth}, ExpiresAt: time.Now().Add(time.Hour)})
	if err == nil {
		c.mu.Lock()
		c.sent++
		c.mu.Unlock()
	}
	return id, err
}

// settle settles an admitted call as answered.
func (c *caller) settle(id string) {
	c.t.Helper()
	cost := mustM("0.007")
	err := c.st.Settle(context.Background(), ledger.Settlement{InvocationID: id, Cost: cost, Scopes: []ledger.Scope{fastTask, fastMonth},
		Entry: ledger.AttemptRow{Task: "t1", Agent: "builder", Provider: "p", Model: "m", Outcome: "ok", Cost: cost, InputTokens: 10}})
	if err != nil {
		c.t.Errorf("settle %s: %v", id, err)
	}
	c.mu.Lock()
	c.answered[id] = cost
	c.mu.Unlock()
}

// call makes one whole call; it reports the refusal, if any.
func (c *caller) call() error {
	id, err := c.reserve()
	if err == nil {
		c.settle(id)
	}
	return err
}

// until polls cond every few milliseconds until it holds, failing the test
// after a deadline.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// checkRecorded checks, in a fresh store, that every answered call is in
// the ledger once, charged, and that nothing is held.
func checkRecorded(t *testing.T, site fastSite, answered map[string]provider.Money) {
	t.Helper()
	ctx := context.Background()
	raw := site.raw(t)
	defer raw.Close()
	if _, err := ledger.Replay(ctx, raw, site.journals); err != nil {
		t.Fatal(err)
	}
	rows, err := raw.Attempts(ctx, ledger.Filter{Task: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.InvocationID]++
	}
	var want provider.Money
	for id, cost := range answered {
		want += cost
		if seen[id] != 1 {
			t.Errorf("%s: %d ledger rows; want 1", id, seen[id])
		}
	}
	if len(rows) != len(answered) {
		t.Errorf("%d ledger rows for %d answered calls", len(rows), len(answered))
	}
	b, err := raw.Budget(ctx, fastTask)
	if err != nil || b.Spent != want || b.Held != 0 {
		t.Errorf("task budget = %+v, %v; want spent %s, nothing held", b, err, want)
	}
}

// checkWholeLines checks that every journal file holds whole records only:
// a failed append leaves nothing behind for a later one to follow.
func checkWholeLines(t *testing.T, dir string) (records int) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Errorf("%s ends with a partial record", p)
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Errorf("%s: torn record %q: %v", p, sc.Text(), err)
			}
			records++
		}
	}
	return records
}

// While neither the journal nor the store can be written: a call already
// paid is kept and retried, no new call is admitted (the refusal names the
// cause, where, and the fix), and calls are admitted again by themselves
// once everything kept is written.
func TestFastFullJournalRefusesAndKeepsWhatWasPaid(t *testing.T) {
	site := newFastSite(t)
	st := &fullStore{Store: site.raw(t)}
	var reports atomic.Int64
	f, err := ledger.NewFast(context.Background(), st, site.journals, ledger.FastOnError(func(err error) { reports.Add(1); t.Log(err) }))
	if err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, f)
	for range 3 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	inflight, err := c.reserve() // the provider is answering it
	if err != nil {
		t.Fatal(err)
	}
	ledger.JournalFull.Store(true)
	defer ledger.JournalFull.Store(false)
	st.full.Store(true)
	c.settle(inflight) // paid: kept, not dropped
	if reports.Load() == 0 {
		t.Error("a settlement kept in memory was not reported")
	}

	sent := c.sent
	var we *ledger.WriteError
	for range 20 {
		err := c.call()
		if !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a call with the disk full = %v; want a *WriteError wrapping ErrUnavailable", err)
		}
	}
	if c.sent != sent {
		t.Fatalf("%d calls were admitted with the disk full", c.sent-sent)
	}
	msg := we.Error()
	if !we.Journal || !we.DiskFull || we.Kept != 1 || !strings.Contains(msg, "the disk is full") || !strings.Contains(msg, site.journals) ||
		!strings.Contains(msg, "free space on the filesystem holding "+site.journals) || !strings.Contains(msg, "admitted again by themselves") {
		t.Errorf("refusal = %+v\n%s", we, msg)
	}

	// The store takes writes again, the journal not yet: what was kept
	// goes to the store, and calls are still refused.
	st.full.Store(false)
	until(t, "the kept settlement is in the store", func() bool {
		err := c.call()
		return errors.As(err, &we) && we.Kept == 0
	})
	if c.sent != sent {
		t.Fatalf("%d calls were admitted while the journal could not be written", c.sent-sent)
	}
	// Room again: calls are admitted, without a restart.
	ledger.JournalFull.Store(false)
	until(t, "calls are admitted again", func() bool { return c.call() == nil })
	for range 5 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	checkWholeLines(t, site.journals)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(c.answered); got != 3+1+6 {
		t.Errorf("%d calls answered; want 10", got)
	}
	checkRecorded(t, site, c.answered)
}

// While the store cannot be written (the journal can): settlements wait in
// the journal, which keeps them until they are applied, and no call is
// admitted until the store takes one again.
func TestFastUnwritableStoreRefusesAndKeepsTheJournal(t *testing.T) {
	site := newFastSite(t)
	st := &fullStore{Store: site.raw(t)}
	f := site.fast(t, st)
	c := newCaller(t, f)
	for range 3 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.full.Store(true)
	a, err := c.reserve()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.reserve()
	if err != nil {
		t.Fatal(err)
	}
	c.settle(a)
	c.settle(b)
	var we *ledger.WriteError
	until(t, "calls are refused", func() bool { return errors.As(c.call(), &we) })
	sent := c.sent
	for range 10 {
		if err := c.call(); !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a call with the store unwritable = %v", err)
		}
	}
	if c.sent != sent {
		t.Fatalf("%d calls admitted with the store unwritable", c.sent-sent)
	}
	msg := we.Error()
	// Settled since the store failed: a and b, and any call admitted before
	// the failure was seen.
	waiting := sent - 3
	if we.Journal || !we.DiskFull || we.Waiting != waiting || !strings.Contains(msg, "the store cannot be written") || !strings.Contains(msg, fmt.Sprintf("%d settlements wait in the journal", waiting)) {
		t.Errorf("refusal = %+v\n%s", we, msg)
	}
	if n := checkWholeLines(t, site.journals); n < waiting {
		t.Errorf("the journal holds %d records; want the %d settlements not yet applied", n, waiting)
	}
	st.full.Store(false)
	until(t, "calls are admitted again", func() bool { return c.call() == nil })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkRecorded(t, site, c.answered)
}

// Closing with settlements that neither the journal nor the store took:
// Close tries until its deadline, then fails naming each, with the journal
// line that applies it once saved where it says.
func TestFastCloseReportsWhatItCouldNotWrite(t *testing.T) {
	ledger.SetCloseWait(t, 300*time.Millisecond)
	site := newFastSite(t)
	st := &fullStore{Store: site.raw(t)}
	f := site.fast(t, st)
	c := newCaller(t, f)
	id, err := c.reserve()
	if err != nil {
		t.Fatal(err)
	}
	ledger.JournalFull.Store(true)
	st.full.Store(true)
	c.settle(id)
	err = f.Close()
	ledger.JournalFull.Store(false)
	if !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "1 settlements of calls already paid ($0.007)") || !strings.Contains(err.Error(), `"id":"`+id+`"`) {
		t.Fatalf("Close = %v; want it to name the settlement it could not write", err)
	}
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(l, `{"v":`) {
			lines = append(lines, l)
		}
	}
	m := regexp.MustCompile(`ending in (\S+) under (\S+):`).FindStringSubmatch(err.Error())
	if len(lines) != 1 || m == nil || m[2] != site.journals {
		t.Fatalf("lines %q, where %q in:\n%v", lines, m, err)
	}
	// As the message says: save the line, and the next process applies it.
	if err := os.WriteFile(filepath.Join(m[2], "recovered"+m[1]), []byte(lines[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkRecorded(t, site, c.answered)
}

// A lease gives back its unused part when its window ends, without
// waiting for another call: all of it when no call is in flight, all but
// the in-flight calls' estimates otherwise (those when they settle).
func TestFastLeaseGivesBackWhenItsWindowEnds(t *testing.T) {
	site := newFastSite(t)
	clk := ledgertest.NewClock(ledgertest.Epoch)
	f := site.fast(t, site.raw(t), ledger.FastClock(clk.Now), ledger.FastAfterFunc(clk.AfterFunc), ledger.FastLeaseWindow(2*time.Second))
	defer f.Close()
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("10")); err != nil {
		t.Fatal(err)
	}
	other := site.raw(t) // what 'cortexbuild budget show' reads
	defer other.Close()
	held := func() provider.Money {
		t.Helper()
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		f.WaitGiveBacks()
		b, err := other.Budget(ctx, fastTask)
		if err != nil {
			t.Fatal(err)
		}
		return b.Held
	}
	c := newCaller(t, f)
	for range 3 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	// The lease is $0.64 (64 estimates); each settled call drew its
	// estimate off it.
	if h := held(); h != mustM("0.61") {
		t.Fatalf("held during the window = %s; want what is left of the lease, $0.61", h)
	}
	clk.Advance(1999 * time.Millisecond)
	if h := held(); h != mustM("0.61") {
		t.Fatalf("held just before the window ends = %s; want the lease", h)
	}
	clk.Advance(time.Millisecond)
	if h := held(); h != 0 {
		t.Fatalf("held once the window has ended, no call since = %s; want 0", h)
	}

	// A call in flight when the window ends keeps only its own estimate.
	id, err := c.reserve()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if h := held(); h != mustM("0.01") {
		t.Fatalf("held with one call in flight after the window = %s; want its estimate, $0.01", h)
	}
	c.settle(id)
	if h := held(); h != 0 {
		t.Fatalf("held once it settled = %s; want 0", h)
	}
	if b, _ := other.Budget(ctx, fastTask); b.Spent != mustM("0.028") {
		t.Errorf("spent = %s; want $0.028", b.Spent)
	}
}

// The same on PostgreSQL, whose settlements are applied in batches: while
// the database refuses them (a trigger answers as a full disk would), no
// call is admitted and they wait in the journal; once it takes them, every
// answered call is recorded once.
func TestFastOnPostgresUnwritableStoreRefuses(t *testing.T) {
	url := testenv.Postgres(t)
	schema := newSchema(t, url)
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	f, err := ledger.NewFast(ctx, st, filepath.Join(t.TempDir(), "journal"), ledger.FastOnError(func(err error) { t.Log(err) }))
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, strings.ReplaceAll(q, "_S_.", schema+".")); err != nil {
			t.Fatal(err)
		}
	}
	c := newCaller(t, f)
	for range 3 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	exec(`CREATE FUNCTION _S_.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`)
	exec(`CREATE TRIGGER refuse BEFORE INSERT ON _S_.settlements FOR EACH ROW EXECUTE FUNCTION _S_.refuse()`)
	var we *ledger.WriteError
	until(t, "calls are refused", func() bool { return errors.As(c.call(), &we) })
	sent := c.sent
	for range 5 {
		if err := c.call(); !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a call with the store unwritable = %v", err)
		}
	}
	if c.sent != sent || we.Journal || !we.DiskFull || we.Waiting != sent-3 {
		t.Errorf("%d calls admitted with the store unwritable; refusal %+v", c.sent-sent, we)
	}
	exec(`DROP TRIGGER refuse ON _S_.settlements`)
	until(t, "calls are admitted again", func() bool { return c.call() == nil })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var want provider.Money
	for _, cost := range c.answered {
		want += cost
	}
	rep, err := raw.Spend(ctx, ledger.Filter{})
	if err != nil || rep.Total.Cost != want || rep.Total.Attempts != int64(len(c.answered)) {
		t.Errorf("ledger %+v, %v; want $%s over %d rows", rep.Total, err, want, len(c.answered))
	}
	for _, sc := range []ledger.Scope{fastTask, fastMonth} {
		if b, err := raw.Budget(ctx, sc); err != nil || b.Spent != want || b.Held != 0 {
			t.Errorf("%s: %+v, %v; want spent $%s, nothing held", sc, b, err, want)
		}
	}
}

// A lease whose release the store refused (its disk full when the lease
// was given back) is given back again by Close once the store takes it:
// Close reports nothing lost and no journal is left.
func TestFastCloseReleasesWhatTheStoreRefused(t *testing.T) {
	site := newFastSite(t)
	st := &fullStore{Store: site.raw(t)}
	f := site.fast(t, st)
	ctx := context.Background()
	if err := f.SetBudget(ctx, fastTask, mustM("10")); err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, f)
	for range 3 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	st.noRelease.Store(true)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := checkWholeLines(t, site.journals); n == 0 {
		t.Fatal("the journal holds nothing after a refused release; want the lease's record kept")
	}
	st.noRelease.Store(false)
	if err := f.Close(); err != nil {
		t.Fatalf("Close = %v; want the refused lease given back", err)
	}
	if left, _ := filepath.Glob(filepath.Join(site.journals, "*.journal")); len(left) != 0 {
		t.Errorf("journals left after Close: %v", left)
	}
}
