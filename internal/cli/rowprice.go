package cli

import (
	"context"
	"strings"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// rowPriceNamespaces maps the configured providers whose price-catalog
// namespace follows from their type alone (their adapters price every
// answer there) to it: anthropic, gemini, and openai_compatible with the
// openai profile. The others (local servers, gateways) are not checked.
func rowPriceNamespaces(f *config.File) map[string]string {
	ns := map[string]string{}
	for name, p := range f.Providers {
		switch {
		case p.Type == "anthropic", p.Type == "gemini":
			ns[name] = p.Type
		case p.Type == "openai_compatible" && p.Profile == "openai":
			ns[name] = "openai"
		}
	}
	return ns
}

// rowPricer prices a ledger row's usage with the project's price catalog,
// as its adapter did: the least the row may cost. A row of a provider
// rowPriceNamespaces does not map, of a model the catalog does not list,
// flagged unpriced, or a cache hit is not priced. Its figure is a lower
// bound: a row does not record which cache writes lasted an hour, so they
// are priced as five-minute ones. nil when the catalog cannot be read.
func (e *env) rowPricer(f *config.File) ledger.RowPricer {
	cat, err := e.catalog(f)
	if err != nil {
		return nil
	}
	ns := rowPriceNamespaces(f)
	return func(r ledger.AttemptRow) (provider.Money, bool) {
		n, ok := ns[r.Provider]
		if !ok || r.Unpriced || r.CacheHit || r.Model == "" {
			return 0, false
		}
		u := provider.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens}
		c, err := cat.Cost(n, r.Model, u, r.Time)
		if err != nil {
			return 0, false
		}
		return c, true
	}
}

// replayOptions are the options of a journal replay: its settlements
// checked against their usage's price.
func (e *env) replayOptions(f *config.File) []ledger.ReplayOption {
	if p := e.rowPricer(f); p != nil {
		return []ledger.ReplayOption{ledger.ReplayPrices(p)}
	}
	return nil
}

// costs reports the ledger rows that cost less than their usage: a row
// changed after it was written.
func (d *doctor) costs(ctx context.Context, st ledger.Store, f *config.File) {
	price := d.e.rowPricer(f)
	if price == nil {
		return // the catalog's own check reports it
	}
	problems, err := ledger.CheckPrices(ctx, st, price)
	switch {
	case err != nil:
		d.add("costs", checkWarn, "the ledger's rows cannot be read: "+err.Error(), "run 'cortexbuild spend' to see the error")
	case len(problems) > 0:
		d.add("costs", checkFail, "ledger rows cost less than the price of their usage (changed after they were written): "+strings.Join(problems, "; "),
			"find out what changed the ledger or its journal; 'cortexbuild spend' counts these rows at the figures shown")
	default:
		d.add("costs", checkOK, "every priced ledger row costs at least its usage", "")
	}
}
