package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/cortexbuild/cortexbuild/internal/agentmark"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Request headers a client may send to route its calls.
const (
	// HeaderAgent names the agent the call is made for (builder, critic,
	// …): its routing, budget and critic gate apply.
	HeaderAgent = "X-CortexBuild-Agent"
	// HeaderTask names the task the call belongs to: the task's budget
	// applies and its ledger rows carry it.
	HeaderTask = "X-CortexBuild-Task"
)

// Response headers the gateway adds.
const (
	// HeaderInvocation is the invocation id in the ledger.
	HeaderInvocation = "X-CortexBuild-Invocation"
	// HeaderProvider and HeaderModel say which provider instance and model
	// served the call.
	HeaderProvider = "X-CortexBuild-Provider"
	HeaderModel    = "X-CortexBuild-Model"
	// HeaderAdjusted lists the request parameters the gateway changed before
	// the call, with the value applied: "max_tokens=64000" when the output
	// limit asked for is above the model's (max_tokens,
	// max_completion_tokens or max_output_tokens, as the protocol names it).
	HeaderAdjusted = "X-CortexBuild-Adjusted-Params"
	// HeaderIgnored lists the request parameters the gateway accepted but
	// did not apply (temperature, unknown fields, …).
	HeaderIgnored = "X-CortexBuild-Ignored-Params"
	// HeaderRelayed, on an answer relayed as the provider sent it (the
	// client's protocol is the provider's: see docs/gateway.md, "Same
	// protocol, same bytes"), names that protocol ("anthropic.messages",
	// "openai.chat", "openai.responses"); absent on a translated answer
	// and on the gateway's own refusals.
	HeaderRelayed = "X-CortexBuild-Relayed"
	// HeaderDegraded names what of the fleet-wide state this answer went
	// without, the shared engine (Redis) being unreachable: "rate-limits"
	// (the key's rpm and tpm were counted by this replica alone),
	// "turn-state" (the provider state of earlier turns was looked up in
	// this replica alone). Absent when nothing was.
	HeaderDegraded = "X-CortexBuild-Degraded"
)

// DefaultMaxBodyBytes is the default request size limit (32 MiB, the size
// the Messages API itself accepts).
const DefaultMaxBodyBytes = 32 << 20

// Orchestrator is what the gateway needs of the orchestrator:
// *orchestrator.Orchestrator implements it.
type Orchestrator interface {
	Invoke(ctx context.Context, c orchestrator.Call) (*orchestrator.Outcome, error)
	Stream(ctx context.Context, c orchestrator.Call) (*orchestrator.Stream, error)
	Route(ctx context.Context, c orchestrator.Call) orchestrator.Trace
}

// Authenticator checks a client's token; *KeyStore implements it.
type Authenticator interface {
	Check(token string) (Key, error)
}

// Options configure a Gateway. The zero value of each optional field is
// the default named in its comment.
type Options struct {
	// Orchestrator serves every call. Required.
	Orchestrator Orchestrator
	// Project names the project; a key bound to another project is
	// refused. "" accepts any.
	Project string
	// Keys checks the virtual keys clients send. Required unless NoAuth.
	Keys Authenticator
	// NoAuth serves every request without a key. [Gateway.Listen] refuses
	// it on an address that is not loopback.
	NoAuth bool
	// Models maps model names to targets, on top of the names that always
	// resolve (tiers, Agents, provider/model for Providers).
	Models map[string]Target
	// Agents are the agent names clients may use, as model names or in
	// the X-CortexBuild-Agent header. Default: the spec's ten agents.
	Agents []string
	// Providers are the configured provider instance names, for
	// provider/model names.
	Providers []string
	// MaxBodyBytes bounds a request body; larger ones get a 413. Default
	// 32 MiB.
	MaxBodyBytes int64
	// MaxInFlight bounds the API requests served at once (from when the
	// body is in: a request whose body is still being read holds only its
	// key's slot); one more gets the protocol's overloaded error with
	// retry-after: 1 at once, so that an overload costs refusals, not
	// unbounded memory and queueing. Without auth it also bounds the
	// requests being read and served together. Default
	// [DefaultMaxInFlight] of [ProcessMemory].
	MaxInFlight int
	// MaxInFlightPerKey bounds the API requests one virtual key has in
	// flight at once, their bodies being read or being served, so that one
	// client cannot hold every slot of MaxInFlight; one more gets the
	// overloaded error with retry-after: 1. Default
	// [DefaultMaxInFlightPerKey] of MaxInFlight.
	MaxInFlightPerKey int
	// HeaderTimeout bounds how long a client may take to send a request's
	// headers ([Gateway.Listen] sets it on the server). Default
	// [DefaultHeaderTimeout].
	HeaderTimeout time.Duration
	// BodyTimeout bounds how long a client may take to send a request's
	// body once its headers are in; a slower one gets a 408. Default
	// [DefaultBodyTimeout].
	BodyTimeout time.Duration
	// AllowedHosts are Host header values (name, or name:port) served
	// besides the address a request arrived on (and, when that is
	// loopback, localhost and the loopback IPs with its port). Any other
	// Host gets a 421.
	AllowedHosts []string
	// Translate serves every call through the contract, relaying none
	// (see docs/gateway.md, "Same protocol, same bytes"): a request is
	// decoded and encoded anew for whichever provider serves it. For
	// embedding and tests; the configuration has no such setting.
	Translate bool
	// StrictParams refuses (400) requests carrying parameters the gateway
	// does not apply; by default they are ignored and named in the
	// X-CortexBuild-Ignored-Params response header.
	StrictParams bool
	// CountTokens counts a request's prompt offline for count_tokens, for
	// the provider instance that would serve it. Default: the o200k
	// tokenizer count of the request, unscaled.
	CountTokens func(providerName string, req *provider.Request) int64
	// Prepare, when set, runs before each call (the CLI applies the
	// default task budget to a task seen for the first time); an error
	// refuses the call.
	Prepare func(ctx context.Context, c *orchestrator.Call) error
	// Logger receives one line per request (never a key or a prompt).
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// TurnStateTTL and TurnStateBytes bound the provider state kept
	// between a conversation's turns (thought signatures, thinking
	// blocks, made-up call ids: see turnState). Defaults
	// [DefaultTurnStateTTL] and [DefaultTurnStateBytes].
	TurnStateTTL   time.Duration
	TurnStateBytes int
	// Shared, when set, keeps the keys' request and token counters and the
	// provider state between turns in a shared engine (Redis), so that a
	// fleet of gateways behaves as one: a key's rpm and tpm hold across
	// the fleet and a turn served by another replica finds the state.
	// Unreachable, each replica falls back to its own (see
	// [HeaderDegraded] and docs/gateway.md). nil: per process.
	Shared Shared
	// SharedPrefix starts the keys written in Shared, before the project
	// in braces. Default [DefaultSharedPrefix].
	SharedPrefix string
	// Ready are the engines /readyz checks besides the gateway itself.
	Ready []Engine
}

// Gateway is the HTTP front door: an http.Handler serving the
// OpenAI-compatible and Anthropic-compatible routes. More handlers (a web
// console) can be mounted on it with [Gateway.Handle].
type Gateway struct {
	opts    Options
	mux     *http.ServeMux
	started time.Time
	// slots holds a token per API request in flight.
	slots chan struct{}
	// perKey counts the API requests of each key in flight.
	perKey *keySlots
	// exact holds the Models that are plain names; patterns the ones with
	// '*' and DefaultFamilies, most specific first.
	exact    map[string]Target
	patterns []pattern
	// turns keeps provider state the clients' protocols cannot carry.
	turns turnKeeper
	// rates counts each key's requests and tokens per minute.
	rates rateLimiter
	// decodes counts the request bodies decoded in full (see relayOnly).
	decodes atomic.Int64
}

// New returns a gateway.
func New(opts Options) (*Gateway, error) {
	if opts.Orchestrator == nil {
		return nil, errors.New("gateway: an orchestrator is required")
	}
	if opts.Keys == nil && !opts.NoAuth {
		return nil, errors.New("gateway: a key store is required unless authentication is turned off")
	}
	if opts.Agents == nil {
		opts.Agents = orchestrator.AgentNames()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight(ProcessMemory())
	}
	if opts.MaxInFlightPerKey <= 0 {
		opts.MaxInFlightPerKey = DefaultMaxInFlightPerKey(opts.MaxInFlight)
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.CountTokens == nil {
		opts.CountTokens = func(_ string, req *provider.Request) int64 { return countTokens(req) }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TurnStateTTL <= 0 {
		opts.TurnStateTTL = DefaultTurnStateTTL
	}
	if opts.TurnStateBytes <= 0 {
		opts.TurnStateBytes = DefaultTurnStateBytes
	}
	if opts.SharedPrefix == "" {
		opts.SharedPrefix = DefaultSharedPrefix
	}
	for _, e := range opts.Ready {
		if e.Name == "" || e.Ping == nil {
			return nil, errors.New("gateway: an engine /readyz checks needs a name and a ping")
		}
	}
	exact, patterns := map[string]Target{}, []pattern{}
	for name, t := range opts.Models {
		if t.Agent == "" && t.Tier == "" && t.Model == "" {
			return nil, fmt.Errorf("gateway: model %q maps to nothing: set an agent, a tier or a model", name)
		}
		if IsPattern(name) {
			patterns = append(patterns, newPattern(name, t))
		} else {
			exact[name] = t
		}
	}
	for name, t := range DefaultFamilies {
		if _, ok := opts.Models[name]; !ok {
			t.family = true
			patterns = append(patterns, newPattern(name, t))
		}
	}
	sortPatterns(patterns)
	g := &Gateway{opts: opts, mux: http.NewServeMux(), started: opts.Now(), slots: make(chan struct{}, opts.MaxInFlight),
		perKey: &keySlots{n: map[string]int{}}, exact: exact, patterns: patterns,
		turns: localTurns{newTurnState(opts.TurnStateTTL, opts.TurnStateBytes, opts.Now)}, rates: localRates{newKeyRates(opts.Now)}}
	if opts.Shared != nil {
		prefix := opts.SharedPrefix + "{" + opts.Project + "}:"
		g.turns = newSharedTurns(opts.Shared, prefix, opts.TurnStateTTL, newTurnState(opts.TurnStateTTL, opts.TurnStateBytes, opts.Now), opts.Logger)
		g.rates = newSharedRates(opts.Shared, prefix, newKeyRates(opts.Now), opts.Now, opts.Logger)
	}
	g.mux.HandleFunc("/v1/chat/completions", g.method(protoOpenAI, http.MethodPost, g.chatCompletions))
	g.mux.HandleFunc("/v1/responses", g.method(protoOpenAI, http.MethodPost, g.responses))
	g.mux.HandleFunc("/v1/messages", g.method(protoAnthropic, http.MethodPost, g.messages))
	g.mux.HandleFunc("/v1/messages/count_tokens", g.method(protoAnthropic, http.MethodPost, g.countTokens))
	g.mux.HandleFunc("/v1/models", g.method(protoAuto, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		g.serveModels(w, r, protocolOf(r))
	}))
	g.mux.HandleFunc("/v1/models/{id}", g.method(protoAuto, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		g.serveModel(w, r, protocolOf(r))
	}))
	g.mux.HandleFunc("/healthz", g.healthz)
	g.mux.HandleFunc("/readyz", g.readyz)
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		protocolOf(r).writeError(w, r, fail(classNotFound, "no route %s %s: the gateway serves POST /v1/chat/completions, POST /v1/responses, GET /v1/models, POST /v1/messages and POST /v1/messages/count_tokens", r.Method, r.URL.Path))
	})
	return g, nil
}

// healthz answers {"status":"ok"}, with the names of the providers that
// cannot be used now (a credential not set, say) under "unavailable";
// the reasons are for the console and the log, not for callers without a
// key.
func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok"}
	if u, ok := g.opts.Orchestrator.(interface {
		Unavailable(context.Context) map[string]string
	}); ok {
		if names := slices.Sorted(maps.Keys(u.Unavailable(r.Context()))); len(names) > 0 {
			body["unavailable"] = names
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// Handle mounts another handler on the gateway's mux (the web console,
// for example, under "/console/"). Call it before serving.
func (g *Gateway) Handle(pattern string, h http.Handler) { g.mux.Handle(pattern, h) }

// NoAuth reports whether the gateway serves requests without a key.
func (g *Gateway) NoAuth() bool { return g.opts.NoAuth }

// ServeHTTP serves one request and logs it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := g.opts.Now()
	rec := &recorder{ResponseWriter: w}
	// Every answer, a refusal before any call included, names the request
	// by the id its invocation (if any) will have, in the headers both SDK
	// families read.
	id := newID()
	requestIDHeaders(rec.Header(), id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	if f := g.guard(r); f != nil {
		protocolOf(r).writeError(rec, r, f)
	} else {
		g.mux.ServeHTTP(rec, r)
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	// A line per answered request at debug; refusals at info, failures at
	// warn, so that a busy server's default log holds what needs a look.
	level := slog.LevelDebug
	switch {
	case status >= 500:
		level = slog.LevelWarn
	case status >= 400:
		level = slog.LevelInfo
	}
	if !g.opts.Logger.Enabled(r.Context(), level) {
		return
	}
	g.opts.Logger.LogAttrs(r.Context(), level, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.String("invocation", rec.Header().Get(HeaderInvocation)),
		slog.String("provider", rec.Header().Get(HeaderProvider)), slog.String("model", rec.Header().Get(HeaderModel)),
		slog.Duration("duration", g.opts.Now().Sub(start)))
}

// recorder notes the status a handler wrote; it unwraps for
// http.ResponseController (flushing streams).
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// method restricts a route to one method, answering others with a 405 in
// the route's protocol.
func (g *Gateway) method(p protocol, m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := p
		if p == protoAuto {
			p = protocolOf(r) // per request: the closure is shared
		}
		if r.Method != m {
			w.Header().Set("Allow", m)
			p.writeError(w, r, fail(classMethod, "%s %s is not allowed: use %s", r.Method, r.URL.Path, m))
			return
		}
		// Authenticate before reading anything more, and hold one of the
		// key's own slots: a key's requests, their bodies being read or
		// being served, are bounded by gateway.max_in_flight_per_key (all
		// of a gateway's without keys by gateway.max_in_flight).
		key, af := g.authenticate(r)
		if af == nil {
			af = adminOnly(key)
		}
		if af != nil {
			p.writeError(w, r, af)
			return
		}
		id, limit := keyID(key), g.opts.MaxInFlightPerKey
		if key == nil {
			limit = g.opts.MaxInFlight
		}
		if !g.perKey.take(id, limit) {
			f := g.overloaded()
			if key != nil {
				f.msg = fmt.Sprintf("this key has %d requests in flight, its limit (gateway.max_in_flight_per_key): retry shortly", limit)
			}
			p.writeError(w, r, f)
			return
		}
		defer g.perKey.give(id)
		// A route with a body takes its gateway.max_in_flight slot once
		// the body is in (decodeCall), so that clients stalling their
		// bodies hold none; one without takes it now.
		slot := &servingSlot{g: g}
		defer slot.release()
		if m == http.MethodGet {
			if f := slot.take(); f != nil {
				p.writeError(w, r, f)
				return
			}
		}
		h(w, withKey(r, key, slot))
	}
}

// servingSlot is a request's hold on one of the gateway.max_in_flight
// slots.
type servingSlot struct {
	g    *Gateway
	held bool
}

// take takes a slot, or answers the overloaded refusal.
func (s *servingSlot) take() *failure {
	if s.held {
		return nil
	}
	select {
	case s.g.slots <- struct{}{}:
		s.held = true
		return nil
	default:
		return s.g.overloaded()
	}
}

func (s *servingSlot) release() {
	if s.held {
		<-s.g.slots
		s.held = false
	}
}

// overloaded is the refusal of a request over gateway.max_in_flight, to
// be retried in a second.
func (g *Gateway) overloaded() *failure {
	f := fail(classOverloaded, "the gateway is serving %d requests, its limit (gateway.max_in_flight): retry shortly", cap(g.slots))
	f.retryAfter = time.Second
	return f
}

// authenticate checks the client's key: Authorization: Bearer or
// x-api-key, on every route. It returns nil for a gateway without auth.
func (g *Gateway) authenticate(r *http.Request) (*Key, *failure) {
	if g.opts.NoAuth {
		return nil, nil
	}
	if a, ok := r.Context().Value(authedKey{}).(*authed); ok && a.key != nil {
		return a.key, nil
	}
	var tokens []string
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
			tokens = append(tokens, strings.TrimSpace(tok))
		}
	}
	if tok := strings.TrimSpace(r.Header.Get("X-Api-Key")); tok != "" {
		tokens = append(tokens, tok)
	}
	if len(tokens) == 0 {
		return nil, fail(classAuth, "missing API key: send a CortexBuild virtual key as 'Authorization: Bearer <key>' or 'x-api-key: <key>' (create one with 'cortexbuild serve keys create')")
	}
	var storeErr error
	var expired *ExpiredKeyError
	revoked, otherProject := false, ""
	for _, tok := range tokens {
		k, err := g.opts.Keys.Check(tok)
		switch {
		case errors.As(err, &expired):
		case err == nil && g.opts.Project != "" && k.Project != "" && k.Project != g.opts.Project:
			otherProject = k.Project
		case err == nil:
			return &k, nil
		case errors.Is(err, ErrRevokedKey):
			revoked = true
		case errors.Is(err, ErrInvalidKey):
		default:
			storeErr = err
		}
	}
	switch {
	case errors.Is(storeErr, errKeysUnreachable):
		// The database is away: it passes, so the client may retry. The
		// address and the driver's words stay in the log.
		g.opts.Logger.Error("key store unreachable: every request is refused until it answers", "error", storeErr.Error())
		return nil, &failure{class: classUnavailable, msg: errKeysUnreachable.Error() + ": every request is refused until PostgreSQL answers again", code: "keys_unavailable"}
	case storeErr != nil:
		// The reason names the file and the command that fixes it: that
		// is for the operator's log, not for a client.
		g.opts.Logger.Error("key store unusable: every request is refused until it is fixed", "error", storeErr.Error())
		return nil, &failure{class: classInternal, msg: "the gateway cannot use its key store: the gateway's log says why", retry: no}
	case otherProject != "":
		return nil, fail(classAuth, "this key belongs to project %q, not to %q, which this gateway serves", otherProject, g.opts.Project)
	case revoked:
		return nil, fail(classAuth, "this API key was revoked: create another with 'cortexbuild serve keys create'")
	case expired != nil:
		return nil, fail(classAuth, "this API key expired at %s: extend it with 'cortexbuild serve keys update %s --expires …' or create another", expired.At.UTC().Format(time.RFC3339), expired.ID)
	}
	return nil, fail(classAuth, "invalid API key: send a CortexBuild virtual key ('cortexbuild serve keys list' shows the active ones)")
}

// readBody reads the request body up to the size limit, within the body
// timeout.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *failure) {
	limit := g.opts.MaxBodyBytes
	tooLarge := fail(classTooLarge, "the request body is larger than the gateway's limit of %d bytes (gateway.max_body_bytes)", limit)
	rc := http.NewResponseController(w)
	// A writer without deadlines (not a real connection) reads unbounded.
	if rc.SetReadDeadline(time.Now().Add(g.opts.BodyTimeout)) == nil {
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	if r.ContentLength > limit {
		discard(w, r, 2*limit)
		return nil, tooLarge
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil && bodyTimedOut(err) {
		w.Header().Set("Connection", "close")
		return nil, fail(classBodyTimeout, "the request body did not arrive within %s (gateway.body_timeout)", g.opts.BodyTimeout)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			discard(w, r, limit) // the first limit bytes are read
			return nil, tooLarge
		}
		return nil, fail(classBadRequest, "the request body could not be read: %v", err)
	}
	return body, nil
}

// discard reads and drops the rest of the body of a request refused for
// its size, at most n more bytes (within the body timeout), and closes the
// connection after the answer: a client that sends its whole body before
// reading the answer (curl, Python's http.client) then reads the 413
// instead of a connection reset. The gateway reads at most twice
// gateway.max_body_bytes of a body in all; one announcing more is answered
// at once.
func discard(w http.ResponseWriter, r *http.Request, n int64) {
	w.Header().Set("Connection", "close")
	if r.ContentLength > n {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, n)
}

// readAll is io.ReadAll for a body whose client announced n bytes (-1
// when unknown): a body that fits in firstRead is read into one buffer of
// the announced size; a longer one is read first into a pooled buffer of
// firstRead, then into one that grows fourfold up to the announced size,
// so that a 200 KB prompt costs one allocation of its size. It never
// allocates ahead of the bytes that arrived by more than fourfold: a
// client announcing 32 MiB and sending nothing holds firstRead.
func readAll(r io.Reader, n int64) ([]byte, error) {
	want := int(max(n, 0)) + 512
	if want <= firstRead {
		return readInto(r, make([]byte, 0, want), want)
	}
	first := firstReads.Get().(*[]byte)
	defer firstReads.Put(first)
	b, err := readFull(r, (*first)[:0])
	if err != nil || len(b) < cap(b) {
		return append([]byte(nil), b...), err
	}
	return readInto(r, append(make([]byte, 0, min(4*len(b), want)), b...), want)
}

// firstRead is the most readAll allocates before any byte arrived.
const firstRead = 64 << 10

var firstReads = sync.Pool{New: func() any { b := make([]byte, firstRead); return &b }}

// readFull reads into b's free capacity until it is full, or until EOF
// (nil error) or another error.
func readFull(r io.Reader, b []byte) ([]byte, error) {
	for len(b) < cap(b) {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// readInto reads the rest of r into b, growing it fourfold up to want
// (then doubling past it, for a client that sends more than it announced).
func readInto(r io.Reader, b []byte, want int) ([]byte, error) {
	for {
		var err error
		if b, err = readFull(r, b); err != nil || len(b) < cap(b) {
			return b, err
		}
		// Full: EOF may be next, or more.
		c := 2 * cap(b)
		if cap(b) < want {
			c = min(4*cap(b), want)
		}
		b = append(make([]byte, 0, c), b...)
	}
}

// callFor builds the orchestrator call of a request: the model name's
// target, the agent and task headers, the key's bindings.
func (g *Gateway) callFor(r *http.Request, key *Key, model string, req provider.Request) (orchestrator.Call, *failure) {
	if model == "" {
		return orchestrator.Call{}, &failure{class: classBadRequest, param: "model", msg: "model: required: send an agent name, a tier or a name from GET /v1/models"}
	}
	marked, err := agentmark.Find(req.System)
	if err != nil {
		return orchestrator.Call{}, fail(classBadRequest, "%v", err)
	}
	if marked != "" && !slices.Contains(g.opts.Agents, marked) {
		return orchestrator.Call{}, fail(classBadRequest, "the system prompt is agent %q's persona (%s), but this project has no such agent; the agents are %s: run 'cortexbuild render' after changing agents", marked, agentmark.Line(marked), strings.Join(g.opts.Agents, ", "))
	}
	var t Target
	if marked != "" {
		// A rendered persona says which agent it is; the model name is the
		// host's (a family alias, a vendor model, a display name) and the
		// agent's own route decides the model.
		t = Target{Agent: marked, persona: true}
	} else {
		var ok bool
		if t, ok = g.resolve(model); !ok {
			return orchestrator.Call{}, g.unknownModel(model)
		}
	}
	if f := keyScope(key, model, t, strings.TrimSpace(r.Header.Get(HeaderAgent))); f != nil {
		return orchestrator.Call{}, f
	}
	agent, task := t.Agent, ""
	if h := strings.TrimSpace(r.Header.Get(HeaderAgent)); h != "" {
		if !slices.Contains(g.opts.Agents, h) {
			return orchestrator.Call{}, fail(classBadRequest, "%s: unknown agent %q; the agents are %s", HeaderAgent, h, strings.Join(g.opts.Agents, ", "))
		}
		switch {
		case marked != "":
			// The header is the session's agent, sent on every request of a
			// host, its sub-agents' too: the persona's marker wins.
		case agent != "" && agent != h:
			return orchestrator.Call{}, fail(classBadRequest, "model %q routes as agent %s but %s says %s: send one of them", model, agent, HeaderAgent, h)
		default:
			agent = h
		}
	}
	if h := strings.TrimSpace(r.Header.Get(HeaderTask)); h != "" {
		if len(h) > 200 || strings.IndexFunc(h, unicode.IsControl) >= 0 {
			return orchestrator.Call{}, fail(classBadRequest, "%s: a task id is at most 200 printable characters", HeaderTask)
		}
		task = h
	}
	if key != nil && key.Agent != "" {
		agent = key.Agent // keyScope refused any other
	}
	if key != nil && key.Task != "" {
		if task != "" && task != key.Task {
			return orchestrator.Call{}, fail(classPermission, "this key is bound to task %s; it cannot call for task %s", key.Task, task)
		}
		task = key.Task
	}
	served := t.servedAs(agent)
	if f := g.modelsServed(key, served, marked != ""); f != nil {
		return orchestrator.Call{}, f
	}
	req.Tier = served.Tier
	if t.Model != "" {
		req.Model = t.Model
	}
	c := orchestrator.Call{Agent: agent, Task: task, Request: req}
	var hf *failure
	if c.Session, c.HostAgent, c.ParentAgent, hf = hostIdentity(r.Header); hf != nil {
		return orchestrator.Call{}, hf
	}
	if t.Provider != "" {
		c.Providers = []string{t.Provider}
	}
	if key != nil {
		c.Key = key.ID
		if key.Budget != nil {
			c.KeyBudget = &orchestrator.KeyBudget{Limit: *key.Budget, Period: key.BudgetPeriod()}
		}
	}
	return c, nil
}

// prepare finishes a call: a prompt-cache request that no candidate can
// honour is dropped (it is a hint, not a requirement), under strict_params
// sampling settings become requirements, the call gets its invocation id
// and its output limit (see [Gateway.outputLimit]), and the Prepare hook
// runs. adjusted reports an output limit other than the protocol's meaning
// of what was asked.
func (g *Gateway) prepare(ctx context.Context, c *orchestrator.Call, id string, modelMax bool) (adjusted bool, f *failure) {
	c.InvocationID = "inv_" + id
	if c.Request.PromptCache != provider.PromptCacheOff {
		tr := g.opts.Orchestrator.Route(ctx, *c)
		if len(tr.Kept()) == 0 {
			c.Request.PromptCache = provider.PromptCacheOff
		}
	}
	if err := c.Request.Validate(); err != nil {
		return false, classify(ctx, err)
	}
	if f := g.strictSampling(ctx, c); f != nil {
		return false, f
	}
	adjusted = g.outputLimit(ctx, c, modelMax)
	if g.opts.Prepare != nil {
		if err := g.opts.Prepare(ctx, c); err != nil {
			return adjusted, classify(ctx, err)
		}
	}
	return adjusted, nil
}

// outputLimit sets the output limit of c, so that the call is priced and
// admitted as what it can cost: a limit above the served model's is
// clamped to it (the adapter sends no more); no limit where the protocol
// means the model's maximum by that (modelMax) is the model's limit in the
// catalog, or the agent's default for a model the catalog gives none.
// It reports whether the limit differs from what the caller asked for.
func (g *Gateway) outputLimit(ctx context.Context, c *orchestrator.Call, modelMax bool) (adjusted bool) {
	ol, ok := g.opts.Orchestrator.(interface {
		OutputLimit(context.Context, orchestrator.Call) (int, bool)
	})
	if !ok {
		return false
	}
	switch {
	case c.Request.MaxTokens > 0:
		if n, ok := ol.OutputLimit(ctx, *c); ok && n < c.Request.MaxTokens {
			c.Request.MaxTokens = n
			return true
		}
	case modelMax:
		probe := *c
		probe.Request.MaxTokens = math.MaxInt32
		if n, ok := ol.OutputLimit(ctx, probe); ok && n < math.MaxInt32 {
			c.Request.MaxTokens = n
			return false
		}
		if n, ok := ol.OutputLimit(ctx, *c); ok {
			c.Request.MaxTokens = n
			return true
		}
	}
	return false
}

// decoded is what every protocol's decoder takes from a request body.
type decoded struct {
	model   string
	stream  bool
	req     provider.Request
	ignored []string
	// ignoredHeaders are request header values not applied (named, never
	// refused).
	ignoredHeaders []string
	// tools maps the provider's function names to the client's tools
	// (custom and namespaced ones); nil when the names are the same.
	tools *toolMap
	// key is the id of the client's virtual key ("" without keys).
	key string
	// modelMax: no output limit was sent, and the protocol (Chat
	// Completions, Responses) means the model's maximum by that. Once
	// admitted, req.MaxTokens is the limit applied.
	modelMax bool
}

func (d *decoded) common() *decoded { return d }

// decodeCall authenticates r, reads and decodes its body and resolves it to
// an orchestrator call. When it fails it has answered in p's error shape
// and returns false.
//
// A request in a provider's protocol carries its body as sent
// (provider.Native) for an adapter that relays it. A body the decoder
// refuses for what the contract does not model still goes through when
// its route relays it as sent: the provider is the judge of its own
// protocol; the call is then refused on any route that would translate
// it. Under gateway.strict_params, parameters the gateway would ignore
// are refused only on a route that translates.
func decodeCall[U any, PT interface {
	*U
	common() *decoded
}](g *Gateway, w http.ResponseWriter, r *http.Request, p protocol, decode func([]byte) (PT, error)) (PT, orchestrator.Call, bool) {
	fail := func(f *failure) (PT, orchestrator.Call, bool) {
		p.writeError(w, r, f)
		return nil, orchestrator.Call{}, false
	}
	key, f := g.authenticate(r)
	if f != nil {
		return fail(f)
	}
	if f := jsonBody(r); f != nil {
		return fail(f)
	}
	body, f := g.readBody(w, r)
	if f != nil {
		return fail(f)
	}
	if f := takeSlot(r); f != nil {
		return fail(f)
	}
	proto := nativeProtocol(r.URL.Path)
	if g.opts.Translate {
		proto = ""
	}
	var rb relayBody
	scanned := false
	if proto != "" {
		var f *failure
		if rb, scanned, f = scanRelayBody(proto, body); f != nil {
			return fail(f)
		}
	}
	if scanned {
		if d, call, ok := g.relayOnly(r, key, proto, rb); ok {
			// Nothing to restore or ignore: the body goes as sent. An
			// estimate that must be exact decodes it then, once.
			scan := d.req.Native
			scan.Full = sync.OnceValues(func() (*provider.Request, error) {
				g.decodes.Add(1)
				v, err := decode(body)
				if err != nil {
					return nil, err
				}
				full := v.common().req
				full.Native = nativeOf(r, proto, rb, scan.Stream, 0)
				full.Native.Required = scan.Required
				return &full, nil
			})
			v := PT(new(U))
			*v.common() = *d
			v.common().key = keyID(key)
			if call.Agent != "" {
				w.Header().Set(HeaderAgent, call.Agent)
			}
			return v, call, true
		}
	}
	g.decodes.Add(1)
	v, err := decode(body)
	if err != nil {
		refused := classify(r.Context(), err)
		if !scanned {
			return fail(refused)
		}
		if v = relayedAnyway[U, PT](g, r, key, proto, rb, refused); v == nil {
			return fail(refused)
		}
	}
	d := v.common()
	d.key = keyID(key)
	if d.req.Native == nil && scanned {
		d.req.Native = nativeOf(r, proto, rb, d.stream, 0)
	}
	added, ok, local := g.turns.restore(r.Context(), d.key, &d.req, g.opts.MaxBodyBytes-int64(len(body)))
	if local {
		w.Header().Add(HeaderDegraded, "turn-state")
	}
	if !ok {
		return fail(&failure{class: classBadRequest, msg: fmt.Sprintf("the provider state the gateway keeps for this conversation's earlier turns (thinking blocks, signatures: %d bytes) would take the %d-byte request over the gateway's limit of %d bytes (gateway.max_body_bytes): send fewer turns, or start a new conversation", added, len(body), g.opts.MaxBodyBytes)})
	}
	call, f := g.callFor(r, key, d.model, d.req)
	if f != nil {
		return fail(f)
	}
	if len(d.ignored) > 0 && g.opts.StrictParams && (call.Request.Native == nil || !g.routesNative(r.Context(), call)) {
		return fail(&failure{class: classBadRequest, param: d.ignored[0],
			msg: fmt.Sprintf("%s: not supported by this gateway, and gateway.strict_params refuses what it cannot apply", strings.Join(d.ignored, ", "))})
	}
	if all := append(slices.Clip(d.ignored), d.ignoredHeaders...); len(all) > 0 {
		// A relayed answer drops it: nothing was ignored.
		w.Header().Set(HeaderIgnored, ignoredHeader(all))
	}
	if call.Agent != "" {
		w.Header().Set(HeaderAgent, call.Agent)
	}
	return v, call, true
}

// relayedAnyway decodes a body the full decoder refused (refused) with
// [minimalDecode], when its route relays it as sent; nil otherwise.
func relayedAnyway[U any, PT interface {
	*U
	common() *decoded
}](g *Gateway, r *http.Request, key *Key, proto provider.Protocol, rb relayBody, refused *failure) PT {
	// A thread is the provider's state of one conversation, which no
	// failover carries: refused on every route (the SDKs then send the
	// whole conversation).
	if proto == "" || refused.class != classBadRequest || refused.errorCode == "thread_unsupported_request" {
		return nil
	}
	d, err := minimalDecode(proto, rb)
	if err != nil {
		return nil
	}
	d.req.Native = nativeOf(r, proto, rb, d.stream, int64(len(rb.raw)))
	d.req.Native.Required = "it holds what the gateway cannot translate (" + refused.msg + ")"
	call, f := g.callFor(r, key, d.model, d.req)
	if f != nil || !g.routesNative(r.Context(), call) {
		return nil
	}
	v := PT(new(U))
	*v.common() = *d
	return v
}

// admit is decodeCall for a call to be made: the call is also prepared
// (budgets of a task seen for the first time, the invocation id).
func admit[U any, PT interface {
	*U
	common() *decoded
}](g *Gateway, w http.ResponseWriter, r *http.Request, p protocol, id string, decode func([]byte) (PT, error)) (PT, orchestrator.Call, bool) {
	v, call, ok := decodeCall(g, w, r, p, decode)
	if !ok {
		return v, call, false
	}
	d := v.common()
	adjusted, f := g.prepare(r.Context(), &call, id, d.modelMax)
	if adjusted {
		w.Header().Set(HeaderAdjusted, "max_tokens="+strconv.Itoa(call.Request.MaxTokens))
	}
	d.req.MaxTokens = call.Request.MaxTokens
	if f == nil {
		// Once the output limit is known: the key's token rate reserves
		// the call's estimate, its prompt's bound and that limit.
		key, _ := g.authenticate(r)
		var local bool
		f, local = g.rates.admit(r.Context(), key, call.InvocationID, func() int64 {
			// No provider is chosen yet: each image counts the neutral
			// [pricing.ImageTokens].
			req := call.Request.Exact()
			n, _ := pricing.BoundRequestTokens(req, nil, nil)
			if nat := req.Native; nat != nil {
				n += nat.UnmodeledBytes
			}
			return n + int64(call.Request.MaxTokens)
		})
		if local {
			w.Header().Add(HeaderDegraded, "rate-limits")
		}
	}
	if f != nil {
		p.writeError(w, r, f)
		return nil, call, false
	}
	return v, call, true
}

// maxIgnoredNamed bounds the names listed in HeaderIgnored.
const maxIgnoredNamed = 20

// ignoredHeader lists parameter names for HeaderIgnored. The names come from
// the caller's JSON keys, so one that is not plain printable ASCII is
// quoted with escapes: a header value must never carry control bytes.
func ignoredHeader(params []string) string {
	names := make([]string, 0, min(len(params), maxIgnoredNamed)+1)
	for i, p := range params {
		if i == maxIgnoredNamed {
			names = append(names, fmt.Sprintf("(%d more)", len(params)-i))
			break
		}
		names = append(names, headerSafe(p))
	}
	return strings.Join(names, ", ")
}

func headerSafe(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ',' || c == '"' {
			return strconv.QuoteToASCII(name)
		}
	}
	if len(name) > 64 {
		return name[:64] + "..."
	}
	return name
}

// newID returns 24 random hex digits, the tail of the invocation and
// response ids.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestIDKey carries a request's id (see [requestID]) in its context.
type requestIDKey struct{}

// requestID is the id [Gateway.ServeHTTP] gave r: the tail of its
// invocation and response ids.
func requestID(r *http.Request) string {
	if id, ok := r.Context().Value(requestIDKey{}).(string); ok {
		return id
	}
	return newID()
}

// requestIDHeaders names the request in its answer, for support: as the
// request id both SDK families read (request-id: Anthropic's,
// x-request-id: OpenAI's).
func requestIDHeaders(h http.Header, id string) {
	h.Set("Request-Id", "inv_"+id)
	h.Set("X-Request-Id", "inv_"+id)
}

// idHeaders names the call in the response, for support: the invocation
// id as CortexBuild's header and as the request id both SDKs read.
func idHeaders(h http.Header, id string) {
	h.Set(HeaderInvocation, "inv_"+id)
	requestIDHeaders(h, id)
}

// servedHeaders says who served the call.
func servedHeaders(h http.Header, prov, model string) {
	if prov != "" {
		h.Set(HeaderProvider, prov)
	}
	if model != "" {
		h.Set(HeaderModel, model)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := mustJSON(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b))) // never chunked
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// clientGone reports whether the client went away (its context ended for
// another reason than the server's shutdown).
func clientGone(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrShuttingDown)
}
