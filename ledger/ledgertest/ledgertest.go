// Package ledgertest is the storage conformance suite every [ledger.Store]
// passes, plus the tests that need one store location opened several times
// or by several processes, and a benchmark of reserve+settle pairs.
//
// A back end's test calls [RunStoreTests] with a function that opens a
// fresh, empty store (closed and removed by the test's cleanup), and
// [RunSiteTests] and [RunProcessTests] with a function that makes a fresh
// [Site]. Its test package must also define
//
//	func TestHelperProcess(t *testing.T) { ledgertest.HelperProcess(t, openSite) }
//
// so that the process tests can re-execute the test binary as helpers.
package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Opener opens a fresh, empty store with the given options and arranges for
// it to be closed (and its data removed) when t ends.
type Opener func(t *testing.T, opts ...ledger.Option) ledger.Store

// Clock is a settable clock for [ledger.WithClock] and [ledger.FastClock]
// (with its timers for [ledger.FastAfterFunc]); it never moves by itself.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	timers []*clockTimer
}

type clockTimer struct {
	at time.Time
	fn func()
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d, running (in this goroutine, in
// order) the functions of the timers that are then due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	var due []*clockTimer
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(c.t) {
			due = append(due, tm)
		} else {
			keep = append(keep, tm)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *clockTimer) int { return a.at.Compare(b.at) })
	for _, tm := range due {
		tm.fn()
	}
}

// AfterFunc runs fn once the clock has been advanced by d or more, and
// returns what stops it (reporting whether it stopped it before it ran).
func (c *Clock) AfterFunc(d time.Duration, fn func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &clockTimer{at: c.t.Add(d), fn: fn}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == tm {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Epoch is the time the suite's clocks start at: mid-May 2026, UTC.
var Epoch = time.Date(2026, time.May, 14, 9, 30, 0, 123456789, time.UTC)

// M parses a dollar amount; it is provider.MustMoney, short for tables.
func M(s string) provider.Money { return provider.MustMoney(s) }

var (
	taskA = ledger.TaskScope("task-a")
	taskB = ledger.TaskScope("task-b")
	month = ledger.MonthScope(Epoch)
)

// env is what every check of the suite gets: a fresh store on a settable
// clock.
type env struct {
	t     *testing.T
	ctx   context.Context
	s     ledger.Store
	clock *Clock
}

func newEnv(t *testing.T, open Opener) *env {
	t.Helper()
	c := NewClock(Epoch)
	return &env{t: t, ctx: t.Context(), s: open(t, ledger.WithClock(c.Now)), clock: c}
}

func (e *env) budget(sc ledger.Scope, limit string) {
	e.t.Helper()
	if err := e.s.SetBudget(e.ctx, sc, M(limit)); err != nil {
		e.t.Fatalf("SetBudget(%s, %s): %v", sc, limit, err)
	}
}

// reservation builds a reservation expiring in an hour.
func (e *env) reservation(id, amount string, scopes ...ledger.Scope) ledger.Reservation {
	return ledger.Reservation{InvocationID: id, Amount: M(amount), Scopes: scopes, ExpiresAt: e.clock.Now().Add(time.Hour)}
}

func (e *env) reserve(id, amount string, scopes ...ledger.Scope) error {
	return e.s.Reserve(e.ctx, e.reservation(id, amount, scopes...))
}

func (e *env) mustReserve(id, amount string, scopes ...ledger.Scope) {
	e.t.Helper()
	if err := e.reserve(id, amount, scopes...); err != nil {
		e.t.Fatalf("Reserve(%s, %s, %v): %v", id, amount, scopes, err)
	}
}

func (e *env) settlement(id, cost string, scopes ...ledger.Scope) ledger.Settlement {
	return ledger.Settlement{InvocationID: id, Cost: M(cost), Scopes: scopes, Entry: ledger.AttemptRow{
		Task: "task-a", Agent: "coder", Provider: "sim", Model: "m1", Outcome: "ok",
		InputTokens: 100, OutputTokens: 10, Cost: M(cost),
	}}
}

func (e *env) settle(id, cost string, scopes ...ledger.Scope) error {
	return e.s.Settle(e.ctx, e.settlement(id, cost, scopes...))
}

func (e *env) mustSettle(id, cost string, scopes ...ledger.Scope) {
	e.t.Helper()
	if err := e.settle(id, cost, scopes...); err != nil {
		e.t.Fatalf("Settle(%s, %s): %v", id, cost, err)
	}
}

// want checks a scope's spent, held and pause.
func (e *env) want(sc ledger.Scope, spent, held string, paused bool) ledger.Budget {
	e.t.Helper()
	b, err := e.s.Budget(e.ctx, sc)
	if err != nil {
		e.t.Fatalf("Budget(%s): %v", sc, err)
	}
	if b.Scope != sc || b.Spent != M(spent) || b.Held != M(held) || b.Paused != paused {
		e.t.Errorf("Budget(%s) = spent $%s held $%s paused %v (%q); want spent $%s held $%s paused %v",
			sc, b.Spent, b.Held, b.Paused, b.PauseReason, spent, held, paused)
	}
	return b
}

func wantBudgetError(t *testing.T, err error, want ledger.BudgetError) {
	t.Helper()
	var be *ledger.BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ledger.ErrOverBudget) {
		t.Fatalf("err = %v; want a *BudgetError for %s", err, want.Scope)
	}
	if *be != want {
		t.Errorf("BudgetError = %+v; want %+v", *be, want)
	}
}

// RunStoreTests runs the conformance suite against stores made by open.
func RunStoreTests(t *testing.T, open Opener) {
	tests := []struct {
		name string
		run  func(*env)
	}{
		{"ReserveHoldsAgainstEveryScope", testReserveHolds},
		{"ReserveRefusedOverBudget", testReserveOverBudget},
		{"ReserveUpToTheLimitExactly", testReserveExactLimit},
		{"ReserveAllOrNothing", testAllOrNothing},
		{"ScopeWithoutBudgetNeverRefuses", testUnbudgeted},
		{"ReserveSameInvocationTwice", testDuplicateReserve},
		{"InvalidArguments", testInvalid},
		{"SettleBelowAndAboveEstimate", testSettleActual},
		{"SettleIsIdempotent", testSettleIdempotent},
		{"SettleWithoutReservation", testSettleWithoutReservation},
		{"SettleChargesTheReservedScopes", testSettleReservedScopes},
		{"ReleaseDropsHold", testRelease},
		{"ExpireReservations", testExpire},
		{"ReserveIgnoresExpiredHolds", testReserveIgnoresExpired},
		{"SettleAfterExpiry", testSettleAfterExpiry},
		{"PauseOnReachingTaskBudget", testPauseOnTaskBudget},
		{"PauseOnReachingMonthBudget", testPauseOnMonthBudget},
		{"ManualPauseAndResume", testManualPause},
		{"PauseForBudgetLiftedByRaising", testPauseForBudget},
		{"RemoveBudget", testRemoveBudget},
		{"BudgetsListsLimitedScopes", testBudgets},
		{"LedgerRowsExact", testLedgerRows},
		{"SpendTotalsExact", testSpendTotals},
		{"SpendByMonthInTimeZone", testSpendByMonth},
		{"SchemaVersion", testSchemaVersion},
		{"ClosedStoreIsUnavailable", testClosed},
		{"ConcurrentReservationsNeverOverspend", testConcurrentCap},
		{"ConcurrentReservationsAcrossScopes", testConcurrentScopes},
		{"ConcurrentSettleOfOneInvocation", testConcurrentSettle},
		{"ConcurrentReserveOfOneInvocation", testConcurrentDuplicate},
	}
	for _, tc := range slices.Concat(tests, leaseTests, keyTests, alertTests, sessionTests) {
		t.Run(tc.name, func(t *testing.T) { tc.run(newEnv(t, open)) })
	}
	runTaskTests(t, open)
}

func testReserveHolds(e *env) {
	e.budget(taskA, "10")
	e.budget(month, "100")
	e.mustReserve("inv-1", "3.25", taskA, month)
	e.want(taskA, "0", "3.25", false)
	e.want(month, "0", "3.25", false)
	e.mustReserve("inv-2", "0.000000001", taskA, month, taskA) // duplicates ignored
	e.want(taskA, "0", "3.250000001", false)
	b := e.want(month, "0", "3.250000001", false)
	if !b.Limited || b.Limit != M("100") {
		e.t.Errorf("month budget = %+v; want limit 100", b)
	}
	if r, ok := b.Remaining(); !ok || r != M("96.749999999") {
		e.t.Errorf("Remaining = %s, %v; want 96.749999999", r, ok)
	}
}

func testReserveOverBudget(e *env) {
	e.budget(taskA, "10")
	e.mustReserve("inv-1", "4", taskA)
	e.mustSettle("inv-1", "3", taskA)
	e.mustReserve("inv-2", "5", taskA)
	err := e.reserve("inv-3", "2.000000001", taskA)
	wantBudgetError(e.t, err, ledger.BudgetError{Scope: taskA, Limit: M("10"), Spent: M("3"), Held: M("5"), Asked: M("2.000000001")})
	if !strings.Contains(err.Error(), "task:task-a") || !strings.Contains(err.Error(), "$2.000000001") {
		e.t.Errorf("error text %q lacks the scope or the amount", err)
	}
	e.want(taskA, "3", "5", false)
	// The refused id was not consumed.
	if err := e.reserve("inv-3", "2", taskA); err != nil {
		e.t.Errorf("Reserve of what fits after a refusal: %v", err)
	}
}

func testReserveExactLimit(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("inv-1", "0.4", taskA)
	e.mustReserve("inv-2", "0.6", taskA)
	e.want(taskA, "0", "1", false)
	wantBudgetError(e.t, e.reserve("inv-3", "0.000000001", taskA),
		ledger.BudgetError{Scope: taskA, Limit: M("1"), Spent: 0, Held: M("1"), Asked: M("0.000000001")})
	if err := e.reserve("inv-4", "0", taskA); err != nil {
		e.t.Errorf("a zero reservation at the limit: %v", err)
	}
}

func testAllOrNothing(e *env) {
	e.budget(taskA, "10")
	e.budget(month, "5")
	e.mustReserve("other", "4", taskB, month)
	err := e.reserve("inv-1", "2", taskA, month)
	wantBudgetError(e.t, err, ledger.BudgetError{Scope: month, Limit: M("5"), Spent: 0, Held: M("4"), Asked: M("2")})
	e.want(taskA, "0", "0", false)
	e.want(month, "0", "4", false)
	e.want(taskB, "0", "4", false)
	// The other way round: the task refuses, the month holds nothing.
	e.budget(taskA, "0.5")
	wantBudgetError(e.t, e.reserve("inv-2", "1", taskA, month),
		ledger.BudgetError{Scope: taskA, Limit: M("0.5"), Spent: 0, Held: 0, Asked: M("1")})
	e.want(month, "0", "4", false)
}

func testUnbudgeted(e *env) {
	e.mustReserve("inv-1", "1000000", taskA)
	e.mustSettle("inv-1", "999999.999999999", taskA)
	e.mustReserve("inv-2", "5000000", taskA)
	b := e.want(taskA, "999999.999999999", "5000000", false)
	if b.Limited {
		e.t.Errorf("a scope without a budget reports a limit: %+v", b)
	}
	if _, ok := b.Remaining(); ok {
		e.t.Error("Remaining of an unlimited scope reports ok")
	}
}

func testDuplicateReserve(e *env) {
	e.mustReserve("inv-1", "1", taskA)
	if err := e.reserve("inv-1", "1", taskA); !errors.Is(err, ledger.ErrDuplicateInvocation) {
		e.t.Errorf("second Reserve: %v; want ErrDuplicateInvocation", err)
	}
	if err := e.reserve("inv-1", "1", taskB); !errors.Is(err, ledger.ErrDuplicateInvocation) {
		e.t.Errorf("second Reserve on another scope: %v; want ErrDuplicateInvocation", err)
	}
	e.want(taskA, "0", "1", false)
	e.want(taskB, "0", "0", false)
	e.mustSettle("inv-1", "1", taskA)
	if err := e.reserve("inv-1", "1", taskA); !errors.Is(err, ledger.ErrDuplicateInvocation) {
		e.t.Errorf("Reserve after Settle: %v; want ErrDuplicateInvocation", err)
	}
	e.want(taskA, "1", "0", false)
}

func testInvalid(e *env) {
	later := e.clock.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		r    ledger.Reservation
	}{
		{"no id", ledger.Reservation{Amount: 1, Scopes: []ledger.Scope{taskA}, ExpiresAt: later}},
		{"negative amount", ledger.Reservation{InvocationID: "x", Amount: -1, Scopes: []ledger.Scope{taskA}, ExpiresAt: later}},
		{"no scope", ledger.Reservation{InvocationID: "x", Amount: 1, ExpiresAt: later}},
		{"bad scope", ledger.Reservation{InvocationID: "x", Amount: 1, Scopes: []ledger.Scope{"project"}, ExpiresAt: later}},
		{"bad month", ledger.Reservation{InvocationID: "x", Amount: 1, Scopes: []ledger.Scope{"month:2026-13"}, ExpiresAt: later}},
		{"empty task", ledger.Reservation{InvocationID: "x", Amount: 1, Scopes: []ledger.Scope{"task:"}, ExpiresAt: later}},
		{"already expired", ledger.Reservation{InvocationID: "x", Amount: 1, Scopes: []ledger.Scope{taskA}, ExpiresAt: e.clock.Now()}},
	} {
		if err := e.s.Reserve(e.ctx, tc.r); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("Reserve(%s): %v; want ErrInvalid", tc.name, err)
		}
	}
	s := e.settlement("x", "1", taskA)
	s.Cost = -1
	if err := e.s.Settle(e.ctx, s); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("Settle with a negative cost: %v; want ErrInvalid", err)
	}
	s = e.settlement("x", "1")
	if err := e.s.Settle(e.ctx, s); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("Settle without scopes: %v; want ErrInvalid", err)
	}
	s = e.settlement("x", "1", taskA)
	s.Entry.InvocationID = "y"
	if err := e.s.Settle(e.ctx, s); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("Settle with another invocation's entry: %v; want ErrInvalid", err)
	}
	if err := e.s.SetBudget(e.ctx, taskA, -1); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("SetBudget(-1): %v; want ErrInvalid", err)
	}
	if err := e.s.RecordAttempt(e.ctx, ledger.AttemptRow{InvocationID: "x", InputTokens: -1}); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("RecordAttempt with negative tokens: %v; want ErrInvalid", err)
	}
	if _, err := e.s.Spend(e.ctx, ledger.Filter{By: "planet"}); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("Spend by planet: %v; want ErrInvalid", err)
	}
	if err := e.s.Release(e.ctx, ""); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("Release(\"\"): %v; want ErrInvalid", err)
	}
	e.want(taskA, "0", "0", false)
}

func testSettleActual(e *env) {
	e.budget(taskA, "10")
	e.mustReserve("below", "5", taskA, month)
	e.mustSettle("below", "3.123456789", taskA, month)
	e.want(taskA, "3.123456789", "0", false)
	e.want(month, "3.123456789", "0", false)
	e.mustReserve("above", "2", taskA, month)
	e.mustSettle("above", "4.000000002", taskA, month)
	e.want(taskA, "7.123456791", "0", false)
	e.want(month, "7.123456791", "0", false)
	// Above the estimate and past the limit: the money was spent.
	e.mustReserve("over", "2", taskA)
	e.mustSettle("over", "3.5", taskA)
	e.want(taskA, "10.623456791", "0", true)
}

func (e *env) attempts(f ledger.Filter) []ledger.AttemptRow {
	e.t.Helper()
	rows, err := e.s.Attempts(e.ctx, f)
	if err != nil {
		e.t.Fatalf("Attempts: %v", err)
	}
	return rows
}

func testSettleIdempotent(e *env) {
	e.mustReserve("inv-1", "2", taskA, month)
	e.mustSettle("inv-1", "1.5", taskA, month)
	for i := range 3 {
		if err := e.settle("inv-1", "1.5", taskA, month); !errors.Is(err, ledger.ErrAlreadySettled) {
			e.t.Errorf("settle #%d: %v; want ErrAlreadySettled", i+2, err)
		}
	}
	// Even with another cost, a second settlement changes nothing.
	if err := e.settle("inv-1", "99", taskA, month); !errors.Is(err, ledger.ErrAlreadySettled) {
		e.t.Errorf("settle with another cost: %v; want ErrAlreadySettled", err)
	}
	e.want(taskA, "1.5", "0", false)
	e.want(month, "1.5", "0", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 1 {
		e.t.Errorf("ledger has %d rows; want 1", len(rows))
	}
}

func testSettleWithoutReservation(e *env) {
	e.mustReserve("inv-1", "2", taskA)
	if err := e.s.Release(e.ctx, "inv-1"); err != nil {
		e.t.Fatal(err)
	}
	e.mustSettle("inv-1", "0.75", taskA, month)
	if err := e.settle("inv-1", "0.75", taskA, month); !errors.Is(err, ledger.ErrAlreadySettled) {
		e.t.Errorf("second settle: %v; want ErrAlreadySettled", err)
	}
	// Never reserved at all.
	e.mustSettle("inv-2", "0.25", taskA, month)
	e.want(taskA, "1", "0", false)
	e.want(month, "1", "0", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 2 {
		e.t.Errorf("ledger has %d rows; want 2", len(rows))
	}
}

func testSettleReservedScopes(e *env) {
	next := ledger.MonthScope(Epoch.AddDate(0, 1, 0))
	e.mustReserve("inv-1", "1", taskA, month)
	// The caller settles after the month changed: the reservation's scopes
	// are charged, not the ones the settlement names.
	e.mustSettle("inv-1", "0.5", taskA, next)
	e.want(taskA, "0.5", "0", false)
	e.want(month, "0.5", "0", false)
	e.want(next, "0", "0", false)
}

func testRelease(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("inv-1", "1", taskA, month)
	if err := e.reserve("inv-2", "0.1", taskA); !errors.Is(err, ledger.ErrOverBudget) {
		e.t.Fatalf("Reserve over a full budget: %v", err)
	}
	for i := range 2 {
		if err := e.s.Release(e.ctx, "inv-1"); err != nil {
			e.t.Errorf("Release #%d: %v", i+1, err)
		}
	}
	if err := e.s.Release(e.ctx, "never-reserved"); err != nil {
		e.t.Errorf("Release of an unknown id: %v", err)
	}
	e.want(taskA, "0", "0", false)
	e.want(month, "0", "0", false)
	e.mustReserve("inv-2", "1", taskA)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 0 {
		e.t.Errorf("Release wrote %d ledger rows", len(rows))
	}
}

func testExpire(e *env) {
	e.budget(taskA, "3")
	now := e.clock.Now()
	for i, ttl := range []time.Duration{time.Minute, time.Minute, 2 * time.Minute} {
		r := ledger.Reservation{InvocationID: fmt.Sprintf("inv-%d", i), Amount: M("1"), Scopes: []ledger.Scope{taskA, month}, ExpiresAt: now.Add(ttl)}
		if err := e.s.Reserve(e.ctx, r); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		at   time.Duration
		want int
		held string
	}{
		{30 * time.Second, 0, "3"},
		{time.Minute - time.Nanosecond, 0, "3"},
		{time.Minute, 2, "1"}, // at expires_at, inclusive
		{time.Minute, 0, "1"},
		{time.Hour, 1, "0"},
	} {
		n, err := e.s.ExpireReservations(e.ctx, now.Add(tc.at))
		if err != nil || n != tc.want {
			e.t.Errorf("ExpireReservations(+%v) = %d, %v; want %d", tc.at, n, err, tc.want)
		}
		e.want(taskA, "0", tc.held, false)
		e.want(month, "0", tc.held, false)
	}
	e.mustReserve("inv-9", "3", taskA)
}

func testReserveIgnoresExpired(e *env) {
	e.budget(taskA, "10")
	r := e.reservation("leaked", "10", taskA, month)
	r.ExpiresAt = e.clock.Now().Add(time.Minute)
	if err := e.s.Reserve(e.ctx, r); err != nil {
		e.t.Fatal(err)
	}
	if err := e.reserve("inv-1", "1", taskA); !errors.Is(err, ledger.ErrOverBudget) {
		e.t.Fatalf("Reserve while the leak is live: %v; want ErrOverBudget", err)
	}
	e.clock.Advance(time.Minute)
	e.want(taskA, "0", "0", false) // an expired hold counts for nothing
	e.mustReserve("inv-1", "10", taskA)
	e.want(taskA, "0", "10", false)
	e.want(month, "0", "0", false)
	// Reserve released the leaked reservation on its way (of every scope it
	// held), so there is nothing left to expire.
	if n, err := e.s.ExpireReservations(e.ctx, e.clock.Now()); err != nil || n != 0 {
		e.t.Errorf("ExpireReservations after Reserve cleaned up = %d, %v; want 0", n, err)
	}
	// An expired reservation of the same id is no duplicate either.
	e.clock.Advance(2 * time.Hour)
	e.mustReserve("inv-1", "1", taskA)
	e.want(taskA, "0", "1", false)
}

func testSettleAfterExpiry(e *env) {
	e.budget(taskA, "10")
	e.mustReserve("inv-1", "2", taskA, month)
	if n, err := e.s.ExpireReservations(e.ctx, e.clock.Now().Add(2*time.Hour)); err != nil || n != 1 {
		e.t.Fatalf("ExpireReservations = %d, %v; want 1", n, err)
	}
	e.mustSettle("inv-1", "2.5", taskA, month)
	if err := e.settle("inv-1", "2.5", taskA, month); !errors.Is(err, ledger.ErrAlreadySettled) {
		e.t.Errorf("second settle: %v", err)
	}
	e.want(taskA, "2.5", "0", false)
	e.want(month, "2.5", "0", false)
}

func testPauseOnTaskBudget(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("inv-1", "0.6", taskA, month)
	e.mustSettle("inv-1", "0.6", taskA, month)
	e.want(taskA, "0.6", "0", false)
	e.mustReserve("inv-2", "0.4", taskA, month)
	e.mustSettle("inv-2", "0.4", taskA, month)
	b := e.want(taskA, "1", "0", true)
	if want := "task budget reached: spent $1.00 of $1.00"; b.PauseReason != want {
		e.t.Errorf("pause reason %q; want %q", b.PauseReason, want)
	}
	if reason, paused, err := e.s.Paused(e.ctx, taskA); err != nil || !paused || reason != b.PauseReason {
		e.t.Errorf("Paused = %q, %v, %v", reason, paused, err)
	}
	e.want(month, "1", "0", false) // no budget, never paused
	err := e.reserve("inv-3", "0", taskA, month)
	var pe *ledger.PausedError
	if !errors.As(err, &pe) || !errors.Is(err, ledger.ErrPaused) || pe.Scope != taskA || pe.Reason != b.PauseReason {
		e.t.Fatalf("Reserve on a paused task: %v; want a *PausedError", err)
	}
	e.want(month, "1", "0", false)
	// Raising the budget resumes the task.
	e.budget(taskA, "2")
	e.want(taskA, "1", "0", false)
	e.mustReserve("inv-3", "0.5", taskA, month)
	e.mustSettle("inv-3", "0.5", taskA, month)
	// Raising it again, above the spend, keeps it running; lowering it to
	// the spend does not pause by itself, but refuses what does not fit.
	e.budget(taskA, "1.5")
	e.want(taskA, "1.5", "0", false)
	wantBudgetError(e.t, e.reserve("inv-4", "0.01", taskA),
		ledger.BudgetError{Scope: taskA, Limit: M("1.5"), Spent: M("1.5"), Asked: M("0.01")})
}

func testPauseOnMonthBudget(e *env) {
	e.budget(month, "2")
	e.mustReserve("inv-1", "1", taskA, month)
	e.mustSettle("inv-1", "2.25", taskA, month)
	b := e.want(month, "2.25", "0", true)
	if want := "monthly budget reached for 2026-05: spent $2.25 of $2.00"; b.PauseReason != want {
		e.t.Errorf("pause reason %q; want %q", b.PauseReason, want)
	}
	e.want(taskA, "2.25", "0", false)
	if err := e.reserve("inv-2", "0.1", taskB, month); !errors.Is(err, ledger.ErrPaused) {
		e.t.Errorf("Reserve in a paused month: %v", err)
	}
	// Resume lifts the pause, but the budget still refuses.
	if err := e.s.Resume(e.ctx, month); err != nil {
		e.t.Fatal(err)
	}
	e.want(month, "2.25", "0", false)
	wantBudgetError(e.t, e.reserve("inv-2", "0.1", taskB, month),
		ledger.BudgetError{Scope: month, Limit: M("2"), Spent: M("2.25"), Asked: M("0.1")})
}

func testManualPause(e *env) {
	if err := e.s.Pause(e.ctx, taskA, "credentials refused"); err != nil {
		e.t.Fatal(err)
	}
	if reason, paused, err := e.s.Paused(e.ctx, taskA); err != nil || !paused || reason != "credentials refused" {
		e.t.Errorf("Paused = %q, %v, %v", reason, paused, err)
	}
	var pe *ledger.PausedError
	if err := e.reserve("inv-1", "1", taskA); !errors.As(err, &pe) || pe.Reason != "credentials refused" {
		e.t.Errorf("Reserve on a paused scope: %v", err)
	}
	// Setting a budget does not lift a pause it did not cause.
	e.budget(taskA, "100")
	if _, paused, _ := e.s.Paused(e.ctx, taskA); !paused {
		e.t.Error("SetBudget lifted a manual pause")
	}
	for range 2 {
		if err := e.s.Resume(e.ctx, taskA); err != nil {
			e.t.Fatal(err)
		}
	}
	e.want(taskA, "0", "0", false)
	e.mustReserve("inv-1", "1", taskA)
	if err := e.s.Resume(e.ctx, ledger.TaskScope("never-seen")); err != nil {
		e.t.Errorf("Resume of an unknown scope: %v", err)
	}
	if reason, paused, err := e.s.Paused(e.ctx, ledger.TaskScope("never-seen")); err != nil || paused || reason != "" {
		e.t.Errorf("Paused(unknown) = %q, %v, %v", reason, paused, err)
	}
}

func testPauseForBudget(e *env) {
	e.budget(taskA, "1")
	if err := e.s.PauseForBudget(e.ctx, taskA, "budget reached"); err != nil {
		e.t.Fatal(err)
	}
	var pe *ledger.PausedError
	if err := e.reserve("inv-1", "0.1", taskA); !errors.As(err, &pe) || pe.Reason != "budget reached" {
		e.t.Errorf("Reserve on a budget-paused scope: %v", err)
	}
	// Raising the budget above the spend lifts a budget pause.
	e.budget(taskA, "2")
	if _, paused, _ := e.s.Paused(e.ctx, taskA); paused {
		e.t.Error("raising the budget did not lift the budget pause")
	}
	e.mustReserve("inv-1", "0.1", taskA)
	// Resume lifts it too.
	if err := e.s.PauseForBudget(e.ctx, taskA, "again"); err != nil {
		e.t.Fatal(err)
	}
	if err := e.s.Resume(e.ctx, taskA); err != nil {
		e.t.Fatal(err)
	}
	if _, paused, _ := e.s.Paused(e.ctx, taskA); paused {
		e.t.Error("Resume did not lift the budget pause")
	}
}

func testRemoveBudget(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("inv-1", "1", taskA)
	e.mustSettle("inv-1", "1", taskA)
	e.want(taskA, "1", "0", true)
	if err := e.s.RemoveBudget(e.ctx, taskA); err != nil {
		e.t.Fatal(err)
	}
	b := e.want(taskA, "1", "0", false)
	if b.Limited {
		e.t.Errorf("RemoveBudget left a limit: %+v", b)
	}
	e.mustReserve("inv-2", "1000", taskA)
}

func testBudgets(e *env) {
	if bs, err := e.s.Budgets(e.ctx); err != nil || len(bs) != 0 {
		e.t.Fatalf("Budgets of an empty store = %v, %v", bs, err)
	}
	e.budget(taskB, "2")
	e.budget(month, "50")
	e.budget(taskA, "1")
	e.mustReserve("inv-1", "0.5", taskA, month, ledger.TaskScope("unbudgeted"))
	bs, err := e.s.Budgets(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	want := []ledger.Budget{
		{Scope: month, Limited: true, Limit: M("50"), Held: M("0.5")},
		{Scope: taskA, Limited: true, Limit: M("1"), Held: M("0.5")},
		{Scope: taskB, Limited: true, Limit: M("2")},
	}
	if len(bs) != len(want) {
		e.t.Fatalf("Budgets = %+v; want %+v", bs, want)
	}
	for i := range want {
		if bs[i] != want[i] {
			e.t.Errorf("Budgets[%d] = %+v; want %+v", i, bs[i], want[i])
		}
	}
}

// sampleRows are ledger rows with awkward amounts: every total is checked
// to the nano-dollar.
func sampleRows() []ledger.AttemptRow {
	t0 := Epoch
	return []ledger.AttemptRow{
		{InvocationID: "i1", Time: t0, Task: "t1", Agent: "coder", Provider: "anthropic-main", Model: "opus",
			Outcome: "ok", InputTokens: 1200, OutputTokens: 345, CacheReadTokens: 1000, CacheWriteTokens: 7,
			Cost: M("0.012345678"), EstimatedUsage: true},
		{InvocationID: "i2", Time: t0.Add(time.Second), Task: "t1", Agent: "reviewer", Provider: "openai-main", Model: "gpt",
			Outcome: "rate_limit", Cost: 0},
		{InvocationID: "i2", Time: t0.Add(2 * time.Second), Task: "t1", Agent: "reviewer", Provider: "openai-main", Model: "gpt",
			Outcome: "ok", InputTokens: 10, OutputTokens: 20, Cost: M("0.000000001")},
		{InvocationID: "i3", Time: t0.Add(3 * time.Second), Task: "t2", Agent: "coder", Provider: "anthropic-main", Model: "opus",
			Outcome: "ok", CacheHit: true, Saving: M("1.999999999")},
		{InvocationID: "i4", Time: t0.AddDate(0, 1, 0), Task: "t2", Agent: "coder", Provider: "anthropic-main", Model: "haiku",
			Outcome: "ok", InputTokens: 5, OutputTokens: 6, CacheReadTokens: 1, CacheWriteTokens: 2, Cost: M("123456.789012345"), Unpriced: true},
	}
}

func testLedgerRows(e *env) {
	rows := sampleRows()
	// Record out of order: Attempts returns them by time.
	for _, i := range []int{4, 0, 3, 1, 2} {
		if err := e.s.RecordAttempt(e.ctx, rows[i]); err != nil {
			e.t.Fatalf("RecordAttempt(%d): %v", i, err)
		}
	}
	got := e.attempts(ledger.Filter{})
	if len(got) != len(rows) {
		e.t.Fatalf("Attempts returned %d rows; want %d", len(got), len(rows))
	}
	for i := range rows {
		if !got[i].Time.Equal(rows[i].Time) {
			e.t.Errorf("row %d time %v; want %v", i, got[i].Time, rows[i].Time)
		}
		got[i].Time = rows[i].Time
		if got[i] != rows[i] {
			e.t.Errorf("row %d = %+v\nwant %+v", i, got[i], rows[i])
		}
	}
	for _, tc := range []struct {
		f    ledger.Filter
		want []string // invocation ids
	}{
		{ledger.Filter{Task: "t2"}, []string{"i3", "i4"}},
		{ledger.Filter{Agent: "reviewer"}, []string{"i2", "i2"}},
		{ledger.Filter{Provider: "anthropic-main", Task: "t1"}, []string{"i1"}},
		{ledger.Filter{From: Epoch.Add(time.Second), To: Epoch.Add(3 * time.Second)}, []string{"i2", "i2"}},
		{ledger.Filter{From: Epoch.Add(3 * time.Second)}, []string{"i3", "i4"}},
		{ledger.Filter{To: Epoch.Add(time.Nanosecond)}, []string{"i1"}},
		{ledger.Filter{Task: "none"}, nil},
	} {
		var ids []string
		for _, r := range e.attempts(tc.f) {
			ids = append(ids, r.InvocationID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			e.t.Errorf("Attempts(%+v) = %v; want %v", tc.f, ids, tc.want)
		}
	}
	// A row without a time takes the store's clock.
	if err := e.s.RecordAttempt(e.ctx, ledger.AttemptRow{InvocationID: "i5", Provider: "p", Outcome: "ok"}); err != nil {
		e.t.Fatal(err)
	}
	if r := e.attempts(ledger.Filter{From: e.clock.Now(), To: e.clock.Now().Add(time.Nanosecond)}); len(r) != 2 || r[1].InvocationID != "i5" {
		e.t.Errorf("row without time: %+v", r)
	}
	// Settle writes its entry as a ledger row.
	e.mustReserve("i6", "1", taskA)
	e.mustSettle("i6", "0.333333333", taskA)
	if r := e.attempts(ledger.Filter{Task: "task-a"}); len(r) != 1 || r[0].InvocationID != "i6" || r[0].Cost != M("0.333333333") || !r[0].Time.Equal(e.clock.Now()) {
		e.t.Errorf("settled row: %+v", r)
	}
}

func (e *env) spend(f ledger.Filter) ledger.SpendReport {
	e.t.Helper()
	rep, err := e.s.Spend(e.ctx, f)
	if err != nil {
		e.t.Fatalf("Spend(%+v): %v", f, err)
	}
	return rep
}

func testSpendTotals(e *env) {
	if rep := e.spend(ledger.Filter{By: ledger.ByTask}); rep.Total != (ledger.Totals{}) || len(rep.Groups) != 0 {
		e.t.Errorf("Spend of an empty ledger = %+v", rep)
	}
	for _, r := range sampleRows() {
		if err := e.s.RecordAttempt(e.ctx, r); err != nil {
			e.t.Fatal(err)
		}
	}
	all := ledger.Totals{Cost: M("123456.801358024"), Savings: M("1.999999999"), Attempts: 5, CacheHits: 1, Estimated: 1, Unpriced: 1,
		InputTokens: 1215, OutputTokens: 371, CacheReadTokens: 1001, CacheWriteTokens: 9}
	t1 := ledger.Totals{Cost: M("0.012345679"), Attempts: 3, Estimated: 1, InputTokens: 1210, OutputTokens: 365, CacheReadTokens: 1000, CacheWriteTokens: 7}
	t2 := ledger.Totals{Cost: M("123456.789012345"), Savings: M("1.999999999"), Attempts: 2, CacheHits: 1, Unpriced: 1, InputTokens: 5, OutputTokens: 6, CacheReadTokens: 1, CacheWriteTokens: 2}
	coder := ledger.Totals{Cost: M("123456.801358023"), Savings: M("1.999999999"), Attempts: 3, CacheHits: 1, Estimated: 1, Unpriced: 1,
		InputTokens: 1205, OutputTokens: 351, CacheReadTokens: 1001, CacheWriteTokens: 9}
	reviewer := ledger.Totals{Cost: M("0.000000001"), Attempts: 2, InputTokens: 10, OutputTokens: 20}
	opus := ledger.Totals{Cost: M("0.012345678"), Savings: M("1.999999999"), Attempts: 2, CacheHits: 1, Estimated: 1,
		InputTokens: 1200, OutputTokens: 345, CacheReadTokens: 1000, CacheWriteTokens: 7}
	haiku := t2
	haiku.Savings, haiku.CacheHits, haiku.Attempts = 0, 0, 1
	may := ledger.Totals{Cost: M("0.012345679"), Savings: M("1.999999999"), Attempts: 4, CacheHits: 1, Estimated: 1,
		InputTokens: 1210, OutputTokens: 365, CacheReadTokens: 1000, CacheWriteTokens: 7}
	for _, tc := range []struct {
		f    ledger.Filter
		tot  ledger.Totals
		want []ledger.SpendGroup
	}{
		{ledger.Filter{}, all, nil},
		{ledger.Filter{By: ledger.ByTask}, all, []ledger.SpendGroup{{Key: "t1", Totals: t1}, {Key: "t2", Totals: t2}}},
		{ledger.Filter{By: ledger.ByAgent}, all, []ledger.SpendGroup{{Key: "coder", Totals: coder}, {Key: "reviewer", Totals: reviewer}}},
		{ledger.Filter{By: ledger.ByModel}, all, []ledger.SpendGroup{
			{Key: "anthropic-main/haiku", Totals: haiku}, {Key: "anthropic-main/opus", Totals: opus}, {Key: "openai-main/gpt", Totals: reviewer}}},
		{ledger.Filter{By: ledger.ByMonth}, all, []ledger.SpendGroup{
			{Key: "2026-05", Totals: may}, {Key: "2026-06", Totals: haiku}}},
		{ledger.Filter{Task: "t2", By: ledger.ByTask}, t2, []ledger.SpendGroup{{Key: "t2", Totals: t2}}},
		{ledger.Filter{Agent: "reviewer", Provider: "openai-main"}, reviewer, nil},
		{ledger.Filter{From: Epoch.AddDate(0, 1, 0), By: ledger.ByModel}, haiku, []ledger.SpendGroup{{Key: "anthropic-main/haiku", Totals: haiku}}},
	} {
		rep := e.spend(tc.f)
		if rep.By != tc.f.By || rep.Total != tc.tot || len(rep.Groups) != len(tc.want) {
			e.t.Errorf("Spend(%+v) = %+v\nwant total %+v groups %+v", tc.f, rep, tc.tot, tc.want)
			continue
		}
		for i := range tc.want {
			if rep.Groups[i] != tc.want[i] {
				e.t.Errorf("Spend(%+v) group %d = %+v; want %+v", tc.f, i, rep.Groups[i], tc.want[i])
			}
		}
	}
	// The JSON the CLI prints carries money as exact decimal strings.
	b, err := json.Marshal(e.spend(ledger.Filter{By: ledger.ByTask, Task: "t2"}))
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), `"cost_usd":"123456.789012345"`) || !strings.Contains(string(b), `"key":"t2"`) {
		e.t.Errorf("JSON %s", b)
	}
}

func testSpendByMonth(e *env) {
	// 2026-05-01 02:00 UTC is still April in New York (UTC−4 in summer) and
	// already May in UTC; 2026-05-31 22:00 UTC is June in Kathmandu
	// (UTC+5:45).
	ny := time.FixedZone("UTC-4", -4*3600)
	ktm := time.FixedZone("UTC+5:45", 5*3600+45*60)
	for i, at := range []time.Time{
		time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC),
		time.Date(2026, 5, 15, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 5, 31, 22, 0, 0, 0, time.UTC),
	} {
		r := ledger.AttemptRow{InvocationID: fmt.Sprintf("m%d", i), Time: at, Provider: "p", Outcome: "ok", Cost: provider.Money(1 << i)}
		if err := e.s.RecordAttempt(e.ctx, r); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		loc  *time.Location
		want string
	}{
		{nil, "2026-05=7"},
		{ny, "2026-04=1 2026-05=6"},
		{ktm, "2026-05=3 2026-06=4"},
	} {
		var got []string
		for _, g := range e.spend(ledger.Filter{By: ledger.ByMonth, Location: tc.loc}).Groups {
			got = append(got, fmt.Sprintf("%s=%d", g.Key, g.Cost.Nanos()))
		}
		if strings.Join(got, " ") != tc.want {
			e.t.Errorf("Spend by month in %v = %v; want %s", tc.loc, got, tc.want)
		}
	}
}

func testSchemaVersion(e *env) {
	v, err := e.s.SchemaVersion(e.ctx)
	if err != nil || v != ledger.LatestSchemaVersion {
		e.t.Errorf("SchemaVersion = %d, %v; want %d", v, err, ledger.LatestSchemaVersion)
	}
}

func testClosed(e *env) {
	e.mustReserve("inv-1", "1", taskA)
	for i := range 2 {
		if err := e.s.Close(); err != nil {
			e.t.Errorf("Close #%d: %v", i+1, err)
		}
	}
	ctx := e.ctx
	checks := map[string]error{
		"SetBudget":     e.s.SetBudget(ctx, taskA, 1),
		"RemoveBudget":  e.s.RemoveBudget(ctx, taskA),
		"Reserve":       e.reserve("inv-2", "1", taskA),
		"Settle":        e.settle("inv-1", "1", taskA),
		"Release":       e.s.Release(ctx, "inv-1"),
		"Shrink":        e.s.Shrink(ctx, "inv-1", 0),
		"RecordAttempt": e.s.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: "x"}),
		"Pause":         e.s.Pause(ctx, taskA, "x"),
		"Resume":        e.s.Resume(ctx, taskA),
	}
	_, checks["Budget"] = e.s.Budget(ctx, taskA)
	_, checks["Budgets"] = e.s.Budgets(ctx)
	_, checks["ExpireReservations"] = e.s.ExpireReservations(ctx, e.clock.Now())
	_, checks["Attempts"] = e.s.Attempts(ctx, ledger.Filter{})
	_, checks["Spend"] = e.s.Spend(ctx, ledger.Filter{})
	_, _, checks["Paused"] = e.s.Paused(ctx, taskA)
	_, checks["SchemaVersion"] = e.s.SchemaVersion(ctx)
	for name, err := range checks {
		if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrClosed) {
			e.t.Errorf("%s on a closed store: %v; want ErrClosed, an ErrUnavailable", name, err)
		}
	}
}

// Outcome counts what concurrent reservations got.
type Outcome struct {
	Admitted, Refused int
	Spent             provider.Money // sum of the settled actual costs
}

// ActualCost is the deterministic actual cost of the i-th admitted
// invocation of an estimate: at most the estimate, mostly below it.
func ActualCost(estimate provider.Money, i int) provider.Money {
	return estimate - provider.Money(i%7)*estimate/10
}

// Batch is one group of concurrent reservations of [ReserveAll].
type Batch struct {
	Store  ledger.Store
	Prefix string // of the invocation ids
	N      int
	Scopes []ledger.Scope
}

// ReserveAll reserves the invocations of every batch concurrently, one
// goroutine each, each asking for estimate; then, once every reservation
// has been answered (so that no settlement below the estimate frees room
// for a later reservation), it settles every admitted one at
// [ActualCost]. Every refusal must be a [*ledger.BudgetError]. It returns
// one Outcome per batch.
func ReserveAll(ctx context.Context, estimate provider.Money, expires time.Time, batches ...Batch) ([]Outcome, error) {
	outs := make([]Outcome, len(batches))
	ids := make([][]string, len(batches))
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Go(func() {
			ids[i], outs[i].Refused, errs[i] = reserveN(ctx, b.Store, b.Prefix, b.N, estimate, expires, b.Scopes...)
			outs[i].Admitted = len(ids[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return outs, err
	}
	for i, b := range batches {
		wg.Go(func() { outs[i].Spent, errs[i] = settleAll(ctx, b.Store, ids[i], estimate, b.Scopes...) })
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// The figure: 64 concurrent reservations of $0.30 against a $5.00
// cap admit exactly floor(5.00/0.30) = 16, and the spend never passes the
// cap.
func testConcurrentCap(e *env) {
	const n = 64
	limit, estimate := M("5"), M("0.3")
	e.budget(taskA, limit.String())
	outs, err := ReserveAll(e.ctx, estimate, e.clock.Now().Add(time.Hour), Batch{Store: e.s, Prefix: "c", N: n, Scopes: []ledger.Scope{taskA}})
	if err != nil {
		e.t.Fatal(err)
	}
	out := outs[0]
	if want := int(limit / estimate); out.Admitted != want || out.Refused != n-want {
		e.t.Errorf("admitted %d, refused %d; want %d and %d", out.Admitted, out.Refused, want, n-want)
	}
	b := e.want(taskA, out.Spent.String(), "0", false)
	if b.Spent > limit {
		e.t.Errorf("spent $%s of a $%s cap", b.Spent, limit)
	}
	if rows := e.attempts(ledger.Filter{}); len(rows) != out.Admitted {
		e.t.Errorf("%d ledger rows for %d settlements", len(rows), out.Admitted)
	}
}

// Reservations over overlapping scope sets (two tasks and the month, the
// month binding) lock in one order and neither deadlock nor overspend.
func testConcurrentScopes(e *env) {
	limit, estimate := M("3"), M("0.25")
	e.budget(month, limit.String())
	e.budget(taskA, "100")
	outs, err := ReserveAll(e.ctx, estimate, e.clock.Now().Add(time.Hour),
		Batch{Store: e.s, Prefix: "a", N: 24, Scopes: []ledger.Scope{month, taskA}},
		Batch{Store: e.s, Prefix: "b", N: 24, Scopes: []ledger.Scope{taskB, month}})
	if err != nil {
		e.t.Fatal(err)
	}
	admitted := outs[0].Admitted + outs[1].Admitted
	if want := int(limit / estimate); admitted != want {
		e.t.Errorf("admitted %d; want %d", admitted, want)
	}
	b := e.want(month, (outs[0].Spent + outs[1].Spent).String(), "0", false)
	if b.Spent > limit {
		e.t.Errorf("spent $%s of a $%s cap", b.Spent, limit)
	}
	e.want(taskA, outs[0].Spent.String(), "0", false)
	e.want(taskB, outs[1].Spent.String(), "0", false)
}

func testConcurrentSettle(e *env) {
	e.mustReserve("inv-1", "1", taskA, month)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = e.settle("inv-1", "0.9", taskA, month) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ledger.ErrAlreadySettled):
			e.t.Errorf("concurrent settle: %v", err)
		}
	}
	if ok != 1 {
		e.t.Errorf("%d settlements succeeded; want 1", ok)
	}
	e.want(taskA, "0.9", "0", false)
	e.want(month, "0.9", "0", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 1 {
		e.t.Errorf("%d ledger rows; want 1", len(rows))
	}
}

func testConcurrentDuplicate(e *env) {
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// Different scope sets, so only the invocation id collides.
		sc := ledger.TaskScope(fmt.Sprintf("t%d", i))
		wg.Go(func() { errs[i] = e.reserve("inv-1", "1", sc) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ledger.ErrDuplicateInvocation):
			e.t.Errorf("concurrent reserve: %v", err)
		}
	}
	if ok != 1 {
		e.t.Errorf("%d reservations of one id succeeded; want 1", ok)
	}
}
