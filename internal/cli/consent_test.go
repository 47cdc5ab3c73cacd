package cli

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// egress records every lookup and dial and refuses all of them: no test
// reaches a non-loopback address.
type egress struct {
	mu      sync.Mutex
	lookups []string
	dials   []string
}

func (g *egress) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookups = append(g.lookups, host)
	if host == "api.remote.test" {
		return []net.IPAddr{{IP: net.ParseIP("203.0.113.7")}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (g *egress) Dial(_ context.Context, network, address string) (net.Conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dials = append(g.dials, address)
	return nil, errors.New("test dialer refuses " + address)
}

func (g *egress) hook(e *env) { e.resolver, e.dial = g, g.Dial }

func TestRemoteEndpointNeedsConsentAndOpensNoConnection(t *testing.T) {
	dir := writeConfig(t, `orchestration: true
providers:
  remote:
    type: anthropic
    base_url: https://api.remote.test
    credentials:
      api_key: ${MY_KEY}
`)
	g := &egress{}
	code, _, errs := runWith(t, g.hook, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "cortexbuild consent grant remote") {
		t.Fatalf("without consent = %d %q", code, errs)
	}
	if len(g.dials) != 0 {
		t.Fatalf("connection attempts without consent: %v", g.dials)
	}
	if code, out, _ := runWith(t, g.hook, dir, nil, "consent", "grant", "remote", "--by", "alice"); code != 0 || !strings.Contains(out, "consent granted for remote by alice") {
		t.Fatalf("grant = %d %q", code, out)
	}
	code, out, _ := runWith(t, g.hook, dir, nil, "consent", "list", "--json")
	if code != 0 || !strings.Contains(out, `"provider": "remote"`) || !strings.Contains(out, `"granted_by": "alice"`) {
		t.Errorf("list = %d %s", code, out)
	}
	// With consent the gate lets the connection be attempted, to the resolved
	// address only (the recording dialer refuses it).
	code, _, errs = runWith(t, g.hook, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || len(g.dials) == 0 {
		t.Fatalf("with consent = %d %q, dials %v", code, errs, g.dials)
	}
	for _, d := range g.dials {
		if d != "203.0.113.7:443" {
			t.Errorf("dialed %q, want only the resolved address", d)
		}
	}
	if code, out, _ := runWith(t, g.hook, dir, nil, "consent", "revoke", "remote"); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("revoke = %d %q", code, out)
	}
	n := len(g.dials)
	if code, _, errs := runWith(t, g.hook, dir, keyEnv, "invoke", "hi"); code != ExitFailure || len(g.dials) != n || !strings.Contains(errs, "consent") {
		t.Errorf("after revoke = %d %q, %d new dials", code, errs, len(g.dials)-n)
	}
	if code, _, errs := runWith(t, g.hook, dir, nil, "consent", "revoke", "remote"); code != ExitFailure || !strings.Contains(errs, "no consent was recorded") {
		t.Errorf("second revoke = %d %q", code, errs)
	}
}

func TestLocalOnlyRefusesEvenWithConsent(t *testing.T) {
	dir := writeConfig(t, `orchestration: true
locality:
  mode: local-only
providers:
  remote:
    type: anthropic
    base_url: https://api.remote.test
    credentials:
      api_key: ${MY_KEY}
`)
	g := &egress{}
	if code, _, _ := runWith(t, g.hook, dir, nil, "consent", "grant", "remote"); code != 0 {
		t.Fatal("grant failed")
	}
	code, _, errs := runWith(t, g.hook, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "local-only") || len(g.dials) != 0 {
		t.Errorf("local-only = %d %q dials %v", code, errs, g.dials)
	}
}
