// Package geminifake is a wire-faithful fake of the Gemini Developer API
// (generativelanguage.googleapis.com, v1beta) for tests (and for
// simulation runs), so that nothing ever reaches the real API.
//
// [New] starts it on a loopback address; point the official SDK
// (google.golang.org/genai) at it:
//
//	fake := geminifake.New(geminifake.WithAPIKey("test-key"))
//	defer fake.Close()
//	client, _ := genai.NewClient(ctx, &genai.ClientConfig{
//		APIKey:      "test-key",
//		Backend:     genai.BackendGeminiAPI,
//		HTTPClient:  &http.Client{},
//		HTTPOptions: genai.HTTPOptions{BaseURL: fake.URL(), APIVersion: "v1beta"},
//	})
//	fake.Enqueue(geminifake.TextReply("Hi."), geminifake.RateLimited("gemini-2.5-flash", 31*time.Second))
//
// (Set GOOGLE_API_KEY, GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL to "" in
// tests, e.g. with t.Setenv: an explicit APIKey and BaseURL win over them,
// but an empty one would not.)
//
// Each generateContent or streamGenerateContent call takes the next
// scripted [Reply] (FIFO); with the queue empty it gets the default reply,
// an echo of the last user text ([Echo]). A Reply is a success (Thought,
// Text, FunctionCalls, FinishReason, ModelVersion, Usage), a blocked prompt
// (BlockReason) or a fault (Code, Status, Message, Details, Headers,
// RawBody); MidStreamError, CutAfterChunks and CutAfterBytes break a
// success on the way, and Hold delays the first byte until a channel is
// closed. Ready-made faults exist for every row of the API's error table:
// [InvalidArgument], [APIKeyInvalid], [MissingAPIKey], [ContextOverflow],
// [FailedPrecondition], [LocationNotSupported], [BillingRequired],
// [PermissionDenied], [ModelNotFound], [RateLimited],
// [DailyQuotaExceeded], [ResourceExhausted], [Internal], [Unavailable],
// [DeadlineExceeded], [CorruptedThoughtSignature], [BadGateway] (an HTML
// page), plus the stream faults [OverloadedMidStream] and [CutStream];
// [RetryInfoDetail], [QuotaFailureDetail], [ErrorInfoDetail], [HelpDetail],
// [LocalizedMessageDetail] and [BadRequestDetail] build details for
// [ErrorReply]. countTokens and models have queues of their own
// ([Server.EnqueueRoute]). [Server.Requests] records every request
// (headers, key included, and body); [Recorded.Generate], [Recorded.Decode]
// and [Recorded.CamelBody] read a body the same way whether the client sent
// camelCase or snake_case field names. [Server.WaitRequests],
// [Server.WaitOpenConns] and [Server.WaitActiveConns] wait on channels:
// nothing in the package sleeps. [NewUnstarted] gives the same fake as a
// plain http.Handler for any listener (install [Server.ConnState] to count
// connections).
//
// # What it reproduces
//
// Shapes follow the genai SDK v1.77.0 types and recorded traffic of the
// real API (see testdata/real/README.md for provenance):
//
//   - Routes POST /v1beta/models/{model}:generateContent,
//     :streamGenerateContent (?alt=sse gives server-sent events; without it
//     the API's JSON array of chunks), :countTokens ({"contents":…} or
//     {"generateContentRequest":…}; answers {"totalTokens",
//     "promptTokensDetails"}), GET /v1beta/models (pageSize up to 1000,
//     default 50, opaque pageToken, nextPageToken) and GET
//     /v1beta/models/{model}. v1 and v1alpha paths work the same. An unknown
//     model, or one whose supportedGenerationMethods lack the method, is a
//     404 NOT_FOUND "models/x is not found for API version v1beta, or is not
//     supported for generateContent. Call ListModels …"; an unknown URL is a
//     404 NOT_FOUND too.
//   - Auth by the x-goog-api-key header or ?key=. A wrong key is a 400
//     INVALID_ARGUMENT "API key not valid. Please pass a valid API key."
//     with ErrorInfo (reason API_KEY_INVALID) and LocalizedMessage details;
//     no key at all is the real 403 PERMISSION_DENIED "Method doesn't allow
//     unregistered callers …". Never a 401.
//   - Request bodies in camelCase and snake_case alike (proto JSON accepts
//     both), free-form values (functionCall.args,
//     functionResponse.response, parametersJsonSchema, responseJsonSchema,
//     schema property names) left as sent. Validation with the real
//     wording: "* GenerateContentRequest.contents: contents is not
//     specified\n", "Please use a valid role: user, model.", "…parts:
//     contents.parts must not be empty.", "Invalid JSON payload received.
//     Unknown name \"x\": Cannot find field." (with a BadRequest detail), a
//     20 MB body limit, and the context window: a prompt whose [CountTokens]
//     exceeds the model's inputTokenLimit gets "The input token count (N)
//     exceeds the maximum number of tokens allowed (M)."
//   - Gemini 3 thought signatures. A thinking model's first function call
//     of each reply carries a generated thoughtSignature (standard base64,
//     starting "E" like the real ones; parallel calls carry one), and a
//     Gemini 3+ text answer carries one on its text part. For Gemini 3+
//     models ([WithRequireThoughtSignatures] for all,
//     [WithoutThoughtSignatureCheck] for none), in the current turn (after
//     the last user message that is not only function responses) the first
//     functionCall part of each model content must carry its signature, or
//     the request gets the real 400 "Function call is missing a
//     thought_signature in functionCall parts. … function call
//     `default_api:NAME` , position N. …" (N is the 1-based index of that
//     content); a signature that is not byte-identical to the one issued
//     for that call is a 400 "Corrupted thought signature."; the documented
//     dummies "skip_thought_signature_validator" and
//     "context_engineering_is_the_way_to_go" pass.
//   - Responses field for field in the API's order (which follows proto
//     field numbers): candidates[{content{parts,role:"model"},finishReason,
//     index,finishMessage}], function calls as {"functionCall":{"name",
//     "args":{…},"id":"8 chars"},"thoughtSignature":…}, thought summaries as
//     {"text":…,"thought":true}, usageMetadata (promptTokenCount INCLUDING
//     cachedContentTokenCount, candidatesTokenCount, totalTokenCount =
//     prompt + candidates + thoughts + toolUsePrompt, cachedContentTokenCount,
//     promptTokensDetails, cacheTokensDetails, toolUsePromptTokenCount,
//     thoughtsTokenCount, serviceTier; zero counts omitted as proto3 JSON
//     does), modelVersion and a 23-character responseId. Derived counts
//     ([CountTokens] for the prompt) never bill more candidates plus
//     thoughts than generationConfig.maxOutputTokens: the text is cut and
//     finishReason is MAX_TOKENS. A function call
//     ends with finishReason STOP (there is no tool finish reason) and
//     finishMessage "Model generated function call(s).". A blocked prompt
//     is HTTP 200 with no candidates and promptFeedback{blockReason,
//     safetyRatings}.
//   - Two JSON styles, like the API: unary bodies (and errors) pretty-printed
//     with two-space indents; stream chunks on one line with ": " after keys
//     and no space after commas. < > & are not escaped.
//   - Streams as data-only SSE: `data: <GenerateContentResponse>\r\n\r\n`
//     ([WithSSESeparator] for "\n\n"), no event names, no [DONE]; the stream
//     ends when the response does. A thought chunk, then the text in several
//     chunks each holding only new text, then each function call whole in a
//     chunk of its own; usageMetadata on every chunk with a running
//     candidatesTokenCount, final counts and finishReason on the last. A
//     mid-stream error is a `data: {"error": {"code": 503,"message": …,
//     "status": "UNAVAILABLE"}}` chunk, which the SDK's iterator yields as a
//     genai.APIError; a cut stream ends without the terminating chunk
//     (io.ErrUnexpectedEOF in the SDK).
//   - Errors as google.rpc.Status {"error":{"code","message","status",
//     "details":[…]}}; a 429 RESOURCE_EXHAUSTED with the quota message,
//     google.rpc.Help, google.rpc.QuotaFailure (quotaMetric, quotaId such as
//     GenerateRequestsPerMinutePerProjectPerModel-FreeTier or …PerDay…,
//     quotaDimensions, quotaValue) and google.rpc.RetryInfo {"retryDelay":
//     "31s"}; a Google front-end HTML page for a 502.
//   - Headers of Google's front end: content-type "application/json;
//     charset=UTF-8" (streams: "text/event-stream" with content-disposition
//     attachment), vary Origin/X-Origin/Referer, server-timing
//     "gfet4t7; dur=N", server, x-xss-protection, x-frame-options,
//     x-content-type-options, alt-svc, and x-gemini-service-tier on generate
//     responses ([WithServiceTier]). No Retry-After and no rate-limit
//     headers, ever: retry timing is only in RetryInfo.
//
// # What it cannot reproduce
//
// It runs no model: replies are scripted or echoed, and token counts are a
// deterministic estimate ([CountTokens]: a quarter of the request's JSON
// bytes), not the real tokenizer. It enforces no quota on its own (a 429
// happens only when scripted), caches nothing (cachedContents routes are
// absent; cache counts are what the script says), and has no files,
// batches, embeddings, tuned models, Live API or Interactions API. Its
// validation covers the top-level fields, roles, parts, names and the
// signature rule, not every proto constraint (schemas, MIME types,
// generation limits such as maxOutputTokens over the model's limit,
// candidateCount). The signature check follows the documented rule; the
// real server's exact counting of "position", its behaviour for a
// signature moved to another call, and thinking-level details are not
// known. Values the recordings never showed are assumptions: serviceTier in
// stream chunks, the field order of cachedContentTokenCount and the tool-use
// counts, the messages of a GET on an unknown model or of an unknown URL
// (the real front end may answer those with an HTML page), and the detail
// order of a 429. Real streams cut text at token boundaries into roughly
// fifty-token chunks (the fake cuts every three words), stream thought
// summaries in several chunks, and may put the thought signature of a
// Gemini 3 text answer on an empty final part; candidates carry
// safetyRatings, citationMetadata, groundingMetadata and avgLogprobs the
// fake does not invent. Timing (latency, server-timing values,
// DEADLINE_EXCEEDED after a real timeout), HTTP/2, gzip and the
// x-goog-* request headers the SDK sends are not modelled.
package geminifake
