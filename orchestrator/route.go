package orchestrator

import (
	"context"
	"fmt"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Endpoint is one configured provider instance.
type Endpoint struct {
	// Name is the instance name from the configuration.
	Name    string
	Adapter provider.Adapter
	// Unavailable, when set, says why the provider cannot be used (e.g. a
	// credential that is not set); it has no Adapter, and routing drops it
	// with this reason so calls go to the others.
	Unavailable string
	// AllowImageURLs lets a call that gives an image by URL go to this
	// provider although its adapter does not say the provider fetches such
	// URLs on its own side ([provider.ImageURLFetcher]): a local or proxied
	// server that fetches the URL itself. The configuration's
	// providers.<name>.allow_image_urls.
	AllowImageURLs bool
}

// takesImageURLs reports whether a call that gives an image by URL may go
// to ep.
func (ep *Endpoint) takesImageURLs() bool {
	if ep.AllowImageURLs {
		return true
	}
	f, ok := ep.Adapter.(provider.ImageURLFetcher)
	return ok && f.FetchesImageURLs()
}

// valid reports whether ep has a name and exactly one of an adapter and
// a reason it is unavailable.
func (ep *Endpoint) valid() bool {
	return ep.Name != "" && (ep.Adapter == nil) != (ep.Unavailable == "")
}

// AgentSettings override one agent's routing.
type AgentSettings struct {
	// Tier replaces the agent's default tier.
	Tier provider.Tier
	// Model names an exact model; it wins over Tier.
	Model string
	// Providers lists the instance names to use, most preferred first.
	Providers []string
	// MaxTokens is the output limit when a request sets none.
	MaxTokens int
}

// Candidate is one provider and model the router considered.
type Candidate struct {
	Provider string        `json:"provider"`
	Model    string        `json:"model"`
	Tier     provider.Tier `json:"tier"`
	Kept     bool          `json:"kept"`
	// Reason says why the candidate was kept or dropped.
	Reason string `json:"reason"`
	// Native says the candidate's adapter speaks the request's native
	// protocol ([provider.Request.Native]) for Model: the request would go
	// to it as the client sent it.
	Native bool `json:"native,omitempty"`

	endpoint *Endpoint
	caps     provider.CapabilitySet
	circuit  bool // dropped by its provider's circuit breaker
	imageURL bool // dropped because it may not be sent an image URL
	late     bool // moved back for want of rate-limit headroom
}

// Trace explains a routing decision: the agent's tier, what the request
// needs, and every candidate with the reason it was kept or dropped.
type Trace struct {
	Agent      string                 `json:"agent,omitempty"`
	Tier       provider.Tier          `json:"tier"`
	Needs      provider.CapabilitySet `json:"needs"`
	Candidates []Candidate            `json:"candidates"`
}

// Kept returns the candidates that survived, in order of preference.
func (t *Trace) Kept() []Candidate {
	var out []Candidate
	for _, c := range t.Candidates {
		if c.Kept {
			out = append(out, c)
		}
	}
	return out
}

// String renders the trace for people, one candidate a line.
func (t *Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent %s: tier %s", orDash(t.Agent), t.Tier)
	if t.Needs.Len() > 0 {
		fmt.Fprintf(&b, ", needs %s", t.Needs)
	}
	b.WriteString("\n")
	for i, c := range t.Candidates {
		mark := "drop"
		if c.Kept {
			mark = "keep"
		}
		model := c.Model
		if model == "" {
			model = "-"
		}
		fmt.Fprintf(&b, "  %d. %s %s/%s: %s\n", i+1, mark, c.Provider, model, c.Reason)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tierFor resolves the tier of a call: the request's explicit tier, the
// agent's configured tier, the spec's default for the agent, balanced.
func (o *Orchestrator) tierFor(c *Call) provider.Tier {
	if c.Request.Tier != "" {
		return c.Request.Tier
	}
	if a, ok := o.s.Agents[c.Agent]; ok && a.Tier != "" {
		return a.Tier
	}
	if t, ok := DefaultAgentRouting[c.Agent]; ok {
		return t
	}
	return provider.TierBalanced
}

// route lists the candidates for c: the agent's providers (or the global
// preference), each with the model for the tier, filtered by the
// capabilities the call needs, in order of preference. Providers whose
// circuit breaker is open are dropped; with alternates allowed, providers
// short of rate-limit headroom go after the others. Health reorders them
// again at call time (a provider waiting out a rate limit goes last when
// alternates are allowed).
func (o *Orchestrator) route(c *Call, tier provider.Tier, needs provider.CapabilitySet) Trace {
	t := Trace{Agent: c.Agent, Tier: tier, Needs: needs}
	agent := o.s.Agents[c.Agent]
	order := o.order
	if len(agent.Providers) > 0 {
		order = agent.Providers
	}
	if len(c.Providers) > 0 {
		order = c.Providers
	}
	model := c.Request.Model
	if model == "" {
		model = agent.Model
	}
	eps := o.endpoints()
	imageURLs := c.Request.HasImageURL()
	needsNative := c.Request.Native != nil && c.Request.Native.Required != ""
	for _, name := range order {
		ep := eps[name]
		cand := Candidate{Provider: name, Tier: tier}
		if ep == nil {
			cand.Reason = "not configured"
			t.Candidates = append(t.Candidates, cand)
			continue
		}
		if ep.Unavailable != "" {
			cand.Reason = "unavailable: " + ep.Unavailable
			t.Candidates = append(t.Candidates, cand)
			continue
		}
		cand.endpoint = ep
		cand.Model = model
		if cand.Model == "" {
			if tm, ok := ep.Adapter.(provider.TierMapper); ok {
				cand.Model = tm.ModelFor(tier)
			}
		}
		cand.caps = capabilitiesOf(ep.Adapter, cand.Model)
		switch missing := cand.caps.Missing(needs); {
		case cand.Model == "":
			cand.Reason = "no model configured for tier " + string(tier)
		case missing != 0:
			cand.Reason = "lacks " + missing.String()
		case needsNative && !provider.SpeaksNative(ep.Adapter, &c.Request, cand.Model):
			cand.Reason = "does not speak " + string(c.Request.Native.Protocol) + " natively, which this request needs: " + c.Request.Native.Required
		case imageURLs && !ep.takesImageURLs():
			cand.imageURL = true
			cand.Reason = "may not be sent an image URL: the server would fetch it itself (send the image inline, or set providers." + name + ".allow_image_urls)"
		default:
			cand.Kept = true
			cand.Reason = "has " + orNone(needs)
			if cand.Native = provider.SpeaksNative(ep.Adapter, &c.Request, cand.Model); cand.Native {
				cand.Reason += "; relays " + string(c.Request.Native.Protocol) + " as sent"
			}
		}
		t.Candidates = append(t.Candidates, cand)
	}
	o.gateRoute(c, &t, model != "")
	o.circuitRoute(&t)
	o.headroomRoute(&t)
	return t
}

func orNone(s provider.CapabilitySet) string {
	if s.Len() == 0 {
		return "everything needed"
	}
	return s.String()
}

func capabilitiesOf(a provider.Adapter, model string) provider.CapabilitySet {
	if mc, ok := a.(provider.ModelCapabler); ok && model != "" {
		return mc.ModelCapabilities(model)
	}
	return a.Capabilities()
}

// Route explains where c would go, without calling anything.
func (o *Orchestrator) Route(ctx context.Context, c Call) Trace {
	o.updateEndpoints(ctx)
	o.syncBreakers(ctx)
	_ = o.loadGate(ctx, &c) // an unreadable task fails the call itself, with the reason
	tier := o.tierFor(&c)
	return o.route(&c, tier, c.Needs.Union(c.Request.RequiredCapabilities()))
}

// CountTokens relays a token count request in its client's protocol
// ([provider.ProtoCountTokens]) to the first candidate of c that counts
// natively ([provider.NativeCounter]), after the locality gate: the
// provider counts, for free, so nothing is reserved or recorded. ok is
// false when no candidate counts natively (the caller counts offline).
func (o *Orchestrator) CountTokens(ctx context.Context, c Call) (rep *provider.NativeReply, ok bool, err error) {
	tr := o.Route(ctx, c)
	for _, k := range tr.Kept() {
		nc, counts := k.endpoint.Adapter.(provider.NativeCounter)
		if !counts || !k.Native {
			continue
		}
		if o.s.Gate != nil {
			if err := o.s.Gate.Check(ctx, k.Provider, o.baseURL(k.endpoint)); err != nil {
				return nil, true, &Error{Err: err}
			}
		}
		req := c.Request
		req.Model, req.Tier = k.Model, k.Tier
		rep, err := nc.CountNative(ctx, &req)
		return rep, true, err
	}
	return nil, false, nil
}

// Estimate asks the named provider for an upper bound of req's cost.
func (o *Orchestrator) Estimate(providerName string, req *provider.Request) (provider.Money, error) {
	ep := o.endpoints()[providerName]
	if ep == nil {
		return 0, fmt.Errorf("provider %q is not configured", providerName)
	}
	if ep.Unavailable != "" {
		return 0, fmt.Errorf("provider %q is unavailable: %s", providerName, ep.Unavailable)
	}
	return ep.Adapter.EstimateCost(req)
}

// ModelCapabilities returns what the provider instance called name can do
// with model; false when no such instance is configured.
func (o *Orchestrator) ModelCapabilities(name, model string) (provider.CapabilitySet, bool) {
	ep := o.endpoints()[name]
	if ep == nil || ep.Adapter == nil {
		return 0, false
	}
	return capabilitiesOf(ep.Adapter, model), true
}
