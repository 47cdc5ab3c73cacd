package cli

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// missingCredProject writes a project with two providers: alpha (first
// in the default alphabetical preference) whose ${ALPHA_KEY} is not set
// in keyEnv, and claude whose ${MY_KEY} is.
func missingCredProject(t *testing.T) (dir string, alpha, claude *anthropicfake.Server) {
	t.Helper()
	alpha = anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(alpha.Close)
	claude = anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(claude.Close)
	dir = writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  alpha:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${ALPHA_KEY}
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
budgets:
  confirm_above: "100"
`, alpha.URL(), claude.URL()))
	return dir, alpha, claude
}

// An unset credential fails only the provider that needs it: the CLI
// routes around it, saying why, and the checks name the variable.
func TestMissingCredentialFailsOnlyItsProvider(t *testing.T) {
	dir, alpha, claude := missingCredProject(t)
	claude.Enqueue(anthropicfake.TextReply("served by claude"))
	code, out, errs := run(t, dir, keyEnv, "invoke", "--agent", "builder", "hi")
	if code != 0 || !strings.Contains(out, "served by claude") {
		t.Fatalf("invoke with alpha's key unset = %d %q %q", code, out, errs)
	}
	if !strings.Contains(errs, "provider alpha is unavailable") || !strings.Contains(errs, "ALPHA_KEY is not set") {
		t.Errorf("invoke does not say why alpha is unavailable:\n%s", errs)
	}
	if n := len(alpha.Requests()); n != 0 {
		t.Errorf("alpha, without its key, got %d requests", n)
	}

	code, out, errs = run(t, dir, keyEnv, "route", "--agent", "builder", "--explain")
	if code != 0 || !strings.Contains(out, "alpha") || !strings.Contains(out, "unavailable: ") || !strings.Contains(out, "ALPHA_KEY is not set") {
		t.Errorf("route --explain = %d\n%s\n%s", code, out, errs)
	}

	// validate: a warning naming the provider, the variable and the fix;
	// exit 0 while another provider can serve.
	code, out, errs = run(t, dir, keyEnv, "config", "validate")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("validate with one provider's key unset = %d %q %q", code, out, errs)
	}
	for _, want := range []string{"warning:", "providers.alpha.credentials.api_key", "ALPHA_KEY is not set", "export ALPHA_KEY=", "provider alpha is unavailable"} {
		if !strings.Contains(errs, want) {
			t.Errorf("validate's warning lacks %q:\n%s", want, errs)
		}
	}
	// With no provider left it is an error (exit 3), as are real errors.
	if code, _, errs := run(t, dir, nil, "config", "validate"); code != ExitConfig || !strings.Contains(errs, "ALPHA_KEY is not set") || !strings.Contains(errs, "MY_KEY is not set") {
		t.Errorf("validate with no key at all = %d %q", code, errs)
	}

	// doctor: a warning while another provider can serve, a failure
	// when none can.
	code, out, errs = run(t, dir, keyEnv, "doctor")
	if !regexp.MustCompile(`warn\s+credentials\s+\S+ providers\.alpha\.credentials\.api_key: environment variable ALPHA_KEY is not set`).MatchString(out) {
		t.Errorf("doctor does not warn about the missing variable = %d\n%s\n%s", code, out, errs)
	}
	if _, out, _ := run(t, dir, nil, "doctor"); !regexp.MustCompile(`fail\s+credentials\s+.*ALPHA_KEY is not set.*MY_KEY is not set`).MatchString(out) {
		t.Errorf("doctor with no key at all:\n%s", out)
	}

	code, out, _ = run(t, dir, keyEnv, "providers", "health", "--json")
	if !strings.Contains(out, `"kind": "config"`) || !strings.Contains(out, "ALPHA_KEY") {
		t.Errorf("health = %d\n%s", code, out)
	}
	if strings.Contains(out+errs, testKey) {
		t.Error("a credential was printed")
	}
}

// serve starts on a fresh install with no key at all, and with one
// provider's key missing serves on the other; a key saved in the secrets
// file (the console's key form) makes the provider available on the next
// start.
func TestServeStartsWithAProviderMissingItsKey(t *testing.T) {
	dir, alpha, claude := missingCredProject(t)
	_, stop := startServe(t, dir, nil)
	if code, errs := stop(); code != 0 || !strings.Contains(errs, "provider alpha is unavailable") || !strings.Contains(errs, "provider claude is unavailable") {
		t.Errorf("serve without any key exited %d:\n%s", code, errs)
	}

	_, out, _ := run(t, dir, keyEnv, "serve", "keys", "create", "--name", "tests")
	key := strings.TrimSpace(out)
	chat := func(base string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		oc := openai.NewClient(ooption.WithBaseURL(base+"/v1/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0), ooption.WithHTTPClient(&http.Client{}))
		cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if err != nil {
			return "", err
		}
		return cc.Choices[0].Message.Content, nil
	}

	base, stop := startServe(t, dir, keyEnv)
	claude.Enqueue(anthropicfake.TextReply("claude serves"))
	if got, err := chat(base); err != nil || got != "claude serves" {
		t.Errorf("chat with alpha unavailable = %q, %v", got, err)
	}
	if code, errs := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
	if n := len(alpha.Requests()); n != 0 {
		t.Errorf("alpha, without its key, got %d requests", n)
	}

	if err := config.OpenSecretsFile(filepath.Join(dir, config.Dir, config.SecretsFileName)).Set("alpha", "api_key", testKey); err != nil {
		t.Fatal(err)
	}
	base, stop = startServe(t, dir, keyEnv)
	alpha.Enqueue(anthropicfake.TextReply("alpha serves"))
	if got, err := chat(base); err != nil || got != "alpha serves" {
		t.Errorf("chat after saving alpha's key = %q, %v", got, err)
	}
	if code, errs := stop(); code != 0 || strings.Contains(errs, "provider alpha is unavailable") || strings.Contains(errs, testKey) {
		t.Errorf("serve with alpha's saved key exited %d:\n%s", code, errs)
	}
}
