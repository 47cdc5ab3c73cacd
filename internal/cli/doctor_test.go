package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

// fakeHostCLI writes an executable shell script called name into dir.
func fakeHostCLI(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func hostPins(t *testing.T) map[string]hostversions.Tool {
	t.Helper()
	p, err := hostversions.Default()
	if err != nil {
		t.Fatalf("built-in pins: %v", err)
	}
	m := map[string]hostversions.Tool{}
	for _, tool := range p.Tools {
		m[tool.Name] = tool
	}
	for _, want := range []string{"gh", "claude", "codex", "copilot"} {
		if _, ok := m[want]; !ok {
			t.Fatalf("the built-in pins lack %s", want)
		}
	}
	return m
}

func runDoctor(t *testing.T, hook func(*env), dir string, vars map[string]string, args ...string) (int, doctorReport, string) {
	t.Helper()
	code, out, errs := runWith(t, hook, dir, vars, append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json printed %q (stderr %q): %v", out, errs, err)
	}
	if rep.OK != (code == ExitOK) {
		t.Errorf("ok=%v but exit %d", rep.OK, code)
	}
	return code, rep, errs
}

func checkNamed(t *testing.T, rep doctorReport, name string) doctorCheck {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, rep.Checks)
	return doctorCheck{}
}

func TestDoctorComparesHostCLIsWithThePins(t *testing.T) {
	pins := hostPins(t)
	bin := t.TempDir()
	fakeHostCLI(t, bin, "gh", "echo 'gh version "+pins["gh"].Version+" (2026-09-30)'; echo 'https://github.com/cli/cli/releases/tag/v"+pins["gh"].Version+"'")
	fakeHostCLI(t, bin, "claude", "echo '2.0.1 (Claude Code)'")
	fakeHostCLI(t, bin, "copilot", "echo 'GitHub Copilot CLI "+pins["copilot"].Version+".'; echo \"Run 'copilot update' to check for updates.\"")
	// codex is not installed.
	vars := map[string]string{"PATH": bin}
	dir := t.TempDir()

	code, rep, _ := runDoctor(t, nil, dir, vars)
	if code != ExitOK || rep.Mode != "rendered" {
		t.Errorf("doctor = %d, mode %q: %+v", code, rep.Mode, rep.Checks)
	}
	if c := checkNamed(t, rep, "host gh"); c.Status != checkOK || !strings.Contains(c.Detail, pins["gh"].Version) || c.Fix != "" {
		t.Errorf("gh = %+v", c)
	}
	if c := checkNamed(t, rep, "host claude"); c.Status != checkWarn || !strings.Contains(c.Detail, "2.0.1") ||
		!strings.Contains(c.Detail, "pinned "+pins["claude"].Version) || !strings.Contains(c.Fix, pins["claude"].Install) {
		t.Errorf("claude = %+v", c)
	}
	if c := checkNamed(t, rep, "host codex"); c.Status != checkWarn || !strings.Contains(c.Detail, "not on PATH") || c.Fix == "" {
		t.Errorf("codex = %+v", c)
	}
	if c := checkNamed(t, rep, "host copilot"); c.Status != checkOK || !strings.Contains(c.Detail, "Copilot CLI "+pins["copilot"].Version+" (pinned)") || c.Fix != "" {
		t.Errorf("copilot = %+v", c)
	}
	if c := checkNamed(t, rep, "config"); c.Status != checkOK || !strings.Contains(c.Detail, "rendered mode") {
		t.Errorf("config = %+v", c)
	}
	if c := checkNamed(t, rep, "store"); c.Status != checkOK || !strings.Contains(c.Detail, "will be created") {
		t.Errorf("store = %+v", c)
	}
	if _, err := os.Stat(filepath.Join(dir, ".cortexbuild")); err == nil {
		t.Error("doctor created .cortexbuild/")
	}
	if c := checkNamed(t, rep, "rendered files"); c.Status != checkWarn || c.Fix != "cortexbuild render" {
		t.Errorf("rendered files = %+v", c)
	}

	// --strict: a host CLI off its pin is a failure.
	if code, rep, _ := runDoctor(t, nil, dir, vars, "--strict"); code != ExitFailure || checkNamed(t, rep, "host claude").Status != checkFail {
		t.Errorf("--strict = %d %+v", code, rep.Checks)
	}

	// The text form: one line per check, a fix under each that is not ok.
	code, out, errs := runWith(t, nil, dir, vars, "doctor")
	if code != ExitOK || !strings.Contains(out, "ok    host gh") || !strings.Contains(out, "warn  host claude") || !strings.Contains(out, "fix: install Claude Code") {
		t.Errorf("doctor = %d\n%s\n%s", code, out, errs)
	}
}

func TestDoctorHostCLIFailures(t *testing.T) {
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Skip("skipped: no tail(1) on PATH to build a host CLI that never answers")
	}
	bin := t.TempDir()
	fakeHostCLI(t, bin, "gh", "exec "+tail+" -f /dev/null") // never answers
	fakeHostCLI(t, bin, "claude", "echo 'segmentation fault' >&2; exit 3")
	fakeHostCLI(t, bin, "codex", "echo 'codex-cli (development build)'")
	code, rep, _ := runDoctor(t, nil, t.TempDir(), map[string]string{"PATH": bin}, "--exec-timeout", "300ms", "--strict")
	if code != ExitFailure {
		t.Errorf("doctor --strict = %d", code)
	}
	for name, want := range map[string]string{"host gh": "did not answer within 300ms", "host claude": "failed: exit status 3", "host codex": "printed no version"} {
		if c := checkNamed(t, rep, name); c.Status != checkFail || !strings.Contains(c.Detail, want) || c.Fix == "" {
			t.Errorf("%s = %+v, want fail with %q", name, c, want)
		}
	}
	// An empty PATH finds nothing; a custom pins file is honoured.
	pins := filepath.Join(t.TempDir(), "pins.yaml")
	os.WriteFile(pins, []byte("tools:\n  - name: mytool\n    title: My Tool\n    version: 1.2.3\n    version_command: [mytool, version]\n    install: get it\n"), 0o644)
	fakeHostCLI(t, bin, "mytool", `[ "$1" = version ] && echo 'mytool v1.2.3'`)
	code, rep, _ = runDoctor(t, nil, t.TempDir(), map[string]string{"PATH": bin}, "--versions", pins, "--strict")
	if c := checkNamed(t, rep, "host mytool"); code != ExitOK || c.Status != checkOK {
		t.Errorf("custom pins = %d %+v", code, rep.Checks)
	}
	os.WriteFile(pins, []byte("tools:\n  - name: mytool\n    title: My Tool\n    version: ^1.2\n    version_command: [other]\n    install: x\n"), 0o644)
	if code, rep, _ := runDoctor(t, nil, t.TempDir(), nil, "--versions", pins); code != ExitFailure || !strings.Contains(checkNamed(t, rep, "host CLIs").Detail, "not an exact") {
		t.Errorf("bad pins = %d %+v", code, rep.Checks)
	}
}

func TestDoctorProjectSetup(t *testing.T) {
	g := &egress{}
	// An invalid configuration fails.
	dir := writeConfig(t, "locality:\n  mode: offline\n")
	code, rep, _ := runDoctor(t, g.hook, dir, nil)
	if c := checkNamed(t, rep, "config"); code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Fix, "config validate") {
		t.Errorf("invalid config = %d %+v", code, c)
	}

	// Orchestration on: a remote provider without consent fails; its
	// missing key is a warning (it is unavailable, the local one serves);
	// a loopback one needs no consent.
	dir = writeConfig(t, `orchestration: true
providers:
  remote:
    type: anthropic
    base_url: https://api.remote.test
    credentials:
      api_key: ${MY_KEY}
  local:
    type: openai_compatible
    profile: ollama
`)
	code, rep, _ = runDoctor(t, g.hook, dir, nil)
	if code != ExitFailure || rep.Mode != "orchestration" {
		t.Fatalf("doctor = %d %s", code, rep.Mode)
	}
	if c := checkNamed(t, rep, "credentials"); c.Status != checkWarn || !strings.Contains(c.Detail, "MY_KEY") {
		t.Errorf("credentials = %+v", c)
	}
	if c := checkNamed(t, rep, "consent remote"); c.Status != checkFail || c.Fix != "cortexbuild consent grant remote" {
		t.Errorf("consent remote = %+v", c)
	}
	if c := checkNamed(t, rep, "consent local"); c.Status != checkOK || !strings.Contains(c.Detail, "127.0.0.1:11434") {
		t.Errorf("consent local = %+v", c)
	}
	if c := checkNamed(t, rep, "rendered files"); c.Status != checkOK {
		t.Errorf("rendered files in orchestration mode = %+v", c)
	}
	if code, _, _ := runWith(t, g.hook, dir, nil, "consent", "grant", "remote", "--by", "alice"); code != ExitOK {
		t.Fatalf("grant = %d", code)
	}
	code, rep, _ = runDoctor(t, g.hook, dir, map[string]string{"MY_KEY": testKey})
	if code != ExitOK || !strings.Contains(checkNamed(t, rep, "consent remote").Detail, "alice") {
		t.Errorf("with key and consent = %d %+v", code, rep.Checks)
	}
	if c := checkNamed(t, rep, "store"); c.Status != checkOK {
		t.Errorf("store = %+v", c)
	}
	if len(g.dials) != 0 {
		t.Errorf("doctor opened connections: %v", g.dials)
	}

	// Rendered mode: the same problems are warnings.
	dir = writeConfig(t, "locality:\n  mode: local-only\nproviders:\n  remote:\n    type: anthropic\n    base_url: https://api.remote.test\n")
	code, rep, _ = runDoctor(t, g.hook, dir, nil)
	if c := checkNamed(t, rep, "consent remote"); code != ExitOK || c.Status != checkWarn || !strings.Contains(c.Detail, "local-only") {
		t.Errorf("local-only, rendered mode = %d %+v", code, c)
	}
}

func TestDoctorStoreUnreachableNeverPrintsTheDSN(t *testing.T) {
	dir := writeConfig(t, "store:\n  backend: postgres\n  dsn: ${PGDSN}\n")
	const pw = "S3CRET-PASSWORD-42"
	vars := map[string]string{"PGDSN": "postgres://cortex:" + pw + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"}
	code, out, errs := runWith(t, nil, dir, vars, "doctor")
	noSecrets(t, "doctor output", out+errs, pw)
	if code != ExitFailure || !strings.Contains(out, "fail  store") || !strings.Contains(out, "start PostgreSQL or correct store.dsn") {
		t.Errorf("doctor = %d\n%s\n%s", code, out, errs)
	}
}

func TestDoctorRenderedFiles(t *testing.T) {
	dir := t.TempDir()
	if code, out, errs := run(t, dir, nil, "render"); code != ExitOK {
		t.Fatalf("render = %d\n%s\n%s", code, out, errs)
	}
	code, rep, _ := runDoctor(t, nil, dir, nil)
	if c := checkNamed(t, rep, "rendered files"); code != ExitOK || c.Status != checkOK || !strings.Contains(c.Detail, "up to date") {
		t.Errorf("after render = %d %+v", code, c)
	}
	agents := filepath.Join(dir, "AGENTS.md")
	data, err := os.ReadFile(agents)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(agents, append(data, "\nedited by hand\n"...), 0o644)
	code, rep, _ = runDoctor(t, nil, dir, nil)
	if c := checkNamed(t, rep, "rendered files"); code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Detail, "AGENTS.md") || !strings.Contains(c.Fix, "cortexbuild render") {
		t.Errorf("after a hand edit = %d %+v", code, c)
	}
}
