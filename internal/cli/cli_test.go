package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/provider"
)

const testKey = "sk-ant-test-DO-NOT-PRINT-0123456789"

// run executes the CLI in dir with env vars vars and returns exit code,
// stdout and stderr.
func run(t *testing.T, dir string, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runWith(t, nil, dir, vars, args...)
}

// runWith is run with a hook that adjusts the environment first (for
// example the locality gate's resolver and dialer).
func runWith(t *testing.T, hook func(*env), dir string, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	// The search for a project does not enter the temporary directory
	// that holds the tests' t.TempDir()s: a .cortexbuild/ or .git left
	// there or above by anything else is never a test's project.
	if _, ok := vars[config.CeilingEnv]; !ok {
		vars = maps.Clone(vars)
		if vars == nil {
			vars = map[string]string{}
		}
		vars[config.CeilingEnv] = os.TempDir()
	}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, wd: dir, registry: builtin.Registry(),
		getenv:    func(k string) string { return vars[k] },
		lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	if hook != nil {
		hook(e)
	}
	code := e.run(context.Background(), args)
	for _, s := range []string{out.String(), errb.String()} {
		if strings.Contains(s, testKey) {
			t.Fatalf("a secret was printed by %v:\n%s", args, s)
		}
	}
	return code, out.String(), errb.String()
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, config.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.Dir, config.FileName), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, t.TempDir(), nil, "version", "--json")
	var v versionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.PriceCatalog == "" || v.Go == "" {
		t.Fatalf("version --json = %d %q", code, out)
	}
	code, out, _ = run(t, t.TempDir(), nil, "version")
	if code != 0 || !strings.HasPrefix(out, "cortexbuild ") || !strings.Contains(out, "price catalog "+v.PriceCatalog) {
		t.Errorf("version = %d %q", code, out)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"version", "--nope"}, {"version", "extra"}} {
		if code, _, errs := run(t, t.TempDir(), nil, args...); code != ExitUsage || !strings.HasPrefix(errs, "cortexbuild: ") {
			t.Errorf("%v: code %d, stderr %q", args, code, errs)
		}
	}
}

func TestInitThenValidate(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := run(t, dir, nil, "init")
	if code != 0 || !strings.Contains(out, "wrote ") {
		t.Fatalf("init = %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, config.Dir, "llm-config.schema.json")); err != nil {
		t.Errorf("schema not written: %v", err)
	}
	// The machine's state, secrets included, is kept out of version control;
	// the configuration is not.
	ignore, err := os.ReadFile(filepath.Join(dir, config.Dir, ".gitignore"))
	for _, want := range []string{"secrets.json", "gateway-keys.json", "*.lock", "state.db", "journal/"} {
		if err != nil || !strings.Contains(string(ignore), want) {
			t.Errorf(".cortexbuild/.gitignore lacks %s: %q, %v", want, ignore, err)
		}
	}
	if strings.Contains(string(ignore), "llm-config.yaml") {
		t.Error(".cortexbuild/.gitignore hides the configuration")
	}
	// A project's own .gitignore is kept.
	if err := os.WriteFile(filepath.Join(dir, config.Dir, ".gitignore"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, dir, nil, "init", "--force"); code != 0 {
		t.Fatalf("init --force = %d %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, config.Dir, ".gitignore")); string(b) != "mine\n" {
		t.Errorf("init replaced the project's .gitignore: %q", b)
	}
	// A second init refuses to overwrite.
	if code, _, errs := run(t, dir, nil, "init"); code != ExitFailure || !strings.Contains(errs, "--force") {
		t.Errorf("second init = %d %q", code, errs)
	}
	vars := map[string]string{"ANTHROPIC_API_KEY": testKey}
	code, out, errs = run(t, dir, vars, "config", "validate")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("validate starter = %d %q %q", code, out, errs)
	}
	// Without the key the starter's ${ANTHROPIC_API_KEY} reference is reported at its line.
	code, _, errs = run(t, dir, nil, "config", "validate")
	if code != ExitConfig || !strings.Contains(errs, "llm-config.yaml:") || !strings.Contains(errs, "ANTHROPIC_API_KEY is not set") {
		t.Errorf("validate without key = %d %q", code, errs)
	}
	if code, _, _ := run(t, dir, nil, "config", "validate", "--skip-env"); code != 0 {
		t.Errorf("--skip-env = %d", code)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	dir := writeConfig(t, "budgets:\n  task: \"-1\"\nlocality:\n  mode: offline\nagents:\n  critc: {}\n")
	code, _, errs := run(t, dir, nil, "config", "validate")
	if code != ExitConfig {
		t.Fatalf("code = %d", code)
	}
	for _, want := range []string{"llm-config.yaml:2:9: budgets.task must not be negative", "llm-config.yaml:4:9: locality.mode", `unknown agent "critc" (did you mean "critic"?)`} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	code, out, _ := run(t, dir, nil, "config", "validate", "--json")
	var res validation
	if code != ExitConfig || json.Unmarshal([]byte(out), &res) != nil || res.Valid || len(res.Errors) != 3 {
		t.Errorf("--json = %d %s", code, out)
	}
	if code, _, errs := run(t, t.TempDir(), nil, "config", "validate"); code != ExitConfig || !strings.Contains(errs, "cortexbuild init") {
		t.Errorf("no config = %d %q", code, errs)
	}
}

func TestConfigSchemaMatchesPackage(t *testing.T) {
	code, out, _ := run(t, t.TempDir(), nil, "config", "schema")
	want, _ := config.Schema()
	if code != 0 || out != string(want) {
		t.Errorf("config schema differs from config.Schema()")
	}
}

func TestPricingShow(t *testing.T) {
	code, out, _ := run(t, t.TempDir(), nil, "pricing", "show")
	if code != 0 || !strings.Contains(out, "claude-sonnet-4-6") || !strings.Contains(out, "gpt-5-mini") || !strings.Contains(out, "local models are free") {
		t.Errorf("pricing show = %d\n%s", code, out)
	}
	code, out, _ = run(t, t.TempDir(), nil, "pricing", "show", "--model", "claude-sonnet-4-5")
	if code != 0 || !strings.Contains(out, ">200000") || !strings.Contains(out, "22.50") {
		t.Errorf("--model = %d\n%s", code, out)
	}
	code, out, _ = run(t, t.TempDir(), nil, "pricing", "show", "--provider", "gemini", "--json")
	var doc struct {
		Models []struct{ Namespace, Model string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Models) == 0 {
		t.Fatalf("--json = %d %s", code, out)
	}
	for _, m := range doc.Models {
		if m.Namespace != "gemini" {
			t.Errorf("--provider gemini listed %s/%s", m.Namespace, m.Model)
		}
	}
	if code, _, errs := run(t, t.TempDir(), nil, "pricing", "show", "--model", "sonnet-4-6"); code != ExitFailure || !strings.Contains(errs, "claude-sonnet-4-6") {
		t.Errorf("unknown model = %d %q", code, errs)
	}
}

func TestPricingShowUsesProjectCatalog(t *testing.T) {
	dir := writeConfig(t, "pricing:\n  catalog_files: [prices.yaml]\n")
	extra := "version: \"p1\"\ncurrency: USD\nunit: per_million_tokens\nproviders:\n  openai:\n    models:\n      acme-coder:\n        context_window: 1000\n        max_output_tokens: 100\n        source: contract\n        prices:\n          - {effective: \"2026-01-01\", input: \"7\", output: \"9\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "prices.yaml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, dir, nil, "pricing", "show", "--model", "acme-coder")
	if code != 0 || !strings.Contains(out, "7.00") {
		t.Errorf("overlay = %d %q %q", code, out, errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "prices.yaml"), []byte("version: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, dir, nil, "pricing", "show"); code != ExitConfig || !strings.Contains(errs, "prices.yaml:1:1: missing required key") {
		t.Errorf("bad catalog file = %d %q", code, errs)
	}
}

func TestProvidersListNeverPrintsSecrets(t *testing.T) {
	dir := writeConfig(t, "providers:\n  claude:\n    type: anthropic\n    credentials:\n      api_key: ${MY_KEY}\n")
	code, out, errs := run(t, dir, map[string]string{"MY_KEY": testKey}, "providers", "list")
	if code != 0 || !strings.Contains(out, "claude") || !strings.Contains(out, "api_key set (${MY_KEY})") {
		t.Errorf("providers list = %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, dir, nil, "providers", "list", "--json")
	if code != 0 || !strings.Contains(out, `"set": false`) {
		t.Errorf("--json without key = %d %s", code, out)
	}
	var doc struct {
		AdapterTypes []provider.Registration `json:"adapter_types"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.AdapterTypes) != len(builtin.Registrations()) {
		t.Errorf("adapter types = %v %v", doc.AdapterTypes, err)
	}
}

// config validate warns about a readable file that holds a secret inline,
// naming the file and the fix, and stops once the file is private.
func TestValidateWarnsAboutReadableInlineSecrets(t *testing.T) {
	dir := writeConfig(t, "providers:\n  claude:\n    type: anthropic\n    credentials:\n      api_key: sk-ant-inline-literal\n")
	path := filepath.Join(dir, config.Dir, config.FileName)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, dir, nil, "config", "validate")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("validate = %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "warning: "+path+": mode 0644") || !strings.Contains(errs, "chmod 600 "+path) || !strings.Contains(errs, "${ENV_VAR}") {
		t.Errorf("no permission warning naming the file and the fix:\n%s", errs)
	}
	if strings.Contains(out+errs, "sk-ant-inline-literal") {
		t.Errorf("the secret was printed:\n%s%s", out, errs)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, errs := run(t, dir, nil, "config", "validate"); strings.Contains(errs, "lets group or others read it") {
		t.Errorf("a private file still warns:\n%s", errs)
	}
}
