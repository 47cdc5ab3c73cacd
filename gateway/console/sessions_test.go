package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway/console"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The spend page lists the month's spend per host session, most first,
// each linked to its spend per subagent with the agent that started it;
// a session id is client input, escaped wherever it is written.
func TestSpendPerHostSession(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	odd := `<script>alert("x")</script>&?=`
	rows := []struct{ session, agent, parent, cost string }{
		{"sess-a", "", "", "1"},
		{"sess-a", "sub-1", "", "0.5"},
		{"sess-a", "sub-2", "sub-1", "0.25"},
		{"sess-a", "sub-2", "sub-1", "0.25"},
		{"sess-b", "", "", "3"},
		{odd, odd, odd, "0.01"},
		{"", "", "", "4"},
	}
	for i, r := range rows {
		m := provider.MustMoney(r.cost)
		err := fx.store.Settle(ctx, ledger.Settlement{InvocationID: fmt.Sprintf("inv_%d", i), Cost: m, Scopes: []ledger.Scope{ledger.MonthScope(fx.now)},
			Entry: ledger.AttemptRow{Provider: "claude", Model: "claude-sonnet-4-6", Outcome: "ok", Cost: m, Time: fx.now.Add(time.Duration(i) * time.Second),
				Session: r.session, HostAgent: r.agent, ParentAgent: r.parent}})
		if err != nil {
			t.Fatal(err)
		}
	}
	b := fx.browser(t).loggedIn()
	body := b.do(http.MethodGet, "/console/spend", nil).Body.String()
	sessions := []string{
		`<td>(no session: calls without a host session id)</td><td class="num">$4.00</td><td class="num">1</td>`,
		`<td><a href="/console/spend?session=sess-b"><code>sess-b</code></a></td><td class="num">$3.00</td><td class="num">1</td>`,
		`<td><a href="/console/spend?session=sess-a"><code>sess-a</code></a></td><td class="num">$2.00</td><td class="num">4</td>`,
		`<td><a href="/console/spend?session=` + url.QueryEscape(odd) + `"><code>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;?=</code></a></td><td class="num">$0.01</td>`,
	}
	last := -1
	for _, want := range sessions {
		i := strings.Index(body, want)
		if i < 0 {
			t.Errorf("spend page lacks %s", want)
			continue
		}
		if i < last {
			t.Errorf("sessions not listed most first: %s", want)
		}
		last = i
	}
	if strings.Contains(body, `id="session-agents"`) || strings.Contains(body, "<script>") {
		t.Errorf("spend page without ?session shows a session, or an unescaped id")
	}

	body = b.do(http.MethodGet, "/console/spend?session=sess-a", nil).Body.String()
	for _, want := range []string{
		`<h2>Session <code>sess-a</code></h2>`,
		`$<span id="session-total">2.00</span> in 4 attempt(s)`,
		`<tr><td>(main agent)</td><td>-</td><td class="num">$1.00</td><td class="num">1</td></tr>`,
		`<tr><td>sub-1</td><td>-</td><td class="num">$0.50</td><td class="num">1</td></tr>`,
		`<tr><td>sub-2</td><td>sub-1</td><td class="num">$0.50</td><td class="num">2</td></tr>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page of session sess-a lacks %s", want)
		}
	}
	body = b.do(http.MethodGet, "/console/spend?session="+url.QueryEscape(odd), nil).Body.String()
	if !strings.Contains(body, `$<span id="session-total">0.01</span> in 1 attempt(s)`) || strings.Contains(body, "<script>") {
		t.Errorf("the page of an odd session id: total missing or id unescaped")
	}
	body = b.do(http.MethodGet, "/console/spend?session=nobody", nil).Body.String()
	if !strings.Contains(body, "no call of this session is in the ledger") {
		t.Errorf("the page of an unknown session does not say it has no call")
	}
}

// Beyond console.MaxSessions, the page lists the sessions that spent most and
// says how many it left out.
func TestSpendListsTheSessionsThatSpentMost(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, false)
	for i := range console.MaxSessions + 3 {
		m := provider.Money(i+1) * provider.Cent
		err := fx.store.RecordAttempt(ctx, ledger.AttemptRow{InvocationID: fmt.Sprintf("inv_%d", i), Provider: "claude", Outcome: "ok", Cost: m,
			Time: fx.now, Session: fmt.Sprintf("s%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	body := fx.browser(t).loggedIn().do(http.MethodGet, "/console/spend", nil).Body.String()
	if !strings.Contains(body, "3 more session(s) spent less") || strings.Contains(body, "<code>s02</code>") || !strings.Contains(body, "<code>s03</code>") ||
		!strings.Contains(body, fmt.Sprintf("<code>s%02d</code>", console.MaxSessions+2)) {
		t.Errorf("spend page with %d sessions: want the %d that spent most and 3 left out", console.MaxSessions+3, console.MaxSessions)
	}
}
