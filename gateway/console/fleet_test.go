package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/gateway/console"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
)

// replica is one console of a fleet: its own key store and sessions,
// opened on the shared state with a pool of its own, as another process
// would open them.
type replica struct {
	*fixture
	shared *pgstate.Store
}

// fleetOf returns two consoles sharing one schema of the test
// PostgreSQL (skipped with the reason where there is none), each looking
// at the shared keys every 100 ms as 'cortexbuild serve' does, and an
// admin key made on the first.
func fleetOf(t *testing.T) (a, b replica, site pgstatetest.Site) {
	t.Helper()
	site = pgstatetest.New(t)
	mk := func() replica {
		st := site.Open(t, "demo")
		ks := gateway.OpenSharedKeyStore(st.Set(gateway.KeySet))
		ks.SetRecheck(100 * time.Millisecond)
		fx := newFixtureWith(t, false, func(o *console.Options) {
			o.Keys, o.KeyStore, o.Sessions, o.Fleet = ks, nil, st.Sessions(), true
		})
		fx.keys = ks
		return replica{fixture: fx, shared: st}
	}
	a, b = mk(), mk()
	admin, _, err := a.keys.Create(gateway.KeySpec{Name: "fleet ops", Project: "demo", Role: gateway.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	a.key, b.key = admin, admin
	return a, b, site
}

// on is the same browser (its cookies, its form token) sent to another
// replica, as a round-robin balancer does.
func (b *browser) on(fx *fixture) *browser {
	return &browser{t: b.t, fx: fx, cookies: b.cookies, csrf: b.csrf}
}

func hashHex(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// dump is every row of every table of the site's schema, as text.
func dump(t *testing.T, site pgstatetest.Site) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, site.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, site.Schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		t.Fatalf("tables of %s: %v %v", site.Schema, tables, err)
	}
	var b strings.Builder
	for _, table := range tables {
		var text *string
		q := `SELECT string_agg(t::text, E'\n') FROM ` + pgx.Identifier{site.Schema, table}.Sanitize() + ` t`
		if err := conn.QueryRow(ctx, q).Scan(&text); err != nil {
			t.Fatal(err)
		}
		b.WriteString(table + ":\n")
		if text != nil {
			b.WriteString(*text + "\n")
		}
	}
	return b.String()
}

// A session opened on one replica is one on the other at once: its pages
// load there and its form token is accepted there; the database holds
// the token's hash, never the token. A logout on the second replica ends
// it on the first.
func TestFleetSessionOnEveryReplica(t *testing.T) {
	a, b, site := fleetOf(t)
	onA := a.browser(t).loggedIn()
	onB := onA.on(b.fixture)
	if w := onB.do(http.MethodGet, "/console/control", nil); w.Code != http.StatusOK {
		t.Fatalf("a page of replica B with a session of A = %d %s", w.Code, w.Header().Get("Location"))
	}
	if onB.csrf != onA.csrf {
		t.Errorf("replica B gives the session another form token")
	}
	if w := onB.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {onA.csrf}, "action": {"pause"}, "reason": {"fleet"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("a POST on replica B with the form token of A's page = %d %s", w.Code, w.Body)
	}
	if _, paused, _ := b.state.Paused(context.Background()); !paused {
		t.Error("the POST on replica B did not pause")
	}
	if w := onB.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {"x" + onA.csrf}, "action": {"resume"}}); w.Code != http.StatusForbidden {
		t.Errorf("a POST on replica B with a wrong form token = %d, want 403", w.Code)
	}
	token := onA.cookies["cortexbuild_console"].Value
	db := dump(t, site)
	if strings.Contains(db, token) || !strings.Contains(db, hashHex(token)) {
		t.Errorf("the database holds the session token, or not its hash:\n%s", db)
	}

	// Logging out on B ends the session on A.
	if w := onB.do(http.MethodPost, "/console/logout", url.Values{"csrf": {onA.csrf}}); w.Code != http.StatusSeeOther {
		t.Fatalf("logout on B = %d", w.Code)
	}
	stale := a.browser(t)
	stale.cookies["cortexbuild_console"] = &http.Cookie{Name: "cortexbuild_console", Value: token}
	if w := stale.do(http.MethodGet, "/console/control", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/login" {
		t.Errorf("replica A after a logout on B = %d %q, want the login", w.Code, w.Header().Get("Location"))
	}
	if w := stale.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {onA.csrf}, "action": {"resume"}}); w.Code != http.StatusUnauthorized {
		t.Errorf("a POST on replica A after a logout on B = %d, want 401", w.Code)
	}
	if strings.Contains(dump(t, site), hashHex(token)) {
		t.Error("the logged-out session is still in the database")
	}
}

// Revoking the key of a session on one replica ends the session on the
// other within a second (the replicas look at the shared keys every
// 100 ms).
func TestFleetRevokedKeyEndsTheSessionEverywhere(t *testing.T) {
	a, b, _ := fleetOf(t)
	onA := a.browser(t).loggedIn()
	onB := onA.on(b.fixture)
	if w := onB.do(http.MethodGet, "/console/access", nil); w.Code != http.StatusOK {
		t.Fatalf("replica B = %d", w.Code)
	}
	if w := onA.do(http.MethodPost, "/console/access/revoke", url.Values{"csrf": {onA.csrf}, "id": {keyID(a.key)}}); w.Code != http.StatusSeeOther {
		t.Fatalf("revoke on A = %d %s", w.Code, w.Body)
	}
	start := time.Now()
	deadline := start.Add(time.Second)
	for {
		w := onB.do(http.MethodGet, "/console/login", nil) // the login form only without a session
		if w.Code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica B still serves the session of a key revoked on A %v later", time.Since(start))
		}
	}
	t.Logf("replica B ended the session %v after the revocation on A", time.Since(start).Round(time.Millisecond))
	if w := onA.do(http.MethodGet, "/console/", nil); w.Code != http.StatusSeeOther {
		t.Errorf("replica A after revoking the session's key = %d", w.Code)
	}
}

// A key created on one replica is shown once, in the response to the
// form, and kept nowhere in the database: no table holds its secret
// (nor the admin key's); every replica accepts it.
func TestFleetNewKeySecretShownOnceAndNotStored(t *testing.T) {
	a, b, site := fleetOf(t)
	onA := a.browser(t).loggedIn()
	onB := onA.on(b.fixture)
	w := onB.do(http.MethodPost, "/console/access", url.Values{"csrf": {onA.csrf}, "name": {"made on B"}, "role": {"call"}})
	m := secretRE.FindStringSubmatch(w.Body.String())
	if w.Code != http.StatusOK || m == nil {
		t.Fatalf("create on B = %d, secret shown: %v", w.Code, m != nil)
	}
	token := m[1]
	for name, br := range map[string]*browser{"A": onA, "B": onB} {
		if page := br.do(http.MethodGet, "/console/access", nil).Body.String(); strings.Contains(page, token) || strings.Contains(page, `id="created"`) {
			t.Errorf("replica %s shows the secret again", name)
		}
	}
	// Replica A looks for a key it does not know at most every 10 ms.
	for deadline := time.Now().Add(time.Second); ; {
		k, err := a.keys.Check(token)
		if err == nil && k.Name == "made on B" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica A checks the key made on B: %+v %v", k, err)
		}
	}
	secret := token[strings.LastIndex(token, "_")+1:]
	adminSecret := a.key[strings.LastIndex(a.key, "_")+1:]
	db := dump(t, site)
	if !strings.Contains(db, keyID(token)) || !strings.Contains(db, "console_sessions:\n(") {
		t.Fatalf("the dump lacks the new key's record or the session:\n%s", db)
	}
	if strings.Contains(db, secret) || strings.Contains(db, adminSecret) {
		t.Error("a table of the shared state holds a key's secret")
	}
}

// When the shared sessions cannot be read, pages and forms are refused
// (503), not served without a session check.
func TestFleetSessionsUnreadableFailClosed(t *testing.T) {
	a, b, _ := fleetOf(t)
	onA := a.browser(t).loggedIn()
	onB := onA.on(b.fixture)
	b.shared.Close()
	if w := onB.do(http.MethodGet, "/console/control", nil); w.Code != http.StatusServiceUnavailable {
		t.Errorf("a page with the sessions unreadable = %d, want 503", w.Code)
	}
	if w := onB.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {onA.csrf}, "action": {"pause"}}); w.Code != http.StatusServiceUnavailable {
		t.Errorf("a POST with the sessions unreadable = %d, want 503", w.Code)
	}
	if _, paused, _ := b.state.Paused(context.Background()); paused {
		t.Error("paused without a session check")
	}
}

// On a fleet the provider keys page saves nothing: it says why and where
// to set the keys, has no field to type one in, refuses a POST with the
// same words, and writes no secrets file; the connection test still runs.
func TestFleetProviderKeysAreNotSaved(t *testing.T) {
	fx := newFixtureWith(t, false, func(o *console.Options) { o.Fleet = true })
	b := fx.browser(t).loggedIn()
	page := b.do(http.MethodGet, "/console/keys", nil).Body.String()
	for _, want := range []string{`id="fleet-keys"`, "one replica of a fleet", "environment", "cortexbuild-secrets", "deploy/.env", `id="test-claude"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the provider keys page of a fleet lacks %q", want)
		}
	}
	if strings.Contains(page, `name="cred.`) || strings.Contains(page, `id="save-`) {
		t.Error("the provider keys page of a fleet has a field to save a key")
	}
	w := b.do(http.MethodPost, "/console/keys/claude", url.Values{"csrf": {b.csrf}, "cred.api_key": {goodKey}})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "Nothing was saved") || !strings.Contains(w.Body.String(), "one replica of a fleet") ||
		strings.Contains(w.Body.String(), goodKey) {
		t.Errorf("saving a provider key on a fleet = %d", w.Code)
	}
	if fields, err := fx.secrets.Fields("claude"); err != nil || len(fields) != 0 {
		t.Errorf("the secrets file holds %v (%v)", fields, err)
	}
	if w := b.do(http.MethodPost, "/console/keys/claude/test", url.Values{"csrf": {b.csrf}}); w.Code != http.StatusOK || fx.checks.Load() != 1 {
		t.Errorf("connection test on a fleet = %d, %d checks", w.Code, fx.checks.Load())
	}
}
