package orchestrator

import (
	"sort"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The spec's ten agents.
const (
	AgentPlanner                = "planner"
	AgentCritic                 = "critic"
	AgentBuilder                = "builder"
	AgentTesterValidator        = "tester_validator"
	AgentSecurityCompliance     = "security_compliance"
	AgentOptimizer              = "optimizer"
	AgentPRReviewer             = "pr_reviewer"
	AgentExplore                = "explore"
	AgentRecurrenceGuard        = "recurrence_guard"
	AgentEnterpriseOrchestrator = "enterprise_orchestrator"
)

// DefaultAgentRouting maps each agent to its default tier, exactly as the
// spec's DEFAULT_AGENT_ROUTING. Projects override it per agent in
// llm-config.yaml. Treat it as read-only.
var DefaultAgentRouting = map[string]provider.Tier{
	AgentPlanner:                provider.TierReasoningHeavy, // deep planning
	AgentCritic:                 provider.TierReasoningHeavy, // adversarial reasoning
	AgentBuilder:                provider.TierBalanced,       // most volume; cost matters
	AgentTesterValidator:        provider.TierBalanced,       // test coverage + regression analysis
	AgentSecurityCompliance:     provider.TierReasoningHeavy, // security depth
	AgentOptimizer:              provider.TierBalanced,
	AgentPRReviewer:             provider.TierReasoningHeavy, // final gate
	AgentExplore:                provider.TierFastCheap,      // read-only summarisation
	AgentRecurrenceGuard:        provider.TierBalanced,
	AgentEnterpriseOrchestrator: provider.TierBalanced,
}

// AgentNames returns the ten agents in alphabetical order.
func AgentNames() []string {
	names := make([]string, 0, len(DefaultAgentRouting))
	for n := range DefaultAgentRouting {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
