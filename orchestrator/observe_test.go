package orchestrator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/observe/metrics"
	"github.com/cortexbuild/cortexbuild/observe/tracing"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// secretPrompt and the fakes' API keys must never reach a log line, a span
// or a metric.
const secretPrompt = "PROMPT-TEXT-THAT-MUST-NOT-LEAK"

// observed is a world whose orchestrator reports to all three observers at
// once: JSON log lines in a buffer, spans in a recorder, metrics in a
// private registry.
type observed struct {
	*world
	logs    *testenv.Buffer
	spans   *tracetest.SpanRecorder
	metrics *metrics.Observer
}

func newObserved(t *testing.T, mutate func(*orchestrator.Settings)) *observed {
	t.Helper()
	ow := &observed{logs: &testenv.Buffer{}, spans: tracetest.NewSpanRecorder(), metrics: metrics.New(metrics.Settings{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ow.spans))
	tr, err := tracing.New(tracing.Settings{TracerProvider: tp, ProviderNames: map[string]string{"anthropic": "anthropic", "openai": "openai", "gemini": "gcp.gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	logger := observe.NewLogger(slog.New(slog.NewJSONHandler(ow.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ow.world = newWorld(t, func(s *orchestrator.Settings) {
		s.Observer = observe.Multi(logger, tr, ow.metrics)
		if mutate != nil {
			mutate(s)
		}
	})
	return ow
}

// lines parses the JSON log lines with message msg.
func (ow *observed) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(ow.logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// noLeak fails when the prompt or an API key appears in any output.
func (ow *observed) noLeak(t *testing.T, secrets ...string) {
	t.Helper()
	all := telemetryText(t, ow.logs.String(), ow.spans, ow.metrics)
	for _, secret := range append(secrets, secretPrompt) {
		if strings.Contains(all, secret) {
			t.Errorf("%q leaked into the telemetry", secret)
		}
	}
}

// telemetryText is everything the observers produced, as text.
func telemetryText(t *testing.T, logs string, spans *tracetest.SpanRecorder, m *metrics.Observer) string {
	t.Helper()
	var all strings.Builder
	all.WriteString(logs)
	for _, s := range spans.Ended() {
		all.WriteString(s.Name() + "\n")
		for _, kv := range s.Attributes() {
			all.WriteString(string(kv.Key) + "=" + kv.Value.Emit() + "\n")
		}
		for _, r := range s.Resource().Attributes() {
			all.WriteString(string(r.Key) + "=" + r.Value.Emit() + "\n")
		}
		all.WriteString(s.Status().Description + "\n")
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		all.WriteString(mf.String() + "\n")
	}
	return all.String()
}

// spansNamed returns the ended spans in end order, children before their
// parent.
func spansNamed(rec *tracetest.SpanRecorder, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs checks attributes by their emitted text.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[attribute.Key(k)]
		switch {
		case !ok && v != "":
			t.Errorf("span %q lacks %s (want %q)", s.Name(), k, v)
		case ok && v == "":
			t.Errorf("span %q has %s=%s, want none", s.Name(), k, g.Emit())
		case ok && g.Emit() != v:
			t.Errorf("span %q: %s = %s, want %s", s.Name(), k, g.Emit(), v)
		}
	}
}

// metric returns the value of the sample of name with exactly labels.
func metric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	samples:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue samples
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func TestObservedSuccess(t *testing.T) {
	ow := newObserved(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic") })
	ow.anth.Enqueue(anthropicfake.Reply{Text: "the answer", Usage: anthropicfake.Usage{Input: 1000, Output: 100, CacheRead: 200}})
	out, oe := ow.invoke(t, orchestrator.Call{Agent: "builder", Task: "T1", Request: provider.Request{Prompt: secretPrompt, MaxTokens: 512}})
	if oe != nil {
		t.Fatal(oe)
	}

	// Traces: an invoke_agent span with one chat span under it.
	inv, chats := spansNamed(ow.spans, "invoke_agent"), spansNamed(ow.spans, "chat ")
	if len(inv) != 1 || len(chats) != 1 {
		t.Fatalf("spans: %d invoke_agent, %d chat", len(inv), len(chats))
	}
	chat := chats[0]
	if chat.Name() != "chat claude-sonnet-4-6" || inv[0].Name() != "invoke_agent builder" {
		t.Errorf("span names %q, %q", chat.Name(), inv[0].Name())
	}
	if chat.Parent().SpanID() != inv[0].SpanContext().SpanID() || chat.SpanContext().TraceID() != inv[0].SpanContext().TraceID() {
		t.Error("the chat span is not a child of the invoke_agent span")
	}
	if chat.SpanKind() != trace.SpanKindClient || chat.Status().Code == codes.Error {
		t.Errorf("chat span kind %v status %v", chat.SpanKind(), chat.Status())
	}
	wantAttrs(t, chat, map[string]string{
		"gen_ai.operation.name":                    "chat",
		"gen_ai.provider.name":                     "anthropic",
		"gen_ai.request.model":                     "claude-sonnet-4-6",
		"gen_ai.response.model":                    out.Model,
		"gen_ai.request.max_tokens":                "512",
		"gen_ai.request.stream":                    "false",
		"gen_ai.usage.input_tokens":                "1200",
		"gen_ai.usage.output_tokens":               "100",
		"gen_ai.usage.cache_read.input_tokens":     "200",
		"gen_ai.response.finish_reasons":           `["end_turn"]`,
		"cortexbuild.agent":                        "builder",
		"cortexbuild.task":                         "T1",
		"cortexbuild.provider":                     "anthropic",
		"cortexbuild.invocation_id":                out.InvocationID,
		"cortexbuild.outcome":                      "ok",
		"error.type":                               "",
		"gen_ai.usage.cache_creation.input_tokens": "",
	})
	if got := attrs(chat)["cortexbuild.cost_usd"].AsFloat64(); got != observe.USD(out.Cost) || got == 0 {
		t.Errorf("chat cost_usd = %v, want %v", got, observe.USD(out.Cost))
	}
	wantAttrs(t, inv[0], map[string]string{
		"gen_ai.operation.name": "invoke_agent",
		"gen_ai.agent.name":     "builder",
		"gen_ai.provider.name":  "anthropic",
		"cortexbuild.outcome":   "ok",
		"cortexbuild.attempts":  "1",
		// Tokens are on the chat spans only, so nothing counts them twice.
		"gen_ai.usage.input_tokens": "",
	})
	if !chat.StartTime().Equal(out.Attempts[0].StartedAt) || chat.EndTime().Sub(chat.StartTime()) != out.Attempts[0].Latency {
		t.Errorf("chat span %v..%v, attempt started %v and took %v", chat.StartTime(), chat.EndTime(), out.Attempts[0].StartedAt, out.Attempts[0].Latency)
	}

	// Logs: one attempt line (debug) and one invocation line.
	at, il := ow.lines(t, "llm attempt"), ow.lines(t, "llm invocation")
	if len(at) != 1 || len(il) != 1 {
		t.Fatalf("%d attempt lines, %d invocation lines:\n%s", len(at), len(il), ow.logs.String())
	}
	for k, v := range map[string]any{"agent": "builder", "task": "T1", "provider": "anthropic", "model": out.Model, "outcome": "ok", "input_tokens": 1200.0, "output_tokens": 100.0, "cost_usd": observe.USD(out.Cost), "invocation_id": out.InvocationID, "level": "INFO", "attempts": 1.0} {
		if il[0][k] != v {
			t.Errorf("invocation line %s = %v, want %v", k, il[0][k], v)
		}
	}
	if at[0]["level"] != "DEBUG" || at[0]["outcome"] != "ok" || at[0]["latency_ms"] == nil || at[0]["cache_read_tokens"] != 200.0 {
		t.Errorf("attempt line = %v", at[0])
	}

	// Metrics.
	reg := ow.metrics.Registry()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cortexbuild_requests_total", map[string]string{"provider": "anthropic", "model": out.Model, "agent": "builder", "outcome": "ok"}, 1},
		{"cortexbuild_attempts_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "outcome": "ok"}, 1},
		{"cortexbuild_tokens_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "agent": "builder", "direction": "input"}, 1200},
		{"cortexbuild_tokens_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "agent": "builder", "direction": "output"}, 100},
		{"cortexbuild_prompt_cache_tokens_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "agent": "builder", "op": "read"}, 200},
		{"cortexbuild_cost_usd_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "agent": "builder"}, observe.USD(out.Cost)},
		{"cortexbuild_request_duration_seconds", map[string]string{"agent": "builder", "outcome": "ok"}, 1},
		{"cortexbuild_attempt_duration_seconds", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "outcome": "ok"}, 1},
	} {
		if got := metric(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("metrics lint: %v %v", problems, err)
	}
	ow.noLeak(t)
}

func TestObservedFailover(t *testing.T) {
	ow := newObserved(t, withPreference("anthropic", true))
	ow.anth.Enqueue(anthropicfake.BillingError())
	out, oe := ow.invoke(t, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: secretPrompt}})
	if oe != nil {
		t.Fatal(oe)
	}
	if path(out.Attempts) != "anthropic/claude-sonnet-4-6:quota_exhausted openai/gpt-5-mini:ok" {
		t.Fatalf("attempts %s", path(out.Attempts))
	}
	chats := spansNamed(ow.spans, "chat ")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	inv := spansNamed(ow.spans, "invoke_agent")[0]
	first, second := chats[0], chats[1]
	wantAttrs(t, first, map[string]string{"gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-4-6", "error.type": "quota_exhausted", "cortexbuild.outcome": "quota_exhausted", "gen_ai.response.model": ""})
	if first.Status().Code != codes.Error || first.Status().Description != "quota_exhausted" {
		t.Errorf("failed attempt status = %+v", first.Status())
	}
	wantAttrs(t, second, map[string]string{"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5-mini", "error.type": "", "cortexbuild.outcome": "ok"})
	for _, c := range chats {
		if c.Parent().SpanID() != inv.SpanContext().SpanID() {
			t.Errorf("%s is not under the invocation span", c.Name())
		}
	}
	if first.EndTime().Before(first.StartTime()) || second.StartTime().Before(first.EndTime()) {
		t.Errorf("attempt spans out of order: %v..%v then %v", first.StartTime(), first.EndTime(), second.StartTime())
	}
	wantAttrs(t, inv, map[string]string{"cortexbuild.attempts": "2", "cortexbuild.outcome": "ok", "gen_ai.provider.name": "openai", "error.type": ""})

	at := ow.lines(t, "llm attempt")
	if len(at) != 2 || at[0]["level"] != "WARN" || at[0]["outcome"] != "quota_exhausted" || at[1]["outcome"] != "ok" {
		t.Errorf("attempt lines = %v", at)
	}
	reg := ow.metrics.Registry()
	if got := metric(t, reg, "cortexbuild_attempts_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "outcome": "quota_exhausted"}); got != 1 {
		t.Errorf("failed attempts = %v", got)
	}
	if got := metric(t, reg, "cortexbuild_requests_total", map[string]string{"provider": "openai", "model": out.Model, "agent": "builder", "outcome": "ok"}); got != 1 {
		t.Errorf("requests = %v", got)
	}
	ow.noLeak(t)
}

func TestObservedFailureNeverCarriesTheMessage(t *testing.T) {
	ow := newObserved(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic") })
	// The vendor's diagnostic quotes the prompt; only the kind is reported.
	ow.anth.Enqueue(anthropicfake.InvalidRequest("messages.0: " + secretPrompt + " is not allowed"))
	_, oe := ow.invoke(t, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: secretPrompt}})
	if oe == nil || !strings.Contains(oe.Error(), secretPrompt) {
		t.Fatalf("err = %v (the test needs the diagnostic to quote the prompt)", oe)
	}
	il := ow.lines(t, "llm invocation")
	if len(il) != 1 || il[0]["outcome"] != "bad_request" || il[0]["level"] != "WARN" {
		t.Errorf("invocation lines = %v", il)
	}
	inv := spansNamed(ow.spans, "invoke_agent")[0]
	wantAttrs(t, inv, map[string]string{"error.type": "bad_request"})
	if inv.Status().Code != codes.Error {
		t.Errorf("invocation status = %+v", inv.Status())
	}
	if got := metric(t, ow.metrics.Registry(), "cortexbuild_requests_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "agent": "builder", "outcome": "bad_request"}); got != 1 {
		t.Errorf("requests{outcome=bad_request} = %v", got)
	}
	ow.noLeak(t)
}

func TestObservedStream(t *testing.T) {
	ow := newObserved(t, withPreference("anthropic", true))
	ow.anth.Enqueue(anthropicfake.Overloaded(), anthropicfake.Overloaded(), anthropicfake.Overloaded())
	ow.oai.Enqueue()
	s, err := ow.o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Task: "S", Request: provider.Request{Prompt: secretPrompt}})
	if err != nil {
		t.Fatal(err)
	}
	// The three failures before the first chunk are reported at once; the
	// streaming attempt and the call only when the stream ends.
	if n, m := len(spansNamed(ow.spans, "chat ")), len(spansNamed(ow.spans, "invoke_agent")); n != 3 || m != 0 {
		t.Fatalf("before the end: %d chat spans, %d invoke_agent spans; want 3 and 0", n, m)
	}
	res, err := provider.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	chats := spansNamed(ow.spans, "chat ")
	if len(chats) != 4 {
		t.Fatalf("%d chat spans, want 4", len(chats))
	}
	last := chats[3]
	wantAttrs(t, last, map[string]string{
		"gen_ai.provider.name":       "openai",
		"gen_ai.request.stream":      "true",
		"gen_ai.response.model":      res.Model,
		"gen_ai.usage.input_tokens":  itoa(res.Usage.InputTokens),
		"gen_ai.usage.output_tokens": itoa(res.Usage.OutputTokens),
		"cortexbuild.outcome":        "ok",
		"error.type":                 "",
	})
	for _, c := range chats[:3] {
		wantAttrs(t, c, map[string]string{"error.type": "overloaded", "gen_ai.request.stream": "true"})
	}
	inv := spansNamed(ow.spans, "invoke_agent")
	if len(inv) != 1 {
		t.Fatalf("%d invoke_agent spans", len(inv))
	}
	wantAttrs(t, inv[0], map[string]string{"gen_ai.request.stream": "true", "cortexbuild.attempts": "4", "cortexbuild.outcome": "ok"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(spansNamed(ow.spans, "invoke_agent")); n != 1 {
		t.Errorf("closing after the end reported the call again: %d spans", n)
	}
	if got := metric(t, ow.metrics.Registry(), "cortexbuild_attempts_total", map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-6", "outcome": "overloaded"}); got != 3 {
		t.Errorf("overloaded attempts = %v", got)
	}
	ow.noLeak(t)
}

func TestObservedStreamClosedEarly(t *testing.T) {
	ow := newObserved(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic") })
	ow.anth.Enqueue(anthropicfake.Reply{Text: "a long answer in many pieces", Usage: anthropicfake.Usage{Input: 10, Output: 30}})
	s, err := ow.o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	il := ow.lines(t, "llm invocation")
	if len(il) != 1 || il[0]["outcome"] != "canceled" {
		t.Errorf("invocation lines = %v", il)
	}
}

func TestObservedBudgetRejectionAndCacheHit(t *testing.T) {
	st := openLedger(t)
	c := cache.New(cache.NewMemory(cache.MemoryOptions{}), cache.Options{})
	ow := newObserved(t, func(s *orchestrator.Settings) {
		s.Preference, s.Ledger, s.Cache = order("anthropic"), st, c
		s.AgentBudgets = map[string]orchestrator.AgentBudget{"planner": {Limit: provider.MustMoney("0.000001")}, "critic": {Limit: provider.MustMoney("0.000001"), Escalate: true}}
	})
	_, oe := ow.invoke(t, orchestrator.Call{Agent: "planner"})
	var ee *orchestrator.EstimateError
	if oe == nil || !errors.As(oe, &ee) {
		t.Fatalf("err = %v", oe)
	}
	_, _ = ow.invoke(t, orchestrator.Call{Agent: "critic"})
	reg := ow.metrics.Registry()
	if got := metric(t, reg, "cortexbuild_budget_rejections_total", map[string]string{"agent": "planner", "scope": "agent", "reason": "over_budget"}); got != 1 {
		t.Errorf("planner rejections = %v", got)
	}
	if got := metric(t, reg, "cortexbuild_budget_rejections_total", map[string]string{"agent": "critic", "scope": "agent", "reason": "needs_approval"}); got != 1 {
		t.Errorf("critic rejections = %v", got)
	}
	if got := metric(t, reg, "cortexbuild_requests_total", map[string]string{"provider": "", "model": "", "agent": "planner", "outcome": "budget"}); got != 1 {
		t.Errorf("requests{outcome=budget} = %v", got)
	}
	il := ow.lines(t, "llm invocation")
	if len(il) != 2 || il[0]["budget_scope"] != "agent" || il[0]["budget_reason"] != "over_budget" || il[0]["limit_usd"] != 0.000001 {
		t.Errorf("budget lines = %v", il)
	}
	if n := len(spansNamed(ow.spans, "chat ")); n != 0 {
		t.Errorf("%d chat spans for refused calls", n)
	}

	// A cache hit: counted with its saving, no attempt on a provider.
	ow.anth.Enqueue(anthropicfake.Reply{Text: "the layout", Usage: anthropicfake.Usage{Input: 100, Output: 20}})
	call := orchestrator.Call{Agent: "explore", Request: provider.Request{Prompt: "summarise the repo"}}
	first, oe := ow.invoke(t, call)
	if oe != nil {
		t.Fatal(oe)
	}
	second, oe := ow.invoke(t, call)
	if oe != nil || !second.CacheHit {
		t.Fatalf("second = %+v %v", second, oe)
	}
	labels := map[string]string{"provider": "anthropic", "model": first.Model, "agent": "explore"}
	if got := metric(t, reg, "cortexbuild_cache_hits_total", labels); got != 1 {
		t.Errorf("cache hits = %v", got)
	}
	if got := metric(t, reg, "cortexbuild_cache_saved_usd_total", labels); got != observe.USD(first.Cost) || got == 0 {
		t.Errorf("cache savings = %v, want %v", got, observe.USD(first.Cost))
	}
	if got := metric(t, reg, "cortexbuild_attempts_total", map[string]string{"provider": "anthropic", "model": first.Attempts[0].Model, "outcome": "ok"}); got != 1 {
		t.Errorf("attempts = %v (a cache hit is no attempt)", got)
	}
	hit := spansNamed(ow.spans, "invoke_agent explore")
	if len(hit) != 2 {
		t.Fatalf("%d explore spans", len(hit))
	}
	wantAttrs(t, hit[1], map[string]string{"cortexbuild.outcome": "cache_hit", "error.type": ""})
	if got := attrs(hit[1])["cortexbuild.saved_usd"].AsFloat64(); got != observe.USD(first.Cost) {
		t.Errorf("saved_usd = %v", got)
	}
}

// A nil Observer observes nothing, and the call is unchanged.
func TestNilObserverIsOff(t *testing.T) {
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic") })
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if oe != nil || out.InvocationID == "" {
		t.Fatalf("out %+v err %v", out, oe)
	}
	if observe.Multi() != nil || observe.Multi(nil, nil) != nil {
		t.Error("Multi of nothing is not nil")
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Neither the prompt nor the API key reaches the telemetry, on success or
// on a failure whose diagnostic quotes the prompt.
func TestObservedNeverLeaksPromptOrKey(t *testing.T) {
	const key = "sk-ant-api03-LEAKPROBE-0123456789abcdef"
	srv := anthropicfake.New(anthropicfake.WithAPIKey(key))
	t.Cleanup(srv.Close)
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": key}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	ow := &observed{logs: &testenv.Buffer{}, spans: tracetest.NewSpanRecorder(), metrics: metrics.New(metrics.Settings{})}
	tr, _ := tracing.New(tracing.Settings{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ow.spans))})
	o, err := orchestrator.New(orchestrator.Settings{
		Endpoints: []orchestrator.Endpoint{{Name: "anthropic", Adapter: a}},
		Observer:  observe.Multi(observe.NewLogger(slog.New(slog.NewTextHandler(ow.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), tr, ow.metrics),
		Sleep:     func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(anthropicfake.TextReply("fine"), anthropicfake.InvalidRequest("messages.0.content: "+secretPrompt+" is too long"))
	for range 2 {
		_, _ = o.Invoke(context.Background(), orchestrator.Call{Agent: "builder", Task: "T", Request: provider.Request{System: secretPrompt, Prompt: secretPrompt}})
	}
	s, err := o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: secretPrompt}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.Collect(s); err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(ow.logs.String(), `msg="llm invocation"`); c != 3 {
		t.Errorf("%d invocation lines, want 3:\n%s", c, ow.logs.String())
	}
	if len(spansNamed(ow.spans, "chat ")) != 3 {
		t.Errorf("%d chat spans, want 3", len(spansNamed(ow.spans, "chat ")))
	}
	ow.noLeak(t, key, "LEAKPROBE")
}

// breakerLog records breaker changes.
type breakerLog struct {
	observe.Nop
	mu  sync.Mutex
	got []string
}

func (b *breakerLog) BreakerChanged(prov string, s observe.BreakerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, prov+" "+s.String())
}

func TestObservedBreakerTransitions(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	bl := &breakerLog{}
	m := metrics.New(metrics.Settings{})
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.AllowAlternates, s.ServerAttempts, s.Now = order("anthropic"), true, 1, clock
		s.Breaker = orchestrator.BreakerSettings{Failures: 2, Cooldown: time.Minute}
		s.Observer = observe.Multi(bl, m)
	})
	gauge := func() float64 {
		return metric(t, m.Registry(), "cortexbuild_breaker_state", map[string]string{"provider": "anthropic"})
	}
	w.anth.Enqueue(anthropicfake.APIError(), anthropicfake.APIError())
	for range 2 {
		if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder"}); oe != nil {
			t.Fatal(oe)
		}
	}
	if g := gauge(); g != 2 {
		t.Errorf("gauge after two server failures = %v, want 2 (open)", g)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder"}) // the probe, which succeeds
	if oe != nil || out.Provider != "anthropic" {
		t.Fatalf("probe = %v %v", out, oe)
	}
	if g := gauge(); g != 0 {
		t.Errorf("gauge after the probe succeeded = %v, want 0 (closed)", g)
	}
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if got := strings.Join(bl.got, ", "); got != "anthropic open, anthropic half_open, anthropic closed" {
		t.Errorf("breaker changes: %s", got)
	}
}
