package ledger_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
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
