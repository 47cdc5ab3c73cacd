package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A file holding secrets inline warns when group or others may read it,
// naming the file and the fix; a private file, or one that only refers to
// the environment, does not.
func TestPermissionWarningForInlineSecrets(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits are not meaningful on Windows")
	}
	const (
		literal = "providers:\n  a:\n    type: anthropic\n    credentials:\n      api_key: sk-literal-value\n"
		envOnly = "providers:\n  a:\n    type: anthropic\n    credentials:\n      api_key: ${MY_KEY}\nnotifications:\n  webhook_url: ${HOOK}\n"
		webhook = "notifications:\n  webhook_url: https://hooks.example/T000/secret-token\n"
		dsnPass = "store:\n  backend: postgres\n  dsn: postgres://app:s3cret@127.0.0.1:5432/db\n"
		dsnBare = "store:\n  backend: postgres\n  dsn: postgres://app@127.0.0.1:5432/db\n"
		header  = "observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    headers:\n      Authorization: Bearer abc\n"
	)
	tests := []struct {
		name  string
		body  string
		mode  os.FileMode
		field string // "": no permission warning
	}{
		{"literal credential 0644", literal, 0o644, "providers.a.credentials.api_key"},
		{"literal credential 0640", literal, 0o640, "providers.a.credentials.api_key"},
		{"literal credential 0604", literal, 0o604, "providers.a.credentials.api_key"},
		{"literal credential 0600", literal, 0o600, ""},
		{"literal credential 0400", literal, 0o400, ""},
		{"env references 0644", envOnly, 0o644, ""},
		{"literal webhook 0644", webhook, 0o644, "notifications.webhook_url"},
		{"dsn with password 0644", dsnPass, 0o644, "store.dsn"},
		{"dsn without password 0644", dsnBare, 0o644, ""},
		{"literal trace header 0644", header, 0o644, "observability.traces.headers.Authorization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil { // not subject to the umask
				t.Fatal(err)
			}
			f, err := Load(path, testRegistry(t))
			if err != nil {
				t.Fatal(err)
			}
			var perm []string
			for _, w := range f.Warnings() {
				if strings.Contains(w, "sk-literal-value") || strings.Contains(w, "secret-token") || strings.Contains(w, "s3cret") || strings.Contains(w, "Bearer abc") {
					t.Errorf("a warning carries the secret: %q", w)
				}
				if strings.Contains(w, "lets group or others read it") {
					perm = append(perm, w)
				}
			}
			if tt.field == "" {
				if len(perm) != 0 {
					t.Errorf("unexpected permission warning: %q", perm)
				}
				return
			}
			if len(perm) != 1 {
				t.Fatalf("permission warnings = %q, want one (all warnings: %q)", perm, f.Warnings())
			}
			w := perm[0]
			for _, want := range []string{path, tt.field, "chmod 600 " + path, "${ENV_VAR}"} {
				if !strings.Contains(w, want) {
					t.Errorf("warning %q does not mention %q", w, want)
				}
			}
		})
	}

	// Parse has no file to look at: no permission warning.
	f, err := Parse("cfg.yaml", []byte(literal), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range f.Warnings() {
		if strings.Contains(w, "lets group or others read it") {
			t.Errorf("Parse warned about permissions: %q", w)
		}
	}
}
