package cli

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/sim"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
)

// The CLI child runs one cortexbuild command in a process of its own (this
// test binary again, told so by its environment), as a shell would.
const (
	envCLIChildDir  = "CORTEXBUILD_CLI_CHILD_DIR"  // the working directory
	envCLIChildArgs = "CORTEXBUILD_CLI_CHILD_ARGS" // the arguments, as a JSON array
)

// TestCLIChild is the child's body; it does nothing in a normal test run.
// The child's environment is the command's. It starts the command once its
// standard input closes: at once for a child whose input is left unset
// (the null device), when the parent says so through a pipe otherwise.
func TestCLIChild(t *testing.T) {
	dir := os.Getenv(envCLIChildDir)
	if dir == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(envCLIChildArgs)), &args); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, os.Stdin) // the start signal
	e := &env{stdin: strings.NewReader(""), stdout: os.Stdout, stderr: os.Stderr, wd: dir, registry: builtin.Registry(),
		getenv: os.Getenv, lookupEnv: os.LookupEnv}
	if code := e.run(context.Background(), args); code != 0 {
		os.Exit(code)
	}
}

// cliChild returns the command that runs cortexbuild args in dir in a
// child process.
func cliChild(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envCLIChildDir+"="+dir, envCLIChildArgs+"="+string(a), sim.KeyEnv+"="+sim.Key)
	return cmd
}

// Every committed row stays in the ledger while another program's ordinary
// SQLite client (the sqlite3 tool) opens, reads and closes the database
// over and over: a gateway ('cortexbuild serve', a process) and CLI
// invocations ('cortexbuild invoke', processes of their own) write through
// the default store (SQLite, fast path) against the sim. Afterwards every
// call answered (gateway 200s, invocations that exited 0) has its attempt
// and its settlement in the file, and the client never found state.db-wal
// deleted while the gateway ran.
func TestLedgerKeepsEveryRowWhileAnotherClientReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := sim.Start(ctx, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := writeConfig(t, string(s.Config())+`
budgets:
  task: "50"
  project_monthly: "500"
  confirm_above: "100"
`)
	db := filepath.Join(dir, config.Dir, "state.db")

	// The gateway.
	gw := cliChild(t, dir, "serve", "--no-auth", "--listen", "127.0.0.1:0")
	var gwErr bytes.Buffer
	gw.Stderr = &gwErr
	out, err := gw.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	defer gw.Process.Kill()
	base := ""
	re := regexp.MustCompile(`listening on (http://\S+)`)
	lines := bufio.NewScanner(out)
	for base == "" && lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		gw.Wait()
		t.Fatalf("the gateway did not start:\n%s", gwErr.String())
	}
	go io.Copy(io.Discard, out)

	call := func(task string) error {
		body := fmt.Sprintf(`{"model":"builder","max_tokens":64,"messages":[{"role":"user","content":"row %s"}]}`, task)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CortexBuild-Task", task)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return nil
	}
	// A first call, so that the WAL exists before the client comes.
	if err := call("warm-up"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db + "-wal"); err != nil {
		t.Fatalf("no WAL once the gateway answered: %v", err)
	}
	client := ledgertest.StartPlainClient(t, db, "SELECT count(*) FROM attempts;")

	const (
		gatewayClients = 4
		gatewayCalls   = 15 // per client
		invocations    = 6
	)
	var mu sync.Mutex
	answered, invoked := 1, 0
	var failures []string
	var wg sync.WaitGroup
	for c := range gatewayClients {
		wg.Go(func() {
			for i := range gatewayCalls {
				err := call(fmt.Sprintf("gw-%d-%d", c, i))
				mu.Lock()
				if err != nil {
					failures = append(failures, "gateway: "+err.Error())
				} else {
					answered++
				}
				mu.Unlock()
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for i := range invocations / 2 {
				cmd := cliChild(t, dir, "invoke", "--agent", "builder", "--task", fmt.Sprintf("cli-%d", i), "write a row")
				b, err := cmd.CombinedOutput()
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("invoke: %v: %s", err, b))
				} else {
					invoked++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	client.Sync()
	if _, err := os.Stat(db + "-wal"); err != nil {
		t.Errorf("the WAL is gone while the gateway runs: %v", err)
	}
	rep := client.Stop()
	if len(failures) > 0 {
		t.Errorf("%d calls failed; the first: %s", len(failures), failures[0])
	}
	if rep.Rounds < 2 || rep.WALMissing != 0 {
		t.Errorf("the sqlite3 client did %d rounds and found %s-wal deleted after %d of them; want it never deleted while the gateway runs (errors: %d, first %q)",
			rep.Rounds, db, rep.WALMissing, rep.Errors, rep.FirstError)
	}

	if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := gw.Wait(); err != nil {
		t.Errorf("the gateway exited with %v:\n%s", err, gwErr.String())
	}
	// Every answered call is in the file, once.
	rdb, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	count := func(q string) int {
		var n int
		if err := rdb.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	want := answered + invoked
	if got := count(`SELECT count(DISTINCT invocation_id) FROM attempts WHERE outcome = 'ok'`); got != want {
		t.Errorf("attempts in the ledger: %d; want %d (%d answered by the gateway, %d invocations)", got, want, answered, invoked)
	}
	if got := count(`SELECT count(*) FROM settlements`); got != want {
		t.Errorf("settlements in the ledger: %d; want %d", got, want)
	}
	if got := count(`SELECT count(*) FROM attempts WHERE task LIKE 'cli-%'`); got != invoked {
		t.Errorf("attempts of the invocations: %d; want %d", got, invoked)
	}
}
