package ledger_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// tenNanosAToken prices a row at 10 nano-dollars an input token.
func tenNanosAToken(r ledger.AttemptRow) (provider.Money, bool) {
	return provider.Money(r.InputTokens * 10), true
}

// pricedLine is the journal line of a settlement of id whose 100 input
// tokens cost 1,000 nano-dollars, with its newline.
func pricedLine(id string) []byte {
	return append(ledger.JournalSettleLine(ledger.Settlement{InvocationID: id, Cost: 1000, Scopes: []ledger.Scope{ledger.TaskScope("t")},
		Entry: ledger.AttemptRow{InvocationID: id, Task: "t", Provider: "p", Model: "m", Outcome: "ok", InputTokens: 100, Cost: 1000}}), '\n')
}

// A journal line whose cost was edited down (the settlement's and its
// row's, to one nano-dollar): the replay applies it at the price of its
// usage, so the task is charged what the provider bills, keeps the line as
// found in <journal>.repriced-<time>, and reports it naming the
// invocation and both figures; the untouched line is applied as written.
func TestReplayRepricesAnEditedCost(t *testing.T) {
	ctx := t.Context()
	st := openSQLite(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "4242-00ff.journal")
	edited := bytes.ReplaceAll(pricedLine("edited"), []byte(`"cost":1000`), []byte(`"cost":1`))
	if err := os.WriteFile(path, append(pricedLine("kept"), edited...), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.ReplayJournals(ctx, st, dir, ledger.ReplayPrices(tenNanosAToken))
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Budget(ctx, ledger.TaskScope("t"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 2 || b.Spent != 2000 {
		t.Errorf("applied %d, task spent %s; want 2 and $0.000002", rep.Applied, b.Spent)
	}
	rows, err := st.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Cost != 1000 {
			t.Errorf("row of %s costs %s, want $0.000001", r.InvocationID, r.Cost)
		}
	}
	if len(rep.KeptAside) != 1 {
		t.Fatalf("kept aside %+v, want one file", rep.KeptAside)
	}
	k := rep.KeptAside[0]
	want := "line 2: invocation edited: p/m row cost $0.000000001, its usage priced at $0.000001; settlement cost $0.000000001, its rows priced at $0.000001"
	if !k.Repriced || k.Records != 1 || !strings.HasPrefix(k.Path, path+"."+ledger.KeptAsideRepriced+"-") || k.Reason != want {
		t.Errorf("kept aside %+v; want the edited line, reason %q", k, want)
	}
	if got, err := os.ReadFile(k.Path); err != nil || !bytes.Equal(got, edited) {
		t.Errorf("%s holds %q, %v; want the line as found", k.Path, got, err)
	}
	if msg := k.Error(); !strings.Contains(msg, "applied at the usage's price") || !strings.Contains(msg, k.Path) {
		t.Errorf("report %q", msg)
	}
	// The store's rows now agree with their prices.
	if problems, err := ledger.CheckPrices(ctx, st, tenNanosAToken); err != nil || len(problems) != 0 {
		t.Errorf("CheckPrices = %v, %v", problems, err)
	}
}

// A row that costs less than its usage in the store (an edited line
// applied by a replay that did not check, or an edited database) is named
// by CheckPrices with its invocation and both figures.
func TestCheckPricesNamesACheapRow(t *testing.T) {
	ctx := t.Context()
	st := openSQLite(t)
	dir := t.TempDir()
	edited := bytes.ReplaceAll(pricedLine("edited"), []byte(`"cost":1000`), []byte(`"cost":1`))
	if err := os.WriteFile(filepath.Join(dir, "1-1.journal"), append(pricedLine("kept"), edited...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.ReplayJournals(ctx, st, dir); err != nil {
		t.Fatal(err)
	}
	problems, err := ledger.CheckPrices(ctx, st, tenNanosAToken)
	want := "invocation edited: p/m row cost $0.000000001, its usage priced at $0.000001"
	if err != nil || len(problems) != 1 || problems[0] != want {
		t.Errorf("CheckPrices = %q, %v; want [%q]", problems, err, want)
	}
}
