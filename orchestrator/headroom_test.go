package orchestrator_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The adapters stamp rate-limit figures with the real clock, so these
// tests run the orchestrator on the real clock plus an offset they set.
type offsetClock struct{ d atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.d.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.d.Add(int64(d)) }
func headroomWorld(t *testing.T, first string, alternates bool, mutate func(*orchestrator.Settings)) *world {
	t.Helper()
	return newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.AllowAlternates = order(first), alternates
		if mutate != nil {
			mutate(s)
		}
	})
}

func TestHeadroomMovesAProviderShortOfRequestsBack(t *testing.T) {
	w := headroomWorld(t, "anthropic", true, nil)
	// The real anthropic-ratelimit-* headers, as a nearly spent per-minute
	// request limit reports them.
	w.anth.Enqueue(anthropicfake.TextReply("first").WithHeader("anthropic-ratelimit-requests-remaining", "3"))
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || out.Provider != "anthropic" {
		t.Fatalf("first call: %v %v", out, err)
	}
	if st := out.Attempts; len(st) != 1 {
		t.Fatalf("attempts = %s", path(st))
	}
	out, err = w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "openai/gpt-5-mini:ok" {
		t.Fatalf("second call went to %v %v", out, err)
	}
	kept := out.Trace.Kept()
	if kept[len(kept)-1].Provider != "anthropic" {
		t.Errorf("anthropic is not last:\n%s", out.Trace.String())
	}
	c, _ := candidate(out.Trace, "anthropic")
	if !c.Kept || !strings.Contains(c.Reason, "rate limit nearly reached: 3 requests left (headroom 5) until ") || !strings.Contains(c.Reason, "moved after the providers with headroom") {
		t.Errorf("anthropic reason = %q", c.Reason)
	}
	// The provider is still a fallback: when the others fail, it serves.
	fault(w, "openai", provider.KindQuotaExhausted)
	fault(w, "gemini", provider.KindQuotaExhausted)
	if out, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Provider != "anthropic" {
		t.Errorf("fallback: %v %v", out, err)
	}
}

func TestHeadroomCountsTokensAndOnlyUntilTheReset(t *testing.T) {
	clk := &offsetClock{}
	w := headroomWorld(t, "openai", true, func(s *orchestrator.Settings) { s.Now = clk.Now })
	w.oai.Enqueue(openaifake.TextReply("first").
		WithHeader("x-ratelimit-remaining-tokens", "1500").
		WithHeader("x-ratelimit-reset-tokens", "20s").
		WithHeader("x-ratelimit-remaining-requests", "2").
		WithHeader("x-ratelimit-reset-requests", "20s"))
	if out, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Provider != "openai" {
		t.Fatalf("first call: %v %v", out, err)
	}
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || out.Attempts[0].Provider != "anthropic" {
		t.Fatalf("second call: %v %v", out, err)
	}
	if c, _ := candidate(out.Trace, "openai"); !strings.Contains(c.Reason, "rate limit nearly reached: 2 requests left (headroom 5), 1500 tokens left (headroom 2000) until ") {
		t.Errorf("openai reason = %q", c.Reason)
	}
	// Once the reported reset time has passed, the figures are stale.
	clk.Advance(30 * time.Second)
	tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"})
	if tr.Kept()[0].Provider != "openai" || strings.Contains(tr.String(), "rate limit") {
		t.Errorf("after the reset:\n%s", tr.String())
	}
}

func TestHeadroomKeepsThePreferenceWithoutAlternates(t *testing.T) {
	w := headroomWorld(t, "anthropic", false, nil)
	w.anth.Enqueue(anthropicfake.TextReply("first").WithHeader("anthropic-ratelimit-requests-remaining", "1"))
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"})
	if c := tr.Kept()[0]; c.Provider != "anthropic" || !strings.Contains(c.Reason, "1 requests left") || !strings.Contains(c.Reason, "kept in place (routing.allow_alternates is off)") {
		t.Errorf("route:\n%s", tr.String())
	}
}

func TestHeadroomNeedsAnotherCandidate(t *testing.T) {
	w := headroomWorld(t, "anthropic", true, func(s *orchestrator.Settings) {
		s.Agents = map[string]orchestrator.AgentSettings{"builder": {Providers: []string{"anthropic"}}}
	})
	w.anth.Enqueue(anthropicfake.TextReply("first").WithHeader("anthropic-ratelimit-tokens-remaining", "0"))
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || out.Provider != "anthropic" {
		t.Fatalf("sole candidate: %v %v", out, err)
	}
	if c := out.Trace.Kept()[0]; !strings.Contains(c.Reason, "0 tokens left") || !strings.Contains(c.Reason, "no other candidate has headroom") {
		t.Errorf("reason = %q", c.Reason)
	}
}

func TestHeadroomThresholdsAreConfigurable(t *testing.T) {
	// Requests off, a higher token threshold: the fake's default figures
	// (5000 requests, 2,000,000 tokens per minute) leave 2,000,000 minus
	// one call's tokens. The call bills 20,000 tokens: the fake's bucket
	// refills on the wall clock (33,333 tokens a second), and a call of a
	// few tokens could be refilled before its own headers are written.
	w := headroomWorld(t, "openai", true, func(s *orchestrator.Settings) {
		s.Headroom = orchestrator.Headroom{Requests: -1, Tokens: 2_000_000}
	})
	first := openaifake.TextReply("first").WithHeader("x-ratelimit-remaining-requests", "0")
	first.Usage = openaifake.Usage{Prompt: 10_000, Completion: 10_000}
	w.oai.Enqueue(first)
	if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
		t.Fatal(err)
	}
	tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"})
	c, _ := candidate(tr, "openai")
	if tr.Kept()[0].Provider == "openai" || strings.Contains(c.Reason, "requests left") || !strings.Contains(c.Reason, "tokens left (headroom 2000000)") {
		t.Errorf("route:\n%s", tr.String())
	}
}

func TestHeadroomNeverInventsFigures(t *testing.T) {
	// Gemini reports no remaining counts: with the strictest thresholds it
	// still keeps its place.
	w := headroomWorld(t, "gemini", true, func(s *orchestrator.Settings) {
		s.Headroom = orchestrator.Headroom{Requests: 1 << 40, Tokens: 1 << 40}
	})
	for range 3 {
		out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
		if err != nil || out.Attempts[0].Provider != "gemini" {
			t.Fatalf("call: %v %v", out, err)
		}
	}
	if st := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"}); strings.Contains(st.String(), "rate limit") {
		t.Errorf("route:\n%s", st.String())
	}
}

// A provider that waited out a rate limit is first again once the wait is
// over.
func TestRateLimitedProviderReturnsAfterItsWait(t *testing.T) {
	clk := newClock()
	w := headroomWorld(t, "anthropic", true, func(s *orchestrator.Settings) { s.Now = clk.Now })
	fault(w, "anthropic", provider.KindRateLimit)
	if out, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Provider != "openai" {
		t.Fatalf("rate limited call: %v %v", out, err)
	}
	if out, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Attempts[0].Provider == "anthropic" {
		t.Fatalf("during the wait: %v %v", out, err)
	}
	clk.Advance(3 * time.Second)
	if out, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil || out.Attempts[0].Provider != "anthropic" {
		t.Errorf("after the wait: %v %v", out, err)
	}
}
