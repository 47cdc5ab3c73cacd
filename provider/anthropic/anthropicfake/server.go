package anthropicfake

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
	// RouteMessages is POST /v1/messages (streaming or not).
	RouteMessages Route = "messages"
	// RouteCountTokens is POST /v1/messages/count_tokens.
	RouteCountTokens Route = "count_tokens"
	// RouteModels is GET /v1/models and GET /v1/models/{id}.
	RouteModels Route = "models"
)

// DefaultOrganizationID is the anthropic-organization-id the fake sends
// unless [WithOrganizationID] changes it.
const DefaultOrganizationID = "5f0c7a2e-1b3d-4c8e-9a6f-0d2e4b6c8a1f"

// DefaultMaxBodyBytes is the real API's request size limit on Messages.
const DefaultMaxBodyBytes = 32 << 20

// RateLimits configures the anthropic-ratelimit-* headers.
type RateLimits struct {
	Requests     int // anthropic-ratelimit-requests-limit
	Tokens       int // anthropic-ratelimit-tokens-limit
	InputTokens  int // anthropic-ratelimit-input-tokens-limit
	OutputTokens int // anthropic-ratelimit-output-tokens-limit
	// ResetAfter is how far after "now" every *-reset timestamp lies.
	ResetAfter time.Duration
}

// DefaultRateLimits are the limits of the recorded cassettes.
var DefaultRateLimits = RateLimits{
	Requests: 4000, Tokens: 280_000, InputTokens: 200_000, OutputTokens: 80_000,
	ResetAfter: time.Minute,
}

// Option configures a Server.
type Option func(*config)

type config struct {
	apiKey       string
	orgID        string
	limits       RateLimits
	models       []Model
	seed         *uint64
	now          func() time.Time
	padding      bool
	defaultReply func(Recorded) Reply
	maxBody      int64
}

// WithAPIKey makes the fake require key, sent as x-api-key or as
// Authorization: Bearer. Without it any credential (or none) is accepted.
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithOrganizationID sets the anthropic-organization-id header.
func WithOrganizationID(id string) Option { return func(c *config) { c.orgID = id } }

// WithRateLimits sets the limits reported in the anthropic-ratelimit-*
// headers. Zero fields keep their defaults.
func WithRateLimits(l RateLimits) Option {
	return func(c *config) {
		d := DefaultRateLimits
		c.limits = RateLimits{
			Requests:     cmpOr(l.Requests, d.Requests),
			Tokens:       cmpOr(l.Tokens, d.Tokens),
			InputTokens:  cmpOr(l.InputTokens, d.InputTokens),
			OutputTokens: cmpOr(l.OutputTokens, d.OutputTokens),
			ResetAfter:   cmpOr(l.ResetAfter, d.ResetAfter),
		}
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// WithModels replaces the model catalogue of GET /v1/models.
func WithModels(models ...Model) Option {
	return func(c *config) { c.models = slices.Clone(models) }
}

// WithSeed makes generated ids and stream padding deterministic.
func WithSeed(seed uint64) Option { return func(c *config) { c.seed = &seed } }

// WithClock sets the clock used for the rate-limit reset timestamps.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithoutPadding turns off the whitespace the real API inserts before the
// closing brace of most stream events' JSON (ping never has it).
func WithoutPadding() Option { return func(c *config) { c.padding = false } }

// WithDefaultReply sets the reply used when the messages queue is empty
// (default [Echo]).
func WithDefaultReply(f func(Recorded) Reply) Option {
	return func(c *config) { c.defaultReply = f }
}

// WithMaxBodyBytes sets the request size above which the fake answers 413
// request_too_large (default 32 MB, the real limit on Messages).
func WithMaxBodyBytes(n int64) Option { return func(c *config) { c.maxBody = n } }

// Server is a fake of the Anthropic API. All methods are safe for
// concurrent use.
type Server struct {
	cfg config

	mu       sync.Mutex
	rng      *rand.Rand
	queues   map[Route][]Reply
	recorded []Recorded
	conns    map[net.Conn]http.ConnState
	changed  chan struct{} // closed and replaced on every recorded request or connection change
	used     struct{ requests, input, output int }

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
			panic(fmt.Sprintf("anthropicfake: cannot listen on loopback: %v", err))
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
		orgID:        DefaultOrganizationID,
		limits:       DefaultRateLimits,
		models:       DefaultModels(),
		now:          time.Now,
		padding:      true,
		defaultReply: Echo,
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
		cfg:     cfg,
		rng:     rand.New(src),
		queues:  make(map[Route][]Reply),
		conns:   make(map[net.Conn]http.ConnState),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// URL is the base URL of a started fake ("http://127.0.0.1:PORT"), to pass
// to option.WithBaseURL; "" for an unstarted one.
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

// Enqueue appends replies for POST /v1/messages. Each call takes the next
// reply (FIFO); with the queue empty it gets the default reply. Only
// requests that pass authentication and validation take a reply. It panics
// on a reply that cannot be sent (e.g. a tool Input that is not an object).
func (s *Server) Enqueue(replies ...Reply) { s.EnqueueRoute(RouteMessages, replies...) }

// EnqueueRoute appends replies for one route. On [RouteCountTokens] and
// [RouteModels] only the fault fields and Hold matter, except that a
// count_tokens success reports Usage.Input when it is non-zero.
func (s *Server) EnqueueRoute(route Route, replies ...Reply) {
	for i := range replies {
		if err := replies[i].validate(); err != nil {
			panic(fmt.Sprintf("anthropicfake: Enqueue: reply %d: %v", i, err))
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

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by n random base62 characters, the shape
// of the real ids (req_011C…, msg_01…, toolu_01…).
func (s *Server) newID(prefix string, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = base62[s.rng.IntN(len(base62))]
	}
	return prefix + string(b)
}

// padding returns the number of spaces to insert into the next event.
func (s *Server) padding() int {
	if !s.cfg.padding {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(16)
}

// record stores an arrived request and counts it against the request
// rate limit.
func (s *Server) record(r Recorded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recorded = append(s.recorded, r)
	s.used.requests++
	s.notifyLocked()
}

// consume counts a served message against the token rate limits. Cache
// reads do not count toward input tokens, as with the real limits.
func (s *Server) consume(u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used.input += u.Input + u.CacheCreation5m + u.CacheCreation1h
	s.used.output += u.Output
}
