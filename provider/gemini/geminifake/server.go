package geminifake

import (
	"net/http"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// Route names a group of endpoints that has its own reply queue, filled by
// [Server.EnqueueRoute] (and [Server.Enqueue] for [RouteGenerate]). On
// [RouteCountTokens] and [RouteModels] only the fault fields and Hold of a
// reply matter, except that a countTokens success reports Usage.Prompt
// when it is non-zero.
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
// concurrent use. Its URL is the base URL to pass as
// genai.HTTPOptions.BaseURL.
//
// URL, Client, Close, EnqueueRoute, Pending, Requests, WaitRequests,
// OpenConns, WaitOpenConns, ActiveConns, WaitActiveConns and ConnState
// come from the shared [fakekit.Public].
type Server struct {
	public // see the type comment
	kit    *fakekit.Core[Route, Reply, Recorded]
	cfg    config
	rnd    *fakekit.Rand // response and call ids, signatures, server-timing

	mu       sync.Mutex // guards issued and byCallID
	issued   map[string]issuedSig
	byCallID map[string]string
}

// New starts a Gemini Developer API fake on a loopback address
// (127.0.0.1, or [::1] when there is no IPv4 loopback). Close it when
// done.
func New(opts ...Option) *Server {
	s := NewUnstarted(opts...)
	s.kit.Start(s)
	return s
}

// NewUnstarted returns a Gemini Developer API fake that does not listen:
// serve [Server.Handler] on any listener, and set [Server.ConnState] as
// the http.Server's ConnState hook to get [Server.OpenConns].
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
	kit := fakekit.New[Route](kitSpec)
	return &Server{
		public:   fakekit.PublicOf(kit),
		kit:      kit,
		cfg:      cfg,
		rnd:      fakekit.NewRand(cfg.seed),
		issued:   make(map[string]issuedSig),
		byCallID: make(map[string]string),
	}
}

// Handler serves the fake API. It is the Server itself.
func (s *Server) Handler() http.Handler { return s }

// Enqueue appends replies for the generate route (generateContent and
// streamGenerateContent). Each call takes the next reply (FIFO); with the
// queue empty it gets the default reply. Only requests that pass
// authentication and validation take a reply. It panics on a reply that
// cannot be sent (e.g. function-call Args that are not a JSON object).
func (s *Server) Enqueue(replies ...Reply) { s.kit.EnqueueRoute(RouteGenerate, replies...) }

const (
	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	base64URL  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

// newResponseID returns an id shaped like the real responseId
// (23 base64url characters, e.g. "WEXbaMnpF7iPjMcP27mckQE").
func (s *Server) newResponseID() string { return s.rnd.String(base64URL, 23) }

// newCallID returns a function-call id shaped like the real ones
// (8 lowercase alphanumerics, e.g. "bu4kjcsx").
func (s *Server) newCallID() string { return s.rnd.String(lowerAlnum, 8) }

// public is embedded in [Server] to promote the exported methods of
// [fakekit.Public] without exporting a field.
type public = fakekit.Public[Route, Reply, Recorded]

// kitSpec tells the shared machinery how to name, validate and copy.
var kitSpec = fakekit.Spec[Reply, Recorded]{
	Name: "geminifake", Validate: (*Reply).validate, Clone: Recorded.clone,
}
