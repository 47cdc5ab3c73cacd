package orchestrator_test

import (
	"path/filepath"

	"context"
	"testing"

	"github.com/cortexbuild/cortexbuild/ledger"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// BenchmarkInvoke compares one non-streaming call through the orchestrator
// (routing, failure policy, adapter, usage and cost) with the bare official
// SDK call to the same loopback fake, in the same run. docs/benchmarks.md
// records the figures; the target is at most 15% added.
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
	b.Run("orchestrator", func(b *testing.B) {
		cat, err := pricing.Default()
		if err != nil {
			b.Fatal(err)
		}
		a, err := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": "bench-key"}, Pricer: cat})
		if err != nil {
			b.Fatal(err)
		}
		o, err := orchestrator.New(orchestrator.Settings{Endpoints: []orchestrator.Endpoint{{Name: "anthropic", Adapter: a}}})
		if err != nil {
			b.Fatal(err)
		}
		call := orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "What is the answer?", MaxTokens: 256}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := o.Invoke(ctx, call); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInvokeWithLedger is BenchmarkInvoke's orchestrator case with the
// embedded ledger on: every call estimates, reserves against the month and
// task budgets, and settles with its ledger row.
func BenchmarkInvokeWithLedger(b *testing.B) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey("bench-key"), anthropicfake.WithSeed(1), anthropicfake.WithDefaultReply(func(anthropicfake.Recorded) anthropicfake.Reply {
		return anthropicfake.Reply{Text: "The answer is 42.", Usage: anthropicfake.Usage{Input: 12, Output: 6}}
	}))
	defer srv.Close()
	ctx := context.Background()
	cat, err := pricing.Default()
	if err != nil {
		b.Fatal(err)
	}
	st, err := ledger.OpenSQLite(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	a, _ := anthropic.New(provider.Settings{Name: "anthropic", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": "bench-key"}, Pricer: cat})
	o, err := orchestrator.New(orchestrator.Settings{Endpoints: []orchestrator.Endpoint{{Name: "anthropic", Adapter: a}}, Ledger: st})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.SetBudget(ctx, ledger.TaskScope("bench"), 1000*provider.Dollar); err != nil {
		b.Fatal(err)
	}
	call := orchestrator.Call{Agent: "builder", Task: "bench", Request: provider.Request{Prompt: "What is the answer?", MaxTokens: 256}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.Invoke(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}
