package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FillDisk writes a file in dir until its filesystem is full (ENOSPC)
// and returns the file's path: removing it gives the space back. Meant
// for a small tmpfs in the test's own mount namespace.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{64 << 10, 4 << 10, 512, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return path
}
