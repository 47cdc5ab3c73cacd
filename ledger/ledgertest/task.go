package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// The conformance checks of [ledger.TaskStore], run by [RunStoreTests].
func runTaskTests(t *testing.T, open Opener) {
	tests := []struct {
		name string
		run  func(*env)
	}{
		{"TaskStartAndGet", testTaskStart},
		{"TaskUnknown", testTaskUnknown},
		{"TaskInvalidArguments", testTaskInvalid},
		{"TaskRiskChangeAppendsEvent", testTaskRiskChange},
		{"TaskSameRiskIsNoOp", testTaskSameRisk},
		{"TaskEventsOrderAndFields", testTaskEvents},
		{"TaskComplete", testTaskComplete},
		{"TaskCompleteOnAStaleTrail", testTaskCompleteSeen},
		{"TaskCompletedIsFinal", testTaskCompletedFinal},
		{"TaskClosedStoreIsUnavailable", testTaskClosed},
		{"ConcurrentTaskEvents", testConcurrentTaskEvents},
		{"ConcurrentTaskCompletion", testConcurrentTaskComplete},
		{"ConcurrentTaskStart", testConcurrentTaskStart},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(newEnv(t, open)) })
	}
}

// diffTask describes how got differs from want ("" if it does not); times
// are compared as instants and must be in UTC.
func diffTask(got, want ledger.Task) string {
	var d []string
	add := func(format string, a ...any) { d = append(d, fmt.Sprintf(format, a...)) }
	if got.ID != want.ID || got.Risk != want.Risk || got.State != want.State {
		add("id/risk/state %q/%q/%q; want %q/%q/%q", got.ID, got.Risk, got.State, want.ID, want.Risk, want.State)
	}
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{{"created_at", got.CreatedAt, want.CreatedAt}, {"completed_at", got.CompletedAt, want.CompletedAt}} {
		if !tm.got.Equal(tm.want) || tm.got.Location() != time.UTC && !tm.got.IsZero() {
			add("%s %v; want %v (UTC)", tm.name, tm.got, tm.want)
		}
	}
	if got.Events == nil {
		add("events nil; want a slice, empty if there are none")
	}
	if len(got.Events) != len(want.Events) {
		add("%d events; want %d:\n  got  %+v\n  want %+v", len(got.Events), len(want.Events), got.Events, want.Events)
		return strings.Join(d, "\n")
	}
	for i := range want.Events {
		g, w := got.Events[i], want.Events[i]
		if !g.Time.Equal(w.Time) || g.Time.Location() != time.UTC {
			add("event %d time %v; want %v (UTC)", i, g.Time, w.Time)
		}
		g.Time, w.Time = time.Time{}, time.Time{}
		if g != w {
			add("event %d = %+v\n  want %+v", i, g, w)
		}
	}
	return strings.Join(d, "\n")
}

func (e *env) wantTask(got ledger.Task, want ledger.Task) {
	e.t.Helper()
	if d := diffTask(got, want); d != "" {
		e.t.Errorf("task %s:\n%s", want.ID, d)
	}
}

// task reads a task, failing the test on an error.
func (e *env) task(id string) ledger.Task {
	e.t.Helper()
	tk, err := e.s.Task(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Task(%q): %v", id, err)
	}
	return tk
}

func (e *env) startTask(id, risk string) ledger.Task {
	e.t.Helper()
	tk, err := e.s.StartTask(e.ctx, id, risk)
	if err != nil {
		e.t.Fatalf("StartTask(%q, %q): %v", id, risk, err)
	}
	return tk
}

func (e *env) addTaskEvent(ev ledger.TaskEvent) {
	e.t.Helper()
	if err := e.s.AddTaskEvent(e.ctx, ev); err != nil {
		e.t.Fatalf("AddTaskEvent(%+v): %v", ev, err)
	}
}

// wantTaskErr checks that err wraps target and names the task.
func wantTaskErr(t *testing.T, what string, err, target error, id string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v; want %v", what, err, target)
		return
	}
	if !strings.Contains(err.Error(), id) {
		t.Errorf("%s: error %q does not name task %q", what, err, id)
	}
}

func testTaskStart(e *env) {
	want := ledger.Task{ID: "task-a", Risk: "low", State: ledger.TaskOpen, CreatedAt: e.clock.Now(), Events: []ledger.TaskEvent{}}
	e.wantTask(e.startTask("task-a", "low"), want)
	e.clock.Advance(time.Minute)
	e.wantTask(e.task("task-a"), want)
	// Ids are those of task scopes: unicode, inner spaces, 200 bytes.
	for _, id := range []string{"tâche 7 — révision", strings.Repeat("x", 200), "task:with:colons"} {
		tk := e.startTask(id, "critical")
		e.wantTask(tk, ledger.Task{ID: id, Risk: "critical", State: ledger.TaskOpen, CreatedAt: e.clock.Now(), Events: []ledger.TaskEvent{}})
		e.wantTask(e.task(id), tk)
	}
	// Tasks are apart from each other and from budgets.
	e.wantTask(e.task("task-a"), want)
	if b, err := e.s.Budget(e.ctx, ledger.TaskScope("task-a")); err != nil || b != (ledger.Budget{Scope: ledger.TaskScope("task-a")}) {
		e.t.Errorf("Budget of a started task = %+v, %v; want untouched", b, err)
	}
	b, err := json.Marshal(e.task("task-a"))
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), `"events":[]`) || strings.Contains(string(b), "completed_at") {
		e.t.Errorf("JSON of an open task without events: %s", b)
	}
}

func testTaskUnknown(e *env) {
	const id = "no-such-task"
	_, err := e.s.Task(e.ctx, id)
	wantTaskErr(e.t, "Task of an unknown task", err, ledger.ErrNoTask, id)
	_, err = e.s.CompleteTask(e.ctx, id, "ship", -1)
	wantTaskErr(e.t, "CompleteTask of an unknown task", err, ledger.ErrNoTask, id)
	err = e.s.AddTaskEvent(e.ctx, ledger.TaskEvent{Task: id, Kind: ledger.EventPlan, Model: "opus"})
	wantTaskErr(e.t, "AddTaskEvent to an unknown task", err, ledger.ErrNoTask, id)
	if errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("AddTaskEvent to an unknown task: %v; want ErrNoTask only", err)
	}
	// None of them created the task.
	_, err = e.s.Task(e.ctx, id)
	wantTaskErr(e.t, "Task after the failed writes", err, ledger.ErrNoTask, id)
	// A task of the same name as a budget's scope is still unknown.
	e.budget(ledger.TaskScope(id), "1")
	_, err = e.s.Task(e.ctx, id)
	wantTaskErr(e.t, "Task of a scope with a budget", err, ledger.ErrNoTask, id)
}

func testTaskInvalid(e *env) {
	e.startTask("task-a", "low")
	for _, tc := range []struct{ name, id string }{
		{"empty id", ""},
		{"leading space", " task-a"},
		{"trailing space", "task-a "},
		{"newline in id", "task\na"},
		{"NUL in id", "task\x00a"},
		{"id of 201 bytes", strings.Repeat("x", 201)},
		{"id not UTF-8", "task-\xff"},
	} {
		if _, err := e.s.StartTask(e.ctx, tc.id, "low"); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("StartTask(%s): %v; want ErrInvalid", tc.name, err)
		}
		if _, err := e.s.Task(e.ctx, tc.id); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("Task(%s): %v; want ErrInvalid", tc.name, err)
		}
		if _, err := e.s.CompleteTask(e.ctx, tc.id, "ship", -1); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("CompleteTask(%s): %v; want ErrInvalid", tc.name, err)
		}
	}
	for _, risk := range []string{"", "  ", " high", "low\nhigh", "hi\x00gh", strings.Repeat("h", 201)} {
		for _, id := range []string{"task-a", "task-b"} {
			if _, err := e.s.StartTask(e.ctx, id, risk); !errors.Is(err, ledger.ErrInvalid) {
				e.t.Errorf("StartTask(%s, risk %q): %v; want ErrInvalid", id, risk, err)
			}
		}
	}
	if _, err := e.s.CompleteTask(e.ctx, "task-a", "ship\x00", -1); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("CompleteTask with a NUL in the decision: %v; want ErrInvalid", err)
	}
	if _, err := e.s.CompleteTask(e.ctx, "task-a", "ship \xff", -1); !errors.Is(err, ledger.ErrInvalid) {
		e.t.Errorf("CompleteTask with a decision not in UTF-8: %v; want ErrInvalid", err)
	}
	ok := ledger.TaskEvent{Task: "task-a", Kind: ledger.EventReview, Agent: "critic"}
	for _, tc := range []struct {
		name string
		edit func(*ledger.TaskEvent)
	}{
		{"no task", func(ev *ledger.TaskEvent) { ev.Task = "" }},
		{"bad task", func(ev *ledger.TaskEvent) { ev.Task = "task-a\t" }},
		{"no kind", func(ev *ledger.TaskEvent) { ev.Kind = "" }},
		{"unknown kind", func(ev *ledger.TaskEvent) { ev.Kind = "approval" }},
		{"kind in capitals", func(ev *ledger.TaskEvent) { ev.Kind = "REVIEW" }},
		{"completed kind", func(ev *ledger.TaskEvent) { ev.Kind = ledger.EventCompleted }},
		{"risk kind", func(ev *ledger.TaskEvent) { ev.Kind = ledger.EventRisk }},
		{"NUL in detail", func(ev *ledger.TaskEvent) { ev.Detail = "a\x00b" }},
		{"model not UTF-8", func(ev *ledger.TaskEvent) { ev.Model = "\xc3(" }},
		{"NUL in reviewer", func(ev *ledger.TaskEvent) { ev.Reviewer = "\x00" }},
	} {
		ev := ok
		tc.edit(&ev)
		if err := e.s.AddTaskEvent(e.ctx, ev); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("AddTaskEvent(%s): %v; want ErrInvalid", tc.name, err)
		}
	}
	// Nothing was written.
	e.wantTask(e.task("task-a"), ledger.Task{ID: "task-a", Risk: "low", State: ledger.TaskOpen, CreatedAt: Epoch, Events: []ledger.TaskEvent{}})
	if _, err := e.s.Task(e.ctx, "task-b"); !errors.Is(err, ledger.ErrNoTask) {
		e.t.Errorf("Task(task-b) after refused starts: %v; want ErrNoTask", err)
	}
}

func testTaskRiskChange(e *env) {
	created := e.clock.Now()
	e.startTask("task-a", "low")
	e.clock.Advance(time.Second)
	raised := e.clock.Now()
	want := ledger.Task{ID: "task-a", Risk: "high", State: ledger.TaskOpen, CreatedAt: created, Events: []ledger.TaskEvent{
		{Task: "task-a", Time: raised, Kind: ledger.EventRisk, Detail: "low → high"},
	}}
	e.wantTask(e.startTask("task-a", "high"), want)
	e.wantTask(e.task("task-a"), want)
	// Lowering is the caller's rule: the store records it like any change.
	e.clock.Advance(time.Second)
	want.Risk = "medium"
	want.Events = append(want.Events, ledger.TaskEvent{Task: "task-a", Time: e.clock.Now(), Kind: ledger.EventRisk, Detail: "high → medium"})
	e.wantTask(e.startTask("task-a", "medium"), want)
	e.wantTask(e.task("task-a"), want)
}

func testTaskSameRisk(e *env) {
	first := e.startTask("task-a", "medium")
	e.clock.Advance(time.Hour)
	for range 3 {
		e.wantTask(e.startTask("task-a", "medium"), first)
	}
	e.wantTask(e.task("task-a"), first)
	// Risks are compared exactly.
	e.clock.Advance(time.Second)
	got := e.startTask("task-a", "Medium")
	if got.Risk != "Medium" || len(got.Events) != 1 || got.Events[0].Detail != "medium → Medium" {
		e.t.Errorf("StartTask with another case: %+v", got)
	}
}

func testTaskEvents(e *env) {
	e.startTask("task-a", "high")
	e.startTask("task-b", "low")
	t0 := Epoch
	detail := "naïve plan: 設計 → 実装 🚀\nsecond line\r\n\ttabbed \"quoted\" 'single' \\ back\u2028sep\u00a0nbsp"
	plan := ledger.TaskEvent{Task: "task-a", Time: t0.Add(2 * time.Second), Kind: ledger.EventPlan,
		InvocationID: "inv-plan", Agent: "planner", Provider: "anthropic-main", Model: "opus", Detail: detail}
	// In another time zone: returned in UTC, the same instant.
	review1 := ledger.TaskEvent{Task: "task-a", Time: t0.Add(time.Second).In(time.FixedZone("UTC+5:45", 5*3600+45*60)), Kind: ledger.EventReview,
		InvocationID: "inv-rev-1", Agent: "critic", Provider: "openai-main", Model: "gpt", Reviewer: "critic@openai-main/gpt"}
	// The same instant: after review1, the order they were added in.
	review2 := ledger.TaskEvent{Task: "task-a", Time: t0.Add(time.Second), Kind: ledger.EventReview,
		InvocationID: "inv-rev-2", Agent: "critic", Provider: "anthropic-main", Model: "opus", Reviewer: "",
		Detail: "reviewer is the plan's own model"}
	rejected := ledger.TaskEvent{Task: "task-a", Time: t0.Add(time.Second), Kind: ledger.EventRejected, Detail: "no independent review"}
	later := ledger.TaskEvent{Task: "task-a", Time: t0.Add(time.Second + time.Nanosecond), Kind: ledger.EventPlan, Model: "m"}
	other := ledger.TaskEvent{Task: "task-b", Time: t0, Kind: ledger.EventPlan, Model: "haiku"}
	for _, ev := range []ledger.TaskEvent{plan, review1, other, review2, rejected, later} {
		e.addTaskEvent(ev)
	}
	// Without a time: the store's clock.
	e.clock.Advance(10 * time.Second)
	noTime := ledger.TaskEvent{Task: "task-a", Kind: ledger.EventReview, Agent: "critic", Detail: "late"}
	e.addTaskEvent(noTime)
	noTime.Time = e.clock.Now()
	review1.Time = review1.Time.UTC()
	e.wantTask(e.task("task-a"), ledger.Task{ID: "task-a", Risk: "high", State: ledger.TaskOpen, CreatedAt: Epoch,
		Events: []ledger.TaskEvent{review1, review2, rejected, later, plan, noTime}})
	e.wantTask(e.task("task-b"), ledger.Task{ID: "task-b", Risk: "low", State: ledger.TaskOpen, CreatedAt: Epoch,
		Events: []ledger.TaskEvent{other}})
	// The JSON keeps the text as it was.
	b, err := json.Marshal(e.task("task-a").Events[4])
	if err != nil {
		e.t.Fatal(err)
	}
	var back ledger.TaskEvent
	if err := json.Unmarshal(b, &back); err != nil {
		e.t.Fatal(err)
	}
	if !back.Time.Equal(plan.Time) || back.Detail != detail || back.Model != "opus" || back.Task != "" {
		e.t.Errorf("JSON round trip of %s = %+v", b, back)
	}
	// Events at the same instant keep the order they were added in, many of
	// them too.
	e.startTask("task-c", "low")
	var want []ledger.TaskEvent
	for i := range 40 {
		ev := ledger.TaskEvent{Task: "task-c", Time: t0, Kind: ledger.EventReview, InvocationID: fmt.Sprintf("i%02d", i)}
		e.addTaskEvent(ev)
		want = append(want, ev)
	}
	e.wantTask(e.task("task-c"), ledger.Task{ID: "task-c", Risk: "low", State: ledger.TaskOpen, CreatedAt: e.clock.Now(), Events: want})
}

func testTaskComplete(e *env) {
	e.startTask("task-a", "low")
	e.clock.Advance(time.Second)
	e.startTask("task-a", "high")
	plan := ledger.TaskEvent{Task: "task-a", Time: e.clock.Now(), Kind: ledger.EventPlan, Model: "opus"}
	e.addTaskEvent(plan)
	e.clock.Advance(time.Minute)
	done := e.clock.Now()
	decision := "ship it:\nreviewed by critic@openai-main/gpt ✓"
	got, err := e.s.CompleteTask(e.ctx, "task-a", decision, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	want := ledger.Task{ID: "task-a", Risk: "high", State: ledger.TaskCompleted, CreatedAt: Epoch, CompletedAt: done,
		Events: []ledger.TaskEvent{
			{Task: "task-a", Time: Epoch.Add(time.Second), Kind: ledger.EventRisk, Detail: "low → high"},
			plan,
			{Task: "task-a", Time: done, Kind: ledger.EventCompleted, Detail: decision},
		}}
	e.wantTask(got, want)
	e.clock.Advance(time.Minute)
	e.wantTask(e.task("task-a"), want)
	// An empty decision is recorded as such.
	e.startTask("task-b", "low")
	got, err = e.s.CompleteTask(e.ctx, "task-b", "", -1)
	if err != nil {
		e.t.Fatal(err)
	}
	e.wantTask(got, ledger.Task{ID: "task-b", Risk: "low", State: ledger.TaskCompleted, CreatedAt: e.clock.Now(), CompletedAt: e.clock.Now(),
		Events: []ledger.TaskEvent{{Task: "task-b", Time: e.clock.Now(), Kind: ledger.EventCompleted}}})
	b, err := json.Marshal(got)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), `"state":"completed"`) || !strings.Contains(string(b), `"completed_at":"`) {
		e.t.Errorf("JSON of a completed task: %s", b)
	}
}

// testTaskCompleteSeen: a completion judged on an older trail is refused,
// and leaves the task open.
func testTaskCompleteSeen(e *env) {
	e.startTask("task-a", "medium")
	e.addTaskEvent(ledger.TaskEvent{Task: "task-a", Kind: ledger.EventPlan, Model: "opus"})
	seen := len(e.task("task-a").Events)
	e.addTaskEvent(ledger.TaskEvent{Task: "task-a", Kind: ledger.EventPlan, Model: "opus-2"})
	_, err := e.s.CompleteTask(e.ctx, "task-a", "ship", seen)
	wantTaskErr(e.t, "CompleteTask on a stale trail", err, ledger.ErrTaskChanged, "task-a")
	if got := e.task("task-a"); got.State != ledger.TaskOpen || len(got.Events) != seen+1 {
		e.t.Errorf("after a stale completion: %+v", got)
	}
	if got, err := e.s.CompleteTask(e.ctx, "task-a", "ship", seen+1); err != nil || got.State != ledger.TaskCompleted {
		e.t.Errorf("CompleteTask on the current trail = %+v, %v", got, err)
	}
}

func testTaskCompletedFinal(e *env) {
	e.startTask("task-a", "medium")
	done, err := e.s.CompleteTask(e.ctx, "task-a", "ship", -1)
	if err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	for i := range 2 {
		_, err := e.s.CompleteTask(e.ctx, "task-a", "ship again", -1)
		wantTaskErr(e.t, fmt.Sprintf("CompleteTask #%d of a completed task", i+2), err, ledger.ErrTaskCompleted, "task-a")
	}
	for _, risk := range []string{"medium", "critical"} {
		_, err := e.s.StartTask(e.ctx, "task-a", risk)
		wantTaskErr(e.t, "StartTask("+risk+") of a completed task", err, ledger.ErrTaskCompleted, "task-a")
	}
	e.wantTask(e.task("task-a"), done)
	// The trail stays open to what happens after: a late review is kept.
	late := ledger.TaskEvent{Task: "task-a", Time: e.clock.Now(), Kind: ledger.EventReview, Agent: "critic", Detail: "late"}
	e.addTaskEvent(late)
	done.Events = append(done.Events, late)
	e.wantTask(e.task("task-a"), done)
}

func testTaskClosed(e *env) {
	e.startTask("task-a", "low")
	if err := e.s.Close(); err != nil {
		e.t.Fatal(err)
	}
	checks := map[string]error{
		"AddTaskEvent": e.s.AddTaskEvent(e.ctx, ledger.TaskEvent{Task: "task-a", Kind: ledger.EventPlan}),
	}
	_, checks["StartTask"] = e.s.StartTask(e.ctx, "task-a", "high")
	_, checks["Task"] = e.s.Task(e.ctx, "task-a")
	_, checks["CompleteTask"] = e.s.CompleteTask(e.ctx, "task-a", "ship", -1)
	for name, err := range checks {
		if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrClosed) {
			e.t.Errorf("%s on a closed store: %v; want ErrClosed, an ErrUnavailable", name, err)
		}
	}
}

func testConcurrentTaskEvents(e *env) {
	e.startTask("task-a", "high")
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = e.s.AddTaskEvent(e.ctx, ledger.TaskEvent{Task: "task-a", Kind: ledger.EventReview,
				InvocationID: fmt.Sprintf("inv-%03d", i), Agent: "critic", Detail: fmt.Sprintf("review %d", i)})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	tk := e.task("task-a")
	var ids []string
	for _, ev := range tk.Events {
		var i int
		if _, err := fmt.Sscanf(ev.InvocationID, "inv-%d", &i); err != nil || ev.Kind != ledger.EventReview || ev.Agent != "critic" ||
			ev.Detail != fmt.Sprintf("review %d", i) || !ev.Time.Equal(e.clock.Now()) {
			e.t.Errorf("event %+v", ev)
		}
		ids = append(ids, ev.InvocationID)
	}
	slices.Sort(ids)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("inv-%03d", i))
	}
	if !slices.Equal(ids, want) {
		e.t.Errorf("%d events recorded: %v; want each of %d exactly once", len(ids), ids, n)
	}
}

func testConcurrentTaskComplete(e *env) {
	e.startTask("task-a", "critical")
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.s.CompleteTask(e.ctx, "task-a", fmt.Sprintf("decision %d", i), -1)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				e.t.Errorf("completions %d and %d both succeeded", winner, i)
			}
			winner = i
		case !errors.Is(err, ledger.ErrTaskCompleted):
			e.t.Errorf("concurrent completion %d: %v; want ErrTaskCompleted", i, err)
		}
	}
	if winner < 0 {
		e.t.Fatal("no completion succeeded")
	}
	e.wantTask(e.task("task-a"), ledger.Task{ID: "task-a", Risk: "critical", State: ledger.TaskCompleted, CreatedAt: Epoch, CompletedAt: Epoch,
		Events: []ledger.TaskEvent{{Task: "task-a", Time: Epoch, Kind: ledger.EventCompleted, Detail: fmt.Sprintf("decision %d", winner)}}})
}

// Concurrent starts of one new task create it once; their risk changes
// form one chain.
func testConcurrentTaskStart(e *env) {
	const n = 16
	risks := []string{"low", "high", "medium"}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = e.s.StartTask(e.ctx, "task-a", risks[i%len(risks)]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	tk := e.task("task-a")
	if tk.State != ledger.TaskOpen || !tk.CreatedAt.Equal(Epoch) || len(tk.Events) >= n {
		e.t.Errorf("task after concurrent starts: %+v", tk)
	}
	if len(tk.Events) == 0 {
		return // every start that ran after the first asked for its risk
	}
	var first string
	prev := ""
	for i, ev := range tk.Events {
		from, to, ok := strings.Cut(ev.Detail, " → ")
		if ev.Kind != ledger.EventRisk || !ok || from == to || i > 0 && from != prev {
			e.t.Errorf("risk events do not chain: %+v", tk.Events)
			return
		}
		if i == 0 {
			first = from
		}
		prev = to
	}
	if tk.Risk != prev || !slices.Contains(risks, first) {
		e.t.Errorf("risk %q after changes %+v", tk.Risk, tk.Events)
	}
}

// runTaskSiteTests checks that task records survive reopening and that a
// database of an older schema is upgraded without losing its rows; run by
// [RunSiteTests].
func runTaskSiteTests(t *testing.T, newSite SiteMaker) {
	t.Run("TasksSurviveReopening", func(t *testing.T) {
		site := newSite(t)
		clock := NewClock(Epoch)
		s := openSite(t, site, ledger.WithClock(clock.Now))
		ctx := t.Context()
		if _, err := s.StartTask(ctx, "task-a", "low"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if _, err := s.StartTask(ctx, "task-a", "high"); err != nil {
			t.Fatal(err)
		}
		if err := s.AddTaskEvent(ctx, ledger.TaskEvent{Task: "task-a", Kind: ledger.EventReview, Agent: "critic", Reviewer: "r", Detail: "ok\n✓"}); err != nil {
			t.Fatal(err)
		}
		want, err := s.CompleteTask(ctx, "task-a", "ship", -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartTask(ctx, "task-b", "medium"); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2 := openSite(t, site, ledger.WithClock(clock.Now))
		got, err := s2.Task(ctx, "task-a")
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTask(got, want); d != "" {
			t.Errorf("after reopening:\n%s", d)
		}
		if _, err := s2.CompleteTask(ctx, "task-a", "again", -1); !errors.Is(err, ledger.ErrTaskCompleted) {
			t.Errorf("completing again after reopening: %v; want ErrTaskCompleted", err)
		}
		if got, err := s2.Task(ctx, "task-b"); err != nil || got.State != ledger.TaskOpen || got.Risk != "medium" {
			t.Errorf("open task after reopening: %+v, %v", got, err)
		}
	})

	for _, v := range ledger.SchemaVersions() {
		if v == ledger.LatestSchemaVersion {
			continue
		}
		t.Run(fmt.Sprintf("UpgradeFromVersion%dKeepsRows", v), func(t *testing.T) {
			testUpgrade(t, newSite(t), v)
		})
	}
}

// testUpgrade creates site at version from, writes rows into the tables of
// that version as the older program would have, and opens it with this one.
func testUpgrade(t *testing.T, site Site, from int) {
	needOlderVersions(t, site)
	ctx := t.Context()
	if err := site.CreateAt(ctx, from); err != nil {
		t.Fatalf("creating the site at version %d: %v", from, err)
	}
	got, err := site.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, v := range ledger.SchemaVersions() {
		if v <= from {
			want = append(want, v)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("schema_version rows of the old site = %v; want %v", got, want)
	}
	row := ledger.AttemptRow{InvocationID: "old-1", Time: Epoch.Add(-48 * time.Hour), Task: "old", Agent: "coder",
		Provider: "anthropic-main", Model: "opus", Outcome: "ok", InputTokens: 1200, OutputTokens: 345,
		CacheReadTokens: 1000, CacheWriteTokens: 7, Cost: M("2.5"), Saving: M("0.000000001"), EstimatedUsage: true}
	// From version 4 on every row names its project: the unnamed one,
	// which the store below opens.
	inserts := []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO _S_.scopes (scope, limit_nanos, spent_nanos, paused, pause_kind, pause_reason, updated_at)
			VALUES ('task:old', 10000000000, 2500000000, false, '', '', 0)`, nil},
		{`INSERT INTO _S_.scopes (scope, limit_nanos, spent_nanos, paused, pause_kind, pause_reason, updated_at)
			VALUES ('month:2026-04', 2000000000, 2500000000, true, 'budget', 'monthly budget reached', 0)`, nil},
		{`INSERT INTO _S_.settlements (invocation_id, cost_nanos, reserved_nanos, settled_at) VALUES ('old-1', 2500000000, 3000000000, $1)`,
			[]any{row.Time.UnixNano()}},
		{`INSERT INTO _S_.attempts (invocation_id, at, task, agent, provider, model, outcome,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanos, cache_hit, saving_nanos, estimated)
			VALUES ('old-1', $1, 'old', 'coder', 'anthropic-main', 'opus', 'ok', 1200, 345, 1000, 7, 2500000000, false, 1, true)`,
			[]any{row.Time.UnixNano()}},
	}
	if from >= 4 {
		for i := range inserts {
			for _, table := range []string{"scopes", "attempts"} {
				if strings.HasPrefix(inserts[i].sql, "INSERT INTO _S_."+table+" (") {
					inserts[i].sql = strings.Replace(strings.Replace(inserts[i].sql, " (", " (project, ", 1), "VALUES (", "VALUES ('', ", 1)
				}
			}
		}
	}
	for _, q := range inserts {
		if err := site.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("writing the old rows: %v\n%s", err, q.sql)
		}
	}

	clock := NewClock(Epoch)
	s := openSite(t, site, ledger.WithClock(clock.Now))
	wantVersions(t, site)
	if v, err := s.SchemaVersion(ctx); err != nil || v != ledger.LatestSchemaVersion {
		t.Errorf("SchemaVersion after the upgrade = %d, %v; want %d", v, err, ledger.LatestSchemaVersion)
	}
	if b, err := s.Budget(ctx, "task:old"); err != nil || b != (ledger.Budget{Scope: "task:old", Limited: true, Limit: M("10"), Spent: M("2.5")}) {
		t.Errorf("old budget after the upgrade: %+v, %v", b, err)
	}
	if reason, paused, err := s.Paused(ctx, "month:2026-04"); err != nil || !paused || reason != "monthly budget reached" {
		t.Errorf("old pause after the upgrade: %q %v %v", reason, paused, err)
	}
	// Raising the budget lifts the old budget pause, as it would have.
	if err := s.SetBudget(ctx, "month:2026-04", M("3")); err != nil {
		t.Fatal(err)
	}
	if _, paused, err := s.Paused(ctx, "month:2026-04"); err != nil || paused {
		t.Errorf("old budget pause not lifted by raising the budget: %v %v", paused, err)
	}
	rows, err := s.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].Time.Equal(row.Time) {
		t.Fatalf("old ledger rows after the upgrade: %+v", rows)
	}
	rows[0].Time = row.Time
	if rows[0] != row {
		t.Errorf("old ledger row after the upgrade = %+v\nwant %+v", rows[0], row)
	}
	if err := s.Settle(ctx, ledger.Settlement{InvocationID: "old-1", Cost: 1, Scopes: []ledger.Scope{"task:old"}}); !errors.Is(err, ledger.ErrAlreadySettled) {
		t.Errorf("settling an old settlement again: %v; want ErrAlreadySettled", err)
	}
	// The new tables work, next to the old rows.
	if _, err := s.StartTask(ctx, "old", "high"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTaskEvent(ctx, ledger.TaskEvent{Task: "old", Kind: ledger.EventPlan, InvocationID: "old-1", Model: "opus"}); err != nil {
		t.Fatal(err)
	}
	if tk, err := s.CompleteTask(ctx, "old", "ship", -1); err != nil || tk.State != ledger.TaskCompleted || len(tk.Events) != 2 {
		t.Errorf("CompleteTask after the upgrade = %+v, %v", tk, err)
	}
	if rep, err := s.Spend(ctx, ledger.Filter{By: ledger.ByTask}); err != nil || rep.Total.Cost != M("2.5") || len(rep.Groups) != 1 || rep.Groups[0].Key != "old" {
		t.Errorf("Spend after the upgrade = %+v, %v", rep, err)
	}
	// The old rows name no virtual key; a new row names its own.
	if err := s.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: "new-1", Time: Epoch, Key: "k1", Provider: "p", Outcome: "ok", Cost: M("1")}); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Spend(ctx, ledger.Filter{By: ledger.ByKey}); err != nil || len(rep.Groups) != 2 ||
		rep.Groups[0].Key != "" || rep.Groups[0].Cost != M("2.5") || rep.Groups[1].Key != "k1" || rep.Groups[1].Cost != M("1") {
		t.Errorf("Spend by key after the upgrade = %+v, %v", rep, err)
	}
	// Opening again changes nothing.
	s.Close()
	s = openSite(t, site, ledger.WithClock(clock.Now))
	wantVersions(t, site)
	if tk, err := s.Task(ctx, "old"); err != nil || tk.State != ledger.TaskCompleted {
		t.Errorf("task after reopening the upgraded site: %+v, %v", tk, err)
	}
}
