// Package critic holds the rules of the critic gate: for tasks whose risk
// is medium or higher, the critic must run on a model independent of the
// one that authored the plan, and its output must name the reviewer in an
// "independent_reviewer: <model-or-agent-id>" line, so that the review can
// be audited.
//
// The package is pure: it parses transcripts, compares model ids and tells
// vendors apart. The orchestrator applies it to live calls, and
// 'cortexbuild critic verify' to transcripts of calls a host tool made.
package critic

import (
	"errors"
	"fmt"
	"strings"
)

// Risk is a task's risk level.
type Risk int

// The risk levels, in increasing order.
const (
	Low Risk = iota
	Medium
	High
	Critical
)

var riskNames = [...]string{"low", "medium", "high", "critical"}

// Risks lists the levels' names in increasing order.
func Risks() []string { return riskNames[:] }

func (r Risk) String() string {
	if r < Low || r > Critical {
		return fmt.Sprintf("Risk(%d)", int(r))
	}
	return riskNames[r]
}

// Gated reports whether the risk requires an independent review: medium
// and above.
func (r Risk) Gated() bool { return r >= Medium }

// ParseRisk reads a risk level's name (any case).
func ParseRisk(s string) (Risk, error) {
	for i, n := range riskNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Risk(i), nil
		}
	}
	return 0, fmt.Errorf("unknown risk %q: use one of %s", s, strings.Join(riskNames[:], ", "))
}

// MarshalText writes the level's name.
func (r Risk) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a level's name.
func (r *Risk) UnmarshalText(b []byte) error {
	v, err := ParseRisk(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Field is the name of the line a critic's output must carry.
const Field = "independent_reviewer"

// Instruction is the sentence that ends every critic persona: it asks for
// the field.
const Instruction = "End your review with this line, on a line of its own: `independent_reviewer: <model-or-agent-id>`, naming the model you run on (or your agent id)."

// placeholder is the instruction's own placeholder, which a model echoing
// the instruction would copy instead of its id.
const placeholder = "<model-or-agent-id>"

// ErrNoReviewer says a transcript has no independent_reviewer line.
var ErrNoReviewer = errors.New("no independent_reviewer line")

// FieldError says what is wrong with an independent_reviewer line.
type FieldError struct {
	Line    int // 1-based
	Problem string
}

func (e *FieldError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Problem) }

// Reviewer finds the independent_reviewer field in a transcript and returns
// the id it names and its line (1-based). The key is matched in any case,
// with Markdown around it ("**independent_reviewer:** `gpt-5`", "- ",
// "> "); the value is the first word after the colon, without quotes,
// backticks or a trailing full stop. The field may appear more than once
// only with the same id. It fails with [ErrNoReviewer] when the field is
// absent and a [*FieldError] when a value is empty, is the instruction's
// placeholder, or differs from an earlier one.
func Reviewer(transcript string) (id string, line int, err error) {
	for n, text := range strings.Split(transcript, "\n") {
		v, ok := fieldValue(text)
		if !ok {
			continue
		}
		switch {
		case v == "":
			return "", n + 1, &FieldError{Line: n + 1, Problem: "independent_reviewer has an empty value; it must name a model or agent id"}
		case v == placeholder || strings.HasPrefix(v, "<"):
			return "", n + 1, &FieldError{Line: n + 1, Problem: fmt.Sprintf("independent_reviewer is the placeholder %q, not a model or agent id", v)}
		case id == "":
			id, line = v, n+1
		case !strings.EqualFold(id, v):
			return "", n + 1, &FieldError{Line: n + 1, Problem: fmt.Sprintf("independent_reviewer names %q here but %q on line %d; a review names one reviewer", v, id, line)}
		}
	}
	if id == "" {
		return "", 0, ErrNoReviewer
	}
	return id, line, nil
}

// fieldValue returns the value of an independent_reviewer line, and false
// for any other line.
func fieldValue(line string) (string, bool) {
	s := strings.TrimSpace(line)
	s = strings.TrimLeft(s, "-*>#+ \t")
	s = strings.TrimLeft(s, "*_`")
	if len(s) < len(Field) || !strings.EqualFold(s[:len(Field)], Field) {
		return "", false
	}
	s = strings.TrimLeft(s[len(Field):], "*_` \t")
	if !strings.HasPrefix(s, ":") {
		return "", false
	}
	s = strings.TrimLeft(s[1:], "*_` \t")
	if f := strings.Fields(s); len(f) > 0 {
		s = f[0]
	} else {
		s = ""
	}
	s = strings.Trim(s, "*_`\"'")
	s = strings.TrimRight(s, ".,;")
	return s, true
}
