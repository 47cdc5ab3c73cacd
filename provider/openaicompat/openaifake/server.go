package openaifake

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
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

// Route names a group of endpoints that has its own reply queue, filled by
// [Server.EnqueueRoute] (and [Server.Enqueue] for [RouteChat]). On
// [RouteModels] and [RouteHealth] only the fault fields of a reply
// (Status, error fields, Headers, RawBody, CutAfterBytes) and Hold matter.
type Route string

const (
	// RouteChat is POST /v1/chat/completions (streaming or not).
	RouteChat Route = "chat"
	// RouteResponses is POST /v1/responses (streaming or not), on the
	// OpenAI flavour only: Ollama and vLLM answer it as an unknown route.
	RouteResponses Route = "responses"
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
	accepted        map[string]bool
}

// WithAcceptedFields makes the Responses endpoint accept top-level fields
// it does not know (a newer API's, which the real API takes); every other
// unknown field is still refused as the real API refuses it.
func WithAcceptedFields(names ...string) Option {
	return func(c *config) {
		if c.accepted == nil {
			c.accepted = map[string]bool{}
		}
		for _, n := range names {
			c.accepted[n] = true
		}
	}
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

// WithDefaultReply sets the reply used when the chat or responses queue
// is empty (default [Echo]).
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
// are safe for concurrent use. Its URL is the base URL without "/v1":
// point the SDK at URL()+"/v1/".
//
// URL, Client, Close, EnqueueRoute, Pending, Requests, WaitRequests,
// OpenConns, WaitOpenConns, ActiveConns, WaitActiveConns and ConnState
// come from the shared [fakekit.Public].
type Server struct {
	public // see the type comment
	kit    *fakekit.Core[Route, Reply, Recorded]
	cfg    config
	rnd    *fakekit.Rand // ids, obfuscation padding, processing times

	mu      sync.Mutex // guards buckets
	buckets buckets

	rmu    sync.Mutex            // guards issued and fcCall
	issued map[string]issuedCall // call_id -> the items of the Responses answer that made the call
	fcCall map[string]string     // function call item id (fc_…) -> its call_id
}

// New starts a fake of the selected flavour on a loopback address
// (127.0.0.1, or [::1] when there is no IPv4 loopback). Close it when
// done. Point the SDK at URL()+"/v1/".
func New(opts ...Option) *Server {
	s := NewUnstarted(opts...)
	s.kit.Start(s)
	return s
}

// NewUnstarted returns a fake of the selected flavour that does not
// listen: serve [Server.Handler] on any listener, and set
// [Server.ConnState] as the http.Server's ConnState hook to get
// [Server.OpenConns].
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
	kit := fakekit.New[Route](kitSpec)
	return &Server{
		public: fakekit.PublicOf(kit),
		kit:    kit,
		cfg:    cfg,
		rnd:    fakekit.NewRand(cfg.seed),
		issued: map[string]issuedCall{},
		fcCall: map[string]string{},
	}
}

// Flavor is the server the fake imitates.
func (s *Server) Flavor() Flavor { return s.cfg.flavor }

// Handler serves the fake API. It is the Server itself.
func (s *Server) Handler() http.Handler { return s }

// Enqueue appends replies for POST /v1/chat/completions. Each call takes
// the next reply (FIFO); with the queue empty it gets the default reply.
// Only requests that pass routing, authentication, validation, the model
// check and the context-window check take a reply. It panics on a reply
// that cannot be sent (e.g. a tool call without a name).
func (s *Server) Enqueue(replies ...Reply) { s.kit.EnqueueRoute(RouteChat, replies...) }

// EnqueueResponses appends replies for POST /v1/responses, as [Server.Enqueue]
// does for Chat Completions. It panics on a reply that cannot be sent.
func (s *Server) EnqueueResponses(replies ...Reply) {
	s.kit.EnqueueRoute(RouteResponses, replies...)
}

const (
	base62   = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	hexChars = "0123456789abcdef"
	lowerAN  = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// public is embedded in [Server] to promote the exported methods of
// [fakekit.Public] without exporting a field.
type public = fakekit.Public[Route, Reply, Recorded]

// kitSpec tells the shared machinery how to name, validate and copy.
var kitSpec = fakekit.Spec[Reply, Recorded]{
	Name: "openaifake", Validate: (*Reply).validate, Clone: Recorded.clone,
}
