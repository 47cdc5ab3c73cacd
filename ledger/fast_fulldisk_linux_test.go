package ledger_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
)

// envFullDiskChild names the directory the full-disk child mounts its
// tmpfs on.
const envFullDiskChild = "CORTEXBUILD_FULL_DISK_CHILD"

// RunInSmallTmpfs runs the test named name again in a child process with
// a private mount namespace, in which dir is a tmpfs of size bytes; the
// child finds dir in $CORTEXBUILD_FULL_DISK_CHILD. It skips, with the
// reason, when the test does not run as root or the child cannot mount.
func runInSmallTmpfs(t *testing.T, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test mounts a small tmpfs in a private mount namespace to fill the disk for real")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envFullDiskChild+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(`(?m)^\s+\S+: (cannot mount a tmpfs: .*)$`).FindSubmatch(out); m != nil && strings.Contains(string(out), "--- SKIP") {
		t.Skip(string(m[1]))
	}
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("the child did not run the scenario:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

// mountSmallTmpfs mounts a tmpfs of the given size on dir, in the child's
// own mount namespace (nothing outside sees it; it goes with the child).
func mountSmallTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
}

// The full-disk scenario on a real filesystem: the store and its journal
// on an 8 MiB tmpfs that fills up while calls run (on 2 MiB, SQLite's WAL,
// checkpointed by itself only at 4 MB, and the journal's backlog could
// take all of the room freed afterwards, and Close then timed out). No call is admitted once
// a refusal has been seen while the disk is full; every call admitted is
// on the record once space is freed; admission resumes by itself.
func TestFastOnAFullDisk(t *testing.T) {
	dir := os.Getenv(envFullDiskChild)
	if dir == "" {
		runInSmallTmpfs(t, "TestFastOnAFullDisk")
		return
	}
	mountSmallTmpfs(t, dir, "8m")
	site := fastSite{db: filepath.Join(dir, "state.db"), journals: filepath.Join(dir, "journal")}
	ctx := context.Background()
	f := site.fast(t, site.raw(t))
	if err := f.SetBudget(ctx, fastTask, mustM("100")); err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, f)
	for range 50 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	// Eight callers make calls while the disk fills; each goes on until
	// the ledger refuses it. Every call admitted is paid and must be kept.
	filled := make(chan string)
	go func() { filled <- testenv.FillDisk(t, dir) }()
	var wg sync.WaitGroup
	refusals := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				if err := c.call(); err != nil {
					refusals <- err
					return
				}
			}
		}()
	}
	filler := <-filled
	wg.Wait()
	close(refusals)
	var we *ledger.WriteError
	for err := range refusals {
		if !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("refusal = %v; want a *WriteError wrapping ErrUnavailable", err)
		}
	}
	if we == nil {
		t.Fatal("2000 calls per caller admitted on a full disk")
	}
	if !we.DiskFull || !strings.Contains(we.Error(), "the disk is full") || !strings.Contains(we.Error(), "free space") {
		t.Errorf("refusal = %+v\n%v", we, we)
	}
	t.Logf("refused after %d calls on the full disk: %v", c.sent-50, we)
	sent := c.sent
	for range 200 {
		if err := c.call(); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a call with the disk still full = %v", err)
		}
	}
	if c.sent != sent {
		t.Fatalf("%d calls admitted after the refusal, with the disk still full", c.sent-sent)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	until(t, "calls are admitted again", func() bool { return c.call() == nil })
	for range 50 {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls admitted and answered, %d refused", len(c.answered), c.n-len(c.answered))
	checkRecorded(t, site, c.answered)
}
