package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/provider"
)

// record is an Observer that remembers what it heard, as text.
type record struct {
	name string
	log  *[]string
}

func (r record) StartInvocation(ctx context.Context, inv observe.Invocation) context.Context {
	*r.log = append(*r.log, r.name+" start "+inv.ID)
	return context.WithValue(ctx, r, inv.ID)
}

func (r record) AttemptDone(ctx context.Context, a observe.Attempt) {
	*r.log = append(*r.log, r.name+" attempt "+a.Outcome+" ctx="+ctx.Value(r).(string))
}

func (r record) EndInvocation(ctx context.Context, _ observe.Invocation, end observe.End) {
	*r.log = append(*r.log, r.name+" end "+end.Outcome+" ctx="+ctx.Value(r).(string))
}

func (r record) BreakerChanged(p string, s observe.BreakerState) {
	*r.log = append(*r.log, r.name+" breaker "+p+" "+s.String())
}

func TestMulti(t *testing.T) {
	if observe.Multi() != nil || observe.Multi(nil) != nil {
		t.Fatal("Multi of nothing must be nil, so the orchestrator skips observing")
	}
	var log []string
	a, b := record{"a", &log}, record{"b", &log}
	if got := observe.Multi(nil, a); got != observe.Observer(a) {
		t.Errorf("Multi of one = %v, want it unwrapped", got)
	}
	m := observe.Multi(a, nil, observe.Multi(b))
	ctx := m.StartInvocation(context.Background(), observe.Invocation{ID: "inv_1"})
	m.AttemptDone(ctx, observe.Attempt{Outcome: "server"})
	m.EndInvocation(ctx, observe.Invocation{ID: "inv_1"}, observe.End{Outcome: "ok"})
	m.BreakerChanged("anthropic", observe.BreakerOpen)
	want := []string{
		"a start inv_1", "b start inv_1",
		"a attempt server ctx=inv_1", "b attempt server ctx=inv_1",
		"a end ok ctx=inv_1", "b end ok ctx=inv_1",
		"a breaker anthropic open", "b breaker anthropic open",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("heard:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	var n observe.Nop
	if n.StartInvocation(ctx, observe.Invocation{}) != ctx {
		t.Error("Nop changed the context")
	}
}

func TestBreakerStateNumbers(t *testing.T) {
	for s, want := range map[observe.BreakerState]string{observe.BreakerClosed: "closed", observe.BreakerHalfOpen: "half_open", observe.BreakerOpen: "open", 7: "unknown"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s, want)
		}
	}
	if observe.BreakerClosed != 0 || observe.BreakerHalfOpen != 1 || observe.BreakerOpen != 2 {
		t.Error("the gauge's numbers changed: 0 closed, 1 half-open, 2 open")
	}
}

func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLoggerLines(t *testing.T) {
	var buf bytes.Buffer
	g := observe.NewLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	inv := observe.Invocation{ID: "inv_1", Agent: "critic", Task: "T42", Tier: provider.TierReasoningHeavy, MaxTokens: 4096, Start: start}
	ctx := g.StartInvocation(context.Background(), inv)
	g.AttemptDone(ctx, observe.Attempt{InvocationID: "inv_1", Agent: "critic", Task: "T42", Provider: "anthropic", Model: "claude-opus-4-7", Outcome: "server",
		Usage: provider.Usage{InputTokens: 10}, Cost: provider.MustMoney("0.00015"), Start: start, Latency: 1500 * time.Millisecond, Waited: 0, RetryAfter: 2 * time.Second})
	// At info, a successful attempt is not logged (the invocation line says it).
	g.AttemptDone(ctx, observe.Attempt{InvocationID: "inv_1", Provider: "openai", Model: "gpt-5", Outcome: "ok", Start: start.Add(2 * time.Second), Latency: time.Second})
	g.EndInvocation(ctx, inv, observe.End{Outcome: "ok", Provider: "openai", Model: "gpt-5-2026", Attempts: 2, Usage: provider.Usage{InputTokens: 30, OutputTokens: 7, CacheReadTokens: 20}, Cost: provider.MustMoney("0.0012"), FinishReason: provider.StopEndTurn, Duration: 3 * time.Second})
	g.EndInvocation(ctx, inv, observe.End{Outcome: "budget", Budget: observe.BudgetRefusal{Scope: observe.ScopeTask, Reason: observe.ReasonOverBudget, Estimate: provider.MustMoney("2"), Limit: provider.MustMoney("1.5")}})
	g.EndInvocation(ctx, inv, observe.End{Outcome: "cache_hit", Provider: "openai", Model: "gpt-5-2026", Attempts: 1, Saved: provider.MustMoney("0.0012")})
	g.BreakerChanged("anthropic", observe.BreakerOpen)

	ls := lines(t, &buf)
	if len(ls) != 5 {
		t.Fatalf("%d lines:\n%s", len(ls), buf.String())
	}
	check := func(i int, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if ls[i][k] != v {
				t.Errorf("line %d (%s): %s = %#v, want %#v", i, ls[i]["msg"], k, ls[i][k], v)
			}
		}
	}
	check(0, map[string]any{"msg": "llm attempt", "level": "WARN", "invocation_id": "inv_1", "agent": "critic", "task": "T42", "provider": "anthropic", "model": "claude-opus-4-7", "outcome": "server",
		"input_tokens": 10.0, "output_tokens": 0.0, "cost_usd": 0.00015, "latency_ms": 1500.0, "retry_after_ms": 2000.0})
	check(1, map[string]any{"msg": "llm invocation", "level": "INFO", "outcome": "ok", "tier": "reasoning_heavy", "provider": "openai", "model": "gpt-5-2026", "attempts": 2.0,
		"input_tokens": 30.0, "output_tokens": 7.0, "cache_read_tokens": 20.0, "cost_usd": 0.0012, "finish_reason": "end_turn", "duration_ms": 3000.0})
	check(2, map[string]any{"level": "WARN", "outcome": "budget", "budget_scope": "task", "budget_reason": "over_budget", "estimate_usd": 2.0, "limit_usd": 1.5})
	check(3, map[string]any{"level": "INFO", "outcome": "cache_hit", "saved_usd": 0.0012})
	check(4, map[string]any{"msg": "llm breaker", "level": "WARN", "provider": "anthropic", "state": "open"})
	if _, ok := ls[0]["waited_ms"]; ok {
		t.Error("waited_ms written for an attempt that did not wait")
	}
}

func TestLoggerDebugAddsAnsweringAttempts(t *testing.T) {
	var buf bytes.Buffer
	g := observe.NewLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	g.AttemptDone(context.Background(), observe.Attempt{Provider: "gemini", Model: "gemini-2.5-flash", Outcome: "ok", ResponseModel: "gemini-2.5-flash-001", Stream: true})
	ls := lines(t, &buf)
	if len(ls) != 1 || ls[0]["level"] != "DEBUG" || ls[0]["response_model"] != "gemini-2.5-flash-001" || ls[0]["stream"] != true {
		t.Errorf("lines = %v", ls)
	}
}

// An unpriced attempt is logged at warn even when it answered, saying so.
func TestLoggerWarnsOfUnpricedAttempts(t *testing.T) {
	var buf bytes.Buffer
	g := observe.NewLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	g.AttemptDone(context.Background(), observe.Attempt{Provider: "private", Model: "acme-private-1", Outcome: "ok", Cost: provider.Dollar, Unpriced: true})
	ls := lines(t, &buf)
	if len(ls) != 1 || ls[0]["level"] != "WARN" || ls[0]["unpriced"] != true || ls[0]["cost_usd"] != 1.0 {
		t.Errorf("lines = %v", ls)
	}
}

func TestUSD(t *testing.T) {
	for m, want := range map[provider.Money]float64{0: 0, provider.Dollar: 1, provider.MustMoney("0.000000001"): 1e-9, provider.MustMoney("12.34"): 12.34} {
		if got := observe.USD(m); got != want {
			t.Errorf("USD(%s) = %v, want %v", m, got, want)
		}
	}
}
