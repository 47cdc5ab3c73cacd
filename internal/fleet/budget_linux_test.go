//go:build linux

package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// answer is what a client saw of one call through the balancer.
type answer struct {
	status     int    // 200, the gateway's (or HAProxy's) error status, -1 without an answer
	invocation string // X-CortexBuild-Invocation of a 200
	server     string // the replica that answered (headerServer)
	degraded   string // X-CortexBuild-Degraded
	msg        string // the error's text
	start, end time.Time
}

// askTask sends one Messages call with the official SDK to base with
// token, charged to task when it is not "".
func askTask(ctx context.Context, base, token, task string) answer {
	var resp *http.Response
	opts := []option.RequestOption{option.WithBaseURL(base), option.WithAPIKey(token), option.WithMaxRetries(0), option.WithResponseInto(&resp)}
	if task != "" {
		opts = append(opts, option.WithHeader("X-CortexBuild-Task", task))
	}
	a := answer{start: time.Now()}
	c := anthropic.NewClient(opts...)
	_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "claude-sonnet-4-6", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("spend from the fleet"))},
	})
	a.end = time.Now()
	var e *anthropic.Error
	switch {
	case err == nil:
		a.status = 200
	case errors.As(err, &e):
		a.status, a.msg, resp = e.StatusCode, e.Error(), e.Response
	default:
		a.status, a.msg = -1, err.Error()
	}
	if resp != nil {
		a.invocation = resp.Header.Get("X-CortexBuild-Invocation")
		a.server = resp.Header.Get(headerServer)
		a.degraded = resp.Header.Get("X-CortexBuild-Degraded")
	}
	if a.status != 200 {
		a.invocation = ""
	}
	return a
}

// rowsPerInvocation counts the fleet's ledger rows of each invocation
// whose column (task, key_id) is value.
// eachAnsweredOnce waits, up to limit (the live replicas apply their
// journals in the background), until every answered invocation has a
// ledger row where column is value, then checks that none has two, and
// returns the rows per invocation.
func eachAnsweredOnce(t *testing.T, dsn, column, value string, answered map[string]bool, limit time.Duration) map[string]int {
	t.Helper()
	var rows map[string]int
	waitFor(t, limit, "a ledger row for every answered call", func() error {
		rows = rowsPerInvocation(t, dsn, column, value)
		missing := 0
		for id := range answered {
			if rows[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d answered calls have no row", missing, len(answered))
		}
		return nil
	})
	for id, n := range rows {
		if n != 1 {
			t.Errorf("invocation %s has %d ledger rows", id, n)
		}
	}
	return rows
}

func rowsPerInvocation(t *testing.T, dsn, column, value string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT invocation_id, count(*) FROM cortexbuild_ledger.attempts WHERE project = 'fleet' AND "+pgx.Identifier{column}.Sanitize()+" = $1 GROUP BY 1", value)
	if err != nil {
		t.Fatal(err)
	}
	n, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		id string
		n  int
	}, error) {
		var v struct {
			id string
			n  int
		}
		return v, r.Scan(&v.id, &v.n)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, v := range n {
		out[v.id] = v.n
	}
	return out
}

// holdWatch follows the holds on a scope in the ledger's tables from the
// moment a replica died: a hold then present is the dead replica's unless
// a live replica renews it (its expiry moves) or closes it (its row goes)
// before it expires. The dead replica's room is back once each of its
// holds has expired or gone and no settlement in the journal table draws
// on it.
type holdWatch struct {
	conn    *pgx.Conn
	scope   string
	expires map[string]int64 // the holds present at the death, by id: their expiry then
	atDeath int
	dead    map[string]bool // ids known to be the dead replica's
}

func watchHolds(t *testing.T, dsn, scope string) *holdWatch {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	w := &holdWatch{conn: conn, scope: scope, dead: map[string]bool{}}
	w.expires, err = w.holds()
	if err != nil {
		t.Fatal(err)
	}
	w.atDeath = len(w.expires)
	return w
}

func (w *holdWatch) holds() (map[string]int64, error) {
	rows, err := w.conn.Query(context.Background(), "SELECT invocation_id, expires_at FROM cortexbuild_ledger.holds WHERE project = 'fleet' AND scope = $1", w.scope)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var id string
	var exp int64
	_, err = pgx.ForEachRow(rows, []any{&id, &exp}, func() error { out[id] = exp; return nil })
	return out, err
}

// held returns how many of the dead replica's holds (or holds not yet
// known to be a live one's) still count.
func (w *holdWatch) held() (int, error) {
	now := time.Now().UnixNano()
	cur, err := w.holds()
	if err != nil {
		return 0, err
	}
	n := 0
	for id, exp0 := range w.expires {
		exp, present := cur[id]
		switch {
		case !w.dead[id] && present && exp > exp0, !w.dead[id] && !present && now < exp0:
			delete(w.expires, id) // renewed or closed: a live replica's
			continue
		case now >= exp0:
			w.dead[id] = true
		}
		var journaled bool
		if err := w.conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM cortexbuild_ledger.journal WHERE lease = $1 OR invocation_id = $1)", id).Scan(&journaled); err != nil {
			return 0, err
		}
		if journaled || (present && now < exp) {
			n++
		}
	}
	return n, nil
}

// scopeMoney returns scope's spent and limit and the sum of its task's
// rows' costs, in nanodollars.
func scopeMoney(t *testing.T, dsn, scope, task string) (spent, limit, rows int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT spent_nanos, limit_nanos,
		(SELECT COALESCE(sum(cost_nanos), 0) FROM cortexbuild_ledger.attempts WHERE project = 'fleet' AND task = $2)::BIGINT
		FROM cortexbuild_ledger.scopes WHERE project = 'fleet' AND scope = $1`, scope, task).Scan(&spent, &limit, &rows); err != nil {
		t.Fatal(err)
	}
	return spent, limit, rows
}

func dollars(nanos int64) string { return fmt.Sprintf("$%.6f", float64(nanos)/1e9) }

// TestFleetBudgetSurvivesReplicaLoss: 8 clients with the official
// Anthropic SDK call through HAProxy, every call charged to one task
// budget sized to run out under the load; one replica is killed
// (SIGKILL) mid-load and its project directory deleted, and the other
// two go on until the budget refuses. Then, in PostgreSQL: every call a
// client saw answered has exactly one ledger row, no invocation has two,
// the task's spend is within its budget and equal to its rows, and what
// the dead replica held is back in the budget within a hold TTL and a
// fifth of its death (docs/cost-controls.md, the fast path on
// PostgreSQL).
func TestFleetBudgetSurvivesReplicaLoss(t *testing.T) {
	const (
		clients  = 8
		task     = "load"
		scope    = "task:" + task
		killAt   = 500 // answered calls before the kill
		budget   = "0.25"
		deadline = 60 * time.Second
	)
	f := newFleet(t, 3)
	ctx := context.Background()
	token, _ := f.createKey(0, "load")
	f.cli(0, "budget", "set", scope, budget)

	var (
		mu       sync.Mutex
		answers  []answer
		killed   = make(chan struct{})
		killedAt time.Time
		watch    *holdWatch
		once     sync.Once
	)
	kill := func() {
		killedAt = time.Now()
		_ = f.procs[1].Process.Signal(syscall.SIGKILL)
		_, _ = f.procs[1].Process.Wait()
		if err := os.RemoveAll(f.dirs[1]); err != nil {
			t.Error(err)
		}
		watch = watchHolds(t, f.dsn, scope)
		close(killed)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			refused := 0
			for refused < 3 && time.Since(start) < deadline {
				a := askTask(ctx, f.lb, token, task)
				mu.Lock()
				answers = append(answers, a)
				n := 0
				for _, a := range answers {
					if a.status == 200 {
						n++
					}
				}
				mu.Unlock()
				if n >= killAt {
					once.Do(kill)
				}
				select {
				case <-killed:
					if a.status == 402 {
						refused++
					}
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("the budget ran out before %d calls were answered: %v", killAt, codesOf(answers))
	}
	codes := map[int]int{}
	answered := map[string]bool{}
	after := map[string]int{} // answered after the kill, by replica
	for _, a := range answers {
		codes[a.status]++
		if a.status == 200 {
			if answered[a.invocation] {
				t.Errorf("invocation id %s answered twice", a.invocation)
			}
			answered[a.invocation] = true
			if a.start.After(killedAt) {
				after[a.server]++
			}
		}
	}
	t.Logf("%d calls through HAProxy in %v: %v; answered after the kill: %v", len(answers), time.Since(start).Round(time.Millisecond), codes, after)
	if after["r1"] != 0 || after["r0"] == 0 || after["r2"] == 0 {
		t.Errorf("answers after the kill by replica: %v; want r0 and r2 answering, r1 not", after)
	}
	if codes[402] == 0 {
		t.Errorf("the budget never refused a call: %v", codes)
	}

	// What the dead replica held comes back within a TTL and a fifth.
	bound := ledger.DefaultHoldTTL + ledger.DefaultHoldTTL/5
	var back time.Duration
	waitFor(t, bound+5*time.Second, "the dead replica's holds back in the budget", func() error {
		n, err := watch.held()
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d of its holds still count", n)
		}
		back = time.Since(killedAt)
		return nil
	})
	t.Logf("holds on %s at the kill: %d, of which the dead replica's: %d; all of its room back %v after the kill (bound %v)",
		scope, watch.atDeath, len(watch.dead), back.Round(time.Millisecond), bound)
	if back > bound {
		t.Errorf("the dead replica's room came back %v after its death; the bound is %v", back, bound)
	}

	// Every answered call has exactly one row; no invocation has two. The
	// live replicas apply their journals in the background: bounded wait.
	rows := eachAnsweredOnce(t, f.dsn, "task", task, answered, 10*time.Second)
	total := 0
	for _, n := range rows {
		total += n
	}
	spent, limit, sum := scopeMoney(t, f.dsn, scope, task)
	t.Logf("%d answered calls, %d ledger rows (%d invocations); %s spent of %s, rows sum to %s",
		len(answered), total, len(rows), dollars(spent), dollars(limit), dollars(sum))
	if spent > limit {
		t.Errorf("%s spent over the budget of %s", dollars(spent), dollars(limit))
	}
	if spent != sum {
		t.Errorf("%s spent, but its rows sum to %s", dollars(spent), dollars(sum))
	}
}

// codesOf counts answers by status.
func codesOf(answers []answer) map[int]int {
	codes := map[int]int{}
	for _, a := range answers {
		codes[a.status]++
	}
	return codes
}
