package cli

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Model calls and the console take separate keys, end to end through
// 'cortexbuild serve': a call key (the default role) makes calls and
// cannot log in to the console, which names the command that makes an
// admin key; an admin key logs in and makes no model calls.
func TestServeKeyRolesSeparateCallsFromTheConsole(t *testing.T) {
	dir, _ := fakeProject(t, true)
	code, out, errs := run(t, dir, nil, "serve", "keys", "create", "--name", "claude-code")
	callKey := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(errs, "created call key") {
		t.Fatalf("create = %d %q", code, errs)
	}
	code, out, errs = run(t, dir, nil, "serve", "keys", "create", "--name", "ops", "--role", "admin")
	adminKey := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(errs, "created admin key") {
		t.Fatalf("create --role admin = %d %q", code, errs)
	}
	for _, args := range [][]string{{"--role", "root"}, {"--role", "admin", "--agent", "builder"}, {"--role", "admin", "--models", "builder"}, {"--models", "biulder"}} {
		if code, _, errs := run(t, dir, nil, append([]string{"serve", "keys", "create"}, args...)...); code != ExitUsage {
			t.Errorf("create %v = %d %q, want a usage error", args, code, errs)
		}
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "create", "--models", "biulder"); !strings.Contains(errs, `did you mean "builder"`) {
		t.Errorf("a misspelt --models name = %d %q, want a did-you-mean", code, errs)
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "create", "--name", "ci", "--models", "builder,explore"); code != 0 || !strings.Contains(errs, "models builder, explore") {
		t.Errorf("create --models = %d %q", code, errs)
	}
	if code, out, _ := run(t, dir, nil, "serve", "keys", "list"); code != 0 || !regexp.MustCompile(`claude-code\s+call\b`).MatchString(out) || !regexp.MustCompile(`ops\s+admin\b`).MatchString(out) {
		t.Errorf("list does not show the roles:\n%s", out)
	}

	base, stop := startServe(t, dir, keyEnv)
	defer func() {
		if code, errs := stop(); code != 0 || strings.Contains(errs, callKey) || strings.Contains(errs, adminKey) {
			t.Errorf("serve exited with %d, or logged a key:\n%s", code, errs)
		}
	}()
	login := func(key string) (int, string) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(base + "/console/login")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
		if m == nil {
			t.Fatalf("login page without a form token (%d):\n%s", resp.StatusCode, page)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/console/login", strings.NewReader(url.Values{"csrf": {string(m[1])}, "key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err = c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := login(callKey); st != http.StatusForbidden || !strings.Contains(body, "cortexbuild serve keys create --role admin") {
		t.Errorf("console login with a call key = %d, want 403 naming the command:\n%s", st, body)
	}
	if st, body := login(adminKey); st != http.StatusSeeOther {
		t.Errorf("console login with an admin key = %d:\n%s", st, body)
	}
	call := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"builder","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := call(adminKey); st != http.StatusBadRequest {
		t.Errorf("model call with an admin key = %d, want 400", st)
	}
}
