package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/cortexbuild/cortexbuild/provider"
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
var baseCapabilities = provider.NewCapabilitySet(provider.CapToolUse, provider.CapStreaming, provider.CapPromptCaching)

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
	name    string
	client  *genai.Client
	key     string
	models  map[provider.Tier]string
	extra   provider.CapabilitySet
	pricer  provider.Pricer
	now     func() time.Time
	timeout time.Duration

	mu         sync.Mutex
	retryAfter time.Duration
	retryAt    time.Time
}

var (
	_ provider.Adapter       = (*Adapter)(nil)
	_ provider.ModelCapabler = (*Adapter)(nil)
	_ provider.TierMapper    = (*Adapter)(nil)
)

// New builds an adapter from settings. The api_key credential is required.
// The SDK makes no retries unless asked, and the adapter never asks.
func New(s provider.Settings) (*Adapter, error) {
	key := s.Credentials["api_key"]
	if key == "" {
		return nil, fmt.Errorf("gemini: provider %q has no api_key", s.Name)
	}
	base := s.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := s.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: key, Backend: genai.BackendGeminiAPI, HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: APIVersion},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	a := &Adapter{name: s.Name, client: client, key: key, pricer: s.Pricer, now: s.Now, timeout: s.Timeout, extra: s.Capabilities, models: map[provider.Tier]string{}}
	if a.name == "" {
		a.name = Type
	}
	if a.now == nil {
		a.now = time.Now
	}
	for t, m := range DefaultModels {
		a.models[t] = m
	}
	for t, m := range s.Models {
		a.models[t] = m
	}
	return a, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.name }

// ModelFor returns the model configured for tier t.
func (a *Adapter) ModelFor(t provider.Tier) string { return a.models[t] }

func (a *Adapter) model(req *provider.Request) string {
	if req.Model != "" {
		return req.Model
	}
	return a.models[req.EffectiveTier()]
}

func (a *Adapter) attemptTimeout(req *provider.Request) time.Duration {
	if req.Timeout <= 0 && a.timeout > 0 {
		return a.timeout
	}
	return req.EffectiveTimeout()
}

// Capabilities returns what the configured models can do together.
func (a *Adapter) Capabilities() provider.CapabilitySet {
	s := baseCapabilities.Union(a.extra)
	for _, m := range a.models {
		s = s.Union(a.ModelCapabilities(m))
	}
	return s
}

// ModelCapabilities returns what model can do; long context (from its
// window) and vision come from the price catalog.
func (a *Adapter) ModelCapabilities(model string) provider.CapabilitySet {
	s := baseCapabilities.Union(a.extra)
	if a.pricer != nil {
		if l, err := a.pricer.Limits(Namespace, model); err == nil {
			s = s.Union(l.Capabilities())
		}
	}
	return s
}

// EstimateCost returns an upper bound of the cost of req: the prompt counted
// offline with a safety factor, the output (thinking included) at
// max_tokens.
func (a *Adapter) EstimateCost(req *provider.Request) (provider.Money, error) {
	model := a.model(req)
	if a.pricer == nil {
		return 0, &provider.Error{Kind: provider.KindBadRequest, Provider: a.name, Model: model, Diagnostic: provider.Diagnostic{Message: "no price catalog configured: the request cannot be priced"}}
	}
	m, err := a.pricer.Estimate(Namespace, model, req, a.now())
	if err != nil {
		return 0, &provider.Error{Kind: provider.KindBadRequest, Provider: a.name, Model: model, Diagnostic: provider.Diagnostic{Message: err.Error()}, Err: err}
	}
	return m, nil
}

func (a *Adapter) cost(model string, u provider.Usage) provider.Money {
	if a.pricer == nil {
		return 0
	}
	c, err := a.pricer.Cost(Namespace, model, u, a.now())
	if err != nil {
		return 0
	}
	return c
}

// RateLimitStatus reports what Gemini says about rate limits: nothing but
// the retry delay of the last 429, since it sends no rate-limit headers.
// Counts stay unknown rather than invented.
func (a *Adapter) RateLimitStatus(context.Context) provider.RateLimitStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.retryAfter == 0 {
		return provider.RateLimitStatus{}
	}
	return provider.RateLimitStatus{RetryAfter: a.retryAfter, ResetAt: a.retryAt.Add(a.retryAfter), ObservedAt: a.retryAt}
}

func (a *Adapter) observeRetry(d time.Duration) {
	if d <= 0 {
		return
	}
	a.mu.Lock()
	a.retryAfter, a.retryAt = d, a.now()
	a.mu.Unlock()
}

// HealthCheck lists one model (models.list with page size 1): free, and no
// generate quota is consumed.
func (a *Adapter) HealthCheck(ctx context.Context) provider.HealthStatus {
	start := a.now()
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second, errAttemptTimeout)
	defer cancel()
	_, err := a.client.Models.List(ctx, &genai.ListModelsConfig{PageSize: 1})
	st := provider.HealthStatus{Healthy: err == nil, Latency: a.now().Sub(start), CheckedAt: start}
	if err != nil {
		pe := a.classify(ctx, err, "")
		st.Error, st.Kind = pe.Error(), pe.Kind
	}
	return st
}

// errAttemptTimeout is the cause of an attempt's context when its timeout,
// not the caller, ended it.
var errAttemptTimeout = errors.New("attempt timed out")
