package gateway

import (
	"context"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultHeaderTimeout and DefaultBodyTimeout bound how long a client
// may take to send a request's headers and its body.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 60 * time.Second
)

// guard refuses, on every route, a request whose Host header is not one
// the gateway answers to (421: a DNS-rebinding page names its own host)
// and a request a browser sent from another site (403). It returns nil
// when r may be served.
func (g *Gateway) guard(r *http.Request) *failure {
	if !g.hostAllowed(r) {
		return fail(classMisdirected, "this gateway does not answer to host %q: use its listen address, or add the name to gateway.allowed_hosts", r.Host)
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "cross-site" || site == "same-site" {
		return fail(classBrowser, "refused: a web page of another site cannot call this gateway (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" {
		if o == "null" {
			// A same-origin page sent with no-referrer (the console's
			// forms) says Origin: null; any other null origin is refused.
			if site != "same-origin" {
				return fail(classBrowser, "refused: a request with Origin: null that the browser does not mark same-origin")
			}
		} else if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
			return fail(classBrowser, "refused: a web page of origin %q cannot call this gateway", o)
		}
	}
	return nil
}

// hostAllowed reports whether r's Host header names the address the
// request arrived on (any loopback name with the same port when that
// address is loopback) or a name of gateway.allowed_hosts.
func (g *Gateway) hostAllowed(r *http.Request) bool {
	host, port := splitHost(r)
	for _, a := range g.opts.AllowedHosts {
		ah, ap, err := net.SplitHostPort(a)
		if err != nil {
			ah, ap = a, ""
		}
		if strings.EqualFold(strings.Trim(ah, "[]"), host) && (ap == "" || ap == port) {
			return true
		}
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lh, lp, err := net.SplitHostPort(local.String())
	if err != nil || lp != port {
		return false
	}
	lip := net.ParseIP(lh)
	if lip == nil {
		return false
	}
	if ip := net.ParseIP(host); ip != nil && ip.Equal(lip) {
		return true
	}
	if lip.IsLoopback() {
		if strings.EqualFold(host, "localhost") {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// splitHost returns r's Host header's host (lower case, no brackets) and
// port (the scheme's default when absent).
func splitHost(r *http.Request) (string, string) {
	h, p, err := net.SplitHostPort(r.Host)
	if err != nil {
		h = r.Host
		p = "80"
		if r.TLS != nil {
			p = "443"
		}
	}
	return strings.ToLower(strings.Trim(h, "[]")), p
}

// jsonBody refuses a body that does not say it is JSON: a web page can
// send text/plain to any address without the browser asking first.
func jsonBody(r *http.Request) *failure {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		if ct == "" {
			ct = "none"
		}
		return fail(classMediaType, "the request body must be JSON with Content-Type: application/json, got %s", ct)
	}
	return nil
}

// keySlots counts the requests each key has in flight.
type keySlots struct {
	mu sync.Mutex
	n  map[string]int
}

// take takes a slot for key id; false when it has limit in flight.
func (s *keySlots) take(id string, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[id] >= limit {
		return false
	}
	s.n[id]++
	return true
}

func (s *keySlots) give(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[id]--; s.n[id] <= 0 {
		delete(s.n, id)
	}
}

// authedKey carries a request's *authed in its context.
type authedKey struct{}

// authed is what the gateway holds for an authenticated API request.
type authed struct {
	key  *Key // nil without auth
	slot *servingSlot
}

// withKey returns r with key (nil without auth) noted as authenticated,
// and the serving slot it takes once its body is in.
func withKey(r *http.Request, key *Key, slot *servingSlot) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), authedKey{}, &authed{key: key, slot: slot}))
}

// takeSlot takes the gateway.max_in_flight slot of an authenticated
// request (nil when it has one, or is not an API request).
func takeSlot(r *http.Request) *failure {
	if a, ok := r.Context().Value(authedKey{}).(*authed); ok && a.slot != nil {
		return a.slot.take()
	}
	return nil
}

// bodyTimedOut reports whether err is the body read deadline passing.
func bodyTimedOut(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
