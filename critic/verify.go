package critic

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrRejected matches every [*Rejection].
var ErrRejected = errors.New("critic gate: rejected")

// Rejection says why a review does not satisfy the gate, and what to do.
type Rejection struct {
	Reason string
	Fix    string
}

func (r *Rejection) Error() string {
	if r.Fix == "" {
		return "critic gate: " + r.Reason
	}
	return "critic gate: " + r.Reason + "; " + r.Fix
}

// Is makes errors.Is(err, ErrRejected) true.
func (r *Rejection) Is(target error) bool { return target == ErrRejected }

// Rules are what a review is checked against.
type Rules struct {
	Risk Risk
	// Authors are the models that authored the task's plan.
	Authors []string
	// CriticAgents are the agent ids a critic may name itself by (default
	// "critic").
	CriticAgents []string
	// Known reports whether an id names a configured model or agent; nil
	// accepts every id.
	Known func(id string) bool
	// RequireDifferentVendor refuses a reviewer of the authors' vendor.
	RequireDifferentVendor bool
}

func (r Rules) criticAgents() []string {
	if len(r.CriticAgents) == 0 {
		return []string{"critic"}
	}
	return r.CriticAgents
}

// IsAgent reports whether id is one of the critic agent ids.
func (r Rules) IsAgent(id string) bool {
	return slices.ContainsFunc(r.criticAgents(), func(a string) bool { return strings.EqualFold(a, id) })
}

// Authored reports whether model is one of the plan's authors.
func (r Rules) Authored(model string) bool {
	return slices.ContainsFunc(r.Authors, func(a string) bool { return SameModel(a, model) })
}

// Review is what a critic transcript says about its reviewer.
type Review struct {
	// Reviewer is the id named by the independent_reviewer line ("" when
	// there is none).
	Reviewer string `json:"reviewer,omitempty"`
	Line     int    `json:"line,omitempty"`
	// Model is the model the critic ran on, when known.
	Model string `json:"model,omitempty"`
}

// Verify checks a critic's output against the rules: on a task of medium
// risk or more, the output must carry one well-formed independent_reviewer
// line; the critic must not have run on an author's model; the id must be
// known, must not name an author's model, and must name the model the
// critic ran on (when model is known) or a critic agent id. With
// RequireDifferentVendor, the reviewing model's vendor must differ from
// every author's. Low-risk tasks pass whatever the output says.
//
// The returned Review holds what was found even when the check fails; the
// error is a [*Rejection].
func Verify(transcript, model string, r Rules) (Review, error) {
	rev := Review{Model: model}
	id, line, perr := Reviewer(transcript)
	rev.Reviewer, rev.Line = id, line
	if !r.Risk.Gated() {
		return rev, nil
	}
	var fe *FieldError
	switch {
	case errors.Is(perr, ErrNoReviewer):
		return rev, &Rejection{Reason: fmt.Sprintf("a %s-risk task needs an independent review, and the critic's output has no independent_reviewer line", r.Risk),
			Fix: "the critic persona must end with: " + Instruction}
	case errors.As(perr, &fe):
		return rev, &Rejection{Reason: "the critic's " + fe.Error(), Fix: "the output must carry exactly one reviewer id"}
	}
	if model != "" && r.Authored(model) {
		return rev, &Rejection{Reason: fmt.Sprintf("the critic ran on %s, the model that authored the plan", model),
			Fix: "run the critic on another model (agents.critic.model or another provider)"}
	}
	if r.Authored(id) {
		return rev, &Rejection{Reason: fmt.Sprintf("independent_reviewer (line %d) names %s, the model that authored the plan: a model cannot review its own plan", line, id),
			Fix: "run the critic on another model"}
	}
	if r.Known != nil && !r.Known(id) {
		return rev, &Rejection{Reason: fmt.Sprintf("independent_reviewer (line %d) names %q, which is no configured model or agent", line, id),
			Fix: "name the model the critic ran on, or the critic's agent id"}
	}
	if model != "" && !SameModel(id, model) && !r.IsAgent(id) {
		return rev, &Rejection{Reason: fmt.Sprintf("independent_reviewer (line %d) names %s, but the critic ran on %s", line, id, model),
			Fix: "the reviewer id must be the model actually used or the critic agent's id"}
	}
	if r.RequireDifferentVendor {
		reviewing := model
		if reviewing == "" && !r.IsAgent(id) {
			reviewing = id
		}
		v := VendorOf(reviewing)
		if v == "" {
			return rev, &Rejection{Reason: fmt.Sprintf("a reviewer of another vendor is required, and the vendor of %q is unknown", orDash(reviewing)),
				Fix: "name the reviewing model"}
		}
		for _, a := range r.Authors {
			if VendorOf(a) == v {
				return rev, &Rejection{Reason: fmt.Sprintf("a reviewer of another vendor is required, and %s is %s's, like the author %s", reviewing, v, a),
					Fix: "configure a provider of another vendor for the critic"}
			}
		}
	}
	return rev, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
