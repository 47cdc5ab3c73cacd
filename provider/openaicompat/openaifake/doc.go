// Package openaifake is a wire-faithful fake of OpenAI-compatible Chat
// Completions servers, in three flavours: OpenAI itself, Ollama and vLLM,
// and of OpenAI's Responses API (see "Responses API" below).
// Tests (and simulation runs) use it so that nothing ever reaches a real
// server.
//
// [New] starts it on a loopback address; point the official SDK at it:
//
//	fake := openaifake.New(openaifake.WithFlavor(openaifake.FlavorVLLM))
//	defer fake.Close()
//	client := openai.NewClient(
//		option.WithBaseURL(fake.URL()+"/v1/"),
//		option.WithAPIKey("test-key"),
//		option.WithMaxRetries(0),
//	)
//	fake.Enqueue(openaifake.TextReply("Hi."), openaifake.ServerError())
//
// Each call to POST /v1/chat/completions takes the next scripted [Reply]
// (FIFO); with the queue empty it gets the default reply, an echo of the
// last user text ([Echo]). A Reply is content (Text, ToolCalls,
// FinishReason, Usage) or a fault: an HTTP error (Status and the error
// fields, or one of the ready-made constructors), a raw body (an HTML 502
// page from a proxy: [BadGateway]), an error chunk inside a 200 stream
// (MidStreamError, [ServerErrorMidStream]), a connection dropped after N
// chunks or bytes ([CutStream], CutAfterBytes), a stream that ends cleanly
// but early (EndAfterChunks), and a gate (Hold) that delays the first byte
// until a channel is closed. The models and health routes have queues of
// their own ([Server.EnqueueRoute]). [Server.Requests] records every
// request (headers, auth included, and body), [Server.WaitRequests] waits
// for the n-th to arrive, and [Server.OpenConns], [Server.ActiveConns] and
// their Wait variants count TCP connections for leak tests. Nothing in the
// package sleeps: waits are on channels. [NewUnstarted] gives the same fake
// as a plain http.Handler for any listener (install [Server.ConnState] to
// count connections).
//
// Token counts that a reply does not script are derived ([CountTokens]):
// prompt = one token per 4 ASCII bytes of the keys, strings and numbers of
// "messages" and "tools", one per byte outside ASCII; completion =
// ceil(bytes of generated text, tool names and arguments / 4), at most the
// request's max_completion_tokens (or max_tokens: the text is then cut,
// with finish_reason "length"); each at least 1. They are not a real
// tokenizer's counts, but never more lenient than one on CJK, emoji or
// random bytes, and deterministic.
//
// # OpenAI ([FlavorOpenAI], the default)
//
// Shapes follow OpenAI's published OpenAPI spec (CreateChatCompletionResponse,
// CreateChatCompletionStreamResponse, CompletionUsage, Error) and
// observed traffic:
//
//   - Routes POST /v1/chat/completions, POST /v1/responses (see
//     "Responses API"), GET /v1/models and GET /v1/models/{id}. Any
//     other route is a 404 "Invalid URL (GET /x)".
//   - With [WithAPIKey], Authorization: Bearer is required: 401 with
//     code invalid_api_key and the key masked ("Incorrect API key
//     provided: sk-ab***yz. …", see [MaskKey]), or the "You didn't
//     provide an API key" 401 without one.
//   - Headers on every response: x-request-id (req_<32 hex>),
//     openai-version: 2020-10-01, openai-processing-ms, and
//     x-ratelimit-{limit,remaining,reset}-{requests,tokens} with resets as
//     Go durations ("12ms", "2.4s", "6m0s"). The buckets drain by one
//     request per chat call and by the served tokens, and refill at the
//     limit per minute on the fake's clock ([WithClock],
//     [WithRateLimits]).
//   - Validation with the real wording: max_tokens on a GPT-5 or
//     o-series model is a 400 unsupported_parameter ("Use
//     'max_completion_tokens' instead."); stream_options without
//     "stream":true is a 400; a missing model or messages, an empty
//     messages array and a body that is not JSON are 400s.
//   - Responses as the API sends them: chatcmpl-<29 base62> ids,
//     call_<24 base62> tool-call ids, the dated model snapshot of the
//     requested alias (gpt-5-mini → gpt-5-mini-2025-08-07),
//     service_tier "default", system_fingerprint fp_<10 hex>, message
//     content null beside tool calls, refusal null, annotations [],
//     arguments as a JSON string, and usage with
//     prompt_tokens_details.cached_tokens and
//     completion_tokens_details.reasoning_tokens. Non-streamed JSON is
//     indented as the API indents it (two spaces; error bodies four).
//   - Streams are data-only SSE (`data: <json>` then a blank line) ending
//     with `data: [DONE]`. The first chunk carries delta.role; text is cut
//     into one chunk per word; each tool call starts with a fragment that
//     alone carries id, type and function.name, then its arguments
//     follow in fragments cut mid-token, keyed by index 0, 1, …; a final
//     chunk with an empty delta carries finish_reason (stop, tool_calls,
//     length). With stream_options.include_usage every chunk has "usage":
//     null and a last chunk with "choices": [] carries the usage; without
//     it no chunk has a usage key. Chunks carry an obfuscation string
//     unless stream_options.include_obfuscation is false.
//   - Errors {"error":{"message","type","param","code"}}: 400
//     invalid_request_error ([InvalidRequest]), 400
//     context_length_exceeded ([ContextLengthExceeded], also sent by
//     itself when the prompt exceeds a catalogued model's ContextWindow),
//     401 invalid_api_key ([InvalidAPIKey]), 404 model_not_found
//     ([ModelNotFound]), 429 rate_limit_exceeded with type "tokens" or
//     "requests" ([RateLimited], [RateLimitedRequests]: the message says
//     "Please try again in 2.4s", the exhausted bucket reports remaining 0
//     and that reset, and [Reply.WithRetryAfter] adds retry-after and
//     retry-after-ms), 429 insufficient_quota ([InsufficientQuota]), 500
//     server_error ([ServerError]), 503 "The engine is currently
//     overloaded, please try again later" ([Overloaded]), an HTML 502
//     ([BadGateway]) and the mid-stream chunk
//     {"error":{"message",…,"type":"server_error","param":null,"code":null}}
//     after which the stream ends without [DONE].
//
// # Responses API (OpenAI flavour)
//
// POST /v1/responses serves the Responses API as OpenAI does (the Ollama
// and vLLM flavours answer it as an unknown route). It is scripted like
// the chat route, with a queue of its own: [Server.EnqueueResponses]
// (FIFO, [Echo] of the last user input when empty). A [Reply] becomes
// the output items, in this order:
//
//   - a reasoning item {"id":"rs_<50 hex>","type":"reasoning",
//     "encrypted_content":…,"summary":[{"type":"summary_text","text":
//     Reply.Reasoning}]}: always for a reasoning model (gpt-5*, o*; an
//     empty summary without Reply.Reasoning), for another model only with
//     Reply.Reasoning. encrypted_content ("gAAAAAB…") is present only when
//     the request's include lists "reasoning.encrypted_content"
//     ([IncludeEncryptedReasoning]), in response.output_item.done but not
//     in response.output_item.added;
//   - one web_search_call item per Reply.WebSearches query
//     ({"id":"ws_…","status":"completed","action":{"type":"search","query":…}});
//   - a message item (msg_…) with one output_text part of Reply.Text,
//     when there is text or no tool call;
//   - one function_call item per Reply.ToolCalls ({"id":"fc_<50 hex>",
//     "call_id": ToolCall.ID or call_<24 base62>, "name", "arguments"}),
//     or, for a ToolCall with Custom, a custom_tool_call item
//     ({"id":"ctc_<50 hex>","call_id","input","name"}, its input
//     ToolCall.Arguments as text); either with "namespace" when the
//     ToolCall has one (a tool of a namespace the request declared, such
//     as Codex's multi_agent_v1, or functions in its code mode).
//
// The response object lists every field the API returns, echoing the
// request's (instructions, tools, tool_choice, store, prompt_cache_key,
// reasoning, text, metadata, …); service_tier is the tier asked for
// ("default" for none or "auto"); usage is {input_tokens,
// input_tokens_details {cached_tokens, cache_write_tokens},
// output_tokens, output_tokens_details {reasoning_tokens},
// total_tokens} from Reply.Usage (Cached ⊂ Prompt, Reasoning ⊂
// Completion) or derived. FinishReason "length" (or a derived answer
// over max_output_tokens) makes the response incomplete with reason
// max_output_tokens, "content_filter" with reason content_filter.
//
// A streamed answer ("stream": true) is named SSE events (`event: <type>`
// then `data: <json>`, each with "type" and "sequence_number" from 0):
// response.created, response.in_progress, then per item
// response.output_item.added, its deltas (reasoning_summary_part.added /
// reasoning_summary_text.delta / .done / reasoning_summary_part.done;
// web_search_call.in_progress / .searching / .completed;
// content_part.added / output_text.delta / output_text.done /
// content_part.done; function_call_arguments.delta / .done;
// custom_tool_call_input.delta / .done) and
// response.output_item.done, and last response.completed (or
// response.incomplete) carrying the whole response with its usage; no
// [DONE]. Deltas carry an obfuscation string unless
// stream_options.include_obfuscation is false. The stream faults apply,
// counted in events: MidStreamError sends {"type":"error","code",
// "message","param"} after AfterChunks events, or with
// [StreamError.Failed] a response.failed event (status "failed", error
// {code, message}); CutAfterChunks, EndAfterChunks and StallAfterChunks
// as on chat.
//
// Refusals, with the API's wording and {"error":{…}} shape: a top-level
// parameter the API does not know (400 unknown_parameter; the API's
// CreateResponse fields and client_metadata are known), a missing model,
// max_output_tokens below 16, previous_response_id (400
// previous_response_not_found: the fake stores no response), an input
// over a catalogued model's context window (400 context_length_exceeded,
// "Your input exceeds the context window of this model…",
// [ResponsesContextLengthExceeded]), and the pairing rules of a tool
// loop, checked against what the fake answered before:
//
//   - a function_call_output (or custom_tool_call_output) whose call is
//     not in the input: 400 "No tool call found for function call output
//     with call_id call_….", param input;
//   - a function_call (or custom_tool_call) the fake issued right after
//     a reasoning item, sent back without that reasoning item before it:
//     400 "Item 'fc_…' of type 'function_call' was provided without its
//     required 'reasoning' item: 'rs_…'.", param input, code null. The
//     reasoning item is
//     matched by its encrypted_content when the fake issued one (a
//     stateless client sends the items without ids, as Codex does), else
//     by its id (or an item_reference to it). A gateway that drops,
//     rewrites or re-encodes reasoning items fails here, as it would
//     against the API.
//
// # Driving a client's tool loop (Codex)
//
// A three-turn loop of a stateless client (store false, include
// reasoning.encrypted_content, streamed) is scripted by three replies:
//
//	fake := openaifake.New(openaifake.WithAPIKey(key))
//	fake.EnqueueResponses(
//		openaifake.ReasoningToolCallReply("Look first.", "shell", `{"command":["ls"]}`),
//		openaifake.ReasoningToolCallReply("Now read it.", "shell", `{"command":["cat","go.mod"]}`),
//		openaifake.Reply{Reasoning: "Done.", Text: "The module is example.com/m."},
//	)
//
// Point the client (or the gateway's openai provider, base_url
// fake.URL()+"/v1") at it. Turns 2 and 3 succeed only if the client's
// input carries each earlier reasoning item (with its encrypted_content)
// before its function_call, and a function_call_output for each call.
// Tool names and argument shapes are whatever the client declared: the
// fake does not check them against the request's tools. Afterwards
// [Server.Requests] gives each turn; [Recorded.Input] flattens its input
// items ([InputItem]: type, role, text, call_id, name, arguments,
// encrypted_content), [Recorded.Include] its include list, and Header the
// headers as they arrived. A Reply with WebSearches adds web_search_call
// items; Usage scripts exact counts (Cached, Reasoning).
//
// # Ollama ([FlavorOllama])
//
// From ollama's openai compatibility layer (openai/openai.go,
// middleware/openai.go):
//
//   - Routes POST /v1/chat/completions, GET /v1/models, GET
//     /v1/models/{id}, GET and HEAD / ("Ollama is running") and GET
//     /api/version ({"version":"…"}, [WithOllamaVersion]). Any other route
//     is gin's plain-text "404 page not found".
//   - Any key, or none, is accepted. No request id, rate-limit or retry
//     headers.
//   - Compact JSON with <, > and & escaped (\u003c…) and a trailing
//     newline, as Go's json.Encoder writes it; ids chatcmpl-<0..998>,
//     tool-call ids call_<8 [a-z0-9]>, system_fingerprint "fp_ollama";
//     usage has only prompt_tokens, completion_tokens and total_tokens
//     (never cached or reasoning details).
//   - Streams: every chunk's delta carries role "assistant" and content;
//     chunks have no usage key (and no logprobs); each tool call arrives
//     whole in a chunk of its own, delta.tool_calls [{id, index, type,
//     function:{name, arguments: "<complete JSON>"}}], and every call has
//     index 0: parallel calls come as separate chunks with the same index
//     0 and different ids, as real Ollama builds send them — a client
//     that merges fragments by index alone glues two calls into one. The
//     finish chunk says "tool_calls" whenever a call was sent; the usage
//     chunk ("choices": []) comes only with include_usage; then [DONE].
//   - max_tokens is accepted for every model.
//   - Errors {"error":{"message","type","param":null,"code":null}} with
//     the type derived from the status as ollama does (400
//     invalid_request_error, 404 not_found_error, otherwise api_error),
//     whatever the reply's ErrorType: [OllamaModelNotFound] (`model "x"
//     not found, try pulling it first`), "[] is too short - 'messages'",
//     "model is required".
//   - Context overflow is silent: a prompt over the model's window
//     (catalogue ContextWindow, else [DefaultOllamaContext]) is answered
//     200 with prompt_tokens capped at the window, as Ollama truncates
//     the prompt. [WithOverflowError] sends the 400 of some newer builds
//     instead ([OllamaContextLengthExceeded]).
//
// # vLLM ([FlavorVLLM])
//
// From vLLM's OpenAI server (serving_chat.py, protocol.py, api_server.py):
//
//   - Routes POST /v1/chat/completions, GET /v1/models (with root,
//     parent, max_model_len and permission) and GET /health (an empty
//     200). Any other route is FastAPI's 404 {"detail":"Not Found"} (405
//     "Method Not Allowed" for a known path).
//   - With [WithAPIKey], /v1 routes need the Bearer key and answer 401
//     {"error":"Unauthorized"} otherwise; /health is open. No rate-limit
//     headers.
//   - Compact JSON with < > & literal; ids chatcmpl-<32 hex>, tool-call
//     ids chatcmpl-tool-<32 hex>; no system_fingerprint; non-streamed
//     responses list every field (tool_calls [], reasoning_content null,
//     stop_reason, prompt_logprobs, kv_transfer_params); arguments are
//     written as Python's json.dumps writes them ({"city": "Paris"}). A
//     request without a model gets the first catalogued model.
//   - Streams carry only the fields vLLM sets: the first chunk has role
//     and content "", then content chunks; a tool call is a fragment with
//     id, type, index and function.name, then argument fragments cut
//     mid-token; the finish chunk adds stop_reason null; with include_usage
//     a usage chunk {"prompt_tokens","total_tokens","completion_tokens"}
//     precedes [DONE].
//   - cached_tokens only with [WithPromptTokensDetails] (vLLM's
//     --enable-prompt-tokens-details), and only when non-zero.
//   - Errors {"error":{"message","type":"BadRequestError","param","code":400}}
//     with code an integer and the type derived from the status
//     (NotFoundError, InternalServerError, …); [ErrorStyleVLLMStringCode]
//     sends the newer string code ("context_length_exceeded") where the
//     reply has one, and [ErrorStyleVLLMLegacy] the older top-level
//     {"object":"error","message",…,"code":400}. Overflow of max_model_len
//     (prompt + max_completion_tokens or max_tokens) is a 400 "This
//     model's maximum context length is 4096 tokens. However, you
//     requested 5000 tokens (4000 in the messages, 1000 in the
//     completion). …" ([VLLMContextLengthExceeded]); an unknown model
//     with [WithModelCheck] is a 404 "The model `x` does not exist."
//     ([VLLMModelNotFound]). A mid-stream error is written as Python's
//     json.dumps writes it and followed by [DONE].
//
// # Gateway quirks, on any flavour
//
// [WithoutDone] ends streams at EOF without `data: [DONE]`;
// [ErrorStyleBareString] makes error bodies {"error":"something broke"}
// (LM Studio, some gateways); EndAfterChunks ends a stream cleanly before
// its finish_reason; StallAfterChunks stops sending mid-stream until a
// gate opens.
//
// How openai-go (v3.98) sees these bodies, as the tests pin down: a
// bare-string error (and vLLM's own 401 {"error":"Unauthorized"}) cannot be
// decoded into an error object, so the call returns a JSON decoding error,
// not *openai.Error, and the status is only in the response given to
// option.WithResponseInto; vLLM's legacy top-level shape gives an
// *openai.Error with the status and every other field empty; vLLM's
// integer code arrives as the string Code "400"; a mid-stream error chunk
// ends the stream with *ssestream.StreamError (not *openai.Error); a cut
// stream ends with io.ErrUnexpectedEOF.
//
// # What it cannot reproduce
//
// It runs no model: replies are scripted or echoed, and token counts are a
// deterministic estimate, not the real tokenizer, so counts, context
// overflow and rate-limit arithmetic agree with the real servers only in
// shape. It does not validate message structure beyond the required
// top-level fields (roles, content parts, tool schemas, tool-call/tool
// pairing, sampling parameters and their per-model restrictions such as
// temperature on reasoning models), honour n > 1, logprobs, response_format
// or structured outputs, stop sequences, seeds, prompt caching (cached
// counts are whatever the script says), refusals, audio, annotations or
// moderation, emit reasoning text (Ollama's delta.reasoning, vLLM's
// reasoning_content), serve the Completions or Embeddings APIs (nor the
// Responses API on Ollama or vLLM, nor its stored responses, background
// mode, conversations, hosted tools other than web search results,
// custom tool calls on Chat Completions, or a reasoning item's real
// content),
// Ollama's native /api routes other than /api/version, or vLLM's extra
// parameters (continuous_usage_stats, return_token_ids, guided decoding).
// Rate limits are never enforced on their own (a 429 happens only when
// scripted). The wording of vLLM's pydantic validation errors and of
// Ollama's errors in the middle of a stream is approximate. It does not
// reproduce timing (latency, keep-alive pings, read timeouts), proxies'
// headers (Cloudflare, uvicorn's server header), HTTP/2, or the
// differences between builds of Ollama and vLLM beyond the options above.
package openaifake
