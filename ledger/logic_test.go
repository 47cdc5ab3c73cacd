package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cortexbuild/cortexbuild/provider"
)

func TestScopeValidate(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ok       bool
		kind, id string
	}{
		{"task:abc", true, "task", "abc"},
		{"task:a:b c", true, "task", "a:b c"},
		{"month:2026-05", true, "month", "2026-05"},
		{"month:2026-5", false, "", ""},
		{"month:2026-13", false, "", ""},
		{"month:26-05", false, "", ""},
		{"task:", false, "", ""},
		{"task: padded", false, "", ""},
		{"task:a\nb", false, "", ""},
		{"task:" + strings.Repeat("x", 201), false, "", ""},
		{"agent:coder", false, "", ""},
		{"task", false, "", ""},
		{"", false, "", ""},
	} {
		s, err := ParseScope(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseScope(%q) error = %v; want ok %v", tc.in, err, tc.ok)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseScope(%q) error %v does not wrap ErrInvalid", tc.in, err)
		}
		if tc.ok && (s.Kind() != tc.kind || s.ID() != tc.id) {
			t.Errorf("ParseScope(%q) = kind %q id %q", tc.in, s.Kind(), s.ID())
		}
	}
	if got := MonthScope(time.Date(2026, 12, 31, 23, 0, 0, 0, time.FixedZone("x", -3600)).In(time.UTC)); got != "month:2027-01" {
		t.Errorf("MonthScope = %s", got)
	}
	if got := TaskScope("t-1"); got != "task:t-1" || got.Validate() != nil {
		t.Errorf("TaskScope = %s", got)
	}
}

func TestNormScopes(t *testing.T) {
	got, err := normScopes([]Scope{"task:b", "month:2026-05", "task:a", "task:b"})
	if err != nil || fmt.Sprint(got) != "[month:2026-05 task:a task:b]" {
		t.Errorf("normScopes = %v, %v", got, err)
	}
	if _, err := normScopes(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("normScopes(nil) = %v", err)
	}
}

func TestExceeds(t *testing.T) {
	const max = provider.Money(math.MaxInt64)
	for _, tc := range []struct {
		spent, held, amount, limit provider.Money
		want                       bool
	}{
		{0, 0, 0, 0, false},
		{0, 0, 1, 0, true},
		{3, 4, 3, 10, false},
		{3, 4, 4, 10, true},
		{11, 0, 0, 10, true},
		{0, 11, 0, 10, true},
		{max, max, max, max, true}, // would overflow int64
		{1, max - 1, 0, max, false},
		{1, max - 1, 1, max, true},
	} {
		if got := exceeds(tc.spent, tc.held, tc.amount, tc.limit); got != tc.want {
			t.Errorf("exceeds(%d, %d, %d, %d) = %v; want %v", tc.spent, tc.held, tc.amount, tc.limit, got, tc.want)
		}
	}
}

func TestAdmit(t *testing.T) {
	states := []scopeState{
		{scope: "month:2026-05", limited: true, limit: 10, spent: 9},
		{scope: "task:a", paused: true, reason: "stop"},
		{scope: "task:b", limited: true, limit: 1},
	}
	// A pause anywhere wins over a budget.
	var pe *PausedError
	if err := admit(states, 5); !errors.As(err, &pe) || pe.Scope != "task:a" || pe.Reason != "stop" {
		t.Errorf("admit = %v; want the pause of task:a", err)
	}
	states[1].paused = false
	var be *BudgetError
	if err := admit(states, 2); !errors.As(err, &be) || be.Scope != "month:2026-05" || be.Asked != 2 || be.Spent != 9 {
		t.Errorf("admit = %v; want the month's budget", err)
	}
	if err := admit(states, 1); err != nil {
		t.Errorf("admit(1) = %v", err)
	}
}

func TestErrorsMatch(t *testing.T) {
	var err error = &BudgetError{Scope: "task:a", Limit: provider.Dollar, Asked: 2 * provider.Dollar}
	if !errors.Is(err, ErrOverBudget) || errors.Is(err, ErrPaused) {
		t.Error("BudgetError does not match ErrOverBudget alone")
	}
	if want := "ledger: budget of task:a would be exceeded: limit $1.00, spent $0.00, held $0.00, asked $2.00"; err.Error() != want {
		t.Errorf("BudgetError text %q", err)
	}
	err = fmt.Errorf("wrapped: %w", &PausedError{Scope: "task:a", Reason: "r"})
	if !errors.Is(err, ErrPaused) || errors.Is(err, ErrOverBudget) {
		t.Error("PausedError does not match ErrPaused alone")
	}
	if !errors.Is(ErrClosed, ErrUnavailable) {
		t.Error("ErrClosed is not an ErrUnavailable")
	}
}

func TestPauseReason(t *testing.T) {
	if got := pauseReason("task:x", provider.MustMoney("5"), provider.MustMoney("5.000000001")); got != "task budget reached: spent $5.000000001 of $5.00" {
		t.Errorf("task reason %q", got)
	}
	if got := pauseReason("month:2026-05", provider.MustMoney("100"), provider.MustMoney("100")); got != "monthly budget reached for 2026-05: spent $100.00 of $100.00" {
		t.Errorf("month reason %q", got)
	}
}

func TestRemaining(t *testing.T) {
	for _, tc := range []struct {
		b    Budget
		want provider.Money
		ok   bool
	}{
		{Budget{Limited: true, Limit: 10, Spent: 3, Held: 4}, 3, true},
		{Budget{Limited: true, Limit: 10, Spent: 12}, 0, true},
		{Budget{Spent: 12}, 0, false},
	} {
		if got, ok := tc.b.Remaining(); got != tc.want || ok != tc.ok {
			t.Errorf("%+v.Remaining() = %d, %v", tc.b, got, ok)
		}
	}
}

func TestMigrationsAreNumberedInOrder(t *testing.T) {
	for _, m := range migrations {
		if m.description == "" || len(m.sqlite) == 0 || len(m.postgres) == 0 {
			t.Errorf("migration %d lacks a description or a dialect", m.version)
		}
		for _, q := range m.postgres {
			if strings.Contains(q, " ON ") && !strings.Contains(q, "_S_.") || strings.Contains(q, "TABLE ") && !strings.Contains(q, "TABLE _S_.") {
				t.Errorf("migration %d: PostgreSQL statement without the schema: %s", m.version, q)
			}
		}
	}
	for i, m := range migrations {
		if m.version != i+1 {
			t.Errorf("migration %d is number %d in the list: versions are 1, 2, 3, … in order", m.version, i+1)
		}
	}
	if last := migrations[len(migrations)-1].version; last != LatestSchemaVersion {
		t.Errorf("the last migration is %d, LatestSchemaVersion %d", last, LatestSchemaVersion)
	}
}

func TestFilterWhere(t *testing.T) {
	from := time.Unix(10, 0)
	where, args := filterWhere("p1", Filter{Task: "t", Provider: "p", From: from}, 3)
	if where != " WHERE project = $3 AND task = $4 AND provider = $5 AND at >= $6" || fmt.Sprint(args) != "[p1 t p 10000000000]" {
		t.Errorf("filterWhere = %q %v", where, args)
	}
	if where, args := filterWhere("", Filter{By: ByTask}, 1); where != " WHERE project = $1" || fmt.Sprint(args) != "[]" {
		t.Errorf("empty filter = %q %v", where, args)
	}
	if err := checkFilter(Filter{From: from, To: from}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty range: %v", err)
	}
}

func TestPgErrClassification(t *testing.T) {
	for _, tc := range []struct {
		err         error
		unavailable bool
	}{
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "53100"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errors.New("can't scan into dest[0]"), false},
	} {
		err := pgErr("op", tc.err)
		if errors.Is(err, ErrUnavailable) != tc.unavailable || !errors.Is(err, tc.err) && !strings.Contains(err.Error(), tc.err.Error()) {
			t.Errorf("pgErr(%v) = %v; want unavailable %v", tc.err, err, tc.unavailable)
		}
	}
}

// A key budget's period starts where KeyScope's scope for it starts: the
// instant before belongs to the previous period's scope (none for total).
func TestPeriodStartIsWhereTheKeyScopeChanges(t *testing.T) {
	zone := time.FixedZone("UTC-5", -5*3600)
	for _, at := range []time.Time{
		time.Date(2026, 3, 1, 0, 0, 0, 0, zone),
		time.Date(2026, 3, 31, 23, 59, 59, 0, zone),
		time.Date(2026, 12, 31, 22, 0, 0, 0, zone), // already 2027 in UTC
	} {
		for _, period := range Periods {
			start := PeriodStart(period, at)
			now, _ := KeyScope("k1", period, at)
			atStart, _ := KeyScope("k1", period, start.In(zone))
			if atStart != now {
				t.Errorf("%s %v: the scope at its start %v is %s, at it %s", period, at, start, atStart, now)
			}
			if period == PeriodTotal {
				if !start.IsZero() {
					t.Errorf("total starts at %v", start)
				}
				continue
			}
			if before, _ := KeyScope("k1", period, start.Add(-time.Nanosecond).In(zone)); before == now {
				t.Errorf("%s %v: the instant before its start %v is in the same scope %s", period, at, start, now)
			}
		}
	}
}
