package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
)

// Changed reports every change a running gateway must act on (a save
// through the same SecretsFile, a file written, replaced, made readable
// by others or removed by another process) and nothing else.
func TestSecretsFileChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.json")
	sf := config.OpenSecretsFile(path)
	if sf.Changed() {
		t.Error("the first look reports a change")
	}
	if sf.Changed() {
		t.Error("a file that does not exist changed")
	}
	step := func(what string, do func() error) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatal(err)
		}
		if !sf.Changed() {
			t.Errorf("%s: not reported", what)
		}
		if sf.Changed() {
			t.Errorf("%s: reported twice", what)
		}
	}
	step("saved through the same file", func() error { return sf.Set("alpha", "api_key", "sk-one") })
	step("saved by another process", func() error { return config.OpenSecretsFile(path).Set("alpha", "api_key", "sk-two") })
	step("made readable by others", func() error { return os.Chmod(path, 0o644) })
	step("replaced", func() error {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte("{not json"), 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	})
	step("removed", func() error { return os.Remove(path) })

	// However long the recheck period, a save through the same
	// SecretsFile (the console's) is reported at once.
	slow := config.OpenSecretsFile(path)
	slow.SetRecheck(time.Hour)
	slow.Changed()
	if slow.Changed() { // starts the period
		t.Error("reported a change with none made")
	}
	if err := slow.Set("alpha", "api_key", "sk-three"); err != nil {
		t.Fatal(err)
	}
	if !slow.Changed() {
		t.Error("a save through the file is not reported within the recheck period")
	}
}
