//go:build !unix && !windows

package flock

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("file locks are not supported on this system")

// Lock fails: this system has no file locks.
func Lock(*os.File) error { return errUnsupported }

// TryLock fails: this system has no file locks.
func TryLock(*os.File) error { return errUnsupported }
