package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/ledger"
)

// StartTask starts task id with a risk level, or changes the risk of a task
// already started. A risk may be raised but never lowered: lowering it would
// let a task skip the critic gate after the fact.
func StartTask(ctx context.Context, st ledger.TaskStore, id string, risk critic.Risk) (ledger.Task, error) {
	if t, err := st.Task(ctx, id); err == nil {
		if old, perr := critic.ParseRisk(t.Risk); perr == nil && risk < old {
			return t, fmt.Errorf("task %s has risk %s: a risk can be raised, never lowered (lowering it would skip the critic gate)", id, old)
		}
	} else if !errors.Is(err, ledger.ErrNoTask) {
		return ledger.Task{}, err
	}
	return st.StartTask(ctx, id, risk.String())
}

// CompleteTask completes task id. A task of medium risk or more is completed
// only when its last critic review came after its last plan and satisfied
// the gate (it named an independent reviewer, which was not the plan's
// author); otherwise the refusal is recorded on the task and returned as a
// [*critic.Rejection]. Low-risk tasks complete without a review.
func CompleteTask(ctx context.Context, st ledger.TaskStore, id string) (ledger.Task, error) {
	for {
		t, err := completeOnce(ctx, st, id)
		// A plan or review recorded while the trail was judged: judge
		// again on the new trail.
		if !errors.Is(err, ledger.ErrTaskChanged) {
			return t, err
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
	}
}

func completeOnce(ctx context.Context, st ledger.TaskStore, id string) (ledger.Task, error) {
	t, err := st.Task(ctx, id)
	if errors.Is(err, ledger.ErrNoTask) {
		return t, fmt.Errorf("task %s does not exist: start it with 'cortexbuild task start %s --risk LEVEL' (%w)", id, id, err)
	}
	if err != nil {
		return t, err
	}
	if t.State == ledger.TaskCompleted {
		return t, fmt.Errorf("task %s was completed on %s (%w)", id, t.CompletedAt.Format("2006-01-02 15:04:05Z07:00"), ledger.ErrTaskCompleted)
	}
	risk, err := critic.ParseRisk(t.Risk)
	if err != nil {
		return t, fmt.Errorf("task %s: %w", id, err)
	}
	if !risk.Gated() {
		return st.CompleteTask(ctx, id, "completed: low risk, no independent review required", len(t.Events))
	}
	decision, rj := judge(t, risk)
	if rj != nil {
		if err := st.AddTaskEvent(ctx, ledger.TaskEvent{Task: id, Kind: ledger.EventRejected, Detail: rj.Reason}); err != nil {
			return t, fmt.Errorf("%w (and the refusal could not be recorded: %v)", rj, err)
		}
		return t, rj
	}
	return st.CompleteTask(ctx, id, decision, len(t.Events))
}

// judge decides a gated task's completion from its trail.
func judge(t ledger.Task, risk critic.Risk) (string, *critic.Rejection) {
	var plan, review *ledger.TaskEvent
	stale := false // a plan came after the last review
	for i := range t.Events {
		switch e := &t.Events[i]; e.Kind {
		case ledger.EventPlan:
			plan, stale = e, review != nil
		case ledger.EventReview:
			review, stale = e, false
		}
	}
	authors := authorsOf(t)
	switch {
	case review == nil:
		return "", &critic.Rejection{Reason: fmt.Sprintf("task %s has risk %s and no critic has reviewed it", t.ID, risk),
			Fix: fmt.Sprintf("run the critic on the task (an invocation with agent critic and task %s) on a model other than the plan's author", t.ID)}
	case stale:
		return "", &critic.Rejection{Reason: fmt.Sprintf("the plan was revised (by %s at %s) after the last review", plan.Model, plan.Time.Format("15:04:05")),
			Fix: "run the critic again on the revised plan"}
	case review.Detail != "":
		return "", &critic.Rejection{Reason: "the last review does not satisfy the gate: " + review.Detail,
			Fix: "run the critic again; its output must end with: " + critic.Instruction}
	case review.Reviewer == "":
		return "", &critic.Rejection{Reason: "the last review names no independent reviewer", Fix: "the critic persona must end with: " + critic.Instruction}
	}
	for _, a := range authors {
		if critic.SameModel(a, review.Reviewer) || critic.SameModel(a, review.Model) {
			return "", &critic.Rejection{Reason: fmt.Sprintf("the last review ran on or names %s, which authored a plan of the task", a), Fix: "run the critic on another model"}
		}
	}
	by := "no plan recorded"
	if len(authors) > 0 {
		by = "plan by " + authors[len(authors)-1]
	}
	return fmt.Sprintf("approved: risk %s, independent_reviewer %s (ran on %s/%s), %s", risk, review.Reviewer, review.Provider, review.Model, by), nil
}
