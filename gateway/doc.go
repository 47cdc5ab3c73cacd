// Package gateway is CortexBuild's HTTP front door: an OpenAI-compatible
// and an Anthropic-compatible API in front of the orchestrator, so that
// host tools (Claude Code, Codex CLI, any OpenAI or Anthropic SDK) get its
// routing, budgets, response cache, locality gate, critic gate and
// failover by pointing their base URL at it.
//
//	client, in either protocol
//	  │  POST /v1/chat/completions         POST /v1/messages
//	  │  POST /v1/responses                POST /v1/messages/count_tokens
//	  │  GET  /v1/models
//	  ▼
//	headers within gateway.header_timeout (else the connection is closed)
//	  → Host is the gateway's (421), no cross-site browser request (403)
//	  → a slot of gateway.max_in_flight (else the overloaded error at once)
//	  → virtual key (Authorization: Bearer or x-api-key, SHA-256, constant time)
//	  → a slot of gateway.max_in_flight_per_key (else the overloaded error)
//	  → Content-Type: application/json (415)
//	  → body within gateway.body_timeout (408) and the body limit (413)
//	  → strict decoding (400 naming the field; a body only a relay can
//	    carry goes on with the body itself: see below)
//	  → model name → Target (alias, tier, agent, provider/model)
//	  → X-CortexBuild-Agent / X-CortexBuild-Task, key bindings, host ids
//	  ▼
//	orchestrator.Invoke / Stream: route → locality gate → cache → budget
//	reserve → adapter → failure policy → settle
//	  ▼
//	an adapter that speaks the caller's protocol relays the body as sent
//	and the provider's answer, events and errors as they came
//	(X-CortexBuild-Relayed); any other is translated: the caller's
//	protocol, whichever provider served: JSON, SSE events with tool-call
//	argument deltas, or the protocol's error shape with its status,
//	retry-after and x-should-retry
//
// [New] builds the http.Handler; [Gateway.Listen] binds it (refusing a
// gateway without authentication on a non-loopback address) and returns a
// [Server] whose Shutdown is graceful: no new connections, in-flight
// requests run until the deadline, then the rest are cancelled with
// [ErrShuttingDown] as their cause, so streams end with the protocol's
// error event and the orchestrator settles or releases their reservations
// through its normal paths. Other handlers (a web console) are mounted on
// the same server with [Gateway.Handle].
//
// Keys live in a [KeyStore]: a JSON file with mode 0600 in the project's
// .cortexbuild/ directory, each key kept as a SHA-256 hash of the token
// ("cbk_<id>_<secret>"), bound to the project and optionally to an agent
// and a task. The token is shown once, when created.
//
// A fleet of gateways sharing a Redis ([Options.Shared]) counts each
// key's rpm and tpm there and keeps there the provider state between a
// conversation's turns, so that any replica serves any turn; when Redis
// cannot be reached each replica falls back to its own, saying so in
// [HeaderDegraded]. /readyz pings the engines of [Options.Ready];
// /healthz is the liveness probe.
//
// docs/gateway.md has the recipes (Claude Code, Codex CLI, OpenAI SDKs),
// the model-name mapping, the error mapping table and the parameter
// policy.
package gateway
