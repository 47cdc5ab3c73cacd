package ledger

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Scope names what a budget limits: "task:<id>" (every invocation of one
// task), "month:<YYYY-MM>" (the whole project in one calendar month, in
// the caller's configured time zone), or "key:<id>" (every call made with
// one virtual key), "key:<id>@<YYYY-MM>" (with it in one month) or
// "key:<id>@<YYYY-MM-DD>" (with it on one day).
type Scope string

// Scope kinds, the text before the colon.
const (
	KindTask  = "task"
	KindMonth = "month"
	KindKey   = "key"
)

// The periods of a key's budget (see [KeyScope]).
const (
	PeriodTotal = "total"
	PeriodMonth = "month"
	PeriodDay   = "day"
)

// Periods are the periods a key's budget can have.
var Periods = []string{PeriodDay, PeriodMonth, PeriodTotal}

// KeyScope returns the scope of the budget of virtual key id over period
// (day, month or total) that contains t, in t's location: convert t with
// In before calling. It fails on an id that is not well-formed (see
// [ValidKeyID]) and on an unknown period.
func KeyScope(id, period string, t time.Time) (Scope, error) {
	var sc Scope
	switch period {
	case PeriodTotal:
		sc = Scope(KindKey + ":" + id)
	case PeriodMonth:
		sc = Scope(KindKey + ":" + id + "@" + t.Format("2006-01"))
	case PeriodDay:
		sc = Scope(KindKey + ":" + id + "@" + t.Format("2006-01-02"))
	default:
		return "", fmt.Errorf("%w: key budget period %q: use day, month or total", ErrInvalid, period)
	}
	return sc, sc.Validate()
}

// PeriodStart returns when the period of a key's budget (day, month or
// total) that contains t began, in t's location, as [KeyScope] counts
// periods: midnight of t's day, the first of t's month, or the zero time
// for total.
func PeriodStart(period string, t time.Time) time.Time {
	switch period {
	case PeriodDay:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	case PeriodTotal:
		return time.Time{}
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
}

var keyID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidKeyID reports whether id is a well-formed virtual key id for a key
// scope: 1 to 64 lower-case letters, digits, '_' and '-', starting with a
// letter or digit. It never holds '@', which starts the period of a key
// scope, so the scopes of two keys never share a name.
func ValidKeyID(id string) bool { return keyID.MatchString(id) }

// Key returns the key id of a key scope ("" for another kind).
func (s Scope) Key() string {
	if s.Kind() != KindKey {
		return ""
	}
	id, _, _ := strings.Cut(s.ID(), "@")
	return id
}

// Period returns the period of a key scope: the month ("YYYY-MM"), the day
// ("YYYY-MM-DD"), or "" for a key's total budget and for other kinds.
func (s Scope) Period() string {
	if s.Kind() != KindKey {
		return ""
	}
	_, p, _ := strings.Cut(s.ID(), "@")
	return p
}

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
		return fmt.Errorf("%w: scope %q: write task:<id>, month:<YYYY-MM> or key:<id>[@<YYYY-MM>|@<YYYY-MM-DD>]", ErrInvalid, string(s))
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
	case KindKey:
		key, period, dated := strings.Cut(id, "@")
		if !ValidKeyID(key) {
			return fmt.Errorf("%w: scope %q: a key id is 1 to 64 lower-case letters, digits, '_' and '-'", ErrInvalid, string(s))
		}
		if dated && !validPeriod(period) {
			return fmt.Errorf("%w: scope %q: a key's period is written @YYYY-MM (a month) or @YYYY-MM-DD (a day)", ErrInvalid, string(s))
		}
	default:
		return fmt.Errorf("%w: scope %q: unknown kind %q (task, month or key)", ErrInvalid, string(s), kind)
	}
	return nil
}

// validPeriod reports whether p is a month (YYYY-MM) or a day
// (YYYY-MM-DD).
func validPeriod(p string) bool {
	for _, layout := range []string{"2006-01", "2006-01-02"} {
		if _, err := time.Parse(layout, p); err == nil && len(p) == len(layout) {
			return true
		}
	}
	return false
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
