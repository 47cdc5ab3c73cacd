package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// Two 'cortexbuild serve' replicas on one PostgreSQL: a console session
// opened on one is one on the other (a browser's cookies go to both, as
// behind a round-robin balancer); the other's provider keys page saves
// no key, says why, and writes no secrets file; a logout there ends the
// session on the first.
func TestFleetConsoleThroughServe(t *testing.T) {
	dsn := freshPostgresDB(t, testenv.Postgres(t), "fleetconsole_")
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	vars := map[string]string{"PGDSN": dsn, "MY_KEY": testKey}
	one, two := fleetProject(t, srv, "postgres"), fleetProject(t, srv, "postgres")
	code, out, errs := run(t, one, vars, "serve", "keys", "create", "--json", "--name", "ops", "--role", "admin")
	var k struct {
		Token string `json:"key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil {
		t.Fatalf("keys create = %d %s %s", code, out, errs)
	}
	base1, stop1 := startServe(t, one, vars)
	defer stop1()
	base2, stop2 := startServe(t, two, vars)
	defer stop2()

	jar, _ := cookiejar.New(nil) // cookies are not per port: both replicas get them
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(base, path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, page := get(base1 + "/console/login")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("login page without a form token")
	}
	if st, body := post(base1, "/console/login", url.Values{"csrf": {m[1]}, "key": {k.Token}}); st != http.StatusSeeOther {
		t.Fatalf("login on replica one = %d %s", st, body)
	}
	st, page := get(base2 + "/console/keys")
	m = csrfRE.FindStringSubmatch(page)
	if st != http.StatusOK || m == nil {
		t.Fatalf("replica two with the session of replica one = %d", st)
	}
	if !strings.Contains(page, `id="fleet-keys"`) || strings.Contains(page, `name="cred.`) {
		t.Error("the provider keys page of a fleet's replica offers to save keys")
	}
	st, body := post(base2, "/console/keys/claude", url.Values{"csrf": {m[1]}, "cred.api_key": {"sk-typed-in-the-console"}})
	if st != http.StatusConflict || !strings.Contains(body, "one replica of a fleet") {
		t.Errorf("saving a provider key on a replica = %d", st)
	}
	if _, err := os.Stat(filepath.Join(two, config.Dir, config.SecretsFileName)); err == nil {
		t.Error("a replica wrote a secrets file")
	}
	u, _ := url.Parse(base1 + "/console/")
	session := jar.Cookies(u)
	if len(session) != 1 {
		t.Fatalf("cookies of the console: %d", len(session))
	}
	if st, _ := post(base2, "/console/logout", url.Values{"csrf": {m[1]}}); st != http.StatusSeeOther {
		t.Fatalf("logout on replica two = %d", st)
	}
	// The jar dropped the cookie: send the old one to replica one.
	req, _ := http.NewRequest(http.MethodGet, base1+"/console/", nil)
	req.AddCookie(session[0])
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Errorf("replica one after a logout on replica two = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
