// Package orchestrator is CortexBuild's own orchestration engine: the one
// invocation loop that routes each agent's request to a provider and owns
// every retry and failover.
//
// This file set holds the spec's per-agent default routing; the loop itself
// builds on it.
package orchestrator
