package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// invoke --json prints the invocation the ledger recorded and the estimate
// reserved for it, for a plain and a streamed call.
func TestInvokeJSONNamesTheRecordedInvocationAndItsEstimate(t *testing.T) {
	dir, srv := fakeProject(t, true)
	for i, extra := range [][]string{nil, {"--stream"}} {
		task := fmt.Sprintf("t%d", i)
		srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
		args := append([]string{"invoke", "--json", "--task", task, "--agent", "builder"}, extra...)
		code, out, errs := run(t, dir, keyEnv, append(args, "hi")...)
		var res struct {
			InvocationID string         `json:"invocation_id"`
			Estimate     provider.Money `json:"estimate_usd"`
			Cost         provider.Money `json:"cost_usd"`
			Content      string         `json:"content"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Content != "done" {
			t.Fatalf("%v = %d %s %s", args, code, out, errs)
		}
		// The estimate printed before the call is the one reserved.
		m := regexp.MustCompile(`estimate: at most \$([0-9.]+)`).FindStringSubmatch(errs)
		if m == nil {
			t.Fatalf("%v: no estimate on stderr: %q", args, errs)
		}
		if want, _ := provider.ParseMoney(m[1]); res.Estimate != want || res.Estimate <= 0 || res.Cost > res.Estimate {
			t.Errorf("%v: estimate_usd %s, cost_usd %s; stderr estimate %s", args, res.Estimate, res.Cost, m[1])
		}
		code, out, _ = run(t, dir, nil, "task", "show", task, "--json")
		var tv struct {
			Attempts []struct {
				InvocationID string         `json:"invocation_id"`
				Cost         provider.Money `json:"cost_usd"`
			} `json:"attempts"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &tv) != nil || len(tv.Attempts) != 1 {
			t.Fatalf("task show = %d %s", code, out)
		}
		if row := tv.Attempts[0]; res.InvocationID == "" || row.InvocationID != res.InvocationID || row.Cost != res.Cost {
			t.Errorf("%v: printed invocation %q cost %s, ledger row %q cost %s", args, res.InvocationID, res.Cost, row.InvocationID, row.Cost)
		}
	}
}

// Every command that takes --json says why it failed as JSON on standard
// output, {"error": {"kind", "message"}} (added to the report of the
// commands that print one), with the exit code unchanged.
func TestEveryJSONCommandPrintsJSONOnFailure(t *testing.T) {
	dir, srv := fakeProject(t, true)
	missing := filepath.Join(t.TempDir(), "none.yaml")
	bad := writeConfig(t, "budgets:\n  task: \"-1\"\n")
	down := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(down.Close)
	for range 4 {
		down.EnqueueRoute(anthropicfake.RouteModels, anthropicfake.APIError())
	}
	downDir := writeConfig(t, fmt.Sprintf("providers:\n  down:\n    type: anthropic\n    base_url: %s\n    credentials: {api_key: \"${MY_KEY}\"}\n", down.URL()))
	if err := os.WriteFile(filepath.Join(dir, "self.md"), []byte("independent_reviewer: claude-opus-4-7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authDir, authSrv := fakeProject(t, true)
	authSrv.Enqueue(anthropicfake.AuthError())
	pgDown := writeConfig(t, "store:\n  backend: postgres\n  dsn: postgres://nobody@127.0.0.1:1/db?sslmode=disable&connect_timeout=5\n")

	cases := []struct {
		dir    string
		args   []string
		code   int
		kind   string
		report bool // the command's own report carries the error
	}{
		{dir, []string{"budget", "show", "--config", missing}, ExitConfig, "config", false},
		{dir, []string{"budget", "alerts", "--limit", "-1"}, ExitUsage, "usage", false},
		{bad, []string{"config", "validate"}, ExitConfig, "config", true},
		{dir, []string{"consent", "list", "--config", missing}, ExitConfig, "config", false},
		{dir, []string{"critic", "verify", "self.md", "--author", "claude-opus-4-7", "--risk", "medium"}, ExitFailure, "rejected", true},
		{dir, []string{"critic", "verify", "self.md"}, ExitUsage, "usage", false},
		{pgDown, []string{"doctor"}, ExitFailure, "check_failed", true},
		{dir, []string{"invoke"}, ExitUsage, "usage", false},
		{dir, []string{"invoke", "--task", "tiny", "hi"}, ExitFailure, "budget", false},
		{authDir, []string{"invoke", "hi"}, ExitFailure, "auth", false},
		{authDir, []string{"invoke", "hi"}, ExitFailure, "paused", false},
		{dir, []string{"pricing", "show", "--model", "no-such-model"}, ExitFailure, "failure", false},
		{dir, []string{"pricing", "show", "--nope"}, ExitUsage, "usage", false},
		{downDir, []string{"providers", "health"}, ExitFailure, "unhealthy", true},
		{dir, []string{"providers", "list", "--config", missing}, ExitConfig, "config", false},
		{t.TempDir(), []string{"providers", "smoke", "--require-all"}, ExitFailure, "check_failed", true},
		{dir, []string{"render", "--target", "emacs"}, ExitUsage, "usage", false},
		{t.TempDir(), []string{"render", "--check"}, ExitFailure, "check_failed", true},
		{dir, []string{"route", "--needs", "telepathy"}, ExitUsage, "usage", false},
		{dir, []string{"serve", "keys", "create", "--agent", "nobody"}, ExitUsage, "usage", false},
		{dir, []string{"serve", "keys", "list", "--config", missing}, ExitConfig, "config", false},
		{dir, []string{"sim", "--host", "10.1.2.3"}, ExitUsage, "usage", false},
		{dir, []string{"spend", "--by", "colour"}, ExitUsage, "usage", false},
		{dir, []string{"task", "complete", "no-such-task"}, ExitFailure, "failure", false},
		{dir, []string{"task", "show", "no-such-task"}, ExitFailure, "failure", false},
		{dir, []string{"version", "extra"}, ExitUsage, "usage", false},
	}
	if code, out, errs := run(t, dir, nil, "task", "start", "tiny", "--budget", "0.00001"); code != 0 {
		t.Fatalf("task start = %d %q %q", code, out, errs)
	}
	covered := map[string]bool{}
	for _, c := range cases {
		args := append(append([]string{}, c.args...), "--json")
		code, out, errs := run(t, c.dir, keyEnv, args...)
		var doc map[string]json.RawMessage
		var e jsonError
		if err := json.Unmarshal([]byte(out), &doc); err != nil || json.Unmarshal(doc["error"], &e) != nil {
			t.Errorf("%v = %d: stdout is not one JSON object with an error: %v\n%s\nstderr %s", args, code, err, out, errs)
			continue
		}
		if code != c.code || e.Kind != c.kind || e.Message == "" || (len(doc) > 1) != c.report {
			t.Errorf("%v = %d, error %+v, %d fields; want exit %d, kind %s, report %v\n%s\nstderr %s", args, code, e, len(doc), c.code, c.kind, c.report, out, errs)
		}
		covered[strings.Join(c.args[:commandWords(c.args)], " ")] = true
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("%d provider calls", len(srv.Requests()))
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil && !covered[strings.TrimPrefix(c.CommandPath(), "cortexbuild ")] {
			t.Errorf("%s takes --json but has no failing case here", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk((&env{}).rootCmd())
}

// commandWords counts the leading words of args that name the command.
func commandWords(args []string) int {
	n := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, ".") || strings.HasPrefix(a, "no-such") || a == "hi" || a == "extra" {
			break
		}
		n++
	}
	return n
}
