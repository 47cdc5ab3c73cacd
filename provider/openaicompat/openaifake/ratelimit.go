package openaifake

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// buckets is the state of the OpenAI flavour's two per-minute rate-limit
// buckets. used* is how much of each bucket is currently spent; it drains
// at limit per minute of the fake's clock.
type buckets struct {
	usedRequests float64
	usedTokens   float64
	last         time.Time
}

// drainLocked refills the buckets for the time elapsed since the last
// update. s.mu must be held.
func (s *Server) drainLocked(now time.Time) {
	b := &s.buckets
	if !b.last.IsZero() {
		if el := now.Sub(b.last).Minutes(); el > 0 {
			b.usedRequests = math.Max(0, b.usedRequests-el*float64(s.cfg.limits.Requests))
			b.usedTokens = math.Max(0, b.usedTokens-el*float64(s.cfg.limits.Tokens))
		}
	}
	b.last = now
}

// admit counts one chat request against the request bucket.
func (s *Server) admit() {
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked(now)
	s.buckets.usedRequests++
}

// consume counts served tokens against the token bucket.
func (s *Server) consume(tokens int) {
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drainLocked(now)
	s.buckets.usedTokens += float64(tokens)
}

// setRateLimitHeaders sets the x-ratelimit-* set: limits, what remains
// (rounded down) and how long until the bucket is full again, as a Go
// duration string rounded to the millisecond ("12ms", "1.5s", "6m0s").
func (s *Server) setRateLimitHeaders(h http.Header) {
	now := s.cfg.now()
	s.mu.Lock()
	s.drainLocked(now)
	b := s.buckets
	s.mu.Unlock()
	set := func(bucket string, limit int, used float64) {
		remaining := max(0, limit-int(math.Ceil(used-1e-9)))
		reset := time.Duration(0)
		if limit > 0 {
			reset = time.Duration(used / float64(limit) * float64(time.Minute))
		}
		h.Set("x-ratelimit-limit-"+bucket, strconv.Itoa(limit))
		h.Set("x-ratelimit-remaining-"+bucket, strconv.Itoa(remaining))
		h.Set("x-ratelimit-reset-"+bucket, FormatDuration(reset))
	}
	set("requests", s.cfg.limits.Requests, b.usedRequests)
	set("tokens", s.cfg.limits.Tokens, b.usedTokens)
}

// FormatDuration formats d the way OpenAI writes x-ratelimit-reset-* values
// and "Please try again in …": a Go duration rounded to the millisecond
// ("0s", "12ms", "2.4s", "6m0s").
func FormatDuration(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}
