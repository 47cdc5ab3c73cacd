package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// budgetProject is a project whose configuration sets the monthly budget
// to monthly.
func budgetProject(t *testing.T, monthly string) (string, *anthropicfake.Server) {
	t.Helper()
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	dir := writeConfig(t, budgetConfig(srv, monthly))
	return dir, srv
}

func budgetConfig(srv *anthropicfake.Server, monthly string) string {
	return fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
budgets:
  confirm_above: "100"
  project_monthly: %q
`, srv.URL(), monthly)
}

// monthLimit returns this month's limit as 'budget show --json' reports it.
func monthLimit(t *testing.T, dir string) string {
	t.Helper()
	code, out, errs := run(t, dir, nil, "budget", "show", "--json")
	var bs []struct {
		Scope string `json:"scope"`
		Limit string `json:"limit_usd"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &bs) != nil {
		t.Fatalf("budget show = %d %s %s", code, out, errs)
	}
	month := string(ledger.MonthScope(time.Now().UTC()))
	for _, b := range bs {
		if b.Scope == month {
			return b.Limit
		}
	}
	return ""
}

// TestBudgetSetOverridesTheConfigUntilUnset: 'budget set month 250' wins
// over budgets.project_monthly for this month, says so and where, and
// stays through later commands (it was undone by the next one) until
// 'budget unset month'; meanwhile the configuration's value stays the
// default, and follows an edit of the file.
func TestBudgetSetOverridesTheConfigUntilUnset(t *testing.T) {
	dir, srv := budgetProject(t, "100")
	month := string(ledger.MonthScope(time.Now().UTC()))
	cfg := filepath.Join(canonicalDir(dir), config.Dir, config.FileName)
	if got := monthLimit(t, dir); got != "100.00" {
		t.Fatalf("the configured month budget = %q", got)
	}
	code, out, errs := run(t, dir, nil, "budget", "set", "month", "250")
	for _, want := range []string{
		month + ": limit $250.00 (was $100.00), spent $0.00",
		"recorded in the ledger " + filepath.Join(canonicalDir(dir), config.Dir, "state.db"),
		"it overrides budgets.project_monthly ($100.00, " + cfg + ":10:",
		"for " + month + " until 'cortexbuild budget unset " + month + "'",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("budget set = %d %q %q; want it to say %q", code, out, errs, want)
		}
	}
	for range 2 { // the next commands keep it
		if got := monthLimit(t, dir); got != "250.00" {
			t.Fatalf("this month's budget after budget set and another command = $%s; want $250.00", got)
		}
	}
	srv.Enqueue(anthropicfake.TextReply("ok"))
	if code, _, errs := run(t, dir, keyEnv, "invoke", "--agent", "builder", "hi"); code != 0 {
		t.Fatalf("invoke = %d %s", code, errs)
	}
	if got := monthLimit(t, dir); got != "250.00" {
		t.Errorf("this month's budget after an invocation = $%s; want $250.00", got)
	}
	// An edit of the configuration does not undo the override either.
	if err := os.WriteFile(filepath.Join(dir, config.Dir, config.FileName), []byte(budgetConfig(srv, "150")), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := monthLimit(t, dir); got != "250.00" {
		t.Errorf("this month's budget after the configuration changed = $%s; want the override $250.00", got)
	}
	code, out, _ = run(t, dir, nil, "budget", "unset", "month")
	if code != 0 || !strings.Contains(out, month+": limit $150.00 from budgets.project_monthly ("+cfg+":10:") {
		t.Errorf("budget unset = %d %q", code, out)
	}
	if got := monthLimit(t, dir); got != "150.00" {
		t.Errorf("this month's budget after budget unset = $%s; want the configuration's $150.00", got)
	}
	// Without an override, the configuration's value follows the file.
	if err := os.WriteFile(filepath.Join(dir, config.Dir, config.FileName), []byte(budgetConfig(srv, "175")), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := monthLimit(t, dir); got != "175.00" {
		t.Errorf("this month's budget after the configuration changed = $%s; want $175.00", got)
	}
}

var suggested = regexp.MustCompile(`'(cortexbuild [^']+)'`)

// runSuggested runs every command msg names, with its placeholders filled
// in, and fails unless each succeeds; it returns how many it ran.
func runSuggested(t *testing.T, dir, msg string) int {
	t.Helper()
	ms := suggested.FindAllStringSubmatch(msg, -1)
	for _, m := range ms {
		cmdline := strings.NewReplacer("AMOUNT", "1", "LEVEL", "medium").Replace(m[1])
		args := shellFields(t, cmdline)[1:]
		if code, out, errs := run(t, dir, keyEnv, args...); code != 0 {
			t.Errorf("the suggested command %q (from %q) fails: %d %s %s", cmdline, msg, code, out, errs)
		}
	}
	return len(ms)
}

// shellFields splits a command line as a POSIX shell would, for the
// quoting the messages use: words, and double-quoted words with \ escapes.
func shellFields(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case c == ' ' && !quoted:
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in %q", line)
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}

// TestSuggestedCommandsWork: every command a refusal or a report names
// (budget set, budget resume, task resume, task start, budget set month)
// runs, and the ones that raise a budget let the next call through.
func TestSuggestedCommandsWork(t *testing.T) {
	t.Run("a task over its budget", func(t *testing.T) {
		dir, srv := budgetProject(t, "100")
		if code, out, errs := run(t, dir, nil, "task", "start", "t1", "--budget", "0.00001"); code != 0 {
			t.Fatalf("task start = %d %q %q", code, out, errs)
		}
		_, _, errs := run(t, dir, keyEnv, "invoke", "--task", "t1", "hi")
		if !strings.Contains(errs, "'cortexbuild budget set task:t1 AMOUNT'") || !strings.Contains(errs, "'cortexbuild task resume t1'") {
			t.Fatalf("the refusal does not name the commands: %s", errs)
		}
		_, _, paused := run(t, dir, keyEnv, "invoke", "--task", "t1", "hi")
		if !strings.Contains(paused, "task:t1 is paused until") {
			t.Fatalf("the paused refusal: %s", paused)
		}
		if n := runSuggested(t, dir, paused); n != 2 {
			t.Errorf("the paused refusal names %d commands; want 2: %s", n, paused)
		}
		srv.Enqueue(anthropicfake.TextReply("ok"))
		if code, _, errs := run(t, dir, keyEnv, "invoke", "--task", "t1", "hi"); code != 0 {
			t.Errorf("invoke after the suggested commands = %d %s", code, errs)
		}
	})
	t.Run("a task whose id needs quoting", func(t *testing.T) {
		dir, srv := budgetProject(t, "100")
		id := `my "big" task`
		if code, out, errs := run(t, dir, nil, "task", "start", id, "--budget", "0.00001"); code != 0 {
			t.Fatalf("task start = %d %q %q", code, out, errs)
		}
		run(t, dir, keyEnv, "invoke", "--task", id, "hi")
		_, _, paused := run(t, dir, keyEnv, "invoke", "--task", id, "hi")
		if n := runSuggested(t, dir, paused); n != 2 {
			t.Errorf("the paused refusal names %d commands; want 2: %s", n, paused)
		}
		srv.Enqueue(anthropicfake.TextReply("ok"))
		if code, _, errs := run(t, dir, keyEnv, "invoke", "--task", id, "hi"); code != 0 {
			t.Errorf("invoke after the suggested commands = %d %s", code, errs)
		}
	})
	t.Run("a month over the configured budget", func(t *testing.T) {
		dir, srv := budgetProject(t, "0.00001")
		month := string(ledger.MonthScope(time.Now().UTC()))
		_, _, errs := run(t, dir, keyEnv, "invoke", "hi")
		want := []string{"'cortexbuild budget set " + month + " AMOUNT'", "'cortexbuild budget resume " + month + "'"}
		for _, w := range want {
			if !strings.Contains(errs, w) {
				t.Fatalf("the refusal does not name %s: %s", w, errs)
			}
		}
		if n := runSuggested(t, dir, errs); n != 2 {
			t.Errorf("the refusal names %d commands; want 2: %s", n, errs)
		}
		srv.Enqueue(anthropicfake.TextReply("ok"))
		if code, _, errs := run(t, dir, keyEnv, "invoke", "hi"); code != 0 {
			t.Errorf("invoke after raising the month's budget as told = %d %s", code, errs)
		}
	})
	t.Run("reports", func(t *testing.T) {
		dir, _ := fakeProject(t, true)
		_, out, _ := run(t, dir, nil, "budget", "show")
		if n := runSuggested(t, dir, out); n != 1 {
			t.Errorf("budget show without budgets names %d commands: %s", n, out)
		}
		_, _, errs := run(t, dir, nil, "task", "show", "nosuch")
		if n := runSuggested(t, dir, errs); n != 1 {
			t.Errorf("task show of an unknown task names %d commands: %s", n, errs)
		}
		_, _, errs = run(t, dir, nil, "task", "complete", "other")
		if n := runSuggested(t, dir, errs); n != 1 {
			t.Errorf("task complete of an unknown task names %d commands: %s", n, errs)
		}
	})
}
