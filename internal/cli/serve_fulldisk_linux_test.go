package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
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
	if !inFullDiskChild(t, "TestServeOnAFullDisk") {
		return
	}
	dir, state, srv := tmpfsProject(t)
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
	filler := testenv.FillDisk(t, state)

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
	st, err := ledger.OpenSQLite(ctx, filepath.Join(state, "state.db"), projectOf(dir))
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

// inFullDiskChild reports whether this is the child that runs the test
// name in a mount namespace of its own; in the parent it runs that child,
// checks that it passed, and reports false. It skips, saying why, when the
// test does not run as root or the child cannot mount a tmpfs.
func inFullDiskChild(t *testing.T, name string) bool {
	t.Helper()
	if os.Getenv(envServeFullDisk) == name {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test mounts a small tmpfs in a private mount namespace to fill the disk for real")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envServeFullDisk+"="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(`(cannot mount a tmpfs: .*)`).FindSubmatch(out); m != nil && strings.Contains(string(out), "--- SKIP") {
		t.Skip(string(m[1]))
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	return false
}

// tmpfsProject is a ledgerProject whose store (state/state.db) and journal
// are on a 2 MiB tmpfs, in this process's own mount namespace.
func tmpfsProject(t *testing.T) (dir, state string, srv *anthropicfake.Server) {
	t.Helper()
	dir, srv = ledgerProject(t, "store:\n  path: state/state.db\n")
	state = filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(state, 0) })
	return dir, state, srv
}

// Stopping the gateway while the disk is still full: it tries, then exits
// non-zero saying what it could not write; once space is back, the next
// process to open the store has every answered call.
func TestServeStopsLoudlyOnAFullDisk(t *testing.T) {
	if !inFullDiskChild(t, "TestServeStopsLoudlyOnAFullDisk") {
		return
	}
	dir, state, srv := tmpfsProject(t)
	base, stop := startServe(t, dir, keyEnv, "--no-auth")
	answered := 0
	for n := range 20 {
		if code, body := chat(t, base, n); code != 200 {
			t.Fatalf("before the disk is full: %d %s", code, body)
		}
		answered++
	}
	filler := testenv.FillDisk(t, state)
	refusal := ""
	for n := 20; n < 2020 && refusal == ""; n++ {
		code, body := chat(t, base, n)
		switch {
		case code == 200:
			answered++
		case code != 503 || !strings.Contains(body, "the disk is full"):
			t.Fatalf("refusal = %d %s", code, body)
		default:
			refusal = body
		}
	}
	if refusal == "" {
		t.Fatal("2000 calls answered on a full disk")
	}
	pending := regexp.MustCompile(`\d+ settlements (of calls already paid are kept in memory|wait in the journal)`).MatchString(refusal)
	exit, errs := stop()
	if os.Remove(filler) != nil {
		t.Fatal("cannot remove the filler")
	}
	ctx := context.Background()
	st, err := ledger.OpenSQLite(ctx, filepath.Join(state, "state.db"), projectOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if exit == 0 && pending {
		t.Fatalf("serve exited 0 with settlements unwritten (%s):\n%s", refusal, errs)
	}
	if exit == 0 {
		// The refusal said nothing was pending (a lease the store could
		// not reserve): nothing to report.
		t.Logf("serve stopped cleanly: nothing was pending")
	} else {
		if exit != ExitFailure || !strings.Contains(errs, "cortexbuild: closing the store:") || !strings.Contains(errs, "not closed cleanly") {
			t.Fatalf("serve exited %d:\n%s", exit, errs)
		}
		// Settlements lost with the process are printed as journal lines:
		// saved as the message says, the next process applies them.
		var lines []string
		for _, l := range strings.Split(errs, "\n") {
			if strings.HasPrefix(l, `{"v":`) {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			os.WriteFile(filepath.Join(state, "journal", "recovered.journal"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		}
		t.Logf("serve exited %d; %d settlements printed as lines; its report:\n%s", exit, len(lines), errs[strings.Index(errs, "cortexbuild: closing the store:"):])
	}
	if _, err := ledger.Replay(ctx, st, filepath.Join(state, "journal")); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != answered || len(srv.Requests()) != answered {
		t.Errorf("%d ledger rows and %d provider requests for %d answered calls", len(rows), len(srv.Requests()), answered)
	}
	bs, err := st.Budgets(ctx)
	if err != nil || len(bs) != 1 || bs[0].Held != 0 || bs[0].Spent == 0 {
		t.Errorf("budgets after the next process's replay = %+v, %v; want the month's spend and nothing held", bs, err)
	}
}
