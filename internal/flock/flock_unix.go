//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// Lock takes an exclusive lock on f, waiting while another open file (of
// this or another process) holds one.
func Lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// TryLock takes an exclusive lock on f without waiting; it fails when
// another open file (of this or another process) holds one.
func TryLock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
