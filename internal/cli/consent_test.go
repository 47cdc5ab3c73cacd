package cli

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
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

// Consent is for the endpoint: after base_url moves to another host the
// same provider name is refused, naming the endpoint and the command, and
// `consent list` shows what each consent covers.
func TestConsentDoesNotFollowTheProviderToAnotherHost(t *testing.T) {
	cfg := func(host string) string {
		return "orchestration: true\nproviders:\n  remote:\n    type: anthropic\n    base_url: https://" + host + "\n    credentials:\n      api_key: ${MY_KEY}\n"
	}
	dir := writeConfig(t, cfg("api.remote.test"))
	g := &egress{}
	if code, out, _ := runWith(t, g.hook, dir, nil, "consent", "grant", "remote", "--by", "alice"); code != 0 || !strings.Contains(out, "https://api.remote.test:443") {
		t.Fatalf("grant = %d %q", code, out)
	}
	if code, out, _ := runWith(t, g.hook, dir, nil, "consent", "list"); code != 0 || !strings.Contains(out, "https://api.remote.test:443") || strings.Contains(out, "not covered") {
		t.Fatalf("list = %d %q", code, out)
	}
	if code, _, _ := runWith(t, g.hook, dir, keyEnv, "invoke", "hi"); code != ExitFailure || len(g.dials) == 0 {
		t.Fatalf("with consent = %d, dials %v", code, g.dials)
	}
	// The same name, another host (which resolves to a remote address).
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, config.Dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(config.FileName, cfg("203.0.113.9"))
	n := len(g.dials)
	code, _, errs := runWith(t, g.hook, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "https://203.0.113.9:443") || !strings.Contains(errs, "cortexbuild consent grant remote") {
		t.Fatalf("after the move = %d %q", code, errs)
	}
	if len(g.dials) != n {
		t.Fatalf("dialed %v without consent for the new endpoint", g.dials[n:])
	}
	if code, out, _ := runWith(t, g.hook, dir, nil, "consent", "list"); code != 0 || !strings.Contains(out, "provider now at https://203.0.113.9:443, not covered: run 'cortexbuild consent grant remote'") {
		t.Errorf("list after the move = %d %q", code, out)
	}
	// A consent file from before consents named an endpoint covers nothing.
	write("consent.json", `{"version":1,"consents":[{"provider":"remote","granted_by":"bob","granted_at":"2026-01-01T00:00:00Z"}]}`)
	if code, _, errs := runWith(t, g.hook, dir, keyEnv, "invoke", "hi"); code != ExitFailure || !strings.Contains(errs, "covers none") || len(g.dials) != n {
		t.Errorf("an old consent = %d %q", code, errs)
	}
	if code, out, _ := runWith(t, g.hook, dir, nil, "consent", "list"); code != 0 || !strings.Contains(out, "covers nothing") || !strings.Contains(out, "cortexbuild consent grant remote") {
		t.Errorf("list with an old consent = %d %q", code, out)
	}
}
