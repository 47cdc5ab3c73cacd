package ledger

import (
	"context"
	"errors"
	"time"
)

// Task records: the audit trail of the critic gate. A task is started with a
// risk level; the plans, reviews and decisions made on it are appended as
// events, never rewritten. The store keeps the record; what the rules are
// (which risks need an independent review, what makes a review valid) is
// decided above it.

// Task states.
const (
	TaskOpen      = "open"
	TaskCompleted = "completed"
)

// Task event kinds.
const (
	// EventPlan records the model that authored a plan on the task.
	EventPlan = "plan"
	// EventReview records a critic's review: who it named as reviewer, the
	// model it ran on, and what was wrong with it (Detail; "" when valid).
	EventReview = "review"
	// EventRejected records a refused completion and why (Detail).
	EventRejected = "rejected"
	// EventCompleted records the completion and its decision (Detail).
	EventCompleted = "completed"
	// EventRisk records a change of the task's risk (Detail: "low → high").
	EventRisk = "risk"
)

// More sentinel errors. Match them with errors.Is.
var (
	// ErrNoTask is returned for a task id the store has never seen.
	ErrNoTask = errors.New("ledger: no such task")
	// ErrTaskCompleted is returned when a completed task would be started
	// again or completed twice.
	ErrTaskCompleted = errors.New("ledger: task already completed")
	// ErrTaskChanged is returned by a completion whose decision was based
	// on events that are no longer the task's latest.
	ErrTaskChanged = errors.New("ledger: task changed since it was read")
)

// Task is one task's record.
type Task struct {
	ID string `json:"id"`
	// Risk is the risk level the task was started with (or raised to):
	// low, medium, high or critical.
	Risk      string    `json:"risk"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	// CompletedAt is zero while the task is open.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// Events are the task's events, oldest first (those of one instant in
	// the order they were added); empty, not nil, when there are none.
	Events []TaskEvent `json:"events"`
}

// TaskEvent is one entry of a task's audit trail.
type TaskEvent struct {
	Task string    `json:"-"`
	Time time.Time `json:"time"`
	// Kind is one of the Event constants.
	Kind         string `json:"kind"`
	InvocationID string `json:"invocation_id,omitempty"`
	Agent        string `json:"agent,omitempty"`
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	// Reviewer is the identity a review named in its independent_reviewer
	// field ("" when it named none).
	Reviewer string `json:"reviewer,omitempty"`
	// Detail is free text: what was wrong with a review, why a completion
	// was refused, the decision of a completion.
	Detail string `json:"detail,omitempty"`
}

// TaskStore keeps task records. Both stores implement it with the same
// guarantees as [Store]: safe for concurrent use by goroutines and
// processes, every write durable when it returns, errors wrapping
// [ErrUnavailable] when the store cannot be reached. A task id is what a
// [TaskScope] takes and a risk is the same: 1 to 200 printable characters
// without surrounding spaces; the other text (an event's fields, a
// decision) is any valid UTF-8 without NUL bytes. Malformed arguments fail
// with errors wrapping [ErrInvalid]. Errors wrapping [ErrNoTask] and
// [ErrTaskCompleted] name the task.
type TaskStore interface {
	// StartTask creates the task with risk, or, if it exists and is open,
	// sets its risk (recording an [EventRisk] with Detail "old → new" when
	// it changes; the same risk changes nothing), and returns the task. It
	// fails with [ErrTaskCompleted] for a completed task. Whether a risk
	// may be lowered is the caller's rule, not the store's.
	StartTask(ctx context.Context, id, risk string) (Task, error)
	// Task returns the task with its events, or an error wrapping
	// [ErrNoTask].
	Task(ctx context.Context, id string) (Task, error)
	// AddTaskEvent appends e to the trail of task e.Task (a zero e.Time is
	// the store's clock), open or completed. It fails with [ErrNoTask] for
	// an unknown task. e.Kind is [EventPlan], [EventReview] or
	// [EventRejected]: the [EventRisk] and [EventCompleted] events are
	// recorded by StartTask and CompleteTask only, so that the trail always
	// agrees with the task's risk and state.
	AddTaskEvent(ctx context.Context, e TaskEvent) error
	// CompleteTask marks an open task completed and appends an
	// [EventCompleted] event with decision as its Detail, in one
	// transaction, and returns the task. It fails with [ErrNoTask] or
	// [ErrTaskCompleted]; of concurrent completions of one task, exactly one
	// succeeds. seen is the number of events the decision was based on: if
	// the task has any other number by the time the transaction runs (a
	// plan or a review arrived meanwhile), nothing changes and the error
	// wraps [ErrTaskChanged]. A negative seen skips that check.
	CompleteTask(ctx context.Context, id, decision string, seen int) (Task, error)
}
