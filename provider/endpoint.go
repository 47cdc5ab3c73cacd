package provider

import (
	"net"
	"net/url"
	"strings"
)

// Endpoint returns the origin a base URL points at, normalised as
// scheme://host:port (scheme and host lower-case, the scheme's default port
// written out, IPv6 hosts in brackets); false when rawURL is not an http(s)
// URL with a host.
func Endpoint(rawURL string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
	default:
		return "", false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", false
	}
	return scheme + "://" + net.JoinHostPort(host, port), true
}

// SameEndpoint reports whether two base URLs point at the same origin
// (scheme, host and port); false when either is not a valid http(s) URL.
func SameEndpoint(a, b string) bool {
	ea, ok := Endpoint(a)
	if !ok {
		return false
	}
	eb, ok := Endpoint(b)
	return ok && ea == eb
}

// EnvVarsFor returns the environment variables field may be read from for a
// provider of this type with profile and baseURL ("" for the type's
// default): field.EnvVars when the provider talks to the vendor's own
// endpoint (the type's default base URL, and a profile of
// field.EnvProfiles when that is set), none otherwise, so that a vendor's
// key in the environment never reaches another server.
func (r Registration) EnvVarsFor(field CredentialField, profile, baseURL string) []string {
	if len(field.EnvVars) == 0 {
		return nil
	}
	if len(field.EnvProfiles) > 0 {
		ok := false
		for _, p := range field.EnvProfiles {
			ok = ok || p == profile
		}
		if !ok {
			return nil
		}
	}
	if baseURL != "" && !SameEndpoint(baseURL, r.DefaultBaseURL) {
		return nil
	}
	return field.EnvVars
}
