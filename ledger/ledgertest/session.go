package ledgertest

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// The host's session and agents of a gateway call: recorded on its rows,
// selected by session, grouped by session and by subagent.
var sessionTests = []struct {
	name string
	run  func(*env)
}{
	{"RowsCarryTheHostSession", testRowsCarryHostSession},
	{"SpendBySessionAndHostAgent", testSpendBySession},
	{"AnyHostIDIsRecordedBounded", testHostIDBounded},
}

// hostRow is a priced ledger row of invocation id at second i after Epoch,
// made in session by hostAgent (started by parent).
func hostRow(id string, i int, session, hostAgent, parent, cost string) ledger.AttemptRow {
	return ledger.AttemptRow{InvocationID: id, Time: Epoch.Add(time.Duration(i) * time.Second), Task: "t", Agent: "coder",
		Provider: "sim", Model: "m1", Outcome: "ok", InputTokens: int64(10 * (i + 1)), OutputTokens: int64(i + 1), Cost: M(cost),
		Session: session, HostAgent: hostAgent, ParentAgent: parent}
}

func testRowsCarryHostSession(e *env) {
	// A settlement's entry and earlier rows, and a row recorded alone.
	set := ledger.Settlement{InvocationID: "inv-s", Cost: M("0.75"), Scopes: []ledger.Scope{taskA},
		Earlier: []ledger.AttemptRow{{Time: Epoch, Provider: "p1", Model: "m", Outcome: "overloaded",
			Session: "sess-1", HostAgent: "agent-7", ParentAgent: "agent-main"}},
		Entry: ledger.AttemptRow{Time: Epoch.Add(time.Second), Provider: "p2", Model: "m", Outcome: "ok", Cost: M("0.75"),
			Session: "sess-1", HostAgent: "agent-7", ParentAgent: "agent-main"}}
	e.mustReserve("inv-s", "1", taskA)
	if err := e.s.Settle(e.ctx, set); err != nil {
		e.t.Fatal(err)
	}
	alone := hostRow("inv-r", 2, "sess-2", "", "", "0.25")
	if err := e.s.RecordAttempt(e.ctx, alone); err != nil {
		e.t.Fatal(err)
	}
	rows := e.attempts(ledger.Filter{})
	if len(rows) != 3 {
		e.t.Fatalf("rows = %+v; want 3", rows)
	}
	for i, r := range rows[:2] {
		if r.InvocationID != "inv-s" || r.Session != "sess-1" || r.HostAgent != "agent-7" || r.ParentAgent != "agent-main" {
			e.t.Errorf("settled row %d = %+v; want session sess-1, host agent agent-7, parent agent-main", i, r)
		}
	}
	rows[2].Time = alone.Time
	if rows[2] != alone {
		e.t.Errorf("recorded row = %+v\nwant %+v", rows[2], alone)
	}
	if got := e.attempts(ledger.Filter{Session: "sess-2"}); len(got) != 1 || got[0].InvocationID != "inv-r" {
		e.t.Errorf("rows of session sess-2 = %+v; want inv-r's", got)
	}
	if got := e.attempts(ledger.Filter{Session: "sess-1", Provider: "p2"}); len(got) != 1 || got[0].Outcome != "ok" {
		e.t.Errorf("rows of session sess-1 at p2 = %+v; want the entry", got)
	}
	if got := e.attempts(ledger.Filter{Session: "sess-3"}); len(got) != 0 {
		e.t.Errorf("rows of an unknown session = %+v", got)
	}
}

// groups renders a report's groups as "key=cost/attempts", in order.
func groups(rep ledger.SpendReport) string {
	var out []string
	for _, g := range rep.Groups {
		out = append(out, fmt.Sprintf("%s=%s/%d", g.Key, g.Cost, g.Attempts))
	}
	return strings.Join(out, " ")
}

func testSpendBySession(e *env) {
	for _, r := range []ledger.AttemptRow{
		hostRow("a1", 0, "s1", "", "", "1"),
		hostRow("a2", 1, "s1", "sub-a", "", "0.5"),
		hostRow("a3", 2, "s1", "sub-a", "", "0.25"),
		hostRow("a4", 3, "s1", "sub-b", "sub-a", "0.125"),
		hostRow("a5", 4, "s2", "", "", "2"),
		hostRow("a6", 5, "s2", "sub-c", "", "0.000000001"),
		hostRow("a7", 6, "", "", "", "4"), // no host: the CLI, another client
	} {
		if err := e.s.RecordAttempt(e.ctx, r); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		f    ledger.Filter
		want string
	}{
		{ledger.Filter{By: ledger.BySession}, "=4.00/1 s1=1.875/4 s2=2.000000001/2"},
		{ledger.Filter{By: ledger.ByHostAgent}, "=7.00/3 sub-a=0.75/2 sub-b=0.125/1 sub-c=0.000000001/1"},
		{ledger.Filter{By: ledger.ByHostAgent, Session: "s1"}, "=1.00/1 sub-a=0.75/2 sub-b=0.125/1"},
		{ledger.Filter{By: ledger.ByHostAgent, Session: "s2"}, "=2.00/1 sub-c=0.000000001/1"},
		{ledger.Filter{By: ledger.BySession, From: Epoch.Add(2 * time.Second), To: Epoch.Add(5 * time.Second)}, "s1=0.375/2 s2=2.00/1"},
		{ledger.Filter{By: ledger.ByHostAgent, Session: "none"}, ""},
	} {
		if got := groups(e.spend(tc.f)); got != tc.want {
			e.t.Errorf("Spend(%+v) = %s; want %s", tc.f, got, tc.want)
		}
	}
	rep := e.spend(ledger.Filter{Session: "s1"})
	want := ledger.Totals{Cost: M("1.875"), Attempts: 4, InputTokens: 100, OutputTokens: 10}
	if rep.Total != want || rep.Groups != nil {
		e.t.Errorf("Spend of session s1 = %+v; want total %+v and no groups", rep, want)
	}
}

func testHostIDBounded(e *env) {
	long := strings.Repeat("é", ledger.MaxHostIDLen+50)
	for i, tc := range []struct{ in, want string }{
		{"nul\x00byte", "nul\uFFFDbyte"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"line\nbreak\ttab", "line\uFFFDbreak\uFFFDtab"},
		{`quote"and\back'slash; DROP TABLE attempts`, `quote"and\back'slash; DROP TABLE attempts`},
		{long, strings.Repeat("é", ledger.MaxHostIDLen-1) + "…"},
		{strings.Repeat("x", 1<<16), strings.Repeat("x", ledger.MaxHostIDLen-1) + "…"},
	} {
		id := fmt.Sprintf("bad-%d", i)
		set := ledger.Settlement{InvocationID: id, Cost: M("0.01"), Scopes: []ledger.Scope{taskB},
			Entry: hostRow(id, i, tc.in, tc.in, tc.in, "0.01")}
		if err := e.s.Settle(e.ctx, set); err != nil {
			e.t.Errorf("settling with host ids %.30q: %v; want it recorded", tc.in, err)
			continue
		}
		// The raw string selects what it was recorded as.
		rows := e.attempts(ledger.Filter{Session: tc.in})
		if len(rows) != 1 || rows[0].InvocationID != id {
			e.t.Errorf("rows of session %.30q = %d; want %s's", tc.in, len(rows), id)
			continue
		}
		r := rows[0]
		if r.Session != tc.want || r.HostAgent != tc.want || r.ParentAgent != tc.want {
			e.t.Errorf("%.30q recorded as %.40q, %.40q, %.40q; want %.40q", tc.in, r.Session, r.HostAgent, r.ParentAgent, tc.want)
		}
		if err := ledger.CheckHostID(r.Session); err != nil || utf8.RuneCountInString(r.Session) > ledger.MaxHostIDLen {
			e.t.Errorf("recorded session %.30q fails CheckHostID: %v", r.Session, err)
		}
	}
	if b := e.want(taskB, "0.06", "0", false); b.Spent != M("0.06") {
		e.t.Errorf("budget charged %s; want every settlement's cost", b.Spent)
	}
}

// runSessionSiteTests checks the upgrade of a version-7 site: its rows
// read as made without a session, and the rows written after it carry
// theirs.
func runSessionSiteTests(t *testing.T, newSite SiteMaker) {
	t.Run("UpgradeFromVersion7RecordsSessions", func(t *testing.T) {
		site := newSite(t)
		needOlderVersions(t, site)
		ctx := t.Context()
		if err := site.CreateAt(ctx, 7); err != nil {
			t.Fatal(err)
		}
		if err := site.Exec(ctx, `INSERT INTO _S_.attempts (invocation_id, at, task, agent, provider, model, outcome,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_nanos, cache_hit, saving_nanos, estimated,
			project, unpriced, key_id)
			VALUES ('old', $1, 't', 'coder', 'sim', 'm1', 'ok', 5, 6, 0, 0, 3000000000, false, 0, false, '', false, 'k1')`,
			Epoch.UnixNano()); err != nil {
			t.Fatal(err)
		}
		s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
		wantVersions(t, site)
		if v, err := s.SchemaVersion(ctx); err != nil || v != ledger.LatestSchemaVersion {
			t.Errorf("SchemaVersion = %d, %v; want %d", v, err, ledger.LatestSchemaVersion)
		}
		rows, err := s.Attempts(ctx, ledger.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		want := ledger.AttemptRow{InvocationID: "old", Time: Epoch.Truncate(0).UTC(), Task: "t", Agent: "coder", Provider: "sim", Model: "m1",
			Outcome: "ok", InputTokens: 5, OutputTokens: 6, Cost: M("3"), Key: "k1"}
		if len(rows) != 1 || !rows[0].Time.Equal(want.Time) {
			t.Fatalf("rows after the upgrade = %+v; want the version-7 row", rows)
		}
		rows[0].Time = want.Time
		if rows[0] != want {
			t.Errorf("the version-7 row after the upgrade = %+v\nwant %+v", rows[0], want)
		}
		if err := s.Settle(ctx, ledger.Settlement{InvocationID: "new", Cost: M("1"), Scopes: []ledger.Scope{taskA},
			Entry: hostRow("new", 1, "s1", "sub-a", "main", "1")}); err != nil {
			t.Fatal(err)
		}
		rep, err := s.Spend(ctx, ledger.Filter{By: ledger.BySession})
		if err != nil {
			t.Fatal(err)
		}
		if got := groups(rep); got != "=3.00/1 s1=1.00/1" {
			t.Errorf("spend by session after the upgrade = %s; want =3.00/1 s1=1.00/1", got)
		}
		if rows, err := s.Attempts(ctx, ledger.Filter{Session: "s1"}); err != nil || len(rows) != 1 || rows[0].HostAgent != "sub-a" || rows[0].ParentAgent != "main" {
			t.Errorf("the new row = %+v, %v", rows, err)
		}
	})
}
