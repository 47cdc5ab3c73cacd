package orchestrator_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// updates is an EndpointUpdater handing out what the test queued.
type updates struct {
	mu   sync.Mutex
	next []orchestrator.Endpoint
}

func (u *updates) queue(eps ...orchestrator.Endpoint) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next = append(u.next, eps...)
}

func (u *updates) Updates(context.Context) []orchestrator.Endpoint {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.next
	u.next = nil
	return out
}

// An endpoint the updater replaces is used from the next call: made
// unavailable, it is routed around with the reason and listed by
// Unavailable; given an adapter again, it serves. Unknown names and
// invalid endpoints are ignored.
func TestEndpointUpdatesTakeEffectOnTheNextCall(t *testing.T) {
	u := &updates{}
	var adapter provider.Adapter
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Preference, s.Updates = order("anthropic"), u
		adapter = s.Endpoints[0].Adapter
	})
	ctx := context.Background()
	out, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "anthropic/claude-sonnet-4-6:ok" {
		t.Fatalf("first call: %v %v", out, err)
	}

	u.queue(orchestrator.Endpoint{Name: "anthropic", Unavailable: "ANTHROPIC_KEY is not set"},
		orchestrator.Endpoint{Name: "nope", Unavailable: "not configured here"},
		orchestrator.Endpoint{Name: "openai"}) // neither an adapter nor a reason
	before := len(w.anth.Requests())
	out, err = w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "openai/gpt-5-mini:ok" {
		t.Fatalf("call with anthropic unavailable: %v %v", out, err)
	}
	if c, _ := candidate(out.Trace, "anthropic"); c.Kept || c.Reason != "unavailable: ANTHROPIC_KEY is not set" {
		t.Errorf("anthropic candidate = %+v", c)
	}
	if n := len(w.anth.Requests()); n != before {
		t.Errorf("anthropic got %d requests while unavailable", n-before)
	}
	if got := w.o.Unavailable(ctx); len(got) != 1 || !strings.Contains(got["anthropic"], "ANTHROPIC_KEY") {
		t.Errorf("Unavailable = %v", got)
	}

	u.queue(orchestrator.Endpoint{Name: "anthropic", Adapter: adapter})
	if got := w.o.Unavailable(ctx); len(got) != 0 {
		t.Errorf("Unavailable = %v after the adapter was put back", got)
	}
	out, err = w.invoke(t, orchestrator.Call{Agent: "builder"})
	if err != nil || path(out.Attempts) != "anthropic/claude-sonnet-4-6:ok" {
		t.Fatalf("call with anthropic back: %v %v", out, err)
	}
}
