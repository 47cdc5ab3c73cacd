package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// crossTwoThresholds makes a call on task t1 without a budget, sets the
// task's budget to 2.2 times its cost, and makes a second call (91 %):
// 50 % and 80 % are crossed. It returns the cost of a call, the limit and
// the second invocation's stderr.
func crossTwoThresholds(t *testing.T, dir string, srv *anthropicfake.Server) (cost, limit provider.Money, errs string) {
	t.Helper()
	reply := anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 200, Output: 100}}
	srv.Enqueue(reply)
	if code, _, errs := run(t, dir, keyEnv, "invoke", "--task", "t1", "--max-tokens", "100", "hi"); code != 0 {
		t.Fatalf("invoke = %d %s", code, errs)
	}
	code, out, errs := run(t, dir, nil, "spend", "--task", "t1", "--json")
	var rep struct {
		Total struct {
			Cost provider.Money `json:"cost_usd"`
		} `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Total.Cost == 0 {
		t.Fatalf("spend = %d %s %s", code, out, errs)
	}
	cost = rep.Total.Cost
	limit = cost * 22 / 10 // one call is 45 %, two are 91 %
	if code, out, errs := run(t, dir, nil, "budget", "set", "task:t1", limit.String()); code != 0 {
		t.Fatalf("budget set = %d %s %s", code, out, errs)
	}
	srv.Enqueue(reply)
	code, _, errs = run(t, dir, keyEnv, "invoke", "--task", "t1", "--max-tokens", "100", "hi")
	if code != 0 {
		t.Fatalf("invoke = %d %s", code, errs)
	}
	return cost, limit, errs
}

// A task's calls cross 50 % and 80 % of its budget: the invocation that
// crosses them announces each once (the log notifier on stderr, event
// budget_threshold); later commands do not announce them again; budget
// show and budget alerts list them as announced.
func TestBudgetAlertsAreAnnouncedOnceAndListed(t *testing.T) {
	dir, srv := budgetProject(t, "1000")
	cost, limit, errs := crossTwoThresholds(t, dir, srv)
	for _, want := range []string{
		fmt.Sprintf(`level=INFO msg="budget of task:t1 reached 50%%: spent $%s of $%s" event=budget_threshold`, 2*cost, limit),
		fmt.Sprintf(`level=WARN msg="budget of task:t1 reached 80%%: spent $%s of $%s" event=budget_threshold`, 2*cost, limit),
	} {
		if strings.Count(errs, want) != 1 {
			t.Errorf("stderr of the invocation that crossed the thresholds has %d of\n  %s\n%s", strings.Count(errs, want), want, errs)
		}
	}
	// The next command that makes calls announces nothing more (its call
	// is refused: what is left does not fit the estimate).
	_, _, errs = run(t, dir, keyEnv, "invoke", "--task", "t1", "--max-tokens", "100", "hi")
	if strings.Contains(errs, "budget_threshold") {
		t.Errorf("a later command announced again:\n%s", errs)
	}
	code, out, errs := run(t, dir, nil, "budget", "alerts", "--json")
	var as []struct {
		Scope     string `json:"scope"`
		Threshold int    `json:"threshold_pct"`
		Notified  string `json:"notified_at"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &as) != nil || len(as) != 2 || as[0].Threshold != 80 || as[1].Threshold != 50 || as[0].Notified == "" || as[1].Notified == "" {
		t.Fatalf("budget alerts --json = %d %s %s; want 80 %% then 50 %%, both announced", code, out, errs)
	}
	code, out, _ = run(t, dir, nil, "budget", "show")
	if code != 0 || !strings.Contains(out, "alerts, newest first") || !strings.Contains(out, "task:t1  80%") || strings.Contains(out, "not yet") {
		t.Errorf("budget show = %d\n%s", code, out)
	}
	if n := runSuggested(t, dir, out); n != 1 {
		t.Errorf("budget show names %d commands; want 1:\n%s", n, out)
	}
	if code, out, _ := run(t, dir, nil, "budget", "alerts", "--limit", "1"); code != 0 || strings.Count(out, "task:t1") != 1 {
		t.Errorf("budget alerts --limit 1 = %d\n%s", code, out)
	}
	if code, _, errs := run(t, dir, nil, "budget", "alerts", "--limit", "-1"); code != ExitUsage || !strings.Contains(errs, "--limit -1") {
		t.Errorf("budget alerts --limit -1 = %d %s", code, errs)
	}
}

// budgets.alerts: [] turns the alerts off.
func TestBudgetAlertsOff(t *testing.T) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	dir := writeConfig(t, budgetConfig(srv, "1000")+"  alerts: []\n")
	if _, _, errs := crossTwoThresholds(t, dir, srv); strings.Contains(errs, "budget_threshold") {
		t.Errorf("announced with alerts off:\n%s", errs)
	}
	if code, out, errs := run(t, dir, nil, "budget", "alerts"); code != 0 || !strings.Contains(out, "no budget alerts") {
		t.Errorf("budget alerts with alerts off = %d %s %s", code, out, errs)
	}
}
