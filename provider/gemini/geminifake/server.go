package geminifake

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

// Route names a group of endpoints that has its own reply queue.
type Route string

const (
	// RouteGenerate is POST /v1beta/models/{model}:generateContent and
	// :streamGenerateContent.
	RouteGenerate Route = "generateContent"
	// RouteCountTokens is POST /v1beta/models/{model}:countTokens.
	RouteCountTokens Route = "countTokens"
	// RouteModels is GET /v1beta/models and GET /v1beta/models/{model}.
	RouteModels Route = "models"
)

// DefaultSSESeparator ends every event of a streamed response.
const DefaultSSESeparator = "\r\n\r\n"

// DefaultMaxBodyBytes is the real API's request size limit (20 MB).
const DefaultMaxBodyBytes = 20 << 20

// DefaultServiceTier is reported in x-gemini-service-tier and
// usageMetadata.serviceTier unless [WithServiceTier] changes it.
const DefaultServiceTier = "standard"

// Option configures a Server.
type Option func(*config)

// sigMode says when function-call thought signatures are enforced.
type sigMode int

const (
	sigAuto   sigMode = iota // Gemini 3 and later models
	sigAlways                // every model
	sigNever                 // no model
)

type config struct {
	apiKey       string
	models       []Model
	seed         *uint64
	now          func() time.Time
	defaultReply func(Recorded) Reply
	sigMode      sigMode
	separator    string
	serviceTier  string
	maxBody      int64
}

// WithAPIKey makes the fake require key, sent as the x-goog-api-key header
// or the key query parameter. Without it any key (or none) is accepted.
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithModels replaces the model catalogue (GET /v1beta/models, and the set
// of models the generate and countTokens routes accept). Names may be given
// with or without the "models/" prefix.
func WithModels(models ...Model) Option {
	return func(c *config) {
		c.models = make([]Model, len(models))
		for i, m := range models {
			m.Name = bareModel(m.Name)
			c.models[i] = m
		}
	}
}

// WithSeed makes generated ids, signatures and server-timing values
// deterministic.
func WithSeed(seed uint64) Option { return func(c *config) { c.seed = &seed } }

// WithClock sets the clock behind the Date header of every response.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithDefaultReply sets the reply used when the generate queue is empty
// (default [Echo]).
func WithDefaultReply(f func(Recorded) Reply) Option {
	return func(c *config) { c.defaultReply = f }
}

// WithRequireThoughtSignatures enforces function-call thought signatures for
// every model. By default they are enforced only for Gemini 3 and later
// models (names starting "gemini-3", "gemini-4", …), as the real API does.
func WithRequireThoughtSignatures() Option { return func(c *config) { c.sigMode = sigAlways } }

// WithoutThoughtSignatureCheck turns the thought-signature check off for
// every model, Gemini 3 included.
func WithoutThoughtSignatureCheck() Option { return func(c *config) { c.sigMode = sigNever } }

// WithSSESeparator sets what ends each streamed event (default
// [DefaultSSESeparator], "\r\n\r\n"; the SDK also accepts "\n\n").
func WithSSESeparator(sep string) Option { return func(c *config) { c.separator = sep } }

// WithServiceTier sets the tier reported in the x-gemini-service-tier header
// and usageMetadata.serviceTier of generate responses; "" reports none, as
// older deployments of the API did.
func WithServiceTier(tier string) Option { return func(c *config) { c.serviceTier = tier } }

// WithMaxBodyBytes sets the request size above which the fake answers 400
// "Request payload size exceeds the limit" (default 20 MB).
func WithMaxBodyBytes(n int64) Option { return func(c *config) { c.maxBody = n } }

// Server is a fake of the Gemini Developer API. All methods are safe for
// concurrent use.
type Server struct {
	cfg config

	mu       sync.Mutex
	rng      *rand.Rand
	queues   map[Route][]Reply
	recorded []Recorded
	conns    map[net.Conn]http.ConnState
	changed  chan struct{} // closed and replaced on every recorded request or connection change
	issued   map[string]issuedSig
	byCallID map[string]string

	done      chan struct{}
	closeOnce sync.Once
	ts        *httptest.Server
}

// New starts a fake on a loopback address (127.0.0.1, or [::1] when there
// is no IPv4 loopback). Close it when done.
func New(opts ...Option) *Server {
	s := NewUnstarted(opts...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if l, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("geminifake: cannot listen on loopback: %v", err))
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
		models:       DefaultModels(),
		now:          time.Now,
		defaultReply: Echo,
		separator:    DefaultSSESeparator,
		serviceTier:  DefaultServiceTier,
		maxBody:      DefaultMaxBodyBytes,
	}
	for _, o := range opts {
		o(&cfg)
	}
	var src rand.Source
	if cfg.seed != nil {
		src = rand.NewPCG(*cfg.seed, *cfg.seed^0x9e3779b97f4a7c15)
	} else {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	return &Server{
		cfg:      cfg,
		rng:      rand.New(src),
		queues:   make(map[Route][]Reply),
		conns:    make(map[net.Conn]http.ConnState),
		changed:  make(chan struct{}),
		issued:   make(map[string]issuedSig),
		byCallID: make(map[string]string),
		done:     make(chan struct{}),
	}
}

// URL is the base URL of a started fake ("http://127.0.0.1:PORT"), to pass
// as genai.HTTPOptions.BaseURL; "" for an unstarted one.
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

// Enqueue appends replies for the generate route (generateContent and
// streamGenerateContent). Each call takes the next reply (FIFO); with the
// queue empty it gets the default reply. Only requests that pass
// authentication and validation take a reply. It panics on a reply that
// cannot be sent (e.g. function-call Args that are not a JSON object).
func (s *Server) Enqueue(replies ...Reply) { s.EnqueueRoute(RouteGenerate, replies...) }

// EnqueueRoute appends replies for one route. On [RouteCountTokens] and
// [RouteModels] only the fault fields and Hold matter, except that a
// countTokens success reports Usage.Prompt when it is non-zero.
func (s *Server) EnqueueRoute(route Route, replies ...Reply) {
	for i := range replies {
		if err := replies[i].validate(); err != nil {
			panic(fmt.Sprintf("geminifake: Enqueue: reply %d: %v", i, err))
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
	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	base64URL  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
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

// randBytes returns n random bytes.
func (s *Server) randBytes(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(s.rng.UintN(256))
	}
	return b
}

// randIntN returns a random int in [0, n).
func (s *Server) randIntN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(n)
}

// newResponseID returns an id shaped like the real responseId
// (23 base64url characters, e.g. "WEXbaMnpF7iPjMcP27mckQE").
func (s *Server) newResponseID() string { return s.randString(base64URL, 23) }

// newCallID returns a function-call id shaped like the real ones
// (8 lowercase alphanumerics, e.g. "bu4kjcsx").
func (s *Server) newCallID() string { return s.randString(lowerAlnum, 8) }
