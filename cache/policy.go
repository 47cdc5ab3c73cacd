package cache

import "slices"

// readOnlyAgents are the agents whose calls are cached by default: the
// spec's read-only agents. The list mirrors orchestrator.ReadOnlyAgents,
// which this leaf may not import.
var readOnlyAgents = []string{"explore", "optimizer", "tester_validator"}

// ReadOnlyAgents returns the agents cached by default, in alphabetical
// order.
func ReadOnlyAgents() []string { return slices.Clone(readOnlyAgents) }

// Enabled reports whether the response cache applies to agent's calls. An
// explicit per-agent setting (override not nil) always wins; otherwise the
// cache is on for the read-only agents (tester_validator, optimizer,
// explore) and off for every other agent, unknown names included.
func Enabled(agent string, override *bool) bool {
	if override != nil {
		return *override
	}
	return slices.Contains(readOnlyAgents, agent)
}
