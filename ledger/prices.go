package ledger

import (
	"context"
	"fmt"

	"github.com/cortexbuild/cortexbuild/provider"
)

// RowPricer prices the usage of a ledger row as the adapter that made it
// did: the least the row may cost. ok is false when the row cannot be
// priced here (an unknown provider or model, a model the catalog does not
// list, a row flagged unpriced); such a row is not checked. The ledger
// knows no prices: the caller passes this in (the CLI, from the price
// catalog and the configured providers).
type RowPricer func(row AttemptRow) (least provider.Money, ok bool)

// reprice checks s against price: every row's cost at least what its
// usage costs, and the settlement's cost at least the sum of its rows'.
// It returns s with each figure below raised to it, and what was wrong
// ("" when nothing was).
func reprice(s Settlement, price RowPricer) (Settlement, string) {
	var problems []string
	var sum provider.Money
	fix := func(row *AttemptRow) {
		if p, ok := price(*row); ok && row.Cost < p {
			problems = append(problems, fmt.Sprintf("%s/%s row cost $%s, its usage priced at $%s", row.Provider, row.Model, row.Cost, p))
			row.Cost = p
		}
		sum += row.Cost
	}
	fix(&s.Entry)
	if len(s.Earlier) > 0 {
		s.Earlier = append([]AttemptRow(nil), s.Earlier...)
		for i := range s.Earlier {
			fix(&s.Earlier[i])
		}
	}
	if s.Cost < sum {
		problems = append(problems, fmt.Sprintf("settlement cost $%s, its rows priced at $%s", s.Cost, sum))
		s.Cost = sum
	}
	if len(problems) == 0 {
		return s, ""
	}
	msg := "invocation " + s.InvocationID + ": "
	for i, p := range problems {
		if i > 0 {
			msg += "; "
		}
		msg += p
	}
	return s, msg
}

// CheckPrices compares every ledger row of the store's project with the
// price of its usage and returns the rows that cost less, at most a few,
// each naming its invocation and both figures (none: every priced row
// costs at least its usage).
func CheckPrices(ctx context.Context, st Store, price RowPricer) ([]string, error) {
	rows, err := st.Attempts(ctx, Filter{})
	if err != nil {
		return nil, err
	}
	var problems []string
	n := 0
	for _, r := range rows {
		if p, ok := price(r); ok && r.Cost < p {
			n++
			if len(problems) < maxProblems {
				problems = append(problems, fmt.Sprintf("invocation %s: %s/%s row cost $%s, its usage priced at $%s", r.InvocationID, r.Provider, r.Model, r.Cost, p))
			}
		}
	}
	if n > len(problems) {
		problems = append(problems, fmt.Sprintf("and %d more", n-len(problems)))
	}
	return problems, nil
}
