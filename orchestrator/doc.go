// Package orchestrator is CortexBuild's own orchestration engine: the one
// invocation loop that routes each agent's request to a provider and owns
// every retry and failover. Adapters never retry; this package is where the
// spec's failure table is applied, by error kind and never by status code.
//
//	Call ─▶ route (agent tier, capabilities, preference, circuit breakers,
//	         rate-limit headroom)
//	     ─▶ for each candidate: locality gate ─▶ rate-limit queue ─▶ breaker ─▶ adapter
//	          ok ─────────────▶ Outcome{Result, Attempts, Trace}
//	          timeout ────────▶ once more on the next smaller tier, then next provider
//	          rate limit ─────▶ wait retry-after (capped), or an alternate if enabled
//	          quota ──────────▶ an alternate if enabled, else surface and notify
//	          auth ───────────▶ pause the project, notify, surface
//	          bad request ────▶ surface the diagnostic
//	          context window ─▶ a candidate with a longer context, else surface
//	          server/overload ▶ backoff with jitter, 3 attempts, then next provider
//	          network ────────▶ once more, then "offline" or "unreachable"
//	          capability ─────▶ next candidate
//
// Each attempt's outcome also feeds its provider's circuit breaker
// (breaker.go): consecutive server, overload, network or timeout failures
// open it, and the router drops the provider until one probe call
// succeeds.
//
// Every attempt is recorded and returned, and reported to Settings.Observer
// when one is set (logs, traces, metrics: see package observe). Streams never retry or fail over
// once their first chunk reached the caller. Time (sleeps, clock) and the
// machine's connectivity check are injected so tests never wait.
package orchestrator
