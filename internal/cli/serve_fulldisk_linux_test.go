package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// envServeFullDisk tells the test binary it is the child of
// TestServeOnAFullDisk, in a mount namespace of its own.
const envServeFullDisk = "CORTEXBUILD_SERVE_FULL_DISK_CHILD"

// The gateway with its ledger on a 2 MiB tmpfs (in a private mount
// namespace: the test runs itself again in a child) that fills up while
// calls run: once a call is refused, no call reaches the provider while the
// disk is full; the refusals are 503s, in both protocols, naming the cause
// and the fix; every call answered is on the record once space is freed;
// and calls are answered again without a restart.
func TestServeOnAFullDisk(t *testing.T) {
	if os.Getenv(envServeFullDisk) == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root: the test mounts a small tmpfs in a private mount namespace to fill the disk for real")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestServeOnAFullDisk$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envServeFullDisk+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		if m := regexp.MustCompile(`(cannot mount a tmpfs: .*)`).FindSubmatch(out); m != nil && strings.Contains(string(out), "--- SKIP") {
			t.Skip(string(m[1]))
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestServeOnAFullDisk") {
			t.Fatalf("the child failed: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	dir, srv := ledgerProject(t, "store:\n  path: state/state.db\n")
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(state, 0) })
	base, stop := startServe(t, dir, keyEnv, "--no-auth")
	answered, n := 0, 0
	call := func() (int, string) {
		n++
		code, body := chat(t, base, n)
		if code == 200 {
			answered++
		}
		return code, body
	}
	for range 20 {
		if code, body := call(); code != 200 {
			t.Fatalf("before the disk is full: %d %s", code, body)
		}
	}
	filler := fillDisk(t, state)

	var code int
	var body string
	for range 2000 {
		if code, body = call(); code != 200 {
			break
		}
	}
	if code != 503 || !strings.Contains(body, "the disk is full") || !strings.Contains(body, "free space on the filesystem holding "+state) ||
		!strings.Contains(body, "ledger_unavailable") || !strings.Contains(body, "admitted again by themselves") {
		t.Fatalf("the first refusal = %d %s; want a 503 naming the full disk and the fix", code, body)
	}
	t.Logf("refused after %d calls on the full disk: %s", answered-20, body)
	sent := len(srv.Requests())
	if sent != answered {
		t.Errorf("%d provider requests for %d answered calls", sent, answered)
	}
	for range 50 {
		if code, body := call(); code != 503 {
			t.Fatalf("a call with the disk still full = %d %s", code, body)
		}
	}
	code, body = postJSON(t, base, "/v1/messages", `{"model":"builder","max_tokens":64,"messages":[{"role":"user","content":"in Messages"}]}`)
	if code != 503 || !strings.Contains(body, `"type":"api_error"`) || !strings.Contains(body, "the disk is full") {
		t.Errorf("Messages with the disk full = %d %s", code, body)
	}
	if got := len(srv.Requests()); got != sent {
		t.Fatalf("%d calls reached the provider after the first refusal, with the disk full", got-sent)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for code, body := call(); code != 200; code, body = call() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("calls still refused with space again: %d %s", code, body)
		}
	}
	for range 10 {
		if code, body := call(); code != 200 {
			t.Fatalf("after recovery: %d %s", code, body)
		}
	}
	exit, errs := stop()
	if exit != 0 || strings.Contains(errs, "ledger write failed") {
		t.Errorf("serve exited %d:\n%s", exit, errs)
	}
	if !strings.Contains(errs, "new calls are refused") {
		t.Errorf("the log does not say that calls were refused:\n%s", errs)
	}
	ctx := context.Background()
	st, err := ledger.OpenSQLite(ctx, filepath.Join(state, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != answered || len(srv.Requests()) != answered {
		t.Errorf("%d ledger rows and %d provider requests for %d answered calls", len(rows), len(srv.Requests()), answered)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "journal", "*")); len(left) != 0 {
		t.Errorf("journals left after a clean stop: %v", left)
	}
	t.Logf("%d calls answered and recorded, %d refused", answered, n-answered)
}

// fillDisk writes a file in dir until its filesystem is full and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
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
