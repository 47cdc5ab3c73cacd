package cli

// locality.mode covers every connection a command makes, not only provider
// calls: the notification webhook, the Redis cache, the PostgreSQL store,
// the trace exporter, and the checks of doctor and providers smoke. Names
// resolve through svcNet (a map; nothing reaches DNS) and connections are
// opened by its dialer, which records every address, dials loopback for
// real and refuses everything else: no test here reaches a non-loopback
// address.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// svcNet is a splitNet whose names can be rebound: a name in rebind
// resolves as hosts says the first time and as rebind says afterwards (a
// DNS-rebinding server).
type svcNet struct {
	*splitNet
	mu      sync.Mutex
	rebind  map[string][]string
	lookups map[string]int
}

func newSvcNet(t *testing.T) *svcNet {
	n := &svcNet{splitNet: newSplitNet(t), rebind: map[string][]string{}, lookups: map[string]int{}}
	n.hosts["db.remote.test"] = []string{"203.0.113.5"}
	n.hosts["cache.remote.test"] = []string{"203.0.113.6"}
	n.hosts["hooks.remote.test"] = []string{"203.0.113.7"}
	n.hosts["otel.remote.test"] = []string{"203.0.113.8"}
	n.hosts["pd.remote.test"] = []string{"203.0.113.9"}
	n.hosts["split.test"] = []string{"127.0.0.1", "203.0.113.10"}
	n.hosts["db.local.test"] = []string{"127.0.0.1"}
	n.hosts["cache.local.test"] = []string{"127.0.0.1"}
	n.hosts["hooks.local.test"] = []string{"127.0.0.1"}
	n.hosts["localhost"] = []string{"127.0.0.1"}
	return n
}

func (n *svcNet) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	n.mu.Lock()
	n.lookups[host]++
	again, ok := n.rebind[host]
	rebound := ok && n.lookups[host] > 1
	n.mu.Unlock()
	if rebound {
		var out []net.IPAddr
		for _, a := range again {
			out = append(out, net.IPAddr{IP: net.ParseIP(a)})
		}
		return out, nil
	}
	return n.splitNet.LookupIPAddr(ctx, host)
}

// lookupsOf says how often host was looked up.
func (n *svcNet) lookupsOf(host string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lookups[host]
}

func (n *svcNet) hook(e *env) { e.resolver, e.dial = n, n.Dial }

// servicesProject writes a project in locality mode whose one provider is
// an Anthropic fake on loopback, with extra appended to its configuration.
func servicesProject(t *testing.T, mode, extra string) (string, *anthropicfake.Server) {
	t.Helper()
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	return writeConfig(t, fmt.Sprintf(`orchestration: true
locality:
  mode: %s
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
budgets:
  confirm_above: "100"
%s`, mode, srv.URL(), extra)), srv
}

// refusedAtLine asserts that errs reports the refusal want at the line of
// the project's configuration where the endpoint is configured.
func refusedAtLine(t *testing.T, errs, want string, line int) {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`llm-config\.yaml:%d:\d+: %s`, line, regexp.QuoteMeta(want)))
	if !re.MatchString(errs) {
		t.Errorf("stderr does not report %q at line %d:\n%s", want, line, errs)
	}
}

// In local-only mode every service configured off this machine is refused
// before anything is dialed: the command exits 3 with an error naming the
// service, the addresses, the configuration key and its file:line, and the
// recording dialer saw no remote address. A name that resolves to loopback
// and a remote address is remote: not even its loopback address is
// dialed.
func TestLocalOnlyRefusesEveryRemoteService(t *testing.T) {
	for _, c := range []struct {
		name, config string
		line         int // of the endpoint in the file
		want         string
		secret       string // part of the endpoint that must not be printed
	}{
		{"webhook", "notifications:\n  webhook_url: https://hooks.remote.test/T0/B0/hook-secret-path\n", 13,
			"webhook (hooks.remote.test → 203.0.113.7) is not on this machine and locality mode is local-only: point notifications.webhook_url at this machine or set locality.mode: consent", "hook-secret-path"},
		{"webhook split", "notifications:\n  webhook_url: http://split.test:8080/hook\n", 13,
			"webhook (split.test → 127.0.0.1, 203.0.113.10) is not on this machine", ""},
		{"redis cache", "cache:\n  backend: redis\n  url: redis://:redis-pass-1@cache.remote.test:6379/0\n", 14,
			"cache redis (cache.remote.test → 203.0.113.6) is not on this machine and locality mode is local-only: point cache.url at this machine or set locality.mode: consent", "redis-pass-1"},
		{"redis cache tls", "cache:\n  backend: redis\n  url: rediss://203.0.113.6:6380/0\n", 14,
			"cache redis (203.0.113.6) is not on this machine and locality mode is local-only", ""},
		{"redis cache split", "cache:\n  backend: redis\n  url: redis://split.test:6379/0\n", 14,
			"cache redis (split.test → 127.0.0.1, 203.0.113.10) is not on this machine", ""},
		{"postgres store", "store:\n  backend: postgres\n  dsn: postgres://cortex:pg-pass-1@db.remote.test:5432/ledger\n", 14,
			"store postgres (db.remote.test → 203.0.113.5) is not on this machine and locality mode is local-only: point store.dsn at this machine or set locality.mode: consent", "pg-pass-1"},
		{"postgres store key=value", "store:\n  backend: postgres\n  dsn: host=db.remote.test port=5433 user=cortex password=pg-pass-2 dbname=ledger sslmode=require\n", 14,
			"store postgres (db.remote.test → 203.0.113.5) is not on this machine", "pg-pass-2"},
		{"postgres store split", "store:\n  backend: postgres\n  dsn: postgres://cortex@split.test:5432/ledger?sslmode=disable\n", 14,
			"store postgres (split.test → 127.0.0.1, 203.0.113.10) is not on this machine", ""},
		// The configuration refuses a trace endpoint that is not written
		// as loopback; localhost is decided by the gate, on its addresses.
		{"trace exporter", "observability:\n  traces:\n    endpoint: https://otel.remote.test:4318\n", 14,
			"observability.traces.endpoint: otel.remote.test:4318 is not a loopback address, and locality.mode is local-only", ""},
		{"trace exporter localhost", "observability:\n  traces:\n    endpoint: https://localhost:4318\n", 14,
			"trace exporter (localhost → 203.0.113.8) is not on this machine and locality mode is local-only: point observability.traces.endpoint at this machine or set locality.mode: consent", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, srv := servicesProject(t, "local-only", c.config)
			n := newSvcNet(t)
			n.hosts["localhost"] = []string{"203.0.113.8"} // the name is not what counts
			srv.Enqueue(anthropicfake.TextReply("must not be asked"))
			code, out, errs := runWith(t, n.hook, dir, keyEnv, "invoke", "hi")
			if code != ExitConfig {
				t.Fatalf("invoke = %d, want %d\n%s\n%s", code, ExitConfig, out, errs)
			}
			refusedAtLine(t, errs, c.want, c.line)
			if d := n.allDials(); len(d) != 0 {
				t.Errorf("dials %q, want none", d)
			}
			if c.secret != "" && strings.Contains(out+errs, c.secret) {
				t.Errorf("the output carries %q:\n%s", c.secret, errs)
			}
			if r := srv.Requests(); len(r) != 0 {
				t.Errorf("the provider was called %d times", len(r))
			}
		})
	}
}

// In consent mode a service the configuration names is reached wherever it
// is, with no consent to record (the configuration is the user's say-so),
// but still through the gate: the name is resolved by the gate's resolver
// and only the resolved address is dialed (here refused by the test
// dialer).
func TestConsentModeDialsAConfiguredServiceOnItsResolvedAddress(t *testing.T) {
	for _, c := range []struct{ name, config, dial, want string }{
		{"redis cache", "cache:\n  backend: redis\n  url: redis://cache.remote.test:6379/0\n", "203.0.113.6:6379", "cache: "},
		{"postgres store", "store:\n  backend: postgres\n  dsn: postgres://cortex@db.remote.test:5432/ledger?sslmode=disable\n", "203.0.113.5:5432", "store: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := servicesProject(t, "consent", c.config)
			n := newSvcNet(t)
			code, out, errs := runWith(t, n.hook, dir, keyEnv, "invoke", "hi")
			if code != ExitFailure || !strings.Contains(errs, c.want) || !strings.Contains(errs, "test dialer refuses") {
				t.Fatalf("invoke = %d, want %d with the test dialer's refusal\n%s\n%s", code, ExitFailure, out, errs)
			}
			d := n.allDials()
			if len(d) == 0 {
				t.Fatal("nothing was dialed: the test proves nothing")
			}
			for _, a := range d {
				if a != c.dial {
					t.Errorf("dialed %q, want only %q", a, c.dial)
				}
			}
		})
	}
}

// A webhook whose name resolved to loopback at start-up and to a remote
// address when the notification is sent (DNS rebinding) is refused at the
// dial: the notification is not delivered anywhere, and no remote address
// is dialed. The same webhook on loopback is notified in local-only mode.
func TestLocalOnlyWebhookDecidedAtEveryDial(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hook.URL, "http://"))
	received := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), bodies...) }

	dir, srv := servicesProject(t, "local-only", "notifications:\n  webhook_url: http://hooks.local.test:"+port+"/hook\n")
	n := newSvcNet(t)
	srv.Enqueue(anthropicfake.AuthError())
	if code, _, errs := runWith(t, n.hook, dir, keyEnv, "invoke", "hi"); code != ExitFailure || !strings.Contains(errs, "project paused") {
		t.Fatalf("auth failure = %d %q", code, errs)
	}
	if got := received(); len(got) != 1 || !strings.Contains(got[0], "auth") {
		t.Fatalf("the loopback webhook received %q, want the pause notification", got)
	}
	if d := n.allDials(); !slicesContains(d, "127.0.0.1:"+port) {
		t.Errorf("dials %q: the webhook was not dialed through the gate on its resolved address", d)
	}

	dir, srv = servicesProject(t, "local-only", "notifications:\n  webhook_url: http://hooks.local.test:"+port+"/hook\n")
	n = newSvcNet(t)
	n.rebind["hooks.local.test"] = []string{"203.0.113.7"}
	srv.Enqueue(anthropicfake.AuthError())
	code, _, errs := runWith(t, n.hook, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "project paused") {
		t.Fatalf("auth failure = %d %q", code, errs)
	}
	if got := received(); len(got) != 1 {
		t.Errorf("the webhook received %d notifications, want still 1", len(got))
	}
	if l := n.lookupsOf("hooks.local.test"); l < 2 {
		t.Errorf("hooks.local.test looked up %d times: the notification was never attempted, the test proves nothing", l)
	}
	if d := n.remoteDials(); len(d) != 0 {
		t.Errorf("remote dials %q", d)
	}
}

// The trace exporter connects through the gate too: a collector name
// (localhost, the one name the configuration lets through in local-only
// mode) that resolved to loopback at start-up and to a remote address at export time
// is refused at the dial, with no remote address dialed.
func TestLocalOnlyTraceExporterDecidedAtEveryDial(t *testing.T) {
	var mu sync.Mutex
	exports := 0
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		exports++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(col.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(col.URL, "http://"))
	got := func() int { mu.Lock(); defer mu.Unlock(); return exports }
	config := "observability:\n  traces:\n    endpoint: http://localhost:" + port + "\n"

	dir, srv := servicesProject(t, "local-only", config)
	n := newSvcNet(t)
	srv.Enqueue(anthropicfake.TextReply("traced"))
	if code, out, errs := runWith(t, n.hook, dir, keyEnv, "invoke", "hi"); code != 0 || !strings.Contains(out, "traced") {
		t.Fatalf("invoke = %d %q %q", code, out, errs)
	}
	if got() == 0 {
		t.Fatal("the loopback collector received no export")
	}
	if d := n.allDials(); !slicesContains(d, "127.0.0.1:"+port) {
		t.Errorf("dials %q: the exporter was not dialed through the gate", d)
	}

	before := got()
	dir, srv = servicesProject(t, "local-only", config)
	n = newSvcNet(t)
	n.rebind["localhost"] = []string{"203.0.113.8"}
	srv.Enqueue(anthropicfake.TextReply("traced again"))
	if code, out, errs := runWith(t, n.hook, dir, keyEnv, "invoke", "hi"); code != 0 || !strings.Contains(out, "traced again") {
		t.Fatalf("invoke = %d %q %q", code, out, errs)
	}
	if got() != before {
		t.Errorf("the collector received %d exports after the name moved off this machine", got()-before)
	}
	if l := n.lookupsOf("localhost"); l < 2 {
		t.Errorf("localhost looked up %d times: no export was attempted, the test proves nothing", l)
	}
	if d := n.remoteDials(); len(d) != 0 {
		t.Errorf("remote dials %q", d)
	}
}

// doctor's store and cache checks connect through the gate: in local-only
// mode a remote PostgreSQL and Redis are reported as refused (with the
// file:line of their keys and the fix), never dialed.
func TestDoctorLocalOnlyRefusesRemoteStoreAndCache(t *testing.T) {
	dir, _ := servicesProject(t, "local-only", `store:
  backend: postgres
  dsn: postgres://cortex:pg-pass-3@db.remote.test:5432/ledger
cache:
  backend: redis
  url: redis://:redis-pass-3@cache.remote.test:6379/0
`)
	n := newSvcNet(t)
	code, rep, errs := runDoctor(t, n.hook, dir, keyEnv)
	noSecrets(t, "doctor output", fmt.Sprintf("%+v", rep)+errs, "pg-pass-3", "redis-pass-3")
	if code != ExitFailure {
		t.Errorf("doctor = %d, want %d", code, ExitFailure)
	}
	for _, c := range []struct {
		check, want, fix string
		line             int
	}{
		{"store", "store postgres (db.remote.test → 203.0.113.5) is not on this machine and locality mode is local-only", "point store.dsn at this machine", 14},
		{"cache", "cache redis (cache.remote.test → 203.0.113.6) is not on this machine and locality mode is local-only", "point cache.url at this machine", 17},
	} {
		got := checkNamed(t, rep, c.check)
		if got.Status != checkFail || !strings.Contains(got.Fix, c.fix) {
			t.Errorf("%s = %+v", c.check, got)
		}
		refusedAtLine(t, got.Detail, c.want, c.line)
	}
	if d := n.allDials(); len(d) != 0 {
		t.Errorf("dials %q, want none", d)
	}
}

// providers smoke sends its alerts through the gate: in a local-only
// project a remote webhook and a remote PagerDuty endpoint are refused and
// reported, never dialed; a webhook on loopback is alerted.
func TestSmokeLocalOnlyRefusesRemoteAlertSinks(t *testing.T) {
	vars := map[string]string{"PD_KEY": smokeRoutingKey, pagerDutyURLEnv: "https://pd.remote.test/v2/enqueue"}
	dir := writeConfig(t, "locality:\n  mode: local-only\nnotifications:\n  webhook_url: https://hooks.remote.test/hook-secret-path\n")
	n := newSvcNet(t)
	code, out, errs := runWith(t, n.hook, dir, vars, "providers", "smoke", "--require-all", "--pagerduty-routing-key-env", "PD_KEY")
	noSecrets(t, "output", out+errs, smokeRoutingKey, "hook-secret-path")
	if code != ExitFailure {
		t.Errorf("smoke = %d, want %d (targets skipped under --require-all)\n%s\n%s", code, ExitFailure, out, errs)
	}
	refusedAtLine(t, errs, "webhook (hooks.remote.test → 203.0.113.7) is not on this machine and locality mode is local-only: point notifications.webhook_url at this machine or set locality.mode: consent; webhook alerts are off", 4)
	if want := "PagerDuty events API (pd.remote.test → 203.0.113.9) is not on this machine and locality mode is local-only: point $" + pagerDutyURLEnv + " at this machine or set locality.mode: consent; PagerDuty alerts are off"; !strings.Contains(errs, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}
	if d := n.allDials(); len(d) != 0 {
		t.Errorf("dials %q, want none", d)
	}

	sink := newAlertSink(t, http.StatusOK)
	u, _ := url.Parse(sink.srv.URL)
	vars = map[string]string{"HOOK": "http://hooks.local.test:" + u.Port() + "/hook"}
	code, out, errs = runWith(t, n.hook, dir, vars, "providers", "smoke", "--require-all", "--webhook-url-env", "HOOK")
	if code != ExitFailure || len(sink.received()) == 0 {
		t.Errorf("smoke = %d, the loopback webhook received %d alerts\n%s\n%s", code, len(sink.received()), out, errs)
	}
	if d := n.remoteDials(); len(d) != 0 {
		t.Errorf("remote dials %q", d)
	}
}

// Loopback still works in local-only mode through the gated dialers: the
// real local Redis and PostgreSQL, named by a host the gate resolves to
// 127.0.0.1, serve an invocation.
func TestLocalOnlyLoopbackStoreAndCacheServe(t *testing.T) {
	local := func(t *testing.T, raw, name string) (string, string) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if u.Hostname() != "127.0.0.1" {
			t.Skipf("skipped: the test service is at %s, not 127.0.0.1, so the name %s cannot stand for it", u.Hostname(), name)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"redis": "6379", "postgres": "5432", "postgresql": "5432"}[u.Scheme]
		}
		u.Host = name + ":" + port
		return u.String(), "127.0.0.1:" + port
	}
	for _, c := range []struct {
		name                    string
		service                 func(testing.TB) string
		host, config, env, what string
	}{
		{"redis", testenv.Redis, "cache.local.test", "cache:\n  backend: redis\n  url: ${REDIS_URL}\n", "REDIS_URL", "Redis"},
		{"postgres", testenv.Postgres, "db.local.test", "store:\n  backend: postgres\n  dsn: ${PG_DSN}\n", "PG_DSN", "PostgreSQL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, addr := local(t, c.service(t), c.host)
			dir, srv := servicesProject(t, "local-only", c.config)
			n := newSvcNet(t)
			answer := "served through the gate by " + c.what
			srv.Enqueue(anthropicfake.TextReply(answer))
			vars := map[string]string{"MY_KEY": testKey, c.env: raw}
			if code, out, errs := runWith(t, n.hook, dir, vars, "invoke", "hi"); code != 0 || !strings.Contains(out, answer) {
				t.Fatalf("invoke = %d %q %q", code, out, errs)
			}
			if d := n.allDials(); !slicesContains(d, addr) {
				t.Errorf("dials %q: %s was not dialed through the gate at %s", d, c.what, addr)
			}
		})
	}
}
