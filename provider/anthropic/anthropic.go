package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Type is the adapter type name used in llm-config.yaml.
const Type = "anthropic"

// Namespace is the price-catalog namespace of Anthropic models.
const Namespace = "anthropic"

// DefaultBaseURL is Anthropic's public endpoint.
const DefaultBaseURL = "https://api.anthropic.com/"

// DefaultModels is the spec's tier mapping.
var DefaultModels = map[provider.Tier]string{
	provider.TierReasoningHeavy: "claude-opus-4-7",
	provider.TierBalanced:       "claude-sonnet-4-6",
	provider.TierFastCheap:      "claude-haiku-4-5",
}

// baseCapabilities are what every Claude model offers.
var baseCapabilities = provider.NewCapabilitySet(provider.CapToolUse, provider.CapStreaming, provider.CapPromptCaching, provider.CapCodeExecution,
	provider.CapStructuredOutput, provider.CapReasoning)

// Registration describes the adapter type for the registry.
func Registration() provider.Registration {
	models := make(map[provider.Tier]string, len(DefaultModels))
	for t, m := range DefaultModels {
		models[t] = m
	}
	return provider.Registration{
		Type:           Type,
		Description:    "Anthropic Claude, native Messages API",
		DefaultBaseURL: DefaultBaseURL,
		Credentials: []provider.CredentialField{{
			Name: "api_key", EnvVars: []string{"ANTHROPIC_API_KEY"}, Secret: true, Required: true,
			Description: "API key from the Claude Console (sk-ant-...)",
		}},
		DefaultModels: models,
		Capabilities:  baseCapabilities.Union(provider.NewCapabilitySet(provider.CapLongContext200K, provider.CapLongContext1M, provider.CapVision)),
		New:           func(s provider.Settings) (provider.Adapter, error) { return New(s) },
	}
}

// Adapter talks to one Anthropic endpoint. Build it with [New].
type Adapter struct {
	base    adapterkit.Base
	baseURL string
	client  anthropic.Client
	limits  adapterkit.Limits
}

var _ provider.Adapter = (*Adapter)(nil)
var _ provider.ModelCapabler = (*Adapter)(nil)
var _ provider.TierMapper = (*Adapter)(nil)
var _ provider.Endpointer = (*Adapter)(nil)
var _ provider.ImageURLFetcher = (*Adapter)(nil)

// New builds an adapter from settings. The api_key credential is required.
func New(s provider.Settings) (*Adapter, error) {
	key := s.Credentials["api_key"]
	if key == "" {
		return nil, fmt.Errorf("anthropic: provider %q has no api_key", s.Name)
	}
	base := s.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	b := adapterkit.NewBase(s, Type, DefaultModels, key)
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithHTTPClient(b.HTTPClient(s.HTTPClient)),
	}
	return &Adapter{base: b, baseURL: base, client: anthropic.NewClient(opts...)}, nil
}

// BaseURL returns the endpoint the adapter talks to.
func (a *Adapter) BaseURL() string { return a.baseURL }

// FetchesImageURLs reports whether Anthropic fetches the image URLs sent to
// this adapter (an image block with a "url" source): only at Anthropic's own
// endpoint. Any other base URL may be a server that fetches them itself.
func (a *Adapter) FetchesImageURLs() bool { return provider.SameEndpoint(a.baseURL, DefaultBaseURL) }

// Name returns the instance name.
func (a *Adapter) Name() string { return a.base.Name }

// ModelFor returns the model configured for tier t.
func (a *Adapter) ModelFor(t provider.Tier) string { return a.base.ModelFor(t) }

// Capabilities returns what the configured models can do together.
func (a *Adapter) Capabilities() provider.CapabilitySet {
	s := baseCapabilities
	for _, m := range a.base.Models {
		s = s.Union(a.ModelCapabilities(m))
	}
	return s
}

// ModelCapabilities returns what model can do; long context and vision come
// from the price catalog.
func (a *Adapter) ModelCapabilities(model string) provider.CapabilitySet {
	return a.base.ModelCapabilities(baseCapabilities, Namespace, model)
}

// MaxTokens returns the output limit req is sent with: its max tokens
// clamped to the model's max_output_tokens in the catalog.
func (a *Adapter) MaxTokens(req *provider.Request) int {
	return a.base.MaxTokens(Namespace, a.base.Model(req), req)
}

// EstimateCost returns an upper bound of the cost of req (see the package
// doc for what it bounds).
func (a *Adapter) EstimateCost(req *provider.Request) (provider.Money, error) {
	model := a.base.Model(req)
	return a.base.Estimate(Namespace, model, req, Images(model))
}

// RateLimitStatus returns the anthropic-ratelimit-* figures of the latest
// response.
func (a *Adapter) RateLimitStatus(context.Context) provider.RateLimitStatus { return a.limits.Status() }

func (a *Adapter) observe(h http.Header, retryAfter time.Duration) {
	if h == nil {
		return
	}
	s := provider.RateLimitStatus{ObservedAt: a.base.Now(), RetryAfter: retryAfter}
	num := func(k string) *int64 {
		v, err := strconv.ParseInt(h.Get(k), 10, 64)
		if err != nil {
			return nil
		}
		return &v
	}
	s.RequestsRemaining = num("anthropic-ratelimit-requests-remaining")
	s.TokensRemaining = num("anthropic-ratelimit-tokens-remaining")
	if s.TokensRemaining == nil {
		s.TokensRemaining = num("anthropic-ratelimit-input-tokens-remaining")
	}
	for _, k := range []string{"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-output-tokens-reset"} {
		if t, err := time.Parse(time.RFC3339, h.Get(k)); err == nil && (s.ResetAt.IsZero() || t.After(s.ResetAt)) {
			s.ResetAt = t
		}
	}
	a.limits.Record(s)
}

// HealthCheck lists one model: it proves the endpoint answers and the key
// is accepted, without spending tokens.
func (a *Adapter) HealthCheck(ctx context.Context) provider.HealthStatus {
	start := a.base.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second, adapterkit.ErrAttemptTimeout)
	defer cancel()
	var raw *http.Response
	_, err := a.client.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)}, option.WithResponseInto(&raw))
	st := provider.HealthStatus{Healthy: err == nil, Latency: a.base.Now().Sub(start), CheckedAt: start}
	if raw != nil {
		a.observe(raw.Header, 0)
	}
	if err != nil {
		pe := a.classify(ctx, err, "")
		st.Error, st.Kind = pe.Error(), pe.Kind
	}
	return st
}
