package gemini

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// Type is the adapter type name used in llm-config.yaml.
const Type = "gemini"

// Namespace is the price-catalog namespace of Gemini models.
const Namespace = "gemini"

// DefaultBaseURL is the Gemini Developer API.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// APIVersion is the API version the adapter speaks.
const APIVersion = "v1beta"

// DefaultModels maps tiers to generally available Gemini models; projects
// choose their own in llm-config.yaml, as the spec says.
var DefaultModels = map[provider.Tier]string{
	provider.TierReasoningHeavy: "gemini-2.5-pro",
	provider.TierBalanced:       "gemini-2.5-flash",
	provider.TierFastCheap:      "gemini-2.5-flash-lite",
}

// baseCapabilities: the spec's tool use and streaming, and the implicit
// prompt caching of 2.5+ models.
var baseCapabilities = provider.NewCapabilitySet(provider.CapToolUse, provider.CapStreaming, provider.CapPromptCaching,
	provider.CapSampling, provider.CapTopK, provider.CapSeed, provider.CapStructuredOutput, provider.CapReasoning)

// Registration describes the adapter type for the registry.
func Registration() provider.Registration {
	models := make(map[provider.Tier]string, len(DefaultModels))
	for t, m := range DefaultModels {
		models[t] = m
	}
	return provider.Registration{
		Type:           Type,
		Description:    "Google Gemini, native Developer API (Vertex is reached through a gateway)",
		DefaultBaseURL: DefaultBaseURL,
		Credentials: []provider.CredentialField{{
			Name: "api_key", EnvVars: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, Secret: true, Required: true,
			Description: "API key from Google AI Studio",
		}},
		DefaultModels: models,
		Capabilities:  baseCapabilities.Union(provider.NewCapabilitySet(provider.CapLongContext200K, provider.CapLongContext1M, provider.CapVision)),
		New:           func(s provider.Settings) (provider.Adapter, error) { return New(s) },
	}
}

// Adapter talks to the Gemini Developer API. Build it with [New].
type Adapter struct {
	base    adapterkit.Base
	baseURL string
	client  *client
	limits  adapterkit.Limits
}

var (
	_ provider.Adapter       = (*Adapter)(nil)
	_ provider.ModelCapabler = (*Adapter)(nil)
	_ provider.TierMapper    = (*Adapter)(nil)
	_ provider.Endpointer    = (*Adapter)(nil)
)

// New builds an adapter from settings. The api_key credential is required.
// The adapter makes no retries of its own: the orchestrator decides.
func New(s provider.Settings) (*Adapter, error) {
	key := s.Credentials["api_key"]
	if key == "" {
		return nil, fmt.Errorf("gemini: provider %q has no api_key", s.Name)
	}
	base := s.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if _, err := url.Parse(base); err != nil {
		return nil, fmt.Errorf("gemini: provider %q: base URL: %v", s.Name, err)
	}
	b := adapterkit.NewBase(s, Type, DefaultModels, key)
	return &Adapter{base: b, baseURL: base, client: &client{hc: b.HTTPClient(s.HTTPClient), baseURL: base, key: key}}, nil
}

// BaseURL returns the endpoint the adapter talks to.
func (a *Adapter) BaseURL() string { return a.baseURL }

// Name returns the instance name.
func (a *Adapter) Name() string { return a.base.Name }

// ModelFor returns the model configured for tier t.
func (a *Adapter) ModelFor(t provider.Tier) string { return a.base.ModelFor(t) }

// Capabilities returns what the configured models can do together.
func (a *Adapter) Capabilities() provider.CapabilitySet {
	s := baseCapabilities.Union(a.base.Extra)
	for _, m := range a.base.Models {
		s = s.Union(a.ModelCapabilities(m))
	}
	return s
}

// ModelCapabilities returns what model can do; long context (from its
// window) and vision come from the price catalog.
func (a *Adapter) ModelCapabilities(model string) provider.CapabilitySet {
	return a.base.ModelCapabilities(baseCapabilities, Namespace, model)
}

// MaxTokens returns the output limit req is sent with: its max tokens
// clamped to the model's max_output_tokens in the catalog.
func (a *Adapter) MaxTokens(req *provider.Request) int {
	return min(a.base.MaxTokens(Namespace, a.base.Model(req), req), 1<<30)
}

// EstimateCost returns an upper bound of the cost of req: the prompt bounded
// offline (pricing.BoundRequestTokens), the output (thinking included) at
// max_tokens clamped to the model's output limit.
func (a *Adapter) EstimateCost(req *provider.Request) (provider.Money, error) {
	model := a.base.Model(req)
	return a.base.Estimate(Namespace, model, req, Images(model))
}

// RateLimitStatus reports what Gemini says about rate limits: nothing but
// the retry delay of the last 429, since it sends no rate-limit headers.
// Counts stay unknown rather than invented.
func (a *Adapter) RateLimitStatus(context.Context) provider.RateLimitStatus { return a.limits.Status() }

func (a *Adapter) observeRetry(d time.Duration) {
	now := a.base.Now()
	a.limits.Record(provider.RateLimitStatus{RetryAfter: d, ResetAt: now.Add(d), ObservedAt: now})
}

// HealthCheck lists one model (models.list with page size 1): free, and no
// generate quota is consumed.
func (a *Adapter) HealthCheck(ctx context.Context) provider.HealthStatus {
	start := a.base.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second, adapterkit.ErrAttemptTimeout)
	defer cancel()
	err := a.client.listModels(ctx)
	st := provider.HealthStatus{Healthy: err == nil, Latency: a.base.Now().Sub(start), CheckedAt: start}
	if err != nil {
		pe := a.classify(ctx, err, "")
		st.Error, st.Kind = pe.Error(), pe.Kind
	}
	return st
}
