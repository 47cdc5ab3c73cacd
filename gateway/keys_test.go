package gateway_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
)

func TestKeyStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".cortexbuild", gateway.KeyFileName)
	s := gateway.OpenKeyStore(path)
	if keys, err := s.List(); err != nil || len(keys) != 0 {
		t.Fatalf("empty store = %v, %v", keys, err)
	}
	token, k, err := s.Create(gateway.KeySpec{Name: "laptop", Project: "demo", Agent: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "cbk_"+k.ID+"_") || len(token) < 60 || k.Hint() != "cbk_"+k.ID+"_…" {
		t.Errorf("token %q, key %+v", token, k)
	}
	if runtime.GOOS != "windows" {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("key file mode = %v, %v; want 0600", st.Mode().Perm(), err)
		}
	}
	data, _ := os.ReadFile(path)
	secret := strings.TrimPrefix(token, "cbk_"+k.ID+"_")
	if strings.Contains(string(data), secret) || !strings.Contains(string(data), `"sha256"`) {
		t.Errorf("the key file holds the secret or no hash:\n%s", data)
	}
	got, err := s.Check(token)
	if err != nil || got.ID != k.ID || got.Agent != "builder" || got.Project != "demo" {
		t.Errorf("Check = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "cbk_", token + "x", flip(token), "cbk_ffffffffffffffff_" + secret, "sk-ant-foo"} {
		if _, err := s.Check(bad); !errors.Is(err, gateway.ErrInvalidKey) {
			t.Errorf("Check(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	// Another process revokes: this store sees it on the next check.
	other := gateway.OpenKeyStore(path)
	if _, err := other.Revoke(k.Hint()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(token); !errors.Is(err, gateway.ErrRevokedKey) {
		t.Errorf("revoked key = %v", err)
	}
	if _, err := s.Revoke("0000"); !errors.Is(err, gateway.ErrNoSuchKey) {
		t.Errorf("revoke unknown = %v", err)
	}
	keys, err := s.List()
	if err != nil || len(keys) != 1 || keys[0].Active() || keys[0].RevokedAt == nil {
		t.Errorf("list after revoke = %+v, %v", keys, err)
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		// Touch the file so the store re-reads it.
		if err := os.WriteFile(path, append(data, ' '), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Check(token); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("a world-readable key file = %v", err)
		}
	}
}

// flip changes the last character of a token's secret.
func flip(token string) string {
	last := token[len(token)-1]
	if last == 'A' {
		return token[:len(token)-1] + "B"
	}
	return token[:len(token)-1] + "A"
}

// A server looks at the key file at most once per recheck period: its own
// changes are seen at once, another process's within the period, and a
// file it cannot use fails every check, not only the first.
func TestKeyStoreRecheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), gateway.KeyFileName)
	s := gateway.OpenKeyStore(path)
	s.SetRecheck(time.Hour)
	token, k, err := s.Create(gateway.KeySpec{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(token); err != nil {
		t.Fatalf("fresh key = %v", err)
	}
	other := gateway.OpenKeyStore(path) // another process
	if _, err := other.Revoke(k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(token); err != nil {
		t.Errorf("within the recheck period the file was looked at again: %v", err)
	}
	if _, err := s.Revoke(k.ID); err != nil { // this store's own change
		t.Fatal(err)
	}
	if _, err := s.Check(token); !errors.Is(err, gateway.ErrRevokedKey) {
		t.Errorf("own revocation = %v, want ErrRevokedKey", err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := gateway.OpenKeyStore(path)
	s2.SetRecheck(time.Hour)
	for i := range 2 {
		if _, err := s2.Check(token); err == nil || errors.Is(err, gateway.ErrInvalidKey) {
			t.Errorf("check %d of a corrupt key file = %v, want the file's error", i, err)
		}
	}
}

// The mode is checked on every look at the file, not only when its
// content changed: a chmod after the store read the file (which changes
// neither content nor mtime) is refused from the next check on, with the
// command that fixes it, and a chmod back makes the key work again.
func TestKeyFileModeIsCheckedOnEveryLook(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	path := filepath.Join(t.TempDir(), gateway.KeyFileName)
	s := gateway.OpenKeyStore(path)
	token, _, err := s.Create(gateway.KeySpec{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(token); err != nil {
		t.Fatalf("fresh key = %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Check(token); err == nil || !strings.Contains(err.Error(), "run 'chmod 600 "+path+"'") {
			t.Errorf("mode %04o after the file was read: Check = %v, want a refusal naming chmod 600", mode, err)
		}
		if _, err := s.List(); err == nil {
			t.Errorf("mode %04o: List read the file", mode)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(token); err != nil {
		t.Errorf("after chmod 600: %v", err)
	}
}

// A symbolic link as the key file is followed, as ssh follows one to a key:
// the target's mode is what is checked, and writes (create, revoke)
// replace the target and keep the link.
func TestKeyFileSymlinkIsJudgedByItsTarget(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	target := filepath.Join(t.TempDir(), "keys.json")
	link := filepath.Join(t.TempDir(), gateway.KeyFileName)
	if err := os.WriteFile(target, []byte(`{"version":1,"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s := gateway.OpenKeyStore(link)
	token, k, err := s.Create(gateway.KeySpec{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Create replaced the link: %v, %v", st, err)
	}
	if data, _ := os.ReadFile(target); !strings.Contains(string(data), k.ID) {
		t.Errorf("the target does not hold the new key:\n%s", data)
	}
	if _, err := s.Check(token); err != nil {
		t.Errorf("key through the link = %v", err)
	}
	if err := os.Chmod(target, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(token); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("link to a 0644 file = %v, want a refusal naming chmod 600", err)
	}
}
