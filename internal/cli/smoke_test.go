package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/builtin/builtintest"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Secrets of the smoke tests; none may appear in any output or payload.
const (
	smokeGoodKey    = "sk-smoke-accepted-key-0123456789"
	smokeRoutingKey = "pd-routing-key-R0UT1NG-0123456789"
)

// smokeFakes starts the smoke fixture of every target the smoke covers by
// default (and of the optional ones in also), each requiring
// smokeGoodKey, and returns the environment pointing the smoke test at
// them with key as every credential.
func smokeFakes(t *testing.T, key string, also ...string) (map[string]string, map[string]*builtintest.FakeServer) {
	t.Helper()
	vars := map[string]string{}
	fakes := map[string]*builtintest.FakeServer{}
	for _, tg := range smokeTargets(builtin.Registry()) {
		if tg.optional && !slicesContains(also, tg.name) {
			continue
		}
		fx, ok := builtintest.Lookup(tg.reg.Type, tg.profile)
		if !ok {
			t.Fatalf("no smoke fixture for %s: add one to internal/builtin/builtintest", tg.name)
		}
		srv := fx.Start(smokeGoodKey)
		t.Cleanup(srv.Close)
		fakes[tg.name] = srv
		vars[tg.prefix+"_BASE_URL"] = srv.BaseURL
		for _, f := range tg.reg.Credentials {
			if f.RequiredFor(tg.profile) {
				vars[f.EnvVars[0]] = key
			}
		}
	}
	return vars, fakes
}

// alertSink records the JSON bodies POSTed to it.
type alertSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	status int
}

func newAlertSink(t *testing.T, status int) *alertSink {
	s := &alertSink{status: status}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(s.status)
		io.WriteString(w, `{"status":"success","message":"Event processed"}`)
	}))
	t.Cleanup(s.srv.Close)
	if !strings.HasPrefix(s.srv.URL, "http://127.0.0.1:") {
		t.Fatalf("sink listens on %s, not on 127.0.0.1", s.srv.URL)
	}
	return s
}

func (s *alertSink) received() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

func noSecrets(t *testing.T, what string, data string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(data, sec) {
			t.Errorf("%s contains the secret %q:\n%s", what, sec, data)
		}
	}
}

// maxTokensOne reports whether a JSON body sets an output-token limit of 1
// (max_tokens, max_completion_tokens, maxOutputTokens: whatever the
// provider calls it, at any depth).
func maxTokensOne(body []byte) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				lk := strings.ToLower(k)
				if n, ok := val.(float64); ok && n == 1 && strings.Contains(lk, "max") && strings.Contains(lk, "token") {
					return true
				}
				if walk(val) {
					return true
				}
			}
		case []any:
			for _, val := range x {
				if walk(val) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

func decodeSmoke(t *testing.T, out string) smokeReport {
	t.Helper()
	var rep smokeReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("smoke --json printed %q: %v", out, err)
	}
	return rep
}

func TestSmokeEveryRegisteredTypeHealthyAgainstTheFakes(t *testing.T) {
	ollama := "openai_compatible/ollama"
	vars, fakes := smokeFakes(t, smokeGoodKey, ollama)
	vars["CORTEXBUILD_SMOKE_OPENAI_COMPATIBLE_OLLAMA_MODEL"] = "llama3.2"
	code, out, errs := run(t, t.TempDir(), vars, "providers", "smoke", "--live", "--json", "--require-all")
	noSecrets(t, "output", out+errs, smokeGoodKey)
	if code != ExitOK {
		t.Fatalf("smoke = %d\n%s\n%s", code, out, errs)
	}
	rep := decodeSmoke(t, out)
	if !rep.OK || !rep.Live {
		t.Errorf("report ok=%v live=%v", rep.OK, rep.Live)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Type] = true
		if r.Optional && r.Target != ollama {
			if r.Status != smokeSkipped || !strings.Contains(r.Reason, "_BASE_URL") {
				t.Errorf("%s: optional target without base URL = %s %q, want skipped naming its variable", r.Target, r.Status, r.Reason)
			}
			continue
		}
		if r.Status != smokeHealthy || r.Health == nil || !r.Health.OK || r.Live == nil || !r.Live.OK || r.Failed {
			t.Errorf("%s: %+v health=%+v live=%+v", r.Target, r, r.Health, r.Live)
			continue
		}
		if r.Live.Model == "" || r.Live.Usage == nil || r.Live.Cost == nil {
			t.Errorf("%s: live call lacks model, usage or cost: %+v", r.Target, r.Live)
		}
		if !strings.HasPrefix(r.BaseURL, "http://127.0.0.1:") {
			t.Errorf("%s: base URL %q is not the fake", r.Target, r.BaseURL)
		}
	}
	for _, typ := range builtin.Registry().Types() {
		if !seen[typ] {
			t.Errorf("registered type %s was not smoke-tested", typ)
		}
	}
	// Each fake saw a health probe (a GET) and one generation with an
	// output limit of 1 token.
	for name, f := range fakes {
		var gets, live int
		for _, r := range f.Requests() {
			switch {
			case r.Method == http.MethodGet:
				gets++
			case r.Method == http.MethodPost && maxTokensOne(r.Body):
				live++
			}
		}
		if gets < 1 || live != 1 {
			t.Errorf("%s: %d health probes and %d one-token calls, want >=1 and 1", name, gets, live)
		}
	}

	// The table form.
	code, out, errs = run(t, t.TempDir(), vars, "providers", "smoke")
	if code != ExitOK || !strings.Contains(out, "anthropic") || !strings.Contains(out, "healthy") || !strings.Contains(out, "0 unhealthy") {
		t.Errorf("smoke = %d\n%s\n%s", code, out, errs)
	}
}

func TestSmokeSkipsTypesWithoutCredentials(t *testing.T) {
	// No variable at all: nothing is built, nothing is reached.
	code, out, errs := run(t, t.TempDir(), map[string]string{}, "providers", "smoke", "--json")
	if code != ExitOK {
		t.Fatalf("smoke without credentials = %d\n%s\n%s", code, out, errs)
	}
	rep := decodeSmoke(t, out)
	reg := builtin.Registry()
	for _, r := range rep.Results {
		if r.Status != smokeSkipped || r.Failed || r.Health != nil {
			t.Errorf("%s: %+v, want skipped without a health check", r.Target, r)
		}
		if r.Optional {
			continue
		}
		rg, _ := reg.Lookup(r.Type)
		for _, f := range rg.Credentials {
			if f.RequiredFor(r.Profile) && r.Reason != "set "+strings.Join(f.EnvVars, " or ") {
				t.Errorf("%s: reason %q, want %q", r.Target, r.Reason, "set "+strings.Join(f.EnvVars, " or "))
			}
		}
	}
	code, out, _ = run(t, t.TempDir(), map[string]string{}, "providers", "smoke")
	if code != ExitOK || !strings.Contains(out, "skipped: set ANTHROPIC_API_KEY") {
		t.Errorf("table = %d\n%s", code, out)
	}

	// --require-all makes a missing credential a failure.
	code, out, errs = run(t, t.TempDir(), map[string]string{}, "providers", "smoke", "--require-all")
	if code != ExitFailure || !strings.Contains(out, "required by --require-all") || !strings.Contains(errs, "smoke test failed") {
		t.Errorf("--require-all = %d\n%s\n%s", code, out, errs)
	}
}

func TestSmokeAuthFailureAlertsWebhookAndPagerDuty(t *testing.T) {
	// Every fake accepts smokeGoodKey; the anthropic key is wrong.
	vars, _ := smokeFakes(t, smokeGoodKey)
	vars["ANTHROPIC_API_KEY"] = testKey
	hook := newAlertSink(t, http.StatusOK)
	pd := newAlertSink(t, http.StatusAccepted)
	vars["SMOKE_WEBHOOK"] = hook.srv.URL + "/hooks/T0KEN-IN-PATH"
	vars["PD_KEY"] = smokeRoutingKey
	vars[pagerDutyURLEnv] = pd.srv.URL + "/v2/enqueue"
	vars["GITHUB_SERVER_URL"], vars["GITHUB_REPOSITORY"], vars["GITHUB_RUN_ID"] = "https://github.com", "cortexbuild/cortexbuild", "42"

	code, out, errs := run(t, t.TempDir(), vars, "providers", "smoke", "--json",
		"--webhook-url-env", "SMOKE_WEBHOOK", "--pagerduty-routing-key-env", "PD_KEY")
	noSecrets(t, "output", out+errs, testKey, smokeGoodKey, smokeRoutingKey, "T0KEN-IN-PATH")
	if code != ExitFailure {
		t.Fatalf("smoke with a refused key = %d\n%s\n%s", code, out, errs)
	}
	rep := decodeSmoke(t, out)
	var anth smokeResult
	for _, r := range rep.Results {
		if r.Target == "anthropic" {
			anth = r
		} else if !r.Optional && r.Status != smokeHealthy {
			t.Errorf("%s = %s %q, want healthy", r.Target, r.Status, r.Reason)
		}
	}
	if anth.Status != smokeUnhealthy || !anth.Failed || anth.Health == nil || anth.Health.Kind != provider.KindAuth {
		t.Fatalf("anthropic = %+v health=%+v, want unhealthy with kind auth", anth, anth.Health)
	}
	if !strings.Contains(errs, "provider anthropic unhealthy") {
		t.Errorf("the log sink did not report it:\n%s", errs)
	}

	// The webhook got one notification, for anthropic.
	hb := hook.received()
	if len(hb) != 1 {
		t.Fatalf("webhook received %d bodies, want 1", len(hb))
	}
	noSecrets(t, "webhook payload", string(hb[0]), testKey, smokeGoodKey, smokeRoutingKey)
	var n struct {
		Level, Event, Provider, Message string
		At                              time.Time
	}
	if err := json.Unmarshal(hb[0], &n); err != nil || n.Level != "critical" || n.Event != "provider_smoke_failed" ||
		n.Provider != "anthropic" || !strings.Contains(n.Message, "auth") || n.At.IsZero() {
		t.Errorf("webhook payload %s (%v)", hb[0], err)
	}

	// PagerDuty got a trigger for anthropic and a resolve for each healthy
	// target.
	var triggers, resolves int
	for _, b := range pd.received() {
		noSecrets(t, "PagerDuty payload", strings.ReplaceAll(string(b), `"routing_key":"`+smokeRoutingKey+`"`, ""), testKey, smokeGoodKey, smokeRoutingKey)
		var ev struct {
			RoutingKey  string `json:"routing_key"`
			EventAction string `json:"event_action"`
			DedupKey    string `json:"dedup_key"`
			Payload     *struct {
				Summary       string         `json:"summary"`
				Source        string         `json:"source"`
				Severity      string         `json:"severity"`
				Timestamp     string         `json:"timestamp"`
				CustomDetails map[string]any `json:"custom_details"`
			} `json:"payload"`
			Links []struct{ Href, Text string } `json:"links"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("PagerDuty body %s: %v", b, err)
		}
		if ev.RoutingKey != smokeRoutingKey || !strings.HasPrefix(ev.DedupKey, "cortexbuild/provider-smoke/") {
			t.Errorf("event routing/dedup: %s", b)
		}
		switch ev.EventAction {
		case "trigger":
			triggers++
			p := ev.Payload
			if ev.DedupKey != "cortexbuild/provider-smoke/anthropic" || p == nil {
				t.Fatalf("trigger %s", b)
			}
			if _, err := time.Parse(time.RFC3339, p.Timestamp); err != nil || p.Severity != "critical" || p.Source == "" ||
				!strings.Contains(p.Summary, "anthropic") || len(p.Summary) > 1024 {
				t.Errorf("trigger payload %s", b)
			}
			if p.CustomDetails["adapter_type"] != "anthropic" || p.CustomDetails["kind"] != "auth" || p.CustomDetails["check"] != "health" ||
				p.CustomDetails["run_url"] != "https://github.com/cortexbuild/cortexbuild/actions/runs/42" {
				t.Errorf("custom_details %v", p.CustomDetails)
			}
			if len(ev.Links) != 1 || ev.Links[0].Href == "" {
				t.Errorf("links %v", ev.Links)
			}
		case "resolve":
			resolves++
			if ev.Payload != nil {
				t.Errorf("resolve carries a payload: %s", b)
			}
		default:
			t.Errorf("event_action %q", ev.EventAction)
		}
	}
	healthy := 0
	for _, r := range rep.Results {
		if r.Status == smokeHealthy {
			healthy++
		}
	}
	if triggers != 1 || resolves != healthy {
		t.Errorf("PagerDuty got %d triggers and %d resolves, want 1 and %d", triggers, resolves, healthy)
	}
	var pdOut alertOutcome
	for _, a := range rep.Alerts {
		if a.Sink == "pagerduty" {
			pdOut = a
		}
	}
	if pdOut.Sent != 1 || pdOut.Resolved != healthy || pdOut.Error != "" {
		t.Errorf("pagerduty outcome %+v", pdOut)
	}
}

func TestSmokeWebhookFromConfigAndFailingSinks(t *testing.T) {
	vars, _ := smokeFakes(t, smokeGoodKey)
	vars["GEMINI_API_KEY"] = testKey // refused by the gemini fake
	hook := newAlertSink(t, http.StatusOK)
	pd := newAlertSink(t, http.StatusBadRequest)
	vars["HOOK_URL"] = hook.srv.URL
	vars["PD_KEY"] = smokeRoutingKey
	vars[pagerDutyURLEnv] = pd.srv.URL
	dir := writeConfig(t, "notifications:\n  webhook_url: ${HOOK_URL}\n")

	code, out, errs := run(t, dir, vars, "providers", "smoke", "--pagerduty-routing-key-env", "PD_KEY")
	noSecrets(t, "output", out+errs, testKey, smokeGoodKey, smokeRoutingKey)
	if code != ExitFailure || !strings.Contains(out, "gemini") || !strings.Contains(out, "unhealthy") {
		t.Fatalf("smoke = %d\n%s\n%s", code, out, errs)
	}
	if got := hook.received(); len(got) != 1 || !strings.Contains(string(got[0]), `"provider":"gemini"`) {
		t.Errorf("configured webhook received %q", got)
	}
	if !strings.Contains(errs, "pagerduty alert failed") || !strings.Contains(errs, "400") {
		t.Errorf("a refused PagerDuty event is not reported:\n%s", errs)
	}

	// An empty routing-key variable is a warning, a failure with
	// --require-all.
	delete(vars, "GEMINI_API_KEY")
	vars["GEMINI_API_KEY"] = smokeGoodKey
	vars["PD_KEY"] = ""
	code, _, errs = run(t, t.TempDir(), vars, "providers", "smoke", "--pagerduty-routing-key-env", "PD_KEY")
	if code != ExitOK || !strings.Contains(errs, "$PD_KEY is empty") {
		t.Errorf("empty routing key = %d %q", code, errs)
	}
	if code, _, _ := run(t, t.TempDir(), vars, "providers", "smoke", "--require-all", "--pagerduty-routing-key-env", "PD_KEY"); code != ExitFailure {
		t.Errorf("empty routing key with --require-all = %d, want 1", code)
	}
}

func TestSmokeLocalOnlyProjectReachesNothingRemote(t *testing.T) {
	dir := writeConfig(t, "locality:\n  mode: local-only\n")
	g := &egress{}
	vars := map[string]string{"ANTHROPIC_API_KEY": testKey}
	code, out, errs := runWith(t, g.hook, dir, vars, "providers", "smoke", "--json")
	if code != ExitOK {
		t.Fatalf("smoke = %d\n%s\n%s", code, out, errs)
	}
	rep := decodeSmoke(t, out)
	if rep.Results[0].Target != "anthropic" || rep.Results[0].Status != smokeSkipped || !strings.Contains(rep.Results[0].Reason, "local-only") {
		t.Errorf("anthropic = %+v", rep.Results[0])
	}
	if len(g.dials) != 0 {
		t.Errorf("connections opened: %v", g.dials)
	}
}

func TestEnvToken(t *testing.T) {
	for in, want := range map[string]string{"anthropic": "ANTHROPIC", "openai_compatible": "OPENAI_COMPATIBLE", "lm-studio.v2": "LM_STUDIO_V2"} {
		if got := envToken(in); got != want {
			t.Errorf("envToken(%q) = %q, want %q", in, got, want)
		}
	}
	if got := displayURL("https://user:pw@example.test/v1?key=abc#x"); got != "https://example.test/v1" {
		t.Errorf("displayURL = %q", got)
	}
}
