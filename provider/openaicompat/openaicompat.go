package openaicompat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Type is the adapter type name used in llm-config.yaml.
const Type = "openai_compatible"

// baseCapabilities are the spec's for this adapter: code execution (through
// tool use), tool use, streaming.
var baseCapabilities = provider.NewCapabilitySet(provider.CapCodeExecution, provider.CapToolUse, provider.CapStreaming)

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
			Name: "api_key", EnvVars: []string{"OPENAI_API_KEY"}, Secret: true, RequiredProfiles: []string{OpenAI.Name},
			Description: "API key (required for the openai profile; local servers ignore it)",
		}},
		DefaultModels: models,
		Capabilities:  baseCapabilities.Union(provider.NewCapabilitySet(provider.CapPromptCaching, provider.CapVision, provider.CapLongContext200K, provider.CapLongContext1M)),
		New:           func(s provider.Settings) (provider.Adapter, error) { return New(s) },
	}
}

// Adapter talks to one OpenAI-compatible endpoint. Build it with [New].
type Adapter struct {
	name    string
	profile Profile
	baseURL string
	client  openai.Client
	key     string
	models  map[provider.Tier]string
	extra   provider.CapabilitySet
	pricer  provider.Pricer
	now     func() time.Time
	timeout time.Duration

	mu     sync.Mutex
	limits provider.RateLimitStatus
}

var (
	_ provider.Adapter       = (*Adapter)(nil)
	_ provider.ModelCapabler = (*Adapter)(nil)
	_ provider.TierMapper    = (*Adapter)(nil)
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
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(sendKey),
		option.WithMaxRetries(0),
		option.WithMiddleware(stripAmbientHeaders),
	}
	if s.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(s.HTTPClient))
	}
	a := &Adapter{name: s.Name, profile: p, baseURL: base, client: openai.NewClient(opts...), key: key, pricer: s.Pricer, now: s.Now, timeout: s.Timeout, extra: s.Capabilities, models: map[provider.Tier]string{}}
	if a.name == "" {
		a.name = Type
	}
	if a.now == nil {
		a.now = time.Now
	}
	for t, m := range p.DefaultModels {
		a.models[t] = m
	}
	for t, m := range s.Models {
		a.models[t] = m
	}
	return a, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.name }

// Profile returns the server profile in use.
func (a *Adapter) Profile() Profile { return a.profile }

// ModelFor returns the model configured for tier t ("" when none is).
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
	if a.profile.PromptCaching {
		s = s.With(provider.CapPromptCaching)
	}
	for _, m := range a.models {
		s = s.Union(a.ModelCapabilities(m))
	}
	return s
}

// ModelCapabilities returns what model can do: the spec's set, prompt
// caching where the server has it, long context and vision from the price
// catalog, and whatever the configuration declares for this endpoint.
func (a *Adapter) ModelCapabilities(model string) provider.CapabilitySet {
	s := baseCapabilities.Union(a.extra)
	if a.profile.PromptCaching {
		s = s.With(provider.CapPromptCaching)
	}
	if a.pricer != nil {
		ns, id := a.profile.priceRef(a.baseURL, model)
		if l, err := a.pricer.Limits(ns, id); err == nil {
			s = s.Union(l.Capabilities())
		}
	}
	return s
}

// EstimateCost returns an upper bound of the cost of req; local servers
// cost zero.
func (a *Adapter) EstimateCost(req *provider.Request) (provider.Money, error) {
	model := a.model(req)
	if a.pricer == nil {
		return 0, &provider.Error{Kind: provider.KindBadRequest, Provider: a.name, Model: model, Diagnostic: provider.Diagnostic{Message: "no price catalog configured: the request cannot be priced"}}
	}
	ns, id := a.profile.priceRef(a.baseURL, model)
	m, err := a.pricer.Estimate(ns, id, req, a.now())
	if err != nil {
		return 0, &provider.Error{Kind: provider.KindBadRequest, Provider: a.name, Model: model, Diagnostic: provider.Diagnostic{Message: err.Error()}, Err: err}
	}
	return m, nil
}

func (a *Adapter) cost(model string, u provider.Usage) provider.Money {
	if a.pricer == nil {
		return 0
	}
	ns, id := a.profile.priceRef(a.baseURL, model)
	c, err := a.pricer.Cost(ns, id, u, a.now())
	if err != nil {
		return 0
	}
	return c
}

// RateLimitStatus returns the x-ratelimit-* figures of the latest response
// (servers that send none report nothing).
func (a *Adapter) RateLimitStatus(context.Context) provider.RateLimitStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limits
}

func (a *Adapter) observe(h http.Header, retryAfter time.Duration) {
	if h == nil {
		return
	}
	now := a.now()
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
	if !s.Known() {
		return
	}
	a.mu.Lock()
	a.limits = s
	a.mu.Unlock()
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
	start := a.now()
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second, errAttemptTimeout)
	defer cancel()
	var raw *http.Response
	_, err := a.client.Models.List(ctx, option.WithResponseInto(&raw))
	st := provider.HealthStatus{Healthy: err == nil, Latency: a.now().Sub(start), CheckedAt: start}
	if raw != nil && raw.StatusCode < 400 {
		a.observe(raw.Header, 0)
	}
	if err != nil {
		pe := a.classify(ctx, err, raw, "")
		st.Error, st.Kind = pe.Error(), pe.Kind
	}
	return st
}

// errAttemptTimeout is the cause of an attempt's context when its timeout,
// not the caller, ended it.
var errAttemptTimeout = errors.New("attempt timed out")
