package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway/console"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// settleAt charges cost to the task and the month of at, as the
// orchestrator does, with one ledger row at that time.
func (fx *fixture) settleAt(t *testing.T, id, task, agent string, cost provider.Money, at time.Time, earlier ...ledger.AttemptRow) {
	t.Helper()
	total := cost
	for _, e := range earlier {
		total += e.Cost
	}
	scopes := []ledger.Scope{ledger.MonthScope(at)}
	if task != "" {
		scopes = append(scopes, ledger.TaskScope(task))
	}
	err := fx.store.Settle(context.Background(), ledger.Settlement{InvocationID: id, Cost: total, Scopes: scopes,
		Entry:   ledger.AttemptRow{Task: task, Agent: agent, Provider: "claude", Model: "claude-sonnet-4-6", Outcome: "ok", Cost: cost, InputTokens: 10, OutputTokens: 5, Time: at},
		Earlier: earlier})
	if err != nil {
		t.Fatal(err)
	}
}

// section returns the HTML of the element with id (up to its closing
// </section>), or fails.
func section(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)id="` + regexp.QuoteMeta(id) + `">(.*?)</section>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no section %q in:\n%s", id, body)
	}
	return m[1]
}

// squash collapses whitespace, so that a test can look for text across
// the template's line breaks.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestOverviewIsTheLandingPage(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t)
	b.do(http.MethodGet, "/console/login", nil)
	if w := b.do(http.MethodPost, "/console/login", map[string][]string{"csrf": {b.csrf}, "key": {fx.key}}); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/" {
		t.Fatalf("login = %d → %q, want the overview", w.Code, w.Header().Get("Location"))
	}
	w := b.do(http.MethodGet, "/console/", nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "<h1>Overview</h1>") {
		t.Fatalf("overview = %d\n%s", w.Code, w.Body)
	}
}

func TestOverviewOfAnEmptyProject(t *testing.T) {
	fx := newFixture(t, false)
	body := fx.browser(t).loggedIn().do(http.MethodGet, "/console/", nil).Body.String()
	for id, want := range map[string]string{
		"provider-health": "never checked",
		"alerts":          "Budget alerts are not configured",
		"budget-use":      "no scope has a limit",
		"paused":          "nothing is paused",
		"failures":        "no failed attempt in the last 30 days",
		"spend-summary":   `<span id="spend-today">0.00</span>`,
	} {
		if s := section(t, body, id); !strings.Contains(s, want) {
			t.Errorf("section %s lacks %q:\n%s", id, want, s)
		}
	}
	// The breaker the orchestrator reports for claude is shown, open.
	if s := squash(section(t, body, "provider-health")); !regexp.MustCompile(`id="o-claude"><td>claude</td> <td>never checked</td> <td class="breaker-open">open until`).MatchString(s) {
		t.Errorf("claude's row: %s", s)
	}
	if fx.checks.Load() != 0 {
		t.Error("the overview ran a health check")
	}
}

func TestOverviewShowsHowWeAreDoing(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	if err := fx.store.SetBudget(ctx, ledger.MonthScope(fx.now), 100*provider.Dollar); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.SetBudget(ctx, ledger.TaskScope("T1"), provider.Dollar); err != nil {
		t.Fatal(err)
	}
	// Yesterday: $2, in the month but not today. Today: $0.25 on T1, after
	// an overloaded attempt on the local provider.
	fx.settleAt(t, "inv_y", "", "planner", 2*provider.Dollar, fx.now.Add(-24*time.Hour))
	fx.settleAt(t, "inv_t", "T1", "builder", provider.Dollar/4, fx.now,
		ledger.AttemptRow{Task: "T1", Agent: "builder", Provider: "local", Model: "qwen3", Outcome: "overloaded", Time: fx.now.Add(-time.Second)})
	// T2 is known by its budget; the ledger lists no paused scope that
	// has neither a budget nor spend.
	if err := fx.store.SetBudget(ctx, ledger.TaskScope("T2"), 5*provider.Dollar); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.Pause(ctx, ledger.TaskScope("T2"), "waiting for review"); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.SetBudget(ctx, ledger.Scope("month:2026-04"), provider.Dollar); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.Pause(ctx, ledger.Scope("month:2026-04"), "closed for audit"); err != nil {
		t.Fatal(err)
	}
	if err := fx.state.Pause(ctx, "maintenance window"); err != nil {
		t.Fatal(err)
	}
	b := fx.browser(t).loggedIn()
	if w := b.do(http.MethodPost, "/console/health", map[string][]string{"csrf": {b.csrf}}); w.Code != http.StatusSeeOther {
		t.Fatalf("check all = %d", w.Code)
	}
	body := b.do(http.MethodGet, "/console/", nil).Body.String()
	spend := squash(section(t, body, "spend-summary"))
	for _, want := range []string{
		`$<span id="spend-today">0.25</span>`,
		`$<span id="spend-month">2.25</span>`,
		`$100.00, 2 % used, $97.75 left`,
	} {
		if !strings.Contains(spend, want) {
			t.Errorf("spend summary lacks %q:\n%s", want, spend)
		}
	}
	use := squash(section(t, body, "budget-use"))
	for _, want := range []string{
		`<td>month:2026-05</td><td class="num">$2.25</td><td class="num">$0.00</td><td class="num">$100.00</td> <td class="num">2 %`,
		`<td>task:T1</td><td class="num">$0.25</td><td class="num">$0.00</td><td class="num">$1.00</td> <td class="num">25 %`,
	} {
		if !strings.Contains(use, want) {
			t.Errorf("budget use lacks %q:\n%s", want, use)
		}
	}
	paused := squash(section(t, body, "paused"))
	for _, want := range []string{"<td>project</td><td>maintenance window</td>", "<td>task:T2</td><td>waiting for review</td>", "<td>month:2026-04</td><td>closed for audit</td>"} {
		if !strings.Contains(paused, want) {
			t.Errorf("paused lacks %q:\n%s", want, paused)
		}
	}
	if !strings.Contains(body, `id="project-paused"`) {
		t.Error("the paused project is not called out")
	}
	failures := squash(section(t, body, "failures"))
	if want := `<td>2026-05-14 11:59:59Z</td><td>builder</td><td>T1</td><td>local/qwen3</td><td class="bad">overloaded</td><td>the provider is overloaded</td>`; !strings.Contains(failures, want) {
		t.Errorf("failures lack %q:\n%s", want, failures)
	}
	if strings.Contains(failures, "claude-sonnet-4-6") {
		t.Errorf("a successful attempt is listed as a failure:\n%s", failures)
	}
	health := squash(section(t, body, "provider-health"))
	if !strings.Contains(health, `<span class="unhealthy">unhealthy</span> at 2026-05-14 12:00:00Z`) || strings.Contains(health, "never checked") {
		t.Errorf("provider health after a check:\n%s", health)
	}
}

// The overview lists the 10 newest failed attempts of the last 30 days,
// newest first.
func TestOverviewListsTheNewestFailures(t *testing.T) {
	fx := newFixture(t, false)
	var earlier []ledger.AttemptRow
	for i := range 12 {
		earlier = append(earlier, ledger.AttemptRow{Agent: fmt.Sprintf("agent-%02d", i), Provider: "local", Model: "m", Outcome: "timeout", Time: fx.now.Add(time.Duration(i-20) * time.Minute)})
	}
	old := ledger.AttemptRow{Agent: "too-old", Provider: "local", Model: "m", Outcome: "auth", Time: fx.now.Add(-31 * 24 * time.Hour)}
	fx.settleAt(t, "inv_old", "", "too-old", 0, fx.now.Add(-31*24*time.Hour), old)
	fx.settleAt(t, "inv_f", "", "builder", provider.Dollar, fx.now, earlier...)
	failures := section(t, fx.browser(t).loggedIn().do(http.MethodGet, "/console/", nil).Body.String(), "failures")
	got := regexp.MustCompile(`<td>(agent-\d\d|too-old)</td>`).FindAllStringSubmatch(failures, -1)
	var names []string
	for _, m := range got {
		names = append(names, m[1])
	}
	if want := "agent-11 agent-10 agent-09 agent-08 agent-07 agent-06 agent-05 agent-04 agent-03 agent-02"; strings.Join(names, " ") != want {
		t.Errorf("failures listed: %v, want %s", names, want)
	}
}

func TestOverviewConfiguredBudgets(t *testing.T) {
	fx := newFixtureWith(t, false, func(o *console.Options) {
		month, task := 200*provider.Dollar, 5*provider.Dollar
		o.Config.Budgets.ProjectMonthly, o.Config.Budgets.Task = &month, &task
		o.AgentBudgets = map[string]provider.Money{"critic": provider.Dollar / 2}
	})
	body := squash(section(t, fx.browser(t).loggedIn().do(http.MethodGet, "/console/", nil).Body.String(), "spend-summary"))
	for _, want := range []string{
		`<td>project_monthly</td><td class="num">$200.00</td>`,
		`<td>task (each task)</td><td class="num">$5.00</td>`,
		`<td>agent critic (per call)</td><td class="num">$0.50</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("configured budgets lack %q:\n%s", want, body)
		}
	}
}

func TestOverviewAlertsPanel(t *testing.T) {
	at := time.Date(2026, 5, 14, 9, 30, 0, 0, time.UTC)
	alerts := []console.Alert{
		{Scope: "month:2026-05", Threshold: 50, Spent: 51 * provider.Dollar, Limit: 100 * provider.Dollar, At: at},
		{Scope: "task:T9", Threshold: 80, Spent: 4 * provider.Dollar, Limit: 5 * provider.Dollar, At: at.Add(time.Hour)},
	}
	var fail error
	fx := newFixtureWith(t, false, func(o *console.Options) {
		o.Alerts = func(context.Context) ([]console.Alert, error) { return alerts, fail }
	})
	b := fx.browser(t).loggedIn()
	panel := squash(section(t, b.do(http.MethodGet, "/console/", nil).Body.String(), "alerts"))
	first := `<td>2026-05-14 10:30:00Z</td><td>task:T9</td><td class="num">80 %</td><td class="num">$4.00</td><td class="num">$5.00</td>`
	second := `<td>2026-05-14 09:30:00Z</td><td>month:2026-05</td><td class="num">50 %</td><td class="num">$51.00</td><td class="num">$100.00</td>`
	if i, j := strings.Index(panel, first), strings.Index(panel, second); i < 0 || j < 0 || i > j || strings.Contains(panel, "not configured") {
		t.Errorf("alerts panel (newest first):\n%s", panel)
	}
	alerts, fail = nil, errors.New("alert table unreadable")
	panel = squash(section(t, b.do(http.MethodGet, "/console/", nil).Body.String(), "alerts"))
	if !strings.Contains(panel, "The alerts could not be read: alert table unreadable") {
		t.Errorf("alerts panel when they cannot be read:\n%s", panel)
	}
}

// bars returns the heights of the bars of the chart titled title.
func bars(t *testing.T, body, title string) (heights []float64, svg string) {
	t.Helper()
	m := regexp.MustCompile(`(?s)<svg class="chart" role="img" aria-label="` + regexp.QuoteMeta(title) + `".*?</svg>`).FindString(body)
	if m == "" {
		t.Fatalf("no chart %q", title)
	}
	for _, h := range regexp.MustCompile(`<rect class="bar" [^>]*height="([0-9.]+)"`).FindAllStringSubmatch(m, -1) {
		v, err := strconv.ParseFloat(h[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		heights = append(heights, v)
	}
	return heights, m
}

// The monthly chart is scaled to the spend: $0.50 against a $200 budget
// is a bar of visible height, and the budget, far above, is named in a
// note rather than drawn. Spend close to its budget shows the budget as a
// line, with the bar below it.
func TestSpendChartIsScaledToTheData(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	if err := fx.store.SetBudget(ctx, ledger.MonthScope(fx.now), 200*provider.Dollar); err != nil {
		t.Fatal(err)
	}
	fx.settleAt(t, "inv_1", "", "builder", provider.Dollar/2, fx.now)
	b := fx.browser(t).loggedIn()
	const title = "Spend per month (USD)"
	h, svg := bars(t, b.do(http.MethodGet, "/console/spend", nil).Body.String(), title)
	if len(h) != 12 || h[11] < 100 {
		t.Errorf("this month's bar of $0.50 against $200: heights %v, want the last visible (≥ 100 px)", h)
	}
	if strings.Contains(svg, `class="limit"`) || !strings.Contains(svg, "budget $200.00 is far above, not drawn") {
		t.Errorf("a budget far above the spend:\n%s", svg)
	}
	// $100 of $200, a budget twice the spend: the budget line is drawn,
	// at the top, and the bar is half the 156 px plot.
	fx.settleAt(t, "inv_2", "", "builder", 99*provider.Dollar+provider.Dollar/2, fx.now)
	h, svg = bars(t, b.do(http.MethodGet, "/console/spend", nil).Body.String(), title)
	if !strings.Contains(svg, `class="limit"`) || strings.Contains(svg, "far above") {
		t.Errorf("a budget twice the spend is not drawn:\n%s", svg)
	}
	if h[11] != 78 {
		t.Errorf("$100 of $200: bar %.1f px, want 78", h[11])
	}
}

// The daily chart has a bar per day of the last 30, in the console's time
// zone: a call at 01:00 in UTC+10 is on that day, which is the day before
// in UTC. A day with a nano-dollar of spend is a bar of 2 px.
func TestDailySpendInTheConfiguredZone(t *testing.T) {
	zone := time.FixedZone("UTC+10", 10*3600)
	fx := newFixtureWith(t, false, func(o *console.Options) { o.Location = zone })
	fx.settleAt(t, "inv_1", "", "builder", provider.Dollar*3/10, time.Date(2026, 5, 13, 15, 0, 0, 0, time.UTC)) // 05-14 01:00 in UTC+10
	fx.settleAt(t, "inv_2", "", "builder", provider.Dollar/10, time.Date(2026, 4, 15, 0, 0, 0, 0, time.UTC))    // 30 days back in UTC+10: 04-15, the first bar
	fx.settleAt(t, "inv_3", "", "builder", provider.Dollar, time.Date(2026, 4, 14, 0, 0, 0, 0, time.UTC))       // 31 days back: not shown
	fx.settleAt(t, "inv_4", "", "builder", 1, time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC))                     // a nano-dollar on 05-10
	b := fx.browser(t).loggedIn()
	body := b.do(http.MethodGet, "/console/spend", nil).Body.String()
	h, svg := bars(t, body, "Spend per day, last 30 days (USD, UTC+10)")
	if len(h) != 30 {
		t.Fatalf("%d daily bars, want 30", len(h))
	}
	for _, want := range []string{"<title>05-14: $0.30</title>", "<title>04-15: $0.10</title>", "<title>05-13: $0.00</title>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("daily chart lacks %s", want)
		}
	}
	if strings.Contains(svg, "04-14") || h[29] < 100 || h[0] <= 0 || h[25] != 2 {
		t.Errorf("daily bars %v:\n%s", h, svg)
	}
	// The overview's "today" is the same day.
	if ov := b.do(http.MethodGet, "/console/", nil).Body.String(); !strings.Contains(ov, `<span id="spend-today">0.30</span>`) {
		t.Errorf("today's spend in UTC+10:\n%s", section(t, ov, "spend-summary"))
	}
}
