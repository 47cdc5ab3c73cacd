package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// A four-turn conversation through /v1/messages with the official SDK,
// once with the cache marks Claude Code puts (the system prompt, and the
// last block of the two latest user turns) and once without: the marks
// reach the provider where the client put them, the fake's prompt cache
// reads the history the earlier turns wrote, and the ledger prices it,
// turn by turn, as the usage says. The marked conversation costs less.
func TestCacheMarksCutTheCostOfAConversation(t *testing.T) {
	w := newWorld(t, withLedger, serveOn("claude"))
	ctx := ctxT(t)
	system := strings.Repeat("You are the builder. Follow the project's rules. ", 120) // about 1500 tokens
	turn := func(i int) string {
		return fmt.Sprintf("Turn %d: %s", i, strings.Repeat("please look at this file and change it ", 50))
	}
	cost := map[bool]provider.Money{}
	for _, marked := range []bool{false, true} {
		task := map[bool]string{false: "unmarked", true: "marked"}[marked]
		c := w.anthropic(w.key, aoption.WithHeader(gateway.HeaderTask, task))
		var turns []string
		var priced provider.Money
		for i := range 4 {
			turns = append(turns, turn(i))
			params := anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 100,
				System: []anthropic.TextBlockParam{{Text: system}}, Messages: conversation(turns, marked)}
			if marked {
				params.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
			}
			res, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatalf("%s turn %d: %v", task, i, err)
			}
			u := res.Usage
			if marked && i > 0 && u.CacheReadInputTokens == 0 {
				t.Errorf("marked turn %d read nothing from the cache: %+v", i, u)
			}
			if !marked && u.CacheReadInputTokens+u.CacheCreationInputTokens != 0 {
				t.Errorf("unmarked turn %d used the cache: %+v", i, u)
			}
			// Sonnet 4.6, per million: input 3, cache read 0.30, 5-minute
			// write 3.75, output 15.
			priced += provider.MustMoney(fmt.Sprintf("%.6f", float64(3*u.InputTokens)/1e6)) +
				provider.MustMoney(fmt.Sprintf("%.6f", float64(u.CacheReadInputTokens)*0.30/1e6)) +
				provider.MustMoney(fmt.Sprintf("%.6f", float64(u.CacheCreationInputTokens)*3.75/1e6)) +
				provider.MustMoney(fmt.Sprintf("%.6f", float64(15*u.OutputTokens)/1e6))
			turns = append(turns, res.Content[0].Text)
			if marked {
				sent := string(w.anth.Requests()[len(w.anth.Requests())-1].Body)
				if n := strings.Count(sent, `"cache_control"`); n != min(3, i+2) {
					t.Errorf("marked turn %d reached the provider with %d marks, want %d: %s", i, n, min(3, i+2), sent)
				}
			}
		}
		rep, err := w.store.Spend(context.Background(), ledger.Filter{Task: task})
		if err != nil {
			t.Fatal(err)
		}
		// Each turn's cost rounds up once in the ledger, by at most a
		// nano-dollar per price term.
		if d := rep.Total.Cost - priced; d < -provider.MustMoney("0.000004") || d > provider.MustMoney("0.000004") {
			t.Errorf("%s: the ledger says $%s, the usage prices at $%s", task, rep.Total.Cost, priced)
		}
		cost[marked] = rep.Total.Cost
	}
	t.Logf("four turns: $%s unmarked, $%s with cache marks", cost[false], cost[true])
	if cost[true] >= cost[false] {
		t.Errorf("marked conversation $%s, unmarked $%s: the marks saved nothing", cost[true], cost[false])
	}
}

// conversation builds the turns, user first; marked puts a cache mark on
// the two latest user turns, as Claude Code marks its conversation.
func conversation(turns []string, marked bool) []anthropic.MessageParam {
	out := make([]anthropic.MessageParam, len(turns))
	for i, text := range turns {
		b := anthropic.TextBlockParam{Text: text}
		if i%2 == 1 {
			out[i] = anthropic.NewAssistantMessage(anthropic.ContentBlockParamUnion{OfText: &b})
			continue
		}
		if marked && i >= len(turns)-3 {
			b.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		out[i] = anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &b})
	}
	return out
}
