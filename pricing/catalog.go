package pricing

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/provider"
)

//go:embed catalog.yaml
var embeddedCatalog []byte

// EmbeddedFile is the name under which the built-in catalog reports errors.
const EmbeddedFile = "pricing/catalog.yaml"

// ErrUnpriced is wrapped by every error for a model the catalog cannot price.
var ErrUnpriced = errors.New("no price known")

// Rates are prices in USD per million tokens. A nil cache rate means the
// provider publishes none: cache reads and writes are then billed at the
// input rate, and long writes at the short write rate.
type Rates struct {
	Input          provider.Money  `yaml:"input,required" json:"input"`
	Output         provider.Money  `yaml:"output,required" json:"output"`
	CacheRead      *provider.Money `yaml:"cache_read" json:"cache_read,omitempty"`
	CacheWrite     *provider.Money `yaml:"cache_write" json:"cache_write,omitempty"`
	CacheWriteLong *provider.Money `yaml:"cache_write_long" json:"cache_write_long,omitempty"`
}

func (r Rates) cacheRead() provider.Money {
	if r.CacheRead != nil {
		return *r.CacheRead
	}
	return r.Input
}

func (r Rates) cacheWrite() provider.Money {
	if r.CacheWrite != nil {
		return *r.CacheWrite
	}
	return r.Input
}

func (r Rates) cacheWriteLong() provider.Money {
	if r.CacheWriteLong != nil {
		return *r.CacheWriteLong
	}
	return r.cacheWrite()
}

// Tier is a long-context price tier: a request whose prompt has more than
// InputTokens tokens is billed entirely at its rates.
type Tier struct {
	Pos         yamlx.Pos `yaml:"-" json:"-"`
	InputTokens int64     `yaml:"input_tokens,required" json:"above_input_tokens"`
	Rates       `yaml:",inline"`
}

// RateCard is what tokens cost at one service tier in a price period: its
// rates and the long-context tiers that replace them above a prompt size.
type RateCard struct {
	Pos   yamlx.Pos `yaml:"-" json:"-"`
	Rates `yaml:",inline"`
	Above []Tier `yaml:"above" json:"above,omitempty"`
}

// RatesFor returns the rates for a request with promptTokens prompt tokens.
func (c *RateCard) RatesFor(promptTokens int64) Rates {
	r := c.Rates
	for _, t := range c.Above {
		if promptTokens > t.InputTokens {
			r = t.Rates
		}
	}
	return r
}

// Price is the set of rates in force from Effective on. Its own rates are
// the standard tier's; ServiceTiers holds the rate cards of the other
// service tiers the vendor publishes for the model (OpenAI's flex and
// priority), keyed by the card names the namespace's service_tiers map
// names to.
type Price struct {
	Pos          yamlx.Pos `yaml:"-" json:"-"`
	Effective    Date      `yaml:"effective,required" json:"effective"`
	RateCard     `yaml:",inline"`
	ServiceTiers map[string]*RateCard `yaml:"service_tiers" json:"service_tiers,omitempty"`
}

// Model is one model's entry.
type Model struct {
	Pos             yamlx.Pos `yaml:"-" json:"-"`
	ID              string    `yaml:"-" json:"id"`
	Namespace       string    `yaml:"-" json:"namespace"`
	Aliases         []string  `yaml:"aliases" json:"aliases,omitempty"`
	ContextWindow   int64     `yaml:"context_window,required" json:"context_window"`
	MaxOutputTokens int64     `yaml:"max_output_tokens,required" json:"max_output_tokens"`
	Vision          bool      `yaml:"vision" json:"vision"`
	Source          string    `yaml:"source,required" json:"source"`
	Deprecated      string    `yaml:"deprecated" json:"deprecated,omitempty"`
	Prices          []Price   `yaml:"prices,required" json:"prices"`
	// WebSearch, when set, replaces the namespace's per-search price for
	// this model.
	WebSearch *WebSearch `yaml:"web_search" json:"web_search,omitempty"`
}

// PriceAt returns the price period in force at t (the first one when t is
// before every period).
func (m *Model) PriceAt(t time.Time) *Price {
	p := &m.Prices[0]
	for i := range m.Prices {
		if !m.Prices[i].Effective.After(t) {
			p = &m.Prices[i]
		}
	}
	return p
}

// Namespace is one pricing namespace: a vendor (anthropic, openai, gemini)
// or a local server type whose models are free.
type Namespace struct {
	Pos         yamlx.Pos `yaml:"-" json:"-"`
	Name        string    `yaml:"-" json:"name"`
	Local       bool      `yaml:"local" json:"local"`
	TokenFactor *Factor   `yaml:"token_factor" json:"token_factor,omitempty"`
	// ServiceTiers maps each service tier name the vendor's API takes or
	// reports (lower case) to the prices it is billed at: "standard" (a
	// price period's own rates) or the name of a rate card in the
	// periods' service_tiers. A name it does not list is an unknown tier
	// (see [Namespace.Cards]).
	ServiceTiers map[string]TierRef `yaml:"service_tiers" json:"service_tiers,omitempty"`
	// WebSearch is the price of one web search the vendor runs for a
	// request (its server-side search tool), for every model of the
	// namespace that does not set its own.
	WebSearch *WebSearch        `yaml:"web_search" json:"web_search,omitempty"`
	Models    map[string]*Model `yaml:"models" json:"-"`
	aliases   map[string]*Model
}

// Catalog is a validated price catalog. It is safe for concurrent use and
// implements [provider.Pricer].
type Catalog struct {
	Pos        yamlx.Pos             `yaml:"-" json:"-"`
	Version    string                `yaml:"version,required"`
	Currency   string                `yaml:"currency,required"`
	Unit       string                `yaml:"unit,required"`
	Namespaces map[string]*Namespace `yaml:"providers,required"`
	// Now is the clock used when a caller passes a zero time; nil means
	// time.Now.
	Now func() time.Time `yaml:"-"`
}

var defaultCatalog = sync.OnceValues(func() (*Catalog, error) {
	return parse(EmbeddedFile, embeddedCatalog, true)
})

// Default returns the catalog built into the binary.
func Default() (*Catalog, error) { return defaultCatalog() }

// LoadFile reads and validates a catalog file.
func LoadFile(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes and validates catalog data; file names it in errors. Every
// problem is reported with file:line:column. A model's source is free text
// here (a contract, an invoice); the built-in catalog is held to more (see
// [Model.Citations]).
func Parse(file string, data []byte) (*Catalog, error) { return parse(file, data, false) }

// parse is Parse; with cited, every model's source must also cite the pages
// its figures were read from, each read no later than the catalog's version
// date. The built-in catalog is parsed so.
func parse(file string, data []byte, cited bool) (*Catalog, error) {
	var c Catalog
	if err := yamlx.Decode(file, data, &c); err != nil {
		return nil, err
	}
	if err := c.validate(file, cited); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Catalog) validate(file string, cited bool) error {
	var errs yamlx.Errors
	top := yamlx.Pos{File: file, Line: 1, Column: 1}
	var reviewed time.Time
	if cited {
		var err error
		if reviewed, err = time.Parse(time.DateOnly, c.Version); err != nil {
			errs = append(errs, c.Pos.Key("version").Errorf("version must be the date of the price review, like 2026-11-30, got %q", c.Version))
		}
	}
	if c.Currency != "USD" {
		errs = append(errs, top.Errorf("currency must be USD, got %q", c.Currency))
	}
	if c.Unit != "per_million_tokens" {
		errs = append(errs, top.Errorf("unit must be per_million_tokens, got %q", c.Unit))
	}
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Namespaces)) {
		ns := c.Namespaces[name]
		if ns == nil {
			errs = append(errs, top.Errorf("providers.%s is empty: give it models: or local: true", name))
			continue
		}
		ns.Name = name
		ns.aliases = map[string]*Model{}
		if ns.Local && len(ns.Models) > 0 {
			errs = append(errs, ns.Pos.Key("models").Errorf("providers.%s is local (every model free); remove models: or local: true", name))
		}
		if !ns.Local && len(ns.Models) == 0 && ns.WebSearch == nil && len(ns.ServiceTiers) == 0 {
			errs = append(errs, ns.Pos.Errorf("providers.%s lists no models; add models: or set local: true", name))
		}
		errs = append(errs, ns.validateTierNames()...)
		var targets map[string]bool
		if len(ns.ServiceTiers) > 0 {
			targets = map[string]bool{}
			for _, ref := range ns.ServiceTiers {
				targets[ref.Name] = true
			}
		}
		if ns.WebSearch != nil {
			errs = append(errs, ns.WebSearch.validate("providers."+name+".web_search", cited, reviewed)...)
		}
		carded := map[string]bool{}
		for _, id := range slices.Sorted(maps.Keys(ns.Models)) {
			m := ns.Models[id]
			where := "providers." + name + ".models." + id
			if m == nil {
				errs = append(errs, ns.Pos.Key("models").Errorf("%s is empty", where))
				continue
			}
			m.ID, m.Namespace = id, name
			errs = append(errs, m.validate(where)...)
			for i := range m.Prices {
				errs = append(errs, validateTierCards(&m.Prices[i], fmt.Sprintf("%s.prices[%d]", where, i), targets, name)...)
				for card := range m.Prices[i].ServiceTiers {
					carded[card] = true
				}
			}
			if m.WebSearch != nil {
				errs = append(errs, m.WebSearch.validate(where+".web_search", cited, reviewed)...)
			}
			if cited && !reviewed.IsZero() {
				errs = append(errs, m.validateCitations(where, reviewed)...)
			}
			for _, key := range append([]string{id}, m.Aliases...) {
				k := name + "/" + key
				if prev, dup := owner[k]; dup && prev != id {
					errs = append(errs, m.Pos.Key("aliases").Errorf("%s: alias %q already names model %q", where, key, prev))
					continue
				}
				owner[k] = id
				ns.aliases[key] = m
			}
		}
		if len(ns.Models) > 0 {
			errs = append(errs, ns.validateTierTargets(carded)...)
		}
	}
	return errs.Err()
}

func (m *Model) validate(where string) yamlx.Errors {
	var errs yamlx.Errors
	if m.ContextWindow <= 0 {
		errs = append(errs, m.Pos.Key("context_window").Errorf("%s.context_window must be a positive token count", where))
	}
	if m.MaxOutputTokens <= 0 {
		errs = append(errs, m.Pos.Key("max_output_tokens").Errorf("%s.max_output_tokens must be a positive token count", where))
	}
	if m.Deprecated != "" {
		if _, err := time.Parse(time.DateOnly, m.Deprecated); err != nil {
			errs = append(errs, m.Pos.Key("deprecated").Errorf("%s.deprecated must be a date like 2027-01-22, got %q", where, m.Deprecated))
		}
	}
	if len(m.Prices) == 0 {
		errs = append(errs, m.Pos.Key("prices").Errorf("%s.prices needs at least one period (effective, input, output)", where))
	}
	for i := range m.Prices {
		p := &m.Prices[i]
		pw := fmt.Sprintf("%s.prices[%d]", where, i)
		if i > 0 && !p.Effective.After(m.Prices[i-1].Effective.Time) {
			errs = append(errs, p.Pos.Key("effective").Errorf("%s.effective %s must come after the previous period's %s (sort periods oldest first)", pw, p.Effective, m.Prices[i-1].Effective))
		}
		errs = append(errs, p.RateCard.validate(p.Pos, pw)...)
	}
	return errs
}

// Citation is a page a model's figures were read from: its URL and the
// date it was read (zero when the source gives none).
type Citation struct {
	URL  string
	Read Date
}

var (
	citedURL  = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s()<>"';,]+`)
	citedRead = regexp.MustCompile(`\bread (\d{4}-\d{2}-\d{2})\b`)
)

// Citations returns the pages m's source names: every URL with the date
// written as "read YYYY-MM-DD" after it and before the next URL. It fails
// on a read date that is not a calendar date.
func (m *Model) Citations() ([]Citation, error) { return citations(m.Source) }

// Citations returns the pages w's source names, as [Model.Citations].
func (w *WebSearch) Citations() ([]Citation, error) { return citations(w.Source) }

func citations(source string) ([]Citation, error) {
	locs := citedURL.FindAllStringIndex(source, -1)
	out := make([]Citation, 0, len(locs))
	for i, loc := range locs {
		end := len(source)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		c := Citation{URL: strings.TrimRight(source[loc[0]:loc[1]], ".:")}
		if r := citedRead.FindStringSubmatch(source[loc[1]:end]); r != nil {
			if err := c.Read.UnmarshalText([]byte(r[1])); err != nil {
				return nil, fmt.Errorf("%s: read %w", c.URL, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// validateCitations holds m's source to the built-in catalog's rule: it
// names at least one https URL, and every URL it names is https and is
// followed by the date it was read, no later than reviewed (the catalog's
// version).
func (m *Model) validateCitations(where string, reviewed time.Time) yamlx.Errors {
	return validateCitations(m.Pos.Key("source"), where, m.Source, reviewed)
}

// validateCitations holds source, written at pos, to the built-in
// catalog's citation rule (see [Model.validateCitations]).
func validateCitations(pos yamlx.Pos, where, source string, reviewed time.Time) yamlx.Errors {
	const how = `cite each page as its https URL followed by "(read YYYY-MM-DD)"`
	cites, err := citations(source)
	if err != nil {
		return yamlx.Errors{pos.Errorf("%s.source: %v", where, err)}
	}
	if len(cites) == 0 {
		return yamlx.Errors{pos.Errorf("%s.source names no page the prices were read from: %s", where, how)}
	}
	var errs yamlx.Errors
	for _, c := range cites {
		switch {
		case !strings.HasPrefix(c.URL, "https://"):
			errs = append(errs, pos.Errorf("%s.source: %s is not an https URL: %s", where, c.URL, how))
		case c.Read.IsZero():
			errs = append(errs, pos.Errorf("%s.source: %s has no read date: %s", where, c.URL, how))
		case c.Read.After(reviewed):
			errs = append(errs, pos.Errorf("%s.source: %s was read %s, after the catalog's version %s: set version to the date of the review", where, c.URL, c.Read, reviewed.Format(time.DateOnly)))
		}
	}
	return errs
}

func (r Rates) validate(pos yamlx.Pos, where string) yamlx.Errors {
	var errs yamlx.Errors
	check := func(key string, v *provider.Money) {
		if v != nil && *v < 0 {
			errs = append(errs, pos.Key(key).Errorf("%s.%s must not be negative", where, key))
		}
	}
	check("input", &r.Input)
	check("output", &r.Output)
	check("cache_read", r.CacheRead)
	check("cache_write", r.CacheWrite)
	check("cache_write_long", r.CacheWriteLong)
	return errs
}

// Overlay returns a catalog holding c's namespaces with o's laid over them:
// a model in o replaces the same model in c, other models are kept; a
// service tier name in o replaces the same name, and o's web search price
// replaces c's. It is how a project adds prices for models the built-in
// catalog lacks.
func (c *Catalog) Overlay(o *Catalog) *Catalog {
	out := &Catalog{Version: c.Version + "+" + o.Version, Currency: c.Currency, Unit: c.Unit, Now: c.Now, Namespaces: map[string]*Namespace{}}
	for _, src := range []*Catalog{c, o} {
		for name, ns := range src.Namespaces {
			dst := out.Namespaces[name]
			if dst == nil {
				dst = &Namespace{Name: name, Models: map[string]*Model{}, aliases: map[string]*Model{}}
				out.Namespaces[name] = dst
			}
			dst.Local = ns.Local
			if ns.TokenFactor != nil {
				dst.TokenFactor = ns.TokenFactor
			}
			if len(ns.ServiceTiers) > 0 {
				merged := maps.Clone(dst.ServiceTiers)
				if merged == nil {
					merged = map[string]TierRef{}
				}
				maps.Copy(merged, ns.ServiceTiers)
				dst.ServiceTiers = merged
			}
			if ns.WebSearch != nil {
				dst.WebSearch = ns.WebSearch
			}
			for id, m := range ns.Models {
				if old := dst.Models[id]; old != nil {
					for _, a := range old.Aliases {
						delete(dst.aliases, a)
					}
				}
				dst.Models[id] = m
				dst.aliases[id] = m
				for _, a := range m.Aliases {
					dst.aliases[a] = m
				}
			}
		}
	}
	return out
}

// NamespaceNames returns the namespaces in alphabetical order.
func (c *Catalog) NamespaceNames() []string { return slices.Sorted(maps.Keys(c.Namespaces)) }

// Models returns every model of namespace ns (all namespaces when ns is
// ""), sorted by namespace then id.
func (c *Catalog) Models(ns string) []*Model {
	var out []*Model
	for _, name := range c.NamespaceNames() {
		if ns != "" && name != ns {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(c.Namespaces[name].Models)) {
			out = append(out, c.Namespaces[name].Models[id])
		}
	}
	return out
}

var dateSuffix = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`)

// Undated returns model without a "models/" prefix and a date suffix
// ("claude-haiku-4-5-20251001" is "claude-haiku-4-5", "gpt-5-mini-2025-08-07"
// "gpt-5-mini").
func Undated(model string) string {
	key := strings.TrimPrefix(model, "models/")
	return strings.TrimSuffix(key, dateSuffix.FindString(key))
}

// Lookup finds model in namespace ns by id or alias. It also accepts a
// "models/" prefix and a date suffix the catalog does not list
// ("claude-haiku-4-5-20251001", "gpt-5-mini-2025-08-07"). For a local
// namespace it returns (nil, true, nil): every model is free.
func (c *Catalog) Lookup(ns, model string) (m *Model, local bool, err error) {
	n := c.Namespaces[ns]
	if n == nil {
		return nil, false, fmt.Errorf("%w: unknown pricing namespace %q; known: %s", ErrUnpriced, ns, strings.Join(c.NamespaceNames(), ", "))
	}
	if n.Local {
		return nil, true, nil
	}
	key := strings.TrimPrefix(model, "models/")
	if m := n.aliases[key]; m != nil {
		return m, false, nil
	}
	if undated := Undated(key); undated != key {
		if m := n.aliases[undated]; m != nil {
			return m, false, nil
		}
	}
	return nil, false, &unknownModelError{model: model, key: key, ns: ns, ids: n.Models}
}

// unknownModelError is Lookup's error for a model the namespace does not
// list. Prices are looked up on every call, so the "did you mean" is built
// only when the message is read.
type unknownModelError struct {
	model, key, ns string
	ids            map[string]*Model
}

func (e *unknownModelError) Error() string {
	return fmt.Sprintf("%v for model %q in %q%s: add it to a catalog file listed under pricing.catalog_files in llm-config.yaml", ErrUnpriced, e.model, e.ns, suggestModels(e.key, slices.Sorted(maps.Keys(e.ids))))
}

func (e *unknownModelError) Unwrap() error { return ErrUnpriced }

// Find looks model up in every namespace, for listings; ambiguous ids
// return the first namespace alphabetically.
func (c *Catalog) Find(model string) (*Model, error) {
	for _, ns := range c.NamespaceNames() {
		if c.Namespaces[ns].Local {
			continue
		}
		if m, _, err := c.Lookup(ns, model); err == nil {
			return m, nil
		}
	}
	var all []string
	for _, m := range c.Models("") {
		all = append(all, m.ID)
	}
	return nil, fmt.Errorf("%w for model %q%s", ErrUnpriced, model, suggestModels(model, all))
}

// suggestModels names the model id nearest to a misspelt one, or the ids
// that contain a partial one ("sonnet-4-6").
func suggestModels(query string, ids []string) string {
	if best := provider.Closest(query, ids); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	var hits []string
	for _, id := range ids {
		if strings.Contains(id, query) {
			hits = append(hits, id)
		}
	}
	switch {
	case len(hits) == 1:
		return fmt.Sprintf(" (did you mean %q?)", hits[0])
	case len(hits) > 1 && len(hits) <= 8:
		return " (did you mean one of: " + strings.Join(hits, ", ") + "?)"
	}
	return ""
}

func (c *Catalog) at(t time.Time) time.Time {
	if !t.IsZero() {
		return t
	}
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Cost prices usage u of model in namespace ns at time at (zero: now):
// its tokens at the rate card of the service tier it reports
// ([Namespace.Cards]: an unknown tier at the dearest card the model has),
// plus its web searches at the per-search price. Web searches on a model
// the catalog has no per-search price for are an error wrapping
// [ErrUnpriced].
func (c *Catalog) Cost(ns, model string, u provider.Usage, at time.Time) (provider.Money, error) {
	m, local, err := c.Lookup(ns, model)
	if err != nil || local {
		return 0, err
	}
	n, t := c.Namespaces[ns], c.at(at)
	p := m.PriceAt(t)
	cards, _ := n.Cards(p, u.ServiceTier)
	var cost provider.Money
	for _, card := range cards {
		cost = max(cost, card.Cost(u))
	}
	s, err := c.searches(n, m, u.WebSearchRequests, t)
	if err != nil {
		return 0, err
	}
	return addMoney(cost, s), nil
}

// CostAt prices the tokens of usage u at price p's standard rates; it
// ignores u's service tier and web searches, which [Catalog.Cost] prices.
func CostAt(p *Price, u provider.Usage) provider.Money { return p.RateCard.Cost(u) }

// Cost prices the tokens of usage u at c's rates.
func (c *RateCard) Cost(u provider.Usage) provider.Money {
	r := c.RatesFor(u.InputTokens)
	long := min(u.CacheWriteLongTokens, u.CacheWriteTokens)
	var acc provider.MoneyAccumulator
	acc.Add(r.Input, u.UncachedInputTokens())
	acc.Add(r.cacheRead(), u.CacheReadTokens)
	acc.Add(r.cacheWrite(), u.CacheWriteTokens-long)
	acc.Add(r.cacheWriteLong(), long)
	acc.Add(r.Output, u.OutputTokens)
	return acc.Total()
}

// Estimate returns an upper bound of the cost of req on model: the prompt
// bounded by [Catalog.BoundPrompt] (the text by [BoundRequestTokens] with
// the namespace's token factor, images by the adapter's image formula for
// model, nil: [ImageTokens] per image, and a relayed request's unmodeled
// bytes a token each), every prompt token at the dearest input-side rate
// the request can incur (a cache write when prompt caching is asked for,
// or whenever the request is relayed as its client sent it, whose body
// may ask for one; the long-context tier the bound reaches), and the
// output at req's max tokens, clamped to the model's max_output_tokens
// (see [Model.OutputLimit]).
//
// A relayed request ([provider.Request.Native]) is priced at the rate
// card of the service tier its body asks for ([Namespace.Cards]: an
// unknown tier at the dearest card the model has), and its web searches
// at the per-search price; web searches on a model the catalog has no
// per-search price for are an error wrapping [ErrUnpriced]. One the
// gateway read only at its top level ([provider.Native] Scanned) is
// bounded by its body's bytes under CeilingEstimate, and decoded in full
// ([provider.Request.Exact]) for the exact bound.
func (c *Catalog) Estimate(ns, model string, req *provider.Request, images provider.ImageTokens, at time.Time) (provider.Money, error) {
	m, local, err := c.Lookup(ns, model)
	if err != nil || local {
		return 0, err
	}
	if !req.CeilingEstimate {
		req = req.Exact()
	}
	n, t := c.Namespaces[ns], c.at(at)
	in, err := BoundRequestTokens(req, n.TokenFactor, images)
	if err != nil {
		return 0, err
	}
	in += unmodeledBytes(req)
	out := int64(m.OutputLimit(req.EffectiveMaxTokens()))
	var tier string
	var searches int64
	if req.Native != nil {
		tier, searches = req.Native.ServiceTier, req.Native.WebSearches
	}
	cards, _ := n.Cards(m.PriceAt(t), tier)
	var est provider.Money
	for _, card := range cards {
		est = max(est, card.estimate(in, out, req))
	}
	s, err := c.searches(n, m, searches, t)
	if err != nil {
		return 0, err
	}
	return addMoney(est, s), nil
}

// estimate prices in prompt tokens and out output tokens of req at c: the
// prompt at the dearest input-side rate req can incur: a cache write of
// the longest lifetime it marks anywhere (PromptCache, a tool's or a
// part's mark); for a relayed request at least the provider's automatic
// cache write, and any lifetime when part of its body is not decoded.
func (c *RateCard) estimate(in, out int64, req *provider.Request) provider.Money {
	r := c.RatesFor(in)
	inRate := r.Input
	longest := longestCache(req)
	if req.Native != nil {
		// A relayed body may write to a provider's automatic cache, and
		// what of it is not decoded may ask for any lifetime.
		inRate = max(inRate, r.cacheRead(), r.cacheWrite())
		if req.Native.UnmodeledBytes > 0 && !req.Native.Scanned {
			longest = provider.PromptCache1h
		}
	}
	switch longest {
	case provider.PromptCache5m:
		inRate = max(inRate, r.cacheWrite())
	case provider.PromptCache1h:
		inRate = max(inRate, r.cacheWrite(), r.cacheWriteLong())
	}
	var acc provider.MoneyAccumulator
	acc.Add(inRate, in)
	acc.Add(r.Output, out)
	return acc.Total()
}

// longestCache returns the longest prompt-cache lifetime req asks for
// anywhere: its PromptCache, a tool's or a part's own mark.
func longestCache(req *provider.Request) provider.PromptCache {
	longest := req.PromptCache
	note := func(c provider.PromptCache) {
		switch {
		case c == provider.PromptCache1h:
			longest = c
		case c == provider.PromptCache5m && longest == provider.PromptCacheOff:
			longest = c
		}
	}
	for i := range req.Tools {
		note(req.Tools[i].Cache)
	}
	for _, m := range req.Messages {
		for i := range m.Parts {
			note(m.Parts[i].Cache)
		}
	}
	return longest
}

// unmodeledBytes is what a relayed request's body holds beyond the
// decoded request, in bytes: each is at most a token.
func unmodeledBytes(req *provider.Request) int64 {
	if req.Native == nil {
		return 0
	}
	return max(req.Native.UnmodeledBytes, 0)
}

// OutputLimit returns the output limit a request asking for maxTokens gets
// on m: maxTokens, clamped to m's max_output_tokens. The adapters send the
// clamped value, so no answer can bill more output than it.
func (m *Model) OutputLimit(maxTokens int) int {
	if m.MaxOutputTokens > 0 && int64(maxTokens) > m.MaxOutputTokens {
		return int(m.MaxOutputTokens)
	}
	return maxTokens
}

// Limits returns model's context window, output limit and vision flag; zero
// limits for a local namespace, whose models the catalog does not list.
func (c *Catalog) Limits(ns, model string) (provider.ModelLimits, error) {
	m, local, err := c.Lookup(ns, model)
	if err != nil || local {
		return provider.ModelLimits{}, err
	}
	return provider.ModelLimits{ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens, Vision: m.Vision}, nil
}

// BoundPrompt returns [BoundRequestTokens] of req with namespace ns's
// token factor (none for a namespace the catalog does not list), each
// image bounded by images, plus, for a relayed request, the bytes of its
// body the decoded request does not hold ([provider.Native]
// UnmodeledBytes), each at most a token. An image that cannot be priced
// counts as the formula's maximum, as in [BoundRequestTokens]: a request
// holding one was refused by its estimate, so it never ran. A request
// the gateway read only at its top level is decoded in full first
// ([provider.Request.Exact]).
func (c *Catalog) BoundPrompt(ns string, req *provider.Request, images provider.ImageTokens) int64 {
	req = req.Exact()
	n, _ := BoundRequestTokens(req, c.factor(ns), images)
	return n + unmodeledBytes(req)
}

// BoundText returns [BoundTokens] of text with namespace ns's token factor
// (none for a namespace the catalog does not list).
func (c *Catalog) BoundText(ns, text string) int64 {
	return BoundTokens(text, c.factor(ns))
}

func (c *Catalog) factor(ns string) *Factor {
	if n := c.Namespaces[ns]; n != nil {
		return n.TokenFactor
	}
	return nil
}

// Date is a calendar date (YYYY-MM-DD) in UTC.
type Date struct{ time.Time }

// UnmarshalText parses YYYY-MM-DD.
func (d *Date) UnmarshalText(b []byte) error {
	t, err := time.Parse(time.DateOnly, string(b))
	if err != nil {
		return fmt.Errorf("invalid date %q: write YYYY-MM-DD, e.g. 2026-10-07", string(b))
	}
	d.Time = t
	return nil
}

// MarshalText formats YYYY-MM-DD.
func (d Date) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String formats YYYY-MM-DD.
func (d Date) String() string { return d.Format(time.DateOnly) }

// Factor is a decimal multiplier such as 1.35, exact to 10⁻⁹.
type Factor struct{ nanos int64 }

// UnmarshalText parses a decimal such as "1.35".
func (f *Factor) UnmarshalText(b []byte) error {
	m, err := provider.ParseMoney(string(b))
	if err != nil || m <= 0 {
		return fmt.Errorf("invalid factor %q: write a positive decimal such as 1.35", string(b))
	}
	f.nanos = int64(m)
	return nil
}

// MarshalText formats the factor as a decimal.
func (f Factor) MarshalText() ([]byte, error) { return []byte(provider.Money(f.nanos).String()), nil }

// Scale returns ceil(n × f); a nil factor is 1.
func (f *Factor) Scale(n int64) int64 {
	if f == nil || f.nanos == 0 {
		return n
	}
	var acc provider.MoneyAccumulator
	acc.Add(provider.Money(f.nanos), n)
	// acc holds n×nanos/10⁶ rounded up; divide the remaining 10³ rounding up.
	t := int64(acc.Total())
	return (t + 999) / 1000
}

var _ provider.Pricer = (*Catalog)(nil)
