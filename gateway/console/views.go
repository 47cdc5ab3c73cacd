package console

import (
	"net/url"
	"strconv"
	"strings"
)

// The pages' HTML, one function per page, written as html.go says.

// navItems are the pages of the navigation bar, in order.
var navItems = []struct{ nav, path, label string }{
	{"overview", "/console/", "Overview"},
	{"spend", "/console/spend", "Spend"},
	{"access", "/console/access", "Access keys"},
	{"keys", "/console/keys", "Provider keys"},
	{"health", "/console/health", "Health"},
	{"control", "/console/control", "Control"},
}

// layout writes the page around its content.
func layout(b *hw, p page) {
	b.f(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%v · CortexBuild console</title>
<link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script>
</head>
<body>
<header>
  <strong>CortexBuild</strong> <span class="project" id="project-name">%v</span>
`, p.Title, p.Project)
	if p.CSRF != "" && p.Nav != "" {
		b.raw("  <nav>\n")
		for _, n := range navItems {
			b.f(`    <a href="%v"%v>%v</a>`+"\n", n.path, attrIf(n.nav == p.Nav, ` aria-current="page"`), n.label)
		}
		b.raw("  </nav>\n")
		if !p.NoAuth {
			b.f(`  <form method="post" action="/console/logout" class="logout">
    %v
    <button type="submit">Log out</button>
  </form>
`, csrfField(p))
		}
	}
	b.f("</header>\n<main>\n<h1>%v</h1>\n", p.Title)
	if p.Flash != "" {
		b.f(`<p class="flash" id="flash">%v</p>`+"\n", p.Flash)
	}
	if p.Error != "" {
		b.f(`<p class="error" id="error">%v</p>`+"\n", p.Error)
	}
	if p.body != nil {
		p.body(b, p)
	}
	b.raw("</main>\n</body>\n</html>\n")
}

// csrfField is the hidden field every form posts its token in.
func csrfField(p page) markup {
	var b hw
	b.f(`<input type="hidden" name="csrf" value="%v">`, p.CSRF)
	return markup(b.String())
}

func loginView(b *hw, p page) {
	b.f(`<form method="post" action="/console/login" class="card" id="login">
  %v
  <label for="key">Gateway key</label>
  <input type="password" id="key" name="key" autocomplete="off" required placeholder="cbk_…">
  <p class="hint">A virtual key of this project bound to neither an agent nor a task
  (<code>cortexbuild serve keys create</code>). It is exchanged for a session cookie and not kept by the browser.</p>
  <button type="submit" id="login-submit">Log in</button>
</form>
`, csrfField(p))
}

// meter is a 0–100 % meter of value.
func meter(value int) markup {
	var b hw
	b.f(`<meter min="0" max="100" low="80" high="99" optimum="0" value="%v">%v %%</meter>`, value, value)
	return markup(b.String())
}

// healthState writes a provider's last check in words.
func healthState(b *hw, r healthRow) {
	if !r.Checked {
		b.raw("never checked")
		return
	}
	h := r.Health
	b.f(`<span class="%v">%v</span> at %v`, h.Status, under(h.Status), when(h.CheckedAt))
	if h.Kind != "" {
		b.f(" [%v]", h.Kind)
	}
	b.f(" %v%v", h.Error, h.Reason)
}

func overviewView(d overviewData) func(*hw, page) {
	return func(b *hw, _ page) {
		if d.ProjectPaused {
			b.f(`<p class="error" id="project-paused">The project is paused: %v (resume it on the <a href="/console/control">control page</a>).</p>`+"\n", d.ProjectReason)
		}
		b.f(`<div class="grid">
<section class="card" id="spend-summary">
  <h2>Spend</h2>
  <table>
    <tr><th>Today (%v)</th><td class="num big">$<span id="spend-today">%v</span></td></tr>
    <tr><th>This month (%v)</th><td class="num big">$<span id="spend-month">%v</span></td></tr>
    <tr><th>Month budget</th><td class="num" id="month-budget">`, d.Day, d.Today, d.Month, d.MonthTotal)
		if d.MonthLimited {
			b.f("$%v, %v %% used, $%v left\n      %v", d.MonthLimit, d.MonthPercent, d.MonthLeft, meter(d.MonthPercent))
		} else {
			b.raw("none")
		}
		b.raw(`</td></tr>
  </table>
  <h3>Configured budgets</h3>
  <table id="configured-budgets">
`)
		for _, c := range d.Configured {
			b.f(`    <tr><td>%v</td><td class="num">%v</td></tr>`+"\n", c.Name, c.Value)
		}
		if len(d.Configured) == 0 {
			b.raw("    <tr><td>none in <code>llm-config.yaml</code> (<code>budgets:</code>)</td></tr>\n")
		}
		b.raw(`  </table>
  <p class="hint">Details on the <a href="/console/spend">spend page</a>.</p>
</section>
<section class="card" id="alerts">
  <h2>Alerts</h2>
`)
		if !d.AlertsOn {
			b.raw(`  <p id="alerts-off">Budget alerts are not configured for this gateway.</p>` + "\n")
		} else {
			if d.AlertsError != "" {
				b.f(`  <p class="error">%v</p>`+"\n", d.AlertsError)
			}
			b.raw("  <table>\n    <tr><th>When</th><th>Scope</th><th>Threshold</th><th>Spent</th><th>Limit</th></tr>\n")
			for _, a := range d.Alerts {
				b.f(`    <tr><td>%v</td><td>%v</td><td class="num">%v %%</td><td class="num">$%v</td><td class="num">$%v</td></tr>`+"\n",
					when(a.At), a.Scope, a.Threshold, a.Spent, a.Limit)
			}
			if len(d.Alerts) == 0 {
				b.raw(`    <tr><td colspan="5">no alert announced</td></tr>` + "\n")
			}
			b.raw("  </table>\n")
		}
		b.raw(`</section>
</div>
<section class="card" id="provider-health">
  <h2>Providers</h2>
  <table>
    <tr><th>Provider</th><th>Last check</th><th>Circuit breaker</th></tr>
`)
		for _, r := range d.Health {
			b.f(`    <tr id="o-%v"><td>%v</td>`+"\n      <td>", r.Name, r.Name)
			healthState(b, r)
			b.f(`</td>
      <td class="breaker-%v">%v</td></tr>
`, r.Breaker.State, breakerText(r.Breaker))
		}
		if len(d.Health) == 0 {
			b.raw(`    <tr><td colspan="3">no provider is configured</td></tr>` + "\n")
		}
		b.raw(`  </table>
  <p class="hint">Check them now on the <a href="/console/health">health page</a>.</p>
</section>
<section class="card" id="budget-use">
  <h2>Budget use</h2>
  <table>
    <tr><th>Scope</th><th>Spent</th><th>Held</th><th>Limit</th><th>Used</th><th>State</th></tr>
`)
		for _, u := range d.Budgets {
			class := "num"
			if u.Over {
				class += " bad"
			} else if u.Near {
				class += " warnc"
			}
			state := markup("active")
			if u.Paused {
				state = `<span class="bad">paused</span>`
			}
			b.f(`    <tr><td>%v</td><td class="num">$%v</td><td class="num">$%v</td><td class="num">$%v</td>
      <td class="%v">%v %% %v</td>
      <td>%v</td></tr>
`, u.Scope, u.Spent, u.Held, u.Limit, class, u.Percent, meter(u.Percent), state)
		}
		if len(d.Budgets) == 0 {
			b.raw(`    <tr><td colspan="6">no scope has a limit</td></tr>` + "\n")
		}
		b.raw(`  </table>
</section>
<section class="card" id="paused">
  <h2>Paused</h2>
  <table>
    <tr><th>Scope</th><th>Reason</th></tr>
`)
		if d.ProjectPaused {
			b.f("    <tr><td>project</td><td>%v</td></tr>\n", d.ProjectReason)
		}
		for _, s := range d.Paused {
			b.f("    <tr><td>%v</td><td>%v</td></tr>\n", s.Scope, s.Reason)
		}
		if !d.ProjectPaused && len(d.Paused) == 0 {
			b.raw(`    <tr><td colspan="2">nothing is paused</td></tr>` + "\n")
		}
		b.raw(`  </table>
</section>
<section class="card" id="failures">
  <h2>Recent failures</h2>
  <table>
    <tr><th>When</th><th>Agent</th><th>Task</th><th>Provider/model</th><th>Outcome</th><th>What it means</th></tr>
`)
		for _, f := range d.Failures {
			b.f(`    <tr><td>%v</td><td>%v</td><td>%v</td><td>%v/%v</td><td class="bad">%v</td><td>%v</td></tr>`+"\n",
				when(f.Time), f.Agent, f.Task, f.Provider, f.Model, f.Outcome, f.Detail)
		}
		if len(d.Failures) == 0 {
			b.f(`    <tr><td colspan="6">no failed attempt in the last %v days</td></tr>`+"\n", d.FailureDays)
		}
		b.raw("  </table>\n</section>\n")
	}
}

// spendRows writes the rows of a spend table; cols picks the columns
// after Key, Spend and Attempts: Budget, then Left, then the pause state.
func spendRows(b *hw, rows []spendRow, cols int) {
	for _, r := range rows {
		b.f(`    <tr><td>%v</td><td class="num">$%v</td><td class="num">%v</td>`, r.Key, r.Cost, r.Attempts)
		if cols > 0 {
			b.f("<td>%v</td>", r.Limit)
		}
		if cols > 1 {
			b.f("<td>%v</td>", r.Remaining)
		}
		if cols > 2 {
			b.f("<td>%v</td>", either(r.Paused, "paused", ""))
		}
		b.raw("</tr>\n")
	}
}

// emptyRow is a table's row saying it has none, spanning n columns.
func emptyRow(b *hw, n int, text string) {
	b.f(`    <tr><td colspan="%v">%v</td></tr>`+"\n", n, text)
}

func spendView(d spendData) func(*hw, page) {
	return func(b *hw, _ page) {
		if d.Unpriced > 0 {
			b.f(`<section class="card warn" id="unpriced">
  <h2>Unpriced attempts</h2>
  <p>%v attempt(s) were charged their reservation, since the price catalog lists neither the model that answered nor the one requested: %v. Add the models' prices in a file listed in <code>pricing.catalog_files</code>.</p>
</section>
`, d.Unpriced, d.UnpricedModels)
		}
		b.f(`<section class="card">
  <h2>This month (%v)</h2>
  <p class="big">$<span id="month-total">%v</span></p>
  <p>Budget: <span id="month-limit">%v</span>; left: <span id="month-left">%v</span></p>
  %v
</section>
<section class="card" id="daily">
  <h2>Per day</h2>
  %v
</section>
<section class="card">
  <h2>Per agent this month</h2>
  %v
  <table id="agents">
    <tr><th>Agent</th><th>Spend</th><th>Attempts</th><th>Budget</th></tr>
`, d.Month, d.MonthTotal, d.MonthLimit, d.MonthLeft, d.Chart, d.DayChart, d.AgentChart)
		spendRows(b, d.Agents, 1)
		if len(d.Agents) == 0 {
			emptyRow(b, 4, "no spend this month")
		}
		b.raw(`  </table>
</section>
<section class="card">
  <h2>Per access key this month</h2>
  <table id="keys-spend">
    <tr><th>Key</th><th>Spend</th><th>Attempts</th></tr>
`)
		spendRows(b, d.Keys, 0)
		if len(d.Keys) == 0 {
			emptyRow(b, 3, "no spend this month")
		}
		b.raw(`  </table>
  <p class="hint">A key's limits and its spend in its budget's period are on <a href="/console/access">Access keys</a>.</p>
</section>
`)
		sessionsView(b, d)
		b.raw(`<section class="card">
  <h2>Per task</h2>
  <table id="tasks">
    <tr><th>Task</th><th>Spend</th><th>Attempts</th><th>Budget</th><th>Left</th><th></th></tr>
`)
		spendRows(b, d.Tasks, 3)
		if len(d.Tasks) == 0 {
			emptyRow(b, 6, "no task has spent anything")
		}
		b.raw(`  </table>
</section>
<section class="card">
  <h2>Per month</h2>
  <table id="months">
    <tr><th>Month</th><th>Spend</th><th>Attempts</th><th>Budget</th><th>Left</th></tr>
`)
		spendRows(b, d.Months, 2)
		b.raw(`  </table>
</section>
<section class="card">
  <h2>Recent invocations</h2>
  <table id="invocations">
    <tr><th>Invocation</th><th>Time</th><th>Agent</th><th>Task</th><th>Cost</th><th>Attempts</th></tr>
`)
		for _, v := range d.Invocations {
			b.f(`    <tr><td><code>%v</code></td><td>%v</td><td>%v</td><td>%v</td><td class="num">$%v</td>
      <td><ol class="attempts">`, v.ID, when(v.Time), v.Agent, v.Task, v.Cost)
			for _, a := range v.Attempts {
				b.f("<li>%v/%v: %v, %v+%v tokens, $%v", a.Provider, a.Model, a.Outcome, a.InputTokens, a.OutputTokens, a.Cost)
				if a.CacheHit {
					b.raw(" (cache hit)")
				}
				if a.EstimatedUsage {
					b.raw(" (estimated)")
				}
				if a.Unpriced {
					b.raw(" (unpriced: charged the reservation)")
				}
				b.raw("</li>")
			}
			b.raw("</ol></td></tr>\n")
		}
		if len(d.Invocations) == 0 {
			emptyRow(b, 6, "no invocations in the last 30 days")
		}
		b.raw("  </table>\n</section>\n")
	}
}

// option writes a select's option.
func option(b *hw, value string, selected bool) {
	b.f(`<option value="%v"%v>%v</option>`, value, attrIf(selected, " selected"), value)
}

func accessView(d accessData) func(*hw, page) {
	return func(b *hw, p page) {
		b.raw(`<p class="hint">Access keys are the gateway's virtual keys: <strong>call</strong> keys make model calls (the
<code>/v1/</code> routes), <strong>admin</strong> keys open this console. Each is kept hashed; its secret is shown once,
when it is created. For the providers' own API keys, see <a href="/console/keys">Provider keys</a>.</p>
`)
		if k := d.Created; k != nil {
			b.f(`<section class="card created" id="created" data-replace-url="/console/access">
  <h2>New key %v%v</h2>
  <p><strong>Copy it now: this is the only time it is shown.</strong> Select the field and copy it (Ctrl+C / ⌘C);
  it is not kept anywhere it could be shown again.</p>
  <input id="new-secret" class="secret" readonly value="%v" autocomplete="off" spellcheck="false" size="70">
  <button type="button" id="copy-secret" data-copy="new-secret">Copy</button>
</section>
`, k.Key.Hint(), either(k.Key.Name == "", "", " ("+k.Key.Name+")"), k.Token)
		}
		if !d.Managed {
			b.raw("<p>This console manages no keys: use <code>cortexbuild serve keys create</code>, <code>list</code> and <code>revoke</code>.</p>\n")
			return
		}
		f := d.Form
		b.f(`<section class="card" id="create-key">
  <h2>Create a key</h2>
  <form method="post" action="/console/access" data-busy="Creating…">
    %v
    <table class="form">
      <tr><th><label for="k-name">Name</label></th><td><input id="k-name" name="name" maxlength="100" value="%v" placeholder="claude-code on laptop"></td></tr>
      <tr><th><label for="k-role">Role</label></th><td><select id="k-role" name="role">
        `, csrfField(p), f.Name)
		for _, r := range d.Roles {
			option(b, string(r), string(r) == f.Role)
		}
		b.f(`
      </select> <span class="hint">call: model calls only; admin: this console only</span></td></tr>
      <tr><th><label for="k-agent">Agent</label></th><td><input id="k-agent" name="agent" maxlength="100" value="%v" placeholder="any"> <span class="hint">bind a call key to one agent</span></td></tr>
      <tr><th><label for="k-task">Task</label></th><td><input id="k-task" name="task" maxlength="200" value="%v" placeholder="any"> <span class="hint">bind a call key to one task</span></td></tr>
      <tr><th><label for="k-models">Models</label></th><td><input id="k-models" name="models" maxlength="1000" value="%v" placeholder="any"> <span class="hint">comma-separated names, as GET /v1/models lists them</span></td></tr>
      <tr><th><label for="k-agents">Agents</label></th><td><input id="k-agents" name="agents" maxlength="1000" value="%v" placeholder="any"> <span class="hint">comma-separated: the key calls only as these agents (instead of binding one)</span></td></tr>
      <tr><th><label for="k-budget">Budget (USD)</label></th><td><input id="k-budget" name="budget" maxlength="20" value="%v" placeholder="none" size="10">
        per <select id="k-period" name="period">`, f.Agent, f.Task, f.Models, f.Agents, f.Budget)
		for _, per := range d.Periods {
			option(b, per, per == f.Period)
		}
		b.f(`</select>
        <span class="hint">held and settled like the month and task budgets</span></td></tr>
      <tr><th><label for="k-rpm">Requests / minute</label></th><td><input id="k-rpm" name="rpm" maxlength="10" value="%v" placeholder="no limit" size="10">
        <label for="k-tpm">Tokens / minute</label> <input id="k-tpm" name="tpm" maxlength="10" value="%v" placeholder="no limit" size="10">
        <span class="hint">in each gateway process</span></td></tr>
      <tr><th><label for="k-expires">Expires</label></th><td><input id="k-expires" name="expires" maxlength="40" value="%v" placeholder="never"> <span class="hint">a duration (720h), a date (2027-01-31, 00:00 UTC) or an RFC 3339 time</span></td></tr>
    </table>
    <button type="submit" id="create-submit">Create key</button>
  </form>
</section>
<section class="card">
  <h2>Keys</h2>
  <table id="access-keys">
    <tr><th>Key</th><th>Name</th><th>Role</th><th>Agent</th><th>Task</th><th>Models</th><th>Limits</th><th>Spent this period</th><th>Created</th><th>Revoked</th><th></th></tr>
`, f.RPM, f.TPM, f.Expires)
		for _, row := range d.Keys {
			k := row.Key
			b.f(`    <tr id="k-%v"><td><code>%v</code>%v</td><td>%v</td>
      <td>%v</td><td>%v</td><td>%v</td><td>%v</td>
      <td class="limits">%v</td><td class="spent">%v</td>
      <td>%v</td>
      <td class="revoked">`, k.ID, k.Hint(), attrIf(row.Current, ` <span class="hint">(this session)</span>`), k.Name,
				either(k.Admin(), "admin", "call"), orAny(k.Agent), orAny(k.Task), orAny(row.Models),
				either(k.Admin(), "—", row.Limits), either(k.Admin(), "—", "$"+row.Spent.String()), when(k.CreatedAt))
			switch {
			case k.RevokedAt != nil:
				b.text(when(*k.RevokedAt))
			case row.Expired:
				b.raw(`<span class="bad">expired</span>`)
			default:
				b.raw(`<span class="ok">active</span>`)
			}
			b.raw("</td>\n      <td>")
			if k.Active() {
				confirm := "Revoke " + k.Hint()
				if k.Name != "" {
					confirm += " (" + k.Name + ")"
				}
				confirm += "? Calls with it are refused from then on"
				if row.Current {
					confirm += ", and this session ends"
				}
				b.f(`<form method="post" action="/console/access/revoke" data-confirm="%v.">
        %v<input type="hidden" name="id" value="%v">
        <button type="submit" id="revoke-%v">Revoke</button></form>`, confirm, csrfField(p), k.ID, k.ID)
			}
			b.raw("</td></tr>\n")
		}
		if len(d.Keys) == 0 {
			emptyRow(b, 11, "no key yet")
		}
		b.raw("  </table>\n</section>\n")
	}
}

// testResult writes the result of a provider's connection test.
func testResult(b *hw, name string, h Health) {
	b.f(`  <div class="test %v" id="test-result-%v">
    <strong class="test-status">%v</strong>
    `, h.Status, name, under(h.Status))
	if h.Healthy {
		b.f("in %v ms", ms(h.Latency))
	}
	b.raw("\n    ")
	if h.Kind != "" {
		b.f("[%v]", h.Kind)
	}
	b.f(` %v %v
    <div class="hint">rate limit: %v</div>
  </div>
`, h.Error, h.Reason, headroomText(h.RateLimit))
}

func keysView(d keysData) func(*hw, page) {
	return func(b *hw, p page) {
		if d.Fleet {
			b.f(`<p class="notice" id="fleet-keys">%v</p>
<p class="hint">This page shows whether each field is set on this replica and where its value comes from, never the value.</p>
`, fleetKeys)
		} else {
			b.f(`<p class="hint">Saved values are write-only: this page never shows them, only whether a field is set and where
its value comes from. The environment and <code>llm-config.yaml</code> take precedence over the secrets file
(<code>%v</code>, mode 0600). Running calls use the keys the gateway started with; a
connection test uses the current ones.</p>
`, d.SecretsPath)
		}
		for _, pv := range d.Providers {
			path := "/console/keys/" + url.PathEscape(pv.Name)
			b.f(`<section class="card provider" id="p-%v">
  <h2>%v <small>%v</small></h2>
`, pv.Name, pv.Name, pv.Type)
			if pv.Endpoint != "" {
				b.f(`  <p class="hint">Endpoint: <code>%v</code></p>`+"\n", pv.Endpoint)
			}
			if pv.Error != "" {
				b.f(`  <p class="error">%v</p>`+"\n", pv.Error)
			}
			if d.Fleet {
				b.raw(`  <table>
      <tr><th>Field</th><th>Status on this replica</th></tr>
`)
			} else {
				b.f(`  <form method="post" action="%v" data-busy="Saving…">
    %v
    <table>
      <tr><th>Field</th><th>Status</th><th>New value</th><th></th></tr>
`, path, csrfField(p))
			}
			for _, fv := range pv.Fields {
				id := pv.Name + "-" + fv.Name
				b.f(`      <tr>
        <td><label for="f-%v">%v</label>%v
          <div class="hint">%v</div></td>
        <td class="status" id="s-%v">%v`, id, fv.Name, attrIf(fv.Required, ` <span class="req">required</span>`), fv.Description,
					id, markup(either(fv.Set, `<span class="ok">set</span>`, `<span class="bad">not set</span>`)))
				if fv.Where != "" {
					b.f(`
          <div class="hint">%v</div>`, fv.Where)
				}
				if fv.Shadowed {
					b.raw(`
          <div class="hint">a value saved here is not used while that is set</div>`)
				}
				if d.Fleet {
					b.raw("</td>\n      </tr>\n")
					continue
				}
				b.f(`</td>
        <td><input id="f-%v" name="cred.%v" type="%v" autocomplete="off" value=""></td>
        <td>`, id, fv.Name, either(fv.Secret, "password", "text"))
				if fv.Saved {
					b.f(`<label><input type="checkbox" name="clear.%v" value="1"> remove saved</label>`, fv.Name)
				}
				b.raw("</td>\n      </tr>\n")
			}
			if d.Fleet {
				b.raw("    </table>\n")
			} else {
				b.f(`    </table>
    <button type="submit" id="save-%v">Save</button>
  </form>
`, pv.Name)
			}
			b.f(`  <form method="post" action="%v/test" data-busy="Testing…" class="inline">
    %v
    <button type="submit" id="test-%v">Test connection</button>
  </form>
`, path, csrfField(p), pv.Name)
			if pv.Test != nil {
				testResult(b, pv.Name, *pv.Test)
			}
			b.raw("</section>\n")
		}
		if len(d.Providers) == 0 {
			b.raw("<p>No provider is configured: add one under <code>providers:</code> in <code>llm-config.yaml</code>.</p>\n")
		}
		b.raw(`<h2>Adapter types and their credentials</h2>
<p class="hint">To save keys for a type, configure a provider of that type in <code>llm-config.yaml</code>.</p>
<table>
  <tr><th>Type</th><th>Credentials</th><th>Configured</th></tr>
`)
		for _, t := range d.Types {
			b.f(`  <tr><td><code>%v</code><div class="hint">%v</div></td>
    <td>`, t.Type, t.Description)
			for _, cf := range t.Fields {
				b.f("<div><code>%v</code>%v", cf.Name, attrIf(cf.Required, " (required)"))
				if len(cf.EnvVars) > 0 {
					b.raw(" — env ")
					for i, e := range cf.EnvVars {
						if i > 0 {
							b.raw(", ")
						}
						b.f("<code>%v</code>", e)
					}
				}
				b.raw("</div>")
			}
			if len(t.Fields) == 0 {
				b.raw("none")
			}
			b.f("</td>\n    <td>%v</td></tr>\n", either(t.Configured, "yes", "no"))
		}
		b.raw("</table>\n")
	}
}

func healthView(rows []healthRow) func(*hw, page) {
	return func(b *hw, p page) {
		b.f(`<form method="post" action="/console/health" data-busy="Checking…">
  %v
  <button type="submit" id="check-all">Check all providers now</button>
</form>
<p class="hint">Checks run through the locality gate and spend no tokens. Breakers are those of the running gateway;
rate-limit headroom is what each provider reported at its last check (unknown until one reports).</p>
<table id="health">
  <tr><th>Provider</th><th>Status</th><th>Latency</th><th>Rate limit</th><th>Breaker</th><th>Detail</th><th>Checked</th></tr>
`, csrfField(p))
		for _, r := range rows {
			h := r.Health
			b.f("  <tr id=\"h-%v\">\n    <td>%v</td>\n", r.Name, r.Name)
			if r.Checked {
				latency := "-"
				if h.Healthy {
					latency = strconv.FormatInt(ms(h.Latency), 10) + " ms"
				}
				b.f("    <td class=\"%v\">%v</td>\n    <td>%v</td>\n    <td>%v</td>\n", h.Status, under(h.Status), latency, headroomText(h.RateLimit))
			} else {
				b.raw("    <td>not checked yet</td><td>-</td><td>unknown</td>\n")
			}
			b.f("    <td>%v</td>\n    <td>", breakerText(r.Breaker))
			if h.Kind != "" {
				b.f("[%v] ", h.Kind)
			}
			b.f("%v%v</td>\n    <td>%v</td>\n  </tr>\n", h.Error, h.Reason, either(r.Checked, when(h.CheckedAt), "-"))
		}
		b.raw("</table>\n")
	}
}

func controlView(d controlData) func(*hw, page) {
	return func(b *hw, p page) {
		b.raw("<section class=\"card\" id=\"project\">\n  <h2>Project</h2>\n")
		if d.Paused {
			b.f(`  <p id="project-state"><span class="bad">paused</span>: %v</p>
  <form method="post" action="/console/control/project">
    %v<input type="hidden" name="action" value="resume">
    <button type="submit" id="project-resume">Resume the project</button>
  </form>
`, d.Reason, csrfField(p))
		} else {
			b.f(`  <p id="project-state"><span class="ok">active</span></p>
  <form method="post" action="/console/control/project" data-confirm="Pause every call of the project?">
    %v<input type="hidden" name="action" value="pause">
    <input name="reason" placeholder="reason" maxlength="200">
    <button type="submit" id="project-pause">Pause the project</button>
  </form>
`, csrfField(p))
		}
		b.raw(`</section>
<section class="card" id="task-control">
  <h2>Tasks</h2>
  <table>
    <tr><th>Task</th><th>State</th><th></th></tr>
`)
		for _, t := range d.Tasks {
			b.f("    <tr><td>%v</td><td>", t.ID)
			if t.Paused {
				b.f(`<span class="bad">paused</span>: %v`, t.Reason)
			} else {
				b.raw("active")
			}
			b.raw("</td>\n")
			toggleForm(b, p, "/console/control/task", "task", t.ID, t.Paused, "Resume", "Pause")
		}
		if len(d.Tasks) == 0 {
			emptyRow(b, 3, "no task has a budget or spend yet")
		}
		b.f(`  </table>
  <form method="post" action="/console/control/task" class="inline">
    %v<input type="hidden" name="action" value="pause">
    <input name="task" placeholder="task id" required maxlength="200"> <input name="reason" placeholder="reason" maxlength="200">
    <button type="submit">Pause task</button>
  </form>
</section>
<section class="card" id="consent">
  <h2>Consent</h2>
  <p class="hint">Endpoints off this machine are refused until consent is recorded for their provider; loopback endpoints need none.</p>
  <table>
    <tr><th>Provider</th><th>Endpoint</th><th>Consent</th><th></th></tr>
`, csrfField(p))
		for _, c := range d.Consents {
			b.f(`    <tr id="c-%v"><td>%v</td><td><code>%v</code></td>
      <td class="consent-state">`, c.Provider, c.Provider, c.Endpoint)
			if c.Granted {
				b.f("granted by %v at %v", c.Consent.GrantedBy, when(c.Consent.GrantedAt))
			} else {
				b.raw("none")
			}
			b.raw("</td>\n")
			toggleForm(b, p, "/console/control/consent", "provider", c.Provider, c.Granted, "Revoke", "Grant")
		}
		b.raw("  </table>\n</section>\n")
	}
}

// toggleForm writes the last cell of a row: a form that undoes a state
// when on (its button says undo) or sets it (do), for the thing a hidden
// field names; the action sent is the button's label in lower case.
func toggleForm(b *hw, p page, path, field, value string, on bool, undo, do string) {
	label := either(on, undo, do)
	b.f(`      <td><form method="post" action="%v">
        %v<input type="hidden" name="%v" value="%v">
        <input type="hidden" name="action" value="%v"><button type="submit">%v</button>
      </form></td></tr>
`, path, csrfField(p), field, value, strings.ToLower(label), label)
}

// sessionsView writes the spend per host session, and the subagents of the
// session asked for.
func sessionsView(b *hw, d spendData) {
	if d.Session != "" {
		b.f(`<section class="card" id="session">
  <h2>Session <code>%v</code></h2>
  <p>$<span id="session-total">%v</span> in %v attempt(s), since the session began. <a href="/console/spend">All sessions</a></p>
  <table id="session-agents">
    <tr><th>Agent</th><th>Started by</th><th>Spend</th><th>Attempts</th></tr>
`, d.Session, d.SessionTotal.Cost, d.SessionTotal.Attempts)
		for _, a := range d.SessionAgents {
			b.f(`    <tr><td>%v</td><td>%v</td><td class="num">$%v</td><td class="num">%v</td></tr>`+"\n",
				either(a.Agent == "", "(main agent)", a.Agent), either(a.Parent == "", "-", a.Parent), a.Cost, a.Attempts)
		}
		if len(d.SessionAgents) == 0 {
			emptyRow(b, 4, "no call of this session is in the ledger")
		}
		b.raw("  </table>\n</section>\n")
	}
	b.raw(`<section class="card">
  <h2>Per host session this month</h2>
  <table id="sessions">
    <tr><th>Session</th><th>Spend</th><th>Attempts</th></tr>
`)
	for _, r := range d.Sessions {
		if r.Key == "" {
			b.f(`    <tr><td>(no session: calls without a host session id)</td><td class="num">$%v</td><td class="num">%v</td></tr>`+"\n", r.Cost, r.Attempts)
			continue
		}
		b.f(`    <tr><td><a href="/console/spend?session=%v"><code>%v</code></a></td><td class="num">$%v</td><td class="num">%v</td></tr>`+"\n",
			url.QueryEscape(r.Key), r.Key, r.Cost, r.Attempts)
	}
	if len(d.Sessions) == 0 {
		emptyRow(b, 3, "no spend this month")
	}
	b.raw("  </table>\n")
	if d.MoreSessions > 0 {
		b.f(`  <p class="hint">%v more session(s) spent less; <code>cortexbuild spend --by session --month</code> lists them all.</p>`+"\n", d.MoreSessions)
	}
	b.raw(`  <p class="hint">Coding agents (Claude Code, Codex) send their session id with every call; a session's link shows its spend per subagent.</p>
</section>
`)
}
