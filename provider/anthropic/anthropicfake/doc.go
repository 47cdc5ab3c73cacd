// Package anthropicfake is a wire-faithful fake of the Anthropic Messages
// API for tests (and for simulation runs), so that nothing ever reaches the
// real API.
//
// [New] starts it on a loopback address; point the official SDK at it:
//
//	fake := anthropicfake.New(anthropicfake.WithAPIKey("test-key"))
//	defer fake.Close()
//	client := anthropic.NewClient(
//		option.WithoutEnvironmentDefaults(),
//		option.WithBaseURL(fake.URL()),
//		option.WithAPIKey("test-key"),
//		option.WithMaxRetries(0),
//	)
//	fake.Enqueue(anthropicfake.TextReply("Hi."), anthropicfake.Overloaded())
//
// Each call to POST /v1/messages takes the next scripted [Reply] (FIFO);
// with the queue empty it gets the default reply, an echo of the last user
// text ([Echo]). Ready-made faults exist for every row of the API's error
// table: [InvalidRequest], [PromptTooLong], [AuthError], [BillingError],
// [PermissionError], [NotFound], [ModelNotFound], [Conflict],
// [RequestTooLarge], [RateLimited], [SpendLimitReached], [APIError],
// [BadGateway] (an HTML proxy page), [TimeoutError], [Overloaded], plus the
// stream faults [OverloadedMidStream] and [CutStream], a gate (Reply.Hold)
// that delays the first byte until a channel is closed, and a pause
// mid-stream (Reply.StallAfterEvents) until a channel is closed or the
// client goes.
// count_tokens and models have queues of their own ([Server.EnqueueRoute]).
// [Server.Requests] records every request (headers, auth included, and
// body, both as they arrived) and [Server.WaitRequests] waits for the n-th
// to arrive; [Server.Sent] returns the response bytes written for a
// request (by its [Recorded.RequestID]), exactly as the client read them,
// so that a relay can be held to them byte for byte;
// [Server.OpenConns] and [Server.WaitOpenConns] count open TCP connections
// for leak tests. Nothing in the package sleeps: waits are on channels.
// [NewUnstarted] gives the same fake as a plain http.Handler for any
// listener (install [Server.ConnState] to count connections).
//
// # Server tools and context management (Claude Code's features)
//
// A request offering the web search server tool (a tool of type
// web_search_20250305 or a later web_search_*, see [Recorded.WebSearchTool])
// can be answered with searches:
//
//	fake.Enqueue(anthropicfake.Reply{
//		WebSearches: []anthropicfake.WebSearch{{Query: "go 1.26 release notes", Results: []anthropicfake.SearchResult{
//			{URL: "https://go.dev/doc/go1.26", Title: "Go 1.26 Release Notes", PageAge: "February 10, 2026", CitedText: "Go 1.26 adds"},
//		}}},
//		Text: "Go 1.26 adds …",
//	})
//
// Each [WebSearch] becomes a server_tool_use block (name web_search, input
// {"query": …}, id srvtoolu_01…) and its web_search_tool_result (a list of
// web_search_result with title, url, encrypted_content and page_age, and
// caller {"type":"direct"}); Text follows with a web_search_result_location
// citation of every result that has a CitedText, and usage reports
// server_tool_use {web_search_requests, web_fetch_requests}. Streamed, as the
// API streams them: the server_tool_use input in input_json_delta fragments
// (the first empty), the result whole in its content_block_start, the cited
// text block starting {"citations":[],"type":"text","text":""} with its
// citations_delta events before the text_delta ones, the searches counted in
// message_delta's usage. Results nil means one derived page (an example.org
// URL, cited); WebSearch.ErrorCode makes a search fail with a
// web_search_tool_result_error; past the tool's max_uses a search fails with
// max_uses_exceeded; failed searches are not billed. The default reply
// ([Echo]) to a request offering the tool runs one search for the last user
// text. Scripting WebSearches for a request that offers no such tool is a
// mistake the fake answers with a 500 api_error saying so (as it does for
// AppliedEdits without context_management): with concurrent clients (Claude
// Code sends side requests, titles, quota probes, next to the main one), a
// [WithDefaultReply] function that looks at the [Recorded] request
// (WebSearchTool, ContextManagement, Betas, LastUserText) is the robust way
// to answer each kind.
//
// context_management is accepted only with the anthropic-beta
// [BetaContextManagement] (else 400 "context_management: Extra inputs are
// not permitted", the API's words); the answer then carries
// context_management {"applied_edits": […]} (after usage; in a stream, in
// message_delta), empty unless Reply.AppliedEdits scripts some
// ([AppliedEdit]: clear_tool_uses_20250919 with cleared_tool_uses,
// clear_thinking_20251015 with cleared_thinking_turns, both with
// cleared_input_tokens, which a derived usage subtracts from its input).
//
// Any anthropic-beta value is accepted ([Recorded.Betas] lists them). A
// top-level body field outside [KnownFields] is refused as the API refuses
// it ("<field>: Extra inputs are not permitted"); [WithAcceptedFields] adds
// fields, as an API that has since grown them would.
//
// # What it reproduces
//
// The shapes come from real traffic recorded in the SDK's cassettes (kept,
// with what was derived from them, in testdata/real):
//
//   - Routes POST /v1/messages (JSON or "stream":true), POST
//     /v1/messages/count_tokens, GET /v1/models (limit, after_id,
//     before_id; data/has_more/first_id/last_id) and GET /v1/models/{id}.
//     Any other route is a 404 not_found_error.
//   - Auth by x-api-key or Authorization: Bearer (x-api-key wins when both
//     are sent); 401 authentication_error "x-api-key header is required" or
//     "invalid x-api-key". A missing anthropic-version is a 400; so is an
//     unknown one, and under 2026-10-21 any temperature, top_p or top_k
//     ("temperature: Extra inputs are not permitted").
//   - Body validation with the real wording: "max_tokens: Field required",
//     "messages: at least one message is required", and so on; a body over
//     32 MB is a 413 request_too_large.
//   - Headers on every response: request-id (req_011C…),
//     anthropic-organization-id, and the anthropic-ratelimit-{requests,
//     tokens,input-tokens,output-tokens}-{limit,remaining,reset} set with
//     RFC 3339 resets. Each request lowers requests-remaining; a served
//     message lowers the token buckets (input at admission, output after
//     the response, cache reads not at all), rounded down to the thousand.
//   - Messages as the API sends them: field order, msg_01… and toolu_01…
//     ids, content blocks thinking/text/tool_use, stop_reason,
//     stop_sequence, stop_details null, and usage with input_tokens,
//     cache_creation_input_tokens, cache_read_input_tokens,
//     cache_creation{ephemeral_5m_input_tokens,ephemeral_1h_input_tokens},
//     output_tokens, service_tier and inference_geo. JSON leaves <, > and &
//     unescaped, like the API.
//   - Streams in the real event order: message_start (content [],
//     stop_reason null, initial usage with output_tokens 1), then per block
//     content_block_start, deltas, content_block_stop, with a ping after
//     the first content_block_start; text cut into several text_delta
//     chunks; tool input re-spaced as the API streams it ({"city": "Paris"})
//     and cut mid-token into input_json_delta fragments, the first one
//     empty; thinking as thinking_delta chunks then one signature_delta;
//     message_delta with stop_reason and cumulative usage; message_stop.
//     Events are flushed one by one, and most carry the run of spaces the
//     API inserts before their closing brace ([WithoutPadding] removes it).
//   - Errors as {"type":"error","error":{"type","message"[,"details":
//     {"error_code"}]},"request_id"}; in a 200 stream, event: error with
//     {"type":"error","error":{…}}; a cut stream ends without message_stop
//     or the terminating chunk, so clients see an unexpected EOF.
//   - count_tokens returns {"input_tokens":N} with N from [CountTokens]:
//     one token per 4 ASCII bytes of the keys, strings and numbers of
//     system, messages and tools, one per byte outside ASCII (never more
//     lenient than a real tokenizer on CJK, emoji or random bytes).
//   - A derived answer (no scripted Usage) never bills more output than
//     the request's max_tokens: its text is cut and stop_reason is
//     max_tokens, as the API stops generating there.
//   - Prompt caching as the API accounts it: cache_control marks on
//     tools, system and message blocks (and a top-level one, on the last
//     block); the longest prefix cached at a breakpoint, or up to 20
//     blocks before one, is read (cache_read_input_tokens, refreshing its
//     lifetime), and each later breakpoint whose prefix reaches the
//     model's minimum ([MinCacheableTokens]) is written at its ttl
//     (cache_creation, 5m and 1h apart); entries expire on the fake's
//     clock. A fifth mark is a 400 ("A maximum of 4 blocks with
//     cache_control may be provided. Found 5.").
//   - The API's refusals of tool use: a tool_result whose tool_use is not
//     in the previous message, a tool_use without its tool_result next, a
//     custom tool without input_schema (or its type).
//
// # What it cannot reproduce
//
// It runs no model: replies are scripted or echoed, and token counts are a
// deterministic estimate, not the real tokenizer. It does not resolve model
// aliases to dated ids, validate message structure beyond the required
// top-level fields, tool schemas and tool_result pairing (roles, block
// types, the 2026-10-21 restrictions on documents and citations), enforce
// rate limits on its own (a 429 happens only when scripted), apply
// per-model limits (max_tokens ceilings, context windows), emit citations
// other than web search's, server tools other than web search (web fetch,
// code execution), pause_turn after many searches, redacted thinking or
// the Batches, Files and beta endpoints, or reproduce timing (latency,
// read timeouts, Cloudflare headers, HTTP/2). It checks no beta other
// than context management (a field or tool behind another beta is taken
// without it), no web search tool parameter (allowed_domains,
// user_location), no context edit's parameters, and no unknown field on
// count_tokens. A message_start reports the same input count as the final
// message_delta (the API's grows with the search results read).
package anthropicfake
