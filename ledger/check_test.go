package ledger_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
)

// fillSQLite writes n attempts (with long text, so that they take many
// pages) and closes the store, leaving everything in the database file.
func fillSQLite(t *testing.T, path string, n int) {
	t.Helper()
	ctx := t.Context()
	s, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: fmt.Sprintf("inv-%05d", i), Task: strings.Repeat("t", 200), Provider: "p", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatalf("%s-wal is still there after the last store closed", path)
	}
}

// corruptPages overwrites pages [from, from+n) of the SQLite file at path
// (4096-byte pages, numbered from 1) with garbage.
func corruptPages(t *testing.T, path string, from, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024*n))
	if _, err := f.WriteAt(junk, int64(from-1)*4096); err != nil {
		t.Fatal(err)
	}
}

func TestSQLiteCheck(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	fillSQLite(t, path, 2000)
	s, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Check(ctx)
	s.Close()
	if err != nil || len(c.Problems) != 0 || !strings.Contains(c.Checked, "integrity_check") {
		t.Fatalf("Check of a sound file = %+v, %v; want no problems", c, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	pages := int(fi.Size() / 4096)
	if pages < 20 {
		t.Fatalf("%d pages: too few to damage the middle", pages)
	}
	corruptPages(t, path, pages/2, 3)
	s, err = ledger.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err = s.Check(ctx)
	if err != nil || len(c.Problems) == 0 {
		t.Fatalf("Check of a file with 3 pages overwritten = %+v, %v; want its problems", c, err)
	}
	t.Logf("problems: %q", c.Problems)
}

func TestPostgresCheck(t *testing.T) {
	ctx := t.Context()
	url := testenv.Postgres(t)
	schema := newSchema(t, url)
	s, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: "a", Provider: "p", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Check(ctx)
	if err != nil || len(c.Problems) != 0 || !strings.Contains(c.Checked, "schema version") {
		t.Fatalf("Check of a sound schema = %+v, %v; want no problems", c, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`INSERT INTO ` + schema + `.reservations (invocation_id, amount_nanos, created_at, expires_at) VALUES ('orphan', 1, 0, 9)`,
		`INSERT INTO ` + schema + `.holds (invocation_id, project, scope, amount_nanos, expires_at) VALUES ('orphan', '', 'task:nowhere', 1, 9)`,
		`INSERT INTO ` + schema + `.settlements (invocation_id, cost_nanos, settled_at) VALUES ('rowless', 5, 0)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	c, err = s.Check(ctx)
	if err != nil || len(c.Problems) != 2 || !strings.Contains(c.Problems[0], "1 holds on a scope") || !strings.Contains(c.Problems[1], "1 settlements without") {
		t.Fatalf("Check after an orphan hold and a settlement without its row = %+v, %v; want both", c, err)
	}
}
