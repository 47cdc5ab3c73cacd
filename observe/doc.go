// Package observe is how the orchestrator reports what it does to logs,
// traces and metrics, without knowing which of them are on.
//
// The orchestrator calls an [Observer] at a few fixed points of every call:
//
//	Invoke / Stream ─▶ StartInvocation (returns the context the call runs in)
//	     route, budget, cache, attempts on providers ...
//	     end ───────────────────▶ AttemptDone   (each attempt, with its own times;
//	                                             a stream's failed ones as it opens)
//	                            ▶ EndInvocation (outcome, totals, a budget refusal,
//	                                             a cache hit and its saving)
//	circuit breaker changes ───▶ BreakerChanged
//
// An Observer sees identifiers, model names, outcome kinds, token counts,
// costs and durations, and never a prompt, an answer, an error message (a
// provider's diagnostic may quote the prompt) or a credential: those are
// not in the types below, so no implementation can leak them.
//
// A nil Observer in orchestrator.Settings costs nothing: the orchestrator
// skips every call. Implementations here and in the subpackages:
//
//   - [Logger]: one structured log/slog line per attempt and per invocation.
//   - observe/tracing: OpenTelemetry spans following the GenAI semantic
//     conventions (an invoke_agent span per call, a chat span per attempt).
//   - observe/metrics: Prometheus counters, histograms and a breaker gauge
//     on a private registry, served at /metrics.
//
// [Multi] combines several. Nothing here opens a connection or a port by
// itself: an exporter or a listener exists only when the configuration
// names one.
package observe
