package locality

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
)

// Service is a destination the process connects to that is not a provider
// call: the ledger's PostgreSQL, the Redis cache, the notification
// webhook, the trace exporter's collector, an alerting API. Its
// connections pass the same gate as provider calls, under the service
// rule:
//
//   - every resolved address loopback: allowed, in every mode;
//   - ModeLocalOnly: anything else is refused (ReasonLocalOnly);
//   - ModeConsent: allowed without a recorded consent, because the user
//     named the endpoint in the configuration (store.dsn, cache.url,
//     notifications.webhook_url, observability.traces.endpoint) or on the
//     command line; it is still resolved by the gate's Resolver and dialed
//     by its Dial, on an IP address.
//
// Unix sockets never leave the machine and are allowed in every mode.
type Service struct {
	// Name says what connects, for errors and logs: "store postgres",
	// "cache redis", "webhook", "trace exporter".
	Name string
	// Key is where the endpoint is configured ("store.dsn"), named in the
	// fix of a refusal; "" for none.
	Key string
}

// CheckService decides whether svc may reach host (a name or an IP
// literal) without opening a connection, for start-up checks. In
// ModeConsent a service is allowed wherever it is, so host is not even
// looked up; in ModeLocalOnly host is resolved and must be loopback. The
// connections of ServiceDial and ServiceClient are decided again when they
// are dialed. A refusal is a *Error naming svc.
func (g *Gate) CheckService(ctx context.Context, svc Service, host string) (Decision, error) {
	mode, err := ParseMode(string(g.Mode))
	if err != nil {
		return Decision{Service: svc.Name, Host: host, Reason: "unknown locality mode"}, err
	}
	if mode == ModeConsent {
		return Decision{Service: svc.Name, Host: host, Allowed: true, Reason: "configured by the user; locality mode is consent"}, nil
	}
	return g.decideServiceHost(ctx, svc, host)
}

func (g *Gate) decideServiceHost(ctx context.Context, svc Service, host string) (Decision, error) {
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		d := Decision{Service: svc.Name, Host: host, Tier: TierUnknown, Reason: "the host did not resolve"}
		return d, &Error{Service: svc.Name, Key: svc.Key, Host: host, Reason: ReasonResolve, Err: err}
	}
	return g.decideService(svc, host, addrs)
}

// decideService applies the service rule to resolved addresses.
func (g *Gate) decideService(svc Service, host string, addrs []netip.Addr) (Decision, error) {
	d := Decision{Service: svc.Name, Host: host, Addrs: addrs, Tier: tierOf(addrs)}
	mode, err := ParseMode(string(g.Mode))
	if err != nil {
		d.Reason = "unknown locality mode"
		return d, err
	}
	switch {
	case d.Tier == TierLoopback:
		d.Allowed, d.Reason = true, "every address is loopback"
	case mode == ModeLocalOnly:
		d.Reason = "not on this machine; locality mode is local-only"
		return d, &Error{Service: svc.Name, Key: svc.Key, Host: host, Addrs: addrs, Reason: ReasonLocalOnly}
	default:
		d.Allowed, d.Reason = true, "configured by the user; locality mode is consent"
	}
	return d, nil
}

// ServiceDial returns the dial function of svc's connections, shaped like
// net.Dialer.DialContext for the clients that take one (cache.RedisOptions's
// Dialer, pgx's DialFunc, an http.Transport's DialContext). Each
// call resolves the host with the gate's Resolver (IP literals need no
// lookup), decides on the addresses resolved then, and dials an allowed IP
// address with the gate's Dial, never the name. "unix" addresses are
// dialed directly: they never leave the machine. Other networks (UDP) are
// refused.
func (g *Gate) ServiceDial(svc Service) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		switch network {
		case "unix":
			d := net.Dialer{Timeout: DefaultDialTimeout}
			return d.DialContext(ctx, network, address)
		case "tcp", "tcp4", "tcp6":
		default:
			return nil, fmt.Errorf("locality: %s: network %q is not allowed", svc.Name, network)
		}
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("locality: %s: %w", svc.Name, err)
		}
		d, err := g.decideServiceHost(ctx, svc, host)
		if err != nil {
			return nil, err
		}
		if !d.Allowed { // decideService never allows without saying so; belt and braces
			return nil, &Error{Service: svc.Name, Key: svc.Key, Host: host, Addrs: d.Addrs, Reason: ReasonUnknown}
		}
		addrs := forNetwork(d.Addrs, network)
		if len(addrs) == 0 {
			return nil, fmt.Errorf("locality: %s: %s has no %s address (it resolved to %v)", svc.Name, host, network, d.Addrs)
		}
		return g.dialEach(ctx, network, port, addrs, nil)
	}
}

// ServiceClient returns an HTTP client for svc (a webhook, a trace
// exporter) that connects only through ServiceDial: a copy of base (nil: a
// fresh client) whose transport ignores every proxy setting and whose dial
// hooks are replaced. Redirects are not followed: the configuration names
// the endpoint, not where it sends the client. base.Transport must be nil or
// an *http.Transport; any other RoundTripper cannot be gated, and the
// client then fails every request without sending anything.
func (g *Gate) ServiceClient(svc Service, base *http.Client) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	tr, err := gateableTransport(c.Transport)
	if err != nil {
		c.Transport = failingTransport{err}
	} else {
		tr.DialContext = g.ServiceDial(svc)
		c.Transport = tr
	}
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("locality: %s: not following the redirect to %s: only the configured endpoint is reached", svc.Name, req.URL.Host)
	}
	return &c
}

// failingTransport refuses every request with err, sending nothing.
type failingTransport struct{ err error }

func (t failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, t.err
}
