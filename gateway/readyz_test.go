package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
)

// pgThrough opens a PostgreSQL ledger of the test database, in a schema of
// its own dropped when the test ends, whose connections go through a
// loopback proxy.
func pgThrough(t *testing.T) (*ledger.Postgres, *testenv.Proxy) {
	t.Helper()
	raw, schema := testenv.PostgresSchema(t, "gatewaytest_")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	if u.Port() == "" {
		target += ":5432"
	}
	p := testenv.NewProxy(t, target)
	u.Host = p.Addr
	st, err := ledger.OpenPostgres(t.Context(), u.String(), ledger.WithSchema(schema), ledger.WithProject("demo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, p
}

type readiness struct {
	Status  string   `json:"status"`
	Down    []string `json:"down"`
	Engines []struct {
		Name     string `json:"name"`
		Required bool   `json:"required"`
		Status   string `json:"status"`
		Reason   string `json:"reason"`
	} `json:"engines"`
}

// /readyz answers, without a key, whether the replica can serve calls:
// 200 "ready" with PostgreSQL and Redis up; 200 "degraded" naming Redis
// while Redis is cut (calls go on, see TestFleetRedisCutDegradesAndRecovers);
// 503 "not ready" naming PostgreSQL while PostgreSQL is cut (no call can be
// recorded); ready again once each is back, with no restart. The body
// never carries an address. /healthz stays 200 throughout.
func TestReadyzNamesTheEnginesDown(t *testing.T) {
	st, pg := pgThrough(t)
	rp := testenv.NewProxy(t, redisAddr(t))
	clk := &clock{t: time.Now()}
	r := openShared(t, redisFor(t, rp.Addr), clk, nil)
	w := newWorld(t, withGateway(func(o *gateway.Options) {
		o.Shared, o.SharedPrefix = r, sharedPrefix(t)
		o.Ready = []gateway.Engine{
			{Name: "postgres", Required: true, Ping: st.Ping},
			{Name: "redis", Ping: func(ctx context.Context) error { return r.Ping(ctx, gateway.ReadyTimeout) }},
		}
	}))
	check := func(what string, status int, want string, down ...string) {
		t.Helper()
		var got readiness
		st := w.getJSON(t, "/readyz", &got)
		if st != status || got.Status != want || !slices.Equal(got.Down, down) || len(got.Engines) != 2 {
			t.Errorf("%s: /readyz %d %+v; want %d %q, down %v", what, st, got, status, want, down)
		}
		for _, e := range got.Engines {
			if e.Required != (e.Name == "postgres") || (e.Status == "down") != slices.Contains(down, e.Name) || (e.Status == "down") != (e.Reason != "") {
				t.Errorf("%s: engine %+v", what, e)
			}
		}
		if raw := w.getRaw(t, "/readyz"); strings.Contains(raw, "127.0.0.1") || strings.Contains(raw, pg.Addr) || strings.Contains(raw, rp.Addr) {
			t.Errorf("%s: /readyz tells an address: %s", what, raw)
		}
		if st := w.getJSON(t, "/healthz", &map[string]any{}); st != 200 {
			t.Errorf("%s: /healthz %d", what, st)
		}
	}
	token, _, err := w.keys.Create(gateway.KeySpec{Name: "rpm", Project: "demo", KeyLimits: gateway.KeyLimits{RPM: 5}})
	if err != nil {
		t.Fatal(err)
	}
	check("both up", 200, "ready")
	rp.Cut()
	check("Redis cut", 200, "degraded", "redis")
	if st, d := chatOn(t, w, token); st != 200 || d != "rate-limits" {
		t.Errorf("Redis cut: a call got %d, degraded %q", st, d)
	}
	pg.Cut()
	check("both cut", 503, "not ready", "postgres", "redis")
	rp.Restore()
	check("PostgreSQL cut", 503, "not ready", "postgres")
	pg.Restore()
	check("both back", 200, "ready")
	// Redis answering /readyz ended its client's cool-down at once: the
	// next call counts across the fleet without waiting it out.
	if st, d := chatOn(t, w, token); st != 200 || d != "" {
		t.Errorf("after /readyz saw Redis back: %d, degraded %q", st, d)
	}
}

// getRaw GETs path without a key and returns the body.
func (w *world) getRaw(t *testing.T, path string) string {
	t.Helper()
	res, err := w.http().Get(w.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// getJSON GETs path without a key, decodes the body into v and returns
// the status.
func (w *world) getJSON(t *testing.T, path string, v any) int {
	t.Helper()
	res, err := w.http().Get(w.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode
}
