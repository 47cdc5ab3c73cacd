package gateway

import (
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
	pinned := t.Provider != "" && t.Model != "" && slices.Contains(key.Models, t.Provider+"/"+t.Model)
	if len(key.Models) > 0 && !slices.Contains(key.Models, name) && !pinned {
		return fail(classPermission, "this key may send only the models %s; %q is not one of them", strings.Join(key.Models, ", "), name)
	}
	return nil
}
