package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// ErrTooOpen is wrapped by the errors of [CheckPrivate] and [ReadPrivate]
// for a file that its group or others may read or change.
var ErrTooOpen = errors.New("permissions too open")

// CheckPrivate refuses a file holding secrets that its group or others may
// read or change (any of mode 0o077), as ssh refuses such a key file, and
// says the command that fixes it. st is the file's own information: for a
// symbolic link, its target's (what os.Stat returns), since that is what
// is read.
func CheckPrivate(path string, st fs.FileInfo) error {
	if runtime.GOOS == "windows" || st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return fmt.Errorf("%s has mode %04o, %w (group or others can read or change it): run 'chmod 600 %s'", path, st.Mode().Perm(), ErrTooOpen, path)
}

// ReadPrivate reads a file holding secrets after [CheckPrivate] of the
// opened file (so that a file swapped between the check and the read is
// still checked). A symbolic link is followed: its target is checked and
// read. A missing file is an error satisfying errors.Is(err,
// fs.ErrNotExist).
func ReadPrivate(path string) ([]byte, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	if err := CheckPrivate(path, st); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return data, st, nil
}

// Target is the file a write to path should replace: path itself, or,
// when path is a symbolic link, the file it points to (resolved however
// many links deep), so that replacing it keeps the link.
func Target(path string) string {
	if st, err := os.Lstat(path); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return path
	}
	if t, err := filepath.EvalSymlinks(path); err == nil {
		return t
	}
	return path
}
