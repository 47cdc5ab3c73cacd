package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

func openSQLite(t *testing.T, opts ...ledger.Option) ledger.Store {
	t.Helper()
	s, err := ledger.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), ".cortexbuild", "ledger.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLite(t *testing.T) { ledgertest.RunStoreTests(t, openSQLite) }

func TestSQLiteSynchronousNormal(t *testing.T) {
	ledgertest.RunStoreTests(t, func(t *testing.T, opts ...ledger.Option) ledger.Store {
		return openSQLite(t, append(opts, ledger.WithSynchronousNormal())...)
	})
}

// sqliteSite is a database file that tests and helper processes open.
func sqliteSite(t *testing.T) ledgertest.Site {
	path := filepath.Join(t.TempDir(), ".cortexbuild", "ledger.db")
	raw := func(ctx context.Context, fn func(*sql.DB) error) error {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(db)
	}
	return ledgertest.Site{
		ID: "sqlite:" + path,
		Open: func(ctx context.Context, opts ...ledger.Option) (ledger.Store, error) {
			return ledger.OpenSQLite(ctx, path, opts...)
		},
		Versions: func(ctx context.Context) (vs []int, err error) {
			err = raw(ctx, func(db *sql.DB) error {
				rows, err := db.QueryContext(ctx, "SELECT version FROM schema_version ORDER BY version")
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					var v int
					if err := rows.Scan(&v); err != nil {
						return err
					}
					vs = append(vs, v)
				}
				return rows.Err()
			})
			return vs, err
		},
		ForceVersion: func(ctx context.Context, v int) error {
			return raw(ctx, func(db *sql.DB) error {
				_, err := db.ExecContext(ctx, "INSERT INTO schema_version (version, description, applied_at) VALUES ($1, 'from the future', 0)", v)
				return err
			})
		},
		CreateAt: func(ctx context.Context, v int) error {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			return ledger.CreateSQLiteAt(ctx, path, v)
		},
		Exec: func(ctx context.Context, query string, args ...any) error {
			return raw(ctx, func(db *sql.DB) error {
				_, err := db.ExecContext(ctx, strings.ReplaceAll(query, "_S_.", ""), args...)
				return err
			})
		},
	}
}

func TestSQLiteSite(t *testing.T)      { ledgertest.RunSiteTests(t, sqliteSite) }
func TestSQLiteProcesses(t *testing.T) { ledgertest.RunProcessTests(t, sqliteSite) }

func TestSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "ledger.db")
	s, err := ledger.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v; want 0600", fi.Mode().Perm())
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	if !strings.HasPrefix(ledger.DefaultSQLitePath, ".cortexbuild/") {
		t.Errorf("DefaultSQLitePath %q is not under .cortexbuild/", ledger.DefaultSQLitePath)
	}
}

func TestSQLiteUnavailable(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	notDB := filepath.Join(dir, "garbage.db")
	for _, f := range []string{notDir, notDB} {
		if err := os.WriteFile(f, []byte(strings.Repeat("this is not a database\n", 512)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"parent is a file", filepath.Join(notDir, "ledger.db"), ledger.ErrUnavailable},
		{"not a database", notDB, ledger.ErrUnavailable},
		{"query in path", filepath.Join(dir, "x.db?mode=ro"), ledger.ErrInvalid},
		{"empty path", "", ledger.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ledger.OpenSQLite(t.Context(), tc.path)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("OpenSQLite(%q) = %v; want %v", tc.path, err, tc.want)
			}
		})
	}
}
