package gateway

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/internal/agentmark"
)

// adminOnly refuses an admin key on a model-call route: the console's
// credential is not handed to clients, so a leaked client key cannot
// administer and the admin key makes no paid calls.
func adminOnly(key *Key) *failure {
	if key == nil || !key.Admin() {
		return nil
	}
	return fail(classPermission, "this is an admin key: it opens the console and makes no model calls; give clients a call key ('cortexbuild serve keys create --role call')")
}

// keyScope refuses a call that leaves the key's scope: a key bound to an
// agent calls only as that agent (by the model name, the agent header or
// a persona's line in the system prompt), on the agent's own tier and
// providers (no tier, model or provider override); a key with allowed
// models sends only those names, or names resolving to exactly one of
// those provider/model pairs. t is what name resolves to; header is the
// X-CortexBuild-Agent header ("" when absent).
func keyScope(key *Key, name string, t Target, header string) *failure {
	if key == nil {
		return nil
	}
	if key.Agent != "" {
		switch {
		case header != "" && header != key.Agent:
			return fail(classPermission, "this key is bound to agent %s; it cannot call as %s (%s)", key.Agent, header, HeaderAgent)
		case t.persona && t.Agent != key.Agent:
			return fail(classPermission, "this key is bound to agent %s; the system prompt is agent %s's persona (%s): use a key that is not bound to an agent for a host that spawns agents", key.Agent, t.Agent, agentmark.Line(t.Agent))
		case t.Agent != "" && t.Agent != key.Agent:
			return fail(classPermission, "this key is bound to agent %s; model %q routes as agent %s: send model %q", key.Agent, name, t.Agent, key.Agent)
		case (t.Tier != "" && !t.family) || t.Model != "" || t.Provider != "":
			// A family's tier (a host's own model name) gives way to the
			// agent's, so it stays in scope.
			return fail(classPermission, "this key is bound to agent %s and calls on that agent's own tier and providers; model %q routes to %s: send model %q", key.Agent, name, t.describe(), key.Agent)
		}
	}
	if len(key.Agents) > 0 {
		if f := agentsScope(key, name, t, header); f != nil {
			return f
		}
	}
	pinned := t.Provider != "" && t.Model != "" && slices.Contains(key.Models, t.Provider+"/"+t.Model)
	if len(key.Models) > 0 && !slices.Contains(key.Models, name) && !pinned {
		return fail(classPermission, "this key may send only the models %s; %q is not one of them", strings.Join(key.Models, ", "), name)
	}
	return nil
}

// agentsScope refuses a call of a key with allowed agents that is not
// made as one of them, on that agent's own tier and providers: the agent
// is the persona's, else the model name's, else the agent header's.
func agentsScope(key *Key, name string, t Target, header string) *failure {
	agent := t.Agent
	if agent == "" {
		agent = header
	}
	allowed := strings.Join(key.Agents, ", ")
	switch {
	case agent == "":
		return fail(classPermission, "this key calls only as the agents %s: send one of them as the model, or name it in %s", allowed, HeaderAgent)
	case !slices.Contains(key.Agents, agent):
		return fail(classPermission, "this key calls only as the agents %s; %q calls as agent %s", allowed, name, agent)
	case !t.persona && ((t.Tier != "" && !t.family) || t.Model != "" || t.Provider != ""):
		return fail(classPermission, "this key calls only as the agents %s, on their own tiers and providers; model %q routes to %s: send the agent's name as the model", allowed, name, t.describe())
	}
	return nil
}

// modelsServed refuses a call of a key with allowed models that is served
// as something none of those names is served as when sent alone: a
// persona's line (persona) or X-CortexBuild-Agent can make an allowed name
// serve as another agent, or on an agent's own tier instead of the name's
// family tier. served is what the call is served as.
func (g *Gateway) modelsServed(key *Key, served Target, persona bool) *failure {
	if key == nil || len(key.Models) == 0 {
		return nil
	}
	for _, name := range key.Models {
		t, ok := g.resolve(name)
		if !ok {
			continue
		}
		if t.servedAs(cmp.Or(key.Agent, t.Agent)) == served {
			return nil
		}
	}
	why := HeaderAgent + " names the agent"
	if persona {
		why = "the system prompt is the agent's persona (" + agentmark.Line(served.Agent) + ")"
	}
	return fail(classPermission, "this key may send only the models %s; this request is served as %s, as none of them is: %s; use a key without allowed models for a host that spawns agents", strings.Join(key.Models, ", "), served.describe(), why)
}
