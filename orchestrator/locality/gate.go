package locality

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"

	prov "github.com/cortexbuild/cortexbuild/provider"
)

// DefaultDialTimeout bounds each connection attempt of the default dialer.
const DefaultDialTimeout = 10 * time.Second

// errNoAddresses is the cause of a ReasonResolve refusal when the resolver
// answered with no address at all.
var errNoAddresses = errors.New("the resolver returned no address")

// Gate decides which provider endpoints may be reached and makes HTTP
// clients that reach nothing else.
//
// Set the fields before first use and do not change them afterwards; a
// Gate is then safe for concurrent use.
type Gate struct {
	// Mode is the project's egress rule; "" means ModeConsent. An unknown
	// mode refuses everything.
	Mode Mode
	// Consents holds the project's consents; nil means there are none.
	Consents ConsentStore
	// Resolver resolves host names; nil means net.DefaultResolver. IP
	// literals are never looked up.
	Resolver Resolver
	// Dial opens the connections; nil means a net.Dialer with
	// DefaultDialTimeout. It is only ever given an IP address and a port.
	Dial DialFunc
	// Now is the clock for Grant; nil means time.Now.
	Now func() time.Time
}

func (g *Gate) resolver() Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

func (g *Gate) dialer() DialFunc {
	if g.Dial != nil {
		return g.Dial
	}
	d := &net.Dialer{Timeout: DefaultDialTimeout}
	return d.DialContext
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Check resolves baseURL's host and decides whether provider may reach it.
// It opens no connection. A refusal is a *Error (errors.Is(err,
// ErrRefused)); the Decision is filled in as far as the gate got either
// way. A base URL without a host, or an unknown Mode, is a plain error.
//
// Check is advisory: Client's connections are decided again when they are
// dialed, on the addresses resolved then.
func (g *Gate) Check(ctx context.Context, provider, baseURL string) (Decision, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return Decision{Provider: provider}, fmt.Errorf("locality: provider %q: invalid base URL: %w", provider, err)
	}
	host := u.Hostname()
	if host == "" {
		return Decision{Provider: provider}, fmt.Errorf("locality: provider %q: base URL %q has no host", provider, baseURL)
	}
	endpoint, _ := prov.Endpoint(baseURL)
	return g.decideHost(ctx, provider, endpoint, host)
}

// CheckImageURLs decides whether a call may give an image by URL, which
// the server it goes to fetches itself: never in local-only mode (a
// *Error with ReasonImageURL), always otherwise (where the orchestrator
// sends URLs only to providers that fetch them on their own side). An
// unknown Mode is a plain error.
func (g *Gate) CheckImageURLs() error {
	mode, err := ParseMode(string(g.Mode))
	if err != nil {
		return err
	}
	if mode == ModeLocalOnly {
		return &Error{Reason: ReasonImageURL}
	}
	return nil
}

// Grant records consent for provider to reach endpoint (a base URL; the
// consent covers its scheme, host and port), granted by grantedBy now. It
// is what `cortexbuild consent grant` and the terminal prompt call.
func (g *Gate) Grant(ctx context.Context, provider, grantedBy, endpoint string) (Consent, error) {
	if g.Consents == nil {
		return Consent{}, errors.New("locality: no consent store to record consent in")
	}
	ep, ok := prov.Endpoint(endpoint)
	if !ok {
		return Consent{}, fmt.Errorf("locality: consent for %q needs the endpoint it covers, an http(s) URL; got %q", provider, endpoint)
	}
	c := Consent{Provider: provider, GrantedBy: grantedBy, GrantedAt: g.now().UTC(), Endpoint: ep}
	if err := g.Consents.Grant(ctx, c); err != nil {
		return Consent{}, err
	}
	return c, nil
}

// decideHost resolves host and decides on its addresses; endpoint is the
// normalised scheme://host:port being reached ("" when unknown, which no
// consent covers).
func (g *Gate) decideHost(ctx context.Context, provider, endpoint, host string) (Decision, error) {
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		d := Decision{Provider: provider, Host: host, Tier: TierUnknown, Reason: "the host did not resolve"}
		return d, &Error{Provider: provider, Host: host, Reason: ReasonResolve, Err: err}
	}
	return g.decide(ctx, provider, endpoint, host, addrs)
}

// resolve returns host's addresses: the literal itself for an IP literal,
// else what the resolver says. No address at all is an error.
func (g *Gate) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	ipas, err := g.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, 0, len(ipas))
	for _, ipa := range ipas {
		a, ok := netip.AddrFromSlice(ipa.IP)
		if !ok {
			return nil, fmt.Errorf("the resolver returned an invalid address %v", ipa.IP)
		}
		// net.IP holds IPv4 addresses in 16 bytes; report them as IPv4.
		a = a.Unmap()
		if a.Is6() && ipa.Zone != "" {
			a = a.WithZone(ipa.Zone)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, errNoAddresses
	}
	return addrs, nil
}

// decide applies the rule to resolved addresses: all loopback is allowed;
// anything else needs mode consent and a recorded consent for provider
// that covers endpoint.
func (g *Gate) decide(ctx context.Context, provider, endpoint, host string, addrs []netip.Addr) (Decision, error) {
	d := Decision{Provider: provider, Host: host, Addrs: addrs, Tier: TierRemote}
	mode, err := ParseMode(string(g.Mode))
	if err != nil {
		d.Tier = tierOf(addrs)
		d.Reason = "unknown locality mode"
		return d, err
	}
	if IsLoopback(addrs) {
		d.Tier, d.Allowed, d.Reason = TierLoopback, true, "every address is loopback"
		return d, nil
	}
	refuse := func(r Reason, why string, cause error) (Decision, error) {
		d.Reason = why
		return d, &Error{Provider: provider, Host: host, Addrs: addrs, Reason: r, Err: cause, Endpoint: endpoint}
	}
	if mode == ModeLocalOnly {
		return refuse(ReasonLocalOnly, "not on this machine; locality mode is local-only", nil)
	}
	c, ok, err := g.consent(ctx, provider)
	switch {
	case err != nil:
		return refuse(ReasonConsentUnavailable, "not on this machine; consent could not be read", err)
	case !ok:
		return refuse(ReasonNoConsent, "not on this machine; no consent", nil)
	case !c.Covers(endpoint):
		d, err := refuse(ReasonNoConsent, "not on this machine; consent covers another endpoint", nil)
		err.(*Error).Consented, _ = prov.Endpoint(c.Endpoint)
		err.(*Error).Stale = true
		return d, err
	}
	d.Allowed, d.Consent = true, c
	d.Reason = "consent granted by " + c.GrantedBy + " at " + c.GrantedAt.UTC().Format(time.RFC3339)
	return d, nil
}

// consent reads the consent for provider; no store means no consent.
func (g *Gate) consent(ctx context.Context, provider string) (Consent, bool, error) {
	if g.Consents == nil {
		return Consent{}, false, nil
	}
	c, ok, err := g.Consents.Consent(ctx, provider)
	if err != nil {
		return Consent{}, false, err
	}
	if ok && c.Provider != provider {
		// A store that answers for another provider is broken; fail closed.
		return Consent{}, false, fmt.Errorf("locality: the consent store answered for %q when asked for %q", c.Provider, provider)
	}
	return c, ok, nil
}

// remoteAllowed reports whether provider may use remote addresses of
// endpoint right now: the mode allows it and a consent covering endpoint is
// recorded. Any doubt is false.
func (g *Gate) remoteAllowed(ctx context.Context, provider, endpoint string) bool {
	mode, err := ParseMode(string(g.Mode))
	if err != nil || mode != ModeConsent {
		return false
	}
	c, ok, err := g.consent(ctx, provider)
	return err == nil && ok && c.Covers(endpoint)
}

func tierOf(addrs []netip.Addr) Tier {
	switch {
	case len(addrs) == 0:
		return TierUnknown
	case IsLoopback(addrs):
		return TierLoopback
	}
	return TierRemote
}
