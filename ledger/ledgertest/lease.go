package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The conformance checks of a settlement's earlier attempt rows, of budget
// leases and of [ledger.Store.Shrink], run by [RunStoreTests].
var leaseTests = []struct {
	name string
	run  func(*env)
}{
	{"SettleWritesEarlierRows", testSettleEarlier},
	{"SettleEarlierRowsWithoutReservation", testSettleEarlierUnreserved},
	{"SettleTwiceWritesNoEarlierRows", testSettleEarlierOnce},
	{"SettleDrawsFromLease", testLeaseDraw},
	{"SettleDrawsFromLeaseOnItsOwnScopes", testLeaseScopes},
	{"SettleDrawsFromLeaseAndOwnReservation", testLeaseAndOwn},
	{"SettleDrawsFromGoneLease", testLeaseGone},
	{"SettleTwiceDrawsFromLeaseOnce", testLeaseOnce},
	{"SettleInvalidLeaseOrRows", testLeaseInvalid},
	{"Shrink", testShrink},
	{"ShrinkFreesRoom", testShrinkFreesRoom},
	{"ShrinkUnknownReleasedOrSettled", testShrinkGone},
	{"ConcurrentSettlementsAgainstOneLease", testConcurrentLease},
}

// earlierRows are two failed tries of an invocation before its entry: a
// refusal that cost nothing, and a stream cut short whose partial usage was
// billed; the second has no time and takes the store's clock.
func (e *env) earlierRows() []ledger.AttemptRow {
	return []ledger.AttemptRow{
		{Time: e.clock.Now().Add(-2 * time.Second), Task: "task-a", Agent: "coder", Provider: "sim", Model: "m1",
			Outcome: "rate_limit"},
		{Task: "task-a", Agent: "coder", Provider: "sim-2", Model: "m2", Outcome: "stream_cut",
			InputTokens: 70, OutputTokens: 7, CacheReadTokens: 3, CacheWriteTokens: 1, Cost: M("0.050000001"), EstimatedUsage: true},
	}
}

// invocationRows returns the ledger rows of one invocation, oldest first.
func (e *env) invocationRows(id string) []ledger.AttemptRow {
	e.t.Helper()
	var out []ledger.AttemptRow
	for _, r := range e.attempts(ledger.Filter{}) {
		if r.InvocationID == id {
			out = append(out, r)
		}
	}
	return out
}

// wantRows checks the rows of an invocation: outcome, provider, cost and
// time of each, in order.
func (e *env) wantRows(id string, want []ledger.AttemptRow) {
	e.t.Helper()
	got := e.invocationRows(id)
	if len(got) != len(want) {
		e.t.Fatalf("invocation %s has %d ledger rows; want %d: %+v", id, len(got), len(want), got)
	}
	for i := range want {
		w := want[i]
		w.InvocationID = id
		if !got[i].Time.Equal(w.Time) {
			e.t.Errorf("row %d of %s at %v; want %v", i, id, got[i].Time, w.Time)
		}
		got[i].Time = w.Time
		if got[i] != w {
			e.t.Errorf("row %d of %s = %+v\nwant %+v", i, id, got[i], w)
		}
	}
}

func testSettleEarlier(e *env) {
	e.budget(taskA, "10")
	e.mustReserve("inv-1", "1", taskA, month)
	s := e.settlement("inv-1", "0.2", taskA, month)
	s.Earlier = e.earlierRows()
	// The budgets are charged s.Cost, which the caller makes the sum of the
	// rows' costs: the entry's $0.2 and the partial usage of the second
	// try.
	s.Cost = M("0.250000001")
	if err := e.s.Settle(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
	if s.Earlier[1].InvocationID != "" || !s.Earlier[1].Time.IsZero() {
		e.t.Errorf("Settle changed the caller's rows: %+v", s.Earlier[1])
	}
	e.want(taskA, "0.250000001", "0", false)
	e.want(month, "0.250000001", "0", false)
	want := e.earlierRows()
	want[1].Time = e.clock.Now()
	entry := s.Entry
	entry.Time = e.clock.Now()
	e.wantRows("inv-1", append(want, entry))
	// Spend counts every row once, and the cost column of the rows adds up
	// to what the budgets were charged.
	tot := ledger.Totals{Cost: M("0.250000001"), Attempts: 3, Estimated: 1,
		InputTokens: 170, OutputTokens: 17, CacheReadTokens: 3, CacheWriteTokens: 1}
	if rep := e.spend(ledger.Filter{Task: "task-a"}); rep.Total != tot {
		e.t.Errorf("Spend total = %+v; want %+v", rep.Total, tot)
	}
	rep := e.spend(ledger.Filter{By: ledger.ByModel})
	if len(rep.Groups) != 2 || rep.Groups[0].Key != "sim-2/m2" || rep.Groups[0].Attempts != 1 || rep.Groups[0].Cost != M("0.050000001") ||
		rep.Groups[1].Key != "sim/m1" || rep.Groups[1].Attempts != 2 || rep.Groups[1].Cost != M("0.2") {
		e.t.Errorf("Spend by model = %+v", rep.Groups)
	}
}

func testSettleEarlierUnreserved(e *env) {
	// Never reserved: the rows are written with the charge of s.Scopes.
	s := e.settlement("inv-1", "0.1", taskA, month)
	s.Earlier = e.earlierRows()[:1]
	if err := e.s.Settle(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
	e.want(taskA, "0.1", "0", false)
	e.want(month, "0.1", "0", false)
	entry := s.Entry
	entry.Time = e.clock.Now()
	e.wantRows("inv-1", []ledger.AttemptRow{e.earlierRows()[0], entry})
	// The earlier rows of one invocation are not those of another.
	e.mustSettle("inv-2", "0.1", taskA, month)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 3 {
		e.t.Errorf("ledger has %d rows; want 3", len(rows))
	}
}

func testSettleEarlierOnce(e *env) {
	e.mustReserve("inv-1", "1", taskA)
	s := e.settlement("inv-1", "0.5", taskA)
	s.Earlier = e.earlierRows()
	s.Cost = M("0.550000001")
	if err := e.s.Settle(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
	for i := range 2 {
		e.clock.Advance(time.Second)
		s.Cost = M("7")
		s.Earlier = append(e.earlierRows(), ledger.AttemptRow{Provider: "sim", Outcome: "timeout", Cost: M("1")})
		if err := e.s.Settle(e.ctx, s); !errors.Is(err, ledger.ErrAlreadySettled) {
			e.t.Errorf("settle #%d: %v; want ErrAlreadySettled", i+2, err)
		}
	}
	e.want(taskA, "0.550000001", "0", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 3 {
		e.t.Errorf("ledger has %d rows after a duplicate settlement; want 3", len(rows))
	}
	if tot := e.spend(ledger.Filter{}).Total; tot.Attempts != 3 || tot.Cost != M("0.550000001") {
		e.t.Errorf("Spend total = %+v; want 3 attempts costing $0.550000001", tot)
	}
}

// leaseSettlement is the settlement of an invocation that drew reserved
// from lease.
func (e *env) leaseSettlement(id, cost, lease, reserved string, scopes ...ledger.Scope) ledger.Settlement {
	s := e.settlement(id, cost, scopes...)
	s.Lease, s.Reserved = lease, M(reserved)
	return s
}

func (e *env) mustSettleLease(id, cost, lease, reserved string, scopes ...ledger.Scope) {
	e.t.Helper()
	if err := e.s.Settle(e.ctx, e.leaseSettlement(id, cost, lease, reserved, scopes...)); err != nil {
		e.t.Fatalf("Settle(%s, $%s from lease %s of $%s): %v", id, cost, lease, reserved, err)
	}
}

func testLeaseDraw(e *env) {
	e.budget(taskA, "10")
	e.budget(month, "100")
	e.mustReserve("lease-1", "1", taskA, month)
	for i := range 3 {
		e.mustSettleLease(fmt.Sprintf("inv-%d", i), "0.15", "lease-1", "0.2", taskA, month)
	}
	e.want(taskA, "0.45", "0.4", false)
	e.want(month, "0.45", "0.4", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 3 {
		e.t.Errorf("ledger has %d rows; want 3", len(rows))
	}
	// Drawing more than the lease still holds empties it, and no more.
	e.mustSettleLease("inv-3", "0.5", "lease-1", "0.5", taskA, month)
	e.want(taskA, "0.95", "0", false)
	e.want(month, "0.95", "0", false)
	e.mustSettleLease("inv-4", "0.05", "lease-1", "0.2", taskA, month)
	e.want(taskA, "1", "0", false)
	// The emptied lease still exists: releasing it leaves nothing held, and
	// what it no longer holds can be reserved.
	e.mustReserve("inv-5", "9", taskA, month)
	if err := e.s.Release(e.ctx, "lease-1"); err != nil {
		e.t.Fatal(err)
	}
	e.want(taskA, "1", "9", false)
}

func testLeaseScopes(e *env) {
	// The lease shrinks on every scope it holds, whatever the settlement
	// names; the settlement's scopes are charged.
	e.mustReserve("lease-1", "1", taskA, month)
	e.mustSettleLease("inv-1", "0.3", "lease-1", "0.25", taskB, month)
	e.want(taskA, "0", "0.75", false)
	e.want(month, "0.3", "0.75", false)
	e.want(taskB, "0.3", "0", false)
}

func testLeaseAndOwn(e *env) {
	// An invocation that holds a reservation of its own and also drew from
	// a lease: its own holds go and its own scopes are charged, as always,
	// and the lease shrinks.
	e.mustReserve("lease-1", "1", taskA, month)
	e.mustReserve("inv-1", "0.5", taskA)
	e.want(taskA, "0", "1.5", false)
	e.mustSettleLease("inv-1", "0.3", "lease-1", "0.2", taskA, month)
	e.want(taskA, "0.3", "0.8", false)
	e.want(month, "0", "0.8", false)
}

func testLeaseGone(e *env) {
	e.budget(taskA, "1")
	// Released.
	e.mustReserve("lease-1", "1", taskA, month)
	if err := e.s.Release(e.ctx, "lease-1"); err != nil {
		e.t.Fatal(err)
	}
	e.mustSettleLease("inv-1", "0.15", "lease-1", "0.2", taskA, month)
	e.want(taskA, "0.15", "0", false)
	e.want(month, "0.15", "0", false)
	// Never reserved.
	e.mustSettleLease("inv-2", "0.15", "no-such-lease", "0.2", taskA, month)
	e.want(taskA, "0.3", "0", false)
	// Expired.
	r := e.reservation("lease-2", "0.5", taskA, month)
	r.ExpiresAt = e.clock.Now().Add(time.Minute)
	if err := e.s.Reserve(e.ctx, r); err != nil {
		e.t.Fatal(err)
	}
	e.want(taskA, "0.3", "0.5", false)
	e.clock.Advance(time.Minute)
	e.mustSettleLease("inv-3", "0.15", "lease-2", "0.2", taskA, month)
	e.want(taskA, "0.45", "0", false)
	if n, err := e.s.ExpireReservations(e.ctx, e.clock.Now()); err != nil || n > 1 {
		e.t.Errorf("ExpireReservations = %d, %v", n, err)
	}
	// Settled.
	e.mustReserve("lease-3", "0.2", taskA, month)
	e.mustSettle("lease-3", "0.05", taskA, month)
	e.mustSettleLease("inv-4", "0.15", "lease-3", "0.2", taskA, month)
	e.want(taskA, "0.65", "0", false)
	e.want(month, "0.65", "0", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 5 {
		e.t.Errorf("ledger has %d rows; want 5", len(rows))
	}
	// Nothing went negative: the whole remaining budget can be reserved,
	// and not a nano-dollar more.
	wantBudgetError(e.t, e.reserve("inv-5", "0.350000001", taskA),
		ledger.BudgetError{Scope: taskA, Limit: M("1"), Spent: M("0.65"), Asked: M("0.350000001")})
	e.mustReserve("inv-5", "0.35", taskA)
}

func testLeaseOnce(e *env) {
	e.mustReserve("lease-1", "1", taskA, month)
	s := e.leaseSettlement("inv-1", "0.25", "lease-1", "0.3", taskA, month)
	s.Earlier = e.earlierRows()[:1]
	if err := e.s.Settle(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
	for i := range 3 {
		if err := e.s.Settle(e.ctx, s); !errors.Is(err, ledger.ErrAlreadySettled) {
			e.t.Errorf("settle #%d: %v; want ErrAlreadySettled", i+2, err)
		}
	}
	// A duplicate naming another lease or amount changes nothing either.
	e.mustReserve("lease-2", "1", taskB)
	if err := e.s.Settle(e.ctx, e.leaseSettlement("inv-1", "0.25", "lease-2", "0.3", taskB)); !errors.Is(err, ledger.ErrAlreadySettled) {
		e.t.Errorf("settle against another lease: %v; want ErrAlreadySettled", err)
	}
	e.want(taskA, "0.25", "0.7", false)
	e.want(month, "0.25", "0.7", false)
	e.want(taskB, "0", "1", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 2 {
		e.t.Errorf("ledger has %d rows; want 2", len(rows))
	}
}

func testLeaseInvalid(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("lease-1", "1", taskA)
	for _, tc := range []struct {
		name string
		edit func(*ledger.Settlement)
	}{
		{"negative draw", func(s *ledger.Settlement) { s.Lease, s.Reserved = "lease-1", -1 }},
		{"negative draw without a lease", func(s *ledger.Settlement) { s.Reserved = -1 }},
		{"draw without a lease", func(s *ledger.Settlement) { s.Reserved = M("0.2") }},
		{"malformed lease id", func(s *ledger.Settlement) { s.Lease, s.Reserved = "lease\n1", M("0.2") }},
		{"earlier row of another invocation", func(s *ledger.Settlement) {
			s.Earlier = []ledger.AttemptRow{{InvocationID: "other", Provider: "sim", Outcome: "timeout"}}
		}},
		{"earlier row with negative tokens", func(s *ledger.Settlement) {
			s.Earlier = []ledger.AttemptRow{{Provider: "sim", Outcome: "ok"}, {Provider: "sim", Outcome: "timeout", OutputTokens: -1}}
		}},
		{"earlier row with a negative cost", func(s *ledger.Settlement) {
			s.Earlier = []ledger.AttemptRow{{Provider: "sim", Outcome: "timeout", Cost: -1}}
		}},
		{"earlier row with a negative saving", func(s *ledger.Settlement) {
			s.Earlier = []ledger.AttemptRow{{Provider: "sim", Outcome: "timeout", Saving: -1}}
		}},
	} {
		s := e.settlement("inv-1", "0.5", taskA)
		tc.edit(&s)
		if err := e.s.Settle(e.ctx, s); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("Settle with %s: %v; want ErrInvalid", tc.name, err)
		}
	}
	e.want(taskA, "0", "1", false)
	if rows := e.attempts(ledger.Filter{}); len(rows) != 0 {
		e.t.Errorf("refused settlements wrote %d ledger rows", len(rows))
	}
	// The refused id was not consumed; a lease named with nothing drawn
	// shrinks nothing.
	e.mustSettleLease("inv-1", "0.5", "lease-1", "0", taskA)
	e.want(taskA, "0.5", "1", false)
}

func (e *env) shrink(id, amount string) error {
	return e.s.Shrink(e.ctx, id, M(amount))
}

func (e *env) mustShrink(id, amount string) {
	e.t.Helper()
	if err := e.shrink(id, amount); err != nil {
		e.t.Fatalf("Shrink(%s, %s): %v", id, amount, err)
	}
}

func testShrink(e *env) {
	e.mustReserve("lease-1", "1", taskA, month)
	e.mustReserve("other", "0.5", taskA)
	e.mustShrink("lease-1", "0.4")
	e.want(taskA, "0", "0.9", false)
	e.want(month, "0", "0.4", false)
	// Never up.
	e.mustShrink("lease-1", "0.7")
	e.mustShrink("lease-1", "0.4")
	e.want(taskA, "0", "0.9", false)
	e.want(month, "0", "0.4", false)
	e.mustShrink("lease-1", "0.000000001")
	e.want(month, "0", "0.000000001", false)
	e.mustShrink("lease-1", "0")
	e.want(taskA, "0", "0.5", false)
	e.want(month, "0", "0", false)
	for _, tc := range []struct{ id, amount string }{{"lease-1", "-0.000000001"}, {"", "1"}, {"bad\x00id", "1"}} {
		if err := e.s.Shrink(e.ctx, tc.id, M(tc.amount)); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("Shrink(%q, %s): %v; want ErrInvalid", tc.id, tc.amount, err)
		}
	}
	e.want(taskA, "0", "0.5", false)
	// A shrunk reservation is settled like any other: its scopes are
	// charged the actual cost.
	e.mustSettle("lease-1", "0.2", taskB)
	e.want(taskA, "0.2", "0.5", false)
	e.want(month, "0.2", "0", false)
	e.want(taskB, "0", "0", false)
}

func testShrinkFreesRoom(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("lease-1", "1", taskA, month)
	wantBudgetError(e.t, e.reserve("inv-1", "0.3", taskA),
		ledger.BudgetError{Scope: taskA, Limit: M("1"), Held: M("1"), Asked: M("0.3")})
	e.mustShrink("lease-1", "0.7")
	e.mustReserve("inv-1", "0.3", taskA)
	e.want(taskA, "0", "1", false)
	wantBudgetError(e.t, e.reserve("inv-2", "0.000000001", taskA),
		ledger.BudgetError{Scope: taskA, Limit: M("1"), Held: M("1"), Asked: M("0.000000001")})
}

func testShrinkGone(e *env) {
	if err := e.shrink("never-reserved", "0"); err != nil {
		e.t.Errorf("Shrink of an unknown id: %v", err)
	}
	e.mustReserve("released", "1", taskA)
	if err := e.s.Release(e.ctx, "released"); err != nil {
		e.t.Fatal(err)
	}
	if err := e.shrink("released", "0"); err != nil {
		e.t.Errorf("Shrink of a released id: %v", err)
	}
	e.mustReserve("settled", "1", taskA)
	e.mustSettle("settled", "0.75", taskA)
	if err := e.shrink("settled", "0"); err != nil {
		e.t.Errorf("Shrink of a settled id: %v", err)
	}
	e.want(taskA, "0.75", "0", false)
	if err := e.settle("settled", "0.75", taskA); !errors.Is(err, ledger.ErrAlreadySettled) {
		e.t.Errorf("settle after Shrink: %v; want ErrAlreadySettled", err)
	}
	// Neither a shrink nor a reservation brings a settled id back.
	if err := e.reserve("settled", "1", taskA); !errors.Is(err, ledger.ErrDuplicateInvocation) {
		e.t.Errorf("Reserve of a settled id: %v; want ErrDuplicateInvocation", err)
	}
	e.want(taskA, "0.75", "0", false)
}

// Many invocations settle against one lease at once, each twice: every
// draw and every charge lands exactly once.
func testConcurrentLease(e *env) {
	const n = 24
	e.budget(taskA, "100")
	e.mustReserve("lease-1", "10", taskA, month)
	e.mustReserve("other", "1", taskA)
	var want provider.Money
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		cost := ActualCost(M("0.3"), i)
		want += cost
		s := e.leaseSettlement(fmt.Sprintf("inv-%d", i), cost.String(), "lease-1", "0.3", taskA, month)
		s.Earlier = []ledger.AttemptRow{{Provider: "sim", Outcome: "overloaded"}}
		for j := range 2 {
			wg.Go(func() { errs[2*i+j] = e.s.Settle(e.ctx, s) })
		}
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
	if ok != n {
		e.t.Errorf("%d settlements succeeded; want %d", ok, n)
	}
	e.want(taskA, want.String(), "3.8", false) // 10 − 24 × 0.3 + 1
	e.want(month, want.String(), "2.8", false)
	if tot := e.spend(ledger.Filter{}).Total; tot.Attempts != 2*n || tot.Cost != want {
		e.t.Errorf("Spend total = %d attempts costing $%s; want %d costing $%s", tot.Attempts, tot.Cost, 2*n, want)
	}
	// Drawing past the end floors at zero under concurrency too.
	for i := range n {
		wg.Go(func() {
			errs[i] = e.s.Settle(e.ctx, e.leaseSettlement(fmt.Sprintf("late-%d", i), "0", "lease-1", "0.3", taskA, month))
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:n]...); err != nil {
		e.t.Error(err)
	}
	e.want(taskA, want.String(), "1", false)
	e.want(month, want.String(), "0", false)
}
