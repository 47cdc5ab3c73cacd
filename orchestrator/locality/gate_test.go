package locality

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	prov "github.com/cortexbuild/cortexbuild/provider"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addrs []netip.Addr
		want  bool
	}{
		{nil, false},
		{addrs(), false},
		{addrs("127.0.0.1"), true},
		{addrs("127.255.255.254"), true},
		{addrs("::1"), true},
		{addrs("::ffff:127.0.0.1"), true},
		{addrs("127.0.0.1", "::1", "127.0.0.2"), true},
		{addrs("127.0.0.1", "192.0.2.1"), false},
		{addrs("192.0.2.1"), false},
		{addrs("::ffff:192.0.2.1"), false},
		{addrs("0.0.0.0"), false},
		{addrs("::"), false},
		{addrs("128.0.0.1"), false},
		{addrs("2001:db8::1"), false},
		{[]netip.Addr{{}}, false},
	}
	for _, tt := range tests {
		if got := IsLoopback(tt.addrs); got != tt.want {
			t.Errorf("IsLoopback(%v) = %v, want %v", tt.addrs, got, tt.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeConsent, "consent": ModeConsent, "local-only": ModeLocalOnly} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Consent", "local_only", "off"} {
		if _, err := ParseMode(in); err == nil {
			t.Errorf("ParseMode(%q) succeeded", in)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		consent bool
		hosts   map[string][]string
		url     string
		tier    Tier
		reason  Reason // ReasonUnknown: allowed
		addrs   []netip.Addr
		lookups []string
	}{
		{name: "IPv4 loopback literal", url: "http://127.0.0.1:11434/v1", tier: TierLoopback, addrs: addrs("127.0.0.1")},
		{name: "IPv6 loopback literal", url: "http://[::1]:8000/v1", tier: TierLoopback, addrs: addrs("::1")},
		{name: "IPv4-mapped loopback literal", url: "http://[::ffff:127.0.0.1]:8000/", tier: TierLoopback, addrs: addrs("::ffff:127.0.0.1")},
		{name: "name resolving to 127.0.0.2", hosts: map[string][]string{"llm.local.test": {"127.0.0.2"}},
			url: "http://llm.local.test:8080", tier: TierLoopback, addrs: addrs("127.0.0.2"), lookups: []string{"llm.local.test"}},
		{name: "name resolving to both loopbacks", hosts: map[string][]string{"localhost": {"127.0.0.1", "::1"}},
			url: "http://localhost:11434", tier: TierLoopback, addrs: addrs("127.0.0.1", "::1"), lookups: []string{"localhost"}},
		{name: "loopback in local-only mode", mode: ModeLocalOnly, url: "http://127.0.0.1:1/", tier: TierLoopback, addrs: addrs("127.0.0.1")},
		{name: "remote without consent", hosts: map[string][]string{"remote.example": {"192.0.2.10"}},
			url: "https://remote.example/v1", tier: TierRemote, reason: ReasonNoConsent, addrs: addrs("192.0.2.10"), lookups: []string{"remote.example"}},
		{name: "remote literal without consent", url: "http://192.0.2.10:8000/", tier: TierRemote, reason: ReasonNoConsent, addrs: addrs("192.0.2.10")},
		{name: "remote IPv6 literal without consent", url: "http://[2001:db8::1]/", tier: TierRemote, reason: ReasonNoConsent, addrs: addrs("2001:db8::1")},
		{name: "localhost resolving to a remote address", hosts: map[string][]string{"localhost": {"192.0.2.20"}},
			url: "http://localhost:11434", tier: TierRemote, reason: ReasonNoConsent, addrs: addrs("192.0.2.20"), lookups: []string{"localhost"}},
		{name: "loopback and remote without consent", hosts: map[string][]string{"mixed.test": {"127.0.0.1", "192.0.2.30"}},
			url: "http://mixed.test", tier: TierRemote, reason: ReasonNoConsent, addrs: addrs("127.0.0.1", "192.0.2.30"), lookups: []string{"mixed.test"}},
		{name: "loopback and remote with consent", consent: true, hosts: map[string][]string{"mixed.test": {"127.0.0.1", "192.0.2.30"}},
			url: "http://mixed.test", tier: TierRemote, addrs: addrs("127.0.0.1", "192.0.2.30"), lookups: []string{"mixed.test"}},
		{name: "unspecified address is not loopback", url: "http://0.0.0.0:11434", tier: TierRemote, reason: ReasonNoConsent, addrs: addrs("0.0.0.0")},
		{name: "remote with consent", consent: true, hosts: map[string][]string{"remote.example": {"192.0.2.10", "2001:db8::10"}},
			url: "https://remote.example/v1", tier: TierRemote, addrs: addrs("192.0.2.10", "2001:db8::10"), lookups: []string{"remote.example"}},
		{name: "local-only refuses remote with consent", mode: ModeLocalOnly, consent: true, hosts: map[string][]string{"remote.example": {"192.0.2.10"}},
			url: "https://remote.example/v1", tier: TierRemote, reason: ReasonLocalOnly, addrs: addrs("192.0.2.10"), lookups: []string{"remote.example"}},
		{name: "unresolvable", url: "https://nowhere.test/", tier: TierUnknown, reason: ReasonResolve, lookups: []string{"nowhere.test"}},
		{name: "empty resolution", hosts: map[string][]string{"empty.test": {}},
			url: "https://empty.test/", tier: TierUnknown, reason: ReasonResolve, lookups: []string{"empty.test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []Consent
			if tt.consent {
				cs = append(cs, consentAt("cloud", tt.url))
			}
			g, r, d, _ := testGate(t, tt.mode, cs...)
			for h, as := range tt.hosts {
				r.set(h, as...)
			}
			dec, err := g.Check(context.Background(), "cloud", tt.url)
			if tt.reason == ReasonUnknown {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if !dec.Allowed {
					t.Errorf("not allowed: %+v", dec)
				}
			} else {
				e := refusal(t, err, tt.reason)
				if dec.Allowed {
					t.Errorf("refused but Decision.Allowed: %+v", dec)
				}
				if e.Provider != "cloud" || e.Host != dec.Host || !slices.Equal(e.Addrs, tt.addrs) {
					t.Errorf("error fields %+v, want provider cloud, host %q, addrs %v", e, dec.Host, tt.addrs)
				}
			}
			if dec.Tier != tt.tier {
				t.Errorf("tier %v, want %v", dec.Tier, tt.tier)
			}
			if !slices.Equal(dec.Addrs, tt.addrs) {
				t.Errorf("addrs %v, want %v", dec.Addrs, tt.addrs)
			}
			if dec.Provider != "cloud" || dec.Reason == "" {
				t.Errorf("decision %+v lacks provider or reason", dec)
			}
			if dec.Allowed && dec.Tier == TierRemote && dec.Consent != consentAt("cloud", tt.url) {
				t.Errorf("allowed remote without the consent in the decision: %+v", dec)
			}
			if dec.Tier == TierLoopback && dec.Consent != (Consent{}) {
				t.Errorf("loopback decision carries a consent: %+v", dec)
			}
			if got := r.Lookups(); !slices.Equal(got, tt.lookups) {
				t.Errorf("lookups %q, want %q", got, tt.lookups)
			}
			if got := d.Dials(); len(got) != 0 {
				t.Errorf("Check dialed %q", got)
			}
		})
	}
}

func TestCheckFailsClosedOnBadInput(t *testing.T) {
	g, _, d, _ := testGate(t, "")
	for _, u := range []string{"://nope", "/v1/chat", "http://:8080/"} {
		if dec, err := g.Check(context.Background(), "p", u); err == nil || dec.Allowed {
			t.Errorf("Check(%q) = %+v, %v; want an error", u, dec, err)
		}
	}
	g.Mode = "off"
	dec, err := g.Check(context.Background(), "p", "http://127.0.0.1/")
	if err == nil || dec.Allowed || !strings.Contains(err.Error(), `unknown mode "off"`) {
		t.Errorf("unknown mode: %+v, %v; want a refusal naming the mode", dec, err)
	}
	if len(d.Dials()) != 0 {
		t.Errorf("dialed %q", d.Dials())
	}
}

func TestCheckConsentStoreDown(t *testing.T) {
	g, r, _, _ := testGate(t, "")
	g.Consents = brokenStore{}
	r.set("remote.example", "192.0.2.10")
	// Loopback needs no consent, so a broken store does not stop it.
	if dec, err := g.Check(context.Background(), "local", "http://127.0.0.1:11434"); err != nil || !dec.Allowed {
		t.Errorf("loopback with a broken store: %+v, %v", dec, err)
	}
	// Remote fails closed, and the cause is kept.
	_, err := g.Check(context.Background(), "cloud", "http://remote.example")
	refusal(t, err, ReasonConsentUnavailable)
	if !errors.Is(err, errBroken) {
		t.Errorf("cause lost: %v", err)
	}
	// No store at all means no consent.
	g.Consents = nil
	_, err = g.Check(context.Background(), "cloud", "http://remote.example")
	refusal(t, err, ReasonNoConsent)
}

func TestCheckResolverError(t *testing.T) {
	g, r, _, _ := testGate(t, "")
	cause := &net.DNSError{Err: "server misbehaving", Name: "flaky.test", IsTemporary: true}
	r.fail["flaky.test"] = cause
	_, err := g.Check(context.Background(), "p", "http://flaky.test")
	refusal(t, err, ReasonResolve)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || dnsErr != cause {
		t.Errorf("DNS error not kept: %v", err)
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Provider: "anthropic", Host: "api.anthropic.com", Addrs: addrs("160.79.104.10"), Reason: ReasonNoConsent},
			`provider "anthropic" (api.anthropic.com → 160.79.104.10) is not on this machine and this project has no consent for it: run 'cortexbuild consent grant anthropic'`},
		{&Error{Provider: "my cloud", Host: "192.0.2.1", Addrs: addrs("192.0.2.1"), Reason: ReasonNoConsent},
			`provider "my cloud" (192.0.2.1) is not on this machine and this project has no consent for it: run 'cortexbuild consent grant 'my cloud''`},
		{&Error{Provider: "cloud", Host: "api.example.com", Addrs: addrs("192.0.2.1", "2001:db8::1"), Reason: ReasonLocalOnly},
			`provider "cloud" (api.example.com → 192.0.2.1, 2001:db8::1) is not on this machine and locality mode is local-only: use a loopback endpoint or set locality.mode: consent`},
		{&Error{Provider: "ollama", Host: "remote.example", Addrs: addrs("192.0.2.1"), Reason: ReasonRedirect, From: "127.0.0.1:11434"},
			`provider "ollama" redirected from 127.0.0.1:11434 to (remote.example → 192.0.2.1) is not on this machine: a loopback endpoint may not redirect off this machine; point base_url at the final endpoint instead`},
		{&Error{Provider: "cloud", Host: "nowhere.test", Reason: ReasonResolve, Err: errors.New("no such host")},
			`provider "cloud" (nowhere.test) could not be resolved, so no connection was made: no such host`},
		{&Error{Provider: "cloud", Host: "remote.example", Addrs: addrs("192.0.2.1"), Reason: ReasonConsentUnavailable, Err: errBroken},
			`provider "cloud" (remote.example → 192.0.2.1) is not on this machine and this project's consent could not be read, so no connection was made: store is down`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
		if !errors.Is(tt.err, ErrRefused) || !errors.Is(tt.err, tt.err.Reason) {
			t.Errorf("%v: errors.Is fails", tt.err.Reason)
		}
		for r := ReasonUnknown; r < reasonCount; r++ {
			if r != tt.err.Reason && errors.Is(tt.err, r) {
				t.Errorf("%v error matches reason %v", tt.err.Reason, r)
			}
		}
	}
}

func TestGateGrant(t *testing.T) {
	g, r, _, s := testGate(t, "")
	r.set("remote.example", "192.0.2.10")
	c, err := g.Grant(context.Background(), "cloud", "alice", "https://remote.example/v1")
	if err != nil {
		t.Fatal(err)
	}
	want := Consent{Provider: "cloud", GrantedBy: "alice", GrantedAt: testTime, Endpoint: "https://remote.example:443"}
	if c != want {
		t.Errorf("granted %+v, want %+v", c, want)
	}
	if got, ok, _ := s.Consent(context.Background(), "cloud"); !ok || got != want {
		t.Errorf("stored %+v, %v", got, ok)
	}
	if dec, err := g.Check(context.Background(), "cloud", "https://remote.example/v1"); err != nil || !dec.Allowed {
		t.Errorf("after grant: %+v, %v", dec, err)
	}
	if _, err := g.Grant(context.Background(), "cloud", "", ""); err == nil {
		t.Error("a grant without grantor was recorded")
	}
	if _, err := g.Grant(context.Background(), "", "alice", ""); err == nil {
		t.Error("a grant without provider was recorded")
	}
}

func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	var s MemoryStore // the zero value works
	if cs, err := s.List(ctx); err != nil || len(cs) != 0 {
		t.Fatalf("empty store lists %v, %v", cs, err)
	}
	for _, p := range []string{"b", "a"} {
		if err := s.Grant(ctx, consentFor(p)); err != nil {
			t.Fatal(err)
		}
	}
	cs, _ := s.List(ctx)
	if len(cs) != 2 || cs[0].Provider != "a" || cs[1].Provider != "b" {
		t.Errorf("list %+v", cs)
	}
	if ok, _ := s.Revoke(ctx, "a"); !ok {
		t.Error("revoke a: not found")
	}
	if ok, _ := s.Revoke(ctx, "a"); ok {
		t.Error("revoke a twice: found")
	}
	if _, ok, _ := s.Consent(ctx, "a"); ok {
		t.Error("revoked consent still there")
	}
	if err := s.Grant(ctx, Consent{Provider: "c", GrantedBy: "alice"}); err == nil {
		t.Error("grant without time accepted")
	}
}

// Consent covers the endpoint it was granted for (scheme, host, port):
// another host, port or scheme under the same provider name is refused
// with the endpoint and the command to run, and a consent recorded without
// an endpoint (an older consent file) covers nothing.
func TestConsentIsForAnEndpoint(t *testing.T) {
	ctx := context.Background()
	g, r, d, _ := testGate(t, "")
	g.Consents = NewFileStore(filepath.Join(t.TempDir(), "consent.json"))
	r.set("a.example", "192.0.2.1").set("b.example", "192.0.2.2")
	if _, err := g.Grant(ctx, "cloud", "alice", "https://A.example/v1"); err != nil {
		t.Fatal(err)
	}
	if dec, err := g.Check(ctx, "cloud", "https://a.example:443/v2"); err != nil || !dec.Allowed {
		t.Fatalf("the granted endpoint: %+v %v", dec, err)
	}
	for _, u := range []string{"https://b.example/v1", "https://a.example:8443/v1", "http://a.example/v1"} {
		_, err := g.Check(ctx, "cloud", u)
		e := refusal(t, err, ReasonNoConsent)
		want, _ := prov.Endpoint(u)
		if e.Endpoint != want || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "covers https://a.example:443 only") ||
			!strings.Contains(err.Error(), "run 'cortexbuild consent grant cloud'") {
			t.Errorf("%s: %v", u, err)
		}
		if _, err := get(t, g.Client("cloud", nil), u); !errors.Is(err, ReasonNoConsent) {
			t.Errorf("GET %s: %v, want a refusal", u, err)
		}
	}
	if n := len(d.Dials()); n != 0 {
		t.Errorf("%d dials to endpoints without consent", n)
	}

	// A consent file written before consents named an endpoint.
	old := filepath.Join(t.TempDir(), "consent.json")
	if err := os.WriteFile(old, []byte(`{"version":1,"consents":[{"provider":"cloud","granted_by":"bob","granted_at":"2026-01-01T00:00:00Z"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g.Consents = NewFileStore(old)
	_, err := g.Check(ctx, "cloud", "https://a.example/v1")
	if e := refusal(t, err, ReasonNoConsent); !e.Stale || !strings.Contains(err.Error(), "recorded without an endpoint and covers none") {
		t.Errorf("an old consent: %v", err)
	}
}
