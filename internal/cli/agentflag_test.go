package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// A misspelt --agent is a usage error naming the flag, the value, the
// closest agent and the list, before any provider is asked; an agent
// defined under agents: is accepted.
func TestAgentFlagRefusesUnknownAgents(t *testing.T) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
agents:
  docwriter:
    tier: fast_cheap
budgets:
  confirm_above: "100"
`, srv.URL()))
	for _, args := range [][]string{
		{"invoke", "--agent", "critc", "review this"},
		{"invoke", "--stream", "--agent", "critc", "review this"},
		{"route", "--agent", "critc"},
		{"serve", "keys", "create", "--agent", "critc"},
	} {
		code, out, errs := run(t, dir, keyEnv, args...)
		if code != ExitUsage {
			t.Errorf("%v = %d, want %d (usage): %q %q", args, code, ExitUsage, out, errs)
		}
		for _, want := range []string{`--agent "critc"`, "unknown agent", `did you mean "critic"`, "critic, ", "docwriter"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, errs)
			}
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("an unknown agent reached the provider: %d requests", n)
	}
	srv.Enqueue(anthropicfake.TextReply("written"))
	if code, out, errs := run(t, dir, keyEnv, "invoke", "--agent", "docwriter", "write docs"); code != 0 || !strings.Contains(out, "written") {
		t.Errorf("invoke --agent docwriter (defined under agents:) = %d %q %q", code, out, errs)
	}
	if code, out, errs := run(t, dir, keyEnv, "route", "--agent", "critic"); code != 0 {
		t.Errorf("route --agent critic = %d %q %q", code, out, errs)
	}
}
