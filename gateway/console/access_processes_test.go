package console_test

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
)

// The revoke child revokes a key in a key file, in a process of its own,
// as 'cortexbuild serve keys revoke' does.
const (
	envRevokeChildFile = "CORTEXBUILD_CONSOLE_REVOKE_FILE"
	envRevokeChildKey  = "CORTEXBUILD_CONSOLE_REVOKE_KEY"
)

// TestRevokeChild is the child's body; it does nothing in a normal test
// run.
func TestRevokeChild(t *testing.T) {
	path := os.Getenv(envRevokeChildFile)
	if path == "" {
		return
	}
	if _, err := gateway.OpenKeyStore(path).Revoke(os.Getenv(envRevokeChildKey)); err != nil {
		t.Fatal(err)
	}
}

// A key created in the console right after another process revoked a key
// does not bring the revoked key back, even though the console's store
// looked at the file just before the revocation and would look again
// only an hour later: the creation reads the file afresh under its lock.
func TestConsoleCreateKeepsAnotherProcesssRevocation(t *testing.T) {
	fx := newFixture(t, false)
	victim, k, err := fx.keys.Create(gateway.KeySpec{Name: "victim", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	fx.keys.SetRecheck(time.Hour)
	b := fx.browser(t).loggedIn()
	if w := b.do(http.MethodGet, "/console/access", nil); w.Code != http.StatusOK {
		t.Fatalf("access page = %d", w.Code)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestRevokeChild$", "-test.count=1")
	child.Env = append(os.Environ(), envRevokeChildFile+"="+fx.keys.Path(), envRevokeChildKey+"="+k.ID)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("the revoking process: %v\n%s", err, out)
	}
	w := b.do(http.MethodPost, "/console/access", url.Values{"csrf": {b.csrf}, "name": {"after"}, "role": {"call"}})
	if w.Code != http.StatusOK || !secretRE.MatchString(w.Body.String()) {
		t.Fatalf("create = %d %s", w.Code, w.Body)
	}
	fresh := gateway.OpenKeyStore(fx.keys.Path())
	for name, store := range map[string]*gateway.KeyStore{"a fresh store": fresh, "the console's store": fx.keys} {
		if _, err := store.Check(victim); !errors.Is(err, gateway.ErrRevokedKey) {
			t.Errorf("%s checks the revoked key: %v, want ErrRevokedKey", name, err)
		}
	}
	keys, err := fresh.List()
	if err != nil || len(keys) != 3 || keys[2].Name != "after" {
		t.Errorf("the file holds %d keys (%v), want the admin key, the revoked one and the one just created", len(keys), err)
	}
}
