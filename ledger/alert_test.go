package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

func TestSQLiteAlertThresholds(t *testing.T) {
	ledgertest.RunAlertThresholdTests(t, func(t *testing.T, opts ...ledger.Option) (ledger.Store, error) {
		s, err := ledger.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), opts...)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	})
}

func TestPostgresAlertThresholds(t *testing.T) {
	ledgertest.RunAlertThresholdTests(t, func(t *testing.T, opts ...ledger.Option) (ledger.Store, error) {
		url := testenv.Postgres(t)
		s, err := ledger.OpenPostgres(t.Context(), url, append(opts, ledger.WithSchema(newSchema(t, url)))...)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	})
}

// The fast path applies settlements in batches (one charge per scope for
// the whole batch): calls from many goroutines that cross every threshold
// still record each once, on both stores.
func TestFastAlertsOncePerThreshold(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		testFastAlerts(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		url := testenv.Postgres(t)
		st, err := ledger.OpenPostgres(context.Background(), url, ledger.WithSchema(newSchema(t, url)))
		if err != nil {
			t.Fatal(err)
		}
		testFastAlerts(t, st)
	})
}

func testFastAlerts(t *testing.T, st ledger.Store) {
	ctx := context.Background()
	f, err := ledger.NewFast(ctx, st, filepath.Join(t.TempDir(), "journal"), ledger.FastOnError(func(err error) { t.Log(err) }))
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.SetBudget(ctx, fastTask, mustM("1")); err != nil {
		t.Fatal(err)
	}
	// 16 goroutines of 20 pairs of $0.01 against $1: 100 admitted, every
	// threshold crossed.
	ok, _ := concurrentPairs(t, f, 16, 20)
	as, err := f.Alerts(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, a := range as {
		got[fmt.Sprintf("%s %d%%", a.Scope, a.Threshold)]++
		if a.Limit != mustM("1") {
			t.Errorf("alert %+v: limit", a)
		}
	}
	want := map[string]int{"task:t1 50%": 1, "task:t1 80%": 1, "task:t1 100%": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("admitted %d; alerts %v; want %v", ok, got, want)
	}
}
