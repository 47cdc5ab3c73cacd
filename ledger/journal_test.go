package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// settlementLine is the journal line of a settlement of id, with its
// newline.
func settlementLine(id string) []byte {
	return append(ledger.JournalSettleLine(ledger.Settlement{InvocationID: id, Cost: 1000, Scopes: []ledger.Scope{ledger.TaskScope("t")},
		Entry: ledger.AttemptRow{InvocationID: id, Task: "t", Provider: "p", Outcome: "ok", Cost: 1000}}), '\n')
}

// attemptIDs lists the invocations with an attempt in st.
func attemptIDs(t *testing.T, st ledger.Store) []string {
	t.Helper()
	rows, err := st.Attempts(t.Context(), ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.InvocationID)
	}
	return ids
}

// A journal whose last record was cut short (its process died while
// writing it) and one with a damaged record in the middle: the replay
// applies every good record, keeps the bad bytes, exactly, in a new 0600
// file beside the journal, names it in its report, and removes the
// journal.
func TestReplayKeepsBadRecordsAside(t *testing.T) {
	good := func(id string) []byte { return settlementLine(id) }
	tornTail := good("torn-3")
	tornTail = tornTail[:len(tornTail)/2]
	damaged := bytes.Replace(good("damaged-2"), []byte(`"cost":1000`), []byte(`"cost":1\x00\xff0`), 1)
	for _, tc := range []struct {
		name      string
		journal   [][]byte
		applied   []string
		kept      []byte
		torn      bool
		reasonHas string
	}{
		{"torn last record", [][]byte{good("torn-1"), good("torn-2"), tornTail}, []string{"torn-1", "torn-2"}, tornTail, true, "line 3: cut short"},
		{"damaged middle record", [][]byte{good("damaged-1"), damaged, good("damaged-3")}, []string{"damaged-1", "damaged-3"}, damaged, false, "line 2: unreadable"},
		{"unknown operation", [][]byte{good("op-1"), []byte(`{"v":1,"op":"refund"}` + "\n")}, []string{"op-1"}, []byte(`{"v":1,"op":"refund"}` + "\n"), false, `unknown operation "refund"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st := openSQLite(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "4242-00ff.journal")
			if err := os.WriteFile(path, bytes.Join(tc.journal, nil), 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := ledger.ReplayJournals(ctx, st, dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Applied != len(tc.applied) || strings.Join(attemptIDs(t, st), ",") != strings.Join(tc.applied, ",") {
				t.Errorf("applied %d, attempts %v; want %v", rep.Applied, attemptIDs(t, st), tc.applied)
			}
			if len(rep.KeptAside) != 1 {
				t.Fatalf("kept aside: %+v; want one file", rep.KeptAside)
			}
			k := rep.KeptAside[0]
			kind := ledger.KeptAsideCorrupt
			if tc.torn {
				kind = ledger.KeptAsideTorn
			}
			if k.Journal != path || k.Records != 1 || k.Torn != tc.torn || !strings.HasPrefix(k.Path, path+"."+kind+"-") || !strings.Contains(k.Reason, tc.reasonHas) {
				t.Errorf("kept aside: %+v; want 1 record of %s in %s.%s-<time>, reason with %q", k, path, path, kind, tc.reasonHas)
			}
			if msg := k.Error(); !strings.Contains(msg, k.Path) || !strings.Contains(msg, path) {
				t.Errorf("report %q does not name %s and %s", msg, k.Path, path)
			}
			got, err := os.ReadFile(k.Path)
			if err != nil || !bytes.Equal(got, tc.kept) {
				t.Errorf("%s holds %q, %v; want the bad bytes %q", k.Path, got, err, tc.kept)
			}
			if fi, err := os.Stat(k.Path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v, %v; want mode 0600", k.Path, fi, err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the journal is still there after its replay: %v", err)
			}
			// Replaying again finds nothing, and the kept file stays.
			if rep, err := ledger.ReplayJournals(ctx, st, dir); err != nil || rep.Applied != 0 || len(rep.KeptAside) != 0 {
				t.Errorf("second replay = %+v, %v", rep, err)
			}
			if again, err := os.ReadFile(k.Path); err != nil || !bytes.Equal(again, tc.kept) {
				t.Errorf("%s after a second replay: %q, %v", k.Path, again, err)
			}
			// Replay, the short form, keeps it aside again in a new file, and
			// reports a damaged record as an error.
			if err := os.WriteFile(path, bytes.Join(tc.journal, nil), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = ledger.Replay(ctx, st, dir)
			var ka ledger.KeptAside
			if tc.torn != (err == nil) || (!tc.torn && (!errors.As(err, &ka) || ka.Path == k.Path)) {
				t.Errorf("Replay = %v; want %s", err, map[bool]string{true: "no error", false: "a KeptAside error naming a new file"}[tc.torn])
			}
			if kept, _ := filepath.Glob(path + "." + kind + "-*"); len(kept) != 2 {
				t.Errorf("kept-aside files after two replays: %v; want two", kept)
			}
		})
	}
}

// A store down during the replay: the journal stays as it was, and
// nothing is kept aside yet.
func TestReplayLeavesTheJournalWhenTheStoreIsDown(t *testing.T) {
	st := openSQLite(t)
	st.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "4242-00ff.journal")
	data := append(settlementLine("a"), []byte("garbage\n")...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.ReplayJournals(context.Background(), st, dir)
	if err == nil || len(rep.KeptAside) != 0 {
		t.Errorf("replay into a closed store = %+v, %v; want an error and nothing kept aside", rep, err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Errorf("journal after the failed replay: %q, %v", got, err)
	}
	if left, _ := filepath.Glob(path + ".*"); len(left) != 0 {
		t.Errorf("files kept aside: %v", left)
	}
}

// NewFast replays the journals it finds and tells its error callback about
// every record kept aside (the CLI prints it on stderr and in the log).
func TestNewFastReportsKeptAsideRecords(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "4242-00ff.journal")
	torn := settlementLine("b")
	if err := os.WriteFile(path, append(settlementLine("a"), torn[:10]...), 0o600); err != nil {
		t.Fatal(err)
	}
	var reported []error
	f, err := ledger.NewFast(ctx, openSQLite(t), dir, ledger.FastOnError(func(err error) { reported = append(reported, err) }))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var k ledger.KeptAside
	if len(reported) != 1 || !errors.As(reported[0], &k) || !k.Torn || !strings.Contains(reported[0].Error(), path+".torn-") {
		t.Fatalf("reported %v; want the torn record kept aside", reported)
	}
	if got, err := os.ReadFile(k.Path); err != nil || !bytes.Equal(got, torn[:10]) {
		t.Errorf("%s: %q, %v", k.Path, got, err)
	}
	if ids := attemptIDs(t, f); len(ids) != 1 || ids[0] != "a" {
		t.Errorf("attempts %v; want a", ids)
	}
}
