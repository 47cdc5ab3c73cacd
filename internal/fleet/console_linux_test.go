//go:build linux

package fleet_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// consoleClient is a browser of the console: it keeps cookies, sends a
// POST as a same-origin form, and does not follow redirects.
type consoleClient struct {
	t    *testing.T
	c    *http.Client
	csrf string
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func newConsoleClient(t *testing.T) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *consoleClient) do(method, base, path string, form url.Values) (int, string, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindSubmatch(page); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, resp.Header.Get("Location"), string(page)
}

// TestFleetConsole: behind HAProxy's round robin (no sticky sessions),
// a console login is a session on every replica: pages load and forms
// post whichever replica answers; a new key's secret is in the response
// to its form and in no table; the provider keys page saves nothing; a
// logout through the balancer ends the session on every replica, and
// revoking the session's key with the CLI of another replica ends it on
// every replica within a second.
func TestFleetConsole(t *testing.T) {
	f := newFleet(t, 3)
	admin, adminID := f.createKey(0, "ops", "--role", "admin")
	login := func() *consoleClient {
		b := newConsoleClient(t)
		b.do(http.MethodGet, f.lb, "/console/login", nil)
		if st, loc, page := b.do(http.MethodPost, f.lb, "/console/login", url.Values{"csrf": {b.csrf}, "key": {admin}}); st != http.StatusSeeOther || loc != "/console/" {
			t.Fatalf("login through HAProxy = %d %q\n%s", st, loc, page)
		}
		return b
	}
	b := login()
	// Six loads through the balancer reach each replica twice.
	for i := range 6 {
		if st, loc, _ := b.do(http.MethodGet, f.lb, "/console/control", nil); st != http.StatusOK {
			t.Fatalf("page load %d through HAProxy = %d %q", i, st, loc)
		}
	}
	for i := range 3 {
		st, loc, _ := b.do(http.MethodPost, f.lb, "/console/control/project", url.Values{"csrf": {b.csrf}, "action": {[]string{"pause", "resume", "pause"}[i]}, "reason": {"console"}})
		if st != http.StatusSeeOther || !strings.Contains(loc, "m=") {
			t.Fatalf("form %d through HAProxy = %d %q", i, st, loc)
		}
	}
	if out := f.cli(2, "project", "status"); !strings.Contains(out, "paused") {
		t.Errorf("the pause posted through HAProxy: project status = %s", out)
	}
	f.cli(1, "project", "resume")

	// A new key: its secret in the response to the form, nowhere else.
	st, _, page := b.do(http.MethodPost, f.lb, "/console/access", url.Values{"csrf": {b.csrf}, "name": {"made in the console"}, "role": {"call"}})
	token := tokenRE.FindString(page)
	if st != http.StatusOK || token == "" {
		t.Fatalf("creating a key through HAProxy = %d, secret shown: %v", st, token != "")
	}
	for range 3 {
		if _, _, page := b.do(http.MethodGet, f.lb, "/console/access", nil); strings.Contains(page, token) {
			t.Fatal("the secret is shown again")
		}
	}
	secret := token[strings.LastIndex(token, "_")+1:]
	adminSecret := admin[strings.LastIndex(admin, "_")+1:]
	if db := dumpDatabase(t, f.dsn); strings.Contains(db, secret) || strings.Contains(db, adminSecret) || !strings.Contains(db, "console_sessions") {
		t.Error("the fleet's database holds a key's secret (or the dump saw no session table)")
	}

	// Provider keys: nothing saved on any replica.
	for i := range 3 {
		_, _, page := b.do(http.MethodGet, f.lb, "/console/keys", nil)
		if !strings.Contains(page, `id="fleet-keys"`) || strings.Contains(page, `name="cred.`) {
			t.Fatalf("load %d of the provider keys page offers to save keys", i)
		}
		if st, _, page := b.do(http.MethodPost, f.lb, "/console/keys/claude", url.Values{"csrf": {b.csrf}, "cred.api_key": {"sk-typed-in-the-console"}}); st != http.StatusConflict || !strings.Contains(page, "one replica of a fleet") {
			t.Errorf("saving a provider key through HAProxy = %d", st)
		}
	}

	// A logout through the balancer ends the session on every replica.
	u, _ := url.Parse(f.lb + "/console/")
	cookie := b.c.Jar.Cookies(u)
	if st, _, _ := b.do(http.MethodPost, f.lb, "/console/logout", url.Values{"csrf": {b.csrf}}); st != http.StatusSeeOther {
		t.Fatalf("logout = %d", st)
	}
	for i, base := range f.replicas {
		if st := withCookie(t, base, cookie); st != http.StatusSeeOther {
			t.Errorf("replica %d after a logout through HAProxy = %d, want the login", i, st)
		}
	}

	// Revoking the key with the CLI of another replica ends a session
	// on every replica within a second.
	b = login()
	cookie = b.c.Jar.Cookies(u)
	for i, base := range f.replicas {
		if st := withCookie(t, base, cookie); st != http.StatusOK {
			t.Fatalf("replica %d with a new session = %d", i, st)
		}
	}
	f.cli(1, "serve", "keys", "revoke", adminID)
	took := f.seenEverywhere(t, "ended the session of a revoked key", func(base string) bool {
		return withCookie(t, base, cookie) == http.StatusSeeOther
	})
	t.Logf("the session of the revoked key ended on the replicas after %v", took)
}

// withCookie is the status of GET /console/ on base with cookies.
func withCookie(t *testing.T, base string, cookies []*http.Cookie) int {
	req, _ := http.NewRequest(http.MethodGet, base+"/console/", nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Error(err)
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}

// dumpDatabase is every row of every table of the database's shared
// state and ledger schemas, as text.
func dumpDatabase(t *testing.T, dsn string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []pgx.Identifier
	for rows.Next() {
		var s, n string
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, pgx.Identifier{s, n})
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	var b strings.Builder
	for _, id := range tables {
		var text *string
		if err := conn.QueryRow(ctx, `SELECT string_agg(t::text, E'\n') FROM `+id.Sanitize()+` t`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:\n", id.Sanitize())
		if text != nil {
			b.WriteString(*text + "\n")
		}
	}
	return b.String()
}
