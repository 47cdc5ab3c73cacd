package ledgertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// runProjectSiteTests checks that projects sharing one site (one database
// file, one PostgreSQL schema) never see each other's rows, and that the
// rows of a site written before projects existed are adopted by the first
// project that opens it; run by [RunSiteTests].
func runProjectSiteTests(t *testing.T, newSite SiteMaker) {
	t.Run("TwoProjectsShareASiteWithoutBleeding", func(t *testing.T) {
		testTwoProjects(t, newSite(t))
	})
	t.Run("UpgradeFromVersion3AdoptsRowsForTheFirstProject", func(t *testing.T) {
		testAdoption(t, newSite(t))
	})
	t.Run("AnOperatorsLimitWinsOverTheDefaultUntilRemoved", func(t *testing.T) {
		testDefaultBudget(t, newSite(t))
	})
}

func testDefaultBudget(t *testing.T, site Site) {
	ctx := t.Context()
	s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
	month := ledger.MonthScope(Epoch)
	limit := func() provider.Money {
		t.Helper()
		b, err := s.Budget(ctx, month)
		if err != nil {
			t.Fatal(err)
		}
		return b.Limit
	}
	if set, err := s.SetDefaultBudget(ctx, month, M("100")); err != nil || !set || limit() != M("100") {
		t.Fatalf("a default on a new scope: set %v, %v, limit $%s", set, err, limit())
	}
	if set, err := s.SetDefaultBudget(ctx, month, M("120")); err != nil || !set || limit() != M("120") {
		t.Fatalf("a default over a default: set %v, %v, limit $%s", set, err, limit())
	}
	if err := s.SetBudget(ctx, month, M("250")); err != nil {
		t.Fatal(err)
	}
	if set, err := s.SetDefaultBudget(ctx, month, M("100")); err != nil || set || limit() != M("250") {
		t.Errorf("a default over an operator's limit: set %v, %v, limit $%s; want the operator's $250 kept", set, err, limit())
	}
	// Reaching the operator's limit pauses as usual, and a default does not
	// lift the pause either.
	if err := s.Settle(ctx, ledger.Settlement{InvocationID: "i-1", Cost: M("250"), Scopes: []ledger.Scope{month}}); err != nil {
		t.Fatal(err)
	}
	if set, err := s.SetDefaultBudget(ctx, month, M("1000")); err != nil || set {
		t.Errorf("a default over an operator's reached limit: set %v, %v", set, err)
	}
	if _, paused, _ := s.Paused(ctx, month); !paused {
		t.Errorf("a default lifted the pause of an operator's limit")
	}
	if removed, err := s.RemoveDefaultBudget(ctx, month); err != nil || removed || limit() != M("250") {
		t.Errorf("RemoveDefaultBudget of an operator's limit: removed %v, %v, limit $%s; want the operator's $250 kept", removed, err, limit())
	}
	if err := s.RemoveBudget(ctx, month); err != nil {
		t.Fatal(err)
	}
	if set, err := s.SetDefaultBudget(ctx, month, M("1000")); err != nil || !set || limit() != M("1000") {
		t.Errorf("a default after RemoveBudget: set %v, %v, limit $%s", set, err, limit())
	}
	if removed, err := s.RemoveDefaultBudget(ctx, month); err != nil || !removed {
		t.Errorf("RemoveDefaultBudget of a default: removed %v, %v", removed, err)
	}
	if b, err := s.Budget(ctx, month); err != nil || b.Limited {
		t.Errorf("after RemoveDefaultBudget of a default: %+v, %v; want no limit", b, err)
	}
	if removed, err := s.RemoveDefaultBudget(ctx, month); err != nil || removed {
		t.Errorf("RemoveDefaultBudget of no limit: removed %v, %v; want nothing removed", removed, err)
	}
	if _, err := s.SetDefaultBudget(ctx, month, -1); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("a negative default: %v", err)
	}
}

func testTwoProjects(t *testing.T, site Site) {
	ctx := t.Context()
	clock := NewClock(Epoch)
	a := openSite(t, site, ledger.WithClock(clock.Now), ledger.WithProject("alpha-1a2b3c4d"))
	b := openSite(t, site, ledger.WithClock(clock.Now), ledger.WithProject("alpha-5e6f7a8b"))
	month := ledger.MonthScope(Epoch)
	task := ledger.TaskScope("t1")
	scopes := []ledger.Scope{task, month}

	// Budgets: the same scopes, different limits.
	for _, x := range []struct {
		s     ledger.Store
		limit string
	}{{a, "10"}, {b, "3"}} {
		for _, sc := range scopes {
			if err := x.s.SetBudget(ctx, sc, M(x.limit)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Holds of one project do not count against the other.
	if err := a.Reserve(ctx, ledger.Reservation{InvocationID: "a-1", Amount: M("8"), Scopes: scopes, ExpiresAt: Epoch.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, ledger.Reservation{InvocationID: "b-1", Amount: M("2.5"), Scopes: scopes, ExpiresAt: Epoch.Add(time.Hour)}); err != nil {
		t.Fatalf("project b refused because of project a's hold: %v", err)
	}
	for _, x := range []struct {
		s          ledger.Store
		limit, hld string
	}{{a, "10", "8"}, {b, "3", "2.5"}} {
		for _, sc := range scopes {
			got, err := x.s.Budget(ctx, sc)
			want := ledger.Budget{Scope: sc, Limited: true, Limit: M(x.limit), Held: M(x.hld)}
			if err != nil || got != want {
				t.Errorf("Budget(%s) = %+v, %v; want %+v", sc, got, err, want)
			}
		}
	}
	// Spend: a's settlement reaches b's limit but is charged to a only.
	row := func(id string) ledger.AttemptRow {
		return ledger.AttemptRow{InvocationID: id, Task: "t1", Agent: "coder", Provider: "p", Model: "m", Outcome: "ok", Cost: M("4")}
	}
	if err := a.Settle(ctx, ledger.Settlement{InvocationID: "a-1", Cost: M("4"), Scopes: scopes, Entry: row("a-1")}); err != nil {
		t.Fatal(err)
	}
	if bb, err := b.Budget(ctx, month); err != nil || bb.Spent != 0 || bb.Paused {
		t.Errorf("project b's month after project a spent $4: %+v, %v", bb, err)
	}
	if ab, err := a.Budget(ctx, month); err != nil || ab.Spent != M("4") || ab.Held != 0 {
		t.Errorf("project a's month after settling: %+v, %v", ab, err)
	}
	if err := b.Settle(ctx, ledger.Settlement{InvocationID: "b-1", Cost: M("3"), Scopes: scopes, Entry: row("b-1")}); err != nil {
		t.Fatal(err)
	}
	// b reached its limit and is paused; a is not.
	if _, paused, err := b.Paused(ctx, month); err != nil || !paused {
		t.Errorf("project b's month not paused at its limit: %v %v", paused, err)
	}
	if _, paused, err := a.Paused(ctx, month); err != nil || paused {
		t.Errorf("project a's month paused by project b's spend: %v %v", paused, err)
	}
	if err := a.Reserve(ctx, ledger.Reservation{InvocationID: "a-2", Amount: M("1"), Scopes: scopes, ExpiresAt: Epoch.Add(time.Hour)}); err != nil {
		t.Errorf("project a refused by project b's pause: %v", err)
	}
	if err := a.Release(ctx, "a-2"); err != nil {
		t.Fatal(err)
	}
	// A manual pause and its resume stay in their project.
	if err := a.Pause(ctx, task, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctx, task); err != nil {
		t.Fatal(err)
	}
	if reason, paused, err := a.Paused(ctx, task); err != nil || !paused || reason != "stop" {
		t.Errorf("project a's pause after project b resumed the same scope: %q %v %v", reason, paused, err)
	}
	if err := b.SetBudget(ctx, month, M("100")); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveBudget(ctx, task); err != nil {
		t.Fatal(err)
	}
	if ab, err := a.Budget(ctx, task); err != nil || !ab.Limited || ab.Limit != M("10") {
		t.Errorf("project a's task budget after project b removed its own: %+v, %v", ab, err)
	}
	if ab, err := a.Budgets(ctx); err != nil || len(ab) != 2 || ab[0].Limit != M("10") || ab[1].Limit != M("10") {
		t.Errorf("project a's Budgets = %+v, %v", ab, err)
	}
	if bb, err := b.Budgets(ctx); err != nil || len(bb) != 1 || bb[0].Scope != month || bb[0].Limit != M("100") {
		t.Errorf("project b's Budgets = %+v, %v", bb, err)
	}
	// Ledger rows and reports.
	for _, x := range []struct {
		s    ledger.Store
		id   string
		cost string
	}{{a, "a-1", "4"}, {b, "b-1", "4"}} {
		rows, err := x.s.Attempts(ctx, ledger.Filter{Task: "t1"})
		if err != nil || len(rows) != 1 || rows[0].InvocationID != x.id {
			t.Errorf("Attempts of task t1 = %+v, %v; want only %s", rows, err, x.id)
		}
		rep, err := x.s.Spend(ctx, ledger.Filter{By: ledger.ByTask})
		if err != nil || rep.Total.Attempts != 1 || rep.Total.Cost != M(x.cost) || len(rep.Groups) != 1 {
			t.Errorf("Spend of %s's project = %+v, %v", x.id, rep, err)
		}
	}
	// Tasks: the same id, separate records and trails.
	if _, err := a.StartTask(ctx, "t1", "high"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Task(ctx, "t1"); !errors.Is(err, ledger.ErrNoTask) {
		t.Errorf("project b sees project a's task: %v", err)
	}
	if _, err := b.StartTask(ctx, "t1", "low"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTaskEvent(ctx, ledger.TaskEvent{Task: "t1", Kind: ledger.EventPlan, Detail: "b's plan"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CompleteTask(ctx, "t1", "ship", 0); err != nil {
		t.Errorf("project a's completion counted project b's events: %v", err)
	}
	if bt, err := b.Task(ctx, "t1"); err != nil || bt.State != ledger.TaskOpen || bt.Risk != "low" || len(bt.Events) != 1 {
		t.Errorf("project b's task after project a completed its own: %+v, %v", bt, err)
	}
	if at, err := a.Task(ctx, "t1"); err != nil || at.State != ledger.TaskCompleted || at.Risk != "high" || len(at.Events) != 1 {
		t.Errorf("project a's task = %+v, %v", at, err)
	}
}

func testAdoption(t *testing.T, site Site) {
	needOlderVersions(t, site)
	ctx := t.Context()
	if err := site.CreateAt(ctx, 3); err != nil {
		t.Fatal(err)
	}
	at := Epoch.Add(-time.Hour).UnixNano()
	for _, q := range []string{
		`INSERT INTO _S_.scopes (scope, limit_nanos, spent_nanos, paused, pause_kind, pause_reason, updated_at)
			VALUES ('task:old', 10000000000, 2500000000, true, 'manual', 'held for review', 0)`,
		`INSERT INTO _S_.scopes (scope, limit_nanos, spent_nanos, paused, pause_kind, pause_reason, updated_at)
			VALUES ('month:2026-05', 50000000000, 2500000000, false, '', '', 0)`,
		`INSERT INTO _S_.settlements (invocation_id, cost_nanos, reserved_nanos, settled_at) VALUES ('old-1', 2500000000, 3000000000, 0)`,
		fmt.Sprintf(`INSERT INTO _S_.attempts (invocation_id, at, task, agent, provider, model, outcome,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanos, cache_hit, saving_nanos, estimated)
			VALUES ('old-1', %d, 'old', 'coder', 'p', 'm', 'ok', 10, 20, 0, 0, 2500000000, false, 0, false)`, at),
		fmt.Sprintf(`INSERT INTO _S_.tasks (id, risk, state, created_at) VALUES ('old', 'high', 'open', %d)`, at),
		fmt.Sprintf(`INSERT INTO _S_.task_events (task, at, kind, invocation_id, agent, provider, model, reviewer, detail)
			VALUES ('old', %d, 'plan', 'old-1', 'coder', 'p', 'm', '', 'the old plan')`, at),
	} {
		if err := site.Exec(ctx, q); err != nil {
			t.Fatalf("writing the version-3 rows: %v\n%s", err, q)
		}
	}
	// Holds of a live reservation (PostgreSQL keeps the reservation in its
	// own table).
	exp := Epoch.Add(time.Hour).UnixNano()
	if err := site.Exec(ctx, fmt.Sprintf(`INSERT INTO _S_.reservations (invocation_id, amount_nanos, created_at, expires_at) VALUES ('old-2', 1000000000, 0, %d)`, exp)); err == nil {
		for _, sc := range []string{"task:old", "month:2026-05"} {
			if err := site.Exec(ctx, fmt.Sprintf(`INSERT INTO _S_.holds (invocation_id, scope, amount_nanos, expires_at) VALUES ('old-2', '%s', 1000000000, %d)`, sc, exp)); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		for _, sc := range []string{"task:old", "month:2026-05"} {
			if err := site.Exec(ctx, fmt.Sprintf(`INSERT INTO _S_.holds (invocation_id, scope, amount_nanos, created_at, expires_at) VALUES ('old-2', '%s', 1000000000, 0, %d)`, sc, exp)); err != nil {
				t.Fatal(err)
			}
		}
	}

	clock := NewClock(Epoch)
	owner := openSite(t, site, ledger.WithClock(clock.Now), ledger.WithProject("owner"))
	other := openSite(t, site, ledger.WithClock(clock.Now), ledger.WithProject("other"))
	wantVersions(t, site)
	// Fails (NULL in a NOT NULL column) unless the adoption is recorded.
	if err := site.Exec(ctx, `INSERT INTO _S_.adoption (project, schema_version) SELECT 'check', NULL
		WHERE NOT EXISTS (SELECT 1 FROM _S_.adoption WHERE project = 'owner' AND schema_version = 4)`); err != nil {
		t.Errorf("the adoption by the first project is not recorded: %v", err)
	}
	check := func(s ledger.Store, mine bool) {
		t.Helper()
		wantTask := ledger.Budget{Scope: "task:old"}
		wantMonth := ledger.Budget{Scope: "month:2026-05"}
		if mine {
			wantTask = ledger.Budget{Scope: "task:old", Limited: true, Limit: M("10"), Spent: M("2.5"), Held: M("1"), Paused: true, PauseReason: "held for review"}
			wantMonth = ledger.Budget{Scope: "month:2026-05", Limited: true, Limit: M("50"), Spent: M("2.5"), Held: M("1")}
		}
		for _, want := range []ledger.Budget{wantTask, wantMonth} {
			if got, err := s.Budget(ctx, want.Scope); err != nil || got != want {
				t.Errorf("Budget(%s) = %+v, %v; want %+v", want.Scope, got, err, want)
			}
		}
		rows, err := s.Attempts(ctx, ledger.Filter{})
		if err != nil || len(rows) != map[bool]int{true: 1, false: 0}[mine] {
			t.Errorf("Attempts = %+v, %v", rows, err)
		}
		tk, err := s.Task(ctx, "old")
		switch {
		case mine && (err != nil || tk.Risk != "high" || len(tk.Events) != 1 || tk.Events[0].Detail != "the old plan"):
			t.Errorf("the old task = %+v, %v", tk, err)
		case !mine && !errors.Is(err, ledger.ErrNoTask):
			t.Errorf("another project sees the old task: %+v, %v", tk, err)
		}
	}
	check(owner, true)
	check(other, false)
	// The adopted rows go on working: the old reservation settles, the old
	// task completes.
	if err := owner.Settle(ctx, ledger.Settlement{InvocationID: "old-2", Cost: M("0.5"), Scopes: []ledger.Scope{"task:old"}}); err != nil {
		t.Fatal(err)
	}
	if b, err := owner.Budget(ctx, "month:2026-05"); err != nil || b.Spent != M("3") || b.Held != 0 {
		t.Errorf("the old month after settling the old reservation: %+v, %v", b, err)
	}
	if _, err := owner.CompleteTask(ctx, "old", "ship", 1); err != nil {
		t.Errorf("completing the old task: %v", err)
	}
}
