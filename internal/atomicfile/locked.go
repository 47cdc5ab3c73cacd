package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexbuild/cortexbuild/internal/flock"
)

// LockSuffix ends the name of the lock file beside a state file.
const LockSuffix = ".lock"

// Locked runs fn holding an exclusive lock on the lock file beside path
// (path + [LockSuffix], mode 0600, made with its missing parent
// directories, dirPerm), which every process that changes path takes: a
// read-modify-write of path inside fn (read the file afresh, never a copy
// read before the lock, then [Write] it) loses no change made by another
// process, nor by another goroutine of this one. The lock is released
// when fn returns, or when the process ends however it ends; readers need
// no lock, since [Write] replaces the file whole.
func Locked(path string, dirPerm os.FileMode, fn func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return err
	}
	f, err := os.OpenFile(path+LockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() // releases the lock
	if err := flock.Lock(f); err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return fn()
}
