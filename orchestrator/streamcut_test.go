package orchestrator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// A stream its caller closes before its end (the gateway does when the
// client is gone) settles what the provider can bill for it, as the closed
// stream's end reports it: the attempt is canceled, billed at least the
// bound of the text received, priced, marked estimated, and so is its
// ledger row. Each upstream.
func TestStreamClosedEarlySettlesWhatWasReceived(t *testing.T) {
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSpace(strings.Repeat("the answer goes on and on for a while ", 100))
	ns := map[string]string{"anthropic": "anthropic", "openai": "openai", "gemini": "gemini"}
	for _, prov := range []string{"anthropic", "openai", "gemini"} {
		t.Run(prov, func(t *testing.T) {
			st := openLedger(t)
			w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order(prov), st })
			switch prov {
			case "anthropic":
				w.anth.Enqueue(anthropicfake.Reply{Text: text, Usage: anthropicfake.Usage{Input: 300, Output: 900}})
			case "openai":
				w.oai.Enqueue(openaifake.Reply{Text: text, Usage: openaifake.Usage{Prompt: 300, Completion: 900}})
			case "gemini":
				w.gem.Enqueue(geminifake.Reply{Text: text, Usage: geminifake.Usage{Prompt: 300, Candidates: 900}})
			}
			s, err := w.o.Stream(context.Background(), orchestrator.Call{Agent: "builder", Task: "cut", Request: provider.Request{Prompt: "hi", MaxTokens: 4000}})
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for range 20 {
				c, err := s.Recv()
				if err != nil || c.Final {
					t.Fatalf("final %v, %v", c.Final, err)
				}
				got.WriteString(c.Text)
			}
			s.Close()
			as := s.Attempts()
			a := as[len(as)-1]
			bound := min(cat.BoundText(ns[prov], got.String()), 4000)
			if a.Outcome != "canceled" || a.Usage.OutputTokens < bound || !a.Estimated || a.Cost == 0 {
				t.Errorf("closed after %q: attempt %s, usage %+v, cost %s, estimated %v; want canceled, at least %d output tokens, priced, estimated",
					got.String(), a.Outcome, a.Usage, a.Cost, a.Estimated, bound)
			}
			rows, err := st.Attempts(context.Background(), ledger.Filter{Task: "cut"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Outcome != "canceled" || rows[0].OutputTokens != a.Usage.OutputTokens || rows[0].Cost != a.Cost || !rows[0].EstimatedUsage {
				t.Errorf("ledger rows %+v; want the attempt's", rows)
			}
			if want, err := cat.Cost(ns[prov], a.Model, a.Usage, time.Time{}); err != nil || a.Cost != want {
				t.Errorf("cost %s; %+v prices at %s (%v)", a.Cost, a.Usage, want, err)
			}
		})
	}
}
