package orchestrator_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// gateWorld is the three fakes with a ledger, anthropic preferred, and a
// task started at risk.
func gateWorld(t *testing.T, risk critic.Risk, mutate func(*orchestrator.Settings)) (*world, ledger.Store) {
	t.Helper()
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.Ledger = order("anthropic"), st
		if mutate != nil {
			mutate(s)
		}
	})
	if _, err := orchestrator.StartTask(context.Background(), st, "T1", risk); err != nil {
		t.Fatal(err)
	}
	return w, st
}

// plan runs the planner on T1 and returns the model that served it.
func plan(t *testing.T, w *world) string {
	t.Helper()
	w.anth.Enqueue(anthropicfake.Reply{Text: "1. do it"})
	out, oe := w.invoke(t, orchestrator.Call{Agent: "planner", Task: "T1"})
	if oe != nil {
		t.Fatal(oe)
	}
	if out.Review != nil {
		t.Errorf("a planner's call has a review: %+v", out.Review)
	}
	return out.Attempts[len(out.Attempts)-1].Model
}

func criticCall() orchestrator.Call {
	return orchestrator.Call{Agent: "critic", Task: "T1", Request: provider.Request{System: "Review the plan. " + critic.Instruction, Prompt: "the plan"}}
}

func TestGatedCriticRunsOnAnotherVendorAndCompletes(t *testing.T) {
	w, st := gateWorld(t, critic.Medium, nil)
	author := plan(t, w)
	if critic.VendorOf(author) != "anthropic" {
		t.Fatalf("planner served by %s", author)
	}
	tr := w.o.Route(context.Background(), criticCall())
	kept := tr.Kept()
	if len(kept) == 0 || kept[0].Provider == "anthropic" && critic.SameModel(kept[0].Model, author) {
		t.Fatalf("critic route keeps the author first:\n%s", tr.String())
	}
	if critic.VendorOf(kept[0].Model) == "anthropic" {
		t.Fatalf("another vendor is configured but not preferred:\n%s", tr.String())
	}
	for _, c := range tr.Candidates {
		if c.Kept && critic.SameModel(c.Model, author) {
			t.Fatalf("the author's model is kept:\n%s", tr.String())
		}
	}
	reviewer := kept[0].Model
	w.oai.Enqueue(openaifake.Reply{Text: "The plan misses a rollback step.\n\n**independent_reviewer:** `" + reviewer + "`"})
	anthBefore := len(w.anth.Requests())
	out, oe := w.invoke(t, criticCall())
	if oe != nil {
		t.Fatal(oe)
	}
	if len(w.anth.Requests()) != anthBefore {
		t.Error("the critic's call reached the author's provider")
	}
	if out.Review == nil || out.Review.Problem != "" || out.Review.Reviewer != reviewer || out.Review.Risk != "medium" {
		t.Fatalf("review = %+v", out.Review)
	}
	done, err := orchestrator.CompleteTask(context.Background(), st, "T1")
	if err != nil {
		t.Fatal(err)
	}
	last := done.Events[len(done.Events)-1]
	if done.State != ledger.TaskCompleted || last.Kind != ledger.EventCompleted || !strings.Contains(last.Detail, reviewer) || !strings.Contains(last.Detail, author) {
		t.Errorf("completed task = %+v", done)
	}
	if _, err := orchestrator.CompleteTask(context.Background(), st, "T1"); !errors.Is(err, ledger.ErrTaskCompleted) {
		t.Errorf("second completion = %v", err)
	}
}

// rejected asserts that completing T1 is refused for reason, and that the
// refusal is on the task's trail.
func rejected(t *testing.T, st ledger.Store, reason string) {
	t.Helper()
	_, err := orchestrator.CompleteTask(context.Background(), st, "T1")
	var rj *critic.Rejection
	if !errors.As(err, &rj) || !strings.Contains(rj.Reason, reason) {
		t.Fatalf("completion error = %v; want a rejection containing %q", err, reason)
	}
	task, err := st.Task(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	last := task.Events[len(task.Events)-1]
	if task.State != ledger.TaskOpen || last.Kind != ledger.EventRejected || last.Detail != rj.Reason {
		t.Errorf("task after the refusal = %+v", task)
	}
}

func TestCompletionIsRejected(t *testing.T) {
	t.Run("no critic ran", func(t *testing.T) {
		w, st := gateWorld(t, critic.High, nil)
		plan(t, w)
		rejected(t, st, "no critic has reviewed it")
	})
	t.Run("the output lacks the field", func(t *testing.T) {
		w, st := gateWorld(t, critic.Medium, nil)
		plan(t, w)
		w.oai.Enqueue(openaifake.Reply{Text: "Looks good to me."})
		out, oe := w.invoke(t, criticCall())
		if oe != nil {
			t.Fatal(oe)
		}
		if out.Review == nil || !strings.Contains(out.Review.Problem, "no independent_reviewer line") {
			t.Fatalf("review = %+v", out.Review)
		}
		rejected(t, st, "no independent_reviewer line")
	})
	t.Run("the output names the author", func(t *testing.T) {
		w, st := gateWorld(t, critic.Medium, nil)
		author := plan(t, w)
		w.oai.Enqueue(openaifake.Reply{Text: "ok\nindependent_reviewer: " + author})
		if _, oe := w.invoke(t, criticCall()); oe != nil {
			t.Fatal(oe)
		}
		rejected(t, st, "the model that authored the plan")
	})
	t.Run("the output names another model than the one used", func(t *testing.T) {
		w, st := gateWorld(t, critic.Medium, nil)
		plan(t, w)
		w.oai.Enqueue(openaifake.Reply{Text: "independent_reviewer: gemini-2.5-pro"})
		if _, oe := w.invoke(t, criticCall()); oe != nil {
			t.Fatal(oe)
		}
		rejected(t, st, "but the critic ran on")
	})
	t.Run("the plan changed after the review", func(t *testing.T) {
		w, st := gateWorld(t, critic.Medium, nil)
		plan(t, w)
		w.oai.Enqueue(openaifake.Reply{Text: "independent_reviewer: critic"})
		out, oe := w.invoke(t, criticCall())
		if oe != nil || out.Review.Problem != "" {
			t.Fatalf("review %+v, %v", out.Review, oe)
		}
		plan(t, w)
		rejected(t, st, "revised")
	})
}

func TestLowRiskCompletesWithoutAReview(t *testing.T) {
	w, st := gateWorld(t, critic.Low, nil)
	author := plan(t, w)
	// At low risk the critic is routed as usual, the author's model included.
	tr := w.o.Route(context.Background(), criticCall())
	if kept := tr.Kept(); len(kept) == 0 || !critic.SameModel(kept[0].Model, author) {
		t.Errorf("low-risk critic route = %+v", kept)
	}
	done, err := orchestrator.CompleteTask(context.Background(), st, "T1")
	if err != nil || done.State != ledger.TaskCompleted {
		t.Fatalf("low-risk completion = %+v, %v", done, err)
	}
}

func TestEveryProviderIsTheAuthorsVendor(t *testing.T) {
	only := func(s *orchestrator.Settings) {
		s.Agents = map[string]orchestrator.AgentSettings{"critic": {Providers: []string{"anthropic"}}, "planner": {Providers: []string{"anthropic"}}}
	}
	t.Run("another model of the vendor is accepted by default", func(t *testing.T) {
		w, st := gateWorld(t, critic.Medium, only)
		author := plan(t, w)
		tr := w.o.Route(context.Background(), criticCall())
		kept := tr.Kept()
		if len(kept) == 0 || kept[0].Provider != "anthropic" || critic.SameModel(kept[0].Model, author) {
			t.Fatalf("route:\n%s", tr.String())
		}
		w.anth.Enqueue(anthropicfake.Reply{Text: "independent_reviewer: " + kept[0].Model})
		out, oe := w.invoke(t, criticCall())
		if oe != nil {
			t.Fatal(oe)
		}
		if got := out.Attempts[0].Model; critic.SameModel(got, author) || out.Review.Problem != "" {
			t.Fatalf("critic ran on %s, review %+v", got, out.Review)
		}
		if _, err := orchestrator.CompleteTask(context.Background(), st, "T1"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a required other vendor refuses the call", func(t *testing.T) {
		w, _ := gateWorld(t, critic.Medium, func(s *orchestrator.Settings) { only(s); s.Critic.RequireDifferentVendor = true })
		author := plan(t, w)
		before := len(w.anth.Requests())
		_, oe := w.invoke(t, criticCall())
		if oe == nil || !errors.Is(oe, orchestrator.ErrNoIndependentModel) || !strings.Contains(oe.Summary, author) || !strings.Contains(oe.Summary, "another vendor") {
			t.Fatalf("error = %v", oe)
		}
		if len(w.anth.Requests()) != before {
			t.Error("a provider was called")
		}
	})
	t.Run("a critic pinned to the author's model is refused, never run", func(t *testing.T) {
		w, _ := gateWorld(t, critic.Critical, nil)
		author := plan(t, w)
		w2 := w // same world, critic pinned through the request
		c := criticCall()
		c.Request.Model = author
		before := len(w2.anth.Requests())
		_, oe := w2.invoke(t, c)
		if oe == nil || !errors.Is(oe, orchestrator.ErrNoIndependentModel) || !strings.Contains(oe.Summary, "never used instead") {
			t.Fatalf("error = %v", oe)
		}
		if len(w2.anth.Requests()) != before {
			t.Error("the author's model was called")
		}
	})
}

func TestStreamedReviewIsRecorded(t *testing.T) {
	w, st := gateWorld(t, critic.Medium, nil)
	plan(t, w)
	w.oai.Enqueue(openaifake.Reply{Text: "fine\nindependent_reviewer: critic"})
	s, err := w.o.Stream(context.Background(), criticCall())
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if r := s.Review(); r == nil || r.Reviewer != "critic" || r.Problem != "" {
		t.Fatalf("streamed review = %+v", r)
	}
	if _, err := orchestrator.CompleteTask(context.Background(), st, "T1"); err != nil {
		t.Fatal(err)
	}
}

func TestTaskRules(t *testing.T) {
	st := openLedger(t)
	ctx := context.Background()
	if _, err := orchestrator.CompleteTask(ctx, st, "nope"); !errors.Is(err, ledger.ErrNoTask) || !strings.Contains(err.Error(), "cortexbuild task start nope") {
		t.Errorf("unknown task = %v", err)
	}
	if _, err := orchestrator.StartTask(ctx, st, "T", critic.High); err != nil {
		t.Fatal(err)
	}
	if _, err := orchestrator.StartTask(ctx, st, "T", critic.Low); err == nil || !strings.Contains(err.Error(), "never lowered") {
		t.Errorf("lowering the risk = %v", err)
	}
	got, err := orchestrator.StartTask(ctx, st, "T", critic.Critical)
	if err != nil || got.Risk != "critical" {
		t.Errorf("raising the risk = %+v, %v", got, err)
	}
	// A critic on a task that was never started is not gated and records
	// nothing.
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("anthropic"), st })
	w.anth.Enqueue(anthropicfake.Reply{Text: "fine"})
	out, oe := w.invoke(t, orchestrator.Call{Agent: "critic", Task: "unstarted"})
	if oe != nil || out.Review != nil {
		t.Fatalf("unstarted task: %+v, %v", out, oe)
	}
}
