package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Scope names what a budget limits: "task:<id>" (every invocation of one
// task) or "month:<YYYY-MM>" (the whole project in one calendar month, in
// the caller's configured time zone).
type Scope string

// Scope kinds, the text before the colon.
const (
	KindTask  = "task"
	KindMonth = "month"
)

// TaskScope returns the scope of one task.
func TaskScope(taskID string) Scope { return Scope(KindTask + ":" + taskID) }

// MonthScope returns the scope of the calendar month that contains t, in
// t's location: convert t with In before calling.
func MonthScope(t time.Time) Scope { return Scope(KindMonth + ":" + t.Format("2006-01")) }

// ParseScope parses and validates a scope's text.
func ParseScope(s string) (Scope, error) {
	sc := Scope(s)
	return sc, sc.Validate()
}

// Kind returns the text before the colon: "task" or "month".
func (s Scope) Kind() string {
	k, _, _ := strings.Cut(string(s), ":")
	return k
}

// ID returns the text after the colon: the task id or the month.
func (s Scope) ID() string {
	_, id, _ := strings.Cut(string(s), ":")
	return id
}

// String returns the scope's text.
func (s Scope) String() string { return string(s) }

// Validate reports whether s is a well-formed scope.
func (s Scope) Validate() error {
	kind, id, ok := strings.Cut(string(s), ":")
	if !ok {
		return fmt.Errorf("%w: scope %q: write task:<id> or month:<YYYY-MM>", ErrInvalid, string(s))
	}
	switch kind {
	case KindTask:
		if !validTaskID(id) {
			return fmt.Errorf("%w: scope %q: a task id is 1 to 200 printable characters without surrounding spaces", ErrInvalid, string(s))
		}
	case KindMonth:
		if _, err := time.Parse("2006-01", id); err != nil || len(id) != 7 {
			return fmt.Errorf("%w: scope %q: a month is written YYYY-MM", ErrInvalid, string(s))
		}
	default:
		return fmt.Errorf("%w: scope %q: unknown kind %q (task or month)", ErrInvalid, string(s), kind)
	}
	return nil
}

// validTaskID reports whether id is a well-formed task id: 1 to 200
// printable characters without surrounding spaces.
func validTaskID(id string) bool {
	return id != "" && len(id) <= 200 && strings.IndexFunc(id, unicode.IsControl) < 0 && strings.TrimSpace(id) == id
}

// normScopes validates scopes and returns them sorted without duplicates:
// the order in which every transaction locks them.
func normScopes(scopes []Scope) ([]Scope, error) {
	if len(scopes) == 0 {
		return nil, fmt.Errorf("%w: no scope", ErrInvalid)
	}
	out := make([]Scope, 0, len(scopes))
	for _, s := range scopes {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
