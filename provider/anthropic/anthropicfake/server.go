package anthropicfake

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Route names a group of endpoints that has its own reply queue, filled by
// [Server.EnqueueRoute] (and [Server.Enqueue] for [RouteMessages]). On
// [RouteCountTokens] and [RouteModels] only the fault fields and Hold of a
// reply matter, except that a count_tokens success reports Usage.Input
// when it is non-zero.
type Route string

const (
	// RouteMessages is POST /v1/messages (streaming or not).
	RouteMessages Route = "messages"
	// RouteCountTokens is POST /v1/messages/count_tokens.
	RouteCountTokens Route = "count_tokens"
	// RouteModels is GET /v1/models and GET /v1/models/{id}.
	RouteModels Route = "models"
)

const (
	// DefaultOrganizationID is the anthropic-organization-id the fake
	// sends unless [WithOrganizationID] changes it.
	DefaultOrganizationID = "5f0c7a2e-1b3d-4c8e-9a6f-0d2e4b6c8a1f"
	// DefaultMaxBodyBytes is the real API's request size limit on
	// Messages.
	DefaultMaxBodyBytes = 32 << 20
)

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
	fields       map[string]bool // top-level request fields accepted beyond the API's
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

// WithAcceptedFields makes POST /v1/messages accept these top-level body
// fields beyond those the API defines (see [KnownFields]), as an API that
// has since added them would. Any other unknown field is a 400 "<field>:
// Extra inputs are not permitted", as the real API answers.
func WithAcceptedFields(names ...string) Option {
	return func(c *config) {
		if c.fields == nil {
			c.fields = map[string]bool{}
		}
		for _, n := range names {
			c.fields[n] = true
		}
	}
}

// WithMaxBodyBytes sets the request size above which the fake answers 413
// request_too_large (default 32 MB, the real limit on Messages).
func WithMaxBodyBytes(n int64) Option { return func(c *config) { c.maxBody = n } }

// Server is a fake of the Anthropic API. All methods are safe for
// concurrent use. Its URL is the base URL to pass to option.WithBaseURL.
//
// URL, Client, Close, EnqueueRoute, Pending, Requests, WaitRequests,
// OpenConns, WaitOpenConns, ActiveConns, WaitActiveConns and ConnState
// come from the shared [fakekit.Public].
type Server struct {
	public // see the type comment
	kit    *fakekit.Core[Route, Reply, Recorded]
	cfg    config
	rnd    *fakekit.Rand // request, message and tool-use ids; stream padding

	mu   sync.Mutex // guards used and sent
	used struct{ requests, input, output int }
	sent map[string][]byte // response bytes written, by request id

	cache promptCache
}

// New starts an Anthropic API fake on a loopback address (127.0.0.1, or
// [::1] when there is no IPv4 loopback). Close it when done.
func New(opts ...Option) *Server {
	s := NewUnstarted(opts...)
	s.kit.Start(s)
	return s
}

// NewUnstarted returns an Anthropic API fake that does not listen: serve
// [Server.Handler] on any listener, and set [Server.ConnState] as the
// http.Server's ConnState hook to get [Server.OpenConns].
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
	kit := fakekit.New[Route](kitSpec)
	return &Server{
		public: fakekit.PublicOf(kit),
		kit:    kit,
		cfg:    cfg,
		rnd:    fakekit.NewRand(cfg.seed),
		sent:   map[string][]byte{},
	}
}

// Sent returns the response body bytes the fake has written so far for
// the request answered with request-id requestID ([Recorded.RequestID]),
// exactly as written (stream padding and a cut included); nil for an
// unknown id. Bytes are recorded before they go to the client, so once a
// client has read them they are here.
func (s *Server) Sent(requestID string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.sent[requestID])
}

// ForgetRequests drops the requests recorded so far and the bytes sent
// for them (see [Server.Sent]), so that a long run does not grow the heap.
func (s *Server) ForgetRequests() {
	s.kit.ForgetRequests()
	s.mu.Lock()
	s.sent = map[string][]byte{}
	s.mu.Unlock()
}

// Handler serves the fake API. It is the Server itself.
func (s *Server) Handler() http.Handler { return s }

// Enqueue appends replies for POST /v1/messages. Each call takes the next
// reply (FIFO); with the queue empty it gets the default reply. Only
// requests that pass authentication and validation take a reply. It panics
// on a reply that cannot be sent (e.g. a tool Input that is not an object).
func (s *Server) Enqueue(replies ...Reply) { s.kit.EnqueueRoute(RouteMessages, replies...) }

// EnqueueRoute appends replies for route (RouteCountTokens, RouteModels):
// see the package doc for what of a reply they use.
func (s *Server) EnqueueRoute(route Route, replies ...Reply) { s.kit.EnqueueRoute(route, replies...) }

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by n random base62 characters, the shape
// of the real ids (req_011C…, msg_01…, toolu_01…).
func (s *Server) newID(prefix string, n int) string {
	return prefix + s.rnd.String(base62, n)
}

// padding returns the number of spaces to insert into the next event.
func (s *Server) padding() int {
	if !s.cfg.padding {
		return 0
	}
	return s.rnd.IntN(16)
}

// record stores an arrived request and counts it against the request
// rate limit.
func (s *Server) record(r Recorded) {
	s.mu.Lock()
	s.used.requests++
	s.mu.Unlock()
	s.kit.Record(r)
}

// consume counts a served message against the token rate limits. Cache
// reads do not count toward input tokens, as with the real limits.
func (s *Server) consume(u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used.input += u.Input + u.CacheCreation5m + u.CacheCreation1h
	s.used.output += u.Output
}

// public is embedded in [Server] to promote the exported methods of
// [fakekit.Public] without exporting a field.
type public = fakekit.Public[Route, Reply, Recorded]

// kitSpec tells the shared machinery how to name, validate and copy.
var kitSpec = fakekit.Spec[Reply, Recorded]{
	Name: "anthropicfake", Validate: (*Reply).validate, Clone: Recorded.clone,
}
