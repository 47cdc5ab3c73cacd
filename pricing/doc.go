// Package pricing is CortexBuild's price catalog and offline token
// estimator.
//
// The catalog is a versioned YAML file (catalog.yaml) embedded in the
// binary: it is never fetched at run time, so an offline or zero-egress
// install prices correctly. Each model carries its context window, maximum
// output, and one or more dated price periods (input, output, cache read,
// cache write for the short and long lifetimes, and long-context tiers that
// bill the whole request at higher rates above a prompt size), and rate
// cards for the other service tiers the vendor publishes (OpenAI's flex and
// Fast mode); each namespace maps its API's service tier names to the
// rates they bill at ([Namespace.Cards]: an unknown tier at the model's
// dearest card) and prices web searches per search. Namespaces marked
// local (Ollama, vLLM, LM Studio) price every model at an explicit zero.
//
// Cost follows one usage convention ([provider.Usage]: cached tokens are
// inside the prompt count, whatever the provider reported), so a cached
// token is never billed twice:
//
//	uncached input × input + cache reads × cache_read
//	  + short cache writes × cache_write + long cache writes × cache_write_long
//	  + output (reasoning included) × output
//	  + web searches × the price of one search
//
// at the rate card of the service tier the usage reports, summed exactly
// in nano-dollars and rounded up once.
//
// Estimates bound the prompt with [BoundRequestTokens]: the o200k_base BPE
// count scaled by the namespace's token_factor (a safety margin for vendors
// whose tokenizers count more) where that count is plausible for the text's
// length, one token per byte where it is not and for bytes outside ASCII;
// each image by the adapter's formula for the model (the neutral shapes of
// images.go) from its size read from the header of its bytes;
// they take max_tokens, clamped to the model's max_output_tokens, as the
// output. A request relayed as its client sent it ([provider.Native]) adds
// the bytes of its body the decoded request lacks, a token each, its web
// searches, and is priced at the service tier its body asks for. They bound
// what a provider can bill for a call from above, whatever the text.
package pricing
