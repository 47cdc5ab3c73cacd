package orchestrator_test

import (
	"context"
	"testing"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The host's session and agents of a call are on every ledger row it
// writes: each attempt of a failover, a stream's, a cache hit's.
func TestHostSessionOnEveryLedgerRow(t *testing.T) {
	ctx := context.Background()
	st := openLedger(t)
	c := cache.New(cache.NewMemory(cache.MemoryOptions{}), cache.Options{})
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger, s.Cache = order("anthropic"), st, c })
	host := func(c orchestrator.Call, sess, agent, parent string) orchestrator.Call {
		c.Session, c.HostAgent, c.ParentAgent = sess, agent, parent
		return c
	}

	// A failover: anthropic fails with a server error, openai answers.
	fault(w, "anthropic", provider.KindServer)
	w.oai.Enqueue(openaifake.Reply{Text: "done"})
	out, oe := w.invoke(t, host(orchestrator.Call{Agent: "builder", Task: "h"}, "sess-1", "sub-a", "main-1"))
	if oe != nil {
		t.Fatal(oe)
	}
	if len(out.Attempts) != 2 {
		t.Fatalf("attempts %s; want a failover", path(out.Attempts))
	}
	// A stream of the session's main agent.
	w.anth.Enqueue(anthropicfake.TextReply("streamed"))
	s, err := w.o.Stream(ctx, host(orchestrator.Call{Agent: "builder", Task: "h", Request: provider.Request{Prompt: "go"}}, "sess-1", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.Collect(s); err != nil {
		t.Fatal(err)
	}
	// A cache hit in another session, and a call without a host.
	w.anth.Enqueue(anthropicfake.TextReply("layout"), anthropicfake.TextReply("plain"))
	explore := orchestrator.Call{Agent: "explore", Task: "h", Request: provider.Request{Prompt: "summarise"}}
	if _, oe := w.invoke(t, host(explore, "sess-2", "sub-b", "main-2")); oe != nil {
		t.Fatal(oe)
	}
	if hit, oe := w.invoke(t, host(explore, "sess-2", "sub-c", "sub-b")); oe != nil || !hit.CacheHit {
		t.Fatalf("second explore = %+v, %v; want a cache hit", hit, oe)
	}
	if _, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "h"}); oe != nil {
		t.Fatal(oe)
	}

	rows, err := st.Attempts(ctx, ledger.Filter{Task: "h"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ outcome, session, agent, parent string }{
		{"server", "sess-1", "sub-a", "main-1"},
		{"ok", "sess-1", "sub-a", "main-1"},
		{"ok", "sess-1", "", ""},
		{"ok", "sess-2", "sub-b", "main-2"},
		{"cache_hit", "sess-2", "sub-c", "sub-b"},
		{"ok", "", "", ""},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v; want %d", len(rows), rows, len(want))
	}
	for i, wr := range want {
		r := rows[i]
		if r.Outcome != wr.outcome || r.Session != wr.session || r.HostAgent != wr.agent || r.ParentAgent != wr.parent {
			t.Errorf("row %d = %s session %q agent %q parent %q; want %+v", i, r.Outcome, r.Session, r.HostAgent, r.ParentAgent, wr)
		}
	}
	rep, err := st.Spend(ctx, ledger.Filter{Session: "sess-1", By: ledger.ByHostAgent})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 2 || rep.Groups[0].Key != "" || rep.Groups[0].Attempts != 1 || rep.Groups[1].Key != "sub-a" || rep.Groups[1].Attempts != 2 {
		t.Errorf("spend of sess-1 by host agent = %+v", rep.Groups)
	}
}
