package observe

import (
	"context"
	"log/slog"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Logger is an Observer that writes one structured line per attempt and
// per invocation to a log/slog logger:
//
//   - "llm attempt": debug when it answered, warn when it failed.
//   - "llm invocation": info when the call succeeded (or was a cache hit),
//     warn when it failed or a budget refused it.
//   - "llm breaker": warn when a breaker opens, info otherwise.
//
// Each line carries the invocation id, agent, task, provider, model,
// outcome, token counts, cost in USD and durations in milliseconds; never a
// prompt, an answer, an error message or a credential.
type Logger struct {
	l *slog.Logger
}

// NewLogger returns a Logger writing to l (slog.Default() when nil).
func NewLogger(l *slog.Logger) *Logger {
	if l == nil {
		l = slog.Default()
	}
	return &Logger{l: l}
}

// StartInvocation returns ctx: a call is logged when it ends.
func (*Logger) StartInvocation(ctx context.Context, _ Invocation) context.Context { return ctx }

// AttemptDone logs the attempt.
func (g *Logger) AttemptDone(ctx context.Context, a Attempt) {
	lvl := slog.LevelDebug
	if a.Outcome != OutcomeOK || a.Unpriced {
		lvl = slog.LevelWarn
	}
	if !g.l.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs,
		slog.String("invocation_id", a.InvocationID),
		slog.String("agent", a.Agent),
		slog.String("task", a.Task),
		slog.String("provider", a.Provider),
		slog.String("model", a.Model),
		slog.String("tier", string(a.Tier)),
		slog.String("outcome", a.Outcome),
	)
	if a.ResponseModel != "" && a.ResponseModel != a.Model {
		attrs = append(attrs, slog.String("response_model", a.ResponseModel))
	}
	if a.FinishReason != "" {
		attrs = append(attrs, slog.String("finish_reason", string(a.FinishReason)))
	}
	if a.Stream {
		attrs = append(attrs, slog.Bool("stream", true))
	}
	if a.Unpriced {
		attrs = append(attrs, slog.Bool("unpriced", true))
	}
	attrs = usageAttrs(attrs, a.Usage, a.Cost)
	attrs = append(attrs, slog.Float64("latency_ms", ms(a.Latency)))
	if a.Waited > 0 {
		attrs = append(attrs, slog.Float64("waited_ms", ms(a.Waited)))
	}
	if a.RetryAfter > 0 {
		attrs = append(attrs, slog.Float64("retry_after_ms", ms(a.RetryAfter)))
	}
	g.l.LogAttrs(ctx, lvl, "llm attempt", attrs...)
}

// EndInvocation logs the call's outcome and totals.
func (g *Logger) EndInvocation(ctx context.Context, inv Invocation, end End) {
	lvl := slog.LevelInfo
	if end.Outcome != OutcomeOK && end.Outcome != OutcomeCacheHit {
		lvl = slog.LevelWarn
	}
	if !g.l.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, 24)
	attrs = append(attrs,
		slog.String("invocation_id", inv.ID),
		slog.String("agent", inv.Agent),
		slog.String("task", inv.Task),
		slog.String("tier", string(inv.Tier)),
		slog.String("provider", end.Provider),
		slog.String("model", end.Model),
		slog.String("outcome", end.Outcome),
		slog.Int("attempts", end.Attempts),
	)
	if inv.Stream {
		attrs = append(attrs, slog.Bool("stream", true))
	}
	if end.FinishReason != "" {
		attrs = append(attrs, slog.String("finish_reason", string(end.FinishReason)))
	}
	attrs = usageAttrs(attrs, end.Usage, end.Cost)
	if end.Saved > 0 {
		attrs = append(attrs, slog.Float64("saved_usd", USD(end.Saved)))
	}
	if b := end.Budget; b.Scope != "" {
		attrs = append(attrs, slog.String("budget_scope", b.Scope), slog.String("budget_reason", b.Reason))
		if b.Estimate > 0 {
			attrs = append(attrs, slog.Float64("estimate_usd", USD(b.Estimate)))
		}
		if b.Limit > 0 {
			attrs = append(attrs, slog.Float64("limit_usd", USD(b.Limit)))
		}
	}
	attrs = append(attrs, slog.Float64("duration_ms", ms(end.Duration)))
	g.l.LogAttrs(ctx, lvl, "llm invocation", attrs...)
}

// BreakerChanged logs the new state.
func (g *Logger) BreakerChanged(prov string, state BreakerState) {
	lvl := slog.LevelInfo
	if state == BreakerOpen {
		lvl = slog.LevelWarn
	}
	g.l.LogAttrs(context.Background(), lvl, "llm breaker", slog.String("provider", prov), slog.String("state", state.String()))
}

func usageAttrs(attrs []slog.Attr, u provider.Usage, cost provider.Money) []slog.Attr {
	attrs = append(attrs,
		slog.Int64("input_tokens", u.InputTokens),
		slog.Int64("output_tokens", u.OutputTokens),
	)
	if u.CacheReadTokens > 0 {
		attrs = append(attrs, slog.Int64("cache_read_tokens", u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		attrs = append(attrs, slog.Int64("cache_write_tokens", u.CacheWriteTokens))
	}
	if u.ReasoningTokens > 0 {
		attrs = append(attrs, slog.Int64("reasoning_tokens", u.ReasoningTokens))
	}
	if u.Estimated {
		attrs = append(attrs, slog.Bool("usage_estimated", true))
	}
	return append(attrs, slog.Float64("cost_usd", USD(cost)))
}

// USD converts an exact amount to float64 dollars, the unit logs, spans
// and metrics carry.
func USD(m provider.Money) float64 { return float64(m.Nanos()) / float64(provider.Dollar) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var _ Observer = (*Logger)(nil)
