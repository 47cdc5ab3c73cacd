package orchestrator

import (
	"context"
	"slices"
	"strconv"
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
	// Every route of every call near a limit says so: the reason is put
	// together without fmt.
	var why []byte
	left := func(n *int64, h int64, what string) {
		if h <= 0 || n == nil || *n >= h {
			return
		}
		if why != nil {
			why = append(why, ", "...)
		}
		why = strconv.AppendInt(why, *n, 10)
		why = append(why, " "+what+" left (headroom "...)
		why = strconv.AppendInt(why, h, 10)
		why = append(why, ')')
	}
	left(st.RequestsRemaining, o.s.Headroom.Requests, "requests")
	left(st.TokensRemaining, o.s.Headroom.Tokens, "tokens")
	if why == nil {
		return ""
	}
	return "rate limit nearly reached: " + string(why) + " until " + clock(until)
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
