package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// 'spend --by session' groups the ledger by host session, '--session S'
// keeps one, and '--by host_agent' shows its subagents with the agent that
// started each.
func TestSpendBySessionThroughTheCLI(t *testing.T) {
	dir, _ := fakeProject(t, true)
	if code, _, errs := run(t, dir, nil, "spend"); code != 0 {
		t.Fatalf("spend of an empty ledger = %d %q", code, errs)
	}
	ctx := context.Background()
	st, err := ledger.OpenSQLite(ctx, filepath.Join(dir, config.Dir, "state.db"), projectOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, r := range []struct{ session, agent, parent, cost string }{
		{"sess-a", "", "", "1"},
		{"sess-a", "sub-1", "", "0.5"},
		{"sess-a", "sub-2", "sub-1", "0.25"},
		{"sess-a", "sub-2", "sub-1", "0.25"},
		{"sess-b", "sub-3", "", "2"},
		{"", "", "", "4"},
	} {
		row := ledger.AttemptRow{InvocationID: "inv-" + string(rune('a'+i)), Time: now.Add(time.Duration(i) * time.Millisecond), Provider: "claude", Model: "m", Outcome: "ok",
			Cost: provider.MustMoney(r.cost), Session: r.session, HostAgent: r.agent, ParentAgent: r.parent}
		if err := st.RecordAttempt(ctx, row); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	code, out, errs := run(t, dir, nil, "spend", "--by", "session")
	if code != 0 || !regexpLine(out, `\(no session\)\s+\$4.00\s+1\b`) || !regexpLine(out, `sess-a\s+\$2.00\s+4\b`) || !regexpLine(out, `sess-b\s+\$2.00\s+1\b`) || !regexpLine(out, `total\s+\$8.00\s+6\b`) {
		t.Errorf("spend --by session = %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, dir, nil, "spend", "--session", "sess-a", "--by", "host_agent")
	if code != 0 || !regexpLine(out, `\(main agent\)\s+\$1.00\s+1\b`) || !regexpLine(out, `sub-1\s+\$0.50\s+1\b`) ||
		!regexpLine(out, `sub-2 \(started by sub-1\)\s+\$0.50\s+2\b`) || !regexpLine(out, `total\s+\$2.00\s+4\b`) || strings.Contains(out, "sub-3") {
		t.Errorf("spend --session sess-a --by host_agent = %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, dir, nil, "spend", "--by", "host_agent", "--month")
	if code != 0 || !regexpLine(out, `\(main agent, or no session\)\s+\$5.00\s+2\b`) || !regexpLine(out, `sub-3\s+\$2.00`) {
		t.Errorf("spend --by host_agent = %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, dir, nil, "spend", "--session", "sess-b", "--json")
	var rep struct {
		Total struct {
			Cost     string `json:"cost_usd"`
			Attempts int    `json:"attempts"`
		} `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Total.Cost != "2.00" || rep.Total.Attempts != 1 {
		t.Errorf("spend --session sess-b --json = %d %s", code, out)
	}
	if code, _, errs := run(t, dir, nil, "spend", "--by", "subagent"); code != ExitUsage || !strings.Contains(errs, `--by "subagent": use task, agent, model, month, key, session or host_agent`) {
		t.Errorf("spend --by subagent = %d %q", code, errs)
	}
}
