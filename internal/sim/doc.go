// Package sim serves wire-faithful fakes of the three LLM providers on
// loopback ports, with scriptable faults, so that a configuration and its
// failover can be tried offline and in CI without spending money. It is
// what 'cortexbuild sim' runs.
//
// [Start] opens one listener per endpoint, in this order:
//
//	anthropic  type anthropic                   Messages API (anthropicfake)
//	openai     type openai_compatible/openai    Chat Completions, OpenAI flavour (openaifake)
//	ollama     type openai_compatible/ollama    Chat Completions, Ollama flavour
//	vllm       type openai_compatible/vllm      Chat Completions, vLLM flavour
//	gemini     type gemini                      Gemini Developer API (geminifake)
//
// Every endpoint answers with the fake's default reply, an echo of the last
// user text ("echo: …"), unless a fault is scripted. A request that
// mentions the critic's independent_reviewer field gets the echo followed
// by "independent_reviewer: MODEL", naming the model it was sent to, as a
// critic following its persona would. Keys: anthropic,
// openai and gemini require the fixed key [Key] ("sim-key"), answering a
// missing or wrong one exactly as the real API does (401, or Gemini's 400
// API_KEY_INVALID / 403); ollama and vllm accept any key or none, as those
// servers do by default. [Sim.Config] writes a complete llm-config.yaml
// that points every provider at the sim and reads the key from
// ${CORTEXBUILD_SIM_KEY}.
//
// # Faults
//
// A fault is written PROVIDER:FAULT[:PARAM=VALUE...][xN]:
//
//   - PROVIDER is anthropic, openai, ollama, vllm or gemini.
//   - FAULT is an HTTP status or a name, from the provider's list below.
//   - PARAM=VALUE pairs tune it: retry-after=SECONDS (2, 0.5, or a
//     duration such as 1500ms), after=N (how many stream events or chunks
//     are sent before a midstream error or a cut), reason=R (gemini
//     blocked: SAFETY, OTHER, BLOCKLIST, PROHIBITED_CONTENT, IMAGE_SAFETY).
//   - xN is how many consecutive calls fail (default 1); x0 or xinf fails
//     every call.
//
// Faults apply only to the generation route of their provider (Anthropic
// POST /v1/messages, Chat Completions POST /v1/chat/completions, Gemini
// generateContent and streamGenerateContent), and only to requests that
// pass the fake's own checks (key, body): each such call takes the first
// pending fault of its provider, in the order given, and falls back to the
// echo reply when none is left. Model listings, token counting and health
// routes are never faulted.
//
// anthropic:
//
//	400          400 invalid_request_error
//	401          401 authentication_error (the key is refused)
//	402          402 billing_error (credit balance too low)
//	403          403 permission_error
//	404          404 not_found_error for the requested model
//	429          429 rate_limit_error; retry-after=S adds the retry-after header
//	500          500 api_error
//	502-html     502 with a proxy's HTML page instead of a JSON error
//	504          504 timeout_error
//	529          529 overloaded_error; retry-after=S adds the retry-after header
//	too-long     400 "prompt is too long: 215000 tokens > 200000 maximum"
//	spend-limit  429 rate_limit_error with error_code enforced_spend_limit_reached, no retry-after
//	midstream    200 stream that ends with an overloaded_error event (after=4 events); unstreamed: 529
//	cut          200 stream cut before message_stop (after=4 events); unstreamed: body cut in half
//	slow         no first byte until the client gives up (or the sim closes)
//
// openai:
//
//	400          400 invalid_request_error
//	401          401 invalid_api_key "Incorrect API key provided: s***y…" (or the no-key 401)
//	404          404 model_not_found for the requested model
//	429          429 rate_limit_exceeded "… Please try again in 2s."; retry-after=S sets both
//	             that delay and the retry-after / retry-after-ms headers
//	quota        429 insufficient_quota (billing: waiting does not help)
//	500          500 server_error
//	502-html     502 with a proxy's HTML page
//	503          503 "The engine is currently overloaded, please try again later"
//	too-long     400 context_length_exceeded
//	midstream    200 stream with an error chunk (after=2 chunks), no [DONE]; unstreamed: 500
//	cut          200 stream cut before finish_reason and [DONE] (after=2 chunks)
//	slow         no first byte until the client gives up (or the sim closes)
//
// ollama (no 401 and no 429: Ollama has neither):
//
//	400          400 invalid_request_error
//	404          404 `model "x" not found, try pulling it first`
//	500          500 api_error "llama runner process has terminated: exit status 2"
//	502-html     502 with a proxy's HTML page
//	503          503 "server busy, please try again.  maximum pending requests exceeded"
//	too-long     400 "the input length exceeds the context length"
//	midstream    200 stream with an error chunk (after=2 chunks)
//	cut          200 stream cut before finish_reason and [DONE] (after=2 chunks)
//	slow         no first byte until the client gives up (or the sim closes)
//
// vllm (no 429: vLLM does not rate-limit):
//
//	400          400 BadRequestError
//	401          401 {"error":"Unauthorized"} (vLLM started with --api-key)
//	404          404 NotFoundError "The model `x` does not exist."
//	500          500 InternalServerError
//	502-html     502 with a proxy's HTML page
//	too-long     400 "This model's maximum context length is 32768 tokens. …"
//	midstream    200 stream with an error chunk, then [DONE] (after=2 chunks)
//	cut          200 stream cut before finish_reason and [DONE] (after=2 chunks)
//	slow         no first byte until the client gives up (or the sim closes)
//
// gemini (never a retry-after header: retry timing is in RetryInfo):
//
//	400          400 INVALID_ARGUMENT
//	bad-key      400 INVALID_ARGUMENT "API key not valid" with reason API_KEY_INVALID
//	403          403 PERMISSION_DENIED
//	404          404 NOT_FOUND for the requested model
//	429          429 RESOURCE_EXHAUSTED, per-minute quota; retry-after=S adds RetryInfo {"retryDelay":"Ss"}
//	daily-quota  429 RESOURCE_EXHAUSTED, per-day quota (does not clear by waiting); retry-after=S adds RetryInfo
//	too-long     400 INVALID_ARGUMENT "The input token count (1100000) exceeds the maximum …"
//	500          500 INTERNAL
//	502-html     502 with Google's front-end HTML page
//	503          503 UNAVAILABLE "The model is overloaded. Please try again later."
//	504          504 DEADLINE_EXCEEDED
//	midstream    200 stream with a 503 UNAVAILABLE error chunk (after=1 chunk); unstreamed: 503
//	cut          200 stream cut without its terminating chunk (after=1 chunk)
//	blocked      200 with no candidates and promptFeedback.blockReason (reason=SAFETY by default)
//	slow         no first byte until the client gives up (or the sim closes)
//
// Examples: anthropic:529x2 (two overloaded answers, then echo),
// anthropic:429:retry-after=2, openai:quota, gemini:429:retry-after=31,
// vllm:slowxinf (every call hangs).
//
// A slow fault holds its request on a channel that [Sim.Close] closes;
// nothing in the package sleeps.
package sim
