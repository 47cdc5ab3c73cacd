package ledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

// newSchema returns a fresh schema name in the test database, dropped when
// t ends.
func newSchema(t testing.TB, url string) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	schema := "ledgertest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	return schema
}

func openPostgres(t *testing.T, opts ...ledger.Option) ledger.Store {
	t.Helper()
	url := testenv.Postgres(t)
	schema := newSchema(t, url)
	s, err := ledger.OpenPostgres(t.Context(), url, append(opts, ledger.WithSchema(schema))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgres(t *testing.T) { ledgertest.RunStoreTests(t, openPostgres) }

// postgresSite is a schema that tests and helper processes open.
func postgresSite(t *testing.T) ledgertest.Site {
	url := testenv.Postgres(t)
	schema := newSchema(t, url)
	raw := func(ctx context.Context, fn func(*pgx.Conn) error) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return fn(conn)
	}
	return ledgertest.Site{
		ID: "postgres:" + schema + ":" + url,
		Open: func(ctx context.Context, opts ...ledger.Option) (ledger.Store, error) {
			return ledger.OpenPostgres(ctx, url, append(opts, ledger.WithSchema(schema))...)
		},
		Versions: func(ctx context.Context) (vs []int, err error) {
			err = raw(ctx, func(c *pgx.Conn) error {
				rows, err := c.Query(ctx, "SELECT version FROM "+schema+".schema_version ORDER BY version")
				if err != nil {
					return err
				}
				vs, err = pgx.CollectRows(rows, pgx.RowTo[int])
				return err
			})
			return vs, err
		},
		ForceVersion: func(ctx context.Context, v int) error {
			return raw(ctx, func(c *pgx.Conn) error {
				_, err := c.Exec(ctx, "INSERT INTO "+schema+".schema_version (version, description, applied_at) VALUES ($1, 'from the future', 0)", v)
				return err
			})
		},
		CreateAt: func(ctx context.Context, v int) error { return ledger.CreatePostgresAt(ctx, url, schema, v) },
		Exec: func(ctx context.Context, query string, args ...any) error {
			return raw(ctx, func(c *pgx.Conn) error {
				_, err := c.Exec(ctx, strings.ReplaceAll(query, "_S_.", schema+"."), args...)
				return err
			})
		},
	}
}

func TestPostgresSite(t *testing.T)      { ledgertest.RunSiteTests(t, postgresSite) }
func TestPostgresProcesses(t *testing.T) { ledgertest.RunProcessTests(t, postgresSite) }

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestPostgresUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		opts      []ledger.Option
		want      error
	}{
		{"closed port", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=5", closedPort(t)), nil, ledger.ErrUnavailable},
		{"malformed URL", "postgres://%zz", nil, ledger.ErrInvalid},
		{"bad schema name", "postgres://postgres@127.0.0.1:1/test", []ledger.Option{ledger.WithSchema("Robert'); DROP TABLE")}, ledger.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ledger.OpenPostgres(t.Context(), tc.url, tc.opts...)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("OpenPostgres(%q) = %v; want %v", tc.url, err, tc.want)
			}
		})
	}
}
