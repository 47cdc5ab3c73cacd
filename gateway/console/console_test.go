package console_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/gateway/console"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// goodKey is the provider key the fake health check accepts.
const goodKey = "sk-console-test-Zq8v1"

const cfgYAML = `orchestration: true
providers:
  claude:
    type: anthropic
    base_url: http://127.0.0.1:9/
    credentials:
      api_key: ${MY_ANTHROPIC_KEY}
  local:
    type: openai_compatible
    profile: vllm
    base_url: http://127.0.0.1:9/v1
`

type fixture struct {
	c       *console.Console
	keys    *gateway.KeyStore
	key     string // an admin key of the project
	store   ledger.Store
	state   *orchestrator.MemoryState
	consent *locality.MemoryStore
	secrets *config.SecretsFile
	cfg     *config.File
	now     time.Time
	checks  atomic.Int32
}

func newFixture(t *testing.T, noAuth bool) *fixture {
	t.Helper()
	return newFixtureWith(t, noAuth, nil)
}

// newFixtureWith is newFixture with adjust changing the console's options
// before it is made.
func newFixtureWith(t *testing.T, noAuth bool, adjust func(*console.Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	reg := builtin.Registry()
	cfg, err := config.Parse(filepath.Join(dir, "llm-config.yaml"), []byte(cfgYAML), reg)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{cfg: cfg, state: &orchestrator.MemoryState{}, consent: locality.NewMemoryStore(),
		now: time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)}
	fx.secrets = config.OpenSecretsFile(filepath.Join(dir, ".cortexbuild", config.SecretsFileName))
	cfg.Secrets = fx.secrets
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fx.keys = gateway.OpenKeyStore(filepath.Join(dir, gateway.KeyFileName))
	if fx.key, _, err = fx.keys.Create(gateway.KeySpec{Name: "ops", Project: "demo", Role: gateway.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	fx.store, err = ledger.OpenSQLite(context.Background(), filepath.Join(dir, "state.db"), ledger.WithClock(func() time.Time { return fx.now }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.store.Close() })
	opts := console.Options{
		Project: "demo", Keys: fx.keys, NoAuth: noAuth, Config: cfg, Registry: reg, LookupEnv: lookup, Secrets: fx.secrets,
		// The check builds the provider's settings the way the engine
		// does, so it sees the secrets file as a credential source.
		Health: func(ctx context.Context, name string) console.Health {
			fx.checks.Add(1)
			s, err := cfg.Resolve(name, reg, lookup)
			if err != nil {
				return console.Health{Status: "unhealthy", Kind: "config", Error: provider.Redact(err.Error(), s.Credentials["api_key"])}
			}
			if s.Credentials["api_key"] != goodKey {
				return console.Health{Status: "unhealthy", Kind: "auth", Error: "the provider refused the key"}
			}
			return console.Health{Status: "healthy", Healthy: true, Latency: 12 * time.Millisecond}
		},
		Breakers: func(context.Context) []orchestrator.BreakerState {
			return []orchestrator.BreakerState{{Provider: "claude", State: orchestrator.BreakerOpen, Failures: 3, LastError: provider.KindOverloaded, RetryAt: fx.now.Add(time.Minute)}}
		},
		Ledger: fx.store, State: fx.state, Consents: fx.consent,
		Endpoint: func(name string) string { return "http://127.0.0.1:9/" },
		Now:      func() time.Time { return fx.now },
	}
	if noAuth {
		opts.Keys = nil
	}
	if adjust != nil {
		adjust(&opts)
	}
	if fx.c, err = console.New(opts); err != nil {
		t.Fatal(err)
	}
	return fx
}

// browser is a minimal cookie-keeping client of the handler, sending what
// a browser on the console's own pages sends.
type browser struct {
	t       *testing.T
	fx      *fixture
	cookies map[string]*http.Cookie
	csrf    string
}

func (fx *fixture) browser(t *testing.T) *browser {
	return &browser{t: t, fx: fx, cookies: map[string]*http.Cookie{}}
}

type reqOpt func(*http.Request)

func origin(o string) reqOpt { return func(r *http.Request) { r.Header.Set("Origin", o) } }

func header(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func noOrigin(r *http.Request) { r.Header.Del("Origin"); r.Header.Del("Sec-Fetch-Site") }

func (b *browser) do(method, path string, form url.Values, opts ...reqOpt) *httptest.ResponseRecorder {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:8787"+path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		r.Header.Set("Origin", "http://127.0.0.1:8787")
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	b.fx.c.ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	if m := csrfRE.FindStringSubmatch(w.Body.String()); m != nil {
		b.csrf = m[1]
	}
	return w
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login logs in with key and returns the response of the POST.
func (b *browser) login(key string, opts ...reqOpt) *httptest.ResponseRecorder {
	b.t.Helper()
	b.do(http.MethodGet, "/console/login", nil)
	return b.do(http.MethodPost, "/console/login", url.Values{"csrf": {b.csrf}, "key": {key}}, opts...)
}

func (b *browser) loggedIn() *browser {
	b.t.Helper()
	if w := b.login(b.fx.key); w.Code != http.StatusSeeOther {
		b.t.Fatalf("login = %d %s", w.Code, w.Body)
	}
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusOK || b.csrf == "" {
		b.t.Fatalf("keys page = %d", w.Code)
	}
	return b
}

func TestAuthRequired(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t)
	for _, p := range []string{"/console/", "/console/access", "/console/keys", "/console/health", "/console/spend", "/console/control"} {
		if w := b.do(http.MethodGet, p, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/login" {
			t.Errorf("GET %s without a session = %d %q", p, w.Code, w.Header().Get("Location"))
		}
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"action": {"pause"}}); w.Code != http.StatusUnauthorized {
		t.Errorf("POST without a session = %d", w.Code)
	}
	if _, paused, _ := fx.state.Paused(context.Background()); paused {
		t.Fatal("the project was paused without a session")
	}
	if w := b.login("cbk_0000000000000000_nope"); w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "nope") {
		t.Errorf("wrong key = %d", w.Code)
	}
	bound, _, err := fx.keys.Create(gateway.KeySpec{Project: "demo", Agent: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	if w := b.login(bound); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "serve keys create --role admin") {
		t.Errorf("key bound to an agent = %d", w.Code)
	}
	other, _, _ := fx.keys.Create(gateway.KeySpec{Project: "elsewhere", Role: gateway.RoleAdmin})
	if w := b.login(other); w.Code != http.StatusForbidden {
		t.Errorf("key of another project = %d", w.Code)
	}
	w := b.login(fx.key)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login = %d %s", w.Code, w.Body)
	}
	ck := b.cookies["cortexbuild_console"]
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/console/" || strings.Contains(ck.Value, fx.key) {
		t.Fatalf("session cookie = %+v", ck)
	}
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusOK {
		t.Fatalf("keys page after login = %d", w.Code)
	}
	// A made-up session token is no session.
	forged := fx.browser(t)
	forged.cookies["cortexbuild_console"] = &http.Cookie{Name: "cortexbuild_console", Value: strings.Repeat("A", 43)}
	if w := forged.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusSeeOther {
		t.Errorf("forged session = %d", w.Code)
	}
	// Revoking the key ends its sessions.
	id := strings.Split(strings.TrimPrefix(fx.key, "cbk_"), "_")[0]
	if _, err := fx.keys.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusSeeOther {
		t.Errorf("session of a revoked key = %d", w.Code)
	}
}

func TestSessionExpiresAndLogout(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	fx.now = fx.now.Add(console.DefaultSessionTTL + time.Second)
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusSeeOther {
		t.Errorf("expired session = %d", w.Code)
	}
	b = fx.browser(t).loggedIn()
	if w := b.do(http.MethodPost, "/console/logout", url.Values{"csrf": {b.csrf}}); w.Code != http.StatusSeeOther {
		t.Fatalf("logout = %d", w.Code)
	}
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusSeeOther {
		t.Errorf("after logout = %d", w.Code)
	}
}

func TestSecureCookieOverTLS(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t)
	tlsOn := func(r *http.Request) { r.TLS = &tls.ConnectionState{} }
	b.do(http.MethodGet, "/console/login", nil, tlsOn)
	if !b.cookies["cortexbuild_console_login"].Secure {
		t.Error("login cookie not Secure over TLS")
	}
	w := b.do(http.MethodPost, "/console/login", url.Values{"csrf": {b.csrf}, "key": {fx.key}}, tlsOn)
	if w.Code != http.StatusSeeOther || !b.cookies["cortexbuild_console"].Secure {
		t.Errorf("login over TLS = %d, cookie %+v", w.Code, b.cookies["cortexbuild_console"])
	}
}

func TestCSRF(t *testing.T) {
	fx := newFixture(t, false)
	// Login itself needs the login form's token and the same origin.
	b := fx.browser(t)
	b.do(http.MethodGet, "/console/login", nil)
	if w := b.do(http.MethodPost, "/console/login", url.Values{"key": {fx.key}}); w.Code != http.StatusForbidden {
		t.Errorf("login without the form token = %d", w.Code)
	}
	if w := b.login(fx.key, origin("http://evil.example"), header("Sec-Fetch-Site", "cross-site")); w.Code != http.StatusForbidden {
		t.Errorf("login from another origin = %d", w.Code)
	}
	b = fx.browser(t).loggedIn()
	pause := func(form url.Values, opts ...reqOpt) int {
		return b.do(http.MethodPost, "/console/control/project", form, opts...).Code
	}
	good := url.Values{"csrf": {b.csrf}, "action": {"pause"}}
	cases := []struct {
		name string
		form url.Values
		opts []reqOpt
	}{
		{"no token", url.Values{"action": {"pause"}}, nil},
		{"wrong token", url.Values{"csrf": {"x" + b.csrf}, "action": {"pause"}}, nil},
		{"token of another session", url.Values{"csrf": {fx.browser(t).loggedIn().csrf}, "action": {"pause"}}, nil},
		{"cross-site fetch", good, []reqOpt{header("Sec-Fetch-Site", "cross-site")}},
		{"other origin", good, []reqOpt{header("Sec-Fetch-Site", ""), origin("http://evil.example")}},
		{"other referer", good, []reqOpt{noOrigin, header("Referer", "http://evil.example/console/control")}},
		{"no origin at all", good, []reqOpt{noOrigin}},
	}
	for _, tc := range cases {
		if code := pause(tc.form, tc.opts...); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, code)
		}
	}
	if _, paused, _ := fx.state.Paused(context.Background()); paused {
		t.Fatal("a refused request paused the project")
	}
	// The console's own pages: Origin null (no-referrer) with
	// Sec-Fetch-Site same-origin, or a same-origin Referer, are accepted.
	if code := pause(good, origin("null")); code != http.StatusSeeOther {
		t.Errorf("same-origin POST = %d", code)
	}
	if code := b.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {b.csrf}, "action": {"resume"}}, noOrigin, header("Referer", "http://127.0.0.1:8787/console/control")).Code; code != http.StatusSeeOther {
		t.Errorf("same-origin Referer = %d", code)
	}
}

func TestSecurityHeadersAndEscaping(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	for _, p := range []string{"/console/login", "/console/", "/console/access", "/console/keys", "/console/health", "/console/spend", "/console/control", "/console/static/console.css"} {
		w := b.do(http.MethodGet, p, nil)
		h := w.Header()
		if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") || h.Get("X-Frame-Options") != "DENY" ||
			h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, h)
		}
		if strings.Contains(w.Body.String(), "http://") && strings.Contains(w.Body.String(), "<script src=\"http") {
			t.Errorf("%s loads an external script", p)
		}
	}
	// A task id with markup is escaped wherever it is shown.
	if err := fx.store.Pause(context.Background(), ledger.TaskScope(`<img src=x onerror=alert(1)>`), "why <b>"); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.SetBudget(context.Background(), ledger.TaskScope(`<img src=x onerror=alert(1)>`), provider.Dollar); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console/", "/console/control", "/console/spend"} {
		body := b.do(http.MethodGet, p, nil).Body.String()
		if strings.Contains(body, "<img src=x") || !strings.Contains(body, "&lt;img src=x") {
			t.Errorf("%s does not escape the task id", p)
		}
	}
	// A flash message is picked by code, never reflected.
	if body := b.do(http.MethodGet, "/console/keys?m=<script>", nil).Body.String(); strings.Contains(body, "<script>") {
		t.Error("the flash parameter is reflected")
	}
}

func TestNoAuthOnlyOnLoopbackHosts(t *testing.T) {
	fx := newFixture(t, true)
	b := fx.browser(t)
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusOK || b.csrf == "" {
		t.Fatalf("no-auth keys page = %d", w.Code)
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"action": {"pause"}}); w.Code != http.StatusForbidden {
		t.Errorf("no-auth POST without a token = %d", w.Code)
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {b.csrf}, "action": {"pause"}}); w.Code != http.StatusSeeOther {
		t.Errorf("no-auth POST with its token = %d", w.Code)
	}
	rebound := func(r *http.Request) { r.Host = "evil.example:8787" }
	if w := b.do(http.MethodGet, "/console/keys", nil, rebound); w.Code != http.StatusMisdirectedRequest {
		t.Errorf("no-auth with a foreign Host = %d", w.Code)
	}
}

// keeper returns a function that appends each response's headers and body
// to bodies (for checking later that no page or header shows a secret)
// and returns the response.
func keeper(bodies *[]string) func(*httptest.ResponseRecorder) *httptest.ResponseRecorder {
	return func(w *httptest.ResponseRecorder) *httptest.ResponseRecorder {
		var hdr strings.Builder
		_ = w.Header().Write(&hdr)
		*bodies = append(*bodies, hdr.String()+w.Body.String())
		return w
	}
}

func TestProviderKeysAreWriteOnly(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	var bodies []string
	keep := keeper(&bodies)
	page := keep(b.do(http.MethodGet, "/console/keys", nil)).Body.String()
	for _, want := range []string{`id="p-claude"`, `name="cred.api_key"`, `type="password"`, "not set", "${MY_ANTHROPIC_KEY}", "gemini"} {
		if !strings.Contains(page, want) {
			t.Errorf("keys page lacks %q", want)
		}
	}
	// Before a key is saved the connection test fails.
	w := keep(b.do(http.MethodPost, "/console/keys/claude/test", url.Values{"csrf": {b.csrf}}))
	if !strings.Contains(w.Body.String(), `id="test-result-claude"`) || !strings.Contains(w.Body.String(), "unhealthy") {
		t.Errorf("test without a key:\n%s", w.Body)
	}
	w = keep(b.do(http.MethodPost, "/console/keys/claude", url.Values{"csrf": {b.csrf}, "cred.api_key": {goodKey}}))
	if w.Code != http.StatusSeeOther {
		t.Fatalf("save = %d %s", w.Code, w.Body)
	}
	st, err := os.Stat(fx.secrets.Path())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v, mode %v", err, st.Mode())
	}
	data, _ := os.ReadFile(fx.secrets.Path())
	if !strings.Contains(string(data), goodKey) {
		t.Fatal("the key was not saved")
	}
	page = keep(b.do(http.MethodGet, "/console/keys?m=saved", nil)).Body.String()
	status := regexp.MustCompile(`(?s)id="s-claude-api_key">(.*?)</td>`).FindStringSubmatch(page)
	if status == nil || !strings.Contains(status[1], ">set<") || !strings.Contains(status[1], "secrets file") {
		t.Errorf("status after save: %v", status)
	}
	w = keep(b.do(http.MethodPost, "/console/keys/claude/test", url.Values{"csrf": {b.csrf}}))
	if !regexp.MustCompile(`(?s)id="test-result-claude">\s*<strong class="test-status">healthy</strong>`).MatchString(w.Body.String()) {
		t.Errorf("test with the saved key:\n%s", w.Body)
	}
	keep(b.do(http.MethodPost, "/console/health", url.Values{"csrf": {b.csrf}}))
	keep(b.do(http.MethodGet, "/console/health", nil))
	keep(b.do(http.MethodGet, "/console/spend", nil))
	keep(b.do(http.MethodGet, "/console/control", nil))
	keep(b.do(http.MethodPost, "/console/keys/claude", url.Values{"csrf": {b.csrf}}))
	for i, body := range bodies {
		if strings.Contains(body, goodKey) || strings.Contains(body, goodKey[3:12]) {
			t.Errorf("response %d contains the saved key", i)
		}
	}
	// Removing it.
	if w := b.do(http.MethodPost, "/console/keys/claude", url.Values{"csrf": {b.csrf}, "clear.api_key": {"1"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("remove = %d", w.Code)
	}
	if _, ok, _ := fx.secrets.Credential("claude", "api_key"); ok {
		t.Error("the key is still saved after removal")
	}
	if w := b.do(http.MethodPost, "/console/keys/nope", url.Values{"csrf": {b.csrf}, "cred.api_key": {"x"}}); w.Code != http.StatusNotFound {
		t.Errorf("save for an unknown provider = %d", w.Code)
	}
}

func TestHealthPage(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	body := b.do(http.MethodGet, "/console/health", nil).Body.String()
	if fx.checks.Load() != 0 || !strings.Contains(body, "not checked yet") || !strings.Contains(body, "open until") {
		t.Errorf("health page before a check (%d checks):\n%s", fx.checks.Load(), body)
	}
	if w := b.do(http.MethodPost, "/console/health", url.Values{"csrf": {b.csrf}}); w.Code != http.StatusSeeOther {
		t.Fatalf("check all = %d", w.Code)
	}
	body = b.do(http.MethodGet, "/console/health", nil).Body.String()
	if fx.checks.Load() != 2 || !strings.Contains(body, "unhealthy") || !strings.Contains(body, "unknown") {
		t.Errorf("health page after a check (%d checks):\n%s", fx.checks.Load(), body)
	}
}

func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	post := func(path string, form url.Values) {
		t.Helper()
		form.Set("csrf", b.csrf)
		if w := b.do(http.MethodPost, path, form); w.Code != http.StatusSeeOther {
			t.Fatalf("POST %s %v = %d %s", path, form, w.Code, w.Body)
		}
	}
	post("/console/control/project", url.Values{"action": {"pause"}, "reason": {"maintenance"}})
	if reason, paused, _ := fx.state.Paused(ctx); !paused || !strings.Contains(reason, "maintenance") {
		t.Fatalf("project not paused: %q", reason)
	}
	if body := b.do(http.MethodGet, "/console/control", nil).Body.String(); !strings.Contains(body, "paused</span>: maintenance") {
		t.Errorf("control page does not show the pause")
	}
	post("/console/control/project", url.Values{"action": {"resume"}})
	if _, paused, _ := fx.state.Paused(ctx); paused {
		t.Fatal("project still paused")
	}
	post("/console/control/task", url.Values{"action": {"pause"}, "task": {"T-7"}, "reason": {"review"}})
	if reason, paused, _ := fx.store.Paused(ctx, ledger.TaskScope("T-7")); !paused || reason != "review" {
		t.Fatalf("task not paused: %q %v", reason, paused)
	}
	if body := b.do(http.MethodGet, "/console/control", nil).Body.String(); !strings.Contains(body, "<td>T-7</td>") {
		t.Errorf("control page does not list the paused task")
	}
	post("/console/control/task", url.Values{"action": {"resume"}, "task": {"T-7"}})
	if _, paused, _ := fx.store.Paused(ctx, ledger.TaskScope("T-7")); paused {
		t.Fatal("task still paused")
	}
	if w := b.do(http.MethodPost, "/console/control/task", url.Values{"csrf": {b.csrf}, "action": {"pause"}, "task": {""}}); w.Code != http.StatusBadRequest {
		t.Errorf("empty task id = %d", w.Code)
	}
}

func TestConsentToggles(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	grant := url.Values{"csrf": {b.csrf}, "provider": {"claude"}, "action": {"grant"}}
	if w := b.do(http.MethodPost, "/console/control/consent", grant); w.Code != http.StatusSeeOther {
		t.Fatalf("grant = %d", w.Code)
	}
	c, ok, _ := fx.consent.Consent(ctx, "claude")
	if !ok || !strings.HasPrefix(c.GrantedBy, "console:key ") || c.Endpoint != "http://127.0.0.1:9/" {
		t.Fatalf("consent = %+v %v", c, ok)
	}
	body := b.do(http.MethodGet, "/console/control", nil).Body.String()
	if !regexp.MustCompile(`(?s)id="c-claude">.*?granted by console:key`).MatchString(body) {
		t.Errorf("control page does not show the consent")
	}
	revoke := url.Values{"csrf": {b.csrf}, "provider": {"claude"}, "action": {"revoke"}}
	if w := b.do(http.MethodPost, "/console/control/consent", revoke); w.Code != http.StatusSeeOther {
		t.Fatalf("revoke = %d", w.Code)
	}
	if _, ok, _ := fx.consent.Consent(ctx, "claude"); ok {
		t.Fatal("consent still recorded")
	}
	if w := b.do(http.MethodPost, "/console/control/consent", url.Values{"csrf": {b.csrf}, "provider": {"nope"}, "action": {"grant"}}); w.Code != http.StatusNotFound {
		t.Errorf("grant for an unknown provider = %d", w.Code)
	}
}

func TestSpendMatchesTheLedger(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	settle := func(id, task, agent, cost string, earlier ...ledger.AttemptRow) {
		t.Helper()
		m, err := provider.ParseMoney(cost)
		if err != nil {
			t.Fatal(err)
		}
		var total provider.Money = m
		for _, e := range earlier {
			total += e.Cost
		}
		err = fx.store.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: total, Scopes: []ledger.Scope{ledger.TaskScope(task), ledger.MonthScope(fx.now)},
			Entry:   ledger.AttemptRow{Task: task, Agent: agent, Provider: "claude", Model: "claude-sonnet-4-6", Outcome: "ok", Cost: m, InputTokens: 100, OutputTokens: 20, Time: fx.now},
			Earlier: earlier})
		if err != nil {
			t.Fatal(err)
		}
		fx.now = fx.now.Add(time.Second)
	}
	if err := fx.store.SetBudget(ctx, ledger.MonthScope(fx.now), provider.Dollar*10); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.SetBudget(ctx, ledger.TaskScope("T1"), provider.Dollar); err != nil {
		t.Fatal(err)
	}
	settle("inv_a", "T1", "builder", "0.25")
	settle("inv_b", "T1", "critic", "0.125", ledger.AttemptRow{Task: "T1", Agent: "critic", Provider: "local", Model: "m", Outcome: "overloaded", Time: fx.now})
	settle("inv_c", "T2", "builder", "0.5")
	b := fx.browser(t).loggedIn()
	body := b.do(http.MethodGet, "/console/spend", nil).Body.String()
	month, _ := fx.store.Spend(ctx, ledger.Filter{By: ledger.ByAgent})
	if month.Total.Cost.String() != "0.875" {
		t.Fatalf("ledger total = %s", month.Total.Cost)
	}
	checks := []string{
		`$<span id="month-total">0.875</span>`,
		`<span id="month-limit">$10.00</span>`,
		`<span id="month-left">$9.125</span>`,
		`<td>builder</td><td class="num">$0.75</td><td class="num">2</td>`,
		`<td>critic</td><td class="num">$0.125</td><td class="num">2</td>`,
		`<td>T1</td><td class="num">$0.375</td><td class="num">3</td><td>$1.00</td><td>$0.625</td>`,
		`<td>T2</td><td class="num">$0.50</td>`,
		`<td>2026-05</td><td class="num">$0.875</td><td class="num">4</td><td>$10.00</td>`,
		`<code>inv_b</code>`, `local/m: overloaded`, `<svg class="chart"`,
	}
	for _, want := range checks {
		if !strings.Contains(body, want) {
			t.Errorf("spend page lacks %s", want)
		}
	}
	// Newest invocation first.
	if i, j := strings.Index(body, "inv_c"), strings.Index(body, "inv_a"); i < 0 || j < 0 || i > j {
		t.Errorf("invocations not newest first")
	}
}

// The spend view says how many attempts were charged their reservation
// unpriced, naming the provider/model and the fix, and marks each one.
func TestSpendShowsUnpricedAttempts(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	if body := b.do(http.MethodGet, "/console/spend", nil).Body.String(); strings.Contains(body, `id="unpriced"`) {
		t.Errorf("an empty ledger shows unpriced attempts")
	}
	err := fx.store.Settle(ctx, ledger.Settlement{InvocationID: "inv_u", Cost: provider.Dollar, Scopes: []ledger.Scope{ledger.MonthScope(fx.now)},
		Entry: ledger.AttemptRow{Provider: "private", Model: "acme-private-1", Outcome: "ok", Cost: provider.Dollar, InputTokens: 50, OutputTokens: 10, Time: fx.now, Unpriced: true}})
	if err != nil {
		t.Fatal(err)
	}
	body := b.do(http.MethodGet, "/console/spend", nil).Body.String()
	for _, want := range []string{`id="unpriced"`, "1 attempt(s) were charged their reservation", "private/acme-private-1 (1)", "pricing.catalog_files",
		"private/acme-private-1: ok, 50+10 tokens, $1.00 (unpriced: charged the reservation)"} {
		if !strings.Contains(body, want) {
			t.Errorf("spend page lacks %q", want)
		}
	}
}

// The keys page never suggests exporting a vendor's variable for a provider
// that would not read it: the vllm provider on loopback is not OpenAI.
func TestKeyHintsNameOnlyVariablesTheProviderReads(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	page := b.do(http.MethodGet, "/console/keys", nil).Body.String()
	status := regexp.MustCompile(`(?s)id="s-local-api_key">(.*?)</td>`).FindStringSubmatch(page)
	if status == nil {
		t.Fatal("no status cell for the vllm provider's key")
	}
	if strings.Contains(status[1], "OPENAI_API_KEY") || !strings.Contains(status[1], "save it here") {
		t.Errorf("the vllm provider's key hint: %s", status[1])
	}
}

// Only admin keys open the console: a call key, bound or not, and a key
// written before keys had roles (a call key) are refused with the command
// that makes an admin key, and cannot act (pause) without a session. A
// session ends when its key is no longer an admin key in the file.
func TestConsoleNeedsAnAdminKey(t *testing.T) {
	fx := newFixture(t, false)
	call, _, err := fx.keys.Create(gateway.KeySpec{Name: "claude-code", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	b := fx.browser(t)
	if w := b.login(call); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "cortexbuild serve keys create --role admin") {
		t.Errorf("call key = %d\n%s", w.Code, w.Body)
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"action": {"pause"}, "csrf": {b.csrf}}); w.Code != http.StatusUnauthorized {
		t.Errorf("pause after a refused login = %d", w.Code)
	}
	if _, paused, _ := fx.state.Paused(context.Background()); paused {
		t.Fatal("a call key paused the project")
	}
	admin := fx.browser(t).loggedIn()
	data, err := os.ReadFile(fx.keys.Path())
	if err != nil {
		t.Fatal(err)
	}
	legacy := strings.ReplaceAll(string(data), `"role": "admin"`, `"role": ""`)
	if legacy == string(data) {
		t.Fatalf("the key file has no admin role to remove:\n%s", data)
	}
	if err := os.WriteFile(fx.keys.Path(), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := admin.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusSeeOther {
		t.Errorf("session of a key without a role = %d, want a redirect to the login", w.Code)
	}
	if w := fx.browser(t).login(fx.key); w.Code != http.StatusForbidden {
		t.Errorf("login with a key without a role = %d", w.Code)
	}
}

// A key file made readable by others while the console runs ends its
// sessions and refuses logins (fail closed), and chmod 600 restores both.
func TestConsoleFailsClosedOnAnOpenKeyFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	if err := os.Chmod(fx.keys.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if w := b.do(http.MethodGet, "/console/keys", nil); w.Code != http.StatusSeeOther {
		t.Errorf("session with a 0644 key file = %d, want a redirect to the login", w.Code)
	}
	if w := fx.browser(t).login(fx.key); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "chmod") {
		t.Errorf("login with a 0644 key file = %d, want a generic 500", w.Code)
	}
	if err := os.Chmod(fx.keys.Path(), 0o600); err != nil {
		t.Fatal(err)
	}
	fx.browser(t).loggedIn()
}

// Every value a page shows is escaped, in text and in attributes, on every
// page; and no page carries a formatting error ("%!").
func TestEveryValueShownIsEscaped(t *testing.T) {
	const evil = `"'><x-evil onload=alert(1)>`
	const escaped = `&#34;&#39;&gt;&lt;x-evil onload=alert(1)&gt;`
	ctx := context.Background()
	fx := newFixtureWith(t, false, func(o *console.Options) {
		o.Alerts = func(context.Context) ([]console.Alert, error) {
			return []console.Alert{{Scope: "task:" + evil, Threshold: 80, Spent: provider.Dollar, Limit: provider.Dollar, At: time.Unix(0, 0)}}, nil
		}
		o.Health = func(context.Context, string) console.Health {
			return console.Health{Status: "unhealthy", Kind: evil, Error: evil, Reason: evil}
		}
	})
	_, k, err := fx.keys.Create(gateway.KeySpec{Name: evil, Project: "demo", Agent: evil, Task: evil, Models: []string{evil}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.store.SetBudget(ctx, ledger.TaskScope(evil), provider.Dollar); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.Pause(ctx, ledger.TaskScope(evil), evil); err != nil {
		t.Fatal(err)
	}
	if err := fx.state.Pause(ctx, evil); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: evil, Key: k.ID, Agent: evil, Task: evil, Provider: evil, Model: evil,
		Outcome: evil, Cost: provider.Dollar / 10, Time: fx.now}); err != nil {
		t.Fatal(err)
	}
	b := fx.browser(t).loggedIn()
	if w := b.do(http.MethodPost, "/console/health", url.Values{"csrf": {b.csrf}}); w.Code != http.StatusSeeOther {
		t.Fatalf("check all = %d", w.Code)
	}
	pages := map[string]string{}
	for _, p := range []string{"/console/", "/console/access", "/console/spend", "/console/control", "/console/health", "/console/keys"} {
		pages[p] = b.do(http.MethodGet, p, nil).Body.String()
	}
	pages["key test"] = b.do(http.MethodPost, "/console/keys/claude/test", url.Values{"csrf": {b.csrf}}).Body.String()
	// A refused form is shown again with what was typed, in attributes.
	refused := b.do(http.MethodPost, "/console/access", url.Values{"csrf": {b.csrf}, "name": {evil}, "agent": {evil}, "models": {evil},
		"budget": {evil}, "rpm": {"1"}})
	if refused.Code != http.StatusBadRequest || !strings.Contains(refused.Body.String(), `id="k-name" name="name" maxlength="100" value="`+escaped+`"`) {
		t.Errorf("the refused form = %d:\n%s", refused.Code, refused.Body)
	}
	pages["refused form"] = refused.Body.String()
	pages["login"] = fx.browser(t).do(http.MethodGet, "/console/login", nil).Body.String()
	for p, body := range pages {
		if strings.Contains(body, "<x-evil") || strings.Contains(body, `"'>`) {
			t.Errorf("%s shows a value unescaped:\n%s", p, body)
		}
		if strings.Contains(body, "%!") {
			t.Errorf("%s has a formatting error:\n%s", p, body)
		}
		if p != "login" && p != "/console/keys" && !strings.Contains(body, escaped) {
			t.Errorf("%s does not show the value, escaped:\n%s", p, body)
		}
	}
	// The revoke button's confirmation names the key, in an attribute.
	if !strings.Contains(pages["/console/access"], `data-confirm="Revoke cbk_`+k.ID+`_… (`+escaped+`)?`) {
		t.Errorf("the revoke confirmation:\n%s", pages["/console/access"])
	}
}
