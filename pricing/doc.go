// Package pricing is CortexBuild's price catalog and offline token
// estimator.
//
// The catalog is a versioned YAML file (catalog.yaml) embedded in the
// binary: it is never fetched at run time, so an offline or zero-egress
// install prices correctly. Each model carries its context window, maximum
// output, and one or more dated price periods (input, output, cache read,
// cache write for the short and long lifetimes, and long-context tiers that
// bill the whole request at higher rates above a prompt size). Namespaces
// marked local (Ollama, vLLM, LM Studio) price every model at an explicit
// zero.
//
// Cost follows one usage convention ([provider.Usage]: cached tokens are
// inside the prompt count, whatever the provider reported), so a cached
// token is never billed twice:
//
//	uncached input × input + cache reads × cache_read
//	  + short cache writes × cache_write + long cache writes × cache_write_long
//	  + output (reasoning included) × output
//
// summed exactly in nano-dollars and rounded up once.
//
// Estimates count the prompt with the o200k_base BPE tokenizer, scaled by the
// namespace's token_factor (a safety margin for vendors whose tokenizers
// count more), and take max_tokens as the output; they bound the cost of a
// call from above.
package pricing
