// Package locality is the locality gate of CortexBuild's provider layer:
// it decides which provider endpoints may be reached, keeps the project's
// consents, and makes the HTTP clients through which adapters reach
// providers, so that the user never gets surprise egress.
//
// # The decision rule
//
// The gate decides on the addresses a host resolves to, never on the host
// name: "localhost" that resolves to a remote address is remote.
//
//   - Every resolved address loopback (127.0.0.0/8, ::1, or an IPv4-mapped
//     ::ffff:127.x.y.z), and at least one: TierLoopback. Allowed, in every
//     mode, without consent. Nothing leaves the machine.
//   - Anything else, including a host that resolves to both loopback and
//     remote addresses: TierRemote. Allowed only when the mode is
//     ModeConsent (the default) and the project has recorded consent for
//     the provider's name: who granted it and when. ModeLocalOnly refuses
//     it whatever the consent.
//   - A host that does not resolve, or resolves to nothing, is refused
//     (ReasonResolve); so is a remote endpoint whose consent cannot be read
//     (ReasonConsentUnavailable). The gate fails closed.
//   - A redirect target is decided like the original endpoint, and a
//     redirect from a loopback endpoint to anything that is not loopback is
//     refused even with consent (ReasonRedirect).
//
// Every refusal is a *[Error] that says what was refused and how to fix
// it; errors.Is(err, [ErrRefused]) holds for all of them, and errors.Is(err,
// [ReasonNoConsent]) and the like for each reason. A refused connection is
// never opened.
//
// # Where it is enforced
//
// [Gate.Check] answers the question ahead of time (for `cortexbuild
// providers list`, the consent prompt, start-up checks). The enforcement
// is in the dialer of [Gate.Client]'s transport: each new connection
// resolves the host again, decides on the addresses resolved then, and
// dials one of those IP addresses, never the name. A name that passed
// Check as loopback and then re-resolves to a remote address (DNS
// rebinding) is refused at the dial. The transport ignores HTTP_PROXY and
// every other proxy setting, so a proxy cannot carry a request around the
// gate. Consent is read again for every new connection, and before every
// request on a client that has connections to remote addresses, so a
// revocation stops the next request even in a running process.
//
// # Consent
//
// A [ConsentStore] keeps one [Consent] per provider name. [FileStore]
// keeps them in .cortexbuild/consent.json ([DefaultConsentFile]); it
// re-reads the file on every call, so `cortexbuild consent revoke` in
// another terminal takes effect in a running orchestrator. [MemoryStore]
// is for tests and embedding.
//
// # For the user documentation
//
// The following section is written for docs/ and may be copied there.
//
//	## Locality and consent
//
//	CortexBuild never sends a prompt off your machine without your say-so.
//
//	A provider whose base_url resolves only to loopback addresses
//	(127.0.0.1, ::1; for example Ollama at http://127.0.0.1:11434) runs with
//	no questions asked: nothing leaves the machine. The decision is made on
//	the addresses the name resolves to, not on the name, and again each
//	time a connection is opened.
//
//	Any other provider needs consent, recorded once per project:
//
//	    cortexbuild consent grant cloud     # record consent for provider "cloud"
//	    cortexbuild consent list            # who granted what, and when
//	    cortexbuild consent revoke cloud    # takes effect for the next request
//
//	On a terminal, CortexBuild asks the first time instead. Consent is kept
//	in .cortexbuild/consent.json (mode 0600); it names the provider, who
//	granted it and when.
//
//	To forbid every endpoint that is not on this machine, consent or not:
//
//	    locality:
//	      mode: local-only
//
//	Proxy settings (HTTP_PROXY, HTTPS_PROXY) are ignored for provider
//	traffic, and a local endpoint may not redirect to a remote one.
//
//	If a request is refused, the error says why and what to do, e.g.
//
//	    provider "cloud" (api.example.com → 203.0.113.7) is not on this machine
//	    and this project has no consent for it: run 'cortexbuild consent grant cloud'
package locality
