package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	if err := s.RecordAttempt(t.Context(), ledger.AttemptRow{InvocationID: "a", Provider: "p", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v; want 0600", p, fi.Mode().Perm())
		}
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

// posixLocks counts the POSIX (fcntl) locks /proc/locks lists for process
// pid on the file at path; ok is false where there is no /proc/locks.
func posixLocks(t *testing.T, pid int, path string) (n int, ok bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.Replace(line, "->", "", 1))
		if len(f) >= 6 && f[1] == "POSIX" && f[4] == strconv.Itoa(pid) && strings.HasSuffix(f[5], ":"+strconv.FormatUint(ino, 10)) {
			n++
		}
	}
	return n, true
}

// A store holds SQLite's lock on its database file for as long as it is
// open, even when a second store of the same process opens the same file:
// another process's plain SQLite client that opens, reads and closes the
// database meanwhile never finds itself the last connection, so it never
// checkpoints and deletes the WAL under the stores, and every row either
// store committed is in the file afterwards.
func TestSQLiteKeepsItsLockWhenOpenedTwice(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), ".cortexbuild", "state.db")
	first, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: "first-0", Provider: "p", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	second, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if n, ok := posixLocks(t, os.Getpid(), path); ok && n == 0 {
		t.Errorf("/proc/locks lists no lock of this process on %s after a second store opened it", path)
	}
	client := ledgertest.StartPlainClient(t, path, "SELECT count(*) FROM attempts")
	const rows = 200
	for i := 1; i < rows; i++ {
		st, name := first, "first"
		if i%2 == 1 {
			st, name = second, "second"
		}
		if err := st.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: fmt.Sprintf("%s-%d", name, i), Provider: "p", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	client.Sync()
	rep := client.Stop()
	if rep.Rounds < 2 || rep.WALMissing != 0 {
		t.Errorf("the plain client did %d rounds and found %s-wal deleted after %d of them; want it never deleted while the stores are open (errors: %d, first %q)",
			rep.Rounds, path, rep.WALMissing, rep.Errors, rep.FirstError)
	}
	if n, ok := posixLocks(t, os.Getpid(), path); ok && n == 0 {
		t.Errorf("/proc/locks lists no lock of this process on %s while its stores are open", path)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM attempts").Scan(&n); err != nil || n != rows {
		t.Errorf("attempts in %s after both stores closed: %d, %v; want %d", path, n, err, rows)
	}
}

// An event for a task nobody started is refused without the write lock:
// while a second client holds that lock, the refusal still comes at once
// rather than after the busy timeout.
func TestSQLiteUnknownTaskEventSkipsTheWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := ledger.OpenSQLite(t.Context(), path, ledger.WithBusyTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.StartTask(t.Context(), "started", "low"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err = s.AddTaskEvent(ctx, ledger.TaskEvent{Task: "never-started", Kind: ledger.EventPlan, Agent: "planner", Provider: "p", Model: "m"})
	if !errors.Is(err, ledger.ErrNoTask) {
		t.Fatalf("AddTaskEvent(never-started) under another client's write lock: %v; want ErrNoTask", err)
	}
	// A started task's event is written once the lock is free.
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTaskEvent(t.Context(), ledger.TaskEvent{Task: "started", Kind: ledger.EventPlan, Agent: "planner", Provider: "p", Model: "m"}); err != nil {
		t.Fatalf("AddTaskEvent(started): %v", err)
	}
}
