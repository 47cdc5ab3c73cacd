package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"

	"github.com/jackc/pgx/v5"
)

// The gateway crash test runs 'cortexbuild serve' in a child process (this
// test binary again, told so by its environment), drives concurrent
// requests through it over HTTP, SIGKILLs it once it has answered a chosen
// number of them, and checks the project's store after a restart.
const (
	envGatewayCrashChild = "CORTEXBUILD_GATEWAY_CRASH_CHILD" // the project directory
	envGatewayCrashSeed  = "CORTEXBUILD_GATEWAY_CRASH_SEED"  // reproduces a run's kill points
	envGatewayCrashDSN   = "CORTEXBUILD_GATEWAY_CRASH_DSN"   // the PostgreSQL store's URL, as ${CRASH_DSN}
)

const (
	gatewayCrashTask    = "crash"
	gatewayCrashWorkers = 8
)

// TestGatewayCrashChild is the child's body: 'cortexbuild serve' with
// authentication off on loopback. It does nothing in a normal test run.
func TestGatewayCrashChild(t *testing.T) {
	dir := os.Getenv(envGatewayCrashChild)
	if dir == "" {
		return
	}
	vars := map[string]string{"MY_KEY": testKey, "CRASH_DSN": os.Getenv(envGatewayCrashDSN)}
	e := &env{stdin: strings.NewReader(""), stdout: os.Stdout, stderr: os.Stderr, wd: dir, registry: builtin.Registry(),
		getenv:    func(k string) string { return vars[k] },
		lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	code := e.run(context.Background(), []string{"serve", "--no-auth", "--listen", "127.0.0.1:0"})
	t.Fatalf("serve exited with %d before the kill", code) // the parent kills it
}

// gatewayCrashStore is the store of one crash round: the store: section
// of the project (empty: the default, SQLite), the child's environment,
// and how the check opens the store the next process would and lists the
// invocations that still hold budget in it.
type gatewayCrashStore struct {
	config string
	env    []string
	open   func(ctx context.Context, dir string) (ledger.Store, error)
	held   func(ctx context.Context, dir string) ([]string, error)
}

// projectOf opens a store as the commands of the project rooted at dir do,
// once one has kept its id (an unreadable id fails the open).
func projectOf(dir string) ledger.Option {
	b, _ := os.ReadFile(filepath.Join(dir, config.Dir, config.ProjectIDFile))
	return ledger.WithProject(strings.TrimSpace(string(b)))
}

// sqliteGatewayStore is the default store: SQLite in the project.
func sqliteGatewayStore(*testing.T) gatewayCrashStore {
	path := func(dir string) string { return filepath.Join(dir, config.Dir, "state.db") }
	return gatewayCrashStore{
		open: func(ctx context.Context, dir string) (ledger.Store, error) {
			return ledger.OpenSQLite(ctx, path(dir), projectOf(dir))
		},
		held: func(ctx context.Context, dir string) ([]string, error) {
			db, err := sql.Open("sqlite", "file:"+path(dir)+"?mode=ro")
			if err != nil {
				return nil, err
			}
			defer db.Close()
			rows, err := db.QueryContext(ctx, `SELECT DISTINCT invocation_id FROM holds`)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var ids []string
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			return ids, rows.Err()
		},
	}
}

// postgresGatewayStore returns, for each round, a store in a database of
// its own on the PostgreSQL server at admin (the gateway keeps its tables
// in the default schema, so a database is what isolates a round), dropped
// when the round ends.
func postgresGatewayStore(admin string) func(*testing.T) gatewayCrashStore {
	return func(t *testing.T) gatewayCrashStore {
		dsn := freshPostgresDB(t, admin, "gwcrash_")
		return gatewayCrashStore{
			// serve needs project: on a shared store.
			config: "project: gwcrash\nstore:\n  backend: postgres\n  dsn: ${CRASH_DSN}\n",
			env:    []string{envGatewayCrashDSN + "=" + dsn},
			open: func(ctx context.Context, dir string) (ledger.Store, error) {
				return ledger.OpenPostgres(ctx, dsn, ledger.WithProject("gwcrash"))
			},
			held: func(ctx context.Context, _ string) ([]string, error) {
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					return nil, err
				}
				defer conn.Close(ctx)
				// The fast path on PostgreSQL keeps its holds on a short
				// expiry the live gateway renews: the replay does not
				// release the dead gateway's, they lapse by themselves
				// within the TTL. What holds budget past it is listed.
				rows, err := conn.Query(ctx, "SELECT DISTINCT invocation_id FROM "+ledger.DefaultSchema+".holds WHERE expires_at > $1",
					time.Now().Add(ledger.DefaultHoldTTL).UnixNano())
				if err != nil {
					return nil, err
				}
				return pgx.CollectRows(rows, pgx.RowTo[string])
			},
		}
	}
}

// freshPostgresDB creates a database named prefix and random hex digits on
// the PostgreSQL server at admin, dropped when the test ends, and returns
// its URL.
func freshPostgresDB(t *testing.T, admin, prefix string) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	adminExec := func(sql string) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := adminExec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := adminExec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// gatewayCrashProject writes a project whose only provider is the fake,
// on st's store with the fast path, with the response cache off so that
// every request is a provider call.
func gatewayCrashProject(t *testing.T, st gatewayCrashStore, fakeURL string, taskLimit, monthLimit provider.Money) string {
	return writeConfig(t, st.config+fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
cache:
  backend: off
budgets:
  task: "%s"
  project_monthly: "%s"
  confirm_above: "100"
`, fakeURL, taskLimit, monthLimit))
}

// gatewayCrashOnce starts the child on dir, sends requests from
// gatewayCrashWorkers clients until killAfter of them got a 200 (or every
// client was refused by the budget), SIGKILLs the child and returns the
// invocation ids of the 200s and how many requests the budget refused.
func gatewayCrashOnce(t *testing.T, st gatewayCrashStore, dir string, killAfter int) (ok map[string]bool, refused int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGatewayCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(append(os.Environ(), envGatewayCrashChild+"="+dir), st.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var killOnce sync.Once
	var killed atomic.Bool
	kill := func() {
		killOnce.Do(func() {
			killed.Store(true)
			if err := cmd.Process.Kill(); err != nil { // SIGKILL: nothing deferred runs
				t.Error(err)
			}
		})
	}
	defer func() {
		kill()
		cmd.Wait()
	}()
	listening := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
		close(listening)
	}()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	var base string
	select {
	case u, open := <-listening:
		if !open {
			kill()
			cmd.Wait()
			t.Fatalf("the child ended before listening:\n%s", stderr.String())
		}
		base = u
	case <-timeout.C:
		t.Fatalf("the child did not listen within a minute:\n%s", stderr.String())
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: gatewayCrashWorkers}}
	defer client.CloseIdleConnections()
	type answer struct {
		id      string
		refused bool
	}
	answers := make(chan answer, 2*gatewayCrashWorkers)
	var wg sync.WaitGroup
	for w := range gatewayCrashWorkers {
		wg.Go(func() {
			for n := 0; ; n++ {
				body := fmt.Sprintf(`{"model":"explore","max_tokens":64,"messages":[{"role":"user","content":"Say hello to %d-%d."}]}`, w, n)
				req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(gateway.HeaderTask, gatewayCrashTask)
				resp, err := client.Do(req)
				if err != nil {
					if !killed.Load() {
						t.Errorf("request %d-%d: %v", w, n, err)
					}
					return
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					if !killed.Load() {
						t.Errorf("request %d-%d: reading the response: %v", w, n, err)
					}
					return
				case resp.StatusCode == http.StatusTooManyRequests && strings.Contains(string(data), "budget"):
					answers <- answer{refused: true}
					return
				case resp.StatusCode != http.StatusOK:
					if !killed.Load() {
						t.Errorf("request %d-%d: %d %s", w, n, resp.StatusCode, data)
					}
					return
				}
				var cc struct {
					Choices []struct{} `json:"choices"`
				}
				id := resp.Header.Get(gateway.HeaderInvocation)
				if json.Unmarshal(data, &cc) != nil || len(cc.Choices) == 0 || !strings.HasPrefix(id, "inv_") {
					t.Errorf("request %d-%d: a 200 without a completion or an invocation id (%q): %s", w, n, id, data)
					return
				}
				// The gateway answers once the orchestrator settled the
				// call: it is in the ledger or in the journal.
				answers <- answer{id: id}
			}
		})
	}
	workersDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(workersDone)
	}()
	ok = map[string]bool{}
	record := func(a answer) {
		if a.refused {
			refused++
			return
		}
		if ok[a.id] {
			t.Errorf("invocation %s answered twice", a.id)
		}
		ok[a.id] = true
	}
collect:
	for len(ok) < killAfter {
		select {
		case a := <-answers:
			record(a)
		case <-workersDone:
			break collect // every client stopped: the budget is spent
		case <-timeout.C:
			kill()
			t.Fatalf("the gateway answered %d requests in a minute; want %d:\n%s", len(ok), killAfter, stderr.String())
		}
	}
	kill()
	<-workersDone
	// Answers completed before the clients saw the connections drop count
	// too.
	for len(answers) > 0 {
		record(<-answers)
	}
	cmd.Wait()
	return ok, refused
}

// checkGatewayAfterCrash opens the project's store as the next process
// would (replaying the dead gateway's journal) and checks it against the
// answers the clients got.
func checkGatewayAfterCrash(t *testing.T, store gatewayCrashStore, dir string, ok map[string]bool, taskLimit, monthLimit provider.Money) {
	t.Helper()
	ctx := t.Context()
	journals := filepath.Join(dir, config.Dir, "journal")
	st, err := store.open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	applied, err := ledger.Replay(ctx, st, journals)
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(journals, "*.journal")); len(left) > 0 {
		t.Errorf("journals left after replay: %v", left)
	}
	rows, err := st.Attempts(ctx, ledger.Filter{Task: gatewayCrashTask})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][]ledger.AttemptRow{}
	var rowsCost provider.Money
	for _, r := range rows {
		byID[r.InvocationID] = append(byID[r.InvocationID], r)
		rowsCost += r.Cost
	}
	for id, rs := range byID {
		if len(rs) != 1 {
			t.Errorf("invocation %s has %d ledger rows; want 1", id, len(rs))
		}
	}
	missing := 0
	for id := range ok {
		rs := byID[id]
		if len(rs) == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("invocation %s was answered with a 200 before the crash but is not in the ledger", id)
			}
			continue
		}
		if rs[0].Outcome != "ok" || rs[0].Cost <= 0 {
			t.Errorf("invocation %s: row %+v for a 200", id, rs[0])
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d answered invocations lost", missing, len(ok))
	}
	t.Logf("%d answered with a 200, %d in the ledger, %d journal settlements replayed (idempotently)", len(ok), len(byID), applied)

	// What is still held after the replay is the exact reservation of a
	// call in flight at the kill, never a budget lease of the dead process
	// (the replay releases those) nor a call that was answered or settled.
	held, err := store.held(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	inFlight := 0
	for _, id := range held {
		switch {
		case strings.HasPrefix(id, "lease_"):
			t.Errorf("budget lease %s of the dead gateway still held after replay", id)
		case ok[id] || len(byID[id]) > 0:
			t.Errorf("invocation %s is settled but still holds budget", id)
		default:
			inFlight++
		}
	}
	if inFlight > gatewayCrashWorkers {
		t.Errorf("%d invocations hold budget after replay; at most %d were in flight", inFlight, gatewayCrashWorkers)
	}
	// Holds of calls in flight at the kill lapse at their expiry.
	if _, err := st.ExpireReservations(ctx, time.Now().Add(365*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	budgets, err := st.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Spend(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, b := range budgets {
		var want, limit provider.Money
		switch {
		case b.Scope == ledger.TaskScope(gatewayCrashTask):
			want, limit = rowsCost, taskLimit
		case strings.HasPrefix(string(b.Scope), "month:"):
			want, limit = all.Total.Cost, monthLimit
		default:
			continue
		}
		seen++
		if b.Limit != limit {
			t.Errorf("%s limit $%s; want $%s", b.Scope, b.Limit, limit)
		}
		if b.Held != 0 {
			t.Errorf("%s: $%s still held after replay and expiry", b.Scope, b.Held)
		}
		if b.Spent != want {
			t.Errorf("%s: spent $%s; the ledger rows add up to $%s", b.Scope, b.Spent, want)
		}
		if b.Spent > b.Limit {
			t.Errorf("%s: spent $%s over the limit $%s", b.Scope, b.Spent, b.Limit)
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the 2 budgets (task, month): %+v", seen, budgets)
	}
}

// TestGatewayCrashConsistency SIGKILLs 'cortexbuild serve' (SQLite store,
// fast path) under concurrent load and checks, after the restart's replay,
// that every request answered with a 200 is in the ledger once, nothing
// stays held, and the budgets add up and were not overspent. One round in
// three has a task budget of a few estimates (a few dozen calls at their
// actual cost), so that calls near the limit are reserved exactly and
// some runs end on the budget before the kill.
func TestGatewayCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped with -short: it starts gateway processes and kills them")
	}
	runGatewayCrashTest(t, sqliteGatewayStore)
}

// TestGatewayCrashConsistencyPostgres is the same with the project's
// store on PostgreSQL (CORTEXBUILD_TEST_POSTGRES), a database per round.
func TestGatewayCrashConsistencyPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped with -short: it starts gateway processes and kills them")
	}
	runGatewayCrashTest(t, postgresGatewayStore(testenv.Postgres(t)))
}

func runGatewayCrashTest(t *testing.T, newStore func(*testing.T) gatewayCrashStore) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envGatewayCrashSeed); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("%s=%d reproduces these kill points", envGatewayCrashSeed, seed)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey)) // echoes every prompt
	t.Cleanup(srv.Close)
	for round := range 3 {
		killAfter := 1 + rng.IntN(80)
		taskLimit, monthLimit := mustMoney(t, "5"), mustMoney(t, "50")
		if round == 1 {
			taskLimit = mustMoney(t, "0.003")
		}
		t.Run(fmt.Sprintf("round-%d-kill-after-%d-task-%s", round, killAfter, taskLimit), func(t *testing.T) {
			st := newStore(t)
			dir := gatewayCrashProject(t, st, srv.URL(), taskLimit, monthLimit)
			ok, refused := gatewayCrashOnce(t, st, dir, killAfter)
			if len(ok) == 0 {
				t.Fatal("the gateway answered nothing")
			}
			t.Logf("%d requests refused by the budget", refused)
			checkGatewayAfterCrash(t, st, dir, ok, taskLimit, monthLimit)
		})
	}
}

func mustMoney(t *testing.T, s string) provider.Money {
	t.Helper()
	m, err := provider.ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
