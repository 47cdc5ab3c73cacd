// Package anthropic is CortexBuild's native adapter for the Anthropic
// Messages API, built on the official SDK (github.com/anthropics/anthropic-sdk-go/v2,
// pinned in go.mod). It is the only package that knows Anthropic's wire
// format, headers and error strings.
//
// # Tier mapping (the spec's, overridable per provider in llm-config.yaml)
//
//	reasoning_heavy  claude-opus-4-7
//	balanced         claude-sonnet-4-6
//	fast_cheap       claude-haiku-4-5
//
// # Capabilities
//
// Every model: tool use (also how code execution is offered), streaming,
// prompt caching, code execution. Per model, from the price catalog: long
// context 200k, long context 1M (Opus 4.6+, Sonnet 4.6+), vision.
//
// # Behaviour
//
//   - SDK retries are off (the orchestrator is the one retry owner), the
//     SDK's environment defaults are off (ANTHROPIC_API_KEY and friends are
//     never read behind the configuration's back), and each attempt's
//     timeout is the request's.
//   - The SDK sends every call (credentials, anthropic-version and
//     anthropic-beta headers, base URL, timeouts, error statuses as
//     *anthropic.Error) but not its body: the request is encoded and the
//     answer and stream events decoded with fixed structs (wire.go), which
//     skips the SDK's reflective codecs. An answer the fixed structs do not
//     take as they are goes through the SDK's own types. The tests hold
//     both to the SDK's (equivalence_test.go, with the former parameter
//     builder kept in sdkparams_test.go). The SDK's own OpenTelemetry span
//     of Messages.New (and the trace headers it could add) is not started:
//     cortexbuild installs no global tracer provider, so it never recorded.
//   - Usage is normalised with [provider.UsageExclusive]: Anthropic's
//     input_tokens excludes cache reads and writes. Streamed usage takes
//     message_start's input counts and message_delta's cumulative output
//     count; nothing is summed twice.
//   - Cache marks: a part or tool with Cache gets a cache_control
//     breakpoint there; Request.PromptCache "5m" or "1h" adds ours on the
//     system prompt and then the last tool, the stable prefix, while the
//     request stays within the API's four marks (the caller's first).
//   - Thinking blocks come back as reasoning parts with their signature in
//     Meta["anthropic.signature"] (redacted ones in
//     Meta["anthropic.redacted_thinking"]) and are echoed unchanged.
//   - Errors are classified on status, error type and error code: 400
//     "prompt is too long" is context-window-exceeded; 402 billing and 429
//     enforced_spend_limit_reached are quota-exhausted; 429 carries
//     retry-after from retry-after-ms or retry-after; 529 is overloaded; an
//     error event after HTTP 200 keeps its type's kind; a stream that ends
//     without message_stop is a network error.
//   - EstimateCost bounds the cost from above: the prompt bounded offline
//     (pricing.BoundRequestTokens: o200k with Claude's token factor where
//     that count is plausible, a token per byte elsewhere; each image by
//     [Images], Claude's formula from its size), every prompt
//     token at the cache-write rate when caching is asked for, and the full
//     max_tokens of output, clamped to the model's max_output_tokens, which
//     is also what is sent.
//   - Native relay ([Adapter.SpeaksNative]: the Messages protocol, every
//     model). A request with Native of that protocol goes upstream as the
//     client sent it (adapterkit.NativeBody: only the model and a
//     max_tokens above the request's, itself clamped to the model's
//     max_output_tokens, are changed, and named in Edits), through the
//     SDK's Post. Each of the client's headers replaces the SDK's
//     (anthropic-version, anthropic-beta values as they came, unknown ones
//     included; without one, the SDK's anthropic-version stays); none of
//     the Meta betas of the translated path is added, and no credential,
//     cookie or hop-by-hop header of the client's is ever sent (names such
//     as Authorization, X-Api-Key, or containing auth, api-key, token,
//     secret, password, credential, cookie, session): only the adapter's
//     key. A unary answer comes back
//     in Result.Native byte for byte (status, end-to-end headers), decoded
//     as a translated one's for content, tool calls, usage and cost, with
//     the web searches (usage.server_tool_use.web_search_requests) and the
//     service tier ("" for standard) too; blocks of types it does not know
//     (server_tool_use, web_search_tool_result, …) are skipped. An error
//     status is classified as on the translated path and its answer kept
//     in Error.Reply. A relayed stream is read with adapterkit.SSEReader:
//     every event is one chunk with its bytes in Raw (the first with the
//     status and headers in Reply), content filled as on a translated
//     stream (a server tool's input is no tool-call delta); an event:
//     error is classified as the SDK would, its bytes in Error.Reply (with
//     the stream's status and headers); a stream cut between or inside
//     events is truncated (network), billed for what came. A body whose
//     "stream" does not match the call (Invoke or Stream) is refused.
//     Request.Validate is not run on a relayed request: the API judges it.
//   - HealthCheck lists one model (GET /v1/models?limit=1): no tokens spent.
//   - RateLimitStatus reports the anthropic-ratelimit-* headers of the
//     latest response.
package anthropic
