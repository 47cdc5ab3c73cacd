package orchestrator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// BenchmarkInvoke compares one non-streaming call through the orchestrator
// (routing, failure policy, adapter, usage and cost) with the bare official
// SDK call to the same loopback fake, in the same run, without and with the
// ledger and budgets. docs/benchmarks.md records the figures; the target is
// at most 15% added.
func BenchmarkInvoke(b *testing.B) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey("bench-key"), anthropicfake.WithSeed(1), anthropicfake.WithDefaultReply(func(anthropicfake.Recorded) anthropicfake.Reply {
		return anthropicfake.Reply{Text: "The answer is 42.", Usage: anthropicfake.Usage{Input: 12, Output: 6}}
	}))
	defer srv.Close()
	ctx := context.Background()

	b.Run("bare-sdk", func(b *testing.B) {
		client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL()), option.WithAPIKey("bench-key"), option.WithMaxRetries(0))
		params := sdk.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 256, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("What is the answer?"))}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := client.Messages.New(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	})
	cat, err := pricing.Default()
	if err != nil {
		b.Fatal(err)
	}
	// The adapter alone (its own request mapping, codec, usage and cost),
	// without the orchestrator: what the orchestrator's own work adds is
	// measured against it.
	b.Run("adapter", func(b *testing.B) {
		a, err := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": "bench-key"}, Pricer: cat})
		if err != nil {
			b.Fatal(err)
		}
		req := provider.Request{Prompt: "What is the answer?", MaxTokens: 256}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Invoke(ctx, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	run := func(b *testing.B, st ledger.Store) {
		a, err := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": "bench-key"}, Pricer: cat})
		if err != nil {
			b.Fatal(err)
		}
		o, err := orchestrator.New(orchestrator.Settings{Endpoints: []orchestrator.Endpoint{{Name: "anthropic", Adapter: a}}, Ledger: st})
		if err != nil {
			b.Fatal(err)
		}
		if st != nil {
			for _, sc := range []ledger.Scope{ledger.TaskScope("bench"), ledger.MonthScope(time.Now())} {
				if err := st.SetBudget(ctx, sc, 1000*provider.Dollar); err != nil {
					b.Fatal(err)
				}
			}
		}
		call := orchestrator.Call{Agent: "builder", Task: "bench", Request: provider.Request{Prompt: "What is the answer?", MaxTokens: 256}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := o.Invoke(ctx, call); err != nil {
				b.Fatal(err)
			}
		}
		// The time counts applying everything the calls settled to the
		// store.
		if f, ok := st.(*ledger.Fast); ok {
			if err := f.Drain(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if st != nil {
			rep, err := st.Spend(ctx, ledger.Filter{Task: "bench"})
			if err != nil || rep.Total.Attempts < int64(b.N) {
				b.Fatalf("ledger has %d attempts for %d calls: %v", rep.Total.Attempts, b.N, err)
			}
		}
	}
	b.Run("orchestrator", func(b *testing.B) { run(b, nil) })
	// With the ledger and budgets on: a task and a month budget, every call
	// estimated, admitted and settled with its ledger row.
	b.Run("orchestrator+ledger", func(b *testing.B) {
		dir := b.TempDir()
		st, err := ledger.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		f, err := ledger.NewFast(ctx, st, filepath.Join(dir, "journal"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		run(b, f)
	})
	// The same with every call reserved and settled in the store itself
	// (store.fast_path: false).
	b.Run("orchestrator+ledger-direct", func(b *testing.B) {
		st, err := ledger.OpenSQLite(ctx, filepath.Join(b.TempDir(), "state.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		run(b, st)
	})
}
