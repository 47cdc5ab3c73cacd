package config_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
)

const secretsCfg = `providers:
  claude:
    type: anthropic
    credentials:
      api_key: ${MY_ANTHROPIC_KEY}
  gpt:
    type: openai_compatible
    profile: openai
`

func TestSecretsFileIsACredentialSource(t *testing.T) {
	dir := t.TempDir()
	reg := builtin.Registry()
	f, err := config.Parse(filepath.Join(dir, "llm-config.yaml"), []byte(secretsCfg), reg)
	if err != nil {
		t.Fatal(err)
	}
	sf := config.OpenSecretsFile(filepath.Join(dir, ".cortexbuild", config.SecretsFileName))
	f.Secrets = sf
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	// Nothing anywhere: the required key is reported missing.
	if _, err := f.Resolve("gpt", reg, lookup); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("resolve without a key = %v", err)
	}
	if err := sf.Set("gpt", "api_key", "sk-from-file-123"); err != nil {
		t.Fatal(err)
	}
	if err := sf.Set("claude", "api_key", "sk-ant-from-file-456"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(sf.Path())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, %v", st.Mode(), err)
	}
	for name, want := range map[string]string{"gpt": "sk-from-file-123", "claude": "sk-ant-from-file-456"} {
		s, err := f.Resolve(name, reg, lookup)
		if err != nil || s.Credentials["api_key"] != want {
			t.Errorf("%s from the secrets file = %v", name, err)
		}
	}
	states, _ := f.CredentialStates("claude", reg, lookup)
	if len(states) == 0 || !states[0].Set || states[0].Source != config.SourceSecretsFile || states[0].EnvVar != "MY_ANTHROPIC_KEY" {
		t.Errorf("claude state = %+v", states)
	}
	// The environment comes first.
	env["OPENAI_API_KEY"], env["MY_ANTHROPIC_KEY"] = "sk-env-1", "sk-env-2"
	if s, _ := f.Resolve("gpt", reg, lookup); s.Credentials["api_key"] != "sk-env-1" {
		t.Error("the secrets file shadows OPENAI_API_KEY")
	}
	if s, _ := f.Resolve("claude", reg, lookup); s.Credentials["api_key"] != "sk-env-2" {
		t.Error("the secrets file shadows the file's ${VAR}")
	}
	states, _ = f.CredentialStates("gpt", reg, lookup)
	if states[0].Source != config.SourceEnv || states[0].EnvVar != "OPENAI_API_KEY" {
		t.Errorf("gpt state = %+v", states[0])
	}
	delete(env, "OPENAI_API_KEY")
	// A file others can read is refused, and the error shows no value.
	if err := os.Chmod(sf.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = f.Resolve("gpt", reg, lookup)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+sf.Path()) || strings.Contains(err.Error(), "sk-from-file") {
		t.Errorf("group-readable file = %v", err)
	}
	if _, _, err := sf.Credential("gpt", "api_key"); err == nil {
		t.Error("Credential read a group-readable file")
	}
	if err := os.Chmod(sf.Path(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sf.Set("gpt", "api_key", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := sf.Credential("gpt", "api_key"); ok {
		t.Error("an emptied field is still saved")
	}
	// A malformed file is reported without its content.
	if err := os.WriteFile(sf.Path(), []byte(`{"version":1,"providers":{"gpt":{"api_key":"sk-half`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sf.Credential("gpt", "api_key"); err == nil || strings.Contains(err.Error(), "sk-half") {
		t.Errorf("malformed file = %v", err)
	}
}

// The secrets file's mode is checked on every read: a long-running serve
// or console that read it once refuses it after a chmod, and a symbolic
// link is judged by its target and kept on writes.
func TestSecretsFileModeIsCheckedOnEveryRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	target := filepath.Join(t.TempDir(), "secrets.json")
	if err := os.WriteFile(target, []byte(`{"version":1,"providers":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), config.SecretsFileName)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	sf := config.OpenSecretsFile(link)
	if err := sf.Set("gpt", "api_key", "sk-from-file"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Set replaced the link: %v, %v", st, err)
	}
	if v, ok, err := sf.Credential("gpt", "api_key"); err != nil || !ok || v != "sk-from-file" {
		t.Fatalf("Credential = %q %v %v", v, ok, err)
	}
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, use := range []func() error{
		func() error { _, _, err := sf.Credential("gpt", "api_key"); return err },
		func() error { _, err := sf.Fields("gpt"); return err },
		func() error { return sf.Set("gpt", "api_key", "sk-other") },
	} {
		if err := use(); err == nil || !strings.Contains(err.Error(), "run 'chmod 600 "+link+"'") || strings.Contains(err.Error(), "sk-from-file") {
			t.Errorf("a 0640 secrets file after a first read = %v, want a refusal naming chmod 600", err)
		}
	}
}
