package console_test

import (
	"net/http"
	"net/url"
	"testing"
)

// Without authentication, GETs without a cookie share one session rather
// than each starting one (which let any loopback client fill the session
// table): two hundred of them are all given the same session cookie, and
// its form token still guards every POST (none or another session's is
// refused, as is another origin). A logout ends it; the next GET gets a new
// one.
func TestNoAuthGetsWithoutACookieShareOneSession(t *testing.T) {
	fx := newFixture(t, true)
	cookies := map[string]bool{}
	for range 200 {
		b := fx.browser(t) // no cookie
		if w := b.do(http.MethodGet, "/console/", nil); w.Code != http.StatusOK {
			t.Fatalf("no-auth overview = %d", w.Code)
		}
		for _, c := range b.cookies {
			cookies[c.Name+"="+c.Value] = true
		}
	}
	if len(cookies) != 1 {
		t.Errorf("200 cookie-less GETs were given %d session cookies, want one shared session", len(cookies))
	}
	b := fx.browser(t)
	b.do(http.MethodGet, "/console/control", nil)
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"action": {"pause"}}); w.Code != http.StatusForbidden {
		t.Errorf("POST without the form token = %d, want 403", w.Code)
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {"x" + b.csrf}, "action": {"pause"}}); w.Code != http.StatusForbidden {
		t.Errorf("POST with a wrong form token = %d, want 403", w.Code)
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {b.csrf}, "action": {"pause"}}, origin("http://evil.example"), header("Sec-Fetch-Site", "cross-site")); w.Code != http.StatusForbidden {
		t.Errorf("cross-site POST with the token = %d, want 403", w.Code)
	}
	if w := b.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {b.csrf}, "action": {"pause"}}); w.Code != http.StatusSeeOther {
		t.Errorf("POST with its token = %d, want 303", w.Code)
	}
	old := b.csrf
	if w := b.do(http.MethodPost, "/console/logout", url.Values{"csrf": {b.csrf}}); w.Code != http.StatusSeeOther {
		t.Fatalf("logout = %d", w.Code)
	}
	b2 := fx.browser(t)
	b2.do(http.MethodGet, "/console/control", nil)
	if b2.csrf == "" || b2.csrf == old {
		t.Errorf("after a logout the next session has form token %q (the old one: %v)", b2.csrf, b2.csrf == old)
	}
	if w := b2.do(http.MethodPost, "/console/control/project", url.Values{"csrf": {b2.csrf}, "action": {"resume"}}); w.Code != http.StatusSeeOther {
		t.Errorf("POST in the new session = %d, want 303", w.Code)
	}
}
