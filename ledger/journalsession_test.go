package ledger_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

// stores are the back ends a journal is replayed into.
var stores = []struct {
	name string
	open func(t *testing.T, opts ...ledger.Option) ledger.Store
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

// replayOne replays data, as one journal, into st and checks that every
// record was applied and none kept aside.
func replayOne(t *testing.T, st ledger.Store, data []byte, applied int) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "4242-00ff.journal"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.ReplayJournals(t.Context(), st, dir)
	if err != nil || rep.Applied != applied || len(rep.KeptAside) != 0 {
		t.Fatalf("replay = %+v, %v; want %d applied, nothing kept aside", rep, err, applied)
	}
}

// A journal written by the version before rows carried the host's session
// (testdata/d38e4fc.journal, see testdata/README.md) is replayed whole:
// every row as it was written, without a session, and the budgets
// charged.
func TestReplayJournalOfTheVersionBefore(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "d38e4fc.journal"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := ledgertest.Epoch
	want := []ledger.AttemptRow{
		{InvocationID: "old-1", Time: t0, Task: "old", Agent: "coder", Provider: "anthropic-main", Model: "claude-sonnet-4-5",
			Outcome: "ok", InputTokens: 1200, OutputTokens: 345, CacheReadTokens: 1000, CacheWriteTokens: 7, Cost: 1500000},
		{InvocationID: "old-2", Time: t0.Add(time.Second), Task: "old", Agent: "reviewer", Provider: "openai-main", Model: "gpt-5", Outcome: "rate_limit"},
		{InvocationID: "old-2", Time: t0.Add(2 * time.Second), Task: "old", Agent: "reviewer", Provider: "openrouter", Model: "unknown/model",
			Outcome: "ok", InputTokens: 10, OutputTokens: 20, Cost: 2000000000, EstimatedUsage: true, Unpriced: true},
	}
	for _, sto := range stores {
		t.Run(sto.name, func(t *testing.T) {
			st := sto.open(t)
			replayOne(t, st, data, 2)
			rows := attemptRows(t, st)
			if len(rows) != len(want) {
				t.Fatalf("rows = %+v; want %d", rows, len(want))
			}
			for i := range want {
				if !rows[i].Time.Equal(want[i].Time) {
					t.Errorf("row %d at %v; want %v", i, rows[i].Time, want[i].Time)
				}
				rows[i].Time = want[i].Time
				if rows[i] != want[i] {
					t.Errorf("row %d = %+v\nwant %+v", i, rows[i], want[i])
				}
			}
			if b, err := st.Budget(t.Context(), ledger.TaskScope("old")); err != nil || b.Spent != 2001500000 {
				t.Errorf("task:old = %+v, %v; want $2.0015 spent", b, err)
			}
			if rep, err := st.Spend(t.Context(), ledger.Filter{By: ledger.BySession}); err != nil || len(rep.Groups) != 1 || rep.Groups[0].Key != "" || rep.Groups[0].Attempts != 3 {
				t.Errorf("spend by session = %+v, %v; want every row without a session", rep, err)
			}
		})
	}
}

// The journal's lines carry the host's session and agents, and the virtual
// key, of every row of a settlement: a replay (after a crash) records them
// as the store would have.
func TestReplayCarriesTheHostSession(t *testing.T) {
	set := ledger.Settlement{InvocationID: "inv-h", Cost: 7, Scopes: []ledger.Scope{ledger.TaskScope("t")},
		Earlier: []ledger.AttemptRow{{Time: ledgertest.Epoch, Provider: "p1", Outcome: "overloaded", Key: "kid1",
			Session: "sess-1", HostAgent: "agent-2", ParentAgent: "agent-1"}},
		Entry: ledger.AttemptRow{Time: ledgertest.Epoch.Add(time.Second), Provider: "p2", Outcome: "ok", Cost: 7, Key: "kid1",
			Session: "sess-1", HostAgent: "agent-2", ParentAgent: "agent-1"}}
	plain := ledger.Settlement{InvocationID: "inv-p", Cost: 3, Scopes: []ledger.Scope{ledger.TaskScope("t")},
		Entry: ledger.AttemptRow{Time: ledgertest.Epoch.Add(2 * time.Second), Provider: "p2", Outcome: "ok", Cost: 3}}
	data := append(ledger.JournalSettleLine(set), '\n')
	data = append(append(data, ledger.JournalSettleLine(plain)...), '\n')
	for _, sto := range stores {
		t.Run(sto.name, func(t *testing.T) {
			st := sto.open(t)
			replayOne(t, st, data, 2)
			rows := attemptRows(t, st)
			if len(rows) != 3 {
				t.Fatalf("rows = %+v; want 3", rows)
			}
			for i, r := range rows[:2] {
				if r.Key != "kid1" || r.Session != "sess-1" || r.HostAgent != "agent-2" || r.ParentAgent != "agent-1" {
					t.Errorf("row %d = %+v; want key kid1, session sess-1, host agent agent-2, parent agent-1", i, r)
				}
			}
			if r := rows[2]; r.Key != "" || r.Session != "" || r.HostAgent != "" || r.ParentAgent != "" {
				t.Errorf("row without a host = %+v", r)
			}
		})
	}
}

// A settlement through the fast path records the host's session like the
// store does, and a client's oversized id does not grow its journal line.
func TestFastRecordsTheHostSession(t *testing.T) {
	ctx := t.Context()
	f, err := ledger.NewFast(ctx, openSQLite(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	huge := strings.Repeat("s", 1<<20)
	for i, s := range []string{"sess-1", huge} {
		id := []string{"a", "b"}[i]
		if err := f.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: 10, Scopes: []ledger.Scope{ledger.TaskScope("t")}, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := f.Settle(ctx, ledger.Settlement{InvocationID: id, Cost: 5, Scopes: []ledger.Scope{ledger.TaskScope("t")},
			Entry: ledger.AttemptRow{Provider: "p", Outcome: "ok", Cost: 5, Session: s, HostAgent: "sub", ParentAgent: "main"}}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := f.Spend(ctx, ledger.Filter{By: ledger.BySession})
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Repeat("s", ledger.MaxHostIDLen-1) + "…"
	if len(rep.Groups) != 2 || rep.Groups[0].Key != "sess-1" || rep.Groups[1].Key != cut {
		t.Errorf("spend by session = %+v; want sess-1 and the huge id cut to %d characters", rep.Groups, ledger.MaxHostIDLen)
	}
	line := ledger.JournalSettleLine(ledger.Settlement{InvocationID: "b", Entry: ledger.AttemptRow{Session: huge, HostAgent: huge, ParentAgent: huge}})
	if len(line) > 2048 || !bytes.Contains(line, []byte(`"session":"`+cut+`"`)) {
		t.Errorf("journal line of a 1 MiB session id is %d bytes: %.300s", len(line), line)
	}
}

// attemptRows returns every ledger row of st, oldest first.
func attemptRows(t *testing.T, st ledger.Store) []ledger.AttemptRow {
	t.Helper()
	rows, err := st.Attempts(t.Context(), ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
