package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// consoleForm posts the console's key form for a provider, as a browser
// on the console's own page does: the page's synchronizer token, the
// session cookie, a same-origin request.
func consoleForm(t *testing.T, hc *http.Client, base, prov string, form url.Values) {
	t.Helper()
	resp, err := hc.Get(base + "/console/keys")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("console keys page = %d, no form token", resp.StatusCode)
	}
	form.Set("csrf", string(m[1]))
	req, _ := http.NewRequest(http.MethodPost, base+"/console/keys/"+prov, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "saved") {
		t.Fatalf("saving %s's key in the console = %d %s", prov, resp.StatusCode, resp.Header.Get("Location"))
	}
}

// unavailableNow is what /healthz says cannot be used.
func unavailableNow(t *testing.T, base string) []string {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Status      string   `json:"status"`
		Unavailable []string `json:"unavailable"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK || h.Status != "ok" {
		t.Fatalf("/healthz = %d %+v %v", resp.StatusCode, h, err)
	}
	return h.Unavailable
}

// alphaAndLocal starts the two providers of the live-credentials
// projects: alpha, Anthropic, and local, a vLLM server that wants
// localKey.
func alphaAndLocal(t *testing.T, localKey string) (*anthropicfake.Server, *openaifake.Server) {
	alpha := anthropicfake.New()
	t.Cleanup(alpha.Close)
	local := openaifake.New(openaifake.WithFlavor(openaifake.FlavorVLLM), openaifake.WithAPIKey(localKey))
	t.Cleanup(local.Close)
	return alpha, local
}

// waitFor retries cond until it holds, failing after a generous
// deadline: a change another process makes to the secrets file is seen
// within the gateway's recheck period, not at once. No timing is
// asserted.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not seen", what)
		}
	}
}

// A running serve takes the credentials saved in the secrets file from
// the next request, without a restart: a provider set up through the
// console's key form becomes available, a rotated key is used by the
// next call while a call under way finishes with the old one, a key
// another process writes is seen within the recheck period, and a
// secrets file that cannot be read makes only the provider that needs it
// unavailable, said once, while the others serve.
func TestServeUsesKeysSavedWhileItRuns(t *testing.T) {
	const localKey, key1, key2, key3 = "sk-local-Lv4w", "sk-ant-first-9Qe2", "sk-ant-second-X7p1", "sk-ant-third-Mm3k"
	alpha, local := alphaAndLocal(t, localKey)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  alpha:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${ALPHA_KEY}
  local:
    type: openai_compatible
    profile: vllm
    base_url: %s/v1
    credentials:
      api_key: ${LOCAL_KEY}
agents:
  builder:
    providers: [alpha]
  explore:
    providers: [local]
budgets:
  confirm_above: "100"
`, alpha.URL(), local.URL()))
	secrets := filepath.Join(dir, config.Dir, config.SecretsFileName)
	base, stop := startServe(t, dir, map[string]string{"LOCAL_KEY": localKey}, "--no-auth")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	// Each call says something new, so that none is answered from the
	// response cache (explore is read-only) and every one reaches its
	// provider.
	calls := 0
	call := func(agent string) (int, string) {
		calls++
		return postJSON(t, base, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi %d"}]}`, agent, calls))
	}
	lastKey := func() string {
		reqs := alpha.Requests()
		if len(reqs) == 0 {
			return ""
		}
		return reqs[len(reqs)-1].APIKey()
	}

	// A fresh install: alpha has no key, its calls fail saying why.
	if code, body := call("builder"); code != http.StatusServiceUnavailable || !strings.Contains(body, "unavailable") || !strings.Contains(body, "providers.alpha.credentials.api_key: environment variable ALPHA_KEY is not set") || !strings.Contains(body, "llm-config.yaml:7:16: ") {
		t.Fatalf("call to alpha without a key = %d %s", code, body)
	}
	if got := unavailableNow(t, base); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("/healthz unavailable = %v, want [alpha]", got)
	}

	// The key saved in the console's form is used by the very next call.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	consoleForm(t, hc, base, "alpha", url.Values{"cred.api_key": {key1}})
	alpha.Enqueue(anthropicfake.TextReply("alpha serves"))
	if code, body := call("builder"); code != http.StatusOK || !strings.Contains(body, "alpha serves") || lastKey() != key1 {
		t.Fatalf("call after saving alpha's key = %d %s (key sent: %q)", code, body, lastKey())
	}
	if got := unavailableNow(t, base); len(got) != 0 {
		t.Errorf("/healthz unavailable = %v after the key was saved", got)
	}

	// Rotation in the console while a call is under way: the next call
	// uses the new key, the one under way finishes.
	gate := make(chan struct{})
	alpha.Enqueue(anthropicfake.TextReply("slow answer").WithHold(gate))
	n := len(alpha.Requests())
	type result struct {
		code int
		body string
	}
	slow := make(chan result, 1)
	go func() {
		code, body := call("builder")
		slow <- result{code, body}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := alpha.WaitRequests(ctx, n+1); err != nil {
		t.Fatal(err)
	}
	consoleForm(t, hc, base, "alpha", url.Values{"cred.api_key": {key2}})
	if code, body := call("builder"); code != http.StatusOK || lastKey() != key2 {
		t.Fatalf("call after rotating alpha's key = %d %s (key sent: %q)", code, body, lastKey())
	}
	close(gate)
	if r := <-slow; r.code != http.StatusOK || !strings.Contains(r.body, "slow answer") {
		t.Errorf("the call under way when the key changed = %d %s", r.code, r.body)
	}
	if k := alpha.Requests()[n].APIKey(); k != key1 {
		t.Errorf("the call under way was sent with %q, want the key it started with", k)
	}

	// A key another process writes is used once the file is looked at.
	if err := config.OpenSecretsFile(secrets).Set("alpha", "api_key", key3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha's key written by another process", func() bool {
		code, _ := call("builder")
		return code == http.StatusOK && lastKey() == key3
	})

	// A file that is not JSON: alpha, which needs it, is unavailable with
	// the reason; local, whose key is in the environment, serves.
	if err := os.WriteFile(secrets, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha unavailable with an invalid secrets file", func() bool { return slices.Contains(unavailableNow(t, base), "alpha") })
	sent := len(alpha.Requests())
	for range 3 {
		if code, body := call("builder"); code != http.StatusServiceUnavailable || !strings.Contains(body, "is not valid JSON") {
			t.Fatalf("call to alpha with an invalid secrets file = %d %s", code, body)
		}
		if code, body := call("explore"); code != http.StatusOK || !strings.Contains(body, "echo") {
			t.Fatalf("call to local with an invalid secrets file = %d %s", code, body)
		}
	}
	if got := len(alpha.Requests()); got != sent {
		t.Errorf("alpha got %d calls while unavailable", got-sent)
	}

	// A file others can read is refused the same way; put right, alpha
	// serves again with the key in it.
	tmp := secrets + ".new"
	if err := os.WriteFile(tmp, []byte(`{"version":1,"providers":{"alpha":{"api_key":"`+key3+`"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := os.Rename(tmp, secrets); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha unavailable with a secrets file others can read", func() bool {
		code, body := call("builder")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "permissions too open") && strings.Contains(body, "chmod 600")
	})
	if code, _ := call("explore"); code != http.StatusOK {
		t.Errorf("local stopped serving with a secrets file others can read: %d", code)
	}
	if err := os.Chmod(secrets, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha available again", func() bool { return len(unavailableNow(t, base)) == 0 })
	if code, body := call("builder"); code != http.StatusOK || lastKey() != key3 {
		t.Errorf("call after the file was put right = %d %s (key sent: %q)", code, body, lastKey())
	}

	code, errs := stop()
	stopped = true
	if code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
	// Each change is said once, however many calls followed it.
	for _, want := range []string{"provider alpha is available: its credentials were saved in", "provider alpha: its credentials changed in", "is not valid JSON", "permissions too open"} {
		if n := strings.Count(errs, want); n == 0 {
			t.Errorf("serve did not say %q:\n%s", want, errs)
		}
	}
	if n := strings.Count(errs, "is not valid JSON"); n != 1 {
		t.Errorf("the invalid secrets file was logged %d times, want once:\n%s", n, errs)
	}
	for _, k := range []string{localKey, key1, key2, key3} {
		if strings.Contains(errs, k) {
			t.Error("serve logged a credential")
		}
	}
	if n := len(local.Requests()); n < 4 {
		t.Errorf("local got %d calls", n)
	}
}

// A secrets file that cannot be read is not an error of the whole
// configuration: config validate warns (exit 0) naming the provider that
// needed it and the file, doctor warns, and serve starts, its other
// providers serving, the one that needed the file unavailable with the
// reason in its 503 and /healthz.
func TestBadSecretsFileFailsOnlyItsProviders(t *testing.T) {
	const localKey = "sk-local-Qa8r"
	alpha, local := alphaAndLocal(t, localKey)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  alpha:
    type: anthropic
    base_url: %s
  local:
    type: openai_compatible
    profile: vllm
    base_url: %s/v1
    credentials:
      api_key: ${LOCAL_KEY}
  nokey:
    type: openai_compatible
    profile: ollama
    base_url: %s/v1
agents:
  builder:
    providers: [alpha]
  explore:
    providers: [local]
budgets:
  confirm_above: "100"
`, alpha.URL(), local.URL(), local.URL()))
	secrets := filepath.Join(dir, config.Dir, config.SecretsFileName)
	if err := os.MkdirAll(filepath.Dir(secrets), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secrets, []byte(`{"version":1,"providers":{"alpha":{"api_key":"sk-ant-Zz9`), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"LOCAL_KEY": localKey}

	code, out, errs := run(t, dir, vars, "config", "validate")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("validate with an invalid secrets file = %d %q %q", code, out, errs)
	}
	for _, want := range []string{"warning:", "llm-config.yaml:4:5: providers.alpha", secrets + " is not valid JSON", "provider alpha is unavailable"} {
		if !strings.Contains(errs, want) {
			t.Errorf("validate's warning lacks %q:\n%s", want, errs)
		}
	}
	// nokey needs no key, but may keep an optional one in the file: it
	// is not called with a key missing either.
	if !strings.Contains(errs, "provider nokey is unavailable") {
		t.Errorf("validate does not say nokey, which would read the file, is unavailable:\n%s", errs)
	}
	if strings.Contains(errs, "provider local is unavailable") {
		t.Errorf("validate says local, whose key is in the environment, is unavailable:\n%s", errs)
	}
	code, out, errs = run(t, dir, vars, "doctor")
	if !regexp.MustCompile(`warn\s+credentials\s+.*providers\.alpha: secrets file: .* is not valid JSON`).MatchString(out) {
		t.Errorf("doctor with an invalid secrets file = %d\n%s\n%s", code, out, errs)
	}

	base, stop := startServe(t, dir, vars, "--no-auth")
	if got := unavailableNow(t, base); !slices.Equal(got, []string{"alpha", "nokey"}) {
		t.Errorf("/healthz unavailable = %v, want [alpha nokey]", got)
	}
	if code, body := postJSON(t, base, "/v1/chat/completions", `{"model":"explore","messages":[{"role":"user","content":"hi"}]}`); code != http.StatusOK || !strings.Contains(body, "echo") {
		t.Errorf("call to local = %d %s", code, body)
	}
	if code, body := postJSON(t, base, "/v1/chat/completions", `{"model":"builder","messages":[{"role":"user","content":"hi"}]}`); code != http.StatusServiceUnavailable || !strings.Contains(body, "is not valid JSON") {
		t.Errorf("call to alpha = %d %s", code, body)
	}
	code, errs = stop()
	if code != 0 || !strings.Contains(errs, "provider alpha is unavailable") || strings.Contains(errs, "provider local is unavailable") {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
	if n := len(alpha.Requests()); n != 0 {
		t.Errorf("alpha got %d requests", n)
	}
	if strings.Contains(errs, "sk-ant-Zz9") || strings.Contains(errs, localKey) {
		t.Error("serve logged a credential")
	}
}
