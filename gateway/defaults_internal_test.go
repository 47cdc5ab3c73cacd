package gateway

import "testing"

// noOrchestrator satisfies Orchestrator for tests that never make a call.
type noOrchestrator struct{ Orchestrator }

// The documented default of gateway.max_in_flight (docs/gateway.md,
// docs/configuration.md): 256 requests at once, each holding about 150 KB,
// so an overload stays within about 40 MB above the idle process.
func TestMaxInFlightDefault(t *testing.T) {
	g, err := New(Options{Orchestrator: noOrchestrator{}, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := cap(g.slots); n != 256 {
		t.Errorf("with gateway.max_in_flight unset the gateway serves %d requests at once; the docs say 256", n)
	}
}
