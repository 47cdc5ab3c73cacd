//go:build windows

package flock

import (
	"os"

	"golang.org/x/sys/windows"
)

// Lock takes an exclusive lock on f, waiting while another open file (of
// this or another process) holds one.
func Lock(f *os.File) error { return lock(f, windows.LOCKFILE_EXCLUSIVE_LOCK) }

// TryLock takes an exclusive lock on f without waiting; it fails when
// another open file (of this or another process) holds one.
func TryLock(f *os.File) error {
	return lock(f, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
}

func lock(f *os.File, flags uint32) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, &ol)
}
