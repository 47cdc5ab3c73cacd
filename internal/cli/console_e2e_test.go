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

// TestConsoleInBrowser drives the web console of a real 'cortexbuild
// serve' in headless Chromium: log in with a virtual key, enter a
// provider key, test the connection, make a call through the gateway and
// see the spend figure change.
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

	// Log in: the console sends the browser to its login form.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), key),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#p-local")),
	); err != nil {
		t.Fatalf("login: %v", err)
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
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"builder","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+callKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completion = %d", resp.StatusCode)
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
	for i, h := range html {
		if strings.Contains(h, localKey) || strings.Contains(h, testKey) || strings.Contains(h, key) {
			t.Errorf("page %d shows a secret", i)
		}
	}
}
