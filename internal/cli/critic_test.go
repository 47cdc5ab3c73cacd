package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func TestCriticGateThroughTheCLI(t *testing.T) {
	dir, srv := fakeProject(t, true)
	if code, out, errs := run(t, dir, nil, "task", "start", "T1", "--risk", "medium"); code != 0 || !strings.Contains(out, "risk medium") || !strings.Contains(out, "critic review") {
		t.Fatalf("task start = %d %q %q", code, out, errs)
	}
	if code, _, errs := run(t, dir, nil, "task", "complete", "T1"); code != ExitFailure || !strings.Contains(errs, "no critic has reviewed it") {
		t.Fatalf("complete without a review = %d %q", code, errs)
	}
	srv.Enqueue(anthropicfake.TextReply("1. migrate\n2. roll back on failure"))
	if code, _, errs := run(t, dir, keyEnv, "invoke", "--agent", "planner", "--task", "T1", "plan it"); code != 0 {
		t.Fatalf("planner = %d %q", code, errs)
	}
	// Every configured provider is the author's vendor: the critic runs on
	// another of its models, never the author's.
	code, out, errs := run(t, dir, keyEnv, "route", "--agent", "critic", "--task", "T1")
	if code != 0 || !strings.Contains(out, "authored the plan of task T1") || !strings.Contains(out, "keep claude/claude-sonnet-4-6") {
		t.Fatalf("route = %d %q %q", code, out, errs)
	}
	srv.Enqueue(anthropicfake.TextReply("Add a dry run.\nindependent_reviewer: claude-sonnet-4-6"))
	code, _, errs = run(t, dir, keyEnv, "invoke", "--agent", "critic", "--task", "T1", "--system", critic.Instruction, "review it")
	if code != 0 || !strings.Contains(errs, "independent_reviewer claude-sonnet-4-6 recorded") {
		t.Fatalf("critic = %d %q", code, errs)
	}
	code, out, _ = run(t, dir, nil, "task", "show", "T1", "--json")
	var v struct {
		Risk     string
		State    string
		Authors  []string `json:"plan_authors"`
		Reviewer string
		Events   []struct{ Kind string }
		Attempts []struct{ Agent string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Risk != "medium" || v.Reviewer != "claude-sonnet-4-6" || len(v.Authors) != 1 || !strings.HasPrefix(v.Authors[0], "claude-opus") || len(v.Attempts) != 2 {
		t.Fatalf("task show --json = %d %s", code, out)
	}
	if code, out, errs := run(t, dir, nil, "task", "complete", "T1"); code != 0 || !strings.Contains(out, "approved") || !strings.Contains(out, "claude-sonnet-4-6") {
		t.Fatalf("complete = %d %q %q", code, out, errs)
	}
	if code, out, _ := run(t, dir, nil, "task", "show", "T1"); code != 0 || !strings.Contains(out, "risk medium, completed") || !strings.Contains(out, "decision:    completed: approved") {
		t.Errorf("task show = %d %q", code, out)
	}
	for _, args := range [][]string{{"task", "complete", "nope"}, {"task", "show", "nope"}} {
		if code, _, errs := run(t, dir, nil, args...); code != ExitFailure || !strings.Contains(errs, "task nope does not exist") {
			t.Errorf("%v = %d %q", args, code, errs)
		}
	}
	if code, _, errs := run(t, dir, nil, "task", "start", "T2", "--risk", "severe"); code != ExitUsage || !strings.Contains(errs, "low, medium, high, critical") {
		t.Errorf("bad risk = %d %q", code, errs)
	}
	run(t, dir, nil, "task", "start", "T3", "--risk", "high")
	if code, _, errs := run(t, dir, nil, "task", "start", "T3", "--risk", "low"); code != ExitFailure || !strings.Contains(errs, "never lowered") {
		t.Errorf("lowering = %d %q", code, errs)
	}
}

func TestCriticVerify(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	ok := write("ok.md", "The plan misses a rollback.\n\nindependent_reviewer: gpt-5\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"valid", []string{ok, "--author", "claude-opus-4-7", "--risk", "medium"}, 0, "ok: independent_reviewer gpt-5 (line 3)"},
		{"valid with the model used", []string{ok, "--author", "claude-opus-4-7", "--risk", "high", "--model", "gpt-5"}, 0, "ok"},
		{"low risk", []string{write("none.md", "fine"), "--risk", "low"}, 0, "needs no independent review"},
		{"missing field", []string{"none.md", "--author", "claude-opus-4-7", "--risk", "medium"}, 1, "no independent_reviewer line"},
		{"twice, different", []string{write("twice.md", "independent_reviewer: gpt-5\nindependent_reviewer: gemini-2.5-pro"), "--author", "claude-opus-4-7", "--risk", "medium"}, 1, "line 2"},
		{"empty value", []string{write("empty.md", "independent_reviewer:"), "--author", "claude-opus-4-7", "--risk", "medium"}, 1, "empty value"},
		{"unknown reviewer", []string{write("unknown.md", "independent_reviewer: gpt-9000"), "--author", "claude-opus-4-7", "--risk", "medium"}, 1, `"gpt-9000", which is no configured model or agent`},
		{"extra known id", []string{"unknown.md", "--author", "claude-opus-4-7", "--risk", "medium", "--known", "gpt-9000"}, 0, "ok"},
		{"names the author", []string{write("self.md", "independent_reviewer: claude-opus-4-7"), "--author", "claude-opus-4-7", "--risk", "critical"}, 1, "the model that authored the plan"},
		{"ran on another model", []string{ok, "--author", "claude-opus-4-7", "--risk", "medium", "--model", "gemini-2.5-pro"}, 1, "but the critic ran on gemini-2.5-pro"},
		{"same vendor when required", []string{write("sonnet.md", "independent_reviewer: claude-sonnet-4-6"), "--author", "claude-opus-4-7", "--risk", "medium", "--require-different-vendor"}, 1, "another vendor"},
		{"no risk", []string{ok, "--author", "x"}, ExitUsage, "--risk is required"},
		{"bad risk", []string{ok, "--author", "x", "--risk", "huge"}, ExitUsage, "unknown risk"},
		{"no author", []string{ok, "--risk", "medium"}, ExitUsage, "--author is required"},
		{"missing file", []string{"absent.md", "--author", "x", "--risk", "medium"}, ExitUsage, "cannot read the transcript"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := run(t, dir, nil, append([]string{"critic", "verify"}, c.args...)...)
			if code != c.code || !strings.Contains(out+errs, c.want) {
				t.Errorf("critic verify %v = %d %q %q; want %d with %q", c.args, code, out, errs, c.code, c.want)
			}
		})
	}
	code, out, _ := run(t, dir, nil, "critic", "verify", "self.md", "--author", "claude-opus-4-7", "--risk", "medium", "--json")
	var v struct {
		OK       bool
		Reviewer string
		Reason   string
	}
	if code != ExitFailure || json.Unmarshal([]byte(out), &v) != nil || v.OK || v.Reviewer != "claude-opus-4-7" || v.Reason == "" {
		t.Errorf("--json = %d %s", code, out)
	}
}
