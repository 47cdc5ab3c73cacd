package testenv

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Each call gives a schema name of its own, and the schema (created by
// the test, with a table) is dropped when the test that asked ends.
func TestPostgresSchemaIsUniqueAndDropped(t *testing.T) {
	var url, schema string
	t.Run("uses", func(t *testing.T) {
		var other string
		url, schema = PostgresSchema(t, "testenvtest_")
		_, other = PostgresSchema(t, "testenvtest_")
		if schema == other || !strings.HasPrefix(schema, "testenvtest_") {
			t.Fatalf("schemas %q and %q", schema, other)
		}
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".t (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	if url == "" {
		t.Skip("skipped: PostgreSQL is not reachable (the subtest above says where it looked), so the schema's drop is not checked")
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n); err != nil || n != 0 {
		t.Errorf("the schema %s outlived its test (%d, %v)", schema, n, err)
	}
}
