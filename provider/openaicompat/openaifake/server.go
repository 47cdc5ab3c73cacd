package openaifake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"
)

// Flavor selects which server the fake imitates.
type Flavor int

const (
	// FlavorOpenAI is api.openai.com (the default).
	FlavorOpenAI Flavor = iota
	// FlavorOllama is Ollama's OpenAI-compatible endpoint (localhost:11434/v1).
	FlavorOllama
	// FlavorVLLM is vLLM's OpenAI-compatible server (localhost:8000/v1).
	FlavorVLLM
)

// String is the flavour's name: "openai", "ollama" or "vllm".
func (f Flavor) String() string {
	switch f {
	case FlavorOpenAI:
		return "openai"
	case FlavorOllama:
		return "ollama"
	case FlavorVLLM:
		return "vllm"
	}
	return fmt.Sprintf("Flavor(%d)", int(f))
}

// Route names a group of endpoints that has its own reply queue.
type Route string

const (
	// RouteChat is POST /v1/chat/completions (streaming or not).
	RouteChat Route = "chat"
	// RouteModels is GET /v1/models (and GET /v1/models/{id} on OpenAI and
	// Ollama).
	RouteModels Route = "models"
	// RouteHealth is vLLM's GET /health and Ollama's GET / and GET
	// /api/version. OpenAI has no health route.
	RouteHealth Route = "health"
)

// ErrorStyle changes the shape of error bodies, for testing lenient
// parsers.
type ErrorStyle int

const (
	// ErrorStyleNative is each flavour's own error body (the default).
	ErrorStyleNative ErrorStyle = iota
	// ErrorStyleVLLMStringCode makes vLLM send a string "code" (e.g.
	// "context_length_exceeded") when the reply has an ErrorCode, as newer
	// vLLM builds do, instead of the integer status. Other flavours ignore
	// it.
	ErrorStyleVLLMStringCode
	// ErrorStyleVLLMLegacy makes vLLM send its older top-level error shape
	// {"object":"error","message":…,"type":…,"param":…,"code":400}. Other
	// flavours ignore it.
	ErrorStyleVLLMLegacy
	// ErrorStyleBareString makes every error body (and a mid-stream error)
	// {"error":"<message>"}, as LM Studio and some gateways send, on any
	// flavour.
	ErrorStyleBareString
)

// RateLimits configures the OpenAI flavour's x-ratelimit-* headers. Both
// limits are per minute, and the buckets refill continuously at limit per
// minute (measured on the fake's clock).
type RateLimits struct {
	Requests int // x-ratelimit-limit-requests
	Tokens   int // x-ratelimit-limit-tokens
}

// DefaultRateLimits are the limits reported unless [WithRateLimits] changes
// them. One request of 5000 per minute takes 12ms to refill, so a single
// call reports x-ratelimit-reset-requests: 12ms.
var DefaultRateLimits = RateLimits{Requests: 5000, Tokens: 2_000_000}

// Option configures a Server.
type Option func(*config)

type config struct {
	flavor          Flavor
	apiKey          string
	limits          RateLimits
	models          []Model
	modelsSet       bool
	seed            *uint64
	now             func() time.Time
	defaultReply    func(Recorded) Reply
	errorStyle      ErrorStyle
	noDone          bool
	modelCheck      bool
	overflowError   bool
	promptDetails   bool
	ollamaVersion   string
	ollamaDefaultNC int
}

// WithFlavor selects the server to imitate (default [FlavorOpenAI]).
func WithFlavor(f Flavor) Option { return func(c *config) { c.flavor = f } }

// WithAPIKey makes the fake check Authorization: Bearer <key>. OpenAI
// answers a wrong or missing key with 401 invalid_api_key; vLLM with 401
// {"error":"Unauthorized"} (on /v1 routes only); Ollama ignores keys
// entirely. Without it any credential (or none) is accepted.
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithRateLimits sets the limits of the OpenAI flavour's x-ratelimit-*
// headers. Zero fields keep their defaults. Other flavours send no
// rate-limit headers.
func WithRateLimits(l RateLimits) Option {
	return func(c *config) {
		c.limits = RateLimits{
			Requests: cmpOr(l.Requests, DefaultRateLimits.Requests),
			Tokens:   cmpOr(l.Tokens, DefaultRateLimits.Tokens),
		}
	}
}

// WithModels replaces the flavour's model catalogue (GET /v1/models, the
// context windows used for overflow, OpenAI's dated snapshot names).
func WithModels(models ...Model) Option {
	return func(c *config) { c.models, c.modelsSet = slices.Clone(models), true }
}

// WithSeed makes generated ids, obfuscation padding and
// openai-processing-ms deterministic.
func WithSeed(seed uint64) Option { return func(c *config) { c.seed = &seed } }

// WithClock sets the clock used for "created" timestamps and the
// rate-limit buckets. It is called from handler goroutines, so it must be
// safe for concurrent use.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithDefaultReply sets the reply used when the chat queue is empty
// (default [Echo]).
func WithDefaultReply(f func(Recorded) Reply) Option {
	return func(c *config) { c.defaultReply = f }
}

// WithErrorStyle changes the shape of error bodies (see [ErrorStyle]).
func WithErrorStyle(s ErrorStyle) Option { return func(c *config) { c.errorStyle = s } }

// WithoutDone ends every stream at EOF without the final "data: [DONE]",
// as some gateways do. The finish_reason chunk (and the usage chunk, when
// asked for) are still sent.
func WithoutDone() Option { return func(c *config) { c.noDone = true } }

// WithModelCheck makes the fake answer a model missing from its catalogue
// with the flavour's 404 ([ModelNotFound], [OllamaModelNotFound],
// [VLLMModelNotFound]), as the real servers do. Off by default so that
// tests may use any model name.
func WithModelCheck() Option { return func(c *config) { c.modelCheck = true } }

// WithOverflowError makes the Ollama flavour answer a prompt larger than
// the model's context window with a 400 ("the input length exceeds the
// context length", as some 2026 builds do) instead of truncating it
// silently. Other flavours always answer overflow with a 400.
func WithOverflowError() Option { return func(c *config) { c.overflowError = true } }

// WithPromptTokensDetails makes the vLLM flavour report
// usage.prompt_tokens_details.cached_tokens when Usage.Cached > 0, like
// vLLM started with --enable-prompt-tokens-details. Without it vLLM never
// reports cached tokens. (OpenAI always reports them; Ollama never does.)
func WithPromptTokensDetails() Option { return func(c *config) { c.promptDetails = true } }

// WithOllamaVersion sets the version GET /api/version reports (default
// [DefaultOllamaVersion]).
func WithOllamaVersion(v string) Option { return func(c *config) { c.ollamaVersion = v } }

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Server is a fake OpenAI-compatible Chat Completions server. All methods
// are safe for concurrent use.
type Server struct {
	cfg config

	mu       sync.Mutex
	rng      *rand.Rand
	queues   map[Route][]Reply
	recorded []Recorded
	conns    map[net.Conn]http.ConnState
	changed  chan struct{} // closed and replaced on every recorded request or connection change
	buckets  buckets

	done      chan struct{}
	closeOnce sync.Once
	ts        *httptest.Server
}

// New starts a fake on a loopback address (127.0.0.1, or [::1] when there
// is no IPv4 loopback). Close it when done. Point the SDK at URL()+"/v1/".
func New(opts ...Option) *Server {
	s := NewUnstarted(opts...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if l, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("openaifake: cannot listen on loopback: %v", err))
		}
	}
	ts := httptest.NewUnstartedServer(s)
	ts.Listener.Close()
	ts.Listener = l
	ts.Config.ConnState = s.ConnState
	ts.Start()
	s.ts = ts
	return s
}

// NewUnstarted returns a fake that does not listen: serve [Server.Handler]
// on any listener, and set [Server.ConnState] as the http.Server's
// ConnState hook to get [Server.OpenConns].
func NewUnstarted(opts ...Option) *Server {
	cfg := config{
		limits:          DefaultRateLimits,
		now:             time.Now,
		defaultReply:    Echo,
		ollamaVersion:   DefaultOllamaVersion,
		ollamaDefaultNC: DefaultOllamaContext,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.modelsSet {
		cfg.models = DefaultModels(cfg.flavor)
	}
	var src rand.Source
	if cfg.seed != nil {
		src = rand.NewPCG(*cfg.seed, *cfg.seed^0x9e3779b97f4a7c15)
	} else {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	return &Server{
		cfg:     cfg,
		rng:     rand.New(src),
		queues:  make(map[Route][]Reply),
		conns:   make(map[net.Conn]http.ConnState),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Flavor is the server the fake imitates.
func (s *Server) Flavor() Flavor { return s.cfg.flavor }

// URL is the base URL of a started fake ("http://127.0.0.1:PORT", without
// "/v1"); "" for an unstarted one.
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Client is an *http.Client configured for the started fake (nil for an
// unstarted one).
func (s *Server) Client() *http.Client {
	if s.ts == nil {
		return nil
	}
	return s.ts.Client()
}

// Handler serves the fake API. It is the Server itself.
func (s *Server) Handler() http.Handler { return s }

// Close releases every held reply, stops a started fake and waits for its
// handlers to return. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	if s.ts != nil {
		s.ts.Close()
	}
}

// Enqueue appends replies for POST /v1/chat/completions. Each call takes
// the next reply (FIFO); with the queue empty it gets the default reply.
// Only requests that pass routing, authentication, validation, the model
// check and the context-window check take a reply. It panics on a reply
// that cannot be sent (e.g. a tool call without a name).
func (s *Server) Enqueue(replies ...Reply) { s.EnqueueRoute(RouteChat, replies...) }

// EnqueueRoute appends replies for one route. On [RouteModels] and
// [RouteHealth] only the fault fields (Status, error fields, Headers,
// RawBody, CutAfterBytes) and Hold matter.
func (s *Server) EnqueueRoute(route Route, replies ...Reply) {
	for i := range replies {
		if err := replies[i].validate(); err != nil {
			panic(fmt.Sprintf("openaifake: Enqueue: reply %d: %v", i, err))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[route] = append(s.queues[route], replies...)
}

// Pending is how many scripted replies of route are still queued.
func (s *Server) Pending(route Route) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues[route])
}

// Requests returns a copy of every request received so far, in arrival
// order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.recorded))
	for i, r := range s.recorded {
		r.Header = r.Header.Clone()
		r.Body = slices.Clone(r.Body)
		out[i] = r
	}
	return out
}

// WaitRequests blocks until at least n requests have been received (as
// [Server.Requests] counts them) or ctx is done. It does not poll.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return len(s.recorded) >= n })
}

// OpenConns is the number of TCP connections currently open to the fake
// (tracked through [Server.ConnState]).
func (s *Server) OpenConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// WaitOpenConns blocks until exactly n connections are open or ctx is
// done. The server notices a client-side close asynchronously; this waits
// for it without polling.
func (s *Server) WaitOpenConns(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return len(s.conns) == n })
}

// ActiveConns is the number of open connections that are serving a request
// (not idle in a client's keep-alive pool).
func (s *Server) ActiveConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activeLocked()
}

func (s *Server) activeLocked() int {
	n := 0
	for _, st := range s.conns {
		if st != http.StateIdle {
			n++
		}
	}
	return n
}

// WaitActiveConns blocks until exactly n connections are serving a request
// or ctx is done: a client that stopped reading a stream must close its
// connection, and one that finished must return it to its pool idle.
func (s *Server) WaitActiveConns(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return s.activeLocked() == n })
}

// ConnState is an http.Server ConnState hook counting open connections.
// [New] installs it; set it yourself when serving [Server.Handler].
func (s *Server) ConnState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	default:
		s.conns[c] = state
	}
	s.notifyLocked()
}

// waitFor waits until cond (called with s.mu held) holds.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// next pops the next reply of route; ok is false when the queue is empty.
func (s *Server) next(route Route) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[route]
	if len(q) == 0 {
		return Reply{}, false
	}
	r := q[0]
	s.queues[route] = q[1:]
	return r, true
}

// record stores an arrived request.
func (s *Server) record(r Recorded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recorded = append(s.recorded, r)
	s.notifyLocked()
}

const (
	base62   = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	hexChars = "0123456789abcdef"
	lowerAN  = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// randString returns n random characters of alphabet.
func (s *Server) randString(alphabet string, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[s.rng.IntN(len(alphabet))]
	}
	return string(b)
}

// randIntN returns a random int in [0, n).
func (s *Server) randIntN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(n)
}
