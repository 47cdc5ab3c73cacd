package gateway_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// clock is a settable clock for the orchestrator behind the gateway.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// waitsOut is an SDK's HTTP transport that records the status and
// retry-after-ms of every answer the SDK receives and, on an answer that
// asks the caller to wait, moves the orchestrator's clock on by that
// wait: the SDK's own retry then comes after the window.
type waitsOut struct {
	clk *clock
	mu  sync.Mutex
	got []string // "429 400" (status, retry-after-ms)
}

func (s *waitsOut) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return res, err
	}
	ms := res.Header.Get("Retry-After-Ms")
	s.mu.Lock()
	s.got = append(s.got, strings.TrimSpace(strconv.Itoa(res.StatusCode)+" "+ms))
	s.mu.Unlock()
	if n, err := strconv.Atoi(ms); err == nil {
		s.clk.Advance(time.Duration(n) * time.Millisecond)
	}
	return res, nil
}

func (s *waitsOut) seen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.got, ", ")
}

// windowWorld is a gateway whose orchestrator reads clk and waits out no
// rate limit longer than 100 ms itself.
// Callers pin the provider ("gpt/gpt-5-mini"), so that no other serves.
func windowWorld(t *testing.T, clk *clock, pref string, mutate func(*orchestrator.Settings)) *world {
	return newWorld(t, serveOn(pref), withOrch(func(s *orchestrator.Settings) {
		s.Now, s.MaxRetryAfter = clk.Now, 100*time.Millisecond
		if mutate != nil {
			mutate(s)
		}
	}))
}

// A caller inside a provider's rate-limit window gets the 429 with what is
// left of the window, whichever caller opened it; the official SDKs'
// default retries then wait it out and the call succeeds, its second try
// being the first to reach the provider.
func TestRateLimitWindowIsA429ForEveryCaller(t *testing.T) {
	ctx := ctxT(t)
	t.Run("openai-go", func(t *testing.T) {
		clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
		w := windowWorld(t, clk, "gpt", nil)
		w.oai.Enqueue(openaifake.RateLimited(400 * time.Millisecond).WithRetryAfter(400 * time.Millisecond))
		_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi")})
		e := openAIErr(t, err)
		if e.StatusCode != 429 || e.Type != "tokens" || e.Code != "rate_limit_exceeded" || e.Response.Header.Get("Retry-After-Ms") != "400" || e.Response.Header.Get("Retry-After") != "1" {
			t.Errorf("the first caller got %d %q %q, retry-after-ms %q", e.StatusCode, e.Type, e.Code, e.Response.Header.Get("Retry-After-Ms"))
		}
		clk.Advance(150 * time.Millisecond)
		tr := &waitsOut{clk: clk}
		c := w.openai(w.key, ooption.WithMaxRetries(2), ooption.WithHTTPClient(&http.Client{Transport: tr}))
		out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi")})
		if err != nil || len(out.Choices) != 1 {
			t.Fatalf("the second caller, with the SDK's retries: %v", err)
		}
		if got := tr.seen(); got != "429 250, 200" {
			t.Errorf("the SDK received %q; want the 429 with the 250 ms left of the window, then the answer", got)
		}
		if n := len(w.oai.Requests()); n != 2 {
			t.Errorf("the provider got %d requests; want the first caller's and the retry after the window", n)
		}
	})
	t.Run("anthropic-sdk-go", func(t *testing.T) {
		clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
		w := windowWorld(t, clk, "claude", nil)
		w.anth.Enqueue(anthropicfake.RateLimitedMs(400))
		_, err := w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-6", MaxTokens: 10, Messages: userMsgA("hi")})
		ae := anthropicErr(t, err)
		if ae.StatusCode != 429 || ae.Type() != "rate_limit_error" || ae.Response.Header.Get("Retry-After-Ms") != "400" {
			t.Errorf("the first caller got %d %q, retry-after-ms %q", ae.StatusCode, ae.Type(), ae.Response.Header.Get("Retry-After-Ms"))
		}
		clk.Advance(150 * time.Millisecond)
		tr := &waitsOut{clk: clk}
		c := w.anthropic(w.key, aoption.WithMaxRetries(2), aoption.WithHTTPClient(&http.Client{Transport: tr}))
		if _, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-6", MaxTokens: 10, Messages: userMsgA("hi")}); err != nil {
			t.Fatalf("the second caller, with the SDK's retries: %v", err)
		}
		if got := tr.seen(); got != "429 250, 200" {
			t.Errorf("the SDK received %q; want the 429 with the 250 ms left of the window, then the answer", got)
		}
		if n := len(w.anth.Requests()); n != 2 {
			t.Errorf("the provider got %d requests; want the first caller's and the retry after the window", n)
		}
	})
}

// OpenAI's token-limit 429 says type "tokens"; a request limit "requests".
func TestRateLimitTypeSaysWhichLimit(t *testing.T) {
	ctx := ctxT(t)
	for _, c := range []struct {
		reply openaifake.Reply
		want  string
	}{
		{openaifake.RateLimited(time.Minute).WithRetryAfter(time.Minute), "tokens"},
		{openaifake.RateLimitedRequests(time.Minute).WithRetryAfter(time.Minute), "requests"},
	} {
		w := newWorld(t, serveOn("gpt"))
		w.oai.Enqueue(c.reply)
		_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi")})
		if e := openAIErr(t, err); e.StatusCode != 429 || e.Type != c.want || e.Response.Header.Get("Retry-After") != "60" {
			t.Errorf("429 type %q retry-after %q; want %q", e.Type, e.Response.Header.Get("Retry-After"), c.want)
		}
	}
}

// An overload the provider names no wait for comes back as Anthropic's 529
// (OpenAI's 503) with the backoff the next attempt would have waited; an
// overload that opens the breaker, and a call while it is open, with the
// wait until the breaker lets a probe through.
func TestOverloadAndOpenBreakerCarryTheWait(t *testing.T) {
	ctx := ctxT(t)
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	w := windowWorld(t, clk, "claude", func(s *orchestrator.Settings) {
		s.Backoff = func(n int) time.Duration { return time.Duration(n) * time.Second }
		s.Breaker = orchestrator.BreakerSettings{Failures: 4, Cooldown: 30 * time.Second}
	})
	headers := func(h http.Header) string {
		return h.Get("Retry-After") + " " + h.Get("Retry-After-Ms") + " " + h.Get("X-Should-Retry")
	}
	for range 3 {
		w.anth.Enqueue(anthropicfake.Overloaded())
	}
	_, err := w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-6", MaxTokens: 10, Messages: userMsgA("hi")})
	if ae := anthropicErr(t, err); ae.StatusCode != 529 || ae.Type() != "overloaded_error" || headers(ae.Response.Header) != "3 3000 " {
		t.Errorf("overloaded: %d %q, retry-after/-ms/x-should-retry %q; want 529 overloaded_error with the next backoff, 3 s", ae.StatusCode, ae.Type(), headers(ae.Response.Header))
	}

	// The fourth failure opens the breaker for 30 s.
	w.anth.Enqueue(anthropicfake.Overloaded())
	_, err = w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude/claude-sonnet-4-6", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 503 || e.Code != "overloaded" || headers(e.Response.Header) != "30 30000 " {
		t.Errorf("overloaded into an open breaker: %d %q, retry-after/-ms/x-should-retry %q; want 503 overloaded, 30 s", e.StatusCode, e.Code, headers(e.Response.Header))
	}

	clk.Advance(10 * time.Second)
	before := len(w.anth.Requests())
	_, err = w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude/claude-sonnet-4-6", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 503 || e.Type != "server_error" || headers(e.Response.Header) != "20 20000 " {
		t.Errorf("breaker open (OpenAI): %d %q, retry-after/-ms/x-should-retry %q; want 503 with the 20 s left", e.StatusCode, e.Type, headers(e.Response.Header))
	}
	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-6", MaxTokens: 10, Messages: userMsgA("hi")})
	if ae := anthropicErr(t, err); ae.StatusCode != 503 || ae.Type() != "api_error" || headers(ae.Response.Header) != "20 20000 " {
		t.Errorf("breaker open (Anthropic): %d %q, retry-after/-ms/x-should-retry %q; want 503 with the 20 s left", ae.StatusCode, ae.Type(), headers(ae.Response.Header))
	}
	if n := len(w.anth.Requests()); n != before {
		t.Errorf("the open breaker let %d requests through", n-before)
	}
}
