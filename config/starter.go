package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed starter.yaml
var starter []byte

// Starter returns the commented starter configuration written by
// 'cortexbuild init'.
func Starter() []byte { return append([]byte(nil), starter...) }

// ErrExists is returned by [WriteStarter] when the file already exists.
var ErrExists = errors.New("configuration already exists")

// WriteStarter writes the starter configuration and its JSON Schema into
// root/.cortexbuild/. It never overwrites an existing file unless force is
// set; it returns the path written.
func WriteStarter(root string, force bool) (string, error) {
	dir := filepath.Join(root, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName)
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return path, fmt.Errorf("%w: %s (use --force to overwrite it)", ErrExists, path)
	}
	if err != nil {
		return "", err
	}
	if _, err := f.Write(starter); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	schema, err := Schema()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "llm-config.schema.json"), schema, 0o644); err != nil {
		return "", err
	}
	return path, writeGitignore(dir)
}

// stateIgnore is .cortexbuild/.gitignore: the configuration, its schema and
// render's manifest are the project's; the rest is this machine's state,
// and some of it is secret.
const stateIgnore = `# Written by cortexbuild init. Local state of this machine, never committed
# (secrets.json and gateway-keys.json hold credentials).
state.db
state.db-*
journal/
consent.json
breakers.json
project-state.json
secrets.json
gateway-keys.json
project-id
*.lock
`

// writeGitignore writes .cortexbuild/.gitignore unless one exists (a
// project's own is left as it is).
func writeGitignore(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(stateIgnore); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
