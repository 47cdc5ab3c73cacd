package locality

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	prov "github.com/cortexbuild/cortexbuild/provider"
)

// Client returns an HTTP client for provider that can reach only what the
// gate allows. It is a copy of base (nil: a fresh client) with these
// changes:
//
//   - Its transport dials only through the gate. Every new connection
//     resolves the host again (IP literals need no lookup), decides on the
//     addresses resolved at that moment, and dials an allowed IP address
//     with g.Dial, never the host name. So a name that re-resolves to a
//     remote address between Check and the dial (DNS rebinding) is refused
//     at the dial.
//   - Proxies are off, whatever the environment says (HTTP_PROXY and
//     friends), and base's own dial and proxy hooks are dropped, so nothing
//     can route around the gate.
//   - Before each request, if the client has ever connected to a remote
//     address and the provider's consent is gone (revoked, or the mode is
//     local-only), its pooled connections are retired: the request gets a
//     fresh connection, which the gate decides on again. A revocation thus
//     stops the next request, not only the next connection.
//   - Redirects are decided like the original request, and a redirect from
//     a loopback endpoint to one that is not loopback is refused
//     (ReasonRedirect) even with consent. base's CheckRedirect, if any,
//     runs afterwards; otherwise at most 10 redirects are followed.
//
// base.Transport must be nil (a fresh transport with Go's usual defaults),
// an *http.Transport (cloned; the clone's dial and proxy settings are
// replaced), or a transport from another Client call. Any other
// RoundTripper cannot be gated: the client then fails every request with
// an error, and sends nothing.
func (g *Gate) Client(provider string, base *http.Client) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	t := &gatedTransport{gate: g, provider: provider}
	t.template, t.err = gateableTransport(c.Transport)
	if t.err == nil {
		t.cur = t.newGeneration()
	}
	c.Transport = t
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := t.checkRedirect(req, via); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// gateableTransport returns a transport template built from rt with every
// proxy and dial hook removed.
func gateableTransport(rt http.RoundTripper) (*http.Transport, error) {
	var tr *http.Transport
	switch b := rt.(type) {
	case nil:
		// Go's DefaultTransport settings, without its proxy; not a clone of
		// http.DefaultTransport, which other code may have changed.
		tr = &http.Transport{
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: 1 * time.Second,
		}
	case *http.Transport:
		tr = b.Clone()
	case *gatedTransport:
		if b.err != nil {
			return nil, b.err
		}
		tr = b.template.Clone()
	default:
		return nil, fmt.Errorf("locality: cannot gate an HTTP transport of type %T: pass nil or an *http.Transport", rt)
	}
	tr.Proxy = nil
	tr.OnProxyConnectResponse = nil
	tr.GetProxyConnectHeader = nil
	tr.ProxyConnectHeader = nil
	tr.Dial = nil
	tr.DialTLS = nil
	tr.DialTLSContext = nil
	tr.DialContext = nil
	return tr, nil
}

// gatedTransport is the RoundTripper of a gated client. Its connections
// live in generations: one current, plus retired ones whose pooled
// connections are being closed.
type gatedTransport struct {
	gate     *Gate
	provider string
	template *http.Transport // cloned for each generation; carries no request
	err      error           // why this transport cannot be used, if it cannot

	mu      sync.Mutex
	cur     *generation
	retired []*generation
}

// generation is one connection pool.
type generation struct {
	tr *http.Transport
	// remote is set before the pool first dials an address that is not
	// loopback; until then every pooled connection is loopback.
	remote atomic.Bool
	// open counts the pool's open connections to remote addresses.
	open atomic.Int64
}

func (t *gatedTransport) newGeneration() *generation {
	gen := &generation{tr: t.template.Clone()}
	gen.tr.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		return t.dial(ctx, gen, network, address)
	}
	return gen
}

// RoundTrip sends req on a connection the gate allowed.
func (t *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, t.err
	}
	ep, _ := prov.Endpoint(req.URL.Scheme + "://" + req.URL.Host)
	ctx := context.WithValue(req.Context(), schemeKey{}, req.URL.Scheme)
	out := req.WithContext(ctx)
	if b := inMemoryBody(req); b != nil {
		// The round trip owns req.Body: it is closed here, unread, and the
		// same bytes go in a form net/http writes with the header.
		req.Body.Close()
		out.Body = b
	}
	return t.generation(ctx, ep).tr.RoundTrip(out)
}

// inMemoryBody returns a fresh copy of req's body from req.GetBody, or nil
// when there is none. SDKs wrap the bodies they build in their own
// ReadCloser, which net/http cannot tell from a stream: it then writes the
// header and the body in two system calls. Their GetBody hands back the
// bytes as an io.NopCloser around a *bytes.Reader, which net/http sends
// with the header in one write.
func inMemoryBody(req *http.Request) io.ReadCloser {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil || req.ContentLength <= 0 {
		return nil
	}
	b, err := req.GetBody()
	if err != nil {
		return nil
	}
	return b
}

// generation returns the pool for the next request, retiring the current
// one when it may hold remote connections that are no longer allowed.
// schemeKey carries a request's URL scheme to the dial it causes, so that
// the dial decides on the whole endpoint (scheme, host, port).
type schemeKey struct{}

func (t *gatedTransport) generation(ctx context.Context, endpoint string) *generation {
	t.mu.Lock()
	gen := t.cur
	t.sweepLocked()
	t.mu.Unlock()
	if !gen.remote.Load() || t.gate.remoteAllowed(ctx, t.provider, endpoint) {
		return gen
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == gen {
		t.cur = t.newGeneration()
		t.retired = append(t.retired, gen)
		gen.tr.CloseIdleConnections()
	}
	return t.cur
}

// sweepLocked closes the idle connections of retired pools (connections
// that were busy at retirement become idle later) and forgets the pools
// with no remote connection left.
func (t *gatedTransport) sweepLocked() {
	kept := t.retired[:0]
	for _, gen := range t.retired {
		gen.tr.CloseIdleConnections()
		if gen.open.Load() > 0 {
			kept = append(kept, gen)
		}
	}
	clear(t.retired[len(kept):])
	t.retired = kept
}

// CloseIdleConnections closes the idle connections of every pool.
func (t *gatedTransport) CloseIdleConnections() {
	if t.err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur.tr.CloseIdleConnections()
	t.sweepLocked()
}

// dial is the only way the transport opens connections: it resolves, asks
// the gate, and dials an allowed IP address.
func (t *gatedTransport) dial(ctx context.Context, gen *generation, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("locality: provider %q: network %q is not allowed", t.provider, network)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("locality: provider %q: %w", t.provider, err)
	}
	scheme, _ := ctx.Value(schemeKey{}).(string)
	endpoint, _ := prov.Endpoint(scheme + "://" + address)
	d, err := t.gate.decideHost(ctx, t.provider, endpoint, host)
	if err != nil {
		return nil, err
	}
	if !d.Allowed { // decide never allows without saying so; belt and braces
		return nil, &Error{Provider: t.provider, Host: host, Addrs: d.Addrs, Reason: ReasonUnknown}
	}
	addrs := forNetwork(d.Addrs, network)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("locality: provider %q: %s has no %s address (it resolved to %v)", t.provider, host, network, d.Addrs)
	}
	if d.Tier != TierLoopback {
		gen.remote.Store(true)
	}
	return t.gate.dialEach(ctx, network, port, addrs, func(a netip.Addr, c net.Conn) net.Conn {
		if a.IsLoopback() {
			return c
		}
		gen.open.Add(1)
		return &trackedConn{Conn: c, gen: gen}
	})
}

// dialEach dials the allowed addresses in order with g's dialer until one
// answers; opened, when set, may wrap each connection made. Every address
// is an IP address: the dialer is never given a name.
func (g *Gate) dialEach(ctx context.Context, network, port string, addrs []netip.Addr, opened func(netip.Addr, net.Conn) net.Conn) (net.Conn, error) {
	dial := g.dialer()
	var errs []error
	for _, a := range addrs {
		a = a.Unmap()
		c, err := dial(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			if opened != nil {
				c = opened(a, c)
			}
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}

// forNetwork keeps the addresses network can reach.
func forNetwork(addrs []netip.Addr, network string) []netip.Addr {
	if network == "tcp" {
		return addrs
	}
	var out []netip.Addr
	for _, a := range addrs {
		if a.Unmap().Is4() == (network == "tcp4") {
			out = append(out, a)
		}
	}
	return out
}

// trackedConn counts itself out of its pool's remote connections when
// closed.
type trackedConn struct {
	net.Conn
	gen  *generation
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.gen.open.Add(-1) })
	return c.Conn.Close()
}

// checkRedirect decides on a redirect target like on the original
// endpoint, and refuses one that leaves loopback.
func (t *gatedTransport) checkRedirect(req *http.Request, via []*http.Request) error {
	ctx := req.Context()
	host := req.URL.Hostname()
	from := ""
	if len(via) > 0 {
		from = via[len(via)-1].URL.Host
	}
	addrs, err := t.gate.resolve(ctx, host)
	if err != nil {
		return &Error{Provider: t.provider, Host: host, Reason: ReasonResolve, From: from, Err: err}
	}
	if !IsLoopback(addrs) {
		for _, v := range via {
			if t.wasLoopback(ctx, v.URL.Hostname()) {
				return &Error{Provider: t.provider, Host: host, Addrs: addrs, Reason: ReasonRedirect, From: from}
			}
		}
	}
	endpoint, _ := prov.Endpoint(req.URL.Scheme + "://" + req.URL.Host)
	if _, err := t.gate.decide(ctx, t.provider, endpoint, host, addrs); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.From = from
		}
		return err
	}
	return nil
}

// wasLoopback reports whether an earlier hop's host is loopback; a host
// that no longer resolves counts as loopback, so the redirect check fails
// closed.
func (t *gatedTransport) wasLoopback(ctx context.Context, host string) bool {
	addrs, err := t.gate.resolve(ctx, host)
	return err != nil || IsLoopback(addrs)
}
