package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/render"
)

func TestRenderCommand(t *testing.T) {
	dir := t.TempDir()
	// No llm-config.yaml and no key: rendered mode needs neither.
	code, out, errs := run(t, dir, nil, "render")
	if code != ExitOK || errs != "" {
		t.Fatalf("render = %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"create    AGENTS.md", "create    .codex/agents/critic.toml", "create    .github/agents/cortex-explore.agent.md", "rendered claude, codex, copilot, cursor", "43 created"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"AGENTS.md", "CLAUDE.md", ".claude/agents/critic.md", ".cursor/agents/critic.md", render.ManifestPath} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}

	// --check: up to date.
	if code, out, _ := run(t, dir, nil, "render", "--check"); code != ExitOK || !strings.Contains(out, "up to date: 43 files") {
		t.Errorf("--check on a fresh render = %d %q", code, out)
	}

	// A hand edit: --check exits 1 and lists it; render refuses; --force overwrites.
	critic := filepath.Join(dir, ".claude", "agents", "critic.md")
	if err := os.WriteFile(critic, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, ".codex", "agents", "planner.toml"))
	code, out, errs = run(t, dir, nil, "render", "--check")
	if code != ExitFailure || !strings.Contains(out, "edited    .claude/agents/critic.md (edited by hand") || !strings.Contains(out, "missing   .codex/agents/planner.toml") || !strings.Contains(errs, "2 file(s) differ") {
		t.Errorf("--check after edits = %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = run(t, dir, nil, "render")
	if code != ExitFailure || !strings.Contains(errs, ".claude/agents/critic.md: edited by hand") || !strings.Contains(errs, "--force") {
		t.Errorf("render over an edited file = %d %q", code, errs)
	}
	if b, _ := os.ReadFile(critic); string(b) != "edited\n" {
		t.Error("refused render overwrote the edited file")
	}
	code, out, _ = run(t, dir, nil, "render", "--dry-run")
	if code != ExitFailure || !strings.Contains(out, "would refuse    .claude/agents/critic.md") || !strings.Contains(out, "would create    .codex/agents/planner.toml") {
		t.Errorf("--dry-run = %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".codex", "agents", "planner.toml")); err == nil {
		t.Error("--dry-run wrote a file")
	}
	code, out, _ = run(t, dir, nil, "render", "--force")
	if code != ExitOK || !strings.Contains(out, "overwrite .claude/agents/critic.md") {
		t.Errorf("--force = %d\n%s", code, out)
	}
	if code, _, _ := run(t, dir, nil, "render", "--check"); code != ExitOK {
		t.Errorf("--check after --force = %d", code)
	}

	// --json.
	code, out, _ = run(t, dir, nil, "render", "--check", "--json")
	var rep renderReport
	if code != ExitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.UpToDate || rep.Mode != "check" || len(rep.Actions) != 43 {
		t.Errorf("--check --json = %d %s", code, out)
	}

	// From a subdirectory, render finds the project by its .cortexbuild directory.
	sub := filepath.Join(dir, "internal", "pkg")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, sub, nil, "render", "--check"); code != ExitOK || !strings.Contains(out, "up to date") {
		t.Errorf("--check from a subdirectory = %d %q", code, out)
	}

	// --clean removes everything render wrote, and only that.
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, dir, nil, "render", "--clean")
	if code != ExitOK || !strings.Contains(out, "remove    AGENTS.md") || !strings.Contains(out, "remove    "+render.ManifestPath) {
		t.Errorf("--clean = %d\n%s", code, out)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != "README.md,internal" {
		t.Errorf("after --clean the project holds %v", left)
	}
}

func TestRenderCommandTargets(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := run(t, dir, nil, "render", "--target", "codex,claude")
	if code != ExitOK || !strings.Contains(out, "rendered claude, codex in") {
		t.Fatalf("--target codex,claude = %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".github")); err == nil {
		t.Error("--target codex,claude wrote Copilot files")
	}
	for _, args := range [][]string{
		{"render", "--target", "vscode"},
		{"render", "--target", ""},
		{"render", "--target", "claude,windsurf"},
	} {
		code, _, errs := run(t, dir, nil, args...)
		if code != ExitUsage || !strings.Contains(errs, "valid targets: claude, codex, copilot, cursor, or all") {
			t.Errorf("%v = %d %q", args, code, errs)
		}
	}
	for _, args := range [][]string{
		{"render", "--check", "--clean"},
		{"render", "--check", "--force"},
		{"render", "--check", "--dry-run"},
		{"render", "extra"},
	} {
		if code, _, errs := run(t, dir, nil, args...); code != ExitUsage {
			t.Errorf("%v = %d %q, want a usage error", args, code, errs)
		}
	}
}

func TestRenderCommandBadSources(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, ".cortexbuild", "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agents, "critic.md"), []byte("---\nmodels:\n  codex: gpt-6.2-sol\n  cursr: gpt-5\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, dir, nil, "render")
	if code != ExitConfig || !strings.Contains(errs, `.cortexbuild/agents/critic.md:4:3: unknown key "cursr" in models (did you mean "cursor"?)`) {
		t.Errorf("unknown key = %d %q", code, errs)
	}
	if err := os.WriteFile(filepath.Join(agents, "critic.md"), []byte("---\nmodels:\n  codex: gpt-6.2-sol\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = run(t, dir, nil, "render", "--check")
	if code != ExitConfig || !strings.Contains(errs, `.cortexbuild/agents/critic.md:3:10: models.codex: on Codex CLI the critic and the planner would both run on "gpt-6.2-sol"`) {
		t.Errorf("critic = planner = %d %q", code, errs)
	}
	// Rendering only the hosts where the models differ works.
	if code, _, errs := run(t, dir, nil, "render", "--target", "claude,copilot,cursor"); code != ExitOK {
		t.Errorf("render without codex = %d %q", code, errs)
	}
}

func TestRenderCommandWarnsAboutCodexLimit(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, ".cortexbuild", "rules")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	big := "---\ndescription: long\n---\n" + strings.Repeat("Keep every rule short. ", 1600) + "\n"
	if err := os.WriteFile(filepath.Join(rules, "long.md"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, dir, nil, "render")
	if code != ExitOK || !strings.Contains(errs, "cortexbuild: warning: the AGENTS.md chain Codex CLI reads here is") {
		t.Errorf("render with a 37 KB rule = %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, nil, "render", "--target", "claude"); code != ExitOK || errs != "" {
		t.Errorf("claude-only render warned: %d %q", code, errs)
	}
}

// A .claude/agents linked outside the project makes render exit 1, naming
// the link, with nothing written there.
func TestRenderCommandRefusesLinkOutOfProject(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, ".claude", "agents")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	for _, args := range [][]string{{"render"}, {"render", "--force"}} {
		code, _, errs := run(t, dir, nil, args...)
		if code != ExitFailure || !strings.Contains(errs, ".claude/agents is a symbolic link to "+outside) {
			t.Errorf("%v = %d %q", args, code, errs)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the project: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "AGENTS.md")); err == nil {
		t.Error("a refused render wrote AGENTS.md")
	}
}

// CORTEXBUILD_CEILING_DIRECTORIES keeps the search for a project, the
// configuration's and render's, below it: a project above is not found.
func TestProjectSearchStopsBelowACeiling(t *testing.T) {
	above := writeConfig(t, "budgets:\n  task: \"1\"\n")
	dir := filepath.Join(above, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ceiling, project string
	}{
		{"", above},
		{above, dir},
		{filepath.Join(above, "elsewhere") + string(filepath.ListSeparator) + above, dir},
	} {
		vars := map[string]string{config.CeilingEnv: tc.ceiling}
		code, out, errs := run(t, dir, vars, "render", "--dry-run", "--json")
		var rep renderReport
		if code != ExitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Dir != tc.project {
			t.Errorf("ceiling %q: render --dry-run = %d, dir %q, want %q\n%s", tc.ceiling, code, rep.Dir, tc.project, errs)
		}
		code, out, errs = run(t, dir, vars, "config", "validate")
		if tc.project == above && (code != ExitOK || !strings.Contains(out, "valid")) {
			t.Errorf("ceiling %q: validate = %d %q %q, want the configuration above", tc.ceiling, code, out, errs)
		}
		if tc.project == dir && (code != ExitConfig || !strings.Contains(errs, "or its parents below "+above+" ("+config.CeilingEnv+")")) {
			t.Errorf("ceiling %q: validate = %d %q, want no configuration found", tc.ceiling, code, errs)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a dry run left %v behind", entries)
	}
}
