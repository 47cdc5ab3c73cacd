package gateway

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Target is what a model name sent by a client resolves to. At least one
// of Agent, Tier and Model is set; Provider, when set, restricts the call
// to that provider instance.
type Target struct {
	// Agent routes the call as this agent: its tier, providers, budget and
	// critic gate.
	Agent string
	// Tier overrides the agent's tier.
	Tier provider.Tier
	// Model names an exact model.
	Model string
	// Provider is the only provider instance that may serve the call.
	Provider string

	// family: the target of one of DefaultFamilies, whose tier applies
	// only when nothing names the agent.
	family bool
	// persona: the agent was named by a rendered persona's line in the
	// system prompt, not by the model name.
	persona bool
}

// servedAs is what a call to t made as agent ("" for none) is served
// as: a family's tier gives way to the agent's own.
func (t Target) servedAs(agent string) Target {
	s := Target{Agent: agent, Tier: t.Tier, Model: t.Model, Provider: t.Provider}
	if t.family && agent != "" {
		s.Tier = "" // the agent's own
	}
	return s
}

// describe says what t routes to, for the model listing.
func (t Target) describe() string {
	var parts []string
	if t.Agent != "" {
		parts = append(parts, "agent "+t.Agent)
	}
	if t.Tier != "" {
		parts = append(parts, "tier "+string(t.Tier))
	}
	if t.Model != "" {
		parts = append(parts, "model "+t.Model)
	}
	if t.Provider != "" {
		parts = append(parts, "on "+t.Provider)
	}
	return strings.Join(parts, ", ")
}

// DefaultFamilies map the model names host tools send by default to tiers,
// by family, so that Claude Code or Codex pointed at the gateway work
// without a hand-written map. A gateway.models entry with the same pattern
// (or an exact name) takes precedence. A family's tier applies only when
// nothing names the agent: a request of a session whose agent is known
// (X-CortexBuild-Agent, a bound key, a persona's line) runs on that
// agent's tier, whatever model name its host sends.
var DefaultFamilies = map[string]Target{
	"claude-opus-*":   {Tier: provider.TierReasoningHeavy},
	"claude-sonnet-*": {Tier: provider.TierBalanced},
	"claude-haiku-*":  {Tier: provider.TierFastCheap},
	"gpt-*-astra":     {Tier: provider.TierReasoningHeavy},
	"gpt-*-sol":       {Tier: provider.TierBalanced},
	"gpt-*-terra":     {Tier: provider.TierBalanced},
	"gpt-*-luna":      {Tier: provider.TierFastCheap},
	"gpt-*-codex":     {Tier: provider.TierBalanced},
	"gpt-5*":          {Tier: provider.TierBalanced},
}

// IsPattern reports whether a gateway.models name is a pattern: it holds a
// '*', which matches any run of characters.
func IsPattern(name string) bool { return strings.Contains(name, "*") }

// pattern is a gateway.models name with '*' wildcards.
type pattern struct {
	name   string
	parts  []string // the literal runs between the stars
	target Target
}

func newPattern(name string, t Target) pattern {
	return pattern{name: name, parts: strings.Split(name, "*"), target: t}
}

// literal is how many characters of a name the pattern fixes: the more,
// the more specific.
func (p pattern) literal() int { return len(p.name) - strings.Count(p.name, "*") }

func (p pattern) match(s string) bool {
	first, last := p.parts[0], p.parts[len(p.parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, mid := range p.parts[1 : len(p.parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}

// sortPatterns orders patterns most specific first (then by name), the
// order resolve tries them in.
func sortPatterns(ps []pattern) {
	slices.SortFunc(ps, func(a, b pattern) int {
		if d := b.literal() - a.literal(); d != 0 {
			return d
		}
		return strings.Compare(a.name, b.name)
	})
}

// resolve maps a model name to its target: a configured name first, then
// a tier name, an agent name, "provider/model" for a configured provider
// instance, and last the patterns (the configured ones and
// DefaultFamilies), most specific first.
func (g *Gateway) resolve(name string) (Target, bool) {
	if t, ok := g.exact[name]; ok {
		return t, true
	}
	if t := provider.Tier(name); t.Valid() {
		return Target{Tier: t}, true
	}
	if slices.Contains(g.opts.Agents, name) {
		return Target{Agent: name}, true
	}
	if prov, model, ok := strings.Cut(name, "/"); ok && model != "" && slices.Contains(g.opts.Providers, prov) {
		return Target{Provider: prov, Model: model}, true
	}
	for _, p := range g.patterns {
		if p.match(name) {
			return p.target, true
		}
	}
	return Target{}, false
}

// modelNames lists every name the listing shows, with what it routes to:
// configured aliases, then tiers, then agents.
func (g *Gateway) modelNames() []modelEntry {
	var out []modelEntry
	seen := map[string]bool{}
	add := func(id, desc string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, modelEntry{id: id, desc: desc})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g.exact)) {
		add(name, g.exact[name].describe())
	}
	for _, t := range provider.Tiers {
		add(string(t), "tier "+string(t))
	}
	for _, a := range g.opts.Agents {
		add(a, "agent "+a)
	}
	return out
}

type modelEntry struct{ id, desc string }

// modelObject is one model in the listing. It carries the fields of both
// protocols' model objects (OpenAI: id, object, created, owned_by;
// Anthropic: type, id, display_name, created_at), so either SDK's Models
// API reads it.
type modelObject struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func (g *Gateway) modelObject(e modelEntry) modelObject {
	return modelObject{ID: e.id, Object: "model", Created: g.started.Unix(), OwnedBy: "cortexbuild",
		Type: "model", DisplayName: e.id + " (" + e.desc + ")", CreatedAt: g.started.UTC().Format(time.RFC3339)}
}

// serveModels answers GET /v1/models in a shape both SDKs read: OpenAI's
// list (object, data) and Anthropic's page (data, has_more, first_id,
// last_id).
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request, p protocol) {
	if _, f := g.authenticate(r); f != nil {
		p.writeError(w, r, f)
		return
	}
	names := g.modelNames()
	page := struct {
		Object  string        `json:"object"`
		Data    []modelObject `json:"data"`
		HasMore bool          `json:"has_more"`
		FirstID *string       `json:"first_id"`
		LastID  *string       `json:"last_id"`
	}{Object: "list", Data: []modelObject{}}
	for _, e := range names {
		page.Data = append(page.Data, g.modelObject(e))
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

// serveModel answers GET /v1/models/{id}.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, p protocol) {
	if _, f := g.authenticate(r); f != nil {
		p.writeError(w, r, f)
		return
	}
	id := r.PathValue("id")
	for _, e := range g.modelNames() {
		if e.id == id {
			writeJSON(w, http.StatusOK, g.modelObject(e))
			return
		}
	}
	if t, ok := g.resolve(id); ok {
		writeJSON(w, http.StatusOK, g.modelObject(modelEntry{id: id, desc: t.describe()}))
		return
	}
	f := g.unknownModel(id)
	f.class = classNotFound // a resource that is not there
	p.writeError(w, r, f)
}

// unknownModel is the refusal of a call to a name the gateway does not
// resolve. It is a 400, not a 404: the hosts replace a 404's message with
// their own ("There's an issue with the selected model"), but show a 400's
// as it is, and this one says how to map the name.
func (g *Gateway) unknownModel(name string) *failure {
	return &failure{class: classBadRequest, param: "model", code: "model_not_found",
		msg: "model " + quote(name) + " is not known to this CortexBuild gateway: send an agent name (builder, planner, …), a tier (reasoning_heavy, balanced, fast_cheap), provider/model, or a name or pattern from gateway.models in llm-config.yaml (e.g. " + quote(name) + ": {tier: balanced}); GET /v1/models lists them"}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
