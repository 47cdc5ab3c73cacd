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
	return path, os.WriteFile(filepath.Join(dir, "llm-config.schema.json"), schema, 0o644)
}
