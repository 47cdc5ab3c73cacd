package pricing

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

func mustDefault(t *testing.T) *Catalog {
	t.Helper()
	c, err := Default()
	if err != nil {
		t.Fatalf("embedded catalog invalid: %v", err)
	}
	return c
}

func date(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestEmbeddedCatalogCoversTheSpec(t *testing.T) {
	c := mustDefault(t)
	required := map[string][]string{
		"anthropic": {"claude-opus-4-7", "claude-sonnet-4-6", "claude-haiku-4-5"},
		"openai":    {"gpt-5", "gpt-5-mini", "gpt-5-nano"},
		"gemini":    {"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"},
	}
	for ns, models := range required {
		for _, id := range models {
			m, local, err := c.Lookup(ns, id)
			if err != nil || local {
				t.Errorf("%s/%s: %v", ns, id, err)
				continue
			}
			if m.ContextWindow <= 0 || m.MaxOutputTokens <= 0 || m.Source == "" || len(m.Prices) == 0 {
				t.Errorf("%s/%s incomplete: %+v", ns, id, m)
			}
		}
	}
	for _, ns := range []string{"ollama", "vllm", "lmstudio"} {
		cost, err := c.Cost(ns, "llama3.2:latest", provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}, time.Time{})
		if err != nil || cost != 0 {
			t.Errorf("local %s cost = %s, %v; want explicit zero", ns, cost, err)
		}
	}
}

// Spot checks against the vendors' published list prices (USD per million).
func TestListPrices(t *testing.T) {
	c := mustDefault(t)
	tests := []struct {
		ns, model     string
		at            string
		input, output string
		cacheRead     string
	}{
		{"anthropic", "claude-opus-4-7", "2026-11-30", "5", "25", "0.5"},
		{"anthropic", "claude-sonnet-4-6", "2026-11-30", "3", "15", "0.3"},
		{"anthropic", "claude-haiku-4-5-20251001", "2026-11-30", "1", "5", "0.1"},
		{"anthropic", "claude-sonnet-5-5", "2026-10-01", "2", "10", "0.20"},
		{"anthropic", "claude-sonnet-5-5", "2026-10-07", "2", "10", "0.10"},
		{"openai", "gpt-5", "2026-11-30", "1.25", "10", "0.125"},
		{"openai", "gpt-5-mini-2025-08-07", "2026-11-30", "0.25", "2", "0.025"},
		{"openai", "gpt-5-nano", "2026-11-30", "0.05", "0.40", "0.005"},
		{"gemini", "models/gemini-2.5-flash", "2026-11-30", "0.30", "2.50", "0.03"},
		{"gemini", "gemini-2.5-flash-lite", "2026-11-30", "0.10", "0.40", "0.01"},
	}
	for _, tt := range tests {
		m, _, err := c.Lookup(tt.ns, tt.model)
		if err != nil {
			t.Errorf("%s: %v", tt.model, err)
			continue
		}
		p := m.PriceAt(date(tt.at))
		if p.Input != provider.MustMoney(tt.input) || p.Output != provider.MustMoney(tt.output) || p.CacheRead == nil || *p.CacheRead != provider.MustMoney(tt.cacheRead) {
			t.Errorf("%s at %s = in %s out %s read %s; want %s/%s/%s", tt.model, tt.at, p.Input, p.Output, money(p.CacheRead), tt.input, tt.output, tt.cacheRead)
		}
	}
}

func money(m *provider.Money) string {
	if m == nil {
		return "nil"
	}
	return m.String()
}

// The same call reported in each provider's convention costs the same, and a
// cached token is never billed twice (LiteLLM #9812, #6575).
func TestCostNoDoubleCounting(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-11-30")
	// Anthropic: input_tokens excludes cache reads and writes.
	// 1,000 uncached + 10,000 cache read + 2,000 cache write (5 m) + 500 output on Sonnet 4.6:
	// 1000×3 + 10000×0.30 + 2000×3.75 + 500×15 = 3000 + 3000 + 7500 + 7500 = 21000 per million = $0.021.
	u := provider.UsageExclusive(1000, 10000, 2000, 500)
	got, err := c.Cost("anthropic", "claude-sonnet-4-6", u, at)
	if err != nil || got != provider.MustMoney("0.021") {
		t.Errorf("anthropic cost = %s, %v; want 0.021", got, err)
	}
	// One-hour writes at 2× input: the 2,000 written with the long lifetime cost 2000×6 instead of 2000×3.75.
	u.CacheWriteLongTokens = 2000
	got, _ = c.Cost("anthropic", "claude-sonnet-4-6", u, at)
	if got != provider.MustMoney("0.0255") {
		t.Errorf("anthropic 1h cost = %s, want 0.0255", got)
	}
	// OpenAI: prompt_tokens 11,000 includes 10,000 cached. gpt-5: 1000×1.25 + 10000×0.125 + 500×10 = 7500 → $0.0075.
	got, err = c.Cost("openai", "gpt-5", provider.UsageInclusive(11000, 10000, 0, 500), at)
	if err != nil || got != provider.MustMoney("0.0075") {
		t.Errorf("openai cost = %s, %v; want 0.0075", got, err)
	}
	// Gemini: promptTokenCount 11,000 includes 10,000 cached; output includes thoughts.
	// 2.5 flash: 1000×0.30 + 10000×0.03 + (200+300)×2.50 = 300 + 300 + 1250 = 1850 → $0.00185.
	gu := provider.UsageInclusive(11000, 10000, 0, 200+300)
	gu.ReasoningTokens = 300
	got, err = c.Cost("gemini", "gemini-2.5-flash", gu, at)
	if err != nil || got != provider.MustMoney("0.00185") {
		t.Errorf("gemini cost = %s, %v; want 0.00185", got, err)
	}
}

func TestLongContextTierBillsWholeRequest(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-11-30")
	// gemini-2.5-pro: ≤200k at 1.25/10, above at 2.50/15 for the whole request.
	small, _ := c.Cost("gemini", "gemini-2.5-pro", provider.Usage{InputTokens: 200_000, OutputTokens: 1000}, at)
	large, _ := c.Cost("gemini", "gemini-2.5-pro", provider.Usage{InputTokens: 200_001, OutputTokens: 1000}, at)
	if small != provider.MustMoney("0.26") { // 200000×1.25 + 1000×10 = 260000
		t.Errorf("≤200k = %s, want 0.26", small)
	}
	if large != provider.MustMoney("0.5150025") { // 200001×2.5 + 1000×15 = 515002.5
		t.Errorf(">200k = %s, want 0.5150025", large)
	}
}

func TestEstimateIsUpperBound(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-11-30")
	req := &provider.Request{System: "You are terse.", Prompt: strings.Repeat("Explain goroutines and channels. ", 50), MaxTokens: 1000}
	est, err := c.Estimate("anthropic", "claude-sonnet-4-6", req, nil, at)
	if err != nil {
		t.Fatal(err)
	}
	// A call that used the whole output budget and the prompt as counted.
	in := CountRequestTokens(req)
	billed, _ := c.Cost("anthropic", "claude-sonnet-4-6", provider.Usage{InputTokens: in, OutputTokens: 1000}, at)
	if est < billed {
		t.Errorf("estimate %s below billed %s", est, billed)
	}
	// Asking for prompt caching raises the bound to the cache-write rate.
	req.PromptCache = provider.PromptCache1h
	cached, _ := c.Estimate("anthropic", "claude-sonnet-4-6", req, nil, at)
	worst, _ := c.Cost("anthropic", "claude-sonnet-4-6", provider.Usage{InputTokens: in, CacheWriteTokens: in, CacheWriteLongTokens: in, OutputTokens: 1000}, at)
	if cached < worst {
		t.Errorf("caching estimate %s below a full 1h cache write %s", cached, worst)
	}
	if _, err := c.Estimate("openai", "gpt-99", req, nil, at); !errors.Is(err, ErrUnpriced) {
		t.Errorf("unknown model estimate error = %v", err)
	}
}

func TestLookupErrors(t *testing.T) {
	c := mustDefault(t)
	_, _, err := c.Lookup("anthropic", "claude-sonet-4-6")
	if !errors.Is(err, ErrUnpriced) || !strings.Contains(err.Error(), `did you mean "claude-sonnet-4-6"`) {
		t.Errorf("misspelt model error = %v", err)
	}
	if _, _, err := c.Lookup("mistral", "x"); !errors.Is(err, ErrUnpriced) || !strings.Contains(err.Error(), "anthropic") {
		t.Errorf("unknown namespace error = %v", err)
	}
	if _, err := c.Find("gpt-5-mini"); err != nil {
		t.Errorf("Find = %v", err)
	}
	if _, err := c.Find("sonnet-4-6"); err == nil || !strings.Contains(err.Error(), `did you mean "claude-sonnet-4-6"`) {
		t.Errorf("partial id error = %v", err)
	}
}

// A model the catalog does not list is looked up on every call that
// answers with it: the miss costs a few allocations, whatever the size of
// the catalog, and the suggestion is built only when the message is read.
func TestFailedLookupIsCheap(t *testing.T) {
	c := mustDefault(t)
	var err error
	allocs := testing.AllocsPerRun(200, func() { _, _, err = c.Lookup("openai", "gpt-5-mni") })
	if allocs > 3 {
		t.Errorf("a failed lookup allocates %.0f times; want at most 3 (no suggestion built until the message is read)", allocs)
	}
	if !errors.Is(err, ErrUnpriced) || !strings.Contains(err.Error(), "did you mean") {
		t.Errorf("failed lookup error = %v; want ErrUnpriced with a suggestion", err)
	}
}

func TestCountTokensIsRealBPE(t *testing.T) {
	// o200k_base: "hello world" is two tokens; a character/4 rule would say 3.
	if n := CountTokens("hello world"); n != 2 {
		t.Errorf("CountTokens(hello world) = %d, want 2", n)
	}
	if CountTokens("") != 0 {
		t.Error("empty text has tokens")
	}
	withTools := &provider.Request{Prompt: "hi", Tools: []provider.ToolDef{{Name: "get_weather", InputSchema: []byte(`{"type":"object"}`)}}}
	if CountRequestTokens(withTools) <= CountRequestTokens(&provider.Request{Prompt: "hi"})+ToolSystemOverhead {
		t.Error("tool definitions not counted")
	}
}

func TestParseRejectsBadCatalogs(t *testing.T) {
	head := "version: \"x\"\ncurrency: USD\nunit: per_million_tokens\nproviders:\n"
	tests := []struct {
		name, body, want string
	}{
		{"missing output", "  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: s\n        prices:\n          - effective: \"2026-01-01\"\n            input: \"1\"\n",
			`bad.yaml:12:13: missing required key "output" in providers.acme.models.m1.prices[0]`},
		{"missing source", "  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        prices:\n          - {effective: \"2026-01-01\", input: \"1\", output: \"2\"}\n",
			`bad.yaml:8:9: missing required key "source"`},
		{"bad price", "  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: s\n        prices:\n          - {effective: \"2026-01-01\", input: \"one\", output: \"2\"}\n",
			`bad.yaml:12:46: providers.acme.models.m1.prices[0].input: invalid amount "one"`},
		{"misspelt key", "  acme:\n    models:\n      m1:\n        context_windw: 1000\n",
			`unknown key "context_windw" in providers.acme.models.m1 (did you mean "context_window"?)`},
		{"bad date", "  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: s\n        prices:\n          - {effective: \"Jan 1\", input: \"1\", output: \"2\"}\n",
			`invalid date "Jan 1": write YYYY-MM-DD`},
		{"unsorted periods", "  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: s\n        prices:\n          - {effective: \"2026-02-01\", input: \"1\", output: \"2\"}\n          - {effective: \"2026-01-01\", input: \"1\", output: \"2\"}\n",
			"sort periods oldest first"},
		{"negative", "  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: s\n        prices:\n          - {effective: \"2026-01-01\", input: \"-1\", output: \"2\"}\n",
			"input must not be negative"},
		{"local with models", "  acme:\n    local: true\n    models:\n      m1: {context_window: 1, max_output_tokens: 1, source: s, prices: [{effective: \"2026-01-01\", input: \"0\", output: \"0\"}]}\n",
			"is local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(head+tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestOverlayAddsModels(t *testing.T) {
	c := mustDefault(t)
	extra, err := Parse("extra.yaml", []byte(`version: "p1"
currency: USD
unit: per_million_tokens
providers:
  openai:
    models:
      my-finetune:
        context_window: 128000
        max_output_tokens: 16000
        source: contract
        prices:
          - {effective: "2026-01-01", input: "2", output: "8"}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Overlay(extra)
	got, err := o.Cost("openai", "my-finetune", provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}, time.Time{})
	if err != nil || got != 10*provider.Dollar {
		t.Errorf("overlay cost = %s, %v", got, err)
	}
	if _, _, err := o.Lookup("openai", "gpt-5"); err != nil {
		t.Errorf("overlay lost built-in models: %v", err)
	}
}

func TestFactorScale(t *testing.T) {
	var f Factor
	if err := f.UnmarshalText([]byte("1.35")); err != nil {
		t.Fatal(err)
	}
	if got := f.Scale(100); got != 135 {
		t.Errorf("Scale(100) = %d", got)
	}
	if got := f.Scale(1); got != 2 { // 1.35 rounds up
		t.Errorf("Scale(1) = %d", got)
	}
	var nilF *Factor
	if nilF.Scale(7) != 7 {
		t.Error("nil factor is not 1")
	}
	if err := f.UnmarshalText([]byte("-1")); err == nil {
		t.Error("negative factor accepted")
	}
}

// vendorHosts are the hosts of each namespace's own pricing and model pages.
var vendorHosts = map[string]string{
	"anthropic": "https://platform.claude.com/",
	"openai":    "https://developers.openai.com/",
	"gemini":    "https://ai.google.dev/",
}

// Every built-in price cites the pages it was read from: https URLs a
// reader can open, each with the date it was read, none after the review
// the catalog's version names, and among them the vendor's own page unless
// the entry says its figures are secondary.
func TestEmbeddedCatalogCitesItsSources(t *testing.T) {
	c := mustDefault(t)
	reviewed, err := time.Parse(time.DateOnly, c.Version)
	if err != nil {
		t.Fatalf("catalog version %q is not a review date: %v", c.Version, err)
	}
	models := c.Models("")
	if len(models) < 30 {
		t.Fatalf("only %d models in the built-in catalog", len(models))
	}
	for _, m := range models {
		cites, err := m.Citations()
		if err != nil || len(cites) == 0 {
			t.Errorf("%s/%s: source cites no page (%v): %q", m.Namespace, m.ID, err, m.Source)
			continue
		}
		vendor := false
		for _, ct := range cites {
			if !strings.HasPrefix(ct.URL, "https://") {
				t.Errorf("%s/%s: %s is not an https URL", m.Namespace, m.ID, ct.URL)
			}
			if ct.Read.IsZero() || ct.Read.After(reviewed) {
				t.Errorf("%s/%s: %s read %q; want a date no later than the catalog version %s", m.Namespace, m.ID, ct.URL, ct.Read, c.Version)
			}
			vendor = vendor || strings.HasPrefix(ct.URL, vendorHosts[m.Namespace])
		}
		if !vendor && !strings.HasPrefix(m.Source, "secondary") {
			t.Errorf("%s/%s: no page of %s cited and the source is not marked secondary: %q", m.Namespace, m.ID, vendorHosts[m.Namespace], m.Source)
		}
	}
}

// localPath matches what reads as a file path once URLs are taken out.
var localPath = regexp.MustCompile(`\S/\S|\.(md|json|ya?ml|go|txt)\b`)

// The catalog names no file a reader does not have: no reference notes
// outside the repository, no path in any source.
func TestEmbeddedCatalogNamesNoLocalFile(t *testing.T) {
	for _, s := range []string{"protocols.md", "shared/reference", "../"} {
		if strings.Contains(string(embeddedCatalog), s) {
			t.Errorf("%s names %q", EmbeddedFile, s)
		}
	}
	for _, m := range mustDefault(t).Models("") {
		rest := citedURL.ReplaceAllString(m.Source, "")
		if p := localPath.FindString(rest); p != "" {
			t.Errorf("%s/%s: source names a path (%q): %q", m.Namespace, m.ID, p, m.Source)
		}
	}
}

// The built-in catalog is parsed strictly: a source without a page, or a
// page without an https URL or a read date, is refused at its line.
func TestParseCitedRejectsUncitedSources(t *testing.T) {
	catalog := func(version, source string) string {
		return "version: \"" + version + "\"\ncurrency: USD\nunit: per_million_tokens\nproviders:\n  acme:\n    models:\n      m1:\n        context_window: 1000\n        max_output_tokens: 100\n        source: \"" + source + "\"\n        prices:\n          - {effective: \"2026-01-01\", input: \"1\", output: \"2\"}\n"
	}
	tests := []struct {
		name, version, source, want string
	}{
		{"no page", "2026-11-30", "vendor pricing page, read 2026-11-30",
			`bad.yaml:10:17: providers.acme.models.m1.source names no page the prices were read from`},
		{"no read date", "2026-11-30", "https://acme.example/pricing",
			`bad.yaml:10:17: providers.acme.models.m1.source: https://acme.example/pricing has no read date`},
		{"second page without date", "2026-11-30", "https://acme.example/pricing (read 2026-11-30); agrees: https://mirror.example/prices.json",
			`bad.yaml:10:17: providers.acme.models.m1.source: https://mirror.example/prices.json has no read date`},
		{"not https", "2026-11-30", "http://acme.example/pricing (read 2026-11-30)",
			`bad.yaml:10:17: providers.acme.models.m1.source: http://acme.example/pricing is not an https URL`},
		{"read after the review", "2026-11-30", "https://acme.example/pricing (read 2026-12-01)",
			`bad.yaml:10:17: providers.acme.models.m1.source: https://acme.example/pricing was read 2026-12-01, after the catalog's version 2026-11-30`},
		{"bad read date", "2026-11-30", "https://acme.example/pricing (read 2026-13-01)",
			`bad.yaml:10:17: providers.acme.models.m1.source: https://acme.example/pricing: read invalid date "2026-13-01"`},
		{"version not a date", "acme-7", "https://acme.example/pricing (read 2026-11-30)",
			`bad.yaml:1:10: version must be the date of the price review`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("bad.yaml", []byte(catalog(tt.version, tt.source)), true)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
	ok := catalog("2026-11-30", "https://acme.example/pricing (read 2026-11-30); agrees: https://mirror.example/prices.json (read 2026-11-29)")
	if _, err := parse("good.yaml", []byte(ok), true); err != nil {
		t.Errorf("a cited source is refused: %v", err)
	}
	// A project's catalog file may name a contract: its source is free text.
	if _, err := Parse("project.yaml", []byte(catalog("acme-7", "contract with Acme, 2026-11"))); err != nil {
		t.Errorf("a project catalog with a free-text source is refused: %v", err)
	}
}

// OpenAI bills an explicit cache write at 1.25× the uncached input rate on
// GPT-5.6 and later, in every period and long-context tier (the vendor's
// model pages); a write left unpriced would be billed at the input rate,
// below what OpenAI charges.
func TestOpenAICacheWritesAreAQuarterAboveInput(t *testing.T) {
	c := mustDefault(t)
	n := 0
	for _, m := range c.Models("openai") {
		if !strings.HasPrefix(m.ID, "gpt-5.6") && !strings.HasPrefix(m.ID, "gpt-6") {
			continue
		}
		n++
		for _, p := range m.Prices {
			rates := []Rates{p.Rates}
			for _, tier := range p.Above {
				rates = append(rates, tier.Rates)
			}
			for i, r := range rates {
				if want := r.Input * 5 / 4; r.CacheWrite == nil || *r.CacheWrite != want {
					t.Errorf("%s from %s, rates %d: cache_write %s; want 1.25 × input %s = %s", m.ID, p.Effective, i, money(r.CacheWrite), r.Input, want)
				}
			}
		}
	}
	if n < 6 {
		t.Fatalf("checked %d GPT-5.6+ models; want the six in the catalog", n)
	}
}
