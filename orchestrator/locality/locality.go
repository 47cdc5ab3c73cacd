package locality

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	prov "github.com/cortexbuild/cortexbuild/provider"
)

// Mode is the project's egress rule, the llm-config.yaml key locality.mode.
type Mode string

// The modes.
const (
	// ModeConsent lets a provider that is not on this machine be reached
	// once this project has recorded consent for it. It is the default: the
	// empty Mode means ModeConsent.
	ModeConsent Mode = "consent"
	// ModeLocalOnly lets only loopback endpoints be reached, consent or not.
	ModeLocalOnly Mode = "local-only"
)

// ParseMode returns the Mode named s; the empty string is ModeConsent.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", ModeConsent:
		return ModeConsent, nil
	case ModeLocalOnly:
		return m, nil
	}
	return "", fmt.Errorf("locality: unknown mode %q: want %q or %q", s, ModeConsent, ModeLocalOnly)
}

// Tier says where an endpoint is.
type Tier uint8

// The tiers. The zero Tier is TierUnknown, so a zero Decision never reads
// as loopback.
const (
	// TierUnknown: the endpoint's addresses are not known (the name did not
	// resolve).
	TierUnknown Tier = iota
	// TierLoopback: every resolved address is on this machine (127.0.0.0/8
	// or ::1). Zero egress; no consent needed.
	TierLoopback
	// TierRemote: at least one resolved address is not loopback.
	TierRemote
)

// String returns "unknown", "loopback" or "remote".
func (t Tier) String() string {
	switch t {
	case TierUnknown:
		return "unknown"
	case TierLoopback:
		return "loopback"
	case TierRemote:
		return "remote"
	}
	return "tier(" + strconv.Itoa(int(t)) + ")"
}

// Resolver looks up a host name's addresses. *net.Resolver satisfies it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// DialFunc opens a connection. The gate only ever passes it an IP address
// and a port, never a host name.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Decision is the gate's verdict on one endpoint.
type Decision struct {
	// Provider is the provider instance name the decision is for; empty
	// for a Service.
	Provider string
	// Service is the name of the Service the decision is for; empty for a
	// provider.
	Service string
	// Host is the endpoint's host: a name or an IP literal.
	Host string
	// Addrs are the addresses Host resolved to, in the resolver's order.
	Addrs []netip.Addr
	// Tier is where the addresses are.
	Tier Tier
	// Allowed reports whether a connection may be made.
	Allowed bool
	// Reason says why, in a few words, for logs and `--json` output.
	Reason string
	// Consent is the consent the decision relied on; zero unless the
	// endpoint is remote and allowed.
	Consent Consent
}

// IsLoopback reports whether addrs holds at least one address and every
// address is loopback: in 127.0.0.0/8, ::1, or an IPv4-mapped IPv6 form of
// 127.0.0.0/8 (::ffff:127.0.0.1). An empty list is not loopback.
func IsLoopback(addrs []netip.Addr) bool {
	if len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return false
		}
	}
	return true
}

// Consent is a project's recorded permission to send requests to a
// provider that is not on this machine.
type Consent struct {
	// Provider is the provider instance name from the configuration.
	Provider string `json:"provider"`
	// GrantedBy says who granted it (a user name, or "prompt:alice").
	GrantedBy string `json:"granted_by"`
	// GrantedAt is when.
	GrantedAt time.Time `json:"granted_at"`
	// Endpoint is what the consent covers: the scheme://host:port of the
	// base URL it was granted for. Connections anywhere else (another
	// host, port or scheme) need consent again. A consent recorded before
	// consent named an endpoint has none and covers nothing.
	Endpoint string `json:"endpoint,omitempty"`
}

// Covers reports whether c covers endpoint, a normalised scheme://host:port
// (see [provider.Endpoint]); a consent without an endpoint covers none.
func (c Consent) Covers(endpoint string) bool {
	if endpoint == "" || c.Endpoint == "" {
		return false
	}
	ce, ok := prov.Endpoint(c.Endpoint)
	return ok && ce == endpoint
}

// validate reports what is missing from c for it to be a recorded consent.
func (c Consent) validate() error {
	switch {
	case c.Provider == "":
		return fmt.Errorf("locality: consent without a provider name")
	case c.GrantedBy == "":
		return fmt.Errorf("locality: consent for %q does not say who granted it", c.Provider)
	case c.GrantedAt.IsZero():
		return fmt.Errorf("locality: consent for %q does not say when it was granted", c.Provider)
	}
	return nil
}

// ConsentStore keeps a project's consents, one per provider name.
// Implementations are safe for concurrent use.
type ConsentStore interface {
	// Consent returns the consent for provider and whether there is one.
	Consent(ctx context.Context, provider string) (Consent, bool, error)
	// Grant records c, replacing any earlier consent for c.Provider.
	Grant(ctx context.Context, c Consent) error
	// Revoke removes the consent for provider and reports whether there
	// was one.
	Revoke(ctx context.Context, provider string) (bool, error)
	// List returns every consent, sorted by provider name.
	List(ctx context.Context) ([]Consent, error)
}
