//go:build !unix

package ledger

import (
	"errors"
	"os"
)

const journalSupported = false

func lockFile(*os.File) error { return errors.New("file locks are not supported on this system") }
