package orchestrator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// waitOf returns the wait a failed call carries, or fails the test.
func waitOf(t *testing.T, oe *orchestrator.Error) *orchestrator.WaitError {
	t.Helper()
	var we *orchestrator.WaitError
	if oe == nil || !errors.As(oe, &we) {
		t.Fatalf("error %v carries no wait", oe)
	}
	return we
}

// A call made while the only provider's rate-limit window is open fails
// at once with the rate limit and what is left of the window, not with an
// opaque "all candidates failed"; once the window is over it is served.
func TestRateLimitWindowIsReportedToLaterCalls(t *testing.T) {
	clk := newClock()
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Now, s.MaxRetryAfter = clk.Now, 5*time.Second
		s.Agents = map[string]orchestrator.AgentSettings{"builder": {Providers: []string{"anthropic"}}}
	})
	w.anth.Enqueue(anthropicfake.RateLimited("30"))
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if we := waitOf(t, oe); we.Reason != orchestrator.WaitRateLimit || we.RetryAfter != 30*time.Second {
		t.Errorf("first call: %+v", we)
	}
	clk.Advance(12 * time.Second)
	_, oe = w.invoke(t, orchestrator.Call{Agent: "builder"})
	we := waitOf(t, oe)
	if we.Reason != orchestrator.WaitRateLimit || we.RetryAfter != 18*time.Second || !errors.Is(oe, provider.KindRateLimit) || provider.RetryAfterOf(oe) != 18*time.Second {
		t.Errorf("call inside the window: %+v (%v)", we, oe)
	}
	var pe *provider.Error
	if !errors.As(oe, &pe) || pe.Diagnostic.Type != "rate_limit_error" || pe.Provider != "anthropic" {
		t.Errorf("the window's error does not say what the provider said: %+v", pe)
	}
	if want := "no candidate provider can serve this call for another 18s (rate limit)"; !strings.HasPrefix(oe.Error(), want) {
		t.Errorf("error %q; want it to start with %q", oe.Error(), want)
	}
	if n := len(w.anth.Requests()); n != 1 {
		t.Errorf("anthropic got %d requests; the window should keep the second call away", n)
	}
	clk.Advance(18 * time.Second)
	if _, oe = w.invoke(t, orchestrator.Call{Agent: "builder"}); oe != nil {
		t.Errorf("after the window: %v", oe)
	}
}

// Over several candidates the wait is the shortest, with its reason; a
// candidate that failed for a reason waiting does not fix means no wait.
func TestWaitIsTheShortestOverTheCandidates(t *testing.T) {
	clk := newClock()
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Now, s.MaxRetryAfter, s.AllowAlternates, s.ServerAttempts = clk.Now, 5*time.Second, true, 2
		s.Agents = map[string]orchestrator.AgentSettings{"builder": {Providers: []string{"anthropic", "openai"}}}
	})
	w.anth.Enqueue(anthropicfake.RateLimited("30"))
	w.oai.Enqueue(openaifake.RateLimited(time.Minute).WithRetryAfter(10 * time.Second))
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder"})
	var pe *provider.Error
	if we := waitOf(t, oe); we.Reason != orchestrator.WaitRateLimit || we.RetryAfter != 10*time.Second || !errors.As(we, &pe) || pe.Provider != "openai" {
		t.Errorf("two rate limits: %+v", we)
	}

	// Overloaded through its attempts: the wait is the next backoff
	// (this world's Backoff(n) is n × 100 ms).
	clk.Advance(time.Minute)
	for range 2 {
		fault(w, "anthropic", provider.KindOverloaded)
	}
	w.oai.Enqueue(openaifake.RateLimited(time.Minute).WithRetryAfter(10 * time.Second))
	_, oe = w.invoke(t, orchestrator.Call{Agent: "builder"})
	if we := waitOf(t, oe); we.Reason != orchestrator.WaitOverloaded || we.RetryAfter != 200*time.Millisecond || !errors.Is(oe, provider.KindOverloaded) {
		t.Errorf("overload and a rate limit: %+v (%s)", we, path(oe.Attempts))
	}

	clk.Advance(time.Minute)
	fault(w, "anthropic", provider.KindQuotaExhausted)
	w.oai.Enqueue(openaifake.RateLimited(time.Minute).WithRetryAfter(10 * time.Second))
	_, oe = w.invoke(t, orchestrator.Call{Agent: "builder"})
	var we *orchestrator.WaitError
	if oe == nil || errors.As(oe, &we) {
		t.Errorf("an exhausted quota and a rate limit: %v carries a wait %+v", oe, we)
	}
}
