package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

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
var baseCapabilities = provider.NewCapabilitySet(provider.CapToolUse, provider.CapStreaming, provider.CapPromptCaching, provider.CapCodeExecution)

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
	name    string
	client  anthropic.Client
	key     string
	models  map[provider.Tier]string
	pricer  provider.Pricer
	now     func() time.Time
	timeout time.Duration

	mu     sync.Mutex
	limits provider.RateLimitStatus
}

var _ provider.Adapter = (*Adapter)(nil)
var _ provider.ModelCapabler = (*Adapter)(nil)
var _ provider.TierMapper = (*Adapter)(nil)

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
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}
	if s.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(s.HTTPClient))
	}
	a := &Adapter{name: s.Name, client: anthropic.NewClient(opts...), key: key, pricer: s.Pricer, now: s.Now, timeout: s.Timeout, models: map[provider.Tier]string{}}
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
	s := baseCapabilities
	for _, m := range a.models {
		s = s.Union(a.ModelCapabilities(m))
	}
	return s
}

// ModelCapabilities returns what model can do; long context and vision come
// from the price catalog.
func (a *Adapter) ModelCapabilities(model string) provider.CapabilitySet {
	s := baseCapabilities
	if a.pricer != nil {
		if l, err := a.pricer.Limits(Namespace, model); err == nil {
			s = s.Union(l.Capabilities())
		}
	}
	return s
}

// EstimateCost returns an upper bound of the cost of req (see the package
// doc for what it bounds).
func (a *Adapter) EstimateCost(req *provider.Request) (provider.Money, error) {
	if a.pricer == nil {
		return 0, &provider.Error{Kind: provider.KindBadRequest, Provider: a.name, Model: a.model(req), Diagnostic: provider.Diagnostic{Message: "no price catalog configured: the request cannot be priced"}}
	}
	m, err := a.pricer.Estimate(Namespace, a.model(req), req, a.now())
	if err != nil {
		return 0, &provider.Error{Kind: provider.KindBadRequest, Provider: a.name, Model: a.model(req), Diagnostic: provider.Diagnostic{Message: err.Error()}, Err: err}
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

// RateLimitStatus returns the anthropic-ratelimit-* figures of the latest
// response.
func (a *Adapter) RateLimitStatus(context.Context) provider.RateLimitStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limits
}

func (a *Adapter) observe(h http.Header, retryAfter time.Duration) {
	if h == nil {
		return
	}
	s := provider.RateLimitStatus{ObservedAt: a.now(), RetryAfter: retryAfter}
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
	if !s.Known() {
		return
	}
	a.mu.Lock()
	a.limits = s
	a.mu.Unlock()
}

// HealthCheck lists one model: it proves the endpoint answers and the key
// is accepted, without spending tokens.
func (a *Adapter) HealthCheck(ctx context.Context) provider.HealthStatus {
	start := a.now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var raw *http.Response
	_, err := a.client.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)}, option.WithResponseInto(&raw))
	st := provider.HealthStatus{Healthy: err == nil, Latency: a.now().Sub(start), CheckedAt: start}
	if raw != nil {
		a.observe(raw.Header, 0)
	}
	if err != nil {
		pe := a.classify(ctx, err, "")
		st.Error, st.Kind = pe.Error(), pe.Kind
	}
	return st
}

// errAttemptTimeout is the cause of an attempt's context when its timeout,
// not the caller, ended it.
var errAttemptTimeout = errors.New("attempt timed out")
