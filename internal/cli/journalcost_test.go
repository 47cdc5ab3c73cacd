package cli

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// editedJournalLine is the journal line of a settlement of a call of 1,000
// input and 100 output tokens on claude-sonnet-4-6 (priced $0.0045) whose
// cost was edited to one nano-dollar, in the settlement and in its row.
func editedJournalLine(t *testing.T) []byte {
	t.Helper()
	row := map[string]any{"id": "edited-1", "at": 0, "task": "t", "agent": "builder", "provider": "claude", "model": "claude-sonnet-4-6",
		"outcome": "ok", "in": 1000, "out": 100, "cache_read": 0, "cache_write": 0, "cost": 1, "cache_hit": false, "saving": 0, "estimated": false}
	b, err := json.Marshal(map[string]any{"v": 1, "op": "settle", "settle": map[string]any{"id": "edited-1", "cost": 1,
		"scopes": []string{string(ledger.TaskScope("t"))}, "entry": row}})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// A journal line whose cost was edited down, left by a dead process: the
// next command's replay charges it at the price of its usage (spend counts
// $0.0045, not $0.000000001), keeps the line as found and says where on
// stderr, and doctor fails naming the kept file. A ledger row whose cost
// was edited in the database: doctor fails naming the invocation and both
// figures.
func TestAnEditedCostIsRepricedAndReported(t *testing.T) {
	dir, srv := fakeProject(t, true)
	srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	if code, _, errs := run(t, dir, keyEnv, "invoke", "--agent", "builder", "hi"); code != 0 {
		t.Fatalf("invoke = %d %q", code, errs)
	}
	journals := filepath.Join(dir, config.Dir, "journal")
	if err := os.MkdirAll(journals, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(journals, "999999-dead.journal"), editedJournalLine(t), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, dir, keyEnv, "spend", "--json")
	if code != 0 || !strings.Contains(out, `"cost_usd": "0.009"`) {
		t.Errorf("spend after the replay = %d %s; want $0.009 (the edited call at its usage's price)", code, out)
	}
	if !strings.Contains(errs, "invocation edited-1: claude/claude-sonnet-4-6 row cost $0.000000001, its usage priced at $0.0045") || !strings.Contains(errs, ".journal.repriced-") {
		t.Errorf("stderr of the replay: %q", errs)
	}
	code, c := doctorStatus(t, dir, keyEnv, "journal")
	if code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Detail, "999999-dead.journal.repriced-") {
		t.Errorf("doctor = %d, journal %+v", code, c)
	}
	if _, c := doctorStatus(t, dir, keyEnv, "costs"); c.Status != checkOK {
		t.Errorf("costs after the repricing = %+v", c)
	}

	// The row of the real call, edited in the database.
	db, err := sql.Open("sqlite", filepath.Join(dir, config.Dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE attempts SET cost_nanos = 1 WHERE invocation_id <> 'edited-1'`); err != nil {
		t.Fatal(err)
	}
	code, c = doctorStatus(t, dir, keyEnv, "costs")
	if code != ExitFailure || c.Status != checkFail || !strings.Contains(c.Detail, "claude/claude-sonnet-4-6 row cost $0.000000001, its usage priced at $0.0045") || !strings.Contains(c.Detail, "invocation ") {
		t.Errorf("doctor = %d, costs %+v", code, c)
	}
}
