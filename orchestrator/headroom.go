package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rate-limit headroom defaults.
const (
	DefaultHeadroomRequests = 5
	DefaultHeadroomTokens   = 2000
)

// unknownResetWindow is how long remaining counts reported without a reset
// time are believed: the one-minute window of the vendors' per-minute
// limits.
const unknownResetWindow = time.Minute

// Headroom configures proactive rate-limit routing. When AllowAlternates is
// on and a provider's last reported remaining requests or tokens (its
// adapter's RateLimitStatus) are below these thresholds, and the limit has
// not reset since, the router moves that provider's candidates after the
// candidates of providers with headroom: the call goes to the next
// preferred provider before a 429 happens. A count the provider never
// reported is unknown and never triggers the move. The zero value of each
// field is the default named in its comment; a negative value turns that
// check off.
type Headroom struct {
	// Requests: fewer remaining requests than this is too little. Default
	// 5.
	Requests int64
	// Tokens: fewer remaining tokens than this is too little. Default
	// 2000.
	Tokens int64
}

func (o *Orchestrator) headroomDefaults() {
	if o.s.Headroom.Requests == 0 {
		o.s.Headroom.Requests = DefaultHeadroomRequests
	}
	if o.s.Headroom.Tokens == 0 {
		o.s.Headroom.Tokens = DefaultHeadroomTokens
	}
}

// lowHeadroom says why ep's reported rate limits leave too little room at
// now, or "" when they do not (or nothing is known).
func (o *Orchestrator) lowHeadroom(ep *Endpoint, now time.Time) string {
	// The status is what the adapter recorded from its last response: no
	// I/O happens here.
	st := ep.Adapter.RateLimitStatus(context.Background())
	until := st.ResetAt
	if until.IsZero() {
		if st.ObservedAt.IsZero() {
			return ""
		}
		until = st.ObservedAt.Add(unknownResetWindow)
	}
	if !now.Before(until) {
		return ""
	}
	var why []string
	if h := o.s.Headroom.Requests; h > 0 && st.RequestsRemaining != nil && *st.RequestsRemaining < h {
		why = append(why, fmt.Sprintf("%d requests left (headroom %d)", *st.RequestsRemaining, h))
	}
	if h := o.s.Headroom.Tokens; h > 0 && st.TokensRemaining != nil && *st.TokensRemaining < h {
		why = append(why, fmt.Sprintf("%d tokens left (headroom %d)", *st.TokensRemaining, h))
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("rate limit nearly reached: %s until %s", strings.Join(why, ", "), clock(until))
}

// headroomRoute moves the kept candidates of providers short of rate-limit
// headroom after the kept candidates with headroom, when alternates are
// allowed and at least one such candidate exists; otherwise it only notes
// the shortage in the reason.
func (o *Orchestrator) headroomRoute(t *Trace) {
	now := o.s.Now()
	low := map[int]string{}
	roomy := 0
	for i, c := range t.Candidates {
		if !c.Kept || c.endpoint == nil {
			continue
		}
		if why := o.lowHeadroom(c.endpoint, now); why != "" {
			low[i] = why
		} else {
			roomy++
		}
	}
	if len(low) == 0 {
		return
	}
	move := o.s.AllowAlternates && roomy > 0
	for i, why := range low {
		c := &t.Candidates[i]
		switch {
		case move:
			c.Reason += "; " + why + ": moved after the providers with headroom"
			c.late = true
		case !o.s.AllowAlternates:
			c.Reason += "; " + why + ": kept in place (routing.allow_alternates is off)"
		default:
			c.Reason += "; " + why + ": kept in place (no other candidate has headroom)"
		}
	}
	if move {
		slices.SortStableFunc(t.Candidates, func(a, b Candidate) int { return lateRank(a) - lateRank(b) })
	}
}

func lateRank(c Candidate) int {
	if c.late {
		return 1
	}
	return 0
}
