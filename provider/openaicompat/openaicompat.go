package openaicompat

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Type is the adapter type name used in llm-config.yaml.
const Type = "openai_compatible"

// baseCapabilities are the spec's for this adapter: code execution (through
// tool use), tool use, streaming; and seed, which every compatible server
// takes.
var baseCapabilities = provider.NewCapabilitySet(provider.CapCodeExecution, provider.CapToolUse, provider.CapStreaming, provider.CapSeed)

// Registration describes the adapter type for the registry.
func Registration() provider.Registration {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = p.Name
	}
	models := map[provider.Tier]string{}
	for t, m := range OpenAI.DefaultModels {
		models[t] = m
	}
	return provider.Registration{
		Type:           Type,
		Description:    "OpenAI Chat Completions and compatible servers (Ollama, vLLM, LM Studio, gateways) by base URL",
		DefaultBaseURL: OpenAI.DefaultBaseURL,
		Profiles:       names,
		Credentials: []provider.CredentialField{{
			Name: "api_key", EnvVars: []string{"OPENAI_API_KEY"}, EnvProfiles: []string{OpenAI.Name}, Secret: true, RequiredProfiles: []string{OpenAI.Name},
			Description: "API key (required for the openai profile; the environment is read for it only at api.openai.com, other servers get a key only from credentials:)",
		}},
		DefaultModels: models,
		Capabilities:  baseCapabilities.Union(provider.NewCapabilitySet(provider.CapPromptCaching, provider.CapVision, provider.CapLongContext200K, provider.CapLongContext1M)),
		New:           func(s provider.Settings) (provider.Adapter, error) { return New(s) },
	}
}

// Adapter talks to one OpenAI-compatible endpoint. Build it with [New].
type Adapter struct {
	base    adapterkit.Base
	profile Profile
	baseURL string
	client  openai.Client
	limits  adapterkit.Limits
	// hc and sendKey send relayed requests ([provider.Native]), which
	// bypass the SDK so that their bytes go and come back unchanged.
	hc      *http.Client
	sendKey string
}

var (
	_ provider.Adapter       = (*Adapter)(nil)
	_ provider.ModelCapabler = (*Adapter)(nil)
	_ provider.TierMapper    = (*Adapter)(nil)
	_ provider.Endpointer    = (*Adapter)(nil)
)

// sdkHeaders are the request headers the SDK may send; anything else (an
// organisation or project id, OPENAI_CUSTOM_HEADERS from the environment)
// is stripped so nothing reaches a server unless the configuration put it
// there.
var sdkHeaders = map[string]bool{"Authorization": true, "Content-Type": true, "Accept": true, "User-Agent": true, "Content-Length": true, "Idempotency-Key": true}

func stripAmbientHeaders(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	for k := range req.Header {
		if !sdkHeaders[k] && !strings.HasPrefix(k, "X-Stainless-") {
			req.Header.Del(k)
		}
	}
	return next(req)
}

// New builds an adapter from settings. Settings.Profile picks the server
// profile ("" for an unknown server); the api_key credential is required for
// the openai profile only.
func New(s provider.Settings) (*Adapter, error) {
	p, ok := ProfileNamed(s.Profile)
	if !ok {
		return nil, fmt.Errorf("openai_compatible: unknown profile %q", s.Profile)
	}
	base := s.BaseURL
	if base == "" {
		base = p.DefaultBaseURL
	}
	if base == "" {
		return nil, fmt.Errorf("openai_compatible: provider %q (profile %q) needs a base_url", s.Name, p.Name)
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	key := s.Credentials["api_key"]
	if key == "" && p.KeyRequired {
		return nil, fmt.Errorf("openai_compatible: provider %q (profile %q) has no api_key", s.Name, p.Name)
	}
	sendKey := key
	if sendKey == "" {
		sendKey = "unused" // local servers ignore it, but clients must send one
	}
	b := adapterkit.NewBase(s, Type, p.DefaultModels, key)
	hc := b.HTTPClient(s.HTTPClient)
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(sendKey),
		option.WithMaxRetries(0),
		option.WithMiddleware(stripAmbientHeaders),
		option.WithHTTPClient(hc),
	}
	return &Adapter{base: b, profile: p, baseURL: base, client: openai.NewClient(opts...), hc: hc, sendKey: sendKey}, nil
}

// BaseURL returns the endpoint the adapter talks to.
func (a *Adapter) BaseURL() string { return a.baseURL }

var _ provider.ImageURLFetcher = (*Adapter)(nil)

// FetchesImageURLs reports whether the provider fetches the image URLs sent
// to this adapter (an image_url part with an http(s) URL) on its side: only
// the openai profile at OpenAI's own endpoint. Ollama, vLLM, LM Studio, a
// gateway or any other server may fetch them from this machine's network.
func (a *Adapter) FetchesImageURLs() bool {
	return a.profile.Name == OpenAI.Name && provider.SameEndpoint(a.baseURL, OpenAI.DefaultBaseURL)
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.base.Name }

// Profile returns the server profile in use.
func (a *Adapter) Profile() Profile { return a.profile }

// ModelFor returns the model configured for tier t ("" when none is).
func (a *Adapter) ModelFor(t provider.Tier) string { return a.base.ModelFor(t) }

// Capabilities returns what the configured models can do together.
func (a *Adapter) Capabilities() provider.CapabilitySet {
	s := a.capabilities()
	for _, m := range a.base.Models {
		s = s.Union(a.ModelCapabilities(m))
	}
	return s
}

func (a *Adapter) capabilities() provider.CapabilitySet {
	s := baseCapabilities.Union(a.base.Extra)
	if a.profile.PromptCaching {
		s = s.With(provider.CapPromptCaching)
	}
	if a.profile.TopK {
		s = s.With(provider.CapTopK)
	}
	if a.profile.StructuredOutput {
		s = s.With(provider.CapStructuredOutput)
	}
	return s
}

// ModelCapabilities returns what model can do: the spec's set, prompt
// caching and top_k where the server has them, temperature and top_p
// unless it is a reasoning model that refuses them (and takes a reasoning
// effort instead), long context and vision
// from the price catalog, and whatever the configuration declares for this
// endpoint.
func (a *Adapter) ModelCapabilities(model string) provider.CapabilitySet {
	ns, id := a.profile.priceRef(a.baseURL, model)
	s := a.base.ModelCapabilities(a.capabilities(), ns, id)
	if !a.profile.ReasoningModels || !reasoningModel(model) {
		s = s.With(provider.CapSampling)
	} else {
		s = s.With(provider.CapReasoning)
	}
	return s
}

// MaxTokens returns the output limit req is sent with: its max tokens
// clamped to the model's max_output_tokens in the catalog (unclamped for a
// model the catalog does not list, such as a local server's).
func (a *Adapter) MaxTokens(req *provider.Request) int {
	ns, id := a.profile.priceRef(a.baseURL, a.base.Model(req))
	return a.base.MaxTokens(ns, id, req)
}

// EstimateCost returns an upper bound of the cost of req; local servers
// cost zero.
func (a *Adapter) EstimateCost(req *provider.Request) (provider.Money, error) {
	ns, id := a.profile.priceRef(a.baseURL, a.base.Model(req))
	return a.base.Estimate(ns, id, req, Images(ns, id))
}

// cost prices u by the model the answer named, else by the model requested
// (see [adapterkit.Base.Price]); false when the catalog lists neither.
func (a *Adapter) cost(answered, requested string, u provider.Usage) (provider.Money, bool) {
	ans, req := adapterkit.PriceRef{}, adapterkit.PriceRef{}
	ans.NS, ans.Model = a.profile.priceRef(a.baseURL, answered)
	req.NS, req.Model = a.profile.priceRef(a.baseURL, requested)
	return a.base.Price(u, ans, req)
}

// RateLimitStatus returns the x-ratelimit-* figures of the latest response
// (servers that send none report nothing).
func (a *Adapter) RateLimitStatus(context.Context) provider.RateLimitStatus { return a.limits.Status() }

func (a *Adapter) observe(h http.Header, retryAfter time.Duration) {
	if h == nil {
		return
	}
	now := a.base.Now()
	s := provider.RateLimitStatus{ObservedAt: now, RetryAfter: retryAfter}
	num := func(k string) *int64 {
		v, err := strconv.ParseInt(h.Get(k), 10, 64)
		if err != nil || v < 0 {
			return nil // absent, or Azure's -1
		}
		return &v
	}
	s.RequestsRemaining = num("x-ratelimit-remaining-requests")
	s.TokensRemaining = num("x-ratelimit-remaining-tokens")
	for _, k := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
		if d, ok := parseResetDuration(h.Get(k)); ok {
			if t := now.Add(d); t.After(s.ResetAt) {
				s.ResetAt = t
			}
		}
	}
	a.limits.Record(s)
}

// parseResetDuration reads OpenAI's reset values: Go-style durations
// ("6m0s", "12ms", "1s") or bare seconds.
func parseResetDuration(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, true
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}

// HealthCheck lists the models (GET /models): free on every server.
func (a *Adapter) HealthCheck(ctx context.Context) provider.HealthStatus {
	start := a.base.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second, adapterkit.ErrAttemptTimeout)
	defer cancel()
	var raw *http.Response
	_, err := a.client.Models.List(ctx, option.WithResponseInto(&raw))
	st := provider.HealthStatus{Healthy: err == nil, Latency: a.base.Now().Sub(start), CheckedAt: start}
	if raw != nil && raw.StatusCode < 400 {
		a.observe(raw.Header, 0)
	}
	if err != nil {
		pe := a.classify(ctx, err, raw, "")
		st.Error, st.Kind = pe.Error(), pe.Kind
	}
	return st
}
