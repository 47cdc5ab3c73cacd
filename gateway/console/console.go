// Package console is CortexBuild's web console, mounted on the gateway's
// server under /console/: an overview (health, spend today and this month,
// budget use, pauses, recent failures, alerts), access keys (the
// gateway's virtual keys: list, create, revoke), provider keys (write-only
// forms generated from the credentials schema, saved to the project's
// secrets file, except on a fleet, where each replica reads them from its
// environment; with a connection test), provider health, breakers and
// rate-limit headroom, spend against budgets with recent invocations, and
// control (pause and resume of tasks and the project, consent per
// provider).
//
// Pages are written on the server by Go functions that escape every value
// (html.go, views.go); the CSS, the little
// JavaScript there is and the charts (inline SVG) are embedded in the
// binary, nothing is loaded from elsewhere.
//
// Security: a login form exchanges a gateway virtual key with the admin
// role (call keys are refused) for a session cookie (random token, kept
// server-side as a hash, HttpOnly, SameSite=Strict, Secure over TLS,
// expiring). Sessions live in a [SessionStore]: the process's memory by
// default, the shared state in PostgreSQL for a fleet of gateways, so that
// a session opened on one replica is one on all of them. Every POST must
// carry the session's synchronizer token and come from the console's own
// origin (Sec-Fetch-Site, else Origin, else Referer). Every response forbids framing, sends no referrer and allows
// only the console's own resources. A saved credential is never sent
// back: pages say only whether a field is set and where its value comes
// from.
package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Prefix is where the console is mounted: mount the handler on the
// gateway with g.Handle(console.Prefix, c) and g.Handle("/console", c).
const Prefix = "/console/"

// Cookie names.
const (
	sessionCookie = "cortexbuild_console"
	loginCookie   = "cortexbuild_console_login"
)

// DefaultSessionTTL is how long a console session lasts.
const DefaultSessionTTL = 12 * time.Hour

// sessionTimeout bounds one look at, or one change of, the sessions.
const sessionTimeout = 10 * time.Second

// Health is the result of one provider's health check.
type Health struct {
	// Status is "healthy", "unhealthy" or "not_checked".
	Status  string
	Healthy bool
	Latency time.Duration
	// Kind classifies a failure; Error says what failed; Reason says why
	// a provider was not checked. None of them may carry a secret.
	Kind, Error, Reason string
	// RateLimit is what the provider reported about its limits; nil when
	// it reported nothing.
	RateLimit *provider.RateLimitStatus
	CheckedAt time.Time
}

// Options configure a Console. Fields marked required must be set; the
// zero value of the others is the default in their comment.
type Options struct {
	// Project names the project; a key bound to another is refused.
	Project string
	// Keys checks the virtual keys people log in with. Required unless
	// NoAuth; only admin keys log in. When it also has a List method (as
	// *gateway.KeyStore does), a session ends as soon as its key is
	// revoked or is no longer an admin key.
	Keys gateway.Authenticator
	// KeyStore is where the access keys page lists, creates and revokes
	// the gateway's virtual keys. Default: Keys, when it is a
	// [KeyManager]; without one the page says keys are managed with
	// 'cortexbuild serve keys'.
	KeyStore KeyManager
	// CheckKey refuses a key the gateway could not use (an unknown agent,
	// a model name it does not resolve), in words naming the field.
	// Optional: [gateway.KeySpec.Check] runs in any case.
	CheckKey func(gateway.KeySpec) error
	// Alerts returns the budget alerts announced, for the overview.
	// Optional: without it the overview says alerts are not configured.
	Alerts func(ctx context.Context) ([]Alert, error)
	// NoAuth serves the console without a login (the gateway must then
	// listen on loopback; requests naming another host are refused, which
	// stops DNS rebinding).
	NoAuth bool
	// Config is the project's configuration (its Secrets set to Secrets),
	// and Registry the adapter types with their credentials schemas.
	// Required.
	Config   *config.File
	Registry *provider.Registry
	// LookupEnv reads the environment. Default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Secrets is where credentials saved from the console go. Required.
	Secrets *config.SecretsFile
	// Sessions keeps the console's sessions. Default: this process's
	// memory. A fleet of gateways gives them the shared one
	// ([pgstate.Store.Sessions]), so that a session opened on one replica
	// is known to all, and one ended on any is ended on all.
	Sessions SessionStore
	// Fleet says the gateway is one replica of a fleet sharing its state
	// in PostgreSQL: provider keys then come from each replica's
	// environment (or secrets file), and the provider keys page saves
	// none, saying where to set them.
	Fleet bool
	// Health checks one provider now, building its adapter from the
	// current credentials. Required.
	Health func(ctx context.Context, name string) Health
	// Breakers returns the circuit breakers' states. Optional.
	Breakers func(ctx context.Context) []orchestrator.BreakerState
	// Ledger is the spend record and budget store. Required.
	Ledger ledger.Store
	// State is the project's pause state. Required.
	State orchestrator.State
	// Consents is the project's consent store. Required.
	Consents locality.ConsentStore
	// Endpoint returns a provider's base URL, recorded with a consent.
	// Optional.
	Endpoint func(name string) string
	// AgentBudgets are the per-call limits of agents, for the spend page.
	AgentBudgets map[string]provider.Money
	// SessionTTL is how long a session lasts. Default 12 hours.
	SessionTTL time.Duration
	// CheckTimeout bounds a health check. Default 30 seconds.
	CheckTimeout time.Duration
	// Location is the time zone months are counted in. Default UTC.
	Location *time.Location
	// Logger receives one line per change made (never a value). Default:
	// discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Console is the web console: an http.Handler for everything under
// [Prefix].
type Console struct {
	opts Options
	mux  *http.ServeMux

	sessions SessionStore // by SHA-256 of the token

	mu   sync.Mutex
	last map[string]Health // the last check of each provider
	// tasks are the tasks paused or resumed from the console, listed on
	// the control page even without a budget or spend.
	tasks map[string]bool

	// open is the one session of a console without authentication, and
	// openToken its cookie's value (see openSession).
	openMu    sync.Mutex
	open      *session
	openToken string
}

// session is the live session of a request.
type session struct {
	id      string // the SHA-256 of its token
	csrf    string
	keyID   string
	expires time.Time
}

// SessionStore keeps the console's sessions, each named by the SHA-256 of
// its cookie's token (the token itself is never kept). *pgstate.Sessions
// is one, shared by a fleet's replicas.
type SessionStore interface {
	// Put records a session, and may delete those expired at now.
	Put(ctx context.Context, id string, s pgstate.Session, now time.Time) error
	// Get returns a session; false when there is none.
	Get(ctx context.Context, id string) (pgstate.Session, bool, error)
	// Delete ends a session.
	Delete(ctx context.Context, id string) error
}

// MemorySessions keeps sessions in the process's memory: the default.
type MemorySessions struct {
	mu sync.Mutex
	m  map[string]pgstate.Session
}

// Put records a session and deletes those expired at now.
func (m *MemorySessions) Put(_ context.Context, id string, s pgstate.Session, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]pgstate.Session{}
	}
	for k, o := range m.m {
		if !now.Before(o.Expires) {
			delete(m.m, k)
		}
	}
	m.m[id] = s
	return nil
}

// Get returns a session.
func (m *MemorySessions) Get(_ context.Context, id string) (pgstate.Session, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[id]
	return s, ok, nil
}

// Delete ends a session.
func (m *MemorySessions) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, id)
	return nil
}

//go:embed static
var staticFS embed.FS

// New returns a console.
func New(opts Options) (*Console, error) {
	switch {
	case opts.Keys == nil && !opts.NoAuth:
		return nil, errors.New("console: a key store is required unless authentication is turned off")
	case opts.Config == nil || opts.Registry == nil:
		return nil, errors.New("console: the configuration and the registry are required")
	case opts.Secrets == nil:
		return nil, errors.New("console: a secrets file is required")
	case opts.Health == nil:
		return nil, errors.New("console: a health check is required")
	case opts.Ledger == nil || opts.State == nil || opts.Consents == nil:
		return nil, errors.New("console: the ledger, the project state and the consent store are required")
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 30 * time.Second
	}
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if km, ok := opts.Keys.(KeyManager); ok && opts.KeyStore == nil {
		opts.KeyStore = km
	}
	if opts.Sessions == nil {
		opts.Sessions = &MemorySessions{}
	}
	c := &Console{opts: opts, mux: http.NewServeMux(), sessions: opts.Sessions, last: map[string]Health{}, tasks: map[string]bool{}}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	})
	c.mux.HandleFunc("GET /console/login", c.loginPage)
	c.mux.HandleFunc("POST /console/login", c.login)
	c.mux.HandleFunc("POST /console/logout", c.authed(c.logout))
	c.mux.HandleFunc("GET /console/{$}", c.authed(c.overviewPage))
	c.mux.HandleFunc("GET /console/access", c.authed(c.accessPage))
	c.mux.HandleFunc("POST /console/access", c.authed(c.createKey))
	c.mux.HandleFunc("POST /console/access/revoke", c.authed(c.revokeKey))
	c.mux.HandleFunc("GET /console/keys", c.authed(c.keysPage))
	c.mux.HandleFunc("POST /console/keys/{provider}", c.authed(c.saveKeys))
	c.mux.HandleFunc("POST /console/keys/{provider}/test", c.authed(c.testKeys))
	c.mux.HandleFunc("GET /console/health", c.authed(c.healthPage))
	c.mux.HandleFunc("POST /console/health", c.authed(c.checkAll))
	c.mux.HandleFunc("GET /console/spend", c.authed(c.spendPage))
	c.mux.HandleFunc("GET /console/control", c.authed(c.controlPage))
	c.mux.HandleFunc("POST /console/control/project", c.authed(c.projectControl))
	c.mux.HandleFunc("POST /console/control/task", c.authed(c.taskControl))
	c.mux.HandleFunc("POST /console/control/consent", c.authed(c.consentControl))
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	})
	return c, nil
}

// ServeHTTP serves the console with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if c.opts.NoAuth && !loopbackHost(r.Host) {
		http.Error(w, "without authentication the console answers only to a loopback host name (127.0.0.1, ::1 or localhost)", http.StatusMisdirectedRequest)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authed wraps a page: it finds the session (the one open session when
// authentication is off), sends people without one to the login
// form, and checks the origin and the synchronizer token of every POST.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			c.opts.Logger.Error("console: sessions unreadable", "error", err)
			http.Error(w, "the console cannot read its sessions: try again shortly", http.StatusServiceUnavailable)
			return
		}
		if s == nil && c.opts.NoAuth && r.Method == http.MethodGet {
			var err error
			if s, err = c.openSession(w, r); err != nil {
				http.Error(w, "cannot start a session", http.StatusInternalServerError)
				return
			}
		}
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
				return
			}
			http.Error(w, "not logged in: open "+Prefix+"login", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				http.Error(w, "refused: the request does not come from the console's own origin", http.StatusForbidden)
				return
			}
			if err := r.ParseForm(); err != nil {
				http.Error(w, "malformed form", http.StatusBadRequest)
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
				http.Error(w, "refused: missing or wrong form token; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		h(w, r, s)
	}
}

// sameOrigin reports whether a state-changing request comes from the
// console's own pages: the browser's Sec-Fetch-Site when it sends one,
// else the Origin header, else the Referer. A request with none of them
// is refused. Only the host is compared, so that a proxy terminating TLS
// in front of the gateway does not break the check.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		return hostOf(o) == strings.ToLower(r.Host)
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		return hostOf(ref) == strings.ToLower(r.Host)
	}
	// Sec-Fetch-Site alone (a page sent with no-referrer has Origin: null).
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "\x00"
	}
	return strings.ToLower(u.Host)
}

// token returns 32 random bytes, base64url.
func token() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func hashToken(t string) string {
	sum := sha256.Sum256([]byte(t))
	return hex.EncodeToString(sum[:])
}

// keyFinder is what a key store that finds a key by its id offers: the
// console uses it to end the sessions of revoked keys.
type keyFinder interface {
	Key(id string) (gateway.Key, bool, error)
}

// session returns the request's live session, or nil; an error when the
// sessions cannot be read.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
	defer cancel()
	id := hashToken(ck.Value)
	st, ok, err := c.sessions.Get(ctx, id)
	if err != nil || !ok {
		return nil, err
	}
	if !c.opts.Now().Before(st.Expires) || (st.KeyID != "" && !c.keyActive(st.KeyID)) {
		return nil, c.sessions.Delete(ctx, id)
	}
	return &session{id: id, csrf: st.CSRF, keyID: st.KeyID, expires: st.Expires}, nil
}

// keyActive reports whether the key a session was opened with is still
// active; it fails closed when the store cannot be read. A replica that
// has not yet seen a key another one created looks again (see
// [gateway.KeyStore.Key]) rather than end its session.
func (c *Console) keyActive(id string) bool {
	f, ok := c.opts.Keys.(keyFinder)
	if !ok {
		return true
	}
	k, found, err := f.Key(id)
	return err == nil && found && k.Active() && k.Admin()
}

// newSession starts a session and sets its cookie.
func (c *Console) newSession(w http.ResponseWriter, r *http.Request, keyID string) (*session, error) {
	s, tok, err := c.startSession(r.Context(), keyID)
	if err != nil {
		return nil, err
	}
	setSessionCookie(w, r, tok, s)
	return s, nil
}

// openSession is the session of a console without authentication: one,
// started by the first GET without a cookie (and again once it expired
// or was logged out of) and given to every other, so that requests without a cookie do not
// each leave a session behind. Its form token is as secret as any
// session's: only pages of the console, on a loopback host, show it.
func (c *Console) openSession(w http.ResponseWriter, r *http.Request) (*session, error) {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	live := false
	if c.open != nil {
		ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
		st, ok, err := c.sessions.Get(ctx, c.open.id)
		cancel()
		if err != nil {
			return nil, err
		}
		live = ok && st.CSRF == c.open.csrf && c.opts.Now().Before(st.Expires)
	}
	if !live { // none yet, expired, or ended by a logout
		s, tok, err := c.startSession(r.Context(), "")
		if err != nil {
			return nil, err
		}
		c.open, c.openToken = s, tok
	}
	setSessionCookie(w, r, c.openToken, c.open)
	return c.open, nil
}

// startSession records a new session and returns it with its token.
func (c *Console) startSession(ctx context.Context, keyID string) (*session, string, error) {
	tok, err := token()
	if err != nil {
		return nil, "", err
	}
	csrf, err := token()
	if err != nil {
		return nil, "", err
	}
	now := c.opts.Now()
	s := &session{id: hashToken(tok), csrf: csrf, keyID: keyID, expires: now.Add(c.opts.SessionTTL)}
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if err := c.sessions.Put(ctx, s.id, pgstate.Session{CSRF: csrf, KeyID: keyID, Created: now, Expires: s.expires}, now); err != nil {
		return nil, "", err
	}
	return s, tok, nil
}

func setSessionCookie(w http.ResponseWriter, r *http.Request, tok string, s *session) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: tok, Path: Prefix, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, Expires: s.expires})
}

// loginPage shows the login form with a fresh login token (a cookie and a
// hidden field that must match).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if s, _ := c.session(r); c.opts.NoAuth || s != nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, "")
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok, err := token()
	if err != nil {
		http.Error(w, "cannot make a login token", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: tok, Path: Prefix, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: 900})
	c.render(w, status, page{Title: "Log in", Project: c.opts.Project, CSRF: tok, Error: msg, body: loginView})
}

// login exchanges a virtual key for a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.opts.NoAuth {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "refused: the request does not come from the console's own origin", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostForm.Get("csrf"))) != 1 {
		c.renderLogin(w, r, http.StatusForbidden, "The login form expired: try again.")
		return
	}
	k, err := c.opts.Keys.Check(strings.TrimSpace(r.PostForm.Get("key")))
	switch {
	case errors.Is(err, gateway.ErrRevokedKey):
		c.renderLogin(w, r, http.StatusUnauthorized, "This key was revoked.")
		return
	case err != nil && !errors.Is(err, gateway.ErrInvalidKey):
		c.opts.Logger.Error("console: key store unreadable", "error", err)
		c.renderLogin(w, r, http.StatusInternalServerError, "The gateway cannot read its key store.")
		return
	case err != nil:
		c.renderLogin(w, r, http.StatusUnauthorized, "Invalid key: use a virtual key from 'cortexbuild serve keys create'.")
		return
	case c.opts.Project != "" && k.Project != "" && k.Project != c.opts.Project:
		c.renderLogin(w, r, http.StatusForbidden, "This key belongs to another project.")
		return
	case !k.Admin():
		c.renderLogin(w, r, http.StatusForbidden, "This is a call key: it makes model calls only. The console needs an admin key: create one with 'cortexbuild serve keys create --role admin'.")
		return
	}
	if _, err := c.newSession(w, r, k.ID); err != nil {
		c.opts.Logger.Error("console: cannot start a session", "error", err)
		http.Error(w, "cannot start a session", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	c.opts.Logger.Info("console: login", "key", k.Hint())
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithTimeout(r.Context(), sessionTimeout)
	defer cancel()
	if err := c.sessions.Delete(ctx, s.id); err != nil {
		c.opts.Logger.Error("console: ending a session failed", "error", err)
		http.Error(w, "the session could not be ended: try again", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}
