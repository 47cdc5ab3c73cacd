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
//     the provider covering this endpoint (scheme, host and port; see
//     [Consent.Covers]): who granted it and when. ModeLocalOnly refuses
//     it whatever the consent.
//   - A host that does not resolve, or resolves to nothing, is refused
//     (ReasonResolve); so is a remote endpoint whose consent cannot be read
//     (ReasonConsentUnavailable). The gate fails closed.
//   - In local-only mode a call that gives an image by URL is refused
//     whatever its provider (ReasonImageURL, Gate.CheckImageURLs): the
//     server it goes to would fetch the URL itself, from wherever it runs.
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
// # Services
//
// The process's other connections (the ledger's PostgreSQL, the Redis
// cache, the notification webhook, the trace exporter, an alerting API)
// are a [Service] each and pass the same gate under the service rule:
// loopback addresses and unix sockets always; anything else refused in
// ModeLocalOnly and allowed in ModeConsent, because the configuration
// names the endpoint. [Gate.ServiceDial] is the dial function to give a
// client (the Redis cache, pgx): it resolves, decides and dials an IP
// address, on every connection. [Gate.ServiceClient] is an HTTP client that
// dials only through it, ignores proxy settings and follows no redirect.
// [Gate.CheckService] decides ahead of time, for start-up checks.
//
// # Consent
//
// A [ConsentStore] keeps one [Consent] per provider name, and the consent
// covers the one endpoint it was granted for: a provider whose base_url
// moves to another scheme, host or port, or a redirect there, needs consent
// again. A consent without an endpoint (written before consents named one)
// covers nothing. [FileStore]
// keeps them in .cortexbuild/consent.json ([DefaultConsentFile]); it
// re-reads the file on every call, so `cortexbuild consent revoke` in
// another terminal takes effect in a running orchestrator. [MemoryStore]
// is for tests and embedding.
//
// # For the user documentation
//
// docs/locality.md describes the model for users: what needs consent, what
// a consent covers, and the errors.
package locality
