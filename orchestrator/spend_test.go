package orchestrator_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func openLedger(t *testing.T) ledger.Store {
	t.Helper()
	st, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestReserveThenSettleToTheActualCost(t *testing.T) {
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic"); s.Ledger = st })
	w.anth.Enqueue(anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t1", Request: provider.Request{Prompt: "hi", MaxTokens: 1000}})
	if oe != nil {
		t.Fatal(oe)
	}
	// sonnet-4-6: 1000×3 + 100×15 = 4500 per million.
	if out.Cost != provider.MustMoney("0.0045") || out.Estimate < out.Cost {
		t.Fatalf("cost %s estimate %s", out.Cost, out.Estimate)
	}
	b, _ := st.Budget(context.Background(), ledger.TaskScope("t1"))
	if b.Spent != out.Cost || b.Held != 0 {
		t.Errorf("task scope = %+v", b)
	}
	rep, _ := st.Spend(context.Background(), ledger.Filter{Task: "t1"})
	if rep.Total.Cost != out.Cost || rep.Total.Attempts != 1 || rep.Total.InputTokens != 1000 {
		t.Errorf("ledger = %+v", rep.Total)
	}
}

func TestBudgetsRefuseBeforeAnyProviderCall(t *testing.T) {
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.Ledger = order("anthropic"), st
		s.AgentBudgets = map[string]orchestrator.AgentBudget{"planner": {Limit: provider.MustMoney("0.001")}, "critic": {Limit: provider.MustMoney("0.001"), Escalate: true}}
	})
	_, oe := w.invoke(t, orchestrator.Call{Agent: "planner"})
	var ee *orchestrator.EstimateError
	if oe == nil || !errors.As(oe, &ee) || ee.NeedsApproval {
		t.Fatalf("agent budget abort = %v", oe)
	}
	_, oe = w.invoke(t, orchestrator.Call{Agent: "critic"})
	if oe == nil || !errors.As(oe, &ee) || !ee.NeedsApproval {
		t.Fatalf("agent budget escalate = %v", oe)
	}
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "critic", Approved: true}); oe != nil {
		t.Errorf("approved call refused: %v", oe)
	}
	if err := st.SetBudget(context.Background(), ledger.TaskScope("tiny"), provider.MustMoney("0.0001")); err != nil {
		t.Fatal(err)
	}
	before := len(w.anth.Requests())
	_, oe = w.invoke(t, orchestrator.Call{Agent: "builder", Task: "tiny"})
	if oe == nil || !errors.Is(oe, ledger.ErrOverBudget) || len(w.anth.Requests()) != before {
		t.Errorf("task budget = %v, %d provider calls", oe, len(w.anth.Requests())-before)
	}
	// A call that does not fit pauses nothing: a smaller one still runs.
	if _, paused, _ := st.Paused(context.Background(), ledger.TaskScope("tiny")); paused {
		t.Error("a call that did not fit paused its task")
	}
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "tiny", Request: provider.Request{Prompt: "x", MaxTokens: 1}}); oe != nil {
		t.Errorf("small call that fits = %v", oe)
	}
	if err := st.SetBudget(context.Background(), ledger.TaskScope("tiny"), provider.Dollar); err != nil {
		t.Fatal(err)
	}
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "tiny"}); oe != nil {
		t.Errorf("after raising the budget: %v", oe)
	}
}

// fixedWorld is a world on a clock stopped at the test's start, in UTC,
// recording to st, with
// anthropic preferred.
func fixedWorld(t *testing.T, st ledger.Store) (*world, ledger.Scope) {
	now := time.Now().UTC() // the ledger checks holds against its own clock
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.Ledger = order("anthropic"), st
		s.Now, s.Location = func() time.Time { return now }, time.UTC
	})
	return w, ledger.MonthScope(now)
}

func pausedScopes(t *testing.T, st ledger.Store, scopes ...ledger.Scope) []string {
	t.Helper()
	var out []string
	for _, sc := range scopes {
		if _, paused, err := st.Paused(context.Background(), sc); err != nil {
			t.Fatal(err)
		} else if paused {
			out = append(out, string(sc))
		}
	}
	return out
}

// A call whose output limit is far beyond anything the model can produce
// is priced at the model's own output limit; one that still does not fit
// a budget is refused and pauses nothing, even when the month is the scope
// that refused it, and other callers go on.
func TestCallThatDoesNotFitPausesNothing(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	w, month := fixedWorld(t, st)
	task := ledger.TaskScope("bound")
	for sc, limit := range map[ledger.Scope]string{month: "0.50", task: "5"} {
		if err := st.SetBudget(ctx, sc, provider.MustMoney(limit)); err != nil {
			t.Fatal(err)
		}
	}
	huge := provider.Request{Prompt: "hello", MaxTokens: 1<<31 - 1}
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "bound", Request: huge})
	var be *ledger.BudgetError
	if oe == nil || !errors.As(oe, &be) || be.Scope != month {
		t.Fatalf("huge call = %v, want refused by the month", oe)
	}
	// The estimate is the model's 64,000 output tokens at $15/M plus the
	// prompt, not 2^31 tokens ($32,212).
	if be.Asked < provider.MustMoney("0.96") || be.Asked > provider.MustMoney("1.00") {
		t.Errorf("huge call estimated at $%s, want the model's output limit priced (about $0.96)", be.Asked)
	}
	if !strings.Contains(oe.Summary, "nothing was paused") {
		t.Errorf("summary %q does not say nothing was paused", oe.Summary)
	}
	if p := pausedScopes(t, st, month, task); len(p) != 0 {
		t.Errorf("a call that did not fit paused %v", p)
	}
	if len(w.anth.Requests()) != 0 {
		t.Errorf("%d requests sent for a refused call", len(w.anth.Requests()))
	}
	// Another caller, and the same task with a call that fits, are served.
	for _, c := range []orchestrator.Call{{Agent: "builder"}, {Agent: "builder", Task: "bound", Request: provider.Request{Prompt: "hi", MaxTokens: 100}}} {
		if _, oe := w.invoke(t, c); oe != nil {
			t.Errorf("call after the refusal (task %q) = %v", c.Task, oe)
		}
	}
}

// A scope is paused only when it is exhausted: less than the smallest
// plausible call left of it. A call bound to a task pauses at most its
// task; a call with no task can pause the month.
func TestPauseFollowsOnlyExhaustion(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	w, month := fixedWorld(t, st)
	task := ledger.TaskScope("nearly")
	if err := st.SetBudget(ctx, task, provider.MustMoney("0.01")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetBudget(ctx, month, provider.MustMoney("0.01")); err != nil {
		t.Fatal(err)
	}
	// One call leaves $0.000001 of both (3333 input tokens at $3/M).
	w.anth.Enqueue(anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 3333}})
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "nearly", Request: provider.Request{Prompt: "x", MaxTokens: 1}}); oe != nil {
		t.Fatal(oe)
	}
	if p := pausedScopes(t, st, month, task); len(p) != 0 {
		t.Fatalf("paused %v before anything was refused (spend is below the limits)", p)
	}
	// The next call of the task finds it exhausted: the task is paused,
	// the month it shares with everyone is not, although it is exhausted
	// too and sorts first.
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "nearly", Request: provider.Request{Prompt: "x", MaxTokens: 1}}); oe == nil || !errors.Is(oe, ledger.ErrOverBudget) {
		t.Fatalf("call on an exhausted task = %v", oe)
	}
	if p := pausedScopes(t, st, month, task); len(p) != 1 || p[0] != string(task) {
		t.Fatalf("paused %v, want only %s", p, task)
	}
	// A call with no task finds the month exhausted and pauses it.
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "x", MaxTokens: 1}}); oe == nil || !errors.Is(oe, ledger.ErrOverBudget) {
		t.Fatalf("call on an exhausted month = %v", oe)
	}
	if p := pausedScopes(t, st, month); len(p) != 1 {
		t.Errorf("month not paused once a call with no task found it exhausted")
	}
}

// A provider that bills beyond the request's own limits (more than the
// estimate) is charged in full and reported, naming the provider, the
// model, the estimate and the actual cost.
func TestOverBillingIsRecordedAndReported(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	w, _ := fixedWorld(t, st)
	w.anth.Enqueue(anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 10, Output: 5000}}) // 5000 output tokens for max_tokens 10
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "over", Request: provider.Request{Prompt: "x", MaxTokens: 10}})
	if oe != nil {
		t.Fatal(oe)
	}
	cost := out.Attempts[0].Cost
	if cost <= out.Estimate {
		t.Fatalf("cost $%s within the estimate $%s: the fake did not over-bill", cost, out.Estimate)
	}
	if b, _ := st.Budget(ctx, ledger.TaskScope("over")); b.Spent != cost {
		t.Errorf("task spent $%s, want the full cost $%s", b.Spent, cost)
	}
	w.drain()
	w.mu.Lock()
	defer w.mu.Unlock()
	var found bool
	for _, n := range w.notes {
		if n.Event == "over_estimate" {
			found = true
			for _, want := range []string{"anthropic/claude-sonnet-4-6", "$" + cost.String(), "estimate $" + out.Estimate.String(), "5000 output"} {
				if !strings.Contains(n.Message, want) {
					t.Errorf("over_estimate message %q lacks %q", n.Message, want)
				}
			}
			if n.Level != "warning" || n.Provider != "anthropic" {
				t.Errorf("over_estimate = %+v", n)
			}
		}
	}
	if !found {
		t.Errorf("no over_estimate notification; got %+v", w.notes)
	}
}

func TestTaskPausesWhenItsBudgetIsReached(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	// Room for the estimate of one call; the actual spend then reaches the limit.
	if err := st.SetBudget(ctx, ledger.TaskScope("t"), provider.MustMoney("0.02")); err != nil {
		t.Fatal(err)
	}
	w.anth.Enqueue(anthropicfake.Reply{Text: "big", Usage: anthropicfake.Usage{Input: 5000, Output: 1000}}) // $0.03 actual
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t", Request: provider.Request{Prompt: "x", MaxTokens: 1000}}); oe != nil {
		t.Fatal(oe)
	}
	if _, paused, _ := st.Paused(ctx, ledger.TaskScope("t")); !paused {
		t.Fatal("task not paused after reaching its budget")
	}
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t"})
	if oe == nil || !errors.Is(oe, ledger.ErrPaused) {
		t.Errorf("call on a paused task = %v", oe)
	}
}

func TestUnpriceablePaidCallIsRefused(t *testing.T) {
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi", Model: "claude-unreleased-9"}})
	if oe == nil || !errors.Is(oe, orchestrator.ErrUnpriced) || len(w.anth.Requests()) != 0 {
		t.Errorf("unpriced = %v", oe)
	}
}

func TestClosedLedgerFailsPaidCallsClosed(t *testing.T) {
	st := openLedger(t)
	st.Close()
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger, s.FreeFailsOpen = order("anthropic"), st, true })
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if oe == nil || !errors.Is(oe, ledger.ErrUnavailable) || len(w.anth.Requests()) != 0 {
		t.Errorf("closed ledger = %v", oe)
	}
}

func TestStreamSettlesPartialUsage(t *testing.T) {
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	w.anth.Enqueue(anthropicfake.Reply{Text: "partial answer that breaks", Usage: anthropicfake.Usage{Input: 2000, Output: 50},
		MidStreamError: &anthropicfake.StreamError{Type: "overloaded_error", Message: "Overloaded", AfterEvents: 4}})
	s, err := w.o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Task: "s", Request: provider.Request{Prompt: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.Collect(s); provider.KindOf(err) != provider.KindOverloaded {
		t.Fatalf("err = %v", err)
	}
	b, _ := st.Budget(context.Background(), ledger.TaskScope("s"))
	if b.Spent == 0 || b.Held != 0 {
		t.Errorf("partial usage not settled: %+v", b)
	}
}

func TestCacheHitsAreFreeAndRecorded(t *testing.T) {
	st := openLedger(t)
	c := cache.New(cache.NewMemory(cache.MemoryOptions{}), cache.Options{})
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger, s.Cache = order("anthropic"), st, c })
	w.anth.Enqueue(anthropicfake.Reply{Text: "the layout", Usage: anthropicfake.Usage{Input: 100, Output: 20}})
	call := orchestrator.Call{Agent: "explore", Task: "c", Request: provider.Request{Prompt: "summarise the repo"}}
	first, oe := w.invoke(t, call)
	if oe != nil || first.CacheHit {
		t.Fatalf("first = %+v %v", first, oe)
	}
	second, oe := w.invoke(t, call)
	if oe != nil || !second.CacheHit || second.Cost != 0 || second.Content != "the layout" || second.Saved != first.Cost {
		t.Fatalf("second = %+v %v", second, oe)
	}
	if n := len(w.anth.Requests()); n != 1 {
		t.Errorf("%d provider calls for a cached request", n)
	}
	rep, _ := st.Spend(context.Background(), ledger.Filter{Task: "c"})
	if rep.Total.CacheHits != 1 || rep.Total.Savings != first.Cost || rep.Total.Cost != first.Cost {
		t.Errorf("ledger = %+v", rep.Total)
	}
	// Agents that are not read-only are not cached by default.
	w.anth.Enqueue(anthropicfake.TextReply("a"), anthropicfake.TextReply("b"))
	for range 2 {
		if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "same"}}); oe != nil {
			t.Fatal(oe)
		}
	}
	if n := len(w.anth.Requests()); n != 3 {
		t.Errorf("builder was cached: %d calls", n)
	}
}

func TestConcurrentIdenticalMissesMakeOneCall(t *testing.T) {
	c := cache.New(cache.NewMemory(cache.MemoryOptions{}), cache.Options{})
	var calls atomic.Int64
	gate := make(chan struct{})
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Cache = order("anthropic"), c })
	w.anth.Enqueue(anthropicfake.TextReply("one answer").WithHold(gate))
	var wg sync.WaitGroup
	results := make([]*orchestrator.Outcome, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := w.o.Invoke(context.Background(), orchestrator.Call{Agent: "explore", Request: provider.Request{Prompt: "same question"}})
			if err == nil {
				calls.Add(1)
				results[i] = out
			}
		}()
	}
	_ = w.anth.WaitRequests(context.Background(), 1)
	close(gate)
	wg.Wait()
	if calls.Load() != 10 || len(w.anth.Requests()) != 1 {
		t.Errorf("%d answers, %d provider calls", calls.Load(), len(w.anth.Requests()))
	}
	paid := 0
	for _, r := range results {
		if r != nil && !r.CacheHit {
			paid++
		}
	}
	if paid != 1 {
		t.Errorf("%d paid answers, want exactly 1", paid)
	}
}

// N concurrent invocations whose estimates together exceed a task budget:
// exactly those that fit are admitted, the rest refused before any call,
// and the spend stays within the cap.
func TestConcurrentInvocationsNeverOverspend(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	call := orchestrator.Call{Agent: "builder", Task: "cap", Request: provider.Request{Prompt: "hi", MaxTokens: 1000}}
	est, err := w.o.Estimate("anthropic", &provider.Request{Prompt: "hi", MaxTokens: 1000, Model: "claude-sonnet-4-6"})
	if err != nil {
		t.Fatal(err)
	}
	const fit = 5
	limit := est*fit + est/2
	if err := st.SetBudget(ctx, ledger.TaskScope("cap"), limit); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	for range fit {
		w.anth.Enqueue(anthropicfake.TextReply("ok").WithHold(gate))
	}
	var admitted, refused atomic.Int64
	refusals := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.o.Invoke(ctx, call)
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.Is(err, ledger.ErrOverBudget), errors.Is(err, ledger.ErrPaused):
				refused.Add(1)
				refusals <- struct{}{}
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	// The admitted calls hold their estimates while the provider holds its
	// answer; the answers are released only once every other call has been
	// refused, so no settlement can make room early.
	deadline, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for range 20 - fit {
		select {
		case <-refusals:
		case <-deadline.Done():
			close(gate)
			wg.Wait()
			t.Fatalf("only %d refusals: %d admitted", refused.Load(), admitted.Load())
		}
	}
	close(gate)
	wg.Wait()
	if admitted.Load() != fit || refused.Load() != 20-fit || len(w.anth.Requests()) != fit {
		t.Errorf("admitted %d, refused %d, provider calls %d; want %d, %d, %d", admitted.Load(), refused.Load(), len(w.anth.Requests()), fit, 20-fit, fit)
	}
	b, _ := st.Budget(ctx, ledger.TaskScope("cap"))
	if b.Spent > limit || b.Held != 0 {
		t.Errorf("budget after = %+v (limit %s)", b, limit)
	}
}

// The cache's default policy names agents of the spec's routing table.
func TestCachePolicyNamesKnownAgents(t *testing.T) {
	for _, a := range cache.ReadOnlyAgents() {
		if _, ok := orchestrator.DefaultAgentRouting[a]; !ok {
			t.Errorf("cache policy names unknown agent %q", a)
		}
	}
}

// The estimate held for a request that sets no output limit is priced at
// the agent's max_tokens, the limit the call is sent with (not 4096).
func TestEstimateUsesTheAgentsOutputLimit(t *testing.T) {
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.Ledger = order("anthropic"), st
		s.Agents = map[string]orchestrator.AgentSettings{"builder": {MaxTokens: 20000}}
	})
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "agent-limit"})
	if oe != nil {
		t.Fatal(oe)
	}
	if sent := w.anth.Requests()[0]; !strings.Contains(string(sent.Body), `"max_tokens":20000`) {
		t.Fatalf("request sent %s, want max_tokens 20000", sent.Body)
	}
	// 20,000 output tokens at $15/M alone are $0.30.
	if out.Estimate < provider.MustMoney("0.30") {
		t.Errorf("estimate $%s does not cover the agent's 20000 output tokens", out.Estimate)
	}
}

// A call is admitted with the cheap ceiling of its prompt (one token per
// byte, no tokenizer); only a call the ceiling does not fit is estimated
// exactly, and the exact bound decides it: a budget between the two admits
// it, for the agent's budget and the ledger's alike.
func TestCeilingAdmitsAndTheExactBoundDecidesNearALimit(t *testing.T) {
	ctx := context.Background()
	prompt := strings.Repeat("hello world ", 2000) // 24,000 bytes, a few thousand tokens
	req := provider.Request{Prompt: prompt, MaxTokens: 100, Model: "claude-sonnet-4-6"}
	probe := newWorld(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic") })
	exact, err := probe.o.Estimate("anthropic", &req)
	if err != nil {
		t.Fatal(err)
	}
	ceilReq := req
	ceilReq.CeilingEstimate = true
	ceiling, err := probe.o.Estimate("anthropic", &ceilReq)
	if err != nil {
		t.Fatal(err)
	}
	if ceiling <= exact*2 {
		t.Fatalf("ceiling $%s, exact $%s: the prompt does not tell them apart", ceiling, exact)
	}
	between := (exact + ceiling) / 2
	for _, tc := range []struct {
		name         string
		task, agent  provider.Money
		wantEstimate provider.Money
	}{
		{"far from every limit", provider.MustMoney("100"), 0, ceiling},
		{"task budget between", between, 0, exact},
		{"agent budget between", provider.MustMoney("100"), between, exact},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openLedger(t)
			w := newWorld(t, func(s *orchestrator.Settings) {
				s.Preference, s.Ledger = order("anthropic"), st
				if tc.agent > 0 {
					s.AgentBudgets = map[string]orchestrator.AgentBudget{"builder": {Limit: tc.agent}}
				}
			})
			if err := st.SetBudget(ctx, ledger.TaskScope("t"), tc.task); err != nil {
				t.Fatal(err)
			}
			w.anth.Enqueue(anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 3000, Output: 10}})
			out, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t", Request: provider.Request{Prompt: prompt, MaxTokens: 100}})
			if oe != nil {
				t.Fatalf("refused with the task budget at $%s (exact $%s, ceiling $%s): %v", tc.task, exact, ceiling, oe)
			}
			if out.Estimate != tc.wantEstimate {
				t.Errorf("held $%s; want $%s (exact $%s, ceiling $%s)", out.Estimate, tc.wantEstimate, exact, ceiling)
			}
		})
	}
	// Below the exact bound the call is refused, before any provider call.
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	if err := st.SetBudget(ctx, ledger.TaskScope("t"), exact-1); err != nil {
		t.Fatal(err)
	}
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t", Request: provider.Request{Prompt: prompt, MaxTokens: 100}}); oe == nil || !errors.Is(oe, ledger.ErrOverBudget) || !strings.Contains(oe.Error(), "$"+exact.String()) {
		t.Errorf("below the exact bound: %v; want a refusal naming the exact estimate $%s", oe, exact)
	}
}
