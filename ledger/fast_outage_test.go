package ledger_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

// proxied returns rawURL (a postgres:// URL) through a new proxy, with a
// password the server (trust authentication) ignores, so that a test can
// check that it never appears in an error.
func proxied(t *testing.T, rawURL string) (*testenv.Proxy, string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	u.Host = p.Addr
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	return p, u.String()
}

// behindProxy is a fast path on PostgreSQL reached through a proxy the
// test cuts, on a settable clock, with a $10 task budget and three calls
// made against its lease.
type behindProxy struct {
	raw, schema string // the test database, and the store's schema in it
	proxy       *testenv.Proxy
	clk         *ledgertest.Clock
	f           *ledger.Fast
	c           *caller
}

// newBehindProxy opens it with its journal files in dir and opts added.
func newBehindProxy(t *testing.T, dir string, opts ...ledger.FastOption) behindProxy {
	t.Helper()
	b := behindProxy{raw: testenv.Postgres(t), clk: ledgertest.NewClock(ledgertest.Epoch)}
	b.schema = newSchema(t, b.raw)
	var viaProxy string
	b.proxy, viaProxy = proxied(t, b.raw)
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, viaProxy, ledger.WithSchema(b.schema), ledger.WithClock(b.clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]ledger.FastOption{ledger.FastClock(b.clk.Now), ledger.FastAfterFunc(b.clk.AfterFunc)}, opts...)
	if b.f, err = ledger.NewFast(ctx, st, dir, opts...); err != nil {
		t.Fatal(err)
	}
	if err := b.f.SetBudget(ctx, fastTask, mustM("10")); err != nil {
		t.Fatal(err)
	}
	b.c = newCaller(t, b.f)
	for range 3 {
		if err := b.c.call(); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// With PostgreSQL unreachable (the proxy to it cut), the fast path admits
// no call once it has tried to write (a renewal of its holds, a settlement
// or a new lease), and says why, naming the server and not the password;
// the settlement of a call answered as it happened is kept, in the local
// journal file meanwhile, and retried. When PostgreSQL is reachable again,
// calls are admitted again by themselves, and every answered call is in
// the ledger once.
func TestFastPostgresUnreachableFailsClosedAndRecovers(t *testing.T) {
	journals := filepath.Join(t.TempDir(), "journal")
	var logMu sync.Mutex
	var logged []string
	b := newBehindProxy(t, journals, ledger.FastOnError(func(err error) {
		logMu.Lock()
		logged = append(logged, err.Error())
		logMu.Unlock()
		t.Log(err)
	}))
	raw, schema, proxy, clk, f, c := b.raw, b.schema, b.proxy, b.clk, b.f, b.c
	// Cut with nothing in flight: the lease in memory still has room, but
	// once a renewal of the holds has failed no call is admitted.
	proxy.Cut()
	clk.Advance(ledger.DefaultHoldTTL / 5)
	var we *ledger.WriteError
	if err := c.call(); !errors.As(err, &we) || !strings.Contains(err.Error(), "renew holds") {
		t.Fatalf("a call after a failed renewal = %v; want a refusal naming the renewal", err)
	}
	proxy.Restore()
	clk.Advance(ledger.DefaultHoldTTL / 5)
	// Once the connection that hears of budget changes listens again.
	until(t, "a call is admitted after a renewal that worked", func() bool { return c.call() == nil })
	// A call is in flight when PostgreSQL goes away; it is answered.
	inFlight, err := c.reserve()
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	c.settle(inFlight)
	sent := c.sent
	for range 5 {
		err := c.call()
		if !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a call with PostgreSQL unreachable = %v; want a refusal", err)
		}
	}
	if c.sent != sent {
		t.Errorf("%d calls admitted with PostgreSQL unreachable", c.sent-sent)
	}
	msg := we.Error()
	if want := "the ledger's PostgreSQL at " + proxy.Addr + " is unreachable"; !strings.Contains(msg, want) {
		t.Errorf("refusal %q does not say %q", msg, want)
	}
	logMu.Lock()
	for _, s := range append(logged, msg) {
		if strings.Contains(s, "s3cret-pw") {
			t.Errorf("the password is in %q", s)
		}
	}
	logMu.Unlock()
	// The answered call's settlement is kept in the journal file
	// meanwhile (the last resort) and retried.
	files, _ := filepath.Glob(filepath.Join(journals, "*.journal"))
	found := false
	for _, file := range files {
		data, _ := os.ReadFile(file)
		found = found || strings.Contains(string(data), `"id":"`+inFlight+`"`)
	}
	if !found {
		t.Errorf("the settlement of %s is not in the journal files %v", inFlight, files)
	}
	proxy.Restore()
	back := time.Now()
	clk.Advance(ledger.DefaultHoldTTL / 5) // the next renewal reaches the store
	until(t, "calls are admitted again", func() bool { return c.call() == nil })
	t.Logf("calls admitted again %s after PostgreSQL was reachable again; %d refused meanwhile", time.Since(back).Round(time.Millisecond), c.n-c.sent)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkAnswered(t, raw, schema, c)
}

// checkAnswered checks, through a store of its own, that every answered
// call of c has its ledger row once, every scope is charged their sum, and
// nothing is held.
func checkAnswered(t *testing.T, url, schema string, c *caller) {
	t.Helper()
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids []string
	var want = mustM("0")
	for id, cost := range c.answered {
		ids = append(ids, id)
		want += cost
	}
	rows := checkOneRowEach(t, st, ids)
	if len(rows) != len(ids) {
		t.Errorf("%d rows; want the %d answered calls'", len(rows), len(ids))
	}
	for _, sc := range []ledger.Scope{fastTask, fastMonth} {
		if b, err := st.Budget(ctx, sc); err != nil || b.Spent != want || b.Held != 0 {
			t.Errorf("%s: %+v, %v; want spent $%s, nothing held", sc, b, err, want)
		}
	}
}

// The journal table is written without waiting for the database's disk,
// unless the fast path syncs its journal (store.journal_sync); the store's
// other writes always wait for it.
func TestJournalTableSyncCommit(t *testing.T) {
	url := testenv.Postgres(t)
	ctx := context.Background()
	st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(newSchema(t, url)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for durable, want := range map[bool]string{false: "off", true: "on"} {
		if got, err := st.JournalSyncCommit(ctx, durable); err != nil || got != want {
			t.Errorf("durable %v: synchronous_commit %q, %v; want %q", durable, got, err, want)
		}
	}
}
