// Package openaicompat is CortexBuild's adapter for OpenAI's Chat
// Completions API (and, relayed, the Responses API) and every server that
// speaks it: OpenAI (and Codex
// models), Ollama, vLLM, LM Studio, and gateways through which AWS Bedrock,
// GCP Vertex and Azure OpenAI are reached. It is built on the official SDK
// (github.com/openai/openai-go/v3, pinned in go.mod) and configured by
// base_url and a server [Profile].
//
// # Tier mapping
//
// The openai profile defaults to the GPT-5 family:
//
//	reasoning_heavy  gpt-5
//	balanced         gpt-5-mini
//	fast_cheap       gpt-5-nano
//
// Other profiles have no defaults: their models are whatever the server
// hosts, set per tier under providers.<name>.models in llm-config.yaml.
//
// # Capabilities
//
// The spec's: code execution (through tool use), tool use, streaming; prompt
// caching on the openai profile (automatic above 1,024 tokens); long context
// and vision per model from the price catalog, plus whatever
// providers.<name>.capabilities declares for a local model. Seed on every
// profile, sampling (temperature, top_p) except on OpenAI's reasoning
// models, top_k on vllm, structured output on openai, ollama, vllm and
// lmstudio.
//
// # Profiles
//
//	            include_usage  max_…_tokens  cached tokens  key       prices                          Responses API
//	openai      yes            completion    yes            required  openai catalog                  yes
//	ollama      yes            max_tokens    no             ignored   free (local)                    no
//	vllm        yes            max_tokens    if enabled     optional  free (local)                    no
//	lmstudio    no (estimate)  max_tokens    no             ignored   free (local)                    no
//	gateway     yes            max_tokens    if sent        optional  by vendor/model name            no
//	(unknown)   no (estimate)  max_tokens    if sent        optional  openai, or free on loopback     no
//
// [Profile.Responses] says the server has the Responses API at
// /responses. Ollama (0.13.3 and later) and vLLM serve one too, but
// partially (stateless only, no hosted tools, version-dependent), so
// their profiles do not claim it: a Responses request to them takes the
// translated route through Chat Completions.
//
// # Relay in the client's protocol
//
// A request the gateway received in Chat Completions or the Responses API
// carries it in [provider.Request.Native]; when the adapter speaks that
// protocol ([Adapter.SpeaksNative]: Chat Completions on every profile,
// the Responses API where the profile has it) the request is relayed
// instead of translated:
//
//   - The client's body goes to {base_url}/chat/completions or
//     {base_url}/responses unchanged but for the edits the gateway owns
//     ([adapterkit.NativeBody]): the model the router chose, and an
//     output limit (max_tokens, max_completion_tokens, max_output_tokens)
//     above the request's, lowered to it within the model's catalogued
//     limit. On a streamed Chat Completions request to a profile with
//     include_usage, stream_options.include_usage is set when the client
//     did not ask for it, so that the call settles on reported usage;
//     the usage chunk is relayed as it comes. Each edit is named in the
//     reply's Edits.
//   - The client's headers go along (OpenAI-Beta, …) except credentials
//     and what bills them elsewhere: Authorization, api-key, cookies,
//     OpenAI-Organization and OpenAI-Project never leave; the adapter
//     sends its own key. The body is not validated again: the provider
//     judges it.
//   - A unary answer comes back in Result.Native (status, end-to-end
//     headers, the body's exact bytes); a stream is one chunk per
//     upstream event with the event's exact bytes in Chunk.Raw (data:
//     [DONE] included), the first with the status and headers in Reply.
//     The chunks still carry the text, reasoning and tool-call fragments,
//     and the final one the Result, read from the answer as on the
//     translated route.
//   - An error status comes back in Error.Reply (status, headers such as
//     retry-after and x-ratelimit-*, the body's bytes), classified as on
//     the translated route; an error reported after the 200 (an error
//     chunk, an error event, response.failed) ends the stream with the
//     event's bytes in Error.Reply (status 200), classified by its code
//     (the Responses API's invalid_prompt and image codes are bad
//     requests). A stream that ends early is billed as on the translated
//     route.
//   - From a Responses answer: the output_text of message items is the
//     Content; function_call items are tool calls (id = call_id), a
//     custom_tool_call one whose arguments are {"input": …}; reasoning
//     items are reasoning parts with the item in Meta
//     ([MetaResponsesItem]); usage input_tokens includes
//     input_tokens_details.cached_tokens and output_tokens the reasoning
//     tokens; service_tier is Usage.ServiceTier ("default" is ""); each
//     web_search_call item is one of Usage.WebSearchRequests. A stream is
//     read from its response.output_text.delta, reasoning summary deltas,
//     function_call_arguments deltas and response.completed (or
//     response.incomplete, a max_tokens or content_filter stop).
//
// # Behaviour
//
//   - The SDK sends every request (authentication, headers, base URL,
//     timeouts) and turns an error status into *openai.Error, but the
//     adapter writes the request body itself and decodes the answer and
//     the stream chunks into fixed structs with encoding/json, sending
//     the pre-encoded body through the SDK's client.Post: the SDK's
//     reflective encoder and decoder cost more than the rest of the call's
//     CPU in the adapter. The body is the JSON value the SDK's
//     ChatCompletionNewParams encoded; an answer encoding/json refuses (a
//     number where a string belongs, trailing data) is decoded again by
//     the SDK's own types, so it fails or succeeds as it did before. The
//     equivalence tests (codec_test.go) keep the SDK's parameters and
//     decoding as the reference.
//   - SDK retries are off; the SDK's environment defaults cannot leak: the
//     key and base URL always come from the configuration, and headers the
//     environment adds (OPENAI_ORG_ID, OPENAI_PROJECT_ID,
//     OPENAI_CUSTOM_HEADERS) are stripped before a request leaves.
//   - Usage: prompt_tokens already includes cached_tokens
//     ([provider.UsageInclusive]). A stream asks for a usage chunk where the
//     profile allows; a stream that ends without one is counted with the
//     offline tokenizer and marked Estimated.
//   - Streamed tool calls are assembled by index and id: a fragment with a
//     new id at an index already in use starts a new call, because some
//     servers (Ollama, Qwen and DeepSeek behind vLLM) reuse index 0. Calls
//     that arrive whole in one chunk work the same way. Arguments must form
//     a JSON object.
//   - A stream that ends without a finish_reason is a network-kind error
//     (truncated); an error object inside a 200 stream keeps its kind.
//   - Errors are classified on status and body, read leniently: code as a
//     string or an integer (vLLM), a bare string error (LM Studio,
//     gateways), a top-level error object (older vLLM), FastAPI's detail,
//     and an HTML page from a proxy, which gets a clear diagnostic instead of
//     a JSON parse error. context_length_exceeded and the servers'
//     overflow wording are context-window-exceeded; insufficient_quota is
//     quota-exhausted; 429 is a rate limit whose delay comes from
//     retry-after-ms, retry-after, the exhausted x-ratelimit-reset-* window
//     or the message's "try again in 2.4s"; 503 and overload messages are
//     overloaded.
//   - HealthCheck lists models (GET /models), which no server bills.
//     RateLimitStatus reports the x-ratelimit-* headers of the latest
//     response; servers that send none report nothing.
package openaicompat
