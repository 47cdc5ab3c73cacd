package pricing

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// A relayed request's body holds bytes the decoded request does not
// model: the prompt bound counts each as a token, unscaled (one token per
// byte is already the ceiling), in every namespace.
func TestBoundPromptCountsUnmodeledBytes(t *testing.T) {
	c := mustDefault(t)
	for _, ns := range []string{"anthropic", "openai", "gemini", "no-such-namespace"} {
		req := &provider.Request{System: "You are terse.", Prompt: strings.Repeat("Explain channels. ", 40)}
		base := c.BoundPrompt(ns, req, nil)
		req.Native = &provider.Native{Protocol: provider.ProtoMessages, UnmodeledBytes: 12345}
		if got := c.BoundPrompt(ns, req, nil); got != base+12345 {
			t.Errorf("%s: bound with 12,345 unmodeled bytes = %d, want %d + 12345", ns, got, base)
		}
		req.Native.UnmodeledBytes = -5 // never lowers the bound
		if got := c.BoundPrompt(ns, req, nil); got != base {
			t.Errorf("%s: negative unmodeled bytes changed the bound to %d from %d", ns, got, base)
		}
	}
}

// The estimate of a relayed request prices its unmodeled bytes as prompt
// tokens at the dearest input-side rate (the body may ask for a cache
// write the decoded request does not show), its web searches at the
// per-search price, and everything at the rate card of the service tier
// its body asks for.
func TestEstimatePricesRelayedRequest(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-12-05")
	est := func(ns, model string, n *provider.Native) provider.Money {
		t.Helper()
		req := &provider.Request{Prompt: "Summarise the attached pages.", MaxTokens: 1000, Native: n}
		got, err := c.Estimate(ns, model, req, nil, at)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := func(ns string, n *provider.Native, inRate, outRate string, searches int64) provider.Money {
		req := &provider.Request{Prompt: "Summarise the attached pages.", MaxTokens: 1000, Native: n}
		var acc provider.MoneyAccumulator
		acc.Add(provider.MustMoney(inRate), c.BoundPrompt(ns, req, nil))
		acc.Add(provider.MustMoney(outRate), 1000)
		return acc.Total() + provider.Money(searches)*provider.MustMoney("0.01")
	}
	tests := []struct {
		name, ns, model string
		native          *provider.Native
		in, out         string
		searches        int64
	}{
		// Sonnet 4.6: 3 in, 15 out, 1-hour cache write 6.
		{"anthropic bytes and searches", "anthropic", "claude-sonnet-4-6", &provider.Native{UnmodeledBytes: 50_000, WebSearches: 5}, "6", "15", 5},
		{"anthropic priority is standard", "anthropic", "claude-sonnet-4-6", &provider.Native{UnmodeledBytes: 10, ServiceTier: "priority"}, "6", "15", 0},
		// Decoded whole, no 1-hour mark: the 5-minute write, 3.75.
		{"anthropic decoded whole", "anthropic", "claude-sonnet-4-6", &provider.Native{}, "3.75", "15", 0},
		// gpt-5: no cache write rate, so the dearest input-side rate is input.
		{"openai default", "openai", "gpt-5", &provider.Native{UnmodeledBytes: 1000, WebSearches: 2}, "1.25", "10", 2},
		{"openai priority", "openai", "gpt-5", &provider.Native{UnmodeledBytes: 1000, ServiceTier: "priority"}, "2.50", "20", 0},
		{"openai flex", "openai", "gpt-5", &provider.Native{UnmodeledBytes: 1000, ServiceTier: "flex", WebSearches: 1}, "0.625", "5", 1},
		{"openai unknown tier", "openai", "gpt-5", &provider.Native{ServiceTier: "ultrafast"}, "2.50", "20", 0},
		{"openai flex on a model without it", "openai", "gpt-5.2", &provider.Native{ServiceTier: "flex"}, "3.50", "28", 0},
		// gpt-5.6-terra after the cut: Fast mode 4 in, 24 out, cache write 5.
		{"openai fast with a cache write rate", "openai", "gpt-5.6-terra", &provider.Native{ServiceTier: "fast"}, "5", "24", 0},
	}
	for _, tt := range tests {
		if got, w := est(tt.ns, tt.model, tt.native), want(tt.ns, tt.native, tt.in, tt.out, tt.searches); got != w {
			t.Errorf("%s: estimate %s, want %s", tt.name, got, w)
		}
	}
	// A request that is not relayed is estimated as before: the standard
	// input rate unless it asks for caching.
	plain := &provider.Request{Prompt: "Summarise the attached pages.", MaxTokens: 1000}
	got, _ := c.Estimate("anthropic", "claude-sonnet-4-6", plain, nil, at)
	var acc provider.MoneyAccumulator
	acc.Add(provider.MustMoney("3"), c.BoundPrompt("anthropic", plain, nil))
	acc.Add(provider.MustMoney("15"), 1000)
	if got != acc.Total() {
		t.Errorf("plain request estimate %s, want %s", got, acc.Total())
	}
	// Searches where the catalog has no per-search price cannot be
	// bounded: the request is refused, not under-reserved.
	_, err := c.Estimate("gemini", "gemini-2.5-flash", &provider.Request{Prompt: "x", MaxTokens: 10, Native: &provider.Native{WebSearches: 1}}, nil, at)
	if !errors.Is(err, ErrUnpriced) {
		t.Errorf("searches on gemini: %v, want ErrUnpriced", err)
	}
}

// reportedTiers returns the service tiers a provider can report for a
// request asking for tier on a model priced at p: the names billed at the
// same rates; for a priority request also the standard names (a priority
// request may be served, and billed, at standard); for a tier the catalog
// cannot price, any name at all.
func reportedTiers(ns *Namespace, p *Price, tier string) []string {
	names := append(slices.Sorted(maps.Keys(ns.ServiceTiers)), "")
	billedAt := func(target string) []string {
		var out []string
		for _, n := range names {
			ref, ok := ns.ServiceTiers[n]
			if (ok && ref.Name == target) || (n == "" && !ok && target == StandardTier) {
				out = append(out, n)
			}
		}
		return out
	}
	t := strings.ToLower(strings.TrimSpace(tier))
	ref, ok := ns.ServiceTiers[t]
	switch {
	case t == "" && !ok, ok && ref.Name == StandardTier:
		return billedAt(StandardTier)
	case ok && p.ServiceTiers[ref.Name] != nil:
		out := billedAt(ref.Name)
		if ref.Name == "priority" {
			out = append(out, billedAt(StandardTier)...)
		}
		return out
	}
	return append(names, "no-such-tier")
}

// Property: for any request, relayed or not, the estimate is an upper
// bound of the cost of every usage the request can produce: a prompt of at
// most its bound (cached, written to the cache with either lifetime when
// the request can ask for it), output up to the output limit, up to its
// web searches, at any service tier its request can be billed at; on every
// Anthropic and OpenAI model, in every price period.
func TestEstimateBoundsCostOfAnyUsage(t *testing.T) {
	c := mustDefault(t)
	rng := rand.New(rand.NewPCG(20261205, 31))
	var models []*Model
	for _, ns := range []string{"anthropic", "openai"} {
		models = append(models, c.Models(ns)...)
	}
	texts := []string{
		"Explain goroutines and channels with an example.",
		strings.Repeat("func main() {\n\tfmt.Println(\"hello\")\n}\n", 30),
		strings.Repeat("漢字仮名交じり文。", 40),
		strings.Repeat("=", 3000),
	}
	tiers := []string{"", "auto", "AUTO", "default", "standard", "standard_only", "flex", "priority", "fast", "scale", "ultrafast", "batch"}
	caches := []provider.PromptCache{provider.PromptCacheOff, provider.PromptCache5m, provider.PromptCache1h}
	pick := func(n int64) int64 { // 0..n, often an end
		switch rng.IntN(4) {
		case 0:
			return n
		case 1:
			return 0
		}
		return rng.Int64N(n + 1)
	}
	checked := 0
	for i := 0; i < 1500; i++ {
		m := models[rng.IntN(len(models))]
		ns := c.Namespaces[m.Namespace]
		p := &m.Prices[rng.IntN(len(m.Prices))]
		at := p.Effective.AddDate(0, 0, rng.IntN(20))
		if next := slices.IndexFunc(m.Prices, func(q Price) bool { return q.Effective.After(p.Effective.Time) }); next >= 0 && !at.Before(m.Prices[next].Effective.Time) {
			at = p.Effective.Time
		}
		req := &provider.Request{System: texts[rng.IntN(len(texts))], Prompt: texts[rng.IntN(len(texts))], MaxTokens: 1 + rng.IntN(200_000)}
		relayed := rng.IntN(4) != 0
		if relayed {
			req.Native = &provider.Native{
				Protocol:       provider.ProtoMessages,
				UnmodeledBytes: []int64{0, 100, 40_000, 280_000, 700_000}[rng.IntN(5)] + rng.Int64N(1000),
				WebSearches:    rng.Int64N(12),
				ServiceTier:    tiers[rng.IntN(len(tiers))],
			}
		} else {
			req.PromptCache = caches[rng.IntN(len(caches))]
		}
		est, err := c.Estimate(m.Namespace, m.ID, req, nil, at)
		if err != nil {
			t.Fatalf("%s/%s: %v", m.Namespace, m.ID, err)
		}
		bound := c.BoundPrompt(m.Namespace, req, nil)
		outLimit := int64(m.OutputLimit(req.EffectiveMaxTokens()))
		var reported []string
		var searches int64
		if relayed {
			reported, searches = reportedTiers(ns, p, req.Native.ServiceTier), req.Native.WebSearches
		} else {
			reported = reportedTiers(ns, p, "")
		}
		for j := 0; j < 25; j++ {
			u := provider.Usage{InputTokens: pick(bound), OutputTokens: pick(outLimit), WebSearchRequests: pick(searches), ServiceTier: reported[rng.IntN(len(reported))]}
			u.CacheReadTokens = pick(u.InputTokens)
			if relayed || req.PromptCache != provider.PromptCacheOff {
				u.CacheWriteTokens = pick(u.InputTokens - u.CacheReadTokens)
			}
			if relayed || req.PromptCache == provider.PromptCache1h {
				u.CacheWriteLongTokens = pick(u.CacheWriteTokens)
			}
			cost, err := c.Cost(m.Namespace, m.ID, u, at)
			if err != nil {
				t.Fatalf("%s/%s: %v", m.Namespace, m.ID, err)
			}
			checked++
			if cost > est {
				t.Fatalf("%s/%s at %s: usage %+v costs %s, above the estimate %s of %s", m.Namespace, m.ID, at.Format(time.DateOnly), u, cost, est, describe(req, bound, outLimit))
			}
		}
	}
	if checked < 30000 {
		t.Fatalf("checked %d usages", checked)
	}
}

func describe(req *provider.Request, bound, outLimit int64) string {
	s := fmt.Sprintf("a request bounded at %d prompt tokens and %d output, cache %q", bound, outLimit, req.PromptCache)
	if n := req.Native; n != nil {
		s += fmt.Sprintf(", relayed with %d unmodeled bytes, %d searches, tier %q", n.UnmodeledBytes, n.WebSearches, n.ServiceTier)
	}
	return s
}

// A 1-hour mark on a part or a tool, not only on the prefix
// (PromptCache), prices the prompt at the 1-hour write: the adapter sends
// the mark where the caller put it.
func TestEstimatePricesTheLongestMark(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-12-05")
	req := &provider.Request{MaxTokens: 10, Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{
		{Type: provider.PartText, Text: strings.Repeat("cached context ", 100), Cache: provider.PromptCache5m},
		{Type: provider.PartText, Text: "question", Cache: provider.PromptCache1h},
	}}}}
	got, err := c.Estimate("anthropic", "claude-sonnet-4-6", req, nil, at)
	if err != nil {
		t.Fatal(err)
	}
	var acc provider.MoneyAccumulator
	acc.Add(provider.MustMoney("6"), c.BoundPrompt("anthropic", req, nil))
	acc.Add(provider.MustMoney("15"), 10)
	if got != acc.Total() {
		t.Errorf("estimate %s; want %s, the prompt at the 1-hour write rate", got, acc.Total())
	}
}
