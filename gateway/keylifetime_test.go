package gateway_test

import (
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// A budget over a key's life (period total) counts every call made with
// the key since it was created, whether the key had no budget or one per
// month before: given later with 'keys update', it starts at what the key
// already spent, not at $0. A key moved from total back to month is no
// longer held to its former lifetime limit.
func TestKeyLifetimeBudgetCountsSpendSinceCreation(t *testing.T) {
	w := newWorld(t, serveOn("gpt"), withLedger)
	body := `{"model":"gpt/gpt-5-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	plenty := provider.MustMoney("100")
	none, a, err := w.keys.Create(gateway.KeySpec{Name: "no budget", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	monthly, b, err := w.keys.Create(gateway.KeySpec{Name: "monthly", Project: "demo", KeyLimits: gateway.KeyLimits{Budget: &plenty, Period: ledger.PeriodMonth}})
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{none, none, monthly, monthly} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", body, bearer(token)...); st != 200 {
			t.Fatalf("call = %d %q", st, errMessage(m))
		}
	}
	spent := func(id string) provider.Money {
		rep, err := w.store.Spend(ctxT(t), ledger.Filter{Key: id})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Total.Cost
	}
	for _, k := range []gateway.Key{a, b} {
		so := spent(k.ID)
		if so <= 0 {
			t.Fatalf("key %s spent %s", k.ID, so)
		}
		// A lifetime budget of exactly what the key spent leaves nothing
		// for the next call.
		if _, err := w.keys.Update(k.ID, func(k *gateway.Key) error {
			k.Budget, k.Period = &so, ledger.PeriodTotal
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", body, bearer(map[string]string{a.ID: none, b.ID: monthly}[k.ID])...); st != 429 {
			t.Errorf("key %s with a lifetime budget of the $%s it spent: %d %q; want 429", k.ID, so, st, errMessage(m))
		}
		sc, _ := ledger.KeyScope(k.ID, ledger.PeriodTotal, time.Now())
		if bu, err := w.store.Budget(ctxT(t), sc); err != nil || bu.Spent != so || !bu.Limited || bu.Limit != so {
			t.Errorf("the key's lifetime scope: %+v, %v; want $%s spent of a $%s limit", bu, err, so, so)
		}
	}
	// An operator's limit on the lifetime scope is the operator's: set
	// while the key's budget is total, it stays once the key is back on a
	// monthly budget, while the key file's former limit does not.
	life, _ := ledger.KeyScope(b.ID, ledger.PeriodTotal, time.Now())
	if err := w.store.SetBudget(ctxT(t), life, plenty); err != nil {
		t.Fatal(err)
	}
	// Back to a monthly budget: the lifetime limit no longer applies.
	for _, k := range []gateway.Key{a, b} {
		if _, err := w.keys.Update(k.ID, func(k *gateway.Key) error {
			k.Budget, k.Period = &plenty, ledger.PeriodMonth
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, token := range []string{none, monthly} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", body, bearer(token)...); st != 200 {
			t.Errorf("a key back on a monthly budget: %d %q; want 200", st, errMessage(m))
		}
	}
	aLife, _ := ledger.KeyScope(a.ID, ledger.PeriodTotal, time.Now())
	if bu, err := w.store.Budget(ctxT(t), aLife); err != nil || bu.Limited {
		t.Errorf("key %s's lifetime scope after its total budget ended: %+v, %v; want no limit", a.ID, bu, err)
	}
	if bu, err := w.store.Budget(ctxT(t), life); err != nil || !bu.Limited || bu.Limit != plenty {
		t.Errorf("the operator's limit on %s: %+v, %v; want its $%s kept", life, bu, err, plenty)
	}
}
