package locality

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// ErrRefused is the target for errors.Is that matches every refusal of the
// gate: every [*Error]. A refused connection was never opened.
var ErrRefused = errors.New("locality: connection refused by the locality gate")

// Reason classifies a refusal. A Reason is itself an error value, so that
// callers can write errors.Is(err, locality.ReasonNoConsent).
type Reason uint8

// The reasons.
const (
	ReasonUnknown Reason = iota
	// ReasonNoConsent: the endpoint is not on this machine and the project
	// has no consent for the provider. Fix: cortexbuild consent grant.
	ReasonNoConsent
	// ReasonLocalOnly: the endpoint is not on this machine and the mode is
	// local-only; consent does not matter.
	ReasonLocalOnly
	// ReasonRedirect: a loopback endpoint redirected off this machine.
	ReasonRedirect
	// ReasonResolve: the host name did not resolve, or resolved to no
	// address. Err holds the resolver's error. The gate fails closed.
	ReasonResolve
	// ReasonConsentUnavailable: the endpoint is not on this machine and the
	// consent store could not be read. Err holds why. The gate fails
	// closed.
	ReasonConsentUnavailable
	// ReasonImageURL: a call gives an image by URL and the mode is
	// local-only. The server the call goes to would fetch the URL itself,
	// from wherever it runs, so the gate refuses it whatever the server.
	ReasonImageURL
	reasonCount
)

var reasonNames = [reasonCount]string{
	ReasonUnknown:            "unknown",
	ReasonNoConsent:          "no_consent",
	ReasonLocalOnly:          "local_only",
	ReasonRedirect:           "redirect",
	ReasonResolve:            "resolve",
	ReasonConsentUnavailable: "consent_unavailable",
	ReasonImageURL:           "image_url",
}

// String returns the reason's name, such as "no_consent".
func (r Reason) String() string {
	if r < reasonCount {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Error makes a Reason usable as an errors.Is target.
func (r Reason) Error() string { return "locality: " + r.String() }

// Error is the gate's refusal: what was refused, why, and how to fix it.
// errors.Is(err, ErrRefused) is true for every *Error, and errors.Is(err,
// r) for its Reason r.
type Error struct {
	// Provider is the provider instance name; empty for a Service.
	Provider string
	// Service is the refused Service's name, and Key where its endpoint is
	// configured; empty for a provider.
	Service, Key string
	// Host is the refused endpoint's host (a name or an IP literal).
	Host string
	// Addrs are the addresses Host resolved to; empty for ReasonResolve.
	Addrs []netip.Addr
	// Reason says why.
	Reason Reason
	// From is the host that redirected to Host, when the refusal is of a
	// redirect; empty otherwise.
	From string
	// Err is the cause for ReasonResolve and ReasonConsentUnavailable.
	Err error
	// Endpoint is the refused scheme://host:port, when known.
	Endpoint string
	// Stale is set for ReasonNoConsent when the provider has a consent
	// that does not cover Endpoint: Consented is the endpoint it covers
	// ("" for a consent recorded before consent named an endpoint).
	Stale     bool
	Consented string
}

// Error says what was refused and how to fix it, such as
//
//	provider "cloud" (api.example.com → 203.0.113.7) is not on this machine and this project has no consent for it: run 'cortexbuild consent grant cloud'
//	store postgres (db.example.com → 203.0.113.5) is not on this machine and locality mode is local-only: point store.dsn at this machine or set locality.mode: consent
func (e *Error) Error() string {
	if e.Reason == ReasonImageURL {
		return "an image is given by URL and locality mode is local-only: the model server would fetch the URL itself, so image URLs are refused; send the image inline (base64 data) or set locality.mode: consent"
	}
	var b strings.Builder
	if e.Service != "" {
		b.WriteString(e.Service)
	} else {
		b.WriteString("provider " + strconv.Quote(e.Provider))
	}
	if e.From != "" {
		b.WriteString(" redirected from " + e.From + " to")
	}
	b.WriteString(" (" + describeEndpoint(e.Host, e.Addrs) + ")")
	switch e.Reason {
	case ReasonNoConsent:
		what := "it"
		if e.Endpoint != "" {
			what = "endpoint " + e.Endpoint
		}
		b.WriteString(" is not on this machine and this project has no consent for " + what)
		if e.Stale {
			if e.Consented != "" {
				b.WriteString(" (its consent covers " + e.Consented + " only)")
			} else {
				b.WriteString(" (its consent was recorded without an endpoint and covers none)")
			}
		}
		b.WriteString(": run 'cortexbuild consent grant " + shellWord(e.Provider) + "'")
	case ReasonLocalOnly:
		b.WriteString(" is not on this machine and locality mode is local-only: ")
		if e.Key != "" {
			b.WriteString("point " + e.Key + " at this machine")
		} else {
			b.WriteString("use a loopback endpoint")
		}
		b.WriteString(" or set locality.mode: consent")
	case ReasonRedirect:
		b.WriteString(" is not on this machine: a loopback endpoint may not redirect off this machine; point base_url at the final endpoint instead")
	case ReasonResolve:
		b.WriteString(" could not be resolved, so no connection was made")
	case ReasonConsentUnavailable:
		b.WriteString(" is not on this machine and this project's consent could not be read, so no connection was made")
	default:
		b.WriteString(" was refused")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Permanent reports whether trying again would be refused the same way
// until the configuration or the consents change: no consent, local-only,
// a redirect off the machine. A name that did not resolve or a consent
// store that could not be read may clear by itself.
func (e *Error) Permanent() bool {
	switch e.Reason {
	case ReasonNoConsent, ReasonLocalOnly, ReasonRedirect:
		return true
	}
	return false
}

// Is makes errors.Is(err, ErrRefused) true, and errors.Is(err, r) for the
// error's Reason r.
func (e *Error) Is(target error) bool {
	if target == ErrRefused {
		return true
	}
	r, ok := target.(Reason)
	return ok && r == e.Reason
}

// describeEndpoint renders "host → a1, a2", or just "host" when host is the
// single address itself.
func describeEndpoint(host string, addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return host
	}
	if len(addrs) == 1 {
		if a, err := netip.ParseAddr(host); err == nil && a == addrs[0] {
			return host
		}
	}
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return host + " → " + strings.Join(s, ", ")
}

// shellWord quotes s for a POSIX shell when it holds anything but letters,
// digits and ._-, so the suggested command can be pasted as is.
func shellWord(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
