package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// doctorStatus is the status and detail of one doctor check.
func doctorStatus(t *testing.T, dir string, vars map[string]string, name string) (int, doctorCheck) {
	t.Helper()
	code, rep, _ := runDoctor(t, nil, dir, vars)
	return code, checkNamed(t, rep, name)
}

// A SQLite ledger with three pages overwritten in the middle: doctor runs
// SQLite's integrity check, says what it found, and exits 1.
func TestDoctorReportsADamagedSQLiteLedger(t *testing.T) {
	dir := writeConfig(t, "budgets:\n  confirm_above: \"100\"\n")
	path := filepath.Join(dir, config.Dir, "state.db")
	ctx := t.Context()
	st, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := st.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: fmt.Sprintf("inv-%05d", i), Task: strings.Repeat("t", 200), Provider: "p", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	code, c := doctorStatus(t, dir, nil, "store")
	if c.Status != checkOK || !strings.Contains(c.Detail, "integrity ok (checked: PRAGMA integrity_check;") {
		t.Fatalf("store of a sound ledger = %d %+v", code, c)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	middle := fi.Size() / 4096 / 2 * 4096
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 3*1024), middle); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, c = doctorStatus(t, dir, nil, "store")
	if code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Detail, "it is damaged: ") || !strings.Contains(c.Detail, "page") || !strings.Contains(c.Fix, ".recover") {
		t.Errorf("store of a damaged ledger = %d %+v; want a failure naming the problems", code, c)
	}
}

// On PostgreSQL doctor checks the schema version and the ledger's
// invariants: a hold on a scope the scopes table lacks is reported.
func TestDoctorChecksThePostgresLedger(t *testing.T) {
	st := postgresGatewayStore(testenv.Postgres(t))(t)
	dsn := strings.TrimPrefix(st.env[0], envGatewayCrashDSN+"=")
	vars := map[string]string{"CRASH_DSN": dsn}
	dir := writeConfig(t, st.config+"budgets:\n  confirm_above: \"100\"\n")
	code, c := doctorStatus(t, dir, vars, "store")
	if c.Status != checkOK || !strings.Contains(c.Detail, "integrity ok (checked: schema version; holds against scopes") {
		t.Fatalf("store of a sound ledger = %d %+v", code, c)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`INSERT INTO ` + ledger.DefaultSchema + `.reservations (invocation_id, amount_nanos, created_at, expires_at) VALUES ('orphan', 1, 0, 9)`,
		`INSERT INTO ` + ledger.DefaultSchema + `.holds (invocation_id, project, scope, amount_nanos, expires_at) VALUES ('orphan', 'p', 'task:nowhere', 1, 9)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	code, c = doctorStatus(t, dir, vars, "store")
	if code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Detail, "1 holds on a scope the scopes table does not know") {
		t.Errorf("store with an orphan hold = %d %+v", code, c)
	}
}

// Journal records a replay cannot apply are reported where they are found
// (stderr of the command that replayed them) and by doctor until the files
// are removed: a torn last record as a warning, a damaged one as a
// failure.
func TestKeptAsideJournalRecordsAreReported(t *testing.T) {
	dir, srv := fakeProject(t, true)
	journals := filepath.Join(dir, config.Dir, "journal")
	if err := os.MkdirAll(journals, 0o700); err != nil {
		t.Fatal(err)
	}
	line := func(id string) []byte {
		s := ledger.Settlement{InvocationID: id, Cost: 1000, Scopes: []ledger.Scope{ledger.TaskScope("t")},
			Entry: ledger.AttemptRow{InvocationID: id, Task: "t", Provider: "claude", Outcome: "ok", Cost: 1000}}
		var buf bytes.Buffer
		// The journal's line format: what the fast path writes.
		fmt.Fprintf(&buf, `{"v":1,"op":"settle","settle":{"id":%q,"cost":%d,"scopes":[%q],"entry":{"id":%q,"at":0,"task":"t","agent":"","provider":"claude","model":"","outcome":"ok","in":0,"out":0,"cache_read":0,"cache_write":0,"cost":1000,"cache_hit":false,"saving":0,"estimated":false}}}`+"\n",
			s.InvocationID, int64(s.Cost), string(s.Scopes[0]), s.InvocationID)
		return buf.Bytes()
	}
	torn := line("torn")[:40]
	tornJournal := filepath.Join(journals, "1-aa.journal")
	if err := os.WriteFile(tornJournal, append(line("good-1"), torn...), 0o600); err != nil {
		t.Fatal(err)
	}
	// 'spend' replays the journal: the good record counts, the torn one is
	// named on stderr.
	code, out, errs := run(t, dir, keyEnv, "spend", "--json")
	if code != 0 || !strings.Contains(out, `"attempts": 1`) || !strings.Contains(errs, tornJournal+".torn-") || !strings.Contains(errs, "torn last record") {
		t.Fatalf("spend = %d\n%s\n%s", code, out, errs)
	}
	kept, _ := filepath.Glob(tornJournal + ".torn-*")
	if len(kept) != 1 {
		t.Fatalf("kept aside: %v", kept)
	}
	if got, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(got, torn) {
		t.Errorf("%s: %q, %v; want %q", kept[0], got, err, torn)
	}
	if _, c := doctorStatus(t, dir, keyEnv, "journal"); c.Status != checkWarn || !strings.Contains(c.Detail, kept[0]) {
		t.Errorf("journal = %+v; want a warning naming %s", c, kept[0])
	}

	// 'invoke' (the fast path) replays a journal with a damaged record.
	damagedJournal := filepath.Join(journals, "2-bb.journal")
	if err := os.WriteFile(damagedJournal, append(append(line("good-2"), "{\"v\":1,\"op\":\"settle\",\"settle\":{\"id\":\x00\n"...), line("good-3")...), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(anthropicfake.TextReply("hello"))
	code, _, errs = run(t, dir, keyEnv, "invoke", "hi")
	if code != 0 || !strings.Contains(errs, damagedJournal+".corrupt-") || !strings.Contains(errs, "line 2: unreadable") {
		t.Fatalf("invoke = %d\n%s", code, errs)
	}
	code, c := doctorStatus(t, dir, keyEnv, "journal")
	if code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Detail, damagedJournal+".corrupt-") || !strings.Contains(c.Detail, kept[0]) {
		t.Errorf("journal = %d %+v; want a failure naming both files", code, c)
	}
	code, out, _ = run(t, dir, keyEnv, "spend", "--json")
	if code != 0 || !strings.Contains(out, `"attempts": 4`) {
		t.Errorf("spend after both replays = %d %s; want good-1, good-2, good-3 and the invocation", code, out)
	}
}
