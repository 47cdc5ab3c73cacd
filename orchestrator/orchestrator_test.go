package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// world is three fake providers behind real adapters, and an orchestrator
// whose sleeps, clock and connectivity are recorded instead of real.
type world struct {
	anth   *anthropicfake.Server
	oai    *openaifake.Server
	gem    *geminifake.Server
	o      *orchestrator.Orchestrator
	sleeps []time.Duration
	notes  []orchestrator.Notification
	online bool
	state  *orchestrator.MemoryState
	mu     sync.Mutex
}

type recorder struct{ w *world }

func (r recorder) Notify(_ context.Context, n orchestrator.Notification) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.notes = append(r.w.notes, n)
	return nil
}

// drain waits for the notifications queued so far to reach the recorder.
func (w *world) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.o.Drain(ctx)
}

func newWorld(t *testing.T, mutate func(*orchestrator.Settings)) *world {
	t.Helper()
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(k, "")
	}
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{online: true, state: &orchestrator.MemoryState{}}
	w.anth = anthropicfake.New(anthropicfake.WithAPIKey("ak"))
	w.oai = openaifake.New(openaifake.WithAPIKey("ok"))
	w.gem = geminifake.New(geminifake.WithAPIKey("gk"))
	t.Cleanup(func() { w.anth.Close(); w.oai.Close(); w.gem.Close() })
	a, _ := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: w.anth.URL(), Credentials: map[string]string{"api_key": "ak"}, Pricer: cat})
	o, _ := openaicompat.New(provider.Settings{Name: "openai", Profile: "openai", BaseURL: w.oai.URL() + "/v1", Credentials: map[string]string{"api_key": "ok"}, Pricer: cat})
	g, _ := gemini.New(provider.Settings{Name: "gemini", BaseURL: w.gem.URL(), Credentials: map[string]string{"api_key": "gk"}, Pricer: cat})
	s := orchestrator.Settings{
		Project:   "test",
		Endpoints: []orchestrator.Endpoint{{Name: "anthropic", Adapter: a}, {Name: "openai", Adapter: o}, {Name: "gemini", Adapter: g}},
		Sleep: func(ctx context.Context, d time.Duration) error {
			w.mu.Lock()
			w.sleeps = append(w.sleeps, d)
			w.mu.Unlock()
			return ctx.Err()
		},
		Backoff:  func(n int) time.Duration { return time.Duration(n) * 100 * time.Millisecond },
		Online:   func(context.Context) bool { return w.online },
		Notifier: recorder{w},
		State:    w.state,
	}
	if mutate != nil {
		mutate(&s)
	}
	w.o, err = orchestrator.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) invoke(t *testing.T, c orchestrator.Call) (*orchestrator.Outcome, *orchestrator.Error) {
	t.Helper()
	if c.Request.Prompt == "" && len(c.Request.Messages) == 0 {
		c.Request.Prompt = "hello"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := w.o.Invoke(ctx, c)
	if err == nil {
		return out, nil
	}
	var oe *orchestrator.Error
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T) is not an *orchestrator.Error", err, err)
	}
	return nil, oe
}

// path renders the attempts as "provider/model:outcome" for comparison.
func path(as []orchestrator.Attempt) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, a.Provider+"/"+a.Model+":"+a.Outcome)
	}
	return strings.Join(parts, " ")
}

// fault scripts, for each provider, a failure of each kind.
func fault(w *world, prov string, k provider.Kind) {
	switch prov {
	case "anthropic":
		r := map[provider.Kind]anthropicfake.Reply{
			provider.KindTimeout: anthropicfake.TimeoutError(), provider.KindRateLimit: anthropicfake.RateLimited("2"),
			provider.KindQuotaExhausted: anthropicfake.BillingError(), provider.KindAuth: anthropicfake.AuthError(),
			provider.KindBadRequest: anthropicfake.InvalidRequest("messages: bad"), provider.KindContextWindowExceeded: anthropicfake.PromptTooLong(250000, 200000),
			provider.KindServer: anthropicfake.APIError(), provider.KindOverloaded: anthropicfake.Overloaded(),
		}[k]
		w.anth.Enqueue(r)
	case "openai":
		r := map[provider.Kind]openaifake.Reply{
			provider.KindTimeout: {Status: 504, RawBody: "<html><title>504 Gateway Time-out</title></html>", RawContentType: "text/html"}, provider.KindRateLimit: openaifake.RateLimited(2 * time.Second),
			provider.KindQuotaExhausted: openaifake.InsufficientQuota(), provider.KindAuth: openaifake.InvalidAPIKey("sk-wrong-000000"),
			provider.KindBadRequest: openaifake.InvalidRequest("bad"), provider.KindContextWindowExceeded: openaifake.ContextLengthExceeded(272000, 300000),
			provider.KindServer: openaifake.ServerError(), provider.KindOverloaded: openaifake.Overloaded(),
		}[k]
		w.oai.Enqueue(r)
	case "gemini":
		r := map[provider.Kind]geminifake.Reply{
			provider.KindTimeout: geminifake.DeadlineExceeded(), provider.KindRateLimit: geminifake.RateLimited("gemini-2.5-flash", 2*time.Second),
			provider.KindQuotaExhausted: geminifake.DailyQuotaExceeded("gemini-2.5-flash", 10*time.Second), provider.KindAuth: geminifake.APIKeyInvalid(),
			provider.KindBadRequest: geminifake.InvalidArgument("bad"), provider.KindContextWindowExceeded: geminifake.ContextOverflow(1_200_000, 1_048_576),
			provider.KindServer: geminifake.Internal(), provider.KindOverloaded: geminifake.Unavailable(),
		}[k]
		w.gem.Enqueue(r)
	}
}

// order puts prov first.
func order(prov string) []string {
	out := []string{prov}
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		if p != prov {
			out = append(out, p)
		}
	}
	return out
}

var primaries = []string{"anthropic", "openai", "gemini"}

func withPreference(p string, alternates bool) func(*orchestrator.Settings) {
	return func(s *orchestrator.Settings) { s.Preference, s.AllowAlternates = order(p), alternates }
}

// The spec's failure table, one row at a time, for every adapter as the
// first choice.
func TestFailureTable(t *testing.T) {
	for _, p := range primaries {
		t.Run(p, func(t *testing.T) {
			second := order(p)[1]

			t.Run("timeout retries once on the smaller tier", func(t *testing.T) {
				w := newWorld(t, withPreference(p, false))
				fault(w, p, provider.KindTimeout)
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil {
					t.Fatal(err)
				}
				as := out.Attempts
				if len(as) != 2 || as[0].Provider != p || as[0].Outcome != "timeout" || as[1].Provider != p || as[1].Tier != provider.TierFastCheap || as[1].Outcome != "ok" {
					t.Errorf("attempts = %s", path(as))
				}
			})
			t.Run("timeout twice moves to the next provider", func(t *testing.T) {
				w := newWorld(t, withPreference(p, false))
				fault(w, p, provider.KindTimeout)
				fault(w, p, provider.KindTimeout)
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil {
					t.Fatal(err)
				}
				if as := out.Attempts; len(as) != 3 || as[2].Provider != second || as[2].Outcome != "ok" {
					t.Errorf("attempts = %s", path(as))
				}
			})
			t.Run("rate limit waits retry-after then retries", func(t *testing.T) {
				w := newWorld(t, withPreference(p, false))
				fault(w, p, provider.KindRateLimit)
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil {
					t.Fatal(err)
				}
				if as := out.Attempts; len(as) != 2 || as[1].Provider != p || as[1].Outcome != "ok" || as[0].RetryAfter != 2*time.Second {
					t.Errorf("attempts = %s", path(as))
				}
				if len(w.sleeps) != 1 || w.sleeps[0] < time.Second || w.sleeps[0] > 2*time.Second {
					t.Errorf("slept %v, want about 2s", w.sleeps)
				}
			})
			t.Run("rate limit with alternates fails over without waiting", func(t *testing.T) {
				w := newWorld(t, withPreference(p, true))
				fault(w, p, provider.KindRateLimit)
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil {
					t.Fatal(err)
				}
				if as := out.Attempts; len(as) != 2 || as[1].Provider != second || len(w.sleeps) != 0 {
					t.Errorf("attempts = %s, sleeps %v", path(as), w.sleeps)
				}
				// The limited provider now goes last for the next call.
				out, err = w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil || out.Attempts[0].Provider == p {
					t.Errorf("next call attempts = %v %v", out, err)
				}
			})
			t.Run("quota exhausted surfaces and notifies", func(t *testing.T) {
				w := newWorld(t, withPreference(p, false))
				fault(w, p, provider.KindQuotaExhausted)
				_, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err == nil || !errors.Is(err, provider.KindQuotaExhausted) || len(err.Attempts) != 1 {
					t.Fatalf("err = %v", err)
				}
				w.drain()
				if len(w.notes) != 1 || w.notes[0].Event != "quota_exhausted" {
					t.Errorf("notes = %+v", w.notes)
				}
			})
			t.Run("quota exhausted with alternates fails over", func(t *testing.T) {
				w := newWorld(t, withPreference(p, true))
				fault(w, p, provider.KindQuotaExhausted)
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil || out.Attempts[1].Provider != second {
					t.Errorf("out %v err %v", out, err)
				}
			})
			t.Run("auth pauses the project until resumed", func(t *testing.T) {
				w := newWorld(t, withPreference(p, true))
				fault(w, p, provider.KindAuth)
				_, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err == nil || !errors.Is(err, provider.KindAuth) || len(err.Attempts) != 1 || !strings.Contains(err.Error(), "project resume") {
					t.Fatalf("err = %v", err)
				}
				if _, paused, _ := w.state.Paused(context.Background()); !paused {
					t.Fatal("project not paused")
				}
				w.drain()
				if len(w.notes) != 1 || w.notes[0].Event != "project_paused" {
					t.Errorf("notes = %+v", w.notes)
				}
				_, err = w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err == nil || !errors.Is(err, orchestrator.ErrPaused) || len(err.Attempts) != 0 {
					t.Errorf("call while paused = %v", err)
				}
				if err := w.o.Resume(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
					t.Errorf("after resume: %v", err)
				}
			})
			t.Run("bad request surfaces the diagnostic, no retry", func(t *testing.T) {
				w := newWorld(t, withPreference(p, true))
				fault(w, p, provider.KindBadRequest)
				_, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				var pe *provider.Error
				if err == nil || !errors.As(err, &pe) || pe.Kind != provider.KindBadRequest || pe.Diagnostic.Message == "" || len(err.Attempts) != 1 {
					t.Errorf("err = %v", err)
				}
			})
			t.Run("server errors back off three times then fail over", func(t *testing.T) {
				w := newWorld(t, withPreference(p, false))
				for range 3 {
					fault(w, p, provider.KindServer)
				}
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil {
					t.Fatal(err)
				}
				if as := out.Attempts; len(as) != 4 || as[2].Provider != p || as[3].Provider != second || as[3].Outcome != "ok" {
					t.Errorf("attempts = %s", path(as))
				}
				if len(w.sleeps) != 2 || w.sleeps[0] != 100*time.Millisecond || w.sleeps[1] != 200*time.Millisecond {
					t.Errorf("backoff sleeps = %v", w.sleeps)
				}
			})
			t.Run("overload recovers on the same provider", func(t *testing.T) {
				w := newWorld(t, withPreference(p, false))
				fault(w, p, provider.KindOverloaded)
				fault(w, p, provider.KindOverloaded)
				out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
				if err != nil {
					t.Fatal(err)
				}
				if as := out.Attempts; len(as) != 3 || as[2].Provider != p || as[2].Outcome != "ok" || as[0].Outcome != "overloaded" {
					t.Errorf("attempts = %s", path(as))
				}
			})
		})
	}
}

func TestContextWindowReroutesToALargerWindow(t *testing.T) {
	w := newWorld(t, withPreference("anthropic", false))
	// explore is fast_cheap: claude-haiku-4-5 (200k), then gpt-5-nano (272k), then gemini flash-lite (1M).
	fault(w, "anthropic", provider.KindContextWindowExceeded)
	out, err := w.invoke(t, orchestrator.Call{Agent: "explore"})
	if err != nil {
		t.Fatal(err)
	}
	as := out.Attempts
	if len(as) != 2 || as[0].Model != "claude-haiku-4-5" || as[0].Outcome != "context_window_exceeded" || as[1].Provider != "gemini" {
		t.Errorf("attempts = %s", path(as))
	}
	// When nothing larger exists, the error says so.
	w = newWorld(t, withPreference("gemini", false))
	fault(w, "gemini", provider.KindContextWindowExceeded)
	_, oe := w.invoke(t, orchestrator.Call{Agent: "explore"})
	if oe == nil || !errors.Is(oe, provider.KindContextWindowExceeded) || !strings.Contains(oe.Error(), "larger context window") {
		t.Errorf("err = %v", oe)
	}
}

func TestNetworkFailures(t *testing.T) {
	t.Run("unreachable provider, machine online", func(t *testing.T) {
		w := newWorld(t, withPreference("anthropic", false))
		w.anth.Close()
		out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
		if err != nil {
			t.Fatal(err)
		}
		if as := out.Attempts; len(as) != 3 || as[0].Outcome != "network" || as[1].Outcome != "network" || as[2].Provider != "openai" {
			t.Errorf("attempts = %s", path(as))
		}
		w.drain()
		if len(w.notes) != 1 || w.notes[0].Event != "provider_unreachable" {
			t.Errorf("notes = %+v", w.notes)
		}
	})
	t.Run("machine offline", func(t *testing.T) {
		w := newWorld(t, withPreference("anthropic", false))
		w.online = false
		w.anth.Close()
		_, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
		if err == nil || !strings.Contains(err.Error(), "this machine is offline") || len(err.Attempts) != 2 {
			t.Errorf("err = %v", err)
		}
	})
}

func TestCapabilityRouting(t *testing.T) {
	w := newWorld(t, withPreference("gemini", false))
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder", Needs: provider.NewCapabilitySet(provider.CapCodeExecution)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Attempts[0].Provider == "gemini" {
		t.Errorf("gemini has no code execution, yet it was tried: %s", path(out.Attempts))
	}
	var dropped bool
	for _, c := range out.Trace.Candidates {
		if c.Provider == "gemini" && !c.Kept && strings.Contains(c.Reason, "code_execution") {
			dropped = true
		}
	}
	if !dropped {
		t.Errorf("trace does not explain the drop:\n%s", out.Trace.String())
	}
	_, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Needs: provider.NewCapabilitySet(provider.CapWebBrowse)})
	if oe == nil || !errors.Is(oe, provider.KindCapabilityMissing) || !strings.Contains(oe.Error(), "web_browse") {
		t.Errorf("err = %v", oe)
	}
}

func TestRoutingFollowsAgentsAndOverrides(t *testing.T) {
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Agents = map[string]orchestrator.AgentSettings{"critic": {Providers: []string{"openai", "gemini"}}, "builder": {Model: "claude-opus-4-5"}}
	})
	tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "critic"})
	if tr.Tier != provider.TierReasoningHeavy || tr.Kept()[0].Provider != "openai" || tr.Kept()[0].Model != "gpt-5" || len(tr.Candidates) != 2 {
		t.Errorf("critic trace:\n%s", tr.String())
	}
	tr = w.o.Route(context.Background(), orchestrator.Call{Agent: "explore"})
	if tr.Tier != provider.TierFastCheap || tr.Kept()[0].Model != "claude-haiku-4-5" {
		t.Errorf("explore trace:\n%s", tr.String())
	}
	if tr := w.o.Route(context.Background(), orchestrator.Call{Agent: "builder"}); tr.Kept()[0].Model != "claude-opus-4-5" {
		t.Errorf("builder model override:\n%s", tr.String())
	}
	for agent, tier := range orchestrator.DefaultAgentRouting {
		if got := w.o.Route(context.Background(), orchestrator.Call{Agent: agent}).Tier; got != tier && agent != "critic" {
			t.Errorf("%s routed to %s, spec says %s", agent, got, tier)
		}
	}
}

func TestStreamsNeverFailOverAfterTheFirstChunk(t *testing.T) {
	w := newWorld(t, withPreference("anthropic", true))
	w.anth.Enqueue(anthropicfake.Reply{Text: "partial answer that breaks", MidStreamError: &anthropicfake.StreamError{Type: "overloaded_error", Message: "Overloaded", AfterEvents: 4}})
	s, err := w.o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = provider.Collect(s)
	if provider.KindOf(err) != provider.KindOverloaded {
		t.Errorf("stream error = %v", err)
	}
	as := s.Attempts()
	if len(as) != 1 || as[0].Outcome != "overloaded" || as[0].Usage.InputTokens == 0 {
		t.Errorf("attempts = %+v", as)
	}
	if n := len(w.oai.Requests()); n != 0 {
		t.Errorf("failed over after the first chunk: openai got %d requests", n)
	}
	// Before the first chunk, a stream fails over like any call.
	w.anth.Enqueue(anthropicfake.Overloaded(), anthropicfake.Overloaded(), anthropicfake.Overloaded())
	s, err = w.o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := provider.Collect(s)
	if err != nil || res.Provider != "openai" || path(s.Attempts()) != "anthropic/claude-sonnet-4-6:overloaded anthropic/claude-sonnet-4-6:overloaded anthropic/claude-sonnet-4-6:overloaded openai/gpt-5-mini:ok" {
		t.Errorf("res %v err %v attempts %s", res, err, path(s.Attempts()))
	}
}

func TestCancellationStopsWaiting(t *testing.T) {
	w := newWorld(t, func(s *orchestrator.Settings) { s.Sleep = nil; s.Preference = order("anthropic") })
	w.anth.Enqueue(anthropicfake.RateLimited("30"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = w.anth.WaitRequests(context.Background(), 1); cancel() }()
	start := time.Now()
	_, err := w.o.Invoke(ctx, orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi"}})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("cancellation did not stop the wait")
	}
}

func TestRetryAfterAboveTheCap(t *testing.T) {
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference = order("anthropic"); s.MaxRetryAfter = 5 * time.Second })
	w.anth.Enqueue(anthropicfake.RateLimited("3600"))
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	if as := out.Attempts; len(as) != 2 || as[1].Provider != "openai" || len(w.sleeps) != 0 {
		t.Errorf("attempts %s sleeps %v", path(as), w.sleeps)
	}
}
