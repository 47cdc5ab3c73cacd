package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// budgetNotes returns the budget_threshold notifications recorded.
func (w *world) budgetNotes() []orchestrator.Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []orchestrator.Notification
	for _, n := range w.notes {
		if n.Event == orchestrator.EventBudgetThreshold {
			out = append(out, n)
		}
	}
	return out
}

// spendUntilPaused makes calls of $0.0021 on task until one is refused.
func spendUntilPaused(t *testing.T, w *world, task string) {
	t.Helper()
	for i := range 20 {
		w.anth.Enqueue(anthropicfake.Reply{Text: "ok", Usage: anthropicfake.Usage{Input: 200, Output: 100}}) // $0.0021 on sonnet-4-6
		if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: task, Request: provider.Request{Prompt: "x", MaxTokens: 100}}); oe != nil {
			if !errors.Is(oe, ledger.ErrPaused) && !errors.Is(oe, ledger.ErrOverBudget) {
				t.Fatal(oe)
			}
			return
		}
		if _, err := w.o.AnnounceAlerts(context.Background()); err != nil {
			t.Fatalf("after call %d: %v", i, err)
		}
	}
	t.Fatal("the task's budget never refused a call")
}

// Calls that take a task's spend across 50 %, 80 % and 100 % of its
// budget are announced once each, as they are crossed, with the level of
// the threshold; announcing again, or from another orchestrator on the
// same ledger (a restart), announces nothing more.
func TestBudgetThresholdsAreAnnouncedOnce(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	task := ledger.TaskScope("alerts")
	if err := st.SetBudget(ctx, task, provider.MustMoney("0.01")); err != nil {
		t.Fatal(err)
	}
	spendUntilPaused(t, w, "alerts")
	notes := w.budgetNotes()
	var got []string
	for _, n := range notes {
		got = append(got, n.Level+" "+n.Scope)
		if n.Project != "test" || !strings.Contains(n.Message, "task:alerts") || !strings.Contains(n.Message, "of $0.01") {
			t.Errorf("notification %+v: want the project, the scope and the limit", n)
		}
	}
	if want := []string{"info task:alerts", "warning task:alerts", "critical task:alerts"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("budget notifications = %v; want %v", got, want)
	}
	as, err := st.Alerts(ctx, 0)
	if err != nil || len(as) != 3 {
		t.Fatalf("alerts = %+v, %v", as, err)
	}
	for i, a := range as { // newest first
		n := notes[len(notes)-1-i]
		if want := fmt.Sprintf("budget of task:alerts reached %d%%: spent $%s of $0.01", a.Threshold, a.Spent); !strings.HasPrefix(n.Message, want) || !n.At.Equal(a.CrossedAt) || a.NotifiedAt.IsZero() {
			t.Errorf("notification %q at %s for alert %+v; want %q at the crossing", n.Message, n.At, a, want)
		}
	}
	if !strings.HasSuffix(notes[2].Message, "; it is paused") {
		t.Errorf("the 100 %% notification %q does not say the scope is paused", notes[2].Message)
	}
	if n, err := w.o.AnnounceAlerts(ctx); n != 0 || err != nil {
		t.Errorf("announcing again = %d, %v; want nothing", n, err)
	}
	restarted := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	if n, err := restarted.o.AnnounceAlerts(ctx); n != 0 || err != nil || len(restarted.budgetNotes()) != 0 {
		t.Errorf("a restarted orchestrator announced %d (%v): %+v", n, err, restarted.budgetNotes())
	}
}

// flaky fails its first notifications, then records.
type flaky struct {
	mu     sync.Mutex
	fails  int
	tried  int
	routed []orchestrator.Notification
}

func (f *flaky) Notify(_ context.Context, n orchestrator.Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tried++
	if f.fails > 0 {
		f.fails--
		return errors.New("webhook: 127.0.0.1 answered 503 Service Unavailable")
	}
	f.routed = append(f.routed, n)
	return nil
}

// A notification that fails is not lost: the alert stays unannounced,
// claimed for a minute (no other process sends it meanwhile), and is sent
// again once the claim runs out.
func TestFailedBudgetNotificationIsRetried(t *testing.T) {
	clock := ledgertest.NewClock(ledgertest.Epoch)
	st, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"), ledger.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	task := ledger.TaskScope("t")
	if err := st.SetBudget(ctx, task, provider.MustMoney("10")); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx, ledger.Settlement{InvocationID: "a", Cost: provider.MustMoney("6"), Scopes: []ledger.Scope{task},
		Entry: ledger.AttemptRow{Provider: "p", Outcome: "ok", Cost: provider.MustMoney("6")}}); err != nil {
		t.Fatal(err)
	}
	n := &flaky{fails: 1}
	o, err := orchestrator.New(orchestrator.Settings{Ledger: st, Notifier: n, Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := o.AnnounceAlerts(ctx); got != 0 || err == nil || !strings.Contains(err.Error(), "task:t 50%") || !strings.Contains(err.Error(), "retried") {
		t.Fatalf("AnnounceAlerts with a failing webhook = %d, %v; want an error naming the alert and its retry", got, err)
	}
	if got, err := o.AnnounceAlerts(ctx); got != 0 || err != nil {
		t.Fatalf("AnnounceAlerts while the failed alert is claimed = %d, %v; want nothing", got, err)
	}
	clock.Advance(time.Minute)
	if got, err := o.AnnounceAlerts(ctx); got != 1 || err != nil {
		t.Fatalf("AnnounceAlerts once the claim ran out = %d, %v; want the alert sent", got, err)
	}
	if n.tried != 2 || len(n.routed) != 1 || n.routed[0].Level != "info" || n.routed[0].Scope != "task:t" {
		t.Errorf("tried %d, delivered %+v; want one retry delivering the 50 %% alert", n.tried, n.routed)
	}
	clock.Advance(time.Hour)
	if got, err := o.AnnounceAlerts(ctx); got != 0 || err != nil {
		t.Errorf("after delivery: %d, %v", got, err)
	}
}

// Without a notifier nothing is announced, and nothing is marked: the
// alerts wait for a process that has one.
func TestAlertsWaitForANotifier(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	task := ledger.TaskScope("t")
	if err := st.SetBudget(ctx, task, provider.MustMoney("1")); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx, ledger.Settlement{InvocationID: "a", Cost: provider.MustMoney("0.6"), Scopes: []ledger.Scope{task},
		Entry: ledger.AttemptRow{Provider: "p", Outcome: "ok", Cost: provider.MustMoney("0.6")}}); err != nil {
		t.Fatal(err)
	}
	silent, err := orchestrator.New(orchestrator.Settings{Ledger: st})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := silent.AnnounceAlerts(ctx); got != 0 || err != nil {
		t.Fatalf("without a notifier: %d, %v", got, err)
	}
	n := &flaky{}
	o, err := orchestrator.New(orchestrator.Settings{Ledger: st, Notifier: n})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := o.AnnounceAlerts(ctx); got != 1 || err != nil || len(n.routed) != 1 {
		t.Errorf("with a notifier: %d, %v, %+v; want the waiting alert", got, err, n.routed)
	}
}

// chanNotifier hands each notification to a channel.
type chanNotifier chan orchestrator.Notification

func (c chanNotifier) Notify(_ context.Context, n orchestrator.Notification) error {
	c <- n
	return nil
}

// WatchAlerts announces what is waiting when it starts, then what is
// crossed while it runs, until its context ends.
func TestWatchAlertsAnnouncesWhileRunning(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	task := ledger.TaskScope("t")
	if err := st.SetBudget(ctx, task, provider.MustMoney("1")); err != nil {
		t.Fatal(err)
	}
	settle := func(id, cost string) {
		t.Helper()
		if err := st.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: provider.MustMoney(cost), Scopes: []ledger.Scope{task},
			Entry: ledger.AttemptRow{Provider: "p", Outcome: "ok", Cost: provider.MustMoney(cost)}}); err != nil {
			t.Fatal(err)
		}
	}
	settle("a", "0.6")
	notes := make(chanNotifier)
	o, err := orchestrator.New(orchestrator.Settings{Ledger: st, Notifier: notes})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.WatchAlerts(wctx, time.Millisecond, func(err error) { t.Error(err) })
	}()
	next := func() orchestrator.Notification {
		t.Helper()
		select {
		case n := <-notes:
			return n
		case <-time.After(time.Minute):
			t.Fatal("no notification from the watcher within a minute")
		}
		return orchestrator.Notification{}
	}
	if n := next(); !strings.Contains(n.Message, "reached 50%") {
		t.Errorf("first announcement %q; want the 50 %% waiting at start", n.Message)
	}
	settle("b", "0.3")
	if n := next(); !strings.Contains(n.Message, "reached 80%") {
		t.Errorf("second announcement %q; want the 80 %% crossed while it ran", n.Message)
	}
	stop()
	<-done
}
