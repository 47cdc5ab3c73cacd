package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/provider"
)

func TestCounts(t *testing.T) {
	o := New(Settings{})
	ctx := context.Background()
	inv := observe.Invocation{ID: "inv_1", Agent: "builder", Task: "T1"}
	o.AttemptDone(ctx, observe.Attempt{Agent: "builder", Provider: "anthropic", Model: "claude-sonnet-4-6", Outcome: "server", Latency: 300 * time.Millisecond})
	o.AttemptDone(ctx, observe.Attempt{Agent: "builder", Provider: "openai", Model: "gpt-5-mini", Outcome: "ok", Latency: 2 * time.Second,
		Usage: provider.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 400, CacheWriteTokens: 100}, Cost: provider.MustMoney("0.25")})
	o.EndInvocation(ctx, inv, observe.End{Outcome: "ok", Provider: "openai", Model: "gpt-5-mini-2026", Attempts: 2, Duration: 3 * time.Second})
	o.EndInvocation(ctx, observe.Invocation{Agent: "explore"}, observe.End{Outcome: "cache_hit", Provider: "openai", Model: "gpt-5-mini-2026", Saved: provider.MustMoney("0.5")})
	o.EndInvocation(ctx, observe.Invocation{Agent: "planner"}, observe.End{Outcome: "budget", Budget: observe.BudgetRefusal{Scope: "month", Reason: "paused"}})
	o.BreakerChanged("anthropic", observe.BreakerOpen)
	o.BreakerChanged("openai", observe.BreakerHalfOpen)
	o.BreakerChanged("openai", observe.BreakerClosed)

	for _, c := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{o.attempts.WithLabelValues("anthropic", "claude-sonnet-4-6", "server"), 1},
		{o.attempts.WithLabelValues("openai", "gpt-5-mini", "ok"), 1},
		{o.tokens.WithLabelValues("openai", "gpt-5-mini", "builder", "input"), 1000},
		{o.tokens.WithLabelValues("openai", "gpt-5-mini", "builder", "output"), 50},
		{o.promptCache.WithLabelValues("openai", "gpt-5-mini", "builder", "read"), 400},
		{o.promptCache.WithLabelValues("openai", "gpt-5-mini", "builder", "write"), 100},
		{o.cost.WithLabelValues("openai", "gpt-5-mini", "builder"), 0.25},
		{o.requests.WithLabelValues("openai", "gpt-5-mini-2026", "builder", "ok"), 1},
		{o.requests.WithLabelValues("openai", "gpt-5-mini-2026", "explore", "cache_hit"), 1},
		{o.requests.WithLabelValues("", "", "planner", "budget"), 1},
		{o.cacheHits.WithLabelValues("openai", "gpt-5-mini-2026", "explore"), 1},
		{o.cacheSaved.WithLabelValues("openai", "gpt-5-mini-2026", "explore"), 0.5},
		{o.rejections.WithLabelValues("planner", "month", "paused"), 1},
		{o.breaker.WithLabelValues("anthropic"), 2},
		{o.breaker.WithLabelValues("openai"), 0},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%v = %v, want %v", c.c.(prometheus.Metric).Desc(), got, c.want)
		}
	}
	// The histograms: a 2 s attempt falls in the 2.56 s bucket.
	const want = `
# HELP cortexbuild_attempt_duration_seconds Latency of one attempt on a provider.
# TYPE cortexbuild_attempt_duration_seconds histogram
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.01"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.02"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.04"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.08"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.16"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.32"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="0.64"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="1.28"} 0
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="2.56"} 1
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="5.12"} 1
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="10.24"} 1
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="20.48"} 1
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="40.96"} 1
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="81.92"} 1
cortexbuild_attempt_duration_seconds_bucket{model="gpt-5-mini",outcome="ok",provider="openai",le="+Inf"} 1
cortexbuild_attempt_duration_seconds_sum{model="gpt-5-mini",outcome="ok",provider="openai"} 2
cortexbuild_attempt_duration_seconds_count{model="gpt-5-mini",outcome="ok",provider="openai"} 1
`
	o.attemptDuration.DeleteLabelValues("anthropic", "claude-sonnet-4-6", "server")
	if err := testutil.CollectAndCompare(o.attemptDuration, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(o.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestPrivateRegistry(t *testing.T) {
	o := New(Settings{})
	o.EndInvocation(context.Background(), observe.Invocation{Agent: "builder"}, observe.End{Outcome: "ok"})
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "cortexbuild_") {
			t.Errorf("%s is on the global registry", mf.GetName())
		}
	}
	// Two observers in one process never collide.
	_ = New(Settings{Runtime: true})
	_ = New(Settings{Runtime: true})
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServe(t *testing.T) {
	o := New(Settings{Runtime: true})
	o.EndInvocation(context.Background(), observe.Invocation{Agent: "builder"}, observe.End{Outcome: "ok", Provider: "anthropic", Model: "claude-sonnet-4-6"})
	o.BreakerChanged("anthropic", observe.BreakerHalfOpen)
	srv, err := Serve("127.0.0.1:0", o.Handler())
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr().String()
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{
		`cortexbuild_requests_total{agent="builder",model="claude-sonnet-4-6",outcome="ok",provider="anthropic"} 1`,
		`cortexbuild_breaker_state{provider="anthropic"} 1`,
		"# TYPE cortexbuild_request_duration_seconds histogram",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get(t, base+"/"); code != http.StatusNotFound {
		t.Errorf("GET / = %d, want 404", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Error("still serving after Shutdown")
	}
}

func TestServeDefaultsToLoopback(t *testing.T) {
	srv, err := Serve(":0", New(Settings{}).Handler())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if ip := srv.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("an empty host bound %v, want loopback", ip)
	}
	if _, err := Serve("127.0.0.1", nil); err == nil {
		t.Error("an address without a port was accepted")
	}
}

// TestLabelsBounded: model names a client chooses (through the gateway)
// never become label values; only the configured names do, and the rest
// are counted under "other", so the number of series stays bounded.
func TestLabelsBounded(t *testing.T) {
	o := New(Settings{Names: &Names{Providers: []string{"anthropic"}, Models: []string{"claude-sonnet-4-6"}, Agents: []string{"builder"}}})
	ctx := context.Background()
	for i := range 5000 {
		model := "client-model-" + strconv.Itoa(i)
		agent := "client-agent-" + strconv.Itoa(i)
		o.AttemptDone(ctx, observe.Attempt{Agent: agent, Provider: "anthropic", Model: model, Outcome: "ok", Latency: time.Millisecond,
			Usage: provider.Usage{InputTokens: 10, OutputTokens: 1}, Cost: provider.MustMoney("0.25")})
		o.EndInvocation(ctx, observe.Invocation{Agent: agent}, observe.End{Outcome: "ok", Provider: "prov-" + strconv.Itoa(i), Model: model})
		o.BreakerChanged("prov-"+strconv.Itoa(i), observe.BreakerClosed)
	}
	o.AttemptDone(ctx, observe.Attempt{Agent: "builder", Provider: "anthropic", Model: "claude-sonnet-4-6", Outcome: "ok", Latency: time.Millisecond, Usage: provider.Usage{InputTokens: 7}})
	o.EndInvocation(ctx, observe.Invocation{Agent: "builder"}, observe.End{Outcome: "ok", Provider: "anthropic", Model: "claude-sonnet-4-6"})

	if n := testutil.CollectAndCount(o.requests); n != 2 {
		t.Errorf("requests_total has %d series, want 2 (configured and other)", n)
	}
	if n := testutil.CollectAndCount(o.attempts); n != 2 {
		t.Errorf("attempts_total has %d series, want 2", n)
	}
	if n := testutil.CollectAndCount(o.breaker); n != 1 {
		t.Errorf("breaker_state has %d series, want 1", n)
	}
	mfs, err := o.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		series += len(mf.GetMetric())
	}
	if series > 30 {
		t.Errorf("%d series after 5000 distinct client-chosen names, want a bounded few", series)
	}
	for _, c := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{o.requests.WithLabelValues("other", "other", "other", "ok"), 5000},
		{o.requests.WithLabelValues("anthropic", "claude-sonnet-4-6", "builder", "ok"), 1},
		{o.attempts.WithLabelValues("anthropic", "other", "ok"), 5000},
		{o.tokens.WithLabelValues("anthropic", "other", "other", "input"), 50000},
		{o.tokens.WithLabelValues("anthropic", "claude-sonnet-4-6", "builder", "input"), 7},
		{o.cost.WithLabelValues("anthropic", "other", "other"), 1250},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%v = %v, want %v", c.c.(prometheus.Metric).Desc(), got, c.want)
		}
	}
}
