package pricing

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/provider"
)

// StandardTier is the name a namespace's service_tiers map gives the
// standard rates: a price period's own.
const StandardTier = "standard"

// tierName is what a service tier name or rate card name may be.
var tierName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// TierRef is the value of a namespace's service_tiers entry: the rate card
// a tier name is billed at ([StandardTier] or a card name), with where it
// was written.
type TierRef struct {
	Pos  yamlx.Pos
	Name string
}

// UnmarshalYAMLNode implements [yamlx.NodeUnmarshaler]: a TierRef is a
// plain name, kept with its position.
func (r *TierRef) UnmarshalYAMLNode(file string, n *yaml.Node) error {
	r.Pos = yamlx.Pos{File: file, Line: n.Line, Column: n.Column}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf(`expected the name of the rates it is billed at ("standard" or a rate card name such as "priority")`)
	}
	r.Name = n.Value
	return nil
}

// MarshalText writes the name.
func (r TierRef) MarshalText() ([]byte, error) { return []byte(r.Name), nil }

// WebSearch is the price of a vendor's server-side web search, per search,
// in dated periods.
type WebSearch struct {
	Pos yamlx.Pos `yaml:"-" json:"-"`
	// Source names the pages the prices were read from, cited as a model's
	// source is.
	Source string        `yaml:"source,required" json:"source"`
	Prices []SearchPrice `yaml:"prices,required" json:"prices"`
}

// SearchPrice is the price of web searches in force from Effective on, in
// USD per 1,000 searches (as vendors publish it).
type SearchPrice struct {
	Pos         yamlx.Pos      `yaml:"-" json:"-"`
	Effective   Date           `yaml:"effective,required" json:"effective"`
	PerThousand provider.Money `yaml:"per_thousand,required" json:"per_thousand"`
}

// At returns the price per 1,000 searches in force at t (the first
// period's before every period).
func (w *WebSearch) At(t time.Time) provider.Money {
	p := w.Prices[0].PerThousand
	for _, sp := range w.Prices {
		if !sp.Effective.After(t) {
			p = sp.PerThousand
		}
	}
	return p
}

// searchCost returns the cost of n searches at perThousand per 1,000,
// rounded up to a nano-dollar.
func searchCost(perThousand provider.Money, n int64) provider.Money {
	if perThousand <= 0 || n <= 0 {
		return 0
	}
	// n × perThousand / 1,000 = n × (1,000 × perThousand) / 1,000,000.
	return provider.PerMillion(perThousand*1000, n)
}

// Cards returns the rate cards of p that usage reported at service tier
// tier is billed at, and whether the tier is known. The standard rates
// serve every name the namespace bills at [StandardTier], and "" (no tier
// named: the provider's default) unless the namespace maps "" too; a name
// that bills at a card p has, that card. A name the namespace does not
// list, or whose card p lacks (a tier the vendor does not offer for the
// model, or one the catalog has no price for), is unknown: every card of
// p is returned, the standard rates among them, so that the tier is
// priced at the dearest price known for the model and never below the
// standard one. Names are compared in lower case.
func (n *Namespace) Cards(p *Price, tier string) (cards []*RateCard, known bool) {
	t := strings.ToLower(strings.TrimSpace(tier))
	ref, ok := n.ServiceTiers[t]
	if t == "" && !ok {
		return []*RateCard{&p.RateCard}, true
	}
	if ok {
		if ref.Name == StandardTier {
			return []*RateCard{&p.RateCard}, true
		}
		if c := p.ServiceTiers[ref.Name]; c != nil {
			return []*RateCard{c}, true
		}
	}
	cards = []*RateCard{&p.RateCard}
	for _, name := range slices.Sorted(maps.Keys(p.ServiceTiers)) {
		cards = append(cards, p.ServiceTiers[name])
	}
	return cards, false
}

// webSearch returns the per-search prices model m of namespace n is
// billed at, nil when the catalog lists none.
func webSearchOf(n *Namespace, m *Model) *WebSearch {
	if m.WebSearch != nil {
		return m.WebSearch
	}
	return n.WebSearch
}

// searches prices count web searches of model m in namespace n at t; it
// fails, wrapping [ErrUnpriced], when there are searches and the catalog
// lists no price for them.
func (c *Catalog) searches(n *Namespace, m *Model, count int64, t time.Time) (provider.Money, error) {
	if count <= 0 {
		return 0, nil
	}
	w := webSearchOf(n, m)
	if w == nil {
		return 0, fmt.Errorf("%w for web searches on model %q in %q: the catalog lists no per-search price; add web_search to providers.%s in a catalog file listed under pricing.catalog_files in llm-config.yaml", ErrUnpriced, m.ID, n.Name, n.Name)
	}
	return searchCost(w.At(t), count), nil
}

// addMoney adds without overflowing: a sum past the largest Money is the
// largest Money.
func addMoney(a, b provider.Money) provider.Money {
	if a > 0 && b > provider.Money(1<<63-1)-a {
		return provider.Money(1<<63 - 1)
	}
	return a + b
}

// validateTierNames checks a namespace's service_tiers map.
func (ns *Namespace) validateTierNames() yamlx.Errors {
	var errs yamlx.Errors
	for _, name := range slices.Sorted(maps.Keys(ns.ServiceTiers)) {
		ref := ns.ServiceTiers[name]
		where := fmt.Sprintf("providers.%s.service_tiers.%s", ns.Name, name)
		if name != "" && !tierName.MatchString(name) {
			errs = append(errs, ref.Pos.Errorf("%s: a service tier name is written in lower case (letters, digits, '_', '-', '.'), as the API reports it", where))
		}
		if !tierName.MatchString(ref.Name) {
			errs = append(errs, ref.Pos.Errorf(`%s: %q is not a rate card name; write "standard" or the name of a card under a price period's service_tiers`, where, ref.Name))
		}
	}
	return errs
}

// validateTierTargets checks that every rate card a namespace's
// service_tiers names is one that some model of the namespace (in the same
// file) has: a name billed at a card no model has is a misspelling, and
// would price the tier as unknown everywhere.
func (ns *Namespace) validateTierTargets(carded map[string]bool) yamlx.Errors {
	var errs yamlx.Errors
	for _, name := range slices.Sorted(maps.Keys(ns.ServiceTiers)) {
		ref := ns.ServiceTiers[name]
		if ref.Name != StandardTier && tierName.MatchString(ref.Name) && !carded[ref.Name] {
			errs = append(errs, ref.Pos.Errorf(`providers.%s.service_tiers.%s: no model of providers.%s has a %q rate card under its prices' service_tiers; write "standard" or a card name the models have (%s)`, ns.Name, name, ns.Name, ref.Name, strings.Join(cardNames(carded), ", ")))
		}
	}
	return errs
}

func cardNames(carded map[string]bool) []string {
	return append([]string{StandardTier}, slices.Sorted(maps.Keys(carded))...)
}

// validateTierCards checks the service tier rate cards of price period p
// (named pw); targets are the card names the namespace's service_tiers
// map bills at, nil when the namespace (in this file) has no map.
func validateTierCards(p *Price, pw string, targets map[string]bool, nsName string) yamlx.Errors {
	var errs yamlx.Errors
	for _, name := range slices.Sorted(maps.Keys(p.ServiceTiers)) {
		c := p.ServiceTiers[name]
		cw := pw + ".service_tiers." + name
		pos := p.Pos.Key("service_tiers")
		if c == nil {
			errs = append(errs, pos.Errorf("%s is empty: give it input and output", cw))
			continue
		}
		pos = c.Pos
		switch {
		case name == StandardTier:
			errs = append(errs, pos.Errorf("%s: the standard rates are the period's own (input, output, …); remove this card", cw))
		case !tierName.MatchString(name):
			errs = append(errs, pos.Errorf("%s: a rate card name is written in lower case (letters, digits, '_', '-', '.')", cw))
		case targets != nil && !targets[name]:
			errs = append(errs, pos.Errorf("%s: no name in providers.%s.service_tiers is billed at %q, so no call can use this card; add \"%s: %s\" there or rename the card", cw, nsName, name, name, name))
		}
		errs = append(errs, c.validate(pos, cw)...)
	}
	return errs
}

// validate checks a rate card's rates and long-context tiers; pos is where
// its rates were written.
func (c *RateCard) validate(pos yamlx.Pos, where string) yamlx.Errors {
	errs := c.Rates.validate(pos, where)
	last := int64(0)
	for j := range c.Above {
		t := &c.Above[j]
		tw := fmt.Sprintf("%s.above[%d]", where, j)
		if t.InputTokens <= last {
			errs = append(errs, t.Pos.Key("input_tokens").Errorf("%s.input_tokens must be positive and larger than the previous tier's", tw))
		}
		last = t.InputTokens
		errs = append(errs, t.Rates.validate(t.Pos, tw)...)
	}
	return errs
}

// validate checks a web search price list; with cited (the built-in
// catalog) its source is held to the citation rule, read no later than
// reviewed.
func (w *WebSearch) validate(where string, cited bool, reviewed time.Time) yamlx.Errors {
	var errs yamlx.Errors
	if len(w.Prices) == 0 {
		errs = append(errs, w.Pos.Key("prices").Errorf("%s.prices needs at least one period (effective, per_thousand)", where))
	}
	for i := range w.Prices {
		sp := &w.Prices[i]
		pw := fmt.Sprintf("%s.prices[%d]", where, i)
		if i > 0 && !sp.Effective.After(w.Prices[i-1].Effective.Time) {
			errs = append(errs, sp.Pos.Key("effective").Errorf("%s.effective %s must come after the previous period's %s (sort periods oldest first)", pw, sp.Effective, w.Prices[i-1].Effective))
		}
		if sp.PerThousand < 0 {
			errs = append(errs, sp.Pos.Key("per_thousand").Errorf("%s.per_thousand must not be negative", pw))
		}
	}
	if cited && !reviewed.IsZero() {
		errs = append(errs, validateCitations(w.Pos.Key("source"), where, w.Source, reviewed)...)
	}
	return errs
}
