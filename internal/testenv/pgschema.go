package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresSchema returns the test PostgreSQL's URL (see [Postgres]) and
// the name of a schema of its own, prefix followed by random hex, that
// no other test uses: dropped, with all it holds, when the test ends. The
// schema is not created: the store a test opens creates it.
func PostgresSchema(t testing.TB, prefix string) (url, schema string) {
	t.Helper()
	url = Postgres(t)
	b := make([]byte, 8)
	rand.Read(b)
	schema = prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	return url, schema
}
