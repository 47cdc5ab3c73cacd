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

// resolve maps a model name to its target: a configured alias first, then
// a tier name, an agent name, and "provider/model" for a configured
// provider instance.
func (g *Gateway) resolve(name string) (Target, bool) {
	if t, ok := g.opts.Models[name]; ok {
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
	for _, name := range slices.Sorted(maps.Keys(g.opts.Models)) {
		add(name, g.opts.Models[name].describe())
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
	p.writeError(w, r, g.unknownModel(id))
}

func (g *Gateway) unknownModel(name string) *failure {
	return &failure{class: classNotFound, param: "model", code: "model_not_found",
		msg: "model " + quote(name) + " is not known to this gateway: send an agent name (builder, planner, …), a tier (reasoning_heavy, balanced, fast_cheap), provider/model, or a name from gateway.models in llm-config.yaml; GET /v1/models lists them"}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
