package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func TestBudgetsAndSpendThroughTheCLI(t *testing.T) {
	dir, srv := fakeProject(t, true)
	if code, out, errs := run(t, dir, nil, "task", "start", "t1", "--budget", "0.00001"); code != 0 || !strings.Contains(out, "budget $0.00001") {
		t.Fatalf("task start = %d %q %q", code, out, errs)
	}
	code, _, errs := run(t, dir, keyEnv, "invoke", "--task", "t1", "hi")
	if code != ExitFailure || !strings.Contains(errs, "does not fit the budget") || len(srv.Requests()) != 0 {
		t.Fatalf("over budget = %d %q, %d provider calls", code, errs, len(srv.Requests()))
	}
	if code, out, _ := run(t, dir, nil, "budget", "set", "task:t1", "1"); code != 0 || !strings.Contains(out, "limit $1.00") {
		t.Fatalf("budget set = %d %q", code, out)
	}
	srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	if code, _, errs := run(t, dir, keyEnv, "invoke", "--task", "t1", "--agent", "builder", "hi"); code != 0 {
		t.Fatalf("invoke = %d %q", code, errs)
	}
	code, out, _ := run(t, dir, nil, "spend", "--by", "task", "--json")
	var rep struct {
		Total struct {
			Cost     string `json:"cost_usd"`
			Attempts int
		} `json:"total"`
		Groups []struct{ Key string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Total.Cost != "0.0045" || rep.Total.Attempts != 1 || rep.Groups[0].Key != "t1" {
		t.Errorf("spend = %d %s", code, out)
	}
	if code, out, _ := run(t, dir, nil, "task", "show", "t1"); code != 0 || !strings.Contains(out, "$0.0045 of $1.00") || !strings.Contains(out, "claude/claude-sonnet-4-6") {
		t.Errorf("task show = %d %q", code, out)
	}
	if code, out, _ := run(t, dir, nil, "budget", "show"); code != 0 || !strings.Contains(out, "task:t1") {
		t.Errorf("budget show = %d %q", code, out)
	}
	if code, _, errs := run(t, dir, nil, "budget", "set", "t1", "x"); code != ExitUsage || !strings.Contains(errs, "task:ID") {
		t.Errorf("bad scope = %d %q", code, errs)
	}
}
