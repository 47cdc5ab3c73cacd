package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// loopbackEgress resolves api.remote.test to a public address and dials
// loopback only, recording every other dial (and refusing it).
type loopbackEgress struct{ egress }

func (g *loopbackEgress) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(address); err == nil && net.ParseIP(host).IsLoopback() {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	return g.egress.Dial(ctx, network, address)
}

func (g *loopbackEgress) hook(e *env) { e.resolver, e.dial = &g.egress, g.Dial }

type healthJSON struct {
	Healthy   bool `json:"healthy"`
	Providers []struct {
		Name      string `json:"name"`
		Type      string `json:"type"`
		Endpoint  string `json:"endpoint"`
		Status    string `json:"status"`
		Healthy   bool   `json:"healthy"`
		LatencyMS *int64 `json:"latency_ms"`
		Kind      string `json:"kind"`
		Error     string `json:"error"`
		Reason    string `json:"reason"`
		RateLimit *struct {
			RequestsRemaining *int64 `json:"requests_remaining"`
			TokensRemaining   *int64 `json:"tokens_remaining"`
		} `json:"rate_limit"`
		Breaker struct {
			Provider  string `json:"provider"`
			State     string `json:"state"`
			Failures  int    `json:"consecutive_failures"`
			LastError string `json:"last_error_kind"`
			RetryAt   string `json:"retry_at"`
		} `json:"breaker"`
	} `json:"providers"`
}

func TestProvidersHealthAgainstFaultyFakes(t *testing.T) {
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(k, "")
	}
	good := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	down := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	proxied := openaifake.New(openaifake.WithAPIKey(testKey))
	refused := geminifake.New(geminifake.WithAPIKey(testKey))
	t.Cleanup(func() { good.Close(); down.Close(); proxied.Close(); refused.Close() })
	down.EnqueueRoute(anthropicfake.RouteModels, anthropicfake.APIError())
	proxied.EnqueueRoute(openaifake.RouteModels, openaifake.BadGateway())
	refused.EnqueueRoute(geminifake.RouteModels, geminifake.APIKeyInvalid())
	dir := writeConfig(t, fmt.Sprintf(`providers:
  good:
    type: anthropic
    base_url: %s
    credentials: {api_key: "${MY_KEY}"}
  down:
    type: anthropic
    base_url: %s
    credentials: {api_key: "${MY_KEY}"}
  proxied:
    type: openai_compatible
    profile: openai
    base_url: %s/v1
    credentials: {api_key: "${MY_KEY}"}
  refused:
    type: gemini
    base_url: %s
    credentials: {api_key: "${MY_KEY}"}
  remote:
    type: anthropic
    base_url: https://api.remote.test
    credentials: {api_key: "${MY_KEY}"}
`, good.URL(), down.URL(), proxied.URL(), refused.URL()))
	g := &loopbackEgress{}
	code, out, errs := runWith(t, g.hook, dir, keyEnv, "providers", "health", "--json")
	if code != ExitFailure {
		t.Fatalf("health --json = %d\n%s\n%s", code, out, errs)
	}
	if errs != "" {
		t.Errorf("stderr is not empty off a terminal: %q", errs)
	}
	var res healthJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.Healthy || len(res.Providers) != 5 {
		t.Fatalf("summary = %+v", res)
	}
	byName := map[string]int{}
	for i, p := range res.Providers {
		byName[p.Name] = i
		if p.LatencyMS == nil || p.Breaker.State != "closed" || p.Breaker.Provider != p.Name {
			t.Errorf("%s: latency or breaker missing: %+v", p.Name, p)
		}
	}
	want := map[string]struct{ status, kind, errPart string }{
		"good":    {"healthy", "", ""},
		"down":    {"unhealthy", "server", "500"},
		"proxied": {"unhealthy", "server", "502"},
		"refused": {"unhealthy", "auth", "API key not valid"},
		"remote":  {"not_checked", "", ""},
	}
	for name, w := range want {
		p := res.Providers[byName[name]]
		if p.Status != w.status || p.Kind != w.kind || !strings.Contains(p.Error, w.errPart) || p.Healthy != (w.status == "healthy") {
			t.Errorf("%s = %+v, want %+v", name, p, w)
		}
	}
	if p := res.Providers[byName["proxied"]]; !strings.Contains(p.Error, "non-JSON error page") {
		t.Errorf("the HTML 502 is not explained: %q", p.Error)
	}
	if p := res.Providers[byName["remote"]]; !strings.Contains(p.Reason, "not checked: no consent") || !strings.Contains(p.Reason, "cortexbuild consent grant remote") {
		t.Errorf("remote = %+v", p)
	}
	if len(g.dials) != 0 {
		t.Errorf("an unconsented endpoint was contacted: %v", g.dials)
	}
	// What the provider reported about its limits, and nothing invented.
	if rl := res.Providers[byName["good"]].RateLimit; rl == nil || rl.RequestsRemaining == nil || *rl.RequestsRemaining <= 0 {
		t.Errorf("anthropic headroom = %+v", rl)
	}
	if rl := res.Providers[byName["refused"]].RateLimit; rl != nil {
		t.Errorf("gemini reports no limits, yet headroom = %+v", rl)
	}

	// The table, for people.
	down.EnqueueRoute(anthropicfake.RouteModels, anthropicfake.APIError())
	proxied.EnqueueRoute(openaifake.RouteModels, openaifake.BadGateway())
	refused.EnqueueRoute(geminifake.RouteModels, geminifake.APIKeyInvalid())
	code, out, errs = runWith(t, g.hook, dir, keyEnv, "providers", "health")
	if code != ExitFailure || !strings.Contains(errs, "3 of 5 providers unhealthy: down, proxied, refused") {
		t.Fatalf("health = %d\n%s\n%s", code, out, errs)
	}
	for _, w := range []string{"PROVIDER", "STATUS", "LATENCY", "RATE LIMIT", "BREAKER", "good ", "healthy", "requests, ", "tokens left, resets ", "[server]", "[auth]", "not checked", "no consent", "1 healthy, 3 unhealthy, 1 not checked"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
}

func TestProvidersHealthAllHealthyExitsZero(t *testing.T) {
	dir, srv := fakeProject(t, false)
	code, out, errs := run(t, dir, keyEnv, "providers", "health")
	if code != 0 || !strings.Contains(out, "claude") || !strings.Contains(out, "1 healthy, 0 unhealthy, 0 not checked") {
		t.Fatalf("health = %d\n%s\n%s", code, out, errs)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("the fake got %d requests, want one health check", n)
	}
	if code, _, errs := run(t, dir, keyEnv, "providers", "health", "--timeout", "0s"); code != ExitUsage || !strings.Contains(errs, "--timeout") {
		t.Errorf("--timeout 0 = %d %q", code, errs)
	}
	// A credential that is not set is this provider's problem, reported
	// with the variable to set; the value is never printed.
	code, out, _ = run(t, dir, nil, "providers", "health", "--json")
	if code != ExitFailure || !strings.Contains(out, `"kind": "config"`) || !strings.Contains(out, "MY_KEY") {
		t.Errorf("health without the key = %d\n%s", code, out)
	}
}

// The breaker opened by live calls in one process is what the next
// process routes by and what 'providers health' shows.
func TestBreakerStateAcrossCommands(t *testing.T) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
routing:
  circuit_breaker:
    failures: 1
    cooldown: 10m
budgets:
  confirm_above: "100"
`, srv.URL()))
	// The failure opens the breaker: no backoff, no retry.
	srv.Enqueue(anthropicfake.Overloaded())
	code, _, errs := run(t, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "circuit breaker open after 1 consecutive failure, last: overloaded") || len(srv.Requests()) != 1 {
		t.Fatalf("failing invoke = %d\n%s", code, errs)
	}
	before := len(srv.Requests())
	code, _, errs = run(t, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "circuit breaker open") || !strings.Contains(errs, "claude: open since") || len(srv.Requests()) != before {
		t.Fatalf("invoke while open = %d (%d requests)\n%s", code, len(srv.Requests())-before, errs)
	}
	if code, out, _ := run(t, dir, keyEnv, "route", "--agent", "builder"); code != ExitFailure || !strings.Contains(out, "drop claude/claude-sonnet-4-6: circuit open since") {
		t.Errorf("route = %d\n%s", code, out)
	}
	code, out, _ := run(t, dir, keyEnv, "providers", "health", "--json")
	var res healthJSON
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Providers) != 1 {
		t.Fatalf("health = %d\n%s", code, out)
	}
	if b := res.Providers[0].Breaker; b.State != "open" || b.Failures != 1 || b.LastError != "overloaded" || b.RetryAt == "" {
		t.Errorf("breaker = %+v", b)
	}
	if code, out, _ := run(t, dir, keyEnv, "providers", "health"); code != 0 || !strings.Contains(out, "open until ") || !strings.Contains(out, "(1× overloaded)") {
		t.Errorf("health table = %d\n%s", code, out)
	}
}

func TestHealthProgressOnlyOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := newHealthProgress(&b, true, []string{"a", "b"})
	p.done("b", healthFailed)
	p.close()
	got := b.String()
	for _, w := range []string{"\r\033[Kchecking 2 providers: 0 done, waiting for a, b", "\r\033[Kchecking 2 providers: 1 done (b unhealthy), waiting for a"} {
		if !strings.Contains(got, w) {
			t.Errorf("progress lacks %q: %q", w, got)
		}
	}
	if !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("progress line not erased: %q", got)
	}
	b.Reset()
	p = newHealthProgress(&b, false, []string{"a"})
	p.done("a", healthOK)
	p.close()
	if b.Len() != 0 {
		t.Errorf("progress off a terminal: %q", b.String())
	}
}
