package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// page is what every page is written from (views.go).
type page struct {
	Title   string
	Nav     string
	Project string
	CSRF    string
	NoAuth  bool
	Flash   string
	Error   string
	// body writes the page's content, inside [layout].
	body func(*hw, page)
}

// flashes are the messages a redirect may ask for, by code: nothing from
// the request is ever reflected into a page.
var flashes = map[string]string{
	"saved":          "Saved to the secrets file: the gateway's next call uses it.",
	"nochange":       "Nothing to save: every field was left empty.",
	"paused":         "Project paused.",
	"resumed":        "Project resumed.",
	"task-paused":    "Task paused.",
	"task-resumed":   "Task resumed.",
	"granted":        "Consent granted.",
	"revoked":        "Consent revoked.",
	"nothingrevoked": "No consent was recorded for that provider.",
	"key-revoked":    "Key revoked: calls with it are refused from now on.",
}

func (c *Console) render(w http.ResponseWriter, status int, p page) {
	var b hw
	layout(&b, p)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

func (c *Console) page(r *http.Request, s *session, nav, title string, body func(*hw, page)) page {
	return page{Title: title, Nav: nav, Project: c.opts.Project, CSRF: s.csrf, NoAuth: c.opts.NoAuth,
		Flash: flashes[r.URL.Query().Get("m")], body: body}
}

func redirect(w http.ResponseWriter, r *http.Request, path, msg string) {
	http.Redirect(w, r, Prefix+path+"?m="+msg, http.StatusSeeOther)
}

func (c *Console) lookupEnv() func(string) (string, bool) {
	if c.opts.LookupEnv != nil {
		return c.opts.LookupEnv
	}
	return os.LookupEnv
}

// --- provider keys ---

type fieldView struct {
	Name, Description string
	Secret, Required  bool
	Set               bool
	// Where says where the value comes from, in words.
	Where string
	// Shadowed says a value saved here is not used, because the
	// environment or the file sets the field.
	Shadowed bool
	Saved    bool
}

type providerView struct {
	Name, Type, Endpoint string
	Fields               []fieldView
	Error                string
	Test                 *Health
}

type typeView struct {
	Type, Description string
	Fields            []provider.CredentialField
	Configured        bool
}

type keysData struct {
	Providers   []providerView
	Types       []typeView
	SecretsPath string
	// Fleet: the gateway is a replica of a fleet, and the page saves no
	// key (see fleetKeys).
	Fleet bool
}

// fleetKeys is why a replica of a fleet saves no provider key, and where
// they are set instead.
const fleetKeys = "This gateway is one replica of a fleet sharing its state in PostgreSQL (store.backend: postgres), " +
	"so provider keys are not saved from the console: a key saved here would be written to this replica's " +
	".cortexbuild/secrets.json only, and the other replicas would go on without it. " +
	"Set provider keys in every replica's environment instead (the variables each field names below, " +
	"or a ${VAR} under credentials: in llm-config.yaml): in Kubernetes the Secret cortexbuild-secrets, " +
	"with Docker Compose deploy/.env; then restart the replicas (a rolling restart keeps the fleet serving). " +
	"They are never kept in PostgreSQL."

func (c *Console) keysData(tested string, h *Health) keysData {
	f := c.opts.Config
	d := keysData{SecretsPath: c.opts.Secrets.Path(), Fleet: c.opts.Fleet}
	used := map[string]bool{}
	for _, name := range f.ProviderNames() {
		p := f.Providers[name]
		used[p.Type] = true
		v := providerView{Name: name, Type: p.Type}
		if p.Profile != "" {
			v.Type += "/" + p.Profile
		}
		if c.opts.Endpoint != nil {
			v.Endpoint = c.opts.Endpoint(name)
		}
		states, err := f.CredentialStates(name, c.opts.Registry, c.lookupEnv())
		if err != nil {
			v.Error = err.Error()
		}
		saved, _ := c.opts.Secrets.Fields(name)
		for _, st := range states {
			fv := fieldView{Name: st.Field.Name, Description: st.Field.Description, Secret: st.Field.Secret, Required: st.Required, Set: st.Set,
				Saved: slices.Contains(saved, st.Field.Name)}
			switch st.Source {
			case config.SourceEnv:
				fv.Where = "environment variable " + st.EnvVar
			case config.SourceConfig:
				fv.Where = "llm-config.yaml"
			case config.SourceSecretsFile:
				fv.Where = "secrets file"
			default:
				if st.EnvVar != "" {
					fv.Where = "llm-config.yaml names ${" + st.EnvVar + "}, which is unset"
				} else if len(st.EnvVars) > 0 {
					fv.Where = "export " + strings.Join(st.EnvVars, " or ") + ", or save it here"
				} else {
					fv.Where = "save it here, or write credentials: in llm-config.yaml"
				}
			}
			fv.Shadowed = fv.Saved && st.Source != config.SourceSecretsFile && st.Set
			v.Fields = append(v.Fields, fv)
		}
		if name == tested {
			v.Test = h
		}
		d.Providers = append(d.Providers, v)
	}
	for _, reg := range c.opts.Registry.All() {
		d.Types = append(d.Types, typeView{Type: reg.Type, Description: reg.Description, Fields: reg.Credentials, Configured: used[reg.Type]})
	}
	return d
}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.render(w, http.StatusOK, c.page(r, s, "keys", "Provider keys", keysView(c.keysData("", nil))))
}

// configured returns the schema of a configured provider, or false.
func (c *Console) configured(name string) (provider.Registration, bool) {
	p, ok := c.opts.Config.Providers[name]
	if !ok {
		return provider.Registration{}, false
	}
	reg, err := c.opts.Registry.Lookup(p.Type)
	return reg, err == nil
}

// saveKeys stores the fields filled in (empty ones are left as they are;
// a ticked "remove" box deletes the saved value).
func (c *Console) saveKeys(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.Fleet {
		p := c.page(r, s, "keys", "Provider keys", keysView(c.keysData("", nil)))
		p.Error = "Nothing was saved. " + fleetKeys
		c.render(w, http.StatusConflict, p)
		return
	}
	name := r.PathValue("provider")
	reg, ok := c.configured(name)
	if !ok {
		http.Error(w, "no such provider", http.StatusNotFound)
		return
	}
	var changed []string
	for _, field := range reg.Credentials {
		v := strings.TrimSpace(r.PostForm.Get("cred." + field.Name))
		clear := r.PostForm.Get("clear."+field.Name) != ""
		if v == "" && !clear {
			continue
		}
		if clear {
			v = ""
		}
		if err := c.opts.Secrets.Set(name, field.Name, v); err != nil {
			c.opts.Logger.Error("console: saving credentials failed", "provider", name, "error", err)
			p := c.page(r, s, "keys", "Provider keys", keysView(c.keysData("", nil)))
			p.Error = "Could not save: " + err.Error()
			c.render(w, http.StatusInternalServerError, p)
			return
		}
		changed = append(changed, field.Name)
	}
	if len(changed) == 0 {
		redirect(w, r, "keys", "nochange")
		return
	}
	c.opts.Logger.Info("console: credentials saved", "provider", name, "fields", strings.Join(changed, ","))
	redirect(w, r, "keys", "saved")
}

// check runs one provider's health check and remembers it.
func (c *Console) check(ctx context.Context, name string) Health {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CheckTimeout)
	defer cancel()
	h := c.opts.Health(ctx, name)
	if h.CheckedAt.IsZero() {
		h.CheckedAt = c.opts.Now()
	}
	c.mu.Lock()
	c.last[name] = h
	c.mu.Unlock()
	return h
}

func (c *Console) testKeys(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("provider")
	if _, ok := c.configured(name); !ok {
		http.Error(w, "no such provider", http.StatusNotFound)
		return
	}
	h := c.check(r.Context(), name)
	c.render(w, http.StatusOK, c.page(r, s, "keys", "Provider keys", keysView(c.keysData(name, &h))))
}

// --- health ---

type healthRow struct {
	Name    string
	Checked bool
	Health  Health
	Breaker orchestrator.BreakerState
}

func (c *Console) healthRows(ctx context.Context) []healthRow {
	breakers := map[string]orchestrator.BreakerState{}
	if c.opts.Breakers != nil {
		for _, b := range c.opts.Breakers(ctx) {
			breakers[b.Provider] = b
		}
	}
	now := c.opts.Now()
	var rows []healthRow
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range c.opts.Config.ProviderNames() {
		b, ok := breakers[name]
		if !ok {
			b = orchestrator.BreakerState{Provider: name}
		}
		h, checked := c.last[name]
		rows = append(rows, healthRow{Name: name, Checked: checked, Health: h, Breaker: b.At(now)})
	}
	return rows
}

func (c *Console) healthPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.render(w, http.StatusOK, c.page(r, s, "health", "Health", healthView(c.healthRows(r.Context()))))
}

// checkAll checks every provider at once, then shows the page.
func (c *Console) checkAll(w http.ResponseWriter, r *http.Request, s *session) {
	var wg sync.WaitGroup
	for _, name := range c.opts.Config.ProviderNames() {
		wg.Go(func() { c.check(r.Context(), name) })
	}
	wg.Wait()
	http.Redirect(w, r, Prefix+"health", http.StatusSeeOther)
}

func headroomText(s *provider.RateLimitStatus) string {
	if s == nil {
		return "unknown"
	}
	var parts []string
	if s.RequestsRemaining != nil {
		parts = append(parts, fmt.Sprintf("%d requests", *s.RequestsRemaining))
	}
	if s.TokensRemaining != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", *s.TokensRemaining))
	}
	out := "unknown"
	if len(parts) > 0 {
		out = strings.Join(parts, ", ") + " left"
	}
	if !s.ResetAt.IsZero() {
		out += ", resets " + s.ResetAt.UTC().Format("15:04:05Z")
	}
	return out
}

func breakerText(b orchestrator.BreakerState) string {
	switch b.State {
	case orchestrator.BreakerOpen:
		return fmt.Sprintf("open until %s (%d× %s)", b.RetryAt.UTC().Format("15:04:05Z"), b.Failures, b.LastError.String())
	case orchestrator.BreakerHalfOpen:
		return "half-open (next call probes)"
	}
	if b.Failures > 0 {
		return fmt.Sprintf("closed (%d× %s)", b.Failures, b.LastError.String())
	}
	return "closed"
}

// --- spend ---

type spendRow struct {
	Key       string
	Cost      provider.Money
	Attempts  int64
	Limit     string
	Remaining string
	Paused    bool
}

type invocationView struct {
	ID       string
	Time     time.Time
	Agent    string
	Task     string
	Cost     provider.Money
	Attempts []ledger.AttemptRow
}

type spendData struct {
	Month      string
	MonthTotal provider.Money
	MonthLimit string
	MonthLeft  string
	Agents     []spendRow
	// Keys is the month's spend per access key (Key is its hint and
	// name; calls made without a key are one row).
	Keys       []spendRow
	Tasks      []spendRow
	Months     []spendRow
	Chart      markup
	AgentChart markup
	// DayChart has one bar per day of the last [days], in the console's
	// time zone.
	DayChart    markup
	Invocations []invocationView
	// Unpriced counts the attempts charged their reservation because the
	// catalog lists neither model; UnpricedModels names them.
	Unpriced       int64
	UnpricedModels string
	// Sessions is the month's spend per host session (a coding agent's
	// session id, "" for calls made without one), the [maxSessions] that
	// spent most, most first; MoreSessions counts the others.
	Sessions     []spendRow
	MoreSessions int
	// Session is the host session asked for (?session=ID), with its spend
	// per subagent of the host, all time ("" for its main agent), each
	// with the agent that started it.
	Session       string
	SessionTotal  ledger.Totals
	SessionAgents []hostAgentRow
}

// hostAgentRow is the spend of one agent of a host session.
type hostAgentRow struct {
	Agent    string
	Parent   string
	Cost     provider.Money
	Attempts int64
}

// maxSessions is how many host sessions the spend page lists.
const maxSessions = 25

// sessionSpend fills in d's host sessions between from and to, and the
// subagents of d.Session.
func (c *Console) sessionSpend(ctx context.Context, d *spendData, from, to time.Time) error {
	st := c.opts.Ledger
	rep, err := st.Spend(ctx, ledger.Filter{From: from, To: to, By: ledger.BySession})
	if err != nil {
		return err
	}
	groups := slices.Clone(rep.Groups)
	slices.SortStableFunc(groups, func(a, b ledger.SpendGroup) int { return cmp.Compare(b.Cost, a.Cost) })
	if len(groups) > maxSessions {
		d.MoreSessions = len(groups) - maxSessions
		groups = groups[:maxSessions]
	}
	for _, g := range groups {
		d.Sessions = append(d.Sessions, spendRow{Key: g.Key, Cost: g.Cost, Attempts: g.Attempts})
	}
	if d.Session == "" {
		return nil
	}
	agents, err := st.Spend(ctx, ledger.Filter{Session: d.Session, By: ledger.ByHostAgent})
	if err != nil {
		return err
	}
	rows, err := st.Attempts(ctx, ledger.Filter{Session: d.Session})
	if err != nil {
		return err
	}
	parents := map[string]string{}
	for _, r := range rows {
		if r.HostAgent != "" && r.ParentAgent != "" {
			parents[r.HostAgent] = r.ParentAgent
		}
	}
	d.SessionTotal = agents.Total
	for _, g := range agents.Groups {
		d.SessionAgents = append(d.SessionAgents, hostAgentRow{Agent: g.Key, Parent: parents[g.Key], Cost: g.Cost, Attempts: g.Attempts})
	}
	return nil
}

// keySpendRows returns the spend per access key between from and to,
// each key named by its hint and name when the key store knows it.
func (c *Console) keySpendRows(ctx context.Context, from, to time.Time) ([]spendRow, error) {
	rep, err := c.opts.Ledger.Spend(ctx, ledger.Filter{From: from, To: to, By: ledger.ByKey})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	if c.opts.KeyStore != nil {
		keys, err := c.opts.KeyStore.List()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			names[k.ID] = strings.TrimSpace(k.Hint() + " " + k.Name)
		}
	}
	var rows []spendRow
	for _, g := range rep.Groups {
		row := spendRow{Key: cmp.Or(names[g.Key], g.Key), Cost: g.Cost, Attempts: g.Attempts}
		if g.Key == "" {
			row.Key = "(no key: calls made without the gateway)"
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func limitText(b ledger.Budget) (string, string) {
	if !b.Limited {
		return "none", "-"
	}
	left, _ := b.Remaining()
	return "$" + b.Limit.String(), "$" + left.String()
}

// spendData reads the spend page's figures; session names the host
// session whose subagents it shows ("" for none).
func (c *Console) spendData(ctx context.Context, session string) (spendData, error) {
	st := c.opts.Ledger
	now := c.opts.Now().In(c.opts.Location)
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, c.opts.Location)
	end := start.AddDate(0, 1, 0)
	d := spendData{Month: start.Format("2006-01"), Session: session}
	mb, err := st.Budget(ctx, ledger.MonthScope(now))
	if err != nil {
		return d, err
	}
	d.MonthLimit, d.MonthLeft = limitText(mb)
	month, err := st.Spend(ctx, ledger.Filter{From: start, To: end, By: ledger.ByAgent})
	if err != nil {
		return d, err
	}
	d.MonthTotal = month.Total.Cost
	for _, g := range month.Groups {
		row := spendRow{Key: g.Key, Cost: g.Cost, Attempts: g.Attempts, Limit: "none"}
		if g.Key == "" {
			row.Key = "(none)"
		}
		if l, ok := c.opts.AgentBudgets[g.Key]; ok {
			row.Limit = "$" + l.String() + " per call"
		}
		d.Agents = append(d.Agents, row)
	}
	if d.Keys, err = c.keySpendRows(ctx, start, end); err != nil {
		return d, err
	}
	if err := c.sessionSpend(ctx, &d, start, end); err != nil {
		return d, err
	}
	budgets, err := st.Budgets(ctx)
	if err != nil {
		return d, err
	}
	byScope := map[ledger.Scope]ledger.Budget{}
	for _, b := range budgets {
		byScope[b.Scope] = b
	}
	tasks, err := st.Spend(ctx, ledger.Filter{By: ledger.ByTask})
	if err != nil {
		return d, err
	}
	seen := map[string]bool{}
	for _, g := range tasks.Groups {
		if g.Key == "" {
			continue
		}
		seen[g.Key] = true
		b := byScope[ledger.TaskScope(g.Key)]
		row := spendRow{Key: g.Key, Cost: g.Cost, Attempts: g.Attempts, Paused: b.Paused}
		row.Limit, row.Remaining = limitText(b)
		d.Tasks = append(d.Tasks, row)
	}
	for _, b := range budgets {
		if b.Scope.Kind() == ledger.KindTask && !seen[b.Scope.ID()] {
			row := spendRow{Key: b.Scope.ID(), Paused: b.Paused}
			row.Limit, row.Remaining = limitText(b)
			d.Tasks = append(d.Tasks, row)
		}
	}
	sort.Slice(d.Tasks, func(i, j int) bool { return d.Tasks[i].Key < d.Tasks[j].Key })
	months, err := st.Spend(ctx, ledger.Filter{From: start.AddDate(0, -11, 0), To: end, By: ledger.ByMonth, Location: c.opts.Location})
	if err != nil {
		return d, err
	}
	var bars []bar
	for i := 11; i >= 0; i-- {
		m := start.AddDate(0, -i, 0).Format("2006-01")
		row := spendRow{Key: m}
		for _, g := range months.Groups {
			if g.Key == m {
				row.Cost, row.Attempts = g.Cost, g.Attempts
			}
		}
		b := byScope[ledger.Scope(ledger.KindMonth+":"+m)]
		row.Limit, row.Remaining = limitText(b)
		if row.Attempts > 0 || b.Limited {
			d.Months = append(d.Months, row)
		}
		bb := bar{Label: m[2:], Value: row.Cost}
		if b.Limited {
			bb.Limit = b.Limit
		}
		bars = append(bars, bb)
	}
	d.Chart = barChart("Spend per month (USD)", bars)
	var agentBars []bar
	for _, a := range d.Agents {
		agentBars = append(agentBars, bar{Label: a.Key, Value: a.Cost})
	}
	if len(agentBars) > 0 {
		d.AgentChart = barChart("Spend per agent this month (USD)", agentBars)
	}
	today := dayStart(now)
	rows, err := st.Attempts(ctx, ledger.Filter{From: today.AddDate(0, 0, 1-days)})
	if err != nil {
		return d, err
	}
	d.Invocations = recent(rows, 25)
	d.DayChart = barChart(fmt.Sprintf("Spend per day, last %d days (USD, %s)", days, c.opts.Location), dailyBars(rows, today, days))
	models, err := st.Spend(ctx, ledger.Filter{By: ledger.ByModel})
	if err != nil {
		return d, err
	}
	d.Unpriced = models.Total.Unpriced
	var names []string
	for _, g := range models.Groups {
		if g.Unpriced > 0 {
			names = append(names, fmt.Sprintf("%s (%d)", g.Key, g.Unpriced))
		}
	}
	d.UnpricedModels = strings.Join(names, ", ")
	return d, nil
}

// days is how many days the spend page's daily chart shows.
const days = 30

// dayStart is the midnight that starts t's day, in t's location.
func dayStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

// dailyBars sums the cost of rows per day, for the n days that end with
// the day starting at today (a midnight in the console's location), oldest
// first.
func dailyBars(rows []ledger.AttemptRow, today time.Time, n int) []bar {
	loc := today.Location()
	sums := map[string]provider.Money{}
	for _, a := range rows {
		sums[a.Time.In(loc).Format(time.DateOnly)] += a.Cost
	}
	bars := make([]bar, 0, n)
	for i := n - 1; i >= 0; i-- {
		d := time.Date(today.Year(), today.Month(), today.Day()-i, 0, 0, 0, 0, loc)
		bars = append(bars, bar{Label: d.Format("01-02"), Value: sums[d.Format(time.DateOnly)]})
	}
	return bars
}

// recent groups attempt rows by invocation and returns the newest n
// invocations, newest first, each with its attempts in order.
func recent(rows []ledger.AttemptRow, n int) []invocationView {
	idx := map[string]int{}
	var out []invocationView
	for _, a := range rows {
		i, ok := idx[a.InvocationID]
		if !ok {
			i = len(out)
			idx[a.InvocationID] = i
			out = append(out, invocationView{ID: a.InvocationID, Time: a.Time, Agent: a.Agent, Task: a.Task})
		}
		v := &out[i]
		v.Attempts = append(v.Attempts, a)
		v.Cost += a.Cost
		if a.Time.After(v.Time) {
			v.Time = a.Time
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func (c *Console) spendPage(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := c.spendData(r.Context(), r.URL.Query().Get("session"))
	p := c.page(r, s, "spend", "Spend", spendView(d))
	if err != nil {
		p.Error = "The ledger could not be read: " + err.Error()
	}
	c.render(w, http.StatusOK, p)
}

// --- control ---

type taskRow struct {
	ID     string
	Paused bool
	Reason string
}

type consentRow struct {
	Provider string
	Endpoint string
	Granted  bool
	Consent  locality.Consent
}

type controlData struct {
	Paused   bool
	Reason   string
	Tasks    []taskRow
	Consents []consentRow
}

func (c *Console) controlData(ctx context.Context) (controlData, error) {
	var d controlData
	var errs []error
	reason, paused, err := c.opts.State.Paused(ctx)
	errs = append(errs, err)
	d.Paused, d.Reason = paused, reason
	budgets, err := c.opts.Ledger.Budgets(ctx)
	errs = append(errs, err)
	d.Tasks, err = c.taskStates(ctx, budgets)
	errs = append(errs, err)
	for _, name := range c.opts.Config.ProviderNames() {
		row := consentRow{Provider: name}
		if c.opts.Endpoint != nil {
			row.Endpoint = c.opts.Endpoint(name)
		}
		cs, ok, err := c.opts.Consents.Consent(ctx, name)
		errs = append(errs, err)
		row.Granted, row.Consent = ok, cs
		d.Consents = append(d.Consents, row)
	}
	return d, errors.Join(errs...)
}

// taskStates returns the pause state of every task known: those with a
// budget (budgets, as [ledger.Store.Budgets] returned them), those with
// spend, and those paused or resumed from the console.
func (c *Console) taskStates(ctx context.Context, budgets []ledger.Budget) ([]taskRow, error) {
	var errs []error
	ids := map[string]bool{}
	for _, b := range budgets {
		if b.Scope.Kind() == ledger.KindTask {
			ids[b.Scope.ID()] = true
		}
	}
	if rep, err := c.opts.Ledger.Spend(ctx, ledger.Filter{By: ledger.ByTask}); err == nil {
		for _, g := range rep.Groups {
			if g.Key != "" {
				ids[g.Key] = true
			}
		}
	} else {
		errs = append(errs, err)
	}
	c.mu.Lock()
	for id := range c.tasks {
		ids[id] = true
	}
	c.mu.Unlock()
	var rows []taskRow
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		reason, paused, err := c.opts.Ledger.Paused(ctx, ledger.TaskScope(id))
		errs = append(errs, err)
		rows = append(rows, taskRow{ID: id, Paused: paused, Reason: reason})
	}
	return rows, errors.Join(errs...)
}

func (c *Console) controlPage(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := c.controlData(r.Context())
	p := c.page(r, s, "control", "Control", controlView(d))
	if err != nil {
		p.Error = err.Error()
	}
	c.render(w, http.StatusOK, p)
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	d, _ := c.controlData(r.Context())
	p := c.page(r, s, "control", "Control", controlView(d))
	p.Error = err.Error()
	c.render(w, http.StatusInternalServerError, p)
}

func (c *Console) actor(s *session) string {
	if s.keyID == "" {
		return "console"
	}
	return "console:key " + s.keyID
}

func (c *Console) projectControl(w http.ResponseWriter, r *http.Request, s *session) {
	switch r.PostForm.Get("action") {
	case "pause":
		reason := strings.TrimSpace(r.PostForm.Get("reason"))
		if reason == "" {
			reason = "paused from the console"
		}
		if err := c.opts.State.Pause(r.Context(), reason+" ("+c.actor(s)+")"); err != nil {
			c.fail(w, r, s, err)
			return
		}
		c.opts.Logger.Info("console: project paused", "by", c.actor(s))
		redirect(w, r, "control", "paused")
	case "resume":
		if err := c.opts.State.Resume(r.Context()); err != nil {
			c.fail(w, r, s, err)
			return
		}
		c.opts.Logger.Info("console: project resumed", "by", c.actor(s))
		redirect(w, r, "control", "resumed")
	default:
		http.Error(w, "action must be pause or resume", http.StatusBadRequest)
	}
}

func (c *Console) taskControl(w http.ResponseWriter, r *http.Request, s *session) {
	id := strings.TrimSpace(r.PostForm.Get("task"))
	scope := ledger.TaskScope(id)
	if err := scope.Validate(); err != nil {
		http.Error(w, "a task id is 1 to 200 printable characters", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.tasks[id] = true
	c.mu.Unlock()
	switch r.PostForm.Get("action") {
	case "pause":
		reason := strings.TrimSpace(r.PostForm.Get("reason"))
		if reason == "" {
			reason = "paused from the console"
		}
		if err := c.opts.Ledger.Pause(r.Context(), scope, reason); err != nil {
			c.fail(w, r, s, err)
			return
		}
		c.opts.Logger.Info("console: task paused", "task", id, "by", c.actor(s))
		redirect(w, r, "control", "task-paused")
	case "resume":
		if err := c.opts.Ledger.Resume(r.Context(), scope); err != nil {
			c.fail(w, r, s, err)
			return
		}
		c.opts.Logger.Info("console: task resumed", "task", id, "by", c.actor(s))
		redirect(w, r, "control", "task-resumed")
	default:
		http.Error(w, "action must be pause or resume", http.StatusBadRequest)
	}
}

func (c *Console) consentControl(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PostForm.Get("provider")
	if _, ok := c.opts.Config.Providers[name]; !ok {
		http.Error(w, "no such provider", http.StatusNotFound)
		return
	}
	switch r.PostForm.Get("action") {
	case "grant":
		endpoint := ""
		if c.opts.Endpoint != nil {
			endpoint = c.opts.Endpoint(name)
		}
		cs := locality.Consent{Provider: name, GrantedBy: c.actor(s), GrantedAt: c.opts.Now().UTC(), Endpoint: endpoint}
		if err := c.opts.Consents.Grant(r.Context(), cs); err != nil {
			c.fail(w, r, s, err)
			return
		}
		c.opts.Logger.Info("console: consent granted", "provider", name, "by", c.actor(s))
		redirect(w, r, "control", "granted")
	case "revoke":
		ok, err := c.opts.Consents.Revoke(r.Context(), name)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		if !ok {
			redirect(w, r, "control", "nothingrevoked")
			return
		}
		c.opts.Logger.Info("console: consent revoked", "provider", name, "by", c.actor(s))
		redirect(w, r, "control", "revoked")
	default:
		http.Error(w, "action must be grant or revoke", http.StatusBadRequest)
	}
}
