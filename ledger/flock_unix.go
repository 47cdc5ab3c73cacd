//go:build unix

package ledger

import (
	"os"
	"syscall"
)

// journalSupported says whether journals (and so [Fast]) work here.
const journalSupported = true

// lockFile takes an exclusive lock on f without waiting; it fails when
// another open file (of this or another process) holds one. The lock goes
// with the process: a killed process's journals are free to replay.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
