package locality

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testService = Service{Name: "store postgres", Key: "store.dsn"}

// In local-only mode a service reaches loopback only: a name or literal
// that is (or resolves to anything) not loopback is refused before any
// dial, with an error naming the service, the addresses and the fix.
func TestServiceDialLocalOnlyRefusesRemoteWithoutDialing(t *testing.T) {
	g, r, d, _ := testGate(t, ModeLocalOnly, consentFor("db")) // a consent changes nothing
	r.set("db.remote.test", "203.0.113.5")
	r.set("split.test", "127.0.0.1", "203.0.113.9")
	r.set("localhost", "203.0.113.10") // the name is not what counts
	dial := g.ServiceDial(testService)
	for _, address := range []string{"db.remote.test:5432", "split.test:5432", "localhost:5432", "203.0.113.5:5432", "[2001:db8::1]:5432", "[::ffff:203.0.113.5]:5432"} {
		_, err := dial(context.Background(), "tcp", address)
		e := refusal(t, err, ReasonLocalOnly)
		if e.Service != "store postgres" {
			t.Errorf("%s: refusal names service %q", address, e.Service)
		}
		for _, want := range []string{"store postgres (", "is not on this machine and locality mode is local-only", "point store.dsn at this machine or set locality.mode: consent"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q lacks %q", address, err, want)
			}
		}
	}
	if got := d.Dials(); len(got) != 0 {
		t.Errorf("dials %q, want none", got)
	}
	want := "store postgres (db.remote.test → 203.0.113.5) is not on this machine and locality mode is local-only: point store.dsn at this machine or set locality.mode: consent"
	if _, err := dial(context.Background(), "tcp", "db.remote.test:5432"); err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if _, err := dial(context.Background(), "udp", "127.0.0.1:53"); err == nil {
		t.Error("a UDP dial was allowed")
	}
	if _, err := dial(context.Background(), "tcp", "nowhere.test:1"); !isReason(err, ReasonResolve) {
		t.Errorf("unresolvable host: %v, want a resolve refusal", err)
	}
}

func isReason(err error, r Reason) bool {
	e, ok := err.(*Error)
	return ok && e.Reason == r
}

// Loopback is dialed in every mode, on the resolved IP address, never the
// name; in consent mode a configured remote service is dialed too, on its
// resolved address, through the gate's dialer.
func TestServiceDialLoopbackAndConsentMode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	for _, mode := range []Mode{ModeLocalOnly, ModeConsent} {
		g, r, d, _ := testGate(t, mode)
		r.set("db.local.test", "127.0.0.1")
		c, err := g.ServiceDial(testService)(context.Background(), "tcp", "db.local.test:"+port)
		if err != nil {
			t.Fatalf("%s: loopback: %v", mode, err)
		}
		c.Close()
		if got := d.Dials(); len(got) != 1 || got[0] != "tcp 127.0.0.1:"+port {
			t.Errorf("%s: dials %q, want the resolved loopback address", mode, got)
		}
	}
	g, r, d, _ := testGate(t, ModeConsent) // no consent recorded: services need none
	r.set("db.remote.test", "203.0.113.5")
	if _, err := g.ServiceDial(testService)(context.Background(), "tcp", "db.remote.test:5432"); err != errTestRefused {
		t.Fatalf("consent mode, remote service: %v, want the test dialer's refusal (the gate let it through)", err)
	}
	if got := d.Dials(); len(got) != 1 || got[0] != "tcp 203.0.113.5:5432" {
		t.Errorf("dials %q, want the resolved address only", got)
	}
}

// A unix socket never leaves the machine: allowed in local-only mode, and
// not handed to the gate's dialer (which takes IP addresses only).
func TestServiceDialUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "loc") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	g, _, d, _ := testGate(t, ModeLocalOnly)
	c, err := g.ServiceDial(testService)(context.Background(), "unix", path)
	if err != nil {
		t.Fatalf("unix socket: %v", err)
	}
	c.Close()
	if got := d.Dials(); len(got) != 0 {
		t.Errorf("the gate's dialer was given %q", got)
	}
}

// A service's HTTP client ignores proxy settings, dials through the gate,
// refuses a remote endpoint in local-only mode and never follows a
// redirect.
func TestServiceClient(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://203.0.113.99:3128")
	t.Setenv("http_proxy", "http://203.0.113.99:3128")
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(ok.Close)
	g, r, d, _ := testGate(t, ModeLocalOnly)
	r.set("hooks.remote.test", "203.0.113.5")
	hook := Service{Name: "webhook", Key: "notifications.webhook_url"}
	c := g.ServiceClient(hook, &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}})

	resp, err := c.Get(ok.URL)
	if err != nil {
		t.Fatalf("loopback: %v", err)
	}
	resp.Body.Close()
	if got := d.Dials(); len(got) != 1 || got[0] != "tcp "+strings.TrimPrefix(ok.URL, "http://") {
		t.Errorf("dials %q, want the loopback server directly (no proxy)", got)
	}

	_, err = c.Get("http://hooks.remote.test/hook")
	refusal(t, err, ReasonLocalOnly)
	if got := d.RemoteDials(); len(got) != 0 {
		t.Errorf("remote dials %q", got)
	}

	_, err = c.Get(redirect.URL)
	if err == nil || !strings.Contains(err.Error(), "not following the redirect") {
		t.Errorf("redirect: %v, want it refused", err)
	}
	for _, dial := range d.Dials() {
		if strings.HasSuffix(dial, ":1") {
			t.Errorf("the redirect target was dialed: %q", dial)
		}
	}

	// A loopback endpoint redirecting off this machine: not followed, and
	// the target is neither looked up nor dialed.
	offMachine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://hooks.remote.test/elsewhere", http.StatusFound)
	}))
	t.Cleanup(offMachine.Close)
	before := len(r.Lookups())
	if _, err = c.Get(offMachine.URL); err == nil || !strings.Contains(err.Error(), "not following the redirect to hooks.remote.test") {
		t.Errorf("redirect off this machine: %v, want it refused", err)
	}
	if got := r.Lookups()[before:]; len(got) != 0 {
		t.Errorf("the redirect target was looked up: %q", got)
	}

	// A name resolving to loopback and a remote address is remote: not
	// even its loopback address is dialed.
	r.set("split.test", "127.0.0.1", "203.0.113.9")
	dials := len(d.Dials())
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ok.URL, "http://"))
	_, err = c.Get("http://split.test:" + port + "/")
	if e := refusal(t, err, ReasonLocalOnly); e.Service != "webhook" {
		t.Errorf("refusal names service %q", e.Service)
	}
	if got := d.Dials()[dials:]; len(got) != 0 {
		t.Errorf("split name: dials %q, want none", got)
	}
	if got := d.RemoteDials(); len(got) != 0 {
		t.Errorf("remote dials %q", got)
	}
}

// In consent mode a service's HTTP client reaches a configured remote
// endpoint on its resolved address, through the gate's dialer (served
// here in memory), with no consent recorded.
func TestServiceClientConsentMode(t *testing.T) {
	g, r, d, _ := testGate(t, ModeConsent)
	r.set("hooks.remote.test", "203.0.113.5")
	srv := d.serve("203.0.113.5:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "delivered") }))
	c := g.ServiceClient(Service{Name: "webhook", Key: "notifications.webhook_url"}, nil)
	resp, err := c.Post("http://hooks.remote.test/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "delivered" || srv.requests.Load() != 1 {
		t.Errorf("answer %q, %d requests", b, srv.requests.Load())
	}
	if got := d.Dials(); len(got) != 1 || got[0] != "tcp 203.0.113.5:80" {
		t.Errorf("dials %q, want the resolved address only", got)
	}
	if got := r.Lookups(); len(got) != 1 || got[0] != "hooks.remote.test" {
		t.Errorf("lookups %q: the name was not resolved by the gate's resolver", got)
	}
}

// CheckService decides ahead of time, without a connection: in local-only
// mode on resolved addresses; in consent mode a configured service is
// allowed without even a lookup.
func TestCheckService(t *testing.T) {
	g, r, d, _ := testGate(t, ModeLocalOnly)
	r.set("db.remote.test", "203.0.113.5")
	r.set("db.local.test", "127.0.0.1", "::1")
	if _, err := g.CheckService(context.Background(), testService, "db.remote.test"); err == nil {
		t.Error("local-only: a remote service passed")
	} else {
		refusal(t, err, ReasonLocalOnly)
	}
	if dec, err := g.CheckService(context.Background(), testService, "db.local.test"); err != nil || !dec.Allowed || dec.Tier != TierLoopback {
		t.Errorf("local-only, loopback: %+v, %v", dec, err)
	}
	r.set("split.test", "::1", "203.0.113.9")
	if _, err := g.CheckService(context.Background(), testService, "split.test"); err == nil {
		t.Error("local-only: a name resolving to loopback and a remote address passed")
	} else if e := refusal(t, err, ReasonLocalOnly); len(e.Addrs) != 2 {
		t.Errorf("refusal names addresses %v, want both", e.Addrs)
	}
	if got := r.Lookups(); !slices.Equal(got, []string{"db.remote.test", "db.local.test", "split.test"}) {
		t.Errorf("lookups %q: the names were not resolved by the gate's resolver", got)
	}
	if got := d.Dials(); len(got) != 0 {
		t.Errorf("CheckService dialed %q", got)
	}
	g2, r2, _, _ := testGate(t, ModeConsent)
	if dec, err := g2.CheckService(context.Background(), testService, "db.remote.test"); err != nil || !dec.Allowed {
		t.Errorf("consent mode: %+v, %v", dec, err)
	}
	if got := r2.Lookups(); len(got) != 0 {
		t.Errorf("consent mode looked up %q", got)
	}
	if _, err := (&Gate{Mode: "bogus"}).CheckService(context.Background(), testService, "127.0.0.1"); err == nil {
		t.Error("an unknown mode allowed a service")
	}
}
