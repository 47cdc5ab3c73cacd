package ledgertest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The budget alerts: a settlement that takes a scope's spend across a
// threshold of its limit records one alert, once per scope, threshold and
// limit; ClaimAlerts hands each to one claimant until it is marked
// notified.
var alertTests = []struct {
	name string
	run  func(*env)
}{
	{"AlertsOncePerThreshold", testAlertsOncePerThreshold},
	{"AlertsOfOneSettlementCrossingSeveral", testAlertsSeveralAtOnce},
	{"AlertsOnlyForScopesWithALimit", testAlertsNeedALimit},
	{"AlertsOfARaisedBudget", testAlertsRaisedBudget},
	{"AlertsConcurrentSettlementsCrossOnce", testAlertsConcurrent},
	{"AlertsClaimedByOneUntilNotified", testAlertsClaim},
	{"AlertsClaimArguments", testAlertsClaimInvalid},
}

// alertKey is what identifies an alert, for comparisons.
type alertKey struct {
	Scope     ledger.Scope
	Threshold int
	Limit     provider.Money
	Spent     provider.Money
}

func keysOf(as []ledger.Alert) []alertKey {
	out := make([]alertKey, len(as))
	for i, a := range as {
		out[i] = alertKey{a.Scope, a.Threshold, a.Limit, a.Spent}
	}
	return out
}

// wantAlerts checks the store's alerts, newest first.
func (e *env) wantAlerts(want ...alertKey) []ledger.Alert {
	e.t.Helper()
	got, err := e.s.Alerts(e.ctx, 0)
	if err != nil {
		e.t.Fatalf("Alerts: %v", err)
	}
	if !slices.Equal(keysOf(got), want) {
		e.t.Fatalf("alerts (newest first) = %+v; want %+v", keysOf(got), want)
	}
	return got
}

func testAlertsOncePerThreshold(e *env) {
	e.budget(taskA, "10")
	e.budget(month, "1000")
	e.mustSettle("a1", "4.99", taskA, month)
	e.wantAlerts()
	e.clock.Advance(time.Minute)
	e.mustSettle("a2", "0.01", taskA, month) // exactly 50 %
	got := e.wantAlerts(alertKey{taskA, 50, M("10"), M("5")})
	if !got[0].CrossedAt.Equal(Epoch.Add(time.Minute)) || !got[0].NotifiedAt.IsZero() {
		e.t.Errorf("alert %+v; want crossed at the settlement's time, not notified", got[0])
	}
	e.clock.Advance(time.Minute)
	e.mustSettle("a3", "2", taskA, month) // 70 %: no threshold
	e.mustSettle("a4", "1.5", taskA, month)
	e.clock.Advance(time.Minute)
	e.mustSettle("a5", "3", taskA, month) // 115 %: paused, and 100 %
	e.mustSettle("a6", "1", taskA, month) // above every threshold already
	e.wantAlerts(alertKey{taskA, 100, M("10"), M("11.5")}, alertKey{taskA, 80, M("10"), M("8.5")}, alertKey{taskA, 50, M("10"), M("5")})
	if got, err := e.s.Alerts(e.ctx, 2); err != nil || len(got) != 2 || got[0].Threshold != 100 || got[1].Threshold != 80 {
		e.t.Errorf("Alerts(limit 2) = %+v, %v; want the two newest", got, err)
	}
	e.want(taskA, "12.5", "0", true)
}

func testAlertsSeveralAtOnce(e *env) {
	e.budget(taskA, "1")
	e.mustReserve("big", "0.9", taskA)
	e.mustSettle("big", "1.5", taskA)
	e.wantAlerts(alertKey{taskA, 100, M("1"), M("1.5")}, alertKey{taskA, 80, M("1"), M("1.5")}, alertKey{taskA, 50, M("1"), M("1.5")})
}

func testAlertsNeedALimit(e *env) {
	e.mustSettle("free", "100", taskB)
	e.budget(taskA, "0")
	e.mustSettle("zero", "1", taskA)
	e.budget(month, "10")
	e.mustSettle("nothing", "0", month)
	e.wantAlerts()
}

// A budget raised after some thresholds were crossed: every threshold of
// the new limit is announced when the spend crosses it, those already
// crossed under the old limit are not announced again.
func testAlertsRaisedBudget(e *env) {
	e.budget(taskA, "10")
	e.mustSettle("a1", "8.5", taskA)
	e.wantAlerts(alertKey{taskA, 80, M("10"), M("8.5")}, alertKey{taskA, 50, M("10"), M("8.5")})
	e.budget(taskA, "20") // 42.5 %
	e.mustSettle("a2", "1", taskA)
	e.wantAlerts(alertKey{taskA, 80, M("10"), M("8.5")}, alertKey{taskA, 50, M("10"), M("8.5")})
	e.mustSettle("a3", "0.5", taskA) // 50 % of $20
	e.mustSettle("a4", "6", taskA)   // 80 %
	e.wantAlerts(alertKey{taskA, 80, M("20"), M("16")}, alertKey{taskA, 50, M("20"), M("10")},
		alertKey{taskA, 80, M("10"), M("8.5")}, alertKey{taskA, 50, M("10"), M("8.5")})
	// A limit set below the spend: the next settlement crosses nothing,
	// the spend was past every threshold before it. One just above the
	// spend: the settlement that reaches it crosses 100 %.
	e.budget(taskA, "10")
	e.mustSettle("a5", "1", taskA) // 17 of 10
	e.budget(taskA, "17.5")
	e.mustSettle("a6", "1", taskA) // 18 of 17.5
	e.wantAlerts(alertKey{taskA, 100, M("17.5"), M("18")}, alertKey{taskA, 80, M("20"), M("16")}, alertKey{taskA, 50, M("20"), M("10")},
		alertKey{taskA, 80, M("10"), M("8.5")}, alertKey{taskA, 50, M("10"), M("8.5")})
}

// Many goroutines settle calls on one scope at once; the crossings are
// decided under the scope's lock, so each threshold is recorded once.
func testAlertsConcurrent(e *env) {
	e.budget(taskA, "10")
	e.budget(month, "10")
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = e.s.Settle(e.ctx, e.settlement(fmt.Sprintf("c%02d", i), "0.3", taskA, month))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.s.Alerts(e.ctx, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	count := map[ledger.Scope]map[int]int{}
	for _, a := range got {
		if count[a.Scope] == nil {
			count[a.Scope] = map[int]int{}
		}
		count[a.Scope][a.Threshold]++
		need := M("10") * provider.Money(a.Threshold) / 100
		if a.Limit != M("10") || a.Spent < need || a.Spent >= need+M("0.3") {
			e.t.Errorf("alert %+v: the spend is not the first one at or above $%s", a, need)
		}
	}
	want := map[int]int{50: 1, 80: 1, 100: 1}
	for _, sc := range []ledger.Scope{taskA, month} {
		if len(count[sc]) != 3 || count[sc][50] != 1 || count[sc][80] != 1 || count[sc][100] != 1 {
			e.t.Errorf("alerts of %s by threshold = %v; want %v", sc, count[sc], want)
		}
	}
}

func testAlertsClaim(e *env) {
	e.budget(taskA, "10")
	e.mustSettle("a1", "5", taskA)
	e.clock.Advance(time.Second)
	e.mustSettle("a2", "3", taskA)
	if got, err := e.s.ClaimAlerts(e.ctx, time.Minute, 1); err != nil || len(got) != 1 || got[0].Threshold != 50 {
		e.t.Fatalf("ClaimAlerts(max 1) = %+v, %v; want the oldest, 50 %%", got, err)
	}
	got, err := e.s.ClaimAlerts(e.ctx, time.Minute, 10)
	if err != nil || len(got) != 1 || got[0].Threshold != 80 {
		e.t.Fatalf("second ClaimAlerts = %+v, %v; want 80 %% only (50 %% is claimed)", got, err)
	}
	if err := e.s.AlertNotified(e.ctx, got[0].ID); err != nil {
		e.t.Fatal(err)
	}
	if got, err := e.s.ClaimAlerts(e.ctx, time.Minute, 10); err != nil || len(got) != 0 {
		e.t.Fatalf("ClaimAlerts while the claim runs = %+v, %v; want none", got, err)
	}
	// The claim of 50 % runs out unmarked (its announcement failed): it is
	// claimed again; 80 % is notified and never is.
	e.clock.Advance(time.Minute)
	got, err = e.s.ClaimAlerts(e.ctx, time.Minute, 10)
	if err != nil || len(got) != 1 || got[0].Threshold != 50 {
		e.t.Fatalf("ClaimAlerts after the claim ran out = %+v, %v; want 50 %% again", got, err)
	}
	if err := e.s.AlertNotified(e.ctx, got[0].ID); err != nil {
		e.t.Fatal(err)
	}
	if err := e.s.AlertNotified(e.ctx, got[0].ID); err != nil {
		e.t.Errorf("marking twice: %v", err)
	}
	e.clock.Advance(time.Hour)
	if got, err := e.s.ClaimAlerts(e.ctx, time.Minute, 10); err != nil || len(got) != 0 {
		e.t.Fatalf("ClaimAlerts once every alert is notified = %+v, %v; want none", got, err)
	}
	all, err := e.s.Alerts(e.ctx, 0)
	if err != nil || len(all) != 2 {
		e.t.Fatalf("Alerts = %+v, %v", all, err)
	}
	for _, a := range all {
		if a.NotifiedAt.IsZero() {
			e.t.Errorf("alert %+v: not marked notified", a)
		}
	}
}

func testAlertsClaimInvalid(e *env) {
	for _, tc := range []struct {
		hold time.Duration
		max  int
	}{{0, 1}, {-time.Second, 1}, {time.Second, 0}} {
		if _, err := e.s.ClaimAlerts(e.ctx, tc.hold, tc.max); !errors.Is(err, ledger.ErrInvalid) {
			e.t.Errorf("ClaimAlerts(%s, %d) = %v; want ErrInvalid", tc.hold, tc.max, err)
		}
	}
}

// RunAlertThresholdTests checks the thresholds a store is opened with:
// other thresholds than the default, none, and invalid ones, which open
// refuses. open returns the error of opening instead of failing.
func RunAlertThresholdTests(t *testing.T, open func(t *testing.T, opts ...ledger.Option) (ledger.Store, error)) {
	t.Run("OtherThresholds", func(t *testing.T) {
		s, err := open(t, ledger.WithAlerts(90, 25))
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, ctx: t.Context(), s: s, clock: NewClock(Epoch)}
		e.budget(taskA, "4")
		e.mustSettle("a1", "3.9", taskA)
		e.wantAlerts(alertKey{taskA, 90, M("4"), M("3.9")}, alertKey{taskA, 25, M("4"), M("3.9")})
	})
	t.Run("NoThresholds", func(t *testing.T) {
		s, err := open(t, ledger.WithAlerts())
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, ctx: t.Context(), s: s, clock: NewClock(Epoch)}
		e.budget(taskA, "1")
		e.mustSettle("a1", "2", taskA)
		e.wantAlerts()
		if got, err := s.ClaimAlerts(t.Context(), time.Minute, 10); err != nil || len(got) != 0 {
			t.Errorf("ClaimAlerts = %+v, %v", got, err)
		}
	})
	for _, bad := range [][]int{{0}, {-5}, {101}, {50, 80, 50}} {
		t.Run(fmt.Sprintf("Refuses%v", bad), func(t *testing.T) {
			s, err := open(t, ledger.WithAlerts(bad...))
			if !errors.Is(err, ledger.ErrInvalid) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("open with thresholds %v = %v; want ErrInvalid", bad, err)
			}
		})
	}
}

// testAlertsAcrossProcesses: three processes settle calls on one scope at
// once, crossing every threshold, then each claims and announces what it
// can: every threshold is recorded once and announced by exactly one of
// them; a process opened afterwards (a restart) finds nothing to announce.
func testAlertsAcrossProcesses(t *testing.T, site Site) {
	ctx := t.Context()
	s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
	scope := ledger.TaskScope("shared")
	if err := s.SetBudget(ctx, scope, M("3")); err != nil {
		t.Fatal(err)
	}
	const procs, each = 3, 12 // 36 calls of $0.1 against $3
	var hs []*helper
	for i := range procs {
		hs = append(hs, startHelper(t, site, "alerts", fmt.Sprintf("p%d", i), fmt.Sprint(each), "0.1", string(scope)))
	}
	for _, h := range hs {
		if line := h.next(t); line != fmt.Sprintf("settled %d", each) {
			t.Fatalf("helper said %q", line)
		}
	}
	got, err := s.Alerts(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"task:shared 100", "task:shared 80", "task:shared 50"}; fmt.Sprint(alertNames(got)) != fmt.Sprint(want) {
		t.Fatalf("alerts recorded = %v; want %v", alertNames(got), want)
	}
	for _, h := range hs {
		h.stdin.Close()
	}
	announced := map[string]int{}
	for _, h := range hs {
		for {
			line := h.next(t)
			if line == "done" {
				break
			}
			name, ok := strings.CutPrefix(line, "announced ")
			if !ok {
				t.Fatalf("helper said %q", line)
			}
			announced[name]++
		}
		h.wait(t)
	}
	if want := map[string]int{"task:shared 50": 1, "task:shared 80": 1, "task:shared 100": 1}; fmt.Sprint(announced) != fmt.Sprint(want) {
		t.Errorf("announcements across %d processes = %v; want each threshold once: %v", procs, announced, want)
	}
	restarted := openSite(t, site, ledger.WithClock(NewClock(Epoch.Add(time.Hour)).Now))
	if again, err := restarted.ClaimAlerts(ctx, time.Minute, 10); err != nil || len(again) != 0 {
		t.Errorf("after a restart, ClaimAlerts = %+v, %v; want nothing to announce", again, err)
	}
}

func alertNames(as []ledger.Alert) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprintf("%s %d", a.Scope, a.Threshold)
	}
	return out
}

// runAlertSiteTests checks the upgrade of a version-5 site: its scopes
// keep their spend and limits, and the next settlement that crosses a
// threshold records an alert.
func runAlertSiteTests(t *testing.T, newSite SiteMaker) {
	t.Run("UpgradeFromVersion5RecordsAlerts", func(t *testing.T) {
		site := newSite(t)
		needOlderVersions(t, site)
		ctx := t.Context()
		if err := site.CreateAt(ctx, 5); err != nil {
			t.Fatal(err)
		}
		if err := site.Exec(ctx, `INSERT INTO _S_.scopes (project, scope, limit_nanos, spent_nanos, limit_set)
			VALUES ('', 'task:old', 10000000000, 4000000000, true)`); err != nil {
			t.Fatal(err)
		}
		s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
		wantVersions(t, site)
		if b, err := s.Budget(ctx, "task:old"); err != nil || b.Spent != M("4") || b.Limit != M("10") {
			t.Fatalf("the version-5 scope after the upgrade: %+v, %v", b, err)
		}
		if as, err := s.Alerts(ctx, 0); err != nil || len(as) != 0 {
			t.Fatalf("alerts right after the upgrade = %+v, %v; want none", as, err)
		}
		if err := s.Settle(ctx, ledger.Settlement{InvocationID: "new", Cost: M("1"), Scopes: []ledger.Scope{"task:old"},
			Entry: ledger.AttemptRow{Provider: "p", Outcome: "ok", Cost: M("1")}}); err != nil {
			t.Fatal(err)
		}
		if as, err := s.Alerts(ctx, 0); err != nil || fmt.Sprint(alertNames(as)) != "[task:old 50]" {
			t.Errorf("alerts after crossing 50 %% = %v, %v", alertNames(as), err)
		}
	})
}

// runMigrationGapTests: a site that recorded a later version before an
// earlier one existed (migrations written on separate lines of work, the
// later merged first) gets the earlier one when it is opened.
func runMigrationGapTests(t *testing.T, newSite SiteMaker) {
	t.Run("AMissingEarlierMigrationIsApplied", func(t *testing.T) {
		site := newSite(t)
		needOlderVersions(t, site)
		ctx := t.Context()
		// Every version but 5 (the unpriced flag of ledger rows).
		if err := site.CreateAt(ctx, ledger.LatestSchemaVersion); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`ALTER TABLE _S_.attempts DROP COLUMN unpriced`, `DELETE FROM _S_.schema_version WHERE version = 5`} {
			if err := site.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		s := openSite(t, site, ledger.WithClock(NewClock(Epoch).Now))
		wantVersions(t, site)
		// Version 5's column is there: an unpriced row reads back as such.
		if err := s.Settle(ctx, ledger.Settlement{InvocationID: "u", Cost: M("1"), Scopes: []ledger.Scope{taskB},
			Entry: ledger.AttemptRow{Provider: "p", Outcome: "ok", Cost: M("1"), Unpriced: true}}); err != nil {
			t.Fatal(err)
		}
		if rows, err := s.Attempts(ctx, ledger.Filter{}); err != nil || len(rows) != 1 || !rows[0].Unpriced {
			t.Errorf("rows = %+v, %v; want one unpriced row", rows, err)
		}
	})
}
