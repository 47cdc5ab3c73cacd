package pgstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

func rec(id, v string) pgstate.Record {
	b, _ := json.Marshal(map[string]string{"v": v})
	return pgstate.Record{ID: id, Data: b}
}

func value(t *testing.T, r pgstate.Record) string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m["v"]
}

func put(id, v string) func([]pgstate.Record) ([]pgstate.Record, bool, error) {
	return func(rs []pgstate.Record) ([]pgstate.Record, bool, error) {
		i := slices.IndexFunc(rs, func(r pgstate.Record) bool { return r.ID == id })
		if i < 0 {
			return append(rs, rec(id, v)), true, nil
		}
		rs[i] = rec(id, v)
		return rs, true, nil
	}
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A change made through one opening (one process) is read by another
// opening: at once by a view that looks every time, and by a view with a
// period no later than the period after its last look, never before
// (it is a cache: one query per period).
func TestChangeSeenByAnotherOpeningWithinThePeriod(t *testing.T) {
	site := pgstatetest.New(t)
	a, b := site.Open(t, "p"), site.Open(t, "p")
	ctx := t.Context()
	va := &pgstate.View{Set: a.Set("k")}
	c := &clock{t: time.Unix(1e9, 0)}
	vb := &pgstate.View{Set: b.Set("k"), Every: 500 * time.Millisecond, Now: c.now}
	if _, rs, err := vb.Records(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("empty set = %v, %v", rs, err)
	}
	if _, _, err := va.Change(ctx, put("x", "1")); err != nil {
		t.Fatal(err)
	}
	if _, rs, _ := vb.Records(ctx); len(rs) != 0 {
		t.Fatalf("seen before the period ended: %v", rs)
	}
	c.add(499 * time.Millisecond)
	if _, rs, _ := vb.Records(ctx); len(rs) != 0 {
		t.Fatalf("seen before the period ended: %v", rs)
	}
	c.add(time.Millisecond)
	_, rs, err := vb.Records(ctx)
	if err != nil || len(rs) != 1 || value(t, rs[0]) != "1" {
		t.Fatalf("after the period: %v, %v", rs, err)
	}
	// A fresh look is not held back by the period.
	if _, _, err := va.Change(ctx, put("y", "2")); err != nil {
		t.Fatal(err)
	}
	if _, rs, _ := vb.Fresh(ctx, 0); len(rs) != 2 {
		t.Fatalf("fresh look = %v", rs)
	}
	// Another project's set of the same kind is another set.
	if _, rs, err := (&pgstate.View{Set: site.Open(t, "other").Set("k")}).Records(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("other project = %v, %v", rs, err)
	}
}

// Many goroutines of two openings change one set at once: no change is
// lost, and the records keep the order they were added in.
func TestConcurrentChangesLoseNothing(t *testing.T) {
	site := pgstatetest.New(t)
	stores := []*pgstate.Store{site.Open(t, "p"), site.Open(t, "p")}
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for s := range stores {
		for w := range workers {
			wg.Go(func() {
				set := stores[s].Set("k")
				for i := range each {
					id := fmt.Sprintf("%d-%d-%d", s, w, i)
					if _, _, err := set.Change(context.Background(), put(id, id)); err != nil {
						errs <- err
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, rs, err := stores[1].Set("k").Load(t.Context())
	if err != nil || len(rs) != 2*workers*each || v != 2*workers*each {
		t.Fatalf("after %d changes: version %d, %d records, %v", 2*workers*each, v, len(rs), err)
	}
	// Per writer, in the order it added them.
	last := map[string]int{}
	for _, r := range rs {
		var s, w, i int
		fmt.Sscanf(r.ID, "%d-%d-%d", &s, &w, &i)
		k := fmt.Sprint(s, w)
		if p, ok := last[k]; ok && p >= i {
			t.Fatalf("record %s listed after %s-%d", r.ID, k, p)
		}
		last[k] = i
	}
}

// Import adds the records the set lacks and never replaces one it holds;
// importing again adds nothing.
func TestImportNeverOverwrites(t *testing.T) {
	site := pgstatetest.New(t)
	set := site.Open(t, "p").Set("k")
	ctx := t.Context()
	if _, _, err := set.Change(ctx, put("a", "shared")); err != nil {
		t.Fatal(err)
	}
	n, err := set.Import(ctx, []pgstate.Record{rec("a", "file"), rec("b", "file")})
	if err != nil || n != 1 {
		t.Fatalf("import = %d, %v", n, err)
	}
	if n, err := set.Import(ctx, []pgstate.Record{rec("a", "file"), rec("b", "file")}); err != nil || n != 0 {
		t.Fatalf("second import = %d, %v", n, err)
	}
	_, rs, _ := set.Load(ctx)
	if len(rs) != 2 || value(t, rs[0]) != "shared" || value(t, rs[1]) != "file" {
		t.Fatalf("records = %v", rs)
	}
}

// A change that fails writes nothing, and a function's error is returned
// as it is; two records with one id are refused.
func TestFailedChangeWritesNothing(t *testing.T) {
	site := pgstatetest.New(t)
	set := site.Open(t, "p").Set("k")
	ctx := t.Context()
	boom := errors.New("boom")
	if _, _, err := set.Change(ctx, func(rs []pgstate.Record) ([]pgstate.Record, bool, error) { return nil, false, boom }); err != boom {
		t.Fatalf("fn's error = %v", err)
	}
	if _, _, err := set.Change(ctx, func(rs []pgstate.Record) ([]pgstate.Record, bool, error) {
		return []pgstate.Record{rec("a", "1"), rec("a", "2")}, true, nil
	}); err == nil {
		t.Fatal("two records with one id were accepted")
	}
	if _, _, err := set.Change(ctx, func(rs []pgstate.Record) ([]pgstate.Record, bool, error) {
		return []pgstate.Record{{ID: "a", Data: []byte("{not json")}}, true, nil
	}); err == nil {
		t.Fatal("a record that is not JSON was accepted")
	}
	if v, rs, err := set.Load(ctx); err != nil || v != 0 || len(rs) != 0 {
		t.Fatalf("after failed changes: version %d, %v, %v", v, rs, err)
	}
}

// Opening is idempotent (many openings at once create the tables once),
// and tables of a newer schema version are refused.
func TestSchemaCreatedOnceAndNewerRefused(t *testing.T) {
	site := pgstatetest.New(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			st, err := pgstate.Open(context.Background(), site.URL, pgstate.Options{Project: "p", Schema: site.Schema})
			if err == nil {
				st.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	site.Exec(t, "INSERT INTO _S_.state_schema_version (version) VALUES ($1)", pgstate.SchemaVersion+1)
	_, err := pgstate.Open(t.Context(), site.URL, pgstate.Options{Project: "p", Schema: site.Schema})
	if !errors.Is(err, pgstate.ErrSchemaTooNew) {
		t.Fatalf("open of a newer schema = %v", err)
	}
}

// Bad input is refused with the reason, and a URL that cannot be parsed
// is not quoted (it may hold a password).
func TestOpenRefusesBadInput(t *testing.T) {
	ctx := t.Context()
	if _, err := pgstate.Open(ctx, "postgres://x@127.0.0.1:1/db", pgstate.Options{}); err == nil {
		t.Error("no project accepted")
	}
	if _, err := pgstate.Open(ctx, "postgres://x@127.0.0.1:1/db", pgstate.Options{Project: "p", Schema: "Bad;"}); err == nil {
		t.Error("bad schema accepted")
	}
	_, err := pgstate.Open(ctx, "postgres://u:s3cretpw@[bad", pgstate.Options{Project: "p"})
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Errorf("bad URL = %v", err)
	}
}

// With its server out of reach, a set's error names the server by host and
// port, and neither the database user nor the database: it reaches the
// gateway's clients (a 503 while PostgreSQL is down).
func TestUnreachableNamesTheServerOnly(t *testing.T) {
	site := pgstatetest.New(t)
	u, err := url.Parse(site.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	u.Host = p.Addr
	st, err := pgstate.Open(t.Context(), u.String(), pgstate.Options{Project: "demo", Schema: site.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	set := st.Set("consent")
	if _, _, err := set.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	_, _, err = set.Load(t.Context())
	var ue *pgstate.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("a read with the server cut = %v (%T); want an UnreachableError", err, err)
	}
	msg := err.Error()
	if want := "the shared state's PostgreSQL at " + p.Addr + " is unreachable"; !strings.Contains(msg, want) {
		t.Errorf("message %q does not say %q", msg, want)
	}
	db := strings.TrimPrefix(u.Path, "/")
	for _, leak := range []string{"user=", u.User.Username(), "database=" + db} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q names %q", msg, leak)
		}
	}
}
