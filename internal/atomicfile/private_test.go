package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Any of mode 0o077 (group or others may read or change the file) is
// refused with the command that fixes it; a symbolic link is judged by
// its target, which is what is read.
func TestReadPrivateRefusesOpenModesAndChecksALinksTarget(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.json")
	if err := Write(path, []byte("s3cret"), 0o700); err != nil {
		t.Fatal(err)
	}
	if data, _, err := ReadPrivate(path); err != nil || string(data) != "s3cret" {
		t.Fatalf("ReadPrivate of a 0600 file = %q, %v", data, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o602, 0o610, 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadPrivate(path)
		if !errors.Is(err, ErrTooOpen) || !strings.Contains(err.Error(), "run 'chmod 600 "+path+"'") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("mode %04o: %v, want ErrTooOpen with the chmod command", mode, err)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if data, _, err := ReadPrivate(link); err != nil || string(data) != "s3cret" {
		t.Errorf("ReadPrivate through a link to a 0600 file = %q, %v", data, err)
	}
	if Target(link) != path || Target(path) != path {
		t.Errorf("Target(link) = %s, Target(path) = %s; want %s for both", Target(link), Target(path), path)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadPrivate(link); !errors.Is(err, ErrTooOpen) {
		t.Errorf("ReadPrivate through a link to a 0644 file = %v, want ErrTooOpen", err)
	}
}
