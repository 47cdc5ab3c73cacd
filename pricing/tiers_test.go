package pricing

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Web searches cost the namespace's per-search price on top of the
// tokens: USD 10 per 1,000 on Anthropic and OpenAI.
func TestCostPricesWebSearches(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-12-05")
	for _, tt := range []struct{ ns, model string }{
		{"anthropic", "claude-sonnet-4-6"},
		{"anthropic", "claude-opus-5-5"},
		{"openai", "gpt-5"},
		{"openai", "gpt-5.6-terra"},
	} {
		u := provider.Usage{InputTokens: 1000, OutputTokens: 100}
		tokens, err := c.Cost(tt.ns, tt.model, u, at)
		if err != nil {
			t.Fatal(err)
		}
		u.WebSearchRequests = 3
		got, err := c.Cost(tt.ns, tt.model, u, at)
		if err != nil {
			t.Fatal(err)
		}
		if want := tokens + provider.MustMoney("0.03"); got != want {
			t.Errorf("%s/%s: 3 searches cost %s, want the tokens %s + 3 × 0.01 = %s", tt.ns, tt.model, got, tokens, want)
		}
	}
	// A namespace with no per-search price cannot price a search: the
	// cost is refused, not settled without it.
	_, err := c.Cost("gemini", "gemini-2.5-pro", provider.Usage{InputTokens: 10, WebSearchRequests: 1}, at)
	if !errors.Is(err, ErrUnpriced) || !strings.Contains(err.Error(), "web_search") || !strings.Contains(err.Error(), "gemini") {
		t.Errorf("search on a namespace without a price: %v", err)
	}
	if got, err := c.Cost("ollama", "llama3.2", provider.Usage{WebSearchRequests: 5}, at); got != 0 || err != nil {
		t.Errorf("local search cost = %s, %v; want an explicit zero", got, err)
	}
}

// A model's own web_search replaces the namespace's, and the price in
// force when the call ran is the one billed.
func TestWebSearchOverrideAndPeriods(t *testing.T) {
	cat, err := Parse("p.yaml", []byte(`version: "p1"
currency: USD
unit: per_million_tokens
providers:
  acme:
    web_search:
      source: contract
      prices:
        - {effective: "2026-01-01", per_thousand: "10.00"}
        - {effective: "2026-06-01", per_thousand: "25.00"}
    models:
      plain:
        context_window: 1000
        max_output_tokens: 100
        source: contract
        prices: [{effective: "2026-01-01", input: "0", output: "0"}]
      own:
        context_window: 1000
        max_output_tokens: 100
        source: contract
        prices: [{effective: "2026-01-01", input: "0", output: "0"}]
        web_search:
          source: contract
          prices: [{effective: "2026-01-01", per_thousand: "0.5"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	u := provider.Usage{WebSearchRequests: 3}
	for _, tt := range []struct {
		model, at, want string
	}{
		{"plain", "2026-03-01", "0.03"},
		{"plain", "2026-06-01", "0.075"},
		{"plain", "2025-01-01", "0.03"}, // before every period: the first
		{"own", "2026-07-01", "0.0015"},
	} {
		got, err := cat.Cost("acme", tt.model, u, date(tt.at))
		if err != nil || got != provider.MustMoney(tt.want) {
			t.Errorf("%s at %s: 3 searches = %s, %v; want %s", tt.model, tt.at, got, err, tt.want)
		}
	}
	// Laid over the built-in catalog, a project's web_search replaces the
	// vendor's.
	o := mustDefault(t).Overlay(mustParse(t, `version: "p2"
currency: USD
unit: per_million_tokens
providers:
  anthropic:
    web_search:
      source: contract
      prices: [{effective: "2025-01-01", per_thousand: "7.00"}]
`))
	if got, _ := o.Cost("anthropic", "claude-haiku-4-5", provider.Usage{WebSearchRequests: 1000}, date("2026-12-05")); got != provider.MustMoney("7") {
		t.Errorf("overlaid search price: 1,000 searches = %s, want 7", got)
	}
}

func mustParse(t *testing.T, data string) *Catalog {
	t.Helper()
	c, err := Parse("test.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The service tier a usage reports picks its rate card: OpenAI's flex
// and Fast mode (priority, also reported as "fast") have their own,
// "default" is standard, names compare in lower case, and a tier the
// catalog has no card for on the model is priced at the model's dearest
// card, never below standard.
func TestCostPricesServiceTiers(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-12-05")
	// 100k prompt tokens (below every long-context tier) and 1M output.
	u := provider.UsageInclusive(100_000, 0, 0, 1_000_000)
	tests := []struct {
		ns, model, tier, want string
	}{
		{"openai", "gpt-5", "", "10.125"},             // 0.1 × 1.25 + 10
		{"openai", "gpt-5", "default", "10.125"},      // standard
		{"openai", "gpt-5", "auto", "10.125"},         // the project's tier, assumed standard
		{"openai", "gpt-5", "flex", "5.0625"},         // 0.1 × 0.625 + 5
		{"openai", "gpt-5", "priority", "20.25"},      // 0.1 × 2.50 + 20
		{"openai", "gpt-5", "fast", "20.25"},          // Fast mode is priority renamed
		{"openai", "gpt-5", " Priority ", "20.25"},    // compared in lower case
		{"openai", "gpt-5", "scale", "20.25"},         // unknown: the dearest card
		{"openai", "gpt-5.1", "flex", "20.25"},        // no flex card: the dearest
		{"openai", "gpt-5-nano", "priority", "0.405"}, // no priority card: standard (0.1 × 0.05 + 0.40), never flex
		{"openai", "gpt-5.5", "priority", "76.25"},    // 0.1 × 12.50 + 75
		{"openai", "gpt-5.6-terra", "flex", "6.10"},   // after the cut: 0.1 × 1 + 6
		{"openai", "gpt-5.6-terra", "fast", "24.40"},  // 0.1 × 4 + 24
		{"anthropic", "claude-sonnet-4-6", "standard", "15.3"},
		{"anthropic", "claude-sonnet-4-6", "priority", "15.3"}, // Priority Tier: no public price, standard
		{"anthropic", "claude-sonnet-4-6", "batch", "15.3"},    // unknown, no other card: standard
		{"anthropic", "claude-sonnet-4-6", "auto", "15.3"},
		{"anthropic", "claude-sonnet-4-6", "standard_only", "15.3"},
		{"gemini", "gemini-2.5-flash", "priority", "2.53"}, // no tiers listed: standard (0.1 × 0.30 + 2.50)
	}
	for _, tt := range tests {
		u.ServiceTier = tt.tier
		got, err := c.Cost(tt.ns, tt.model, u, at)
		if err != nil || got != provider.MustMoney(tt.want) {
			t.Errorf("%s/%s at tier %q: 100k in + 1M out = %s, %v; want %s", tt.ns, tt.model, tt.tier, got, err, tt.want)
		}
	}
	// Before the Terra price cut its own flex card applied.
	u.ServiceTier = "flex"
	if got, _ := c.Cost("openai", "gpt-5.6-terra", u, date("2026-07-10")); got != provider.MustMoney("7.625") {
		t.Errorf("gpt-5.6-terra flex before the cut = %s, want 7.625 (0.1 × 1.25 + 7.50)", got)
	}
	// Fast mode above 272k bills the whole request at its long-context card.
	big := provider.Usage{InputTokens: 300_000, OutputTokens: 1_000, ServiceTier: "priority"}
	if got, _ := c.Cost("openai", "gpt-5.6", big, at); got != provider.MustMoney("6.09") { // 300000×20 + 1000×90
		t.Errorf("gpt-5.6 priority over 272k = %s, want 6.09", got)
	}
}

// A project whose OpenAI default tier is Fast mode says so in its catalog
// file: laid over the built-in names, "" and auto then bill at priority,
// for the cost and for the estimate of a request that names no tier,
// while the other names stay as they were.
func TestProjectDefaultTier(t *testing.T) {
	c := mustDefault(t).Overlay(mustParse(t, `version: "p1"
currency: USD
unit: per_million_tokens
providers:
  openai:
    service_tiers:
      "": priority
      auto: priority
`))
	at := date("2026-12-05")
	u := provider.UsageInclusive(100_000, 0, 0, 1_000_000)
	for tier, want := range map[string]string{"": "20.25", "auto": "20.25", "default": "10.125", "flex": "5.0625"} {
		u.ServiceTier = tier
		if got, err := c.Cost("openai", "gpt-5", u, at); err != nil || got != provider.MustMoney(want) {
			t.Errorf("tier %q: %s, %v; want %s", tier, got, err, want)
		}
	}
	req := &provider.Request{Prompt: "hi", MaxTokens: 1000}
	got, _ := c.Estimate("openai", "gpt-5", req, nil, at)
	var acc provider.MoneyAccumulator
	acc.Add(provider.MustMoney("2.50"), c.BoundPrompt("openai", req, nil))
	acc.Add(provider.MustMoney("20"), 1000)
	if got != acc.Total() {
		t.Errorf("estimate of a request naming no tier = %s, want the priority rates' %s", got, acc.Total())
	}
	if std, _ := mustDefault(t).Estimate("openai", "gpt-5", req, nil, at); std >= got {
		t.Errorf("built-in estimate %s is not below the priority-default one %s", std, got)
	}
}

// For every model of the built-in catalog, in every period, an unknown
// tier costs at least what the standard rates and every card cost: a tier
// the catalog cannot price is never charged less than a known one.
func TestUnknownTierIsTheDearestCard(t *testing.T) {
	c := mustDefault(t)
	usages := []provider.Usage{
		{InputTokens: 1_000_000, OutputTokens: 10},
		{InputTokens: 10, OutputTokens: 1_000_000},
		provider.UsageInclusive(400_000, 100_000, 50_000, 20_000),
		{InputTokens: 300_000, CacheWriteTokens: 300_000, CacheWriteLongTokens: 300_000},
	}
	n := 0
	for _, m := range c.Models("") {
		ns := c.Namespaces[m.Namespace]
		for _, p := range m.Prices {
			for _, u := range usages {
				at := p.Effective.Time
				u.ServiceTier = "no-such-tier"
				unknown, err := c.Cost(m.Namespace, m.ID, u, at)
				if err != nil {
					t.Fatal(err)
				}
				if std := p.RateCard.Cost(u); unknown < std {
					t.Errorf("%s/%s from %s: unknown tier %s below standard %s", m.Namespace, m.ID, p.Effective, unknown, std)
				}
				for name, card := range p.ServiceTiers {
					n++
					if cc := card.Cost(u); unknown < cc {
						t.Errorf("%s/%s from %s: unknown tier %s below card %s's %s", m.Namespace, m.ID, p.Effective, unknown, name, cc)
					}
				}
				if _, known := ns.Cards(&p, u.ServiceTier); known {
					t.Errorf("%s: %q resolved as a known tier", m.Namespace, u.ServiceTier)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no model has a service tier card")
	}
}

// The catalog prices the service tiers the vendors publish: OpenAI's flex
// at half the standard rates (the Batch rates) and Fast mode at a premium
// (twice the standard rates, 2.5× on GPT-5.5, 1.8× on GPT-5 mini), on the
// models whose pages list them, and a card never cheaper than standard
// unless it is flex.
func TestOpenAIServiceTierCards(t *testing.T) {
	c := mustDefault(t)
	want := map[string][]string{ // model → its cards
		"gpt-5": {"flex", "priority"}, "gpt-5-mini": {"flex", "priority"}, "gpt-5-nano": {"flex"},
		"gpt-5.1": {"priority"}, "gpt-5.2": {"priority"},
		"gpt-5.4": {"flex", "priority"}, "gpt-5.4-mini": {"flex", "priority"}, "gpt-5.4-nano": {"flex"},
		"gpt-5.5": {"flex", "priority"}, "gpt-5.6": {"flex", "priority"}, "gpt-5.6-terra": {"flex", "priority"},
		"gpt-5.6-luna": {"flex", "priority"}, "gpt-6-sol": {"priority"}, "gpt-6-luna": {"priority"}, "gpt-6.1-terra": {"priority"},
	}
	premium := map[string][2]int64{"gpt-5.5": {5, 2}, "gpt-5-mini": {9, 5}} // 2.5×, 1.8×
	for _, m := range c.Models("openai") {
		cards, ok := want[m.ID]
		if !ok {
			t.Errorf("openai/%s: no expectation for its service tiers; add it to this test", m.ID)
			continue
		}
		for _, p := range m.Prices {
			if got := slices.Sorted(maps.Keys(p.ServiceTiers)); !slices.Equal(got, cards) {
				t.Errorf("openai/%s from %s: cards %v, want %v", m.ID, p.Effective, got, cards)
			}
			if f := p.ServiceTiers["flex"]; f != nil {
				if f.Input*2 != p.Input || f.Output*2 != p.Output || f.cacheRead()*2 != p.cacheRead() || f.cacheWrite()*2 != p.cacheWrite() {
					t.Errorf("openai/%s from %s: flex %s/%s/%s/%s is not half of %s/%s/%s/%s", m.ID, p.Effective, f.Input, f.Output, f.cacheRead(), f.cacheWrite(), p.Input, p.Output, p.cacheRead(), p.cacheWrite())
				}
				if len(f.Above) != len(p.Above) {
					t.Errorf("openai/%s from %s: flex has %d long-context tiers, the standard rates %d", m.ID, p.Effective, len(f.Above), len(p.Above))
				}
			}
			if pr := p.ServiceTiers["priority"]; pr != nil {
				mult, ok := premium[m.ID]
				if !ok {
					mult = [2]int64{2, 1}
				}
				scale := func(x provider.Money) provider.Money { return x * provider.Money(mult[0]) / provider.Money(mult[1]) }
				if pr.Input != scale(p.Input) || pr.Output != scale(p.Output) || pr.cacheRead() != scale(p.cacheRead()) || pr.cacheWrite() != scale(p.cacheWrite()) {
					t.Errorf("openai/%s from %s: priority %s/%s/%s/%s is not %d/%d × %s/%s/%s/%s", m.ID, p.Effective, pr.Input, pr.Output, pr.cacheRead(), pr.cacheWrite(), mult[0], mult[1], p.Input, p.Output, p.cacheRead(), p.cacheWrite())
				}
			}
		}
	}
}

// Anthropic bills cache writes with the 5-minute lifetime at 1.25× the
// input rate and with the 1-hour lifetime at 2× (the pricing page), on
// every model, period and long-context tier; a long write priced at the
// short rate would bill 1-hour writes 37.5% low.
func TestAnthropicCacheWriteRates(t *testing.T) {
	c := mustDefault(t)
	n := 0
	for _, m := range c.Models("anthropic") {
		for _, p := range m.Prices {
			rates := []Rates{p.Rates}
			for _, tier := range p.Above {
				rates = append(rates, tier.Rates)
			}
			for i, r := range rates {
				n++
				if r.CacheWrite == nil || *r.CacheWrite != r.Input*5/4 {
					t.Errorf("%s from %s, rates %d: cache_write %s; want 1.25 × input %s", m.ID, p.Effective, i, money(r.CacheWrite), r.Input)
				}
				if r.CacheWriteLong == nil || *r.CacheWriteLong != r.Input*2 {
					t.Errorf("%s from %s, rates %d: cache_write_long %s; want 2 × input %s", m.ID, p.Effective, i, money(r.CacheWriteLong), r.Input)
				}
			}
		}
	}
	if n < 15 {
		t.Fatalf("checked %d rate sets", n)
	}
	// Cost bills the long writes, and only them, at the long rate.
	u := provider.UsageExclusive(0, 0, 1_000_000, 0)
	u.CacheWriteLongTokens = 400_000
	got, _ := c.Cost("anthropic", "claude-haiku-4-5", u, date("2026-12-05"))
	if want := provider.MustMoney("1.55"); got != want { // 600000×1.25 + 400000×2
		t.Errorf("haiku 4.5, 600k 5-minute and 400k 1-hour writes = %s, want %s", got, want)
	}
}

// The loader refuses a bad service tier or web search entry at its line.
func TestParseRejectsBadTiersAndSearches(t *testing.T) {
	head := "version: \"x\"\ncurrency: USD\nunit: per_million_tokens\nproviders:\n  acme:\n"
	model := "    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: s\n        prices:\n          - effective: \"2026-01-01\"\n            input: \"1\"\n            output: \"2\"\n"
	tests := []struct {
		name, body, want string
	}{
		{"card no name bills at", "    service_tiers: {flex: flex}\n" + model + "            service_tiers:\n              priority: {input: \"2\", output: \"4\"}\n",
			`bad.yaml:17:25: providers.acme.models.m1.prices[0].service_tiers.priority: no name in providers.acme.service_tiers is billed at "priority"`},
		{"card named standard", model + "            service_tiers:\n              standard: {input: \"2\", output: \"4\"}\n",
			`bad.yaml:16:25: providers.acme.models.m1.prices[0].service_tiers.standard: the standard rates are the period's own`},
		{"negative card rate", model + "            service_tiers:\n              flex: {input: \"-1\", output: \"4\"}\n",
			`providers.acme.models.m1.prices[0].service_tiers.flex.input must not be negative`},
		{"card tiers unsorted", model + "            service_tiers:\n              flex:\n                input: \"1\"\n                output: \"1\"\n                above:\n                  - {input_tokens: 500, input: \"2\", output: \"2\"}\n                  - {input_tokens: 100, input: \"3\", output: \"3\"}\n",
			`bad.yaml:21:36: providers.acme.models.m1.prices[0].service_tiers.flex.above[1].input_tokens must be positive and larger than the previous tier's`},
		{"upper-case tier name", "    service_tiers:\n      Priority: standard\n" + model,
			`bad.yaml:7:17: providers.acme.service_tiers.Priority: a service tier name is written in lower case`},
		{"tier maps to a list", "    service_tiers:\n      flex: [a]\n" + model,
			`bad.yaml:7:13: providers.acme.service_tiers.flex: expected the name of the rates it is billed at`},
		{"misspelt card key", model + "            service_tiers:\n              flex: {inptu: \"1\", output: \"2\"}\n",
			`unknown key "inptu" in providers.acme.models.m1.prices[0].service_tiers.flex`},
		{"tier billed at a card no model has", "    service_tiers:\n      priority: prority\n" + model,
			`bad.yaml:7:17: providers.acme.service_tiers.priority: no model of providers.acme has a "prority" rate card under its prices' service_tiers; write "standard" or a card name the models have (standard)`},
		{"search without price", "    web_search:\n      source: s\n      prices:\n        - {effective: \"2026-01-01\"}\n" + model,
			`bad.yaml:9:11: missing required key "per_thousand" in providers.acme.web_search.prices[0]`},
		{"negative search price", "    web_search:\n      source: s\n      prices:\n        - {effective: \"2026-01-01\", per_thousand: \"-10\"}\n" + model,
			`bad.yaml:9:51: providers.acme.web_search.prices[0].per_thousand must not be negative`},
		{"search periods unsorted", "    web_search:\n      source: s\n      prices:\n        - {effective: \"2026-02-01\", per_thousand: \"10\"}\n        - {effective: \"2026-01-01\", per_thousand: \"10\"}\n" + model,
			`bad.yaml:10:23: providers.acme.web_search.prices[1].effective 2026-01-01 must come after the previous period's 2026-02-01`},
		{"search with no periods", "    web_search:\n      source: s\n      prices: []\n" + model,
			`bad.yaml:8:15: providers.acme.web_search.prices needs at least one period`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(head+tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
	// The built-in catalog's web search sources are held to the citation
	// rule, as its models' are.
	cited := "version: \"2026-11-30\"\ncurrency: USD\nunit: per_million_tokens\nproviders:\n  acme:\n    web_search:\n      source: \"vendor page https://acme.example/pricing\"\n      prices: [{effective: \"2026-01-01\", per_thousand: \"10\"}]\n" +
		"    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: \"https://acme.example/pricing (read 2026-11-30)\"\n        prices:\n          - {effective: \"2026-01-01\", input: \"1\", output: \"2\"}\n"
	_, err := parse("bad.yaml", []byte(cited), true)
	if want := `bad.yaml:7:15: providers.acme.web_search.source: https://acme.example/pricing has no read date`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("uncited web search source: %v\nwant %q", err, want)
	}
}

// Every web search price of the built-in catalog cites its pages, read no
// later than the catalog's version, a vendor page among them.
func TestEmbeddedWebSearchCitesItsSources(t *testing.T) {
	c := mustDefault(t)
	reviewed := date(c.Version)
	for _, ns := range []string{"anthropic", "openai"} {
		w := c.Namespaces[ns].WebSearch
		if w == nil {
			t.Errorf("%s lists no web search price", ns)
			continue
		}
		cites, err := w.Citations()
		if err != nil || len(cites) == 0 {
			t.Errorf("%s web_search cites no page: %v", ns, err)
			continue
		}
		vendor := false
		for _, ct := range cites {
			if ct.Read.IsZero() || ct.Read.After(reviewed) {
				t.Errorf("%s web_search: %s read %q", ns, ct.URL, ct.Read)
			}
			vendor = vendor || strings.HasPrefix(ct.URL, vendorHosts[ns])
		}
		if !vendor {
			t.Errorf("%s web_search cites no page of %s", ns, vendorHosts[ns])
		}
		if got := w.At(time.Now()); got != provider.MustMoney("10") {
			t.Errorf("%s web search = %s per 1,000, want 10", ns, got)
		}
	}
}
