// Package cache is the response cache of CortexBuild's provider layer: it
// answers an identical prompt from a stored response instead of calling the
// provider again, for 24 hours by default.
//
// # Keys
//
// [NewKey] hashes (BLAKE3) a normalised form of the request together with
// its [Scope]: the project, the provider instance and, when known, the model
// the instance resolved. Everything that can change the answer is in the key:
// the model and tier, the system prompt, every message and part of the
// conversation (text, reasoning and its provider metadata, images, tool calls with
// their arguments, tool results with their error flag), the tools with their
// schemas, the tool choice, the effective max tokens, the prompt-cache
// setting, the sampling settings (temperature, top_p, top_k, seed, stop
// sequences), the response format, the reasoning setting, the request's provider options, the caller's cache_key namespace
// and the key format version ([KeyVersion]). Only the attempt timeout is left
// out: it bounds the wait, not the answer. A field added to
// [provider.Request] fails this package's tests until the key covers it or
// the tests say why it need not.
//
// Normalisation removes only differences that cannot reach the model: JSON
// values (tool arguments, schemas, metadata) are hashed in canonical form
// (object members sorted by key, insignificant whitespace removed, string
// escapes decoded; numbers stay as written), defaults are applied (an empty
// tier is balanced, zero max tokens is 4096, an empty tool choice is auto), a
// Prompt is the final user turn it stands for, and nil and empty lists and
// maps are alike. Anything else, however small, gives a different key: a miss
// costs a provider call, a wrong hit is a wrong answer.
//
// # Back ends
//
// A [Store] keeps entries; two implement it and pass one conformance suite
// (package cache/cachetest): [Memory], a bounded in-process LRU (the
// embedded default), and [Redis], shared between processes, storing each
// entry as JSON under cortexbuild:cache:v1:<key hex> with SET … PX ttl.
//
// # The cache
//
// [Cache] puts the pieces together. [Cache.Do] looks the key up and, on a
// miss, calls fill exactly once however many identical requests arrive
// concurrently in the process: the others wait for that call and share its
// answer. The first caller makes the call on its own goroutine. A caller
// that gives up gets its context's error (a waiting one at once, the one
// making the call when the call returns); the shared call goes on for the
// others and is cancelled only when every caller has given up.
//
// Only complete answers are stored: never an error, never a stream that
// broke, and never a result whose stop reason says it was cut or withheld
// (max_tokens, context_window, pause, content_filter, refusal, other); see
// [Cache.Put]. A max_tokens answer is complete for its request, but it is a
// truncated answer, and storing it would hand the same truncated text to
// every retry of the identical request for a day.
//
// A hit (or a shared answer) is marked CacheHit, costs nothing and uses no
// tokens: its Cost and Usage are zero, so cost stays the price of usage and
// neither is counted twice. What the original call cost is reported beside
// it, in [Outcome.Saved] and [Outcome.SavedUsage], for the ledger to record as a
// saving.
//
// Back-end trouble never turns into a wrong answer: a Redis failure during a
// lookup is a miss plus an error to log ([Outcome.StoreErr]), and a value
// that does not decode, or was stored under another key, is a miss too.
//
// # Policy
//
// [Enabled] decides whether an agent's calls use the cache: on by default
// for the read-only agents (tester_validator, optimizer, explore), off for
// the others, and an explicit per-agent setting always wins.
package cache
