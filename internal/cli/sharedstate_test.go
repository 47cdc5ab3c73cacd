package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// fleetProject writes a project named fleet on the PostgreSQL at
// ${PGDSN}, with a fake Anthropic provider, in a directory of its own, as
// each replica of a fleet has.
func fleetProject(t *testing.T, srv *anthropicfake.Server, backend string) string {
	t.Helper()
	store := "store:\n  backend: postgres\n  dsn: ${PGDSN}\n"
	if backend != "postgres" {
		store = ""
	}
	return writeConfig(t, fmt.Sprintf(`project: fleet
orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
budgets:
  confirm_above: "100"
%s`, srv.URL(), store))
}

// openFleetState opens the fleet's shared state as another process would.
func openFleetState(t *testing.T, dsn string) *pgstate.Store {
	t.Helper()
	st, err := pgstate.Open(t.Context(), dsn, pgstate.Options{Project: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func createKey(t *testing.T, dir string, vars map[string]string, name string) (id, token string) {
	t.Helper()
	code, out, errs := run(t, dir, vars, "serve", "keys", "create", "--json", "--name", name)
	var k struct {
		ID    string `json:"id"`
		Token string `json:"key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil {
		t.Fatalf("keys create = %d %s %s", code, out, errs)
	}
	return k.ID, k.Token
}

// modelsStatus is the status of GET /v1/models with token.
func modelsStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Two project directories (two replicas, no shared file) on one
// PostgreSQL: a key created by the CLI of one is accepted at once by the
// gateway of the other; revoked by the CLI of the first, it is refused by
// that gateway within 1 s; a consent granted in one is listed, and
// revoked, in the other; a pause recorded by one process is what the
// other's 'project status' reports, and 'project resume' in the first
// lifts it for the second's gateway.
func TestFleetStateThroughTheCLI(t *testing.T) {
	dsn := freshPostgresDB(t, testenv.Postgres(t), "fleetstate_")
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	vars := map[string]string{"PGDSN": dsn, "MY_KEY": testKey}
	one, two := fleetProject(t, srv, "postgres"), fleetProject(t, srv, "postgres")

	base, stop := startServe(t, two, vars)
	defer stop()

	// Keys.
	id, token := createKey(t, one, vars, "laptop")
	if got := modelsStatus(t, base, token); got != http.StatusOK {
		t.Fatalf("a key created on the other replica: GET /v1/models = %d", got)
	}
	code, out, errs := run(t, two, vars, "serve", "keys", "list", "--json")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("keys list on the other replica = %d %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(one, config.Dir, gateway.KeyFileName)); err == nil {
		t.Fatal("a key file was written on a postgres project")
	}
	if code, out, errs := run(t, one, vars, "serve", "keys", "revoke", id); code != 0 {
		t.Fatalf("revoke = %d %s %s", code, out, errs)
	}
	revoked := time.Now()
	for modelsStatus(t, base, token) != http.StatusUnauthorized {
		if time.Since(revoked) > time.Second {
			t.Fatal("a key revoked on another replica is still accepted after 1 s")
		}
		time.Sleep(10 * time.Millisecond) // awaiting another process's effect
	}
	t.Logf("refused %v after the revocation returned", time.Since(revoked).Round(time.Millisecond))

	// Consent.
	if code, out, errs := run(t, one, vars, "consent", "grant", "claude", "--by", "alice"); code != 0 {
		t.Fatalf("consent grant = %d %s %s", code, out, errs)
	}
	code, out, _ = run(t, two, vars, "consent", "list", "--json")
	var cs []locality.Consent
	if code != 0 || json.Unmarshal([]byte(out), &cs) != nil || len(cs) != 1 || cs[0].Provider != "claude" || cs[0].GrantedBy != "alice" {
		t.Fatalf("consent list on the other replica = %d %s", code, out)
	}
	if code, out, errs := run(t, two, vars, "consent", "revoke", "claude"); code != 0 {
		t.Fatalf("consent revoke = %d %s %s", code, out, errs)
	}
	if _, out, _ := run(t, one, vars, "consent", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("consent list after a revocation on the other replica = %s", out)
	}
	if _, err := os.Stat(filepath.Join(one, config.Dir, consentFile)); err == nil {
		t.Fatal("a consent file was written on a postgres project")
	}

	// Pause: recorded as a refused credential makes any replica record it.
	_, token2 := createKey(t, one, vars, "calls")
	pause := orchestrator.NewSharedState(openFleetState(t, dsn).Set(orchestrator.PauseSet), 0)
	if err := pause.Pause(t.Context(), "claude refused its key"); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, two, vars, "project", "status"); code != 0 || !strings.Contains(out, "paused: claude refused its key") {
		t.Fatalf("project status on a paused fleet = %d %s", code, out)
	}
	chat := func() (int, string) {
		body := `{"model":"builder","messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token2)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	paused := time.Now()
	for {
		st, body := chat()
		if st != http.StatusOK && strings.Contains(body, "paused") {
			break
		}
		if time.Since(paused) > time.Second {
			t.Fatalf("the gateway of a paused fleet answered %d %s after 1 s", st, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(srv.Requests()) != 0 {
		t.Fatalf("a paused fleet sent %d calls to the provider", len(srv.Requests()))
	}
	if code, out, errs := run(t, one, vars, "project", "resume"); code != 0 {
		t.Fatalf("project resume = %d %s %s", code, out, errs)
	}
	resumed := time.Now()
	for {
		srv.Enqueue(anthropicfake.TextReply("back"))
		st, body := chat()
		if st == http.StatusOK {
			break
		}
		if time.Since(resumed) > time.Second {
			t.Fatalf("resumed on another replica, the gateway still answers %d %s after 1 s", st, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, out, _ := run(t, two, vars, "project", "status"); code != 0 || strings.TrimSpace(out) != "active" {
		t.Fatalf("project status after resume = %d %s", code, out)
	}
}

// A project that kept its keys, consents and pause in files and moves to
// PostgreSQL has them moved into the shared state by its first command:
// every record the shared state lacks is added, one it holds is kept (a
// consent granted meanwhile by another replica is not replaced by the
// file's), the files are renamed *.imported and not read again, and a
// second run imports nothing.
func TestFilesMoveIntoTheSharedStateOnce(t *testing.T) {
	dsn := freshPostgresDB(t, testenv.Postgres(t), "fleetmove_")
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	vars := map[string]string{"PGDSN": dsn, "MY_KEY": testKey}
	dir := fleetProject(t, srv, "sqlite")
	state := filepath.Join(dir, config.Dir)

	// On one machine: files.
	id, token := createKey(t, dir, vars, "old")
	revokedID, _ := createKey(t, dir, vars, "gone")
	if code, out, errs := run(t, dir, vars, "serve", "keys", "revoke", revokedID); code != 0 {
		t.Fatalf("revoke = %d %s %s", code, out, errs)
	}
	if code, out, errs := run(t, dir, vars, "consent", "grant", "claude", "--by", "alice"); code != 0 {
		t.Fatalf("consent grant = %d %s %s", code, out, errs)
	}
	if err := (&orchestrator.FileState{Path: filepath.Join(state, projectStateFile)}).Pause(t.Context(), "from the file"); err != nil {
		t.Fatal(err)
	}
	// Meanwhile another replica granted consent in the shared state.
	other := fleetProject(t, srv, "postgres")
	if code, out, errs := run(t, other, vars, "consent", "grant", "claude", "--by", "bob"); code != 0 {
		t.Fatalf("consent grant = %d %s %s", code, out, errs)
	}

	// The project moves to PostgreSQL.
	pg := fleetProject(t, srv, "postgres")
	if err := os.Rename(filepath.Join(pg, config.Dir, config.FileName), filepath.Join(state, config.FileName)); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, dir, vars, "serve", "keys", "list", "--json")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, revokedID) {
		t.Fatalf("keys list after the move = %d %s %s", code, out, errs)
	}
	for _, name := range []string{gateway.KeyFileName, consentFile, projectStateFile} {
		if !strings.Contains(errs, "moved the") || !strings.Contains(errs, name+importedSuffix) {
			t.Errorf("the move of %s is not reported: %s", name, errs)
		}
		if _, err := os.Stat(filepath.Join(state, name)); err == nil {
			t.Errorf("%s is still there", name)
		}
		if _, err := os.Stat(filepath.Join(state, name+importedSuffix)); err != nil {
			t.Errorf("%s was not kept: %v", name+importedSuffix, err)
		}
	}
	if !strings.Contains(errs, "0 added, 1 already there") {
		t.Errorf("the consent the shared state held is not reported as kept: %s", errs)
	}
	code, out, errs = run(t, dir, vars, "serve", "keys", "list")
	if code != 0 || strings.Contains(errs, "moved") {
		t.Fatalf("second run = %d %s %s", code, out, errs)
	}

	// What the shared state holds.
	st := openFleetState(t, dsn)
	ks := gateway.OpenSharedKeyStore(st.Set(gateway.KeySet))
	if k, err := ks.Check(token); err != nil || k.ID != id || k.Project != "fleet" {
		t.Fatalf("the moved key = %+v, %v", k, err)
	}
	c, ok, err := locality.NewSharedStore(st.Set(locality.ConsentSet), 0).Consent(t.Context(), "claude")
	if err != nil || !ok || c.GrantedBy != "bob" {
		t.Fatalf("the shared consent = %+v %v %v; want bob's, kept", c, ok, err)
	}
	if reason, paused, err := orchestrator.NewSharedState(st.Set(orchestrator.PauseSet), 0).Paused(context.Background()); err != nil || !paused || reason != "from the file" {
		t.Fatalf("the moved pause = %q %v %v", reason, paused, err)
	}
}

// Task pauses and operator budget overrides are kept in the ledger,
// which on store.backend postgres is shared already: a budget set in one
// project directory is what another reports, a task paused by one
// process is paused for the other, and 'task resume' in one lifts it for
// the other.
func TestFleetTaskPausesAndBudgetOverridesThroughTheCLI(t *testing.T) {
	dsn := freshPostgresDB(t, testenv.Postgres(t), "fleetbudget_")
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	vars := map[string]string{"PGDSN": dsn, "MY_KEY": testKey}
	one, two := fleetProject(t, srv, "postgres"), fleetProject(t, srv, "postgres")
	show := func(dir string) map[string]ledger.Budget {
		t.Helper()
		code, out, errs := run(t, dir, vars, "budget", "show", "--json")
		var bs []ledger.Budget
		if code != 0 || json.Unmarshal([]byte(out), &bs) != nil {
			t.Fatalf("budget show = %d %s %s", code, out, errs)
		}
		m := map[string]ledger.Budget{}
		for _, b := range bs {
			m[string(b.Scope)] = b
		}
		return m
	}
	if code, out, errs := run(t, one, vars, "budget", "set", "task:T-1", "5"); code != 0 {
		t.Fatalf("budget set = %d %s %s", code, out, errs)
	}
	if b, ok := show(two)["task:T-1"]; !ok || b.Limit.String() != "5.00" {
		t.Fatalf("the override on the other replica = %+v, %v", b, ok)
	}
	l, err := ledger.OpenPostgres(t.Context(), dsn, ledger.WithProject("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Pause(t.Context(), ledger.Scope("task:T-1"), "paused by an operator"); err != nil {
		t.Fatal(err)
	}
	if b := show(two)["task:T-1"]; !b.Paused {
		t.Fatalf("a task paused by another process = %+v", b)
	}
	if code, out, errs := run(t, one, vars, "task", "resume", "T-1"); code != 0 {
		t.Fatalf("task resume = %d %s %s", code, out, errs)
	}
	if b := show(two)["task:T-1"]; b.Paused {
		t.Fatalf("a task resumed on the other replica = %+v", b)
	}
}

// A file that cannot be read stops the move, and the command, with its
// name; it is left where it is.
func TestCorruptFileStopsTheMove(t *testing.T) {
	dsn := freshPostgresDB(t, testenv.Postgres(t), "fleetcorrupt_")
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	vars := map[string]string{"PGDSN": dsn, "MY_KEY": testKey}
	dir := fleetProject(t, srv, "postgres")
	path := filepath.Join(dir, config.Dir, consentFile)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, dir, vars, "consent", "list")
	if code == 0 || !strings.Contains(errs, path) || !strings.Contains(errs, "fix or remove the file") {
		t.Fatalf("consent list with a corrupt consent.json = %d %s %s", code, out, errs)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the corrupt file was moved: %v", err)
	}
}
