// Package pgstatetest gives tests a schema of their own in the test
// PostgreSQL (see testenv.Postgres: skipped with the reason where it is
// absent, failed in CI), and stores opened on it as separate processes
// would open them: each with a pool of its own.
package pgstatetest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// Site is a schema of the test database, dropped when the test ends.
type Site struct {
	URL    string
	Schema string
}

// New returns a fresh schema in the test database.
func New(t testing.TB) Site {
	t.Helper()
	url, schema := testenv.PostgresSchema(t, "statetest_")
	return Site{URL: url, Schema: schema}
}

// Open opens the site's state of project, closed when the test ends.
func (s Site) Open(t testing.TB, project string) *pgstate.Store {
	t.Helper()
	st, err := pgstate.Open(t.Context(), s.URL, pgstate.Options{Project: project, Schema: s.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// Exec runs a statement on the site, its tables written _S_.table.
func (s Site) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, strings.ReplaceAll(sql, "_S_.", s.Schema+"."), args...); err != nil {
		t.Fatal(err)
	}
}
