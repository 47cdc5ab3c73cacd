package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// browserPath finds headless Chromium: CHROME_PATH, else Debian's
// chromium on PATH. Without one the test is skipped locally and fails in
// CI, where .ci/run installs it.
func browserPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROME_PATH"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no browser for the console's end-to-end test: install Debian's chromium package (.ci/run does) or set CHROME_PATH")
	}
	t.Skip("skipping the console's end-to-end test: no chromium on PATH and CHROME_PATH unset (apt-get install chromium)")
	return ""
}

// screenshotDir is where the browser test saves a full-page PNG of each
// page it visits: $CORTEXBUILD_SCREENSHOTS (.ci/run sets it to
// .ci/artifacts/console-screenshots), else a temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CORTEXBUILD_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshots: %v", err)
	}
	return dir
}

// callGateway makes one Chat Completions call with key and returns the
// status.
func callGateway(t *testing.T, ctx context.Context, base, key string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"builder","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestConsoleInBrowser drives the web console of a real 'cortexbuild
// serve' in headless Chromium: log in with a virtual key, see the
// overview, enter a provider key, test the connection, make a call
// through the gateway and see the spend figures change, create an access
// key (its secret shown once), call with it, revoke it and see the call
// refused. It saves a screenshot of every page it visits.
func TestConsoleInBrowser(t *testing.T) {
	chrome := browserPath(t)
	const localKey = "sk-local-e2e-Hq3x9TzV"
	anth := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(anth.Close)
	local := openaifake.New(openaifake.WithFlavor(openaifake.FlavorVLLM), openaifake.WithAPIKey(localKey))
	t.Cleanup(local.Close)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
  local:
    type: openai_compatible
    profile: vllm
    base_url: %s/v1
routing:
  preference: [claude, local]
budgets:
  confirm_above: "100"
`, anth.URL(), local.URL()))
	code, out, errs := run(t, dir, nil, "serve", "keys", "create", "--name", "console", "--role", "admin")
	key := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("keys create = %d %s", code, errs)
	}
	code, out, errs = run(t, dir, nil, "serve", "keys", "create", "--name", "client")
	callKey := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("keys create = %d %s", code, errs)
	}
	// Two calls on task t1 cross 50 % and 80 % of its budget: the
	// overview lists both alerts.
	crossTwoThresholds(t, dir, anth)
	base, stop := startServe(t, dir, keyEnv)
	defer func() {
		if code, errs := stop(); code != 0 || strings.Contains(errs, localKey) || strings.Contains(errs, key) || strings.Contains(errs, callKey) {
			t.Errorf("serve exited with %d, or logged a key:\n%s", code, errs)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("headless", "new"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("password-store", "basic"),
		// Only 127.0.0.1 is reachable: every other host name fails to
		// resolve, and no proxy is used.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(1280, 900),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	text := func(sel string) string {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			t.Fatalf("waiting for %s: %v", sel, err)
		}
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return strings.Join(strings.Fields(s), " ")
	}
	var html []string
	page := func() {
		t.Helper()
		h, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		html = append(html, h)
	}
	shots := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot of %s: %v", name, err)
		}
		if len(png) < 8 || string(png[1:4]) != "PNG" {
			t.Fatalf("screenshot of %s: %d bytes, not a PNG", name, len(png))
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatalf("screenshot of %s: %v", name, err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Fatalf("screenshot of %s is empty or missing: %v", name, err)
		}
	}

	// Log in: the console sends the browser to its login form, then to
	// the overview.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
	); err != nil {
		t.Fatalf("login form: %v", err)
	}
	shot("login")
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS("#key"), key),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#spend-today")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	todayBefore := text("#spend-today")
	if s := text("#alerts"); !strings.Contains(s, "task:t1") || !strings.Contains(s, "80 %") || !strings.Contains(s, "50 %") {
		t.Errorf("alerts panel: %q", s)
	}
	if s := text("#o-local"); !strings.Contains(s, "never checked") {
		t.Errorf("overview of local before any check: %q", s)
	}
	page()
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#p-local"))); err != nil {
		t.Fatal(err)
	}
	if s := text("#s-local-api_key"); !strings.HasPrefix(s, "not set") {
		t.Fatalf("local's key before saving: %q", s)
	}
	if s := text("#s-claude-api_key"); !strings.Contains(s, "set environment variable MY_KEY") {
		t.Errorf("claude's key: %q", s)
	}
	// Without the key the connection test fails.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#test-local"))); err != nil {
		t.Fatal(err)
	}
	if s := text("#test-result-local .test-status"); s != "unhealthy" {
		t.Fatalf("test without a key: %q (%s)", s, text("#test-result-local"))
	}
	page()
	// Enter the key, save, and test again.
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS("#f-local-api_key"), localKey),
		chromedp.Click(chromedp.CSS("#save-local")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	); err != nil {
		t.Fatalf("saving the key: %v", err)
	}
	if s := text("#s-local-api_key"); !strings.HasPrefix(s, "set") || !strings.Contains(s, "secrets file") {
		t.Fatalf("local's key after saving: %q", s)
	}
	if typed, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS("#f-local-api_key"))); err != nil || typed != "" {
		t.Errorf("the key field is not empty after saving (%v)", err)
	}
	page()
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#test-local"))); err != nil {
		t.Fatal(err)
	}
	if s := text("#test-result-local .test-status"); s != "healthy" {
		t.Fatalf("test with the saved key: %q (%s)", s, text("#test-result-local"))
	}
	page()
	shot("provider-keys")
	st, err := os.Stat(filepath.Join(dir, config.Dir, config.SecretsFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v %v", err, st)
	}

	// Spend before and after a call through the gateway.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/console/spend")); err != nil {
		t.Fatal(err)
	}
	before := text("#month-total")
	anth.Enqueue(anthropicfake.TextReply("Hello through the gateway."))
	if code := callGateway(t, ctx, base, callKey); code != http.StatusOK {
		t.Fatalf("chat completion = %d", code)
	}
	if err := chromedp.Do(bctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	after := text("#month-total")
	b, _ := strconv.ParseFloat(before, 64)
	a, err := strconv.ParseFloat(after, 64)
	if err != nil || a <= b {
		t.Fatalf("spend figure: %q before, %q after the call", before, after)
	}
	page()
	if s := text("#invocations"); !strings.Contains(s, "claude/claude-sonnet-4-6: ok") {
		t.Errorf("recent invocations: %q", s)
	}
	shot("spend")

	// The overview's spend today counts the call.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#spend-today"))); err != nil {
		t.Fatal(err)
	}
	tb, _ := strconv.ParseFloat(todayBefore, 64)
	ta, err := strconv.ParseFloat(text("#spend-today"), 64)
	if err != nil || ta <= tb {
		t.Fatalf("spend today: %q before, %q after the call", todayBefore, text("#spend-today"))
	}
	page()
	shot("overview")

	// An agent the project does not have is refused, as by 'serve keys
	// create'.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/console/access"),
		chromedp.WaitVisible(chromedp.CSS("#k-name")),
		chromedp.SendKeys(chromedp.CSS("#k-agent"), "buidler"),
		chromedp.Click(chromedp.CSS("#create-submit")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	); err != nil {
		t.Fatalf("creating a key for an unknown agent: %v", err)
	}
	if s := text("#error"); !strings.Contains(s, `agent "buidler": unknown agent (did you mean "builder"?)`) {
		t.Errorf("a key for an unknown agent: %q", s)
	}
	// Create an access key: its secret is shown once, and it makes calls.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/console/access"),
		chromedp.WaitVisible(chromedp.CSS("#k-name")),
		chromedp.SendKeys(chromedp.CSS("#k-name"), "made in the browser"),
		chromedp.SendKeys(chromedp.CSS("#k-models"), "builder"),
		chromedp.Click(chromedp.CSS("#create-submit")),
		chromedp.WaitVisible(chromedp.CSS("#new-secret")),
	); err != nil {
		t.Fatalf("creating an access key: %v", err)
	}
	made, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS("#new-secret")))
	if err != nil || !strings.HasPrefix(made, "cbk_") {
		t.Fatalf("the new key's secret: %q %v", made, err)
	}
	// The screenshot, an artifact of CI, must not hold the secret either.
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.CSS("#new-secret"), "cbk_…_(the secret, left out of the screenshot)")); err != nil {
		t.Fatal(err)
	}
	shot("access-keys")
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#access-keys"))); err != nil {
		t.Fatal(err)
	}
	if h, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil || strings.Contains(h, made) || strings.Contains(h, `id="new-secret"`) {
		t.Errorf("the secret is still shown after a reload (%v)", err)
	}
	page()
	anth.Enqueue(anthropicfake.TextReply("Hello with the new key."))
	if code := callGateway(t, ctx, base, made); code != http.StatusOK {
		t.Fatalf("a call with the key made in the console = %d", code)
	}
	// Revoke it, answering the confirmation: calls with it are refused.
	madeID := keyIDOf(made)
	if err := chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`window.confirm = function (q) { window.asked = q; return true; }`),
		chromedp.Click(chromedp.CSS("#revoke-"+madeID)),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	); err != nil {
		t.Fatalf("revoking the key: %v", err)
	}
	if s := text("#k-" + madeID + " .revoked"); s == "active" || s == "" {
		t.Errorf("the revoked key's row says %q", s)
	}
	page()
	if code := callGateway(t, ctx, base, made); code != http.StatusUnauthorized {
		t.Errorf("a call with the revoked key = %d, want 401", code)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/console/access"), chromedp.WaitVisible(chromedp.CSS("#access-keys"))); err != nil {
		t.Fatal(err)
	}
	// The confirmation was asked before the form was sent (a new page
	// has no trace of it, so ask again without sending).
	if err := chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`window.confirm = function (q) { window.asked = q; return false; }`),
		chromedp.Click(chromedp.CSS("#revoke-"+keyIDOf(callKey))),
	); err != nil {
		t.Fatal(err)
	}
	asked, err := chromedp.Run(bctx, chromedp.Evaluate[string](`window.asked || ""`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(asked, "Revoke cbk_"+keyIDOf(callKey)) {
		t.Errorf("revoking asks %q", asked)
	}
	anth.Enqueue(anthropicfake.TextReply("Still served."))
	if code := callGateway(t, ctx, base, callKey); code != http.StatusOK {
		t.Error("a revocation declined in the confirmation revoked the key")
	}

	for _, p := range []struct{ name, path, sel string }{
		{"health", "/console/health", "#health"},
		{"control", "/console/control", "#consent"},
	} {
		if err := chromedp.Do(bctx, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.sel))); err != nil {
			t.Fatal(err)
		}
		page()
		shot(p.name)
	}
	for i, h := range html {
		if strings.Contains(h, localKey) || strings.Contains(h, testKey) || strings.Contains(h, key) || strings.Contains(h, callKey) || strings.Contains(h, made) {
			t.Errorf("page %d shows a secret", i)
		}
	}
	t.Logf("screenshots in %s", shots)
}

// keyIDOf is the public part of a virtual key.
func keyIDOf(token string) string {
	return strings.SplitN(strings.TrimPrefix(token, "cbk_"), "_", 2)[0]
}
