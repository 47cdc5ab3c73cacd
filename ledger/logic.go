package ledger

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
)

// This file holds what both back ends share: validation, the admission
// decision, the pause reason and the grouping of spend totals. The back ends
// only move rows.

// Pause kinds, stored with a pause so that raising a budget lifts only the
// pause the budget caused.
const (
	pauseNone   = ""
	pauseBudget = "budget"
	pauseManual = "manual"
)

// scopeState is one locked scope row as Reserve sees it.
type scopeState struct {
	scope   Scope
	limited bool
	limit   provider.Money
	spent   provider.Money
	held    provider.Money // unexpired holds only
	paused  bool
	reason  string
}

// admit decides a reservation of amount against the locked states, which
// are sorted by scope: the first paused scope refuses, then the first scope
// whose limit would be exceeded.
func admit(states []scopeState, amount provider.Money) error {
	for _, st := range states {
		if st.paused {
			return &PausedError{Scope: st.scope, Reason: st.reason}
		}
	}
	for _, st := range states {
		if st.limited && exceeds(st.spent, st.held, amount, st.limit) {
			return &BudgetError{Scope: st.scope, Limit: st.limit, Spent: st.spent, Held: st.held, Asked: amount}
		}
	}
	return nil
}

// exceeds reports whether spent + held + amount > limit, without
// overflowing; all four are non-negative.
func exceeds(spent, held, amount, limit provider.Money) bool {
	if spent > limit {
		return true
	}
	room := limit - spent
	if held > room {
		return true
	}
	return amount > room-held
}

// reachedLimit reports whether a settled scope must be paused.
func reachedLimit(limited bool, limit, spent provider.Money) bool {
	return limited && spent >= limit
}

// pauseReason says why a scope was paused by its budget.
func pauseReason(s Scope, limit, spent provider.Money) string {
	switch s.Kind() {
	case KindMonth:
		return fmt.Sprintf("monthly budget reached for %s: spent $%s of $%s", s.ID(), spent, limit)
	case KindKey:
		return fmt.Sprintf("budget of API key %s reached%s: spent $%s of $%s", s.Key(), keyPeriodText(s), spent, limit)
	default:
		return fmt.Sprintf("%s budget reached: spent $%s of $%s", s.Kind(), spent, limit)
	}
}

// keyPeriodText names the period of a key scope for messages: " for
// 2026-12", or "" for the key's total budget.
func keyPeriodText(s Scope) string {
	if p := s.Period(); p != "" {
		return " for " + p
	}
	return ""
}

func validID(id string) error {
	if id == "" || len(id) > 200 || strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: invocation id %q: 1 to 200 printable characters", ErrInvalid, id)
	}
	return nil
}

// checkReservation validates r against the store's clock and returns its
// scopes in lock order.
func checkReservation(r Reservation, now time.Time) ([]Scope, error) {
	if err := validID(r.InvocationID); err != nil {
		return nil, err
	}
	if r.Amount < 0 {
		return nil, fmt.Errorf("%w: reservation %s: negative amount $%s", ErrInvalid, r.InvocationID, r.Amount)
	}
	if !r.ExpiresAt.After(now) {
		return nil, fmt.Errorf("%w: reservation %s: expires_at %s is not after now (%s)", ErrInvalid, r.InvocationID,
			r.ExpiresAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return normScopes(r.Scopes)
}

// checkSettlement validates s, fills in the id and time of its entry and
// earlier rows (on a copy of s.Earlier: the caller's rows are left as they
// are), and returns its scopes in lock order.
func checkSettlement(s *Settlement, now time.Time) ([]Scope, error) {
	if err := validID(s.InvocationID); err != nil {
		return nil, err
	}
	if s.Cost < 0 {
		return nil, fmt.Errorf("%w: settlement %s: negative cost $%s", ErrInvalid, s.InvocationID, s.Cost)
	}
	if s.Reserved < 0 {
		return nil, fmt.Errorf("%w: settlement %s: negative amount $%s drawn from a lease", ErrInvalid, s.InvocationID, s.Reserved)
	}
	if s.Lease != "" {
		if err := validID(s.Lease); err != nil {
			return nil, fmt.Errorf("settlement %s: lease: %w", s.InvocationID, err)
		}
	} else if s.Reserved > 0 {
		return nil, fmt.Errorf("%w: settlement %s: $%s drawn from no lease", ErrInvalid, s.InvocationID, s.Reserved)
	}
	if err := checkSettlementRow(s.InvocationID, &s.Entry, now); err != nil {
		return nil, err
	}
	s.Earlier = slices.Clone(s.Earlier)
	for i := range s.Earlier {
		if err := checkSettlementRow(s.InvocationID, &s.Earlier[i], now); err != nil {
			return nil, err
		}
	}
	return normScopes(s.Scopes)
}

// checkSettlementRow validates a ledger row written by the settlement of
// invocation id, and fills in its missing id and time.
func checkSettlementRow(id string, a *AttemptRow, now time.Time) error {
	switch a.InvocationID {
	case "":
		a.InvocationID = id
	case id:
	default:
		return fmt.Errorf("%w: settlement %s carries a ledger row of invocation %s", ErrInvalid, id, a.InvocationID)
	}
	return checkAttempt(a, now)
}

// checkShrink validates the arguments of Shrink.
func checkShrink(id string, amount provider.Money) error {
	if err := validID(id); err != nil {
		return err
	}
	if amount < 0 {
		return fmt.Errorf("%w: shrink %s: negative amount $%s", ErrInvalid, id, amount)
	}
	return nil
}

// checkAttempt validates a ledger row and fills in a missing time.
func checkAttempt(a *AttemptRow, now time.Time) error {
	if err := validID(a.InvocationID); err != nil {
		return err
	}
	if a.Cost < 0 || a.Saving < 0 {
		return fmt.Errorf("%w: attempt of %s: negative cost or saving", ErrInvalid, a.InvocationID)
	}
	if a.InputTokens < 0 || a.OutputTokens < 0 || a.CacheReadTokens < 0 || a.CacheWriteTokens < 0 {
		return fmt.Errorf("%w: attempt of %s: negative token count", ErrInvalid, a.InvocationID)
	}
	if a.Time.IsZero() {
		a.Time = now
	}
	a.Session, a.HostAgent, a.ParentAgent = HostID(a.Session), HostID(a.HostAgent), HostID(a.ParentAgent)
	return nil
}

func checkFilter(f Filter) error {
	if !slices.Contains(GroupBys(), f.By) {
		return fmt.Errorf("%w: group by %q: use task, agent, model, month, key, session or host_agent", ErrInvalid, f.By)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return fmt.Errorf("%w: filter from %s is not before to %s", ErrInvalid, f.From, f.To)
	}
	return nil
}

// filterWhere returns the WHERE clause selecting f's rows of project, with
// $n placeholders numbered from first, and its arguments.
func filterWhere(project string, f Filter, first int) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, first+len(args)-1))
	}
	add("project = $%d", project)
	if f.Task != "" {
		add("task = $%d", f.Task)
	}
	if f.Agent != "" {
		add("agent = $%d", f.Agent)
	}
	if f.Provider != "" {
		add("provider = $%d", f.Provider)
	}
	if f.Key != "" {
		add("key_id = $%d", f.Key)
	}
	if f.Session != "" {
		// As the rows record it: any string selects what it was recorded as.
		add("session = $%d", HostID(f.Session))
	}
	if !f.From.IsZero() {
		add("at >= $%d", f.From.UnixNano())
	}
	if !f.To.IsZero() {
		add("at < $%d", f.To.UnixNano())
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// bucketNanos is the width of the time buckets that ByMonth groups by in
// SQL before the buckets are assigned to months in Go. Every time zone's
// offset is a multiple of 15 minutes, so a bucket never straddles a month
// boundary.
const bucketNanos = int64(15 * time.Minute)

// spendQuery returns the aggregate query of the attempts table for f: one
// row per group with the key (text, or an integer bucket for ByMonth) and
// the sums, in the column order scanTotals reads.
func spendQuery(project string, f Filter, table string) (string, []any) {
	key := "''"
	switch f.By {
	case ByTask:
		key = "task"
	case ByAgent:
		key = "agent"
	case ByModel:
		key = "provider || '/' || model"
	case ByMonth:
		key = fmt.Sprintf("at / %d", bucketNanos)
	case ByKey:
		key = "coalesce(key_id, '')"
	case BySession:
		key = "session"
	case ByHostAgent:
		key = "host_agent"
	}
	where, args := filterWhere(project, f, 1)
	q := "SELECT " + key + " AS k, count(*)," +
		" CAST(coalesce(sum(cost_nanos), 0) AS BIGINT)," +
		" CAST(coalesce(sum(saving_nanos), 0) AS BIGINT)," +
		" CAST(coalesce(sum(CASE WHEN cache_hit THEN 1 ELSE 0 END), 0) AS BIGINT)," +
		" CAST(coalesce(sum(CASE WHEN estimated THEN 1 ELSE 0 END), 0) AS BIGINT)," +
		" CAST(coalesce(sum(CASE WHEN unpriced THEN 1 ELSE 0 END), 0) AS BIGINT)," +
		" CAST(coalesce(sum(input_tokens), 0) AS BIGINT)," +
		" CAST(coalesce(sum(output_tokens), 0) AS BIGINT)," +
		" CAST(coalesce(sum(cache_read_tokens), 0) AS BIGINT)," +
		" CAST(coalesce(sum(cache_write_tokens), 0) AS BIGINT)" +
		" FROM " + table + where
	if f.By != ByNone {
		q += " GROUP BY k"
	}
	return q, args
}

// spendRow is one row of spendQuery: a text key, or a bucket for ByMonth.
type spendRow struct {
	key    string
	bucket int64
	t      Totals
}

// totalsDest returns the scan destinations of the sums of spendQuery.
func totalsDest(t *Totals) []any {
	return []any{&t.Attempts, (*int64)(&t.Cost), (*int64)(&t.Savings), &t.CacheHits, &t.Estimated, &t.Unpriced,
		&t.InputTokens, &t.OutputTokens, &t.CacheReadTokens, &t.CacheWriteTokens}
}

// buildReport merges the rows of spendQuery into a report.
func buildReport(f Filter, rows []spendRow) SpendReport {
	rep := SpendReport{By: f.By}
	groups := map[string]*Totals{}
	loc := f.Location
	if loc == nil {
		loc = time.UTC
	}
	for _, r := range rows {
		if r.t.Attempts == 0 {
			continue
		}
		rep.Total.add(r.t)
		if f.By == ByNone {
			continue
		}
		key := r.key
		if f.By == ByMonth {
			key = time.Unix(0, r.bucket*bucketNanos).In(loc).Format("2006-01")
		}
		g := groups[key]
		if g == nil {
			g = &Totals{}
			groups[key] = g
		}
		g.add(r.t)
	}
	for k, t := range groups {
		rep.Groups = append(rep.Groups, SpendGroup{Key: k, Totals: *t})
	}
	sort.Slice(rep.Groups, func(i, j int) bool { return rep.Groups[i].Key < rep.Groups[j].Key })
	return rep
}

// nanos converts a time to the integer column form; fromNanos converts
// back, in UTC.
func nanos(t time.Time) int64     { return t.UnixNano() }
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func scopeStrings(s []Scope) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = string(x)
	}
	return out
}

// checkTaskID validates a task id: the id of a [TaskScope], in valid UTF-8.
func checkTaskID(id string) error {
	if !validTaskID(id) || !utf8.ValidString(id) {
		return fmt.Errorf("%w: task id %q: 1 to 200 printable characters without surrounding spaces", ErrInvalid, id)
	}
	return nil
}

// checkTaskStart validates the arguments of StartTask.
func checkTaskStart(id, risk string) error {
	if err := checkTaskID(id); err != nil {
		return err
	}
	if risk == "" || len(risk) > 200 || strings.IndexFunc(risk, unicode.IsControl) >= 0 || strings.TrimSpace(risk) != risk || !utf8.ValidString(risk) {
		return fmt.Errorf("%w: task %q: risk %q: 1 to 200 printable characters without surrounding spaces", ErrInvalid, id, risk)
	}
	return nil
}

// checkTaskText validates a free-text field of a task event: both stores
// keep any valid UTF-8 without NUL bytes, which PostgreSQL's text refuses.
func checkTaskText(id, field, text string) error {
	if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 {
		return fmt.Errorf("%w: task %q: %s is not valid UTF-8 text without NUL bytes", ErrInvalid, id, field)
	}
	return nil
}

// checkTaskEvent validates an event given to AddTaskEvent and fills in a
// missing time. The completed and risk events are written by CompleteTask
// and StartTask only, so that the trail always agrees with the task's state
// and risk.
func checkTaskEvent(e *TaskEvent, now time.Time) error {
	if err := checkTaskID(e.Task); err != nil {
		return err
	}
	switch e.Kind {
	case EventPlan, EventReview, EventRejected:
	case EventCompleted:
		return fmt.Errorf("%w: task %q: a completed event is recorded by CompleteTask", ErrInvalid, e.Task)
	case EventRisk:
		return fmt.Errorf("%w: task %q: a risk event is recorded by StartTask", ErrInvalid, e.Task)
	default:
		return fmt.Errorf("%w: task %q: event kind %q: plan, review or rejected", ErrInvalid, e.Task, e.Kind)
	}
	for _, f := range []struct{ name, text string }{
		{"invocation id", e.InvocationID}, {"agent", e.Agent}, {"provider", e.Provider},
		{"model", e.Model}, {"reviewer", e.Reviewer}, {"detail", e.Detail},
	} {
		if err := checkTaskText(e.Task, f.name, f.text); err != nil {
			return err
		}
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	return nil
}

func errNoTask(id string) error        { return fmt.Errorf("%w: %q", ErrNoTask, id) }
func errTaskCompleted(id string) error { return fmt.Errorf("%w: %q", ErrTaskCompleted, id) }

// riskEvent is the event StartTask records when it changes a task's risk.
func riskEvent(id, from, to string, at time.Time) TaskEvent {
	return TaskEvent{Task: id, Time: at, Kind: EventRisk, Detail: from + " → " + to}
}

// taskSQL selects a task with its events, oldest first (events of one
// instant in the order they were added): one row per event, or one row with
// an event id of 0 for a task without events. schema is "" or "_S_.".
func taskSQL(schema string) string {
	return `SELECT t.risk, t.state, t.created_at, coalesce(t.completed_at, 0),
		coalesce(e.id, 0), coalesce(e.at, 0), coalesce(e.kind, ''), coalesce(e.invocation_id, ''),
		coalesce(e.agent, ''), coalesce(e.provider, ''), coalesce(e.model, ''), coalesce(e.reviewer, ''),
		coalesce(e.detail, '')
		FROM ` + schema + `tasks t LEFT JOIN ` + schema + `task_events e ON e.project = t.project AND e.task = t.id
		WHERE t.project = $2 AND t.id = $1 ORDER BY e.at, e.id`
}

// taskRows is what scanTask reads: *sql.Rows or pgx.Rows.
type taskRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanTask reads the rows of taskSQL; found is false if there were none.
func scanTask(id string, rows taskRows) (t Task, found bool, err error) {
	for rows.Next() {
		var created, completed, eid, at int64
		e := TaskEvent{Task: id}
		if err := rows.Scan(&t.Risk, &t.State, &created, &completed, &eid, &at, &e.Kind, &e.InvocationID,
			&e.Agent, &e.Provider, &e.Model, &e.Reviewer, &e.Detail); err != nil {
			return Task{}, false, err
		}
		if !found {
			found = true
			t.ID, t.CreatedAt, t.Events = id, fromNanos(created), []TaskEvent{}
			if t.State == TaskCompleted {
				t.CompletedAt = fromNanos(completed)
			}
		}
		if eid != 0 {
			e.Time = fromNanos(at)
			t.Events = append(t.Events, e)
		}
	}
	if err := rows.Err(); err != nil {
		return Task{}, false, err
	}
	return t, found, nil
}

// Statements both stores use to write tasks, on a table name with or
// without the schema.
func insertTaskSQL(table string) string {
	return `INSERT INTO ` + table + ` (project, id, risk, state, created_at) VALUES ($5, $1, $2, $3, $4)`
}

func setTaskRiskSQL(table string) string {
	return `UPDATE ` + table + ` SET risk = $2 WHERE project = $3 AND id = $1`
}

func completeTaskSQL(table string) string {
	return `UPDATE ` + table + ` SET state = $2, completed_at = $3 WHERE project = $4 AND id = $1`
}

func insertTaskEventSQL(table string) string {
	return `INSERT INTO ` + table + ` (task, at, kind, invocation_id, agent, provider, model, reviewer, detail, project)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
}

// taskEventArgs are the arguments of insertTaskEventSQL for an event of a
// task of project.
func taskEventArgs(project string, e TaskEvent) []any {
	return []any{e.Task, nanos(e.Time), e.Kind, e.InvocationID, e.Agent, e.Provider, e.Model, e.Reviewer, e.Detail, project}
}

func errTaskChanged(id string, seen, now int) error {
	return fmt.Errorf("%w: task %q had %d events when it was judged and has %d now", ErrTaskChanged, id, seen, now)
}
