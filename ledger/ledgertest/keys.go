package ledgertest

import (
	"errors"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// The budgets of virtual keys: a key's scope is one more scope of a
// reservation, refused, charged and paused like the others.
var keyTests = []struct {
	name string
	run  func(*env)
}{
	{"KeyScopeIsABudget", testKeyScope},
	{"KeyScopesAreValidated", testKeyScopeInvalid},
	{"KeyPeriodsAreSeparateBudgets", testKeyPeriods},
	{"ConcurrentReservationsAgainstAKeyBudget", testConcurrentKey},
	{"SpendByKey", testSpendByKey},
}

func keyScope(e *env, id, period string, t time.Time) ledger.Scope {
	e.t.Helper()
	sc, err := ledger.KeyScope(id, period, t)
	if err != nil {
		e.t.Fatalf("KeyScope(%s, %s): %v", id, period, err)
	}
	return sc
}

func testKeyScope(e *env) {
	key := keyScope(e, "0123abcd", ledger.PeriodMonth, Epoch)
	if key != "key:0123abcd@2026-05" || key.Key() != "0123abcd" || key.Period() != "2026-05" || key.Kind() != ledger.KindKey {
		e.t.Fatalf("KeyScope = %q (key %q, period %q)", key, key.Key(), key.Period())
	}
	// The key's limit is a default, as the orchestrator sets it: an
	// operator's 'budget set' on the scope would win.
	if _, err := e.s.SetDefaultBudget(e.ctx, key, M("1")); err != nil {
		e.t.Fatal(err)
	}
	e.budget(month, "100")
	e.mustReserve("inv-1", "0.6", taskA, month, key)
	// The key refuses what the month and the task would admit: all or
	// nothing, so neither holds anything for the refused call.
	err := e.reserve("inv-2", "0.5", taskA, month, key)
	wantBudgetError(e.t, err, ledger.BudgetError{Scope: key, Limit: M("1"), Spent: M("0"), Held: M("0.6"), Asked: M("0.5")})
	e.want(month, "0", "0.6", false)
	e.want(taskA, "0", "0.6", false)
	// Reaching the key's limit pauses the key's scope and says whose it is.
	e.mustSettle("inv-1", "1", taskA, month, key)
	b := e.want(key, "1", "0", true)
	if !strings.Contains(b.PauseReason, "API key 0123abcd") || !strings.Contains(b.PauseReason, "2026-05") {
		e.t.Errorf("pause reason %q does not name the key and its period", b.PauseReason)
	}
	e.want(month, "1", "0", false)
	// Another key's calls are not limited by it.
	other := keyScope(e, "0123abce", ledger.PeriodMonth, Epoch)
	e.mustReserve("inv-3", "5", month, other)
	// Raising the key's budget lifts its pause, as for any budget.
	if _, err := e.s.SetDefaultBudget(e.ctx, key, M("2")); err != nil {
		e.t.Fatal(err)
	}
	e.want(key, "1", "0", false)
}

func testKeyScopeInvalid(e *env) {
	for _, sc := range []ledger.Scope{"key:", "key:ABC", "key:a b", "key:a@", "key:a@2026-13", "key:a@2026-05-32", "key:a@2026", "key:a@2026-05@2026-06", "key:" + ledger.Scope(strings.Repeat("a", 65))} {
		if err := sc.Validate(); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("Validate(%q) = %v; want ErrInvalid", sc, err)
		}
		if err := e.reserve("x", "1", sc); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("Reserve on %q: %v; want ErrInvalid", sc, err)
		}
	}
	for _, sc := range []ledger.Scope{"key:a", "key:0123abcd@2026-05", "key:k_1-2@2026-05-31"} {
		if err := sc.Validate(); err != nil {
			e.t.Errorf("Validate(%q) = %v", sc, err)
		}
	}
	if _, err := ledger.KeyScope("k1", "week", Epoch); !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "day, month or total") {
		e.t.Errorf("KeyScope with period week: %v", err)
	}
	if _, err := ledger.KeyScope("k@1", ledger.PeriodTotal, Epoch); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("KeyScope with an id holding '@': %v", err)
	}
}

func testKeyPeriods(e *env) {
	day1 := keyScope(e, "k1", ledger.PeriodDay, Epoch)
	day2 := keyScope(e, "k1", ledger.PeriodDay, Epoch.AddDate(0, 0, 1))
	total := keyScope(e, "k1", ledger.PeriodTotal, Epoch)
	if day1 != "key:k1@2026-05-14" || day2 != "key:k1@2026-05-15" || total != "key:k1" || total.Period() != "" {
		e.t.Fatalf("scopes %q %q %q", day1, day2, total)
	}
	for _, sc := range []ledger.Scope{day1, day2, total} {
		e.budget(sc, "1")
	}
	e.mustReserve("d1", "1", day1)
	if err := e.reserve("d1b", "0.1", day1); !errors.Is(err, ledger.ErrOverBudget) {
		e.t.Errorf("a second call on a spent day: %v; want over budget", err)
	}
	e.mustReserve("d2", "1", day2) // the next day is a budget of its own
	e.mustReserve("t1", "1", total)
	e.want(day1, "0", "1", false)
	e.want(day2, "0", "1", false)
	e.want(total, "0", "1", false)
}

// Many goroutines reserve against one key's budget, from several tasks
// and with the month: the key binds, and its spend never passes its limit.
func testConcurrentKey(e *env) {
	limit, estimate := M("2"), M("0.15")
	key := keyScope(e, "k1", ledger.PeriodMonth, Epoch)
	e.budget(key, limit.String())
	e.budget(month, "100")
	outs, err := ReserveAll(e.ctx, estimate, e.clock.Now().Add(time.Hour),
		Batch{Store: e.s, Prefix: "a", N: 24, Scopes: []ledger.Scope{month, taskA, key}},
		Batch{Store: e.s, Prefix: "b", N: 24, Scopes: []ledger.Scope{key, taskB, month}})
	if err != nil {
		e.t.Fatal(err)
	}
	admitted := outs[0].Admitted + outs[1].Admitted
	if want := int(limit / estimate); admitted != want {
		e.t.Errorf("admitted %d; want %d", admitted, want)
	}
	b := e.want(key, (outs[0].Spent + outs[1].Spent).String(), "0", false)
	if b.Spent > limit {
		e.t.Errorf("spent $%s of a $%s key budget", b.Spent, limit)
	}
}

func testSpendByKey(e *env) {
	for i, r := range []struct{ key, cost string }{{"k1", "1"}, {"k2", "0.5"}, {"k1", "0.25"}, {"", "2"}} {
		row := ledger.AttemptRow{InvocationID: "inv-" + string(rune('a'+i)), Time: Epoch.Add(time.Duration(i) * time.Second),
			Key: r.key, Provider: "sim", Model: "m1", Outcome: "ok", Cost: M(r.cost)}
		if err := e.s.RecordAttempt(e.ctx, row); err != nil {
			e.t.Fatal(err)
		}
	}
	rows := e.attempts(ledger.Filter{Key: "k1"})
	if len(rows) != 2 || rows[0].Key != "k1" || rows[1].Key != "k1" || rows[0].Cost != M("1") {
		e.t.Errorf("rows of key k1 = %+v", rows)
	}
	if rep := e.spend(ledger.Filter{Key: "k2"}); rep.Total.Cost != M("0.5") || rep.Total.Attempts != 1 {
		e.t.Errorf("spend of key k2 = %+v", rep.Total)
	}
	rep := e.spend(ledger.Filter{By: ledger.ByKey})
	var got []string
	for _, g := range rep.Groups {
		got = append(got, g.Key+"="+g.Cost.String())
	}
	if strings.Join(got, " ") != "=2.00 k1=1.25 k2=0.50" {
		e.t.Errorf("spend by key = %v; want =2.00 k1=1.25 k2=0.50", got)
	}
}
