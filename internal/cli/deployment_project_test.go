package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// deploymentConfig is a project on the PostgreSQL ledger at ${PGDSN}
// whose provider is the fake at fakeURL; project, when set, is its
// project: line.
func deploymentConfig(fakeURL, project string) string {
	return fmt.Sprintf(`%sorchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
store:
  backend: postgres
  dsn: ${PGDSN}
cache:
  backend: off
budgets:
  confirm_above: "100"
`, project, fakeURL)
}

// Two deployments of the release image: each has its own state volume
// mounted at the same path, /data (here <tmp>/data: a volume is moved
// aside when its deployment stops and the other's put in its place), one
// configuration without project:, and one PostgreSQL database between
// them. Each gets an id of its own, kept in its volume, and sees only its
// own spend; the first, started again, keeps its id and its spend.
func TestDeploymentsAtTheSamePathAreTwoProjects(t *testing.T) {
	dsn := freshPostgresDB(t, testenv.Postgres(t), "deploy_")
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	vars := map[string]string{"MY_KEY": testKey, "PGDSN": dsn}
	root := t.TempDir()
	data := filepath.Join(root, "data")
	deploy := func(volume string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(data, config.Dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, config.Dir, config.FileName), []byte(deploymentConfig(srv.URL(), "")), 0o600); err != nil {
			t.Fatal(err)
		}
		srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
		if code, out, errs := run(t, data, vars, "invoke", "--agent", "builder", "hi"); code != 0 {
			t.Fatalf("invoke in %s = %d %q %q", volume, code, out, errs)
		}
		id := keptProjectID(t, data)
		if cost, n := spendOfWith(t, data, vars); n != 1 || cost != "0.0045" {
			t.Errorf("%s (project %s): spend $%s in %d attempts; want $0.0045 in 1", volume, id, cost, n)
		}
		if err := os.Rename(data, filepath.Join(root, volume)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	a, b := deploy("volume-a"), deploy("volume-b")
	if a == b || !regexp.MustCompile(`^data-[0-9a-f]{8}$`).MatchString(a) || !regexp.MustCompile(`^data-[0-9a-f]{8}$`).MatchString(b) {
		t.Fatalf("project ids %q and %q; want two different data-<8 hex digits>", a, b)
	}

	// The first deployment again: the same id, its own spend only, and
	// a second call adds to it.
	if err := os.Rename(filepath.Join(root, "volume-a"), data); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(anthropicfake.Reply{Text: "again", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	if code, out, errs := run(t, data, vars, "invoke", "--agent", "builder", "again"); code != 0 {
		t.Fatalf("invoke again = %d %q %q", code, out, errs)
	}
	if id := keptProjectID(t, data); id != a {
		t.Errorf("the first deployment's id is %q after a restart, was %q", id, a)
	}
	if cost, n := spendOfWith(t, data, vars); n != 2 || cost != "0.009" {
		t.Errorf("first deployment: spend $%s in %d attempts; want $0.009 in 2", cost, n)
	}
}

// spendOfWith is spendOf with an environment.
func spendOfWith(t *testing.T, wd string, vars map[string]string) (string, int) {
	t.Helper()
	code, out, errs := run(t, wd, vars, "spend", "--json")
	var rep struct {
		Total struct {
			Cost     string `json:"cost_usd"`
			Attempts int    `json:"attempts"`
		} `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("spend = %d %s %s", code, out, errs)
	}
	return rep.Total.Cost, rep.Total.Attempts
}

// serve refuses to start on a shared store or cache without project:,
// naming the key, where it is written and the file to set project: in;
// with project: it is not refused for that reason.
func TestServeNeedsAProjectOnASharedStoreOrCache(t *testing.T) {
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name, config, key string
		line              int
	}{
		{"postgres", deploymentConfig(srv.URL(), ""), "store.backend: postgres", 9},
		{"redis", strings.Replace(deploymentConfig(srv.URL(), ""), "store:\n  backend: postgres\n  dsn: ${PGDSN}\ncache:\n  backend: off\n",
			"cache:\n  backend: redis\n  url: redis://127.0.0.1:1/0\n", 1), "cache.backend: redis", 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeConfig(t, c.config)
			vars := map[string]string{"MY_KEY": testKey, "PGDSN": "postgres://nobody@127.0.0.1:1/db?sslmode=disable&connect_timeout=1"}
			code, _, errs := run(t, dir, vars, "serve", "--no-auth", "--listen", "127.0.0.1:0")
			file := filepath.Join(canonicalDir(dir), config.Dir, config.FileName)
			want := fmt.Sprintf("%s:%d:12: %s is shared with other projects, so serve needs the project's id: set project: in %s", file, c.line, c.key, file)
			if code != ExitConfig || !strings.Contains(errs, want) {
				t.Errorf("serve = %d\n%s\nwant %q", code, errs, want)
			}
			if len(srv.Requests()) != 0 {
				t.Error("the provider was called")
			}
		})
	}
}

// A project that has recorded state under the id derived from its path
// (by a version before ids were kept) keeps that id: its spend so far
// stays its own.
func TestAnExistingProjectKeepsItsDerivedID(t *testing.T) {
	dir, srv := fakeProject(t, true)
	derived := config.DeriveProjectID(canonicalDir(dir))
	path := filepath.Join(dir, config.Dir, config.FileName)
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// What an older version did: the ledger under the derived id.
	if err := os.WriteFile(path, append([]byte("project: "+derived+"\n"), body...), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	if code, _, errs := run(t, dir, keyEnv, "invoke", "--agent", "builder", "hi"); code != 0 {
		t.Fatalf("invoke = %d %q", code, errs)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if cost, n := spendOf(t, dir); n != 1 || cost != "0.0045" {
		t.Errorf("spend = $%s in %d attempts; want the older version's $0.0045 in 1", cost, n)
	}
	if id := keptProjectID(t, dir); id != derived {
		t.Errorf("kept id %q, want the derived %q", id, derived)
	}
}
