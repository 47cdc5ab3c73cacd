package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// fakeProject writes a project whose one provider is an Anthropic fake on
// loopback (the locality gate's loopback tier: no consent needed).
func fakeProject(t *testing.T, orchestration bool) (string, *anthropicfake.Server) {
	t.Helper()
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: %v
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
budgets:
  confirm_above: "100"
`, orchestration, srv.URL()))
	return dir, srv
}

var keyEnv = map[string]string{"MY_KEY": testKey}

func TestInvokeThroughTheOrchestrator(t *testing.T) {
	dir, srv := fakeProject(t, true)
	srv.Enqueue(anthropicfake.TextReply("Hello from the fake."))
	code, out, errs := run(t, dir, keyEnv, "invoke", "--agent", "builder", "say hello")
	if code != 0 || !strings.Contains(out, "Hello from the fake.") {
		t.Fatalf("invoke = %d %q %q", code, out, errs)
	}
	for _, want := range []string{"estimate: at most $", "claude/claude-sonnet-4-6", "model claude-sonnet-4-6 on claude", "tokens", "$"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	srv.Enqueue(anthropicfake.Overloaded(), anthropicfake.TextReply("second try"))
	code, out, _ = run(t, dir, keyEnv, "invoke", "--json", "--agent", "explore", "hi")
	var res struct {
		Content  string `json:"content"`
		Model    string `json:"model_used"`
		Cost     string `json:"cost_usd"`
		Attempts []struct{ Outcome string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Content != "second try" || res.Model != "claude-haiku-4-5" || len(res.Attempts) != 2 || res.Attempts[0].Outcome != "overloaded" {
		t.Errorf("invoke --json = %d %s", code, out)
	}
	srv.Enqueue(anthropicfake.TextReply("streamed words arrive"))
	code, out, errs = run(t, dir, keyEnv, "invoke", "--stream", "hi")
	if code != 0 || !strings.Contains(out, "streamed words arrive") {
		t.Errorf("invoke --stream = %d %q %q", code, out, errs)
	}
}

func TestInvokeRefusesInRenderedMode(t *testing.T) {
	dir, srv := fakeProject(t, false)
	code, _, errs := run(t, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "rendered mode") || !strings.Contains(errs, "CORTEXBUILD_LLM=1") {
		t.Errorf("rendered mode = %d %q", code, errs)
	}
	if len(srv.Requests()) != 0 {
		t.Error("a provider was called in rendered mode")
	}
	vars := map[string]string{"MY_KEY": testKey, "CORTEXBUILD_LLM": "1"}
	srv.Enqueue(anthropicfake.TextReply("on"))
	if code, out, errs := run(t, dir, vars, "invoke", "hi"); code != 0 || !strings.Contains(out, "on") {
		t.Errorf("CORTEXBUILD_LLM=1 = %d %q %q", code, out, errs)
	}
}

func TestAuthFailurePausesTheProject(t *testing.T) {
	dir, srv := fakeProject(t, true)
	srv.Enqueue(anthropicfake.AuthError())
	code, _, errs := run(t, dir, keyEnv, "invoke", "hi")
	if code != ExitFailure || !strings.Contains(errs, "project paused") {
		t.Fatalf("auth failure = %d %q", code, errs)
	}
	if code, out, _ := run(t, dir, nil, "project", "status"); code != 0 || !strings.HasPrefix(out, "paused:") {
		t.Errorf("status = %d %q", code, out)
	}
	// The pause survives the process: a new run is refused without calling the provider.
	before := len(srv.Requests())
	if code, _, errs := run(t, dir, keyEnv, "invoke", "hi"); code != ExitFailure || !strings.Contains(errs, "paused") || len(srv.Requests()) != before {
		t.Errorf("invoke while paused = %d %q", code, errs)
	}
	if code, out, _ := run(t, dir, nil, "project", "resume"); code != 0 || !strings.Contains(out, "resumed") {
		t.Errorf("resume = %d %q", code, out)
	}
	srv.Enqueue(anthropicfake.TextReply("back"))
	if code, out, _ := run(t, dir, keyEnv, "invoke", "hi"); code != 0 || !strings.Contains(out, "back") {
		t.Errorf("after resume = %d %q", code, out)
	}
}

func TestRouteExplains(t *testing.T) {
	dir, _ := fakeProject(t, true)
	code, out, _ := run(t, dir, keyEnv, "route", "--agent", "critic", "--needs", "tool_use,long_context_1m", "--explain")
	if code != 0 || !strings.Contains(out, "agent critic: tier reasoning_heavy, needs long_context_1m,tool_use") || !strings.Contains(out, "keep claude/claude-opus-4-7") {
		t.Errorf("route = %d\n%s", code, out)
	}
	code, out, _ = run(t, dir, keyEnv, "route", "--agent", "explore", "--needs", "long_context_1m")
	if code != ExitFailure || !strings.Contains(out, "drop claude/claude-haiku-4-5: lacks long_context_1m") {
		t.Errorf("route without a candidate = %d\n%s", code, out)
	}
	if code, _, errs := run(t, dir, keyEnv, "route", "--needs", "telepathy"); code != ExitUsage || !strings.Contains(errs, "unknown capability") {
		t.Errorf("bad capability = %d %q", code, errs)
	}
}

func TestDemoRunsOffline(t *testing.T) {
	code, out, errs := run(t, t.TempDir(), nil, "demo")
	if code != 0 {
		t.Fatalf("demo = %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"attempt 3: anthropic/claude-sonnet-4-6 overloaded", "attempt 4: openai/gpt-5-mini ok", // backoff then failover
		"anthropic/claude-sonnet-4-6 rate_limit",                                  // alternates on a rate limit
		"drop openai/gpt-5: lacks long_context_1m",                                // capability routing
		"attempt 1: openai/gpt-5-nano network", "attempt 2: openai/gpt-5-nano ok", // network retry
		"cache hit: saved $",                                                                                              // the response cache
		"does not fit the budget", "task:demo-small is paused", "builder           -                             refused", // a budget refusal pauses the task
		"ledger: task:demo-small is paused: budget reached", // the paused task refuses the next call
		"ledger: 15 attempts recorded",
		// The critic gate: the author's model is dropped, another vendor
		// reviews, the task completes; without the field it is refused.
		"critic route: drop openai/gpt-5: authored the plan of task demo-risky",
		"critic on gemini/gemini-2.5-pro: independent_reviewer gemini-2.5-pro recorded",
		"task complete demo-risky: approved",
		"task complete demo-unreviewed: refused: critic gate: the last review does not satisfy the gate: a high-risk task needs an independent review, and the critic's output has no independent_reviewer line",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// --max-tokens: 0 or a negative value is a usage error naming the flag
// and what to give, before anything is sent (leaving the flag out is what
// asks for the agent's limit); one above the model's output limit is
// clamped to it, said so, priced at it and sent as it.
func TestInvokeMaxTokensFlag(t *testing.T) {
	dir, srv := fakeProject(t, true)
	for _, n := range []string{"-5", "0"} {
		code, _, errs := run(t, dir, keyEnv, "invoke", "--max-tokens", n, "hi")
		if want := "--max-tokens must be at least 1, got " + n + ": give the output token limit, or leave the flag out for the agent's"; code != ExitUsage || !strings.Contains(errs, want) || len(srv.Requests()) != 0 {
			t.Fatalf("--max-tokens %s = %d %q, %d requests; want exit 2 saying %q", n, code, errs, len(srv.Requests()), want)
		}
	}
	srv.Enqueue(anthropicfake.TextReply("clamped"))
	code, out, errs := run(t, dir, keyEnv, "invoke", "--agent", "builder", "--max-tokens", "99999999999", "hi")
	if code != 0 || !strings.Contains(out, "clamped") {
		t.Fatalf("--max-tokens 99999999999 = %d %q %q", code, out, errs)
	}
	if !strings.Contains(errs, "max tokens: 99999999999 is above the model's output limit; clamped to 64000") {
		t.Errorf("stderr does not report the clamp:\n%s", errs)
	}
	// 64,000 output tokens of Sonnet at $15/M: about $0.96, not $1.5 million.
	if !strings.Contains(errs, "estimate: at most $0.96") {
		t.Errorf("estimate not priced at the model's limit:\n%s", errs)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), `"max_tokens":64000`) {
		t.Errorf("upstream requests %d, want one with max_tokens 64000", len(reqs))
	}
}

// invoke says when a call waits out a rate limit or backs off: which
// provider, why, how long; a wait under a second passes unsaid.
func TestInvokeSaysWhenItWaits(t *testing.T) {
	dir, srv := fakeProject(t, true)
	var slept []time.Duration
	hook := func(e *env) {
		e.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	}
	srv.Enqueue(anthropicfake.RateLimited("3"), anthropicfake.TextReply("after the wait"))
	code, out, errs := runWith(t, hook, dir, keyEnv, "invoke", "hi")
	if code != 0 || !strings.Contains(out, "after the wait") {
		t.Fatalf("invoke = %d %q %q", code, out, errs)
	}
	if len(slept) != 1 || slept[0] <= 2*time.Second || slept[0] > 3*time.Second || !strings.Contains(errs, "cortexbuild: claude rate-limited: waiting 3s, until ") {
		t.Errorf("slept %v; stderr:\n%s", slept, errs)
	}
	slept = nil
	srv.Enqueue(anthropicfake.Overloaded(), anthropicfake.TextReply("after the backoff"))
	if code, out, errs = runWith(t, hook, dir, keyEnv, "invoke", "hi"); code != 0 || !strings.Contains(out, "after the backoff") {
		t.Fatalf("invoke = %d %q %q", code, out, errs)
	}
	if len(slept) != 1 || strings.Contains(errs, "cortexbuild: claude") {
		t.Errorf("a backoff of %v was said:\n%s", slept, errs)
	}
}
