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
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// An OpenAI-compatible answer naming a model id the catalog does not list
// (a fine-tune, a deployment name, a snapshot without the date pattern) is
// priced as the model requested, and recorded so.
func TestUnlistedAnswerModelIsPricedAsRequested(t *testing.T) {
	st := openLedger(t)
	w := newWorld(t, func(s *orchestrator.Settings) { s.Preference, s.Ledger = order("openai"), st })
	w.oai.Enqueue(openaifake.Reply{Text: "ok", Model: "ft:gpt-5-mini:acme:0042", Usage: openaifake.Usage{Prompt: 20000, Completion: 3000}})
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t1", Request: provider.Request{Model: "gpt-5-mini", MaxTokens: 4000}})
	if oe != nil {
		t.Fatal(oe)
	}
	cat, _ := pricing.Default()
	want, err := cat.Cost("openai", "gpt-5-mini", out.Usage, time.Now())
	if err != nil || want == 0 {
		t.Fatal(err)
	}
	if out.Model != "ft:gpt-5-mini:acme:0042" || out.Cost != want || out.Unpriced || out.Attempts[0].Unpriced {
		t.Errorf("answer %s cost %s unpriced %v; want %s", out.Model, out.Cost, out.Unpriced, want)
	}
	rows, _ := st.Attempts(context.Background(), ledger.Filter{Task: "t1"})
	if b, _ := st.Budget(context.Background(), ledger.TaskScope("t1")); len(rows) != 1 || rows[0].Cost != want || rows[0].Unpriced || b.Spent != want {
		t.Errorf("ledger rows %+v, task spent %s; want %s", rows, b.Spent, want)
	}
}

// unpricedWorld fails anthropic over (quota) to an OpenAI-compatible
// endpoint whose model the catalog does not list: its estimate is skipped
// (only the first candidate must be priced), so the call runs, and neither
// the answer's model nor the requested one can be priced.
func unpricedWorld(t *testing.T, st ledger.Store) (*world, *openaifake.Server) {
	srv := openaifake.New(openaifake.WithAPIKey("ok"))
	t.Cleanup(srv.Close)
	cat, _ := pricing.Default()
	a, err := openaicompat.New(provider.Settings{Name: "private", Profile: "openai", BaseURL: srv.URL() + "/v1", Credentials: map[string]string{"api_key": "ok"}, Pricer: cat,
		Models: map[provider.Tier]string{provider.TierBalanced: "acme-private-1"}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Endpoints = []orchestrator.Endpoint{s.Endpoints[0], {Name: "private", Adapter: a}}
		s.Preference, s.AllowAlternates, s.Ledger = []string{"anthropic", "private"}, true, st
	})
	w.anth.Enqueue(anthropicfake.BillingError())
	srv.Enqueue(openaifake.Reply{Text: "ok", Usage: openaifake.Usage{Prompt: 50, Completion: 10}})
	return w, srv
}

// When neither model is priced, the attempt is charged the reservation (the
// upper bound), flagged unpriced in the ledger and said at the time of the
// call; streamed or not.
func TestUnpricedAnswerIsChargedTheReservation(t *testing.T) {
	for _, stream := range []bool{false, true} {
		st := openLedger(t)
		w, _ := unpricedWorld(t, st)
		call := orchestrator.Call{Agent: "builder", Task: "t1", Request: provider.Request{Prompt: "hi", MaxTokens: 1000}}
		var res *provider.Result
		var attempts []orchestrator.Attempt
		var estimate provider.Money
		if stream {
			s, err := w.o.Stream(context.Background(), call)
			if err != nil {
				t.Fatal(err)
			}
			if res, err = provider.Collect(s); err != nil {
				t.Fatal(err)
			}
			attempts, estimate = s.Attempts(), s.Estimate()
		} else {
			out, oe := w.invoke(t, call)
			if oe != nil {
				t.Fatal(oe)
			}
			res, attempts, estimate = out.Result, out.Attempts, out.Estimate
		}
		if got := path(attempts); got != "anthropic/claude-sonnet-4-6:quota_exhausted private/acme-private-1:ok" {
			t.Fatalf("stream %v: attempts %s", stream, got)
		}
		last := attempts[1]
		if estimate <= 0 || !last.Unpriced || last.Cost != estimate || !res.Unpriced || res.Cost != estimate {
			t.Errorf("stream %v: estimate %s; attempt cost %s unpriced %v; result cost %s unpriced %v", stream, estimate, last.Cost, last.Unpriced, res.Cost, res.Unpriced)
		}
		ctx := context.Background()
		rows, _ := st.Attempts(ctx, ledger.Filter{Task: "t1"})
		rep, _ := st.Spend(ctx, ledger.Filter{Task: "t1"})
		b, _ := st.Budget(ctx, ledger.TaskScope("t1"))
		if len(rows) != 2 || rows[0].Unpriced || !rows[1].Unpriced || rows[1].Cost != estimate || rep.Total.Unpriced != 1 || b.Spent != estimate || b.Held != 0 {
			t.Errorf("stream %v: rows %+v, spend %+v, task %+v", stream, rows, rep.Total, b)
		}
		w.drain()
		w.mu.Lock()
		var said bool
		for _, n := range w.notes {
			said = said || (n.Event == "unpriced_call" && n.Level == "warning" && n.Provider == "private" &&
				strings.Contains(n.Message, `"acme-private-1"`) && strings.Contains(n.Message, "pricing.catalog_files") && strings.Contains(n.Message, "$"+estimate.String()))
		}
		w.mu.Unlock()
		if !said {
			t.Errorf("stream %v: no unpriced_call warning naming the model and the fix: %+v", stream, w.notes)
		}
	}
}

// A local server's models are free: an answer from one, whatever model id
// it names, is priced at zero and not flagged, with or without a ledger.
func TestLocalAnswersStayFree(t *testing.T) {
	st := openLedger(t)
	srv := openaifake.New(openaifake.WithFlavor(openaifake.FlavorOllama))
	t.Cleanup(srv.Close)
	cat, _ := pricing.Default()
	a, err := openaicompat.New(provider.Settings{Name: "local", Profile: "ollama", BaseURL: srv.URL() + "/v1", Pricer: cat,
		Models: map[provider.Tier]string{provider.TierBalanced: "qwen3:8b"}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, func(s *orchestrator.Settings) {
		s.Endpoints, s.Preference, s.Ledger = []orchestrator.Endpoint{{Name: "local", Adapter: a}}, []string{"local"}, st
	})
	srv.Enqueue(openaifake.Reply{Text: "ok", Model: "my-own-build:latest", Usage: openaifake.Usage{Prompt: 50, Completion: 10}})
	out, oe := w.invoke(t, orchestrator.Call{Agent: "builder", Task: "t1"})
	if oe != nil {
		t.Fatal(oe)
	}
	rows, _ := st.Attempts(context.Background(), ledger.Filter{Task: "t1"})
	if out.Cost != 0 || out.Unpriced || out.Estimate != 0 || len(rows) != 1 || rows[0].Unpriced || rows[0].Cost != 0 {
		t.Errorf("local answer cost %s unpriced %v estimate %s; rows %+v", out.Cost, out.Unpriced, out.Estimate, rows)
	}
}
