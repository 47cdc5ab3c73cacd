package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// 'serve keys create' takes a key's limits, refuses bad values with what
// was wrong, 'serve keys update' changes them, and 'serve keys list' shows
// them with the key's spend this period.
func TestKeyLimitsThroughTheCLI(t *testing.T) {
	dir, _ := fakeProject(t, true)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--budget", "-1"}, "negative"},
		{[]string{"--budget", "five"}, `--budget "five": not an amount`},
		{[]string{"--budget", "5", "--period", "week"}, `unknown budget period "week": use day, month or total`},
		{[]string{"--period", "day"}, "needs a budget"},
		{[]string{"--rpm", "-3"}, "negative"},
		{[]string{"--expires", "soon"}, "give a duration (720h), a date (2027-01-31)"},
		{[]string{"--expires", "2020-01-01"}, "not in the future"},
		{[]string{"--agents", "planner,critc"}, `--agents "critc": unknown agent (did you mean "critic"?)`},
		{[]string{"--agent", "builder", "--agents", "planner"}, "bound to agent builder"},
		{[]string{"--role", "admin", "--budget", "5"}, "an admin key makes no model calls"},
	} {
		args := append([]string{"serve", "keys", "create"}, c.args...)
		if code, _, errs := run(t, dir, nil, args...); code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v = %d %q; want a usage error with %q", c.args, code, errs, c.want)
		}
	}
	code, out, errs := run(t, dir, nil, "serve", "keys", "create", "--name", "ci", "--budget", "5.00", "--period", "month", "--rpm", "60", "--tpm", "200000", "--expires", "720h", "--agents", "planner,critic", "--json")
	var k struct {
		ID     string   `json:"id"`
		Token  string   `json:"key"`
		Budget string   `json:"budget_usd"`
		Period string   `json:"budget_period"`
		RPM    int      `json:"rpm"`
		TPM    int64    `json:"tpm"`
		Agents []string `json:"agents"`
		Expiry string   `json:"expires_at"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil || k.Budget != "5.00" || k.Period != "month" || k.RPM != 60 || k.TPM != 200000 ||
		strings.Join(k.Agents, ",") != "planner,critic" || k.Expiry == "" {
		t.Fatalf("create = %d %s %s", code, out, errs)
	}
	if at, err := time.Parse(time.RFC3339, k.Expiry); err != nil || at.Sub(time.Now()) < 719*time.Hour || at.Sub(time.Now()) > 721*time.Hour {
		t.Errorf("expiry %q, %v; want 720h from now", k.Expiry, err)
	}

	// Spend recorded under the key's id this month, and last month.
	ctx := context.Background()
	st, err := ledger.OpenSQLite(ctx, filepath.Join(dir, config.Dir, "state.db"), projectOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, r := range []struct {
		key, cost string
		at        time.Time
	}{{k.ID, "1.25", now}, {k.ID, "0.5", now.AddDate(0, -2, 0)}, {"", "2", now}, {"other", "0.75", now}} {
		row := ledger.AttemptRow{InvocationID: "inv-" + string(rune('a'+i)), Time: r.at, Key: r.key, Provider: "claude", Model: "m", Outcome: "ok", Cost: provider.MustMoney(r.cost)}
		if err := st.RecordAttempt(ctx, row); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	code, out, errs = run(t, dir, nil, "spend", "--by", "key")
	if code != 0 || !strings.Contains(out, "(no key)") || !regexpLine(out, k.ID+`\s+\$1.75\s+2\b`) || !regexpLine(out, `other\s+\$0.75`) {
		t.Errorf("spend --by key = %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, dir, nil, "spend", "--key", k.ID, "--json")
	if code != 0 || !strings.Contains(out, `"cost_usd": "1.75"`) {
		t.Errorf("spend --key = %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, dir, nil, "serve", "keys", "list")
	if code != 0 || !strings.Contains(out, "budget $5.00/month, 60 rpm, 200000 tpm, expires ") || !strings.Contains(out, "planner,critic") || !strings.Contains(out, "$1.25 this month") {
		t.Errorf("list = %d\n%s%s", code, out, errs)
	}

	code, out, errs = run(t, dir, nil, "serve", "keys", "update", k.ID, "--budget", "10", "--period", "day", "--rpm", "0", "--agents", "none", "--expires", "none")
	if code != 0 || !strings.Contains(out, "budget $10.00/day, 200000 tpm") || strings.Contains(out, "rpm") || strings.Contains(out, "agents") || strings.Contains(out, "expires") {
		t.Errorf("update = %d %q %q", code, out, errs)
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "update", k.ID, "--period", "fortnight"); code != ExitUsage || !strings.Contains(errs, `unknown budget period "fortnight"`) {
		t.Errorf("update with a bad period = %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "update", "0000"); code != ExitUsage || !strings.Contains(errs, "nothing to change") {
		t.Errorf("update without flags = %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "update", "0000", "--rpm", "5"); code != ExitUsage || !strings.Contains(errs, "no such key") {
		t.Errorf("update of an unknown key = %d %q", code, errs)
	}
	if code, out, errs := run(t, dir, nil, "serve", "keys", "list"); code != 0 || !strings.Contains(out, "$1.25 today") {
		t.Errorf("list after the update = %d\n%s%s", code, out, errs)
	}
	// A key that expired is listed as such, with when.
	ks := gateway.OpenKeyStore(filepath.Join(dir, config.Dir, gateway.KeyFileName))
	ks.SetClock(func() time.Time { return now.Add(-48 * time.Hour) })
	at := now.Add(-24 * time.Hour).UTC().Truncate(time.Second)
	if _, _, err := ks.Create(gateway.KeySpec{Name: "old", Project: keptProjectID(t, dir), KeyLimits: gateway.KeyLimits{ExpiresAt: &at}}); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, dir, nil, "serve", "keys", "list"); code != 0 || !strings.Contains(out, "expired "+at.Format(time.RFC3339)) {
		t.Errorf("list with an expired key = %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out+errs, secretOf(k.Token)) {
		t.Error("the secret was printed again")
	}
}

func secretOf(token string) string {
	_, s, _ := strings.Cut(strings.TrimPrefix(token, "cbk_"), "_")
	return s
}

// regexpLine reports whether a line of out matches re.
func regexpLine(out, re string) bool {
	return regexp.MustCompile(`(?m)^.*` + re).MatchString(out)
}
