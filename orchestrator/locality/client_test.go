package locality

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// loopbackServer starts an httptest server on 127.0.0.1 and returns it
// with its port.
func loopbackServer(t *testing.T, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	if !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("httptest server not on 127.0.0.1: %s", srv.URL)
	}
	return srv, u.Port()
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

func get(t *testing.T, c *http.Client, u string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestClientLoopback(t *testing.T) {
	for _, mode := range []Mode{ModeConsent, ModeLocalOnly} {
		t.Run(string(mode), func(t *testing.T) {
			g, r, d, _ := testGate(t, mode) // no consent at all
			_, port := loopbackServer(t, hello)
			r.set("llm.local.test", "127.0.0.1")
			c := g.Client("ollama", nil)
			for _, u := range []string{"http://127.0.0.1:" + port + "/v1", "http://llm.local.test:" + port + "/v1"} {
				body, err := get(t, c, u)
				if err != nil || body != "hello" {
					t.Fatalf("GET %s = %q, %v", u, body, err)
				}
			}
			if got, want := d.Dials(), []string{"tcp 127.0.0.1:" + port, "tcp 127.0.0.1:" + port}; !slices.Equal(got, want) {
				t.Errorf("dials %q, want %q", got, want)
			}
			if got := r.Lookups(); !slices.Equal(got, []string{"llm.local.test"}) {
				t.Errorf("lookups %q: the IP literal must not be looked up", got)
			}
		})
	}
}

// TestClientRefusesWithoutDialing covers the refusals that must open no
// connection at all.
func TestClientRefusesWithoutDialing(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		consent bool
		hosts   map[string][]string
		url     string
		reason  Reason
	}{
		{name: "remote without consent", hosts: map[string][]string{"remote.example": {"192.0.2.10"}},
			url: "https://remote.example/v1/messages", reason: ReasonNoConsent},
		{name: "remote literal without consent", url: "http://192.0.2.10:8080/", reason: ReasonNoConsent},
		{name: "localhost resolving to a remote address", hosts: map[string][]string{"localhost": {"192.0.2.20"}},
			url: "http://localhost:11434/api/chat", reason: ReasonNoConsent},
		{name: "loopback and remote without consent", hosts: map[string][]string{"mixed.test": {"127.0.0.1", "192.0.2.30"}},
			url: "http://mixed.test:11434/", reason: ReasonNoConsent},
		{name: "local-only with consent", mode: ModeLocalOnly, consent: true, hosts: map[string][]string{"remote.example": {"192.0.2.10"}},
			url: "https://remote.example/v1", reason: ReasonLocalOnly},
		{name: "unresolvable", url: "https://nowhere.test/", reason: ReasonResolve},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []Consent
			if tt.consent {
				cs = append(cs, consentFor("cloud"))
			}
			g, r, d, _ := testGate(t, tt.mode, cs...)
			for h, as := range tt.hosts {
				r.set(h, as...)
			}
			_, checkErr := g.Check(context.Background(), "cloud", tt.url)
			refusal(t, checkErr, tt.reason)

			_, err := get(t, g.Client("cloud", nil), tt.url)
			e := refusal(t, err, tt.reason)
			if e.Error() != checkErr.Error() {
				t.Errorf("Client's refusal %q differs from Check's %q", e, checkErr)
			}
			if got := d.Dials(); len(got) != 0 {
				t.Errorf("dial attempts %q, want none", got)
			}
		})
	}
}

func TestClientWithConsentDialsResolvedAddresses(t *testing.T) {
	g, r, d, s := testGate(t, "")
	r.set("remote.example", "192.0.2.10", "2001:db8::10")
	for _, tt := range []struct{ url, port string }{
		{"http://remote.example/v1", "80"},
		{"https://remote.example/v1", "443"},
		{"https://remote.example:8443/v1", "8443"},
	} {
		if err := s.Grant(context.Background(), consentAt("cloud", tt.url)); err != nil {
			t.Fatal(err)
		}
		before := len(d.Dials())
		_, err := get(t, g.Client("cloud", nil), tt.url)
		if !errors.Is(err, errTestRefused) {
			t.Fatalf("GET %s: %v, want the test dialer's refusal", tt.url, err)
		}
		if errors.Is(err, ErrRefused) {
			t.Errorf("GET %s: the gate refused despite consent: %v", tt.url, err)
		}
		got := d.Dials()[before:]
		want := []string{"tcp 192.0.2.10:" + tt.port, "tcp [2001:db8::10]:" + tt.port}
		if !slices.Equal(got, want) {
			t.Errorf("GET %s dialed %q, want %q (resolved addresses, never the name)", tt.url, got, want)
		}
	}
}

func TestClientDNSRebinding(t *testing.T) {
	g, r, d, _ := testGate(t, "")
	_, port := loopbackServer(t, hello)
	u := "http://rebind.test:" + port + "/"
	r.set("rebind.test", "127.0.0.1")

	dec, err := g.Check(context.Background(), "ollama", u)
	if err != nil || dec.Tier != TierLoopback {
		t.Fatalf("Check before rebinding: %+v, %v", dec, err)
	}
	c := g.Client("ollama", nil)
	if body, err := get(t, c, u); err != nil || body != "hello" {
		t.Fatalf("GET before rebinding: %q, %v", body, err)
	}

	r.set("rebind.test", "192.0.2.66") // the name now points off the machine
	c.CloseIdleConnections()
	_, err = get(t, c, u)
	refusal(t, err, ReasonNoConsent)
	if got := d.RemoteDials(); len(got) != 0 {
		t.Errorf("remote dials %q, want none", got)
	}
	if got, want := d.Dials(), []string{"tcp 127.0.0.1:" + port}; !slices.Equal(got, want) {
		t.Errorf("dials %q, want %q", got, want)
	}
}

func TestClientConsentRevokedMidRun(t *testing.T) {
	ctx := context.Background()
	t.Run("next connection", func(t *testing.T) {
		g, r, d, s := testGate(t, "", consentFor("cloud"))
		r.set("remote.example", "192.0.2.10")
		c := g.Client("cloud", &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
		if _, err := get(t, c, "http://remote.example/"); !errors.Is(err, errTestRefused) {
			t.Fatalf("with consent: %v, want a dial attempt", err)
		}
		if ok, err := s.Revoke(ctx, "cloud"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		_, err := get(t, c, "http://remote.example/")
		refusal(t, err, ReasonNoConsent)
		if got := d.Dials(); !slices.Equal(got, []string{"tcp 192.0.2.10:80"}) {
			t.Errorf("dials %q, want only the one made with consent", got)
		}
	})

	// With keep-alives on, a revocation must still stop the next request,
	// not only the next connection. The remote is served in memory.
	t.Run("pooled connection", func(t *testing.T) {
		g, r, d, s := testGate(t, "", consentFor("cloud"))
		r.set("remote.example", "192.0.2.10")
		mem := d.serve("192.0.2.10:80", hello)
		c := g.Client("cloud", nil)
		for range 2 {
			if body, err := get(t, c, "http://remote.example/"); err != nil || body != "hello" {
				t.Fatalf("with consent: %q, %v", body, err)
			}
		}
		if n := mem.conns.Load(); n != 1 {
			t.Fatalf("%d connections for two requests: keep-alive is off, the test proves nothing", n)
		}
		if _, err := s.Revoke(ctx, "cloud"); err != nil {
			t.Fatal(err)
		}
		_, err := get(t, c, "http://remote.example/")
		refusal(t, err, ReasonNoConsent)
		if n := mem.requests.Load(); n != 2 {
			t.Errorf("the remote served %d requests, want 2 (none after the revocation)", n)
		}

		// Granting again works, on a new connection.
		if err := s.Grant(ctx, consentFor("cloud")); err != nil {
			t.Fatal(err)
		}
		if body, err := get(t, c, "http://remote.example/"); err != nil || body != "hello" {
			t.Fatalf("after granting again: %q, %v", body, err)
		}
		if n := mem.conns.Load(); n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
		c.CloseIdleConnections()
	})
}

func TestClientRedirects(t *testing.T) {
	tests := []struct {
		name     string
		consent  bool
		location string
		reason   Reason
	}{
		{name: "loopback to remote name", location: "http://remote.example/v1", reason: ReasonRedirect},
		{name: "loopback to remote name with consent", consent: true, location: "http://remote.example/v1", reason: ReasonRedirect},
		{name: "loopback to remote literal with consent", consent: true, location: "http://192.0.2.10/v1", reason: ReasonRedirect},
		{name: "loopback to localhost resolving remote", consent: true, location: "http://localhost/v1", reason: ReasonRedirect},
		{name: "loopback to loopback", location: "/final"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []Consent
			if tt.consent {
				cs = append(cs, consentFor("ollama"))
			}
			g, r, d, _ := testGate(t, "", cs...)
			r.set("remote.example", "192.0.2.10").set("localhost", "192.0.2.11")
			_, port := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if req.URL.Path == "/final" {
					io.WriteString(w, "final")
					return
				}
				http.Redirect(w, req, tt.location, http.StatusFound)
			}))
			body, err := get(t, g.Client("ollama", nil), "http://127.0.0.1:"+port+"/start")
			if tt.reason == ReasonUnknown {
				if err != nil || body != "final" {
					t.Fatalf("GET: %q, %v", body, err)
				}
			} else {
				e := refusal(t, err, tt.reason)
				if e.From != "127.0.0.1:"+port {
					t.Errorf("From %q, want the loopback server", e.From)
				}
			}
			if got := d.RemoteDials(); len(got) != 0 {
				t.Errorf("remote dials %q, want none", got)
			}
		})
	}
}

func TestClientRedirectBetweenRemotesNeedsConsent(t *testing.T) {
	ctx := context.Background()
	g, r, d, s := testGate(t, "", consentFor("cloud"))
	r.set("remote.example", "192.0.2.10").set("other.example", "192.0.2.12")
	var revoke atomic.Bool
	d.serve("192.0.2.10:80", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if revoke.Load() {
			s.Revoke(ctx, "cloud") // revoked while the request is in flight
		}
		http.Redirect(w, req, "http://other.example/v1", http.StatusTemporaryRedirect)
	}))
	c := g.Client("cloud", &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})

	// Consent is per endpoint: a redirect to another host is refused, not
	// dialed, even though the provider has consent for remote.example.
	_, err := get(t, c, "http://remote.example/v1")
	if e := refusal(t, err, ReasonNoConsent); e.Host != "other.example" || e.Endpoint != "http://other.example:80" || e.Consented != "http://remote.example:80" {
		t.Fatalf("refusal %+v", e)
	}
	if got, want := d.Dials(), []string{"tcp 192.0.2.10:80"}; !slices.Equal(got, want) {
		t.Errorf("dials %q, want %q", got, want)
	}

	// The redirect is decided with the consent of the moment.
	revoke.Store(true)
	_, err = get(t, c, "http://remote.example/v1")
	if e := refusal(t, err, ReasonNoConsent); e.From != "remote.example" || e.Host != "other.example" {
		t.Errorf("refusal from %q to %q, want remote.example to other.example", e.From, e.Host)
	}
	if got, want := d.Dials()[1:], []string{"tcp 192.0.2.10:80"}; !slices.Equal(got, want) {
		t.Errorf("dials after revocation %q, want %q", got, want)
	}
}

func TestClientIgnoresProxies(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "proxied")
	}))
	defer proxy.Close()
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	proxyURL, _ := url.Parse(proxy.URL)

	// The bases' own dialers are traps: the gate must drop them. They
	// never dial, so even a broken gate opens no remote connection here.
	var trapped atomic.Int64
	trap := func(ctx context.Context, network, address string) (net.Conn, error) {
		trapped.Add(1)
		return nil, errors.New("trap: the base transport's own dialer was used")
	}
	defaultLike := http.DefaultTransport.(*http.Transport).Clone() // proxy from the environment
	defaultLike.DialContext = trap
	bases := map[string]*http.Client{
		"fresh client":          nil,
		"environment proxy":     {Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: trap}},
		"explicit proxy":        {Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DialContext: trap}},
		"default transport":     {Transport: defaultLike},
		"custom dial, TLS dial": {Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DialContext: trap, DialTLSContext: trap}},
	}
	for name, base := range bases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if n := trapped.Load(); n != 0 {
					t.Errorf("the base's dialer ran %d times", n)
				}
			}()
			g, r, d, s := testGate(t, "")
			r.set("remote.example", "192.0.2.10")
			for _, u := range []string{"http://remote.example/v1", "https://remote.example/v1"} {
				if err := s.Grant(context.Background(), consentAt("cloud", u)); err != nil {
					t.Fatal(err)
				}
				if _, err := get(t, g.Client("cloud", base), u); !errors.Is(err, errTestRefused) {
					t.Errorf("GET %s: %v, want the test dialer's refusal of the direct dial", u, err)
				}
			}
			if got, want := d.Dials(), []string{"tcp 192.0.2.10:80", "tcp 192.0.2.10:443"}; !slices.Equal(got, want) {
				t.Errorf("dials %q, want %q", got, want)
			}
			if n := proxied.Load(); n != 0 {
				t.Errorf("the proxy saw %d requests", n)
			}
		})
	}
}

type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.n.Add(1)
	return nil, errors.New("should not be called")
}

func TestClientRefusesUngateableTransport(t *testing.T) {
	g, _, d, _ := testGate(t, "")
	_, port := loopbackServer(t, hello)
	rt := &countingTransport{}
	c := g.Client("ollama", &http.Client{Transport: rt})
	_, err := get(t, c, "http://127.0.0.1:"+port+"/")
	if err == nil || !strings.Contains(err.Error(), "cannot gate") {
		t.Errorf("GET through a foreign transport: %v", err)
	}
	if rt.n.Load() != 0 || len(d.Dials()) != 0 {
		t.Errorf("the foreign transport ran %d times, dials %q", rt.n.Load(), d.Dials())
	}
	// Gating a gated client again is fine.
	again := g.Client("ollama", g.Client("ollama", nil))
	if body, err := get(t, again, "http://127.0.0.1:"+port+"/"); err != nil || body != "hello" {
		t.Errorf("re-gated client: %q, %v", body, err)
	}
}

func TestClientKeepsBase(t *testing.T) {
	g, _, _, _ := testGate(t, "")
	var redirects atomic.Int64
	base := &http.Client{
		Timeout: 1234,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			redirects.Add(1)
			return http.ErrUseLastResponse
		},
	}
	c := g.Client("ollama", base)
	if c == base || c.Timeout != base.Timeout || base.Transport != nil {
		t.Fatalf("Client changed or lost the base: %+v", c)
	}
	c.Timeout = 0
	_, port := loopbackServer(t, http.RedirectHandler("/elsewhere", http.StatusFound))
	resp, err := c.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || redirects.Load() != 1 {
		t.Errorf("status %d, base CheckRedirect ran %d times", resp.StatusCode, redirects.Load())
	}
}

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// sdkBody wraps a body the way provider SDKs do, hiding the *bytes.Reader
// from net/http.
type sdkBody struct{ io.ReadCloser }

// A request whose body is in memory goes out in one write, header and body
// together, even when an SDK wrapped the body in its own reader.
func TestClientSendsAnInMemoryBodyWithItsHeader(t *testing.T) {
	g, _, _, _ := testGate(t, ModeLocalOnly)
	var writes atomic.Int32
	var d net.Dialer
	g.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	got := make(chan string, 1)
	_, port := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	c := g.Client("ollama", nil)
	body := strings.Repeat(`{"model":"m","messages":[]}`, 20)
	for range 3 {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1:"+port+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Body = sdkBody{req.Body}
		writes.Store(0)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if b := <-got; b != body {
			t.Fatalf("the server read %d bytes, want %d", len(b), len(body))
		}
		if n := writes.Load(); n != 1 {
			t.Errorf("the request took %d writes; want 1 (header and body together)", n)
		}
	}
}
