package orchestrator_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/observe/metrics"
	"github.com/cortexbuild/cortexbuild/observe/tracing"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// stubAdapter answers at once, in memory, so that a benchmark measures the
// orchestrator alone.
type stubAdapter struct{}

var stubResult = provider.Result{Content: "42", Usage: provider.Usage{InputTokens: 12, OutputTokens: 6}, Cost: 90 * provider.Nano, Provider: "stub", Model: "stub-model", StopReason: provider.StopEndTurn, Latency: time.Millisecond}

func (stubAdapter) Name() string { return "stub" }
func (stubAdapter) Invoke(context.Context, *provider.Request) (*provider.Result, error) {
	r := stubResult
	return &r, nil
}
func (stubAdapter) Stream(context.Context, *provider.Request) (provider.Stream, error) {
	return nil, errors.New("not used")
}
func (stubAdapter) EstimateCost(*provider.Request) (provider.Money, error) { return 0, nil }
func (stubAdapter) Capabilities() provider.CapabilitySet                   { return provider.NewCapabilitySet() }
func (stubAdapter) RateLimitStatus(context.Context) provider.RateLimitStatus {
	return provider.RateLimitStatus{}
}
func (stubAdapter) HealthCheck(context.Context) provider.HealthStatus {
	return provider.HealthStatus{Healthy: true}
}
func (stubAdapter) ModelFor(provider.Tier) string { return "stub-model" }

// observers are the benchmark's cases: none (nil, the default), the no-op,
// and each real observer with its output discarded.
func observers(b *testing.B) []struct {
	name string
	obs  observe.Observer
} {
	tp := sdktrace.NewTracerProvider() // records spans, exports nowhere
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.Settings{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	logs := observe.NewLogger(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
	m := metrics.New(metrics.Settings{})
	return []struct {
		name string
		obs  observe.Observer
	}{
		{"nil", nil},
		{"nop", observe.Nop{}},
		{"logs", logs},
		{"metrics", m},
		{"traces", tr},
		{"all", observe.Multi(logs, tr, m)},
	}
}

// BenchmarkObserverOverhead measures what observing adds to one call
// through the orchestrator, with an in-memory adapter so that nothing else
// is timed. "nil" is the default (no observer); docs/benchmarks.md records
// the figures.
func BenchmarkObserverOverhead(b *testing.B) {
	ctx := context.Background()
	call := orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "What is the answer?", MaxTokens: 256}}
	for _, c := range observers(b) {
		b.Run(c.name, func(b *testing.B) {
			o, err := orchestrator.New(orchestrator.Settings{Endpoints: []orchestrator.Endpoint{{Name: "stub", Adapter: stubAdapter{}}}, Observer: c.obs})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := o.Invoke(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInvokeObserved is BenchmarkInvoke's orchestrator case (a real
// adapter against the loopback fake) with each observer.
func BenchmarkInvokeObserved(b *testing.B) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey("bench-key"), anthropicfake.WithSeed(1), anthropicfake.WithDefaultReply(func(anthropicfake.Recorded) anthropicfake.Reply {
		return anthropicfake.Reply{Text: "The answer is 42.", Usage: anthropicfake.Usage{Input: 12, Output: 6}}
	}))
	defer srv.Close()
	ctx := context.Background()
	cat, err := pricing.Default()
	if err != nil {
		b.Fatal(err)
	}
	a, err := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": "bench-key"}, Pricer: cat})
	if err != nil {
		b.Fatal(err)
	}
	call := orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "What is the answer?", MaxTokens: 256}}
	for _, c := range observers(b) {
		if c.name != "nil" && c.name != "all" {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			o, err := orchestrator.New(orchestrator.Settings{Endpoints: []orchestrator.Endpoint{{Name: "anthropic", Adapter: a}}, Observer: c.obs})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := o.Invoke(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
