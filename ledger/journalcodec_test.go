package ledger

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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

// The journal line of a row without a key or host session is, byte for
// byte, what the version before wrote (testdata/d38e4fc.journal); the
// fields are added when set, and read back.
func TestJournalRowsCarryKeyAndHostSession(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "d38e4fc.journal"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(old, []byte("\n")), []byte("\n"))
	var r jrecord
	if err := json.Unmarshal(lines[2], &r); err != nil {
		t.Fatal(err)
	}
	s := r.Settle.settlement()
	if again := appendRecord(nil, record{Op: "settle", Settle: &s}); !bytes.Equal(again, lines[2]) {
		t.Errorf("the old line written again:\n%s\nwant\n%s", again, lines[2])
	}
	for i := range s.Earlier {
		s.Earlier[i].Key, s.Earlier[i].Session = "kid", "sess \"1\"\n"
	}
	s.Entry.Key, s.Entry.Session, s.Entry.HostAgent, s.Entry.ParentAgent = "kid", "sess \"1\"\n", "sub-2", "sub-1"
	line := appendRecord(nil, record{Op: "settle", Settle: &s})
	r = jrecord{}
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	got := r.Settle.settlement()
	e := got.Entry
	if e.Key != "kid" || e.Session != "sess \"1\"\uFFFD" || e.HostAgent != "sub-2" || e.ParentAgent != "sub-1" || e.Cost != s.Entry.Cost {
		t.Errorf("entry decoded as %+v from %s", e, line)
	}
	if a := got.Earlier[0]; a.Key != "kid" || a.Session != "sess \"1\"\uFFFD" || a.HostAgent != "" || a.ParentAgent != "" {
		t.Errorf("earlier row decoded as %+v from %s", a, line)
	}
}
