package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// KeyManager lists, creates and revokes the gateway's virtual keys, as
// *gateway.KeyStore does.
type KeyManager interface {
	List() ([]gateway.Key, error)
	Create(spec gateway.KeySpec) (token string, k gateway.Key, err error)
	Revoke(id string) (gateway.Key, error)
}

// maxKeyName bounds a key's name entered in the console.
const maxKeyName = 100

// createdKey is a key just created and its token: the token is written
// into the response to the form that created it, and kept nowhere.
type createdKey struct {
	Key   gateway.Key
	Token string
}

type keyRow struct {
	Key     gateway.Key
	Models  string
	Current bool // the key of the session looking at the page
	// Limits describes the key's budget, rates, expiry and agents; Spent
	// is what it spent in its budget's period (the month without one).
	Limits  string
	Spent   provider.Money
	Expired bool
}

// keyForm is what the create form was sent with, shown again when it is
// refused (it holds no secret).
type keyForm struct {
	Name, Role, Agent, Task, Models string
	// The key's limits as typed: a budget in USD and its period, requests
	// and tokens per minute, an expiry, the allowed agents.
	Budget, Period, RPM, TPM, Expires, Agents string
}

// perMinute reads a rate limit typed in field: empty is no limit.
func perMinute(field, text string) (int64, error) {
	if text == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%s: %q is not a whole number from 0 to %d", field, text, math.MaxInt32)
	}
	return v, nil
}

// limits reads the limits of the form; each error names its field.
func (f keyForm) limits(now time.Time) (gateway.KeyLimits, []string, error) {
	var l gateway.KeyLimits
	if f.Budget != "" {
		m, err := provider.ParseMoney(strings.TrimPrefix(f.Budget, "$"))
		if err != nil {
			return l, nil, fmt.Errorf("budget: %q is not an amount in USD (e.g. 5.00)", f.Budget)
		}
		l.Budget, l.Period = &m, f.Period
	}
	rpm, err := perMinute("requests per minute", f.RPM)
	if err != nil {
		return l, nil, err
	}
	l.RPM = int(rpm)
	if l.TPM, err = perMinute("tokens per minute", f.TPM); err != nil {
		return l, nil, err
	}
	if f.Expires != "" {
		at, err := gateway.ParseExpiry(f.Expires, now)
		if err != nil {
			return l, nil, fmt.Errorf("expires: %v", err)
		}
		l.ExpiresAt = &at
	}
	return l, splitModels(f.Agents), nil
}

type accessData struct {
	Managed bool
	Keys    []keyRow
	Created *createdKey
	Form    keyForm
	Roles   []gateway.Role
	Periods []string
}

func (c *Console) accessData(ctx context.Context, s *session, form keyForm) (accessData, error) {
	d := accessData{Managed: c.opts.KeyStore != nil, Form: form, Roles: gateway.Roles, Periods: []string{ledger.PeriodMonth, ledger.PeriodDay, ledger.PeriodTotal}}
	if d.Form.Role == "" {
		d.Form.Role = string(gateway.RoleCall)
	}
	if d.Form.Period == "" {
		d.Form.Period = ledger.PeriodMonth
	}
	if !d.Managed {
		return d, nil
	}
	keys, err := c.opts.KeyStore.List()
	if err != nil {
		return d, err
	}
	now := c.opts.Now()
	spent, err := gateway.KeySpend(ctx, c.opts.Ledger, keys, now, c.opts.Location)
	for _, k := range slices.Backward(keys) { // newest first
		d.Keys = append(d.Keys, keyRow{Key: k, Models: strings.Join(k.Models, ", "), Current: s.keyID != "" && k.ID == s.keyID,
			Limits: k.LimitsText(), Spent: spent[k.ID], Expired: k.Expired(now)})
	}
	return d, err
}

// accessPage lists the keys.
func (c *Console) accessPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderAccess(w, r, s, nil)
}

// renderAccess writes the access keys page; created, when set, is the key
// this request created, whose secret the page shows.
func (c *Console) renderAccess(w http.ResponseWriter, r *http.Request, s *session, created *createdKey) {
	d, err := c.accessData(r.Context(), s, keyForm{})
	d.Created = created
	p := c.page(r, s, "access", "Access keys", accessView(d))
	if err != nil {
		c.opts.Logger.Error("console: key store unreadable", "error", err)
		p.Error = "The key store could not be read: " + err.Error()
	}
	c.render(w, http.StatusOK, p)
}

// accessError shows the access keys page with an error and the form as
// it was sent.
func (c *Console) accessError(w http.ResponseWriter, r *http.Request, s *session, status int, form keyForm, msg string) {
	d, err := c.accessData(r.Context(), s, form)
	p := c.page(r, s, "access", "Access keys", accessView(d))
	p.Error = msg
	if err != nil {
		p.Error += " The key store could not be read: " + err.Error()
	}
	c.render(w, status, p)
}

// splitModels reads a comma- or space-separated list of model names.
func splitModels(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// createKey makes a key and answers with the access keys page showing
// its secret: the secret is in that one response and kept nowhere, not in
// the session (which may live in a database shared by a fleet) nor
// anywhere a later page could show it again. The page's script turns the
// browser's history entry into the plain GET of the page, so that a
// reload shows the list without the secret rather than sending the form
// again.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.KeyStore == nil {
		http.Error(w, "this console manages no keys: use 'cortexbuild serve keys create'", http.StatusNotFound)
		return
	}
	f := keyForm{Name: strings.TrimSpace(r.PostForm.Get("name")), Role: strings.TrimSpace(r.PostForm.Get("role")),
		Agent: strings.TrimSpace(r.PostForm.Get("agent")), Task: strings.TrimSpace(r.PostForm.Get("task")), Models: strings.TrimSpace(r.PostForm.Get("models")),
		Budget: strings.TrimSpace(r.PostForm.Get("budget")), Period: strings.TrimSpace(r.PostForm.Get("period")), RPM: strings.TrimSpace(r.PostForm.Get("rpm")),
		TPM: strings.TrimSpace(r.PostForm.Get("tpm")), Expires: strings.TrimSpace(r.PostForm.Get("expires")), Agents: strings.TrimSpace(r.PostForm.Get("agents"))}
	limits, agents, err := f.limits(c.opts.Now())
	if err != nil {
		c.accessError(w, r, s, http.StatusBadRequest, f, "The key was not created: "+err.Error())
		return
	}
	spec := gateway.KeySpec{Name: f.Name, Project: c.opts.Project, Role: gateway.Role(f.Role), Agent: f.Agent, Task: f.Task, Models: splitModels(f.Models),
		Agents: agents, KeyLimits: limits}
	err = spec.Check()
	switch {
	case len(f.Name) > maxKeyName:
		err = fmt.Errorf("name: at most %d characters", maxKeyName)
	case f.Role == "":
		err = errors.New("role: choose call or admin")
	case f.Task != "" && ledger.TaskScope(f.Task).Validate() != nil:
		err = errors.New("task: a task id is 1 to 200 printable characters")
	case err == nil && c.opts.CheckKey != nil:
		err = c.opts.CheckKey(spec)
	}
	if err != nil {
		c.accessError(w, r, s, http.StatusBadRequest, f, "The key was not created: "+err.Error())
		return
	}
	token, k, err := c.opts.KeyStore.Create(spec)
	if err != nil {
		c.opts.Logger.Error("console: creating a key failed", "error", err)
		c.accessError(w, r, s, http.StatusInternalServerError, f, "The key was not created: "+err.Error())
		return
	}
	c.opts.Logger.Info("console: key created", "key", k.Hint(), "role", string(k.Role), "by", c.actor(s))
	c.renderAccess(w, r, s, &createdKey{Key: k, Token: token})
}

// revokeKey revokes a key; revoking the key of the session itself ends
// the session (the next page sends it to the login).
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.KeyStore == nil {
		http.Error(w, "this console manages no keys: use 'cortexbuild serve keys revoke'", http.StatusNotFound)
		return
	}
	id := strings.TrimSpace(r.PostForm.Get("id"))
	if id == "" {
		c.accessError(w, r, s, http.StatusBadRequest, keyForm{}, "Name the key to revoke.")
		return
	}
	k, err := c.opts.KeyStore.Revoke(id)
	switch {
	case errors.Is(err, gateway.ErrNoSuchKey):
		c.accessError(w, r, s, http.StatusNotFound, keyForm{}, "No key has that id: nothing was revoked.")
		return
	case err != nil:
		c.opts.Logger.Error("console: revoking a key failed", "error", err)
		c.accessError(w, r, s, http.StatusInternalServerError, keyForm{}, "The key was not revoked: "+err.Error())
		return
	}
	c.opts.Logger.Info("console: key revoked", "key", k.Hint(), "by", c.actor(s))
	redirect(w, r, "access", "key-revoked")
}
