package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// envLockedChild names the counter file a child process increments.
const envLockedChild = "CORTEXBUILD_ATOMICFILE_LOCKED_CHILD"

const lockedRounds = 40

// increment adds one to the number in path under its lock, as a
// read-modify-write of a state file does.
func increment(path string) error {
	return Locked(path, 0o700, func() error {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return Write(path, []byte(strconv.Itoa(n+1)+"\n"), 0o700)
	})
}

// TestLockedChild is a child's body: lockedRounds increments. It does
// nothing in a normal test run.
func TestLockedChild(t *testing.T) {
	path := os.Getenv(envLockedChild)
	if path == "" {
		return
	}
	for range lockedRounds {
		if err := increment(path); err != nil {
			t.Fatal(err)
		}
	}
}

// Four processes and four goroutines of this one increment one counter
// file at once, each read-modify-write inside Locked: no increment is
// lost, and the lock file is left beside the counter with mode 0600.
func TestLockedLosesNoReadModifyWriteAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "counter")
	const children, goroutines = 4, 4
	var cmds []*exec.Cmd
	for range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockedChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envLockedChild+"="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range lockedRounds {
				if err := increment(path); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa((children+goroutines)*lockedRounds); got != want {
		t.Errorf("counter = %s after %s increments: some were lost", got, want)
	}
	if st, err := os.Stat(path + LockSuffix); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0) {
		t.Errorf("lock file: %v, %v; want one with mode 0600", st, err)
	}
}
