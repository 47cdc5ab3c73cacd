// Package provider is CortexBuild's contract with LLM providers: the only
// vocabulary the rest of CortexBuild uses to talk to a model.
//
// It defines the [Adapter] interface (the spec's six operations plus a name),
// the [Request], [Result] and [Chunk] types, model tiers ([Tier]),
// capabilities ([Capability], [CapabilitySet]), exact money ([Money]), the
// typed error taxonomy ([Error], [Kind]) and the [Registry] of adapter
// types. It imports only the standard library.
//
// Vendor code lives in sub-packages (provider/anthropic, provider/openaicompat,
// provider/gemini). Each turns every vendor failure into an [*Error] with a
// [Kind], so that from here on nothing reasons about HTTP status codes or
// vendor error strings:
//
//	caller ──Request──▶ Adapter.Invoke ──vendor SDK──▶ provider API
//	   ▲                     │
//	   └──Result / *Error◀───┘  (Kind decides retry, failover or surface)
//
// Adapters never retry: the orchestrator is the one retry owner.
package provider
