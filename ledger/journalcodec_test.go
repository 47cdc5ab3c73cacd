package ledger

import (
	"encoding/json"
	"testing"
)

// A journal line carries the unpriced flag of a row, and a line written
// before the flag existed reads back as priced, its other fields intact.
func TestJournalRowsCarryUnpriced(t *testing.T) {
	s := &Settlement{InvocationID: "inv-1", Cost: 7, Scopes: []Scope{"task:t"},
		Earlier: []AttemptRow{{InvocationID: "inv-1", Provider: "p", Outcome: "overloaded"}},
		Entry:   AttemptRow{InvocationID: "inv-1", Provider: "p", Model: "m", Outcome: "ok", OutputTokens: 3, Cost: 7, Unpriced: true}}
	line := appendRecord(nil, record{Op: "settle", Settle: s})
	var r jrecord
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	got := r.Settle.settlement()
	if !got.Entry.Unpriced || got.Earlier[0].Unpriced || got.Entry.Cost != 7 {
		t.Errorf("decoded %+v from %s", got, line)
	}
	old := `{"v":1,"op":"settle","settle":{"id":"inv-0","cost":5,"scopes":["task:t"],"entry":{"id":"inv-0","at":1,"task":"t","agent":"a","provider":"p","model":"m","outcome":"ok","in":1,"out":2,"cache_read":0,"cache_write":0,"cost":5,"cache_hit":false,"saving":0,"estimated":true}}}`
	r = jrecord{}
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	if e := r.Settle.settlement().Entry; e.Unpriced || e.Cost != 5 || !e.EstimatedUsage || e.OutputTokens != 2 {
		t.Errorf("old line decoded as %+v", e)
	}
}
