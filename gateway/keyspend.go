package gateway

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// LimitsText describes the key's limits and allowed agents for people
// ("budget $5.00/month, 60 rpm, expires …"), or "no limits".
func (k Key) LimitsText() string {
	var parts []string
	if k.Budget != nil {
		parts = append(parts, "budget $"+k.Budget.String()+"/"+k.BudgetPeriod())
	}
	if k.RPM > 0 {
		parts = append(parts, strconv.Itoa(k.RPM)+" rpm")
	}
	if k.TPM > 0 {
		parts = append(parts, strconv.FormatInt(k.TPM, 10)+" tpm")
	}
	if k.ExpiresAt != nil {
		parts = append(parts, "expires "+k.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if len(k.Agents) > 0 {
		parts = append(parts, "agents "+strings.Join(k.Agents, ","))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, ", ")
}

// KeySpend returns what each key spent in the period of its budget (the
// month for a key without one), from the ledger rows, by key id.
func KeySpend(ctx context.Context, st ledger.Store, keys []Key, now time.Time, loc *time.Location) (map[string]provider.Money, error) {
	byPeriod := map[string]map[string]provider.Money{}
	out := map[string]provider.Money{}
	for _, k := range keys {
		p := k.BudgetPeriod()
		if byPeriod[p] == nil {
			rep, err := st.Spend(ctx, ledger.Filter{By: ledger.ByKey, From: ledger.PeriodStart(p, now.In(loc))})
			if err != nil {
				return nil, err
			}
			byPeriod[p] = map[string]provider.Money{}
			for _, g := range rep.Groups {
				byPeriod[p][g.Key] = g.Cost
			}
		}
		out[k.ID] = byPeriod[p][k.ID]
	}
	return out, nil
}
