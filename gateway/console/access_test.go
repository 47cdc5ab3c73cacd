package console_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/gateway/console"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// stamp matches a time as the console shows it.
const stamp = `\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`

var secretRE = regexp.MustCompile(`id="new-secret" class="secret" readonly value="([^"]+)"`)

// keyID is the public part of a token.
func keyID(token string) string { return strings.Split(strings.TrimPrefix(token, "cbk_"), "_")[0] }

// A key created on the access keys page is shown once, works for calls,
// is listed without its secret, and refused once revoked; the secret is
// in no other response and in no log line.
func TestAccessKeysCreateShowOnceRevoke(t *testing.T) {
	var logs bytes.Buffer
	fx := newFixtureWith(t, false, func(o *console.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.CheckKey = func(spec gateway.KeySpec) error {
			if spec.Agent != "" && spec.Agent != "builder" && spec.Agent != "critic" {
				return fmt.Errorf("agent %q: unknown agent", spec.Agent)
			}
			return nil
		}
	})
	b := fx.browser(t).loggedIn()
	var bodies []string
	keep := keeper(&bodies)
	page := keep(b.do(http.MethodGet, "/console/access", nil)).Body.String()
	admin := keyID(fx.key)
	row := squash(regexp.MustCompile(`(?s)<tr id="k-` + admin + `">.*?</tr>`).FindString(page))
	if !strings.Contains(row, "cbk_"+admin+"_…</code> <span class=\"hint\">(this session)</span></td><td>ops</td> <td>admin</td><td>any</td><td>any</td><td>any</td>") ||
		!strings.Contains(row, "active") || secretRE.MatchString(page) {
		t.Errorf("the admin key's row: %s", row)
	}
	// Create a call key bound to an agent and two models.
	create := url.Values{"csrf": {b.csrf}, "name": {"ci runner"}, "role": {"call"}, "agent": {"builder"}, "task": {""}, "models": {"fast_cheap, builder"}}
	// The secret is in the response to the form (no redirect to a page
	// that would have to find it kept somewhere).
	w := keep(b.do(http.MethodPost, "/console/access", create))
	if w.Code != http.StatusOK || w.Header().Get("Location") != "" {
		t.Fatalf("create = %d %s", w.Code, w.Body)
	}
	page = w.Body.String()
	m := secretRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the new key's secret is not shown:\n%s", page)
	}
	token := m[1]
	if !strings.Contains(page, "this is the only time it is shown") || !strings.Contains(page, `data-copy="new-secret"`) ||
		!strings.Contains(page, `data-replace-url="/console/access"`) {
		t.Error("the new key is shown without its copy hint")
	}
	k, err := fx.keys.Check(token)
	if err != nil || k.Name != "ci runner" || k.Role != gateway.RoleCall || k.Agent != "builder" || k.Project != "demo" ||
		strings.Join(k.Models, ",") != "fast_cheap,builder" {
		t.Fatalf("the created key = %+v, %v", k, err)
	}
	row = squash(regexp.MustCompile(`(?s)<tr id="k-` + k.ID + `">.*?</tr>`).FindString(page))
	if !regexp.MustCompile(`<td>ci runner</td> <td>call</td><td>builder</td><td>any</td><td>fast_cheap, builder</td> <td class="limits">no limits</td><td class="spent">\$0\.00</td> <td>` + stamp + `</td>`).MatchString(row) {
		t.Errorf("the new key's row: %s", row)
	}
	if i, j := strings.Index(page, `id="k-`+k.ID+`"`), strings.Index(page, `id="k-`+admin+`"`); i < 0 || j < 0 || i > j {
		t.Error("keys are not listed newest first")
	}
	// Shown once: the next load has no secret.
	if page := keep(b.do(http.MethodGet, "/console/access", nil)).Body.String(); strings.Contains(page, token) || strings.Contains(page, `id="created"`) {
		t.Error("the secret is shown a second time")
	}
	// Nor does another session see it.
	other := fx.browser(t).loggedIn()
	if page := keep(other.do(http.MethodGet, "/console/access", nil)).Body.String(); strings.Contains(page, token) {
		t.Error("another session sees the secret")
	}
	for _, p := range []string{"/console/", "/console/keys", "/console/health", "/console/spend", "/console/control"} {
		keep(b.do(http.MethodGet, p, nil))
	}
	// Revoke it: calls with it are refused.
	w = keep(b.do(http.MethodPost, "/console/access/revoke", url.Values{"csrf": {b.csrf}, "id": {k.ID}}))
	if w.Code != http.StatusSeeOther {
		t.Fatalf("revoke = %d %s", w.Code, w.Body)
	}
	if _, err := fx.keys.Check(token); !errors.Is(err, gateway.ErrRevokedKey) {
		t.Errorf("the revoked key checks: %v", err)
	}
	page = keep(b.do(http.MethodGet, "/console/access?m=key-revoked", nil)).Body.String()
	row = squash(regexp.MustCompile(`(?s)<tr id="k-` + k.ID + `">.*?</tr>`).FindString(page))
	if !regexp.MustCompile(`<td class="revoked">`+stamp+`</td>`).MatchString(row) || strings.Contains(row, "revoke-"+k.ID) || !strings.Contains(page, "Key revoked") {
		t.Errorf("the revoked key's row: %s", row)
	}
	if w := keep(b.do(http.MethodPost, "/console/access/revoke", url.Values{"csrf": {b.csrf}, "id": {"0000000000000000"}})); w.Code != http.StatusNotFound {
		t.Errorf("revoke an unknown key = %d", w.Code)
	}
	shown := 0
	for _, body := range bodies {
		if strings.Contains(body, token) {
			shown++
		}
		if strings.Contains(body, fx.key) {
			t.Error("a page shows the admin key's secret")
		}
	}
	if shown != 1 {
		t.Errorf("the new secret is in %d responses, want exactly 1", shown)
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), token[len(token)-20:]) || !strings.Contains(logs.String(), "key created") {
		t.Errorf("log lines:\n%s", logs.String())
	}
}

func TestAccessKeysRefuseBadKeys(t *testing.T) {
	fx := newFixtureWith(t, false, func(o *console.Options) {
		o.CheckKey = func(spec gateway.KeySpec) error {
			if spec.Agent == "buidler" || slices.Contains(spec.Agents, "buidler") {
				return errors.New(`agent "buidler": unknown agent (did you mean "builder"?)`)
			}
			return nil
		}
	})
	b := fx.browser(t).loggedIn()
	before, _ := fx.keys.List()
	cases := []struct {
		form url.Values
		want string
	}{
		{url.Values{"role": {"root"}}, `unknown key role &#34;root&#34;`},
		{url.Values{"role": {""}}, "role: choose call or admin"},
		{url.Values{"role": {"admin"}, "agent": {"builder"}}, "an admin key makes no model calls"},
		{url.Values{"role": {"call"}, "agent": {"buidler"}}, "did you mean &#34;builder&#34;?"},
		{url.Values{"role": {"call"}, "name": {strings.Repeat("n", 101)}}, "name: at most 100 characters"},
		{url.Values{"role": {"call"}, "task": {"bad\x00task"}}, "task: a task id is 1 to 200 printable characters"},
		{url.Values{"role": {"call"}, "budget": {"five"}}, "budget: &#34;five&#34; is not an amount in USD"},
		{url.Values{"role": {"call"}, "budget": {"-1"}}, "is negative"},
		{url.Values{"role": {"call"}, "budget": {"1"}, "period": {"year"}}, "unknown budget period &#34;year&#34;"},
		{url.Values{"role": {"call"}, "rpm": {"-3"}}, "requests per minute: &#34;-3&#34; is not a whole number"},
		{url.Values{"role": {"call"}, "tpm": {"lots"}}, "tokens per minute: &#34;lots&#34; is not a whole number"},
		{url.Values{"role": {"call"}, "expires": {"soon"}}, "expires: expiry &#34;soon&#34;: give a duration"},
		{url.Values{"role": {"admin"}, "budget": {"1"}}, "an admin key makes no model calls"},
		{url.Values{"role": {"call"}, "agents": {"builder,buidler"}}, "did you mean &#34;builder&#34;?"},
	}
	for _, tc := range cases {
		tc.form.Set("csrf", b.csrf)
		w := b.do(http.MethodPost, "/console/access", tc.form)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "The key was not created: ") || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%v = %d, want 400 with %q:\n%s", tc.form, w.Code, tc.want, w.Body)
		}
		if secretRE.MatchString(w.Body.String()) {
			t.Errorf("%v shows a secret", tc.form)
		}
	}
	// The refused form keeps what was typed.
	w := b.do(http.MethodPost, "/console/access", url.Values{"csrf": {b.csrf}, "role": {"call"}, "agent": {"buidler"}, "name": {"laptop"}})
	if !strings.Contains(w.Body.String(), `id="k-name" name="name" maxlength="100" value="laptop"`) {
		t.Error("a refused form loses the name typed")
	}
	if after, _ := fx.keys.List(); len(after) != len(before) {
		t.Errorf("refused forms created %d keys", len(after)-len(before))
	}
}

// Creating and revoking keys are POST forms like the others: the
// session's token and the console's own origin are required, and only an
// admin session reaches them.
func TestAccessKeysNeedCSRFAndAnAdminSession(t *testing.T) {
	fx := newFixture(t, false)
	count := func() int { ks, _ := fx.keys.List(); return len(ks) }
	n := count()
	call, _, err := fx.keys.Create(gateway.KeySpec{Name: "client", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	n++
	// A call key does not log in, so it reaches neither the page nor the forms.
	anon := fx.browser(t)
	if w := anon.login(call); w.Code != http.StatusForbidden {
		t.Errorf("login with a call key = %d", w.Code)
	}
	if w := anon.do(http.MethodGet, "/console/access", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/login" {
		t.Errorf("access page without a session = %d", w.Code)
	}
	if w := anon.do(http.MethodPost, "/console/access", url.Values{"csrf": {anon.csrf}, "role": {"admin"}}); w.Code != http.StatusUnauthorized {
		t.Errorf("create without a session = %d", w.Code)
	}
	if w := anon.do(http.MethodPost, "/console/access/revoke", url.Values{"csrf": {anon.csrf}, "id": {keyID(fx.key)}}); w.Code != http.StatusUnauthorized {
		t.Errorf("revoke without a session = %d", w.Code)
	}
	b := fx.browser(t).loggedIn()
	create := url.Values{"role": {"admin"}, "name": {"x"}}
	revoke := url.Values{"id": {keyID(call)}}
	for _, tc := range []struct {
		name string
		csrf string
		opts []reqOpt
	}{
		{"no token", "", nil},
		{"wrong token", "x" + b.csrf, nil},
		{"cross-site", b.csrf, []reqOpt{header("Sec-Fetch-Site", "cross-site")}},
		{"other origin", b.csrf, []reqOpt{header("Sec-Fetch-Site", ""), origin("http://evil.example")}},
		{"no origin", b.csrf, []reqOpt{noOrigin}},
	} {
		create.Set("csrf", tc.csrf)
		revoke.Set("csrf", tc.csrf)
		if w := b.do(http.MethodPost, "/console/access", create, tc.opts...); w.Code != http.StatusForbidden {
			t.Errorf("create, %s = %d", tc.name, w.Code)
		}
		if w := b.do(http.MethodPost, "/console/access/revoke", revoke, tc.opts...); w.Code != http.StatusForbidden {
			t.Errorf("revoke, %s = %d", tc.name, w.Code)
		}
	}
	if count() != n {
		t.Error("a refused request created a key")
	}
	if _, err := fx.keys.Check(call); err != nil {
		t.Errorf("a refused request revoked a key: %v", err)
	}
}

// Revoking the key of the session itself logs it out.
func TestRevokingTheSessionsKeyLogsOut(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	if w := b.do(http.MethodPost, "/console/access/revoke", url.Values{"csrf": {b.csrf}, "id": {keyID(fx.key)}}); w.Code != http.StatusSeeOther {
		t.Fatalf("revoke = %d", w.Code)
	}
	if w := b.do(http.MethodGet, "/console/access", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/login" {
		t.Errorf("after revoking its own key the session = %d %q", w.Code, w.Header().Get("Location"))
	}
}

// authOnly checks keys without being able to list, create or revoke.
type authOnly struct{ ks *gateway.KeyStore }

func (a authOnly) Check(token string) (gateway.Key, error) { return a.ks.Check(token) }

// Without a key store the page says where keys are managed, and the forms
// are refused.
func TestAccessKeysWithoutAKeyStore(t *testing.T) {
	var fx *fixture
	fx = newFixtureWith(t, false, func(o *console.Options) { o.Keys = authOnly{o.Keys.(*gateway.KeyStore)} })
	b := fx.browser(t).loggedIn()
	page := b.do(http.MethodGet, "/console/access", nil).Body.String()
	if !strings.Contains(page, "This console manages no keys") || strings.Contains(page, `id="create-key"`) {
		t.Errorf("access page without a key store:\n%s", page)
	}
	if w := b.do(http.MethodPost, "/console/access", url.Values{"csrf": {b.csrf}, "role": {"call"}}); w.Code != http.StatusNotFound {
		t.Errorf("create without a key store = %d", w.Code)
	}
}

// A key created with limits on the access keys page has them in the key
// store (budget and period, rates, expiry, agents); its row shows them
// and what the key spent in its budget's period, and the spend page
// lists the month's spend per key.
func TestAccessKeysWithLimitsAndSpend(t *testing.T) {
	fx := newFixture(t, false)
	b := fx.browser(t).loggedIn()
	create := url.Values{"csrf": {b.csrf}, "name": {"nightly"}, "role": {"call"}, "agents": {"builder, critic"},
		"budget": {"$5.00"}, "period": {"day"}, "rpm": {"60"}, "tpm": {"200000"}, "expires": {"2030-01-31"}}
	w := b.do(http.MethodPost, "/console/access", create)
	if w.Code != http.StatusOK {
		t.Fatalf("create = %d %s", w.Code, w.Body)
	}
	token := secretRE.FindStringSubmatch(w.Body.String())
	if token == nil {
		t.Fatal("the new key's secret is not shown")
	}
	k, err := fx.keys.Check(token[1])
	if err != nil || k.Budget == nil || k.Budget.String() != "5.00" || k.BudgetPeriod() != "day" || k.RPM != 60 || k.TPM != 200000 ||
		k.ExpiresAt == nil || !k.ExpiresAt.Equal(time.Date(2030, 1, 31, 0, 0, 0, 0, time.UTC)) || strings.Join(k.Agents, ",") != "builder,critic" {
		t.Fatalf("the created key = %+v, %v", k, err)
	}
	// The key spends today, and spent yesterday (outside its day).
	for i, at := range []time.Time{fx.now, fx.now.Add(-24 * time.Hour)} {
		cost, err := provider.ParseMoney([]string{"0.75", "2.00"}[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := fx.store.RecordAttempt(context.Background(), ledger.AttemptRow{InvocationID: fmt.Sprintf("inv_k%d", i), Key: k.ID, Agent: "builder",
			Provider: "claude", Model: "claude-sonnet-4-6", Outcome: "ok", Cost: cost, Time: at}); err != nil {
			t.Fatal(err)
		}
	}
	page := b.do(http.MethodGet, "/console/access", nil).Body.String()
	row := squash(regexp.MustCompile(`(?s)<tr id="k-` + k.ID + `">.*?</tr>`).FindString(page))
	for _, want := range []string{
		`<td class="limits">budget $5.00/day, 60 rpm, 200000 tpm, expires 2030-01-31T00:00:00Z, agents builder,critic</td>`,
		`<td class="spent">$0.75</td>`,
	} {
		if !strings.Contains(row, want) {
			t.Errorf("the key's row lacks %s:\n%s", want, row)
		}
	}
	spend := b.do(http.MethodGet, "/console/spend", nil).Body.String()
	table := squash(regexp.MustCompile(`(?s)<table id="keys-spend">.*?</table>`).FindString(spend))
	if !strings.Contains(table, "<td>cbk_"+k.ID+"_… nightly</td><td class=\"num\">$2.75</td><td class=\"num\">2</td>") {
		t.Errorf("the spend per key:\n%s", table)
	}
	if strings.Contains(spend, token[1]) || strings.Contains(page, token[1]) {
		t.Error("the key's secret is shown again")
	}
}
