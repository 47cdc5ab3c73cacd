package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// With the ledger on PostgreSQL and PostgreSQL unreachable (the proxy to it
// cut), the gateway answers 503 (ledger_unavailable) naming the server,
// not the password of its URL, and no call reaches the provider.
func TestPostgresUnreachableIs503NamingIt(t *testing.T) {
	raw := testenv.Postgres(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw") // trust authentication ignores it
	schema := "gwledger_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	ctx := context.Background()
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	clk := ledgertest.NewClock(ledgertest.Epoch)
	st, err := ledger.OpenPostgres(ctx, u.String(), ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	fast, err := ledger.NewFast(ctx, st, t.TempDir(), ledger.FastAfterFunc(clk.AfterFunc), ledger.FastOnError(func(err error) { t.Log(err) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fast.Close() })
	w := newWorld(t, withOrch(func(s *orchestrator.Settings) { s.Ledger = fast }))
	body := `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`
	if code, _, resp := w.post(t, "/v1/chat/completions", body); code != http.StatusOK {
		t.Fatalf("with PostgreSQL reachable: %d %s", code, resp)
	}
	proxy.Cut()
	clk.Advance(ledger.DefaultHoldTTL / 5) // the renewal of the holds fails
	sent := len(w.anth.Requests())
	for range 3 {
		code, _, resp := w.post(t, "/v1/chat/completions", body)
		if code != http.StatusServiceUnavailable || !strings.Contains(resp, "ledger_unavailable") ||
			!strings.Contains(resp, "the ledger's PostgreSQL at "+proxy.Addr+" is unreachable") {
			t.Errorf("with PostgreSQL unreachable: %d %s; want 503 ledger_unavailable naming %s", code, resp, proxy.Addr)
		}
		if strings.Contains(resp, "s3cret-pw") {
			t.Errorf("the answer holds the password: %s", resp)
		}
	}
	if n := len(w.anth.Requests()) - sent; n != 0 {
		t.Errorf("%d calls reached the provider with PostgreSQL unreachable", n)
	}
}
