// Package atomicfile replaces small state files (keys, secrets, consent,
// pause, breakers) so that a reader sees the old content or the new, never
// a part, and a crash leaves no partial file behind; [Locked] makes their
// read-modify-writes by several processes lose nothing.
package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
)

// Write replaces path with data, mode 0600: a temporary file in the same
// directory, written, synced and renamed over path, then the directory
// synced (best effort). Missing parent directories are made with dirPerm.
func Write(path string, data []byte, dirPerm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself survives a crash; not every system syncs directories
		d.Close()
	}
	return nil
}
