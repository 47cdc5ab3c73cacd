package ledger_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
	"github.com/cortexbuild/cortexbuild/provider"
)

// BenchmarkReserveSettle measures reserve+settle pairs per second and the
// p99 latency of a pair, with b.RunParallel: 2 goroutines on 2 cores (-cpu
// 2), and 16 (x8, as many invocations in flight as an orchestrator with
// many agents), which lets the embedded store commit several operations
// together.
//
//	go test -run '^$' -bench ReserveSettle -cpu 2 -benchtime 3s ./ledger/
func BenchmarkReserveSettle(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) ledger.Store
	}{
		{"sqlite", func(b *testing.B) ledger.Store { return benchSQLite(b) }},
		{"sqlite-fast", func(b *testing.B) ledger.Store {
			dir := b.TempDir()
			st, err := ledger.OpenSQLite(b.Context(), filepath.Join(dir, "ledger.db"))
			if err != nil {
				b.Fatal(err)
			}
			f, err := ledger.NewFast(b.Context(), st, filepath.Join(dir, "journal"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Close() })
			return f
		}},
		{"sqlite-sync-normal", func(b *testing.B) ledger.Store { return benchSQLite(b, ledger.WithSynchronousNormal()) }},
		{"postgres", func(b *testing.B) ledger.Store {
			url := testenv.Postgres(b)
			s, err := ledger.OpenPostgres(b.Context(), url, ledger.WithSchema(newSchema(b, url)), ledger.WithMaxConns(16))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	backends = append(backends, struct {
		name string
		open func(b *testing.B) ledger.Store
	}{"postgres-fast", func(b *testing.B) ledger.Store {
		url := testenv.Postgres(b)
		st, err := ledger.OpenPostgres(b.Context(), url, ledger.WithSchema(newSchema(b, url)), ledger.WithMaxConns(16))
		if err != nil {
			b.Fatal(err)
		}
		f, err := ledger.NewFast(b.Context(), st, filepath.Join(b.TempDir(), "journal"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}})
	for _, be := range backends {
		for _, par := range []int{1, 8} {
			name := be.name
			if par > 1 {
				name = fmt.Sprintf("%s-x%d", be.name, par)
			}
			b.Run(name, func(b *testing.B) {
				s := be.open(b)
				b.SetParallelism(par)
				ledgertest.BenchReserveSettle(b, s)
			})
		}
	}
}

func benchSQLite(b *testing.B, opts ...ledger.Option) ledger.Store {
	s, err := ledger.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkReserveSettleProcesses measures reserve+settle pairs per second
// over all the processes sharing one PostgreSQL database, each with its
// own fast path (budget leases and journal) and the same task and monthly
// budgets, as several `cortexbuild serve` processes would: the benchmark
// re-runs the test binary as 1 or 3 pairs processes (TestPairsProcess), 8
// goroutines each (32 in the last case), which share b.N attempts out and run them at once. The
// time runs from the start signal until every process has every
// settlement in the store and its leases given back. Every run checks that
// the store's spend is exactly the admitted pairs' cost, nothing is held,
// and no budget was passed; in budget-runs-out, the budgets hold half of
// the attempts' estimates, and a goroutine stops at its first refusal.
// proc-cpu-µs/pair is the CPU time the processes used (from their start,
// opening the store included) per admitted pair; the database's is not
// counted.
//
//	go test -run '^$' -bench ReserveSettleProcesses -cpu 2 -benchtime 3s ./ledger/
func BenchmarkReserveSettleProcesses(b *testing.B) {
	for _, tc := range []struct {
		name       string
		procs      int
		tight      bool
		goroutines int
	}{
		{"postgres-1-process", 1, false, 8},
		{"postgres-3-processes", 3, false, 8},
		{"postgres-3-processes-budget-runs-out", 3, true, 8},
		// As many calls in flight as a gateway serving many agents has:
		// on PostgreSQL a settlement waits for a round trip, so the pairs
		// per second of a process are its calls in flight over that.
		{"postgres-3-processes-32-goroutines", 3, false, 32},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := pairsRun{procs: tc.procs, goroutines: tc.goroutines, attempts: b.N, limit: provider.Money(b.N+1) * pairsEstimate}
			if tc.tight {
				r.limit, r.stopOnRefusal = provider.Money(b.N/2+1)*pairsEstimate, true
			}
			out := runPairs(b, r, b.StopTimer, b.StartTimer)
			if !tc.tight && out.refused != 0 {
				b.Errorf("%d reservations refused under budgets that fit them all", out.refused)
			}
			b.ReportMetric(float64(out.admitted)/out.elapsed.Seconds(), "pairs/s")
			b.ReportMetric(float64(out.refused), "refused")
			b.ReportMetric(float64(out.cpu.Microseconds())/float64(max(out.admitted, 1)), "proc-cpu-µs/pair")
			b.ReportMetric(0, "ns/op")
		})
	}
}
