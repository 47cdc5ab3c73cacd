package gateway

import "testing"

// noOrchestrator satisfies Orchestrator for tests that never make a call.
type noOrchestrator struct{ Orchestrator }

// The documented default of gateway.max_in_flight (docs/gateway.md,
// docs/configuration.md): sized from the memory the process may use, and
// half of it per key.
func TestMaxInFlightDefault(t *testing.T) {
	g, err := New(Options{Orchestrator: noOrchestrator{}, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultMaxInFlight(ProcessMemory())
	if n := cap(g.slots); n != want {
		t.Errorf("with gateway.max_in_flight unset the gateway serves %d requests at once; want %d for %d bytes", n, want, ProcessMemory())
	}
	if g.opts.MaxInFlightPerKey != DefaultMaxInFlightPerKey(want) {
		t.Errorf("per key %d; want half of %d", g.opts.MaxInFlightPerKey, want)
	}
}
