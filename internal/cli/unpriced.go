package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// unpricedFix says how to stop recording unpriced attempts.
const unpricedFix = "add the models' prices in a file listed in pricing.catalog_files (docs/pricing.md), or route to a model the catalog lists ('cortexbuild pricing show')"

// unpricedModels names the provider/models with attempts recorded unpriced
// (the catalog listed neither the answer's model nor the requested one, so
// each was charged its reservation), with their counts.
func unpricedModels(ctx context.Context, st ledger.Store) (int64, string, error) {
	rep, err := st.Spend(ctx, ledger.Filter{By: ledger.ByModel})
	if err != nil || rep.Total.Unpriced == 0 {
		return 0, "", err
	}
	var names []string
	for _, g := range rep.Groups {
		if g.Unpriced > 0 {
			names = append(names, fmt.Sprintf("%s (%d)", g.Key, g.Unpriced))
		}
	}
	return rep.Total.Unpriced, strings.Join(names, ", "), nil
}

// unpriced warns about attempts recorded unpriced.
func (d *doctor) unpriced(ctx context.Context, st ledger.Store) {
	n, names, err := unpricedModels(ctx, st)
	switch {
	case err != nil:
		d.add("prices", checkWarn, "the ledger's spend cannot be read: "+err.Error(), "run 'cortexbuild spend' to see the error")
	case n > 0:
		d.add("prices", checkWarn, fmt.Sprintf("%d attempt(s) were recorded unpriced and charged their reservation, since the price catalog lists neither the model that answered nor the one requested: %s", n, names), unpricedFix)
	}
}
