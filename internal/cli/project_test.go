package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// serveBanner runs 'cortexbuild serve' in-process in wd with args and
// returns its base URL, its banner and a stop function.
func serveBanner(t *testing.T, wd string, vars map[string]string, args ...string) (string, string, func() (int, string)) {
	t.Helper()
	return serveIn(t, nil, wd, vars, args...)
}

// spendOf returns the total cost and attempts 'spend --json' reports.
func spendOf(t *testing.T, wd string, args ...string) (string, int) {
	t.Helper()
	code, out, errs := run(t, wd, nil, append([]string{"spend", "--json"}, args...)...)
	var rep struct {
		Total struct {
			Cost     string `json:"cost_usd"`
			Attempts int    `json:"attempts"`
		} `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("spend %v = %d %s %s", args, code, out, errs)
	}
	return rep.Total.Cost, rep.Total.Attempts
}

// keptProjectID returns the id the project rooted at dir keeps in its state
// directory (its configuration sets no project:).
func keptProjectID(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, config.Dir, config.ProjectIDFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A configuration kept outside .cortexbuild/ (as 'cortexbuild sim
// --write-config sim.yaml' writes one) has its own directory as the
// project root: two such files in sibling directories are two projects,
// with their own ledgers and ids, never one project in their parent.
func TestConfigOutsideItsStateDirectoryIsItsOwnProject(t *testing.T) {
	srcDir, srv := fakeProject(t, true)
	body, err := os.ReadFile(filepath.Join(srcDir, config.Dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	var dirs []string
	for _, name := range []string{"a", "b"} {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "sim.yaml"), body, 0o600); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	if code, _, errs := run(t, dirs[0], keyEnv, "--config", "sim.yaml", "invoke", "--agent", "builder", "hi"); code != 0 {
		t.Fatalf("invoke = %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], config.Dir, "state.db")); err != nil {
		t.Errorf("the ledger is not beside the file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent, config.Dir)); err == nil {
		t.Errorf("state was written in the parent directory %s", parent)
	}
	if cost, n := spendOf(t, dirs[0], "--config", "sim.yaml"); n != 1 {
		t.Errorf("spend of a = $%s in %d attempts; want 1", cost, n)
	}
	if cost, n := spendOf(t, dirs[1], "--config", "sim.yaml"); n != 0 {
		t.Errorf("spend of b = $%s in %d attempts; want none: it is another project", cost, n)
	}
	_, ra, _ := runDoctor(t, nil, dirs[0], keyEnv, "--config", "sim.yaml")
	_, rb, _ := runDoctor(t, nil, dirs[1], keyEnv, "--config", "sim.yaml")
	if ra.Project == rb.Project || ra.Dir != canonicalDir(dirs[0]) {
		t.Errorf("projects: a %q in %q, b %q in %q; want two, each in its directory", ra.Project, ra.Dir, rb.Project, rb.Dir)
	}
}

// TestProjectIdentityDoesNotDependOnThePath: however --config is written
// (relative, absolute, through a symbolic link) or whichever directory the
// command runs in, the project is the same: the keys created under one
// spelling work under another, the spend is the same, and the banner and
// the keys name the project by its id.
func TestProjectIdentityDoesNotDependOnThePath(t *testing.T) {
	dir, srv := fakeProject(t, true)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	spellings := []struct {
		name string
		wd   string
		args []string
	}{
		{"relative --config", dir, []string{"--config", ".cortexbuild/llm-config.yaml"}},
		{"--config in its directory", filepath.Join(dir, config.Dir), []string{"--config", "llm-config.yaml"}},
		{"absolute --config", elsewhere, []string{"--config", filepath.Join(dir, config.Dir, config.FileName)}},
		{"--config through a link", elsewhere, []string{"--config", filepath.Join(link, config.Dir, config.FileName)}},
		{"found from a linked directory", link, nil},
		{"found from the directory", dir, nil},
	}
	// A key created and a call made under the first spelling.
	code, out, errs := run(t, dir, nil, append([]string{"serve", "keys", "create", "--name", "k"}, spellings[0].args...)...)
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "cbk_") {
		t.Fatalf("keys create = %d %q %q", code, out, errs)
	}
	want := keptProjectID(t, dir)
	if !strings.HasPrefix(want, strings.ToLower(filepath.Base(dir))) {
		t.Fatalf("project id %q does not start with the directory's name", want)
	}
	srv.Enqueue(anthropicfake.Reply{Text: "done", Usage: anthropicfake.Usage{Input: 1000, Output: 100}})
	if code, _, errs := run(t, dir, keyEnv, append([]string{"invoke", "--task", "t1", "--agent", "builder", "hi"}, spellings[0].args...)...); code != 0 {
		t.Fatalf("invoke = %d %q", code, errs)
	}
	for _, sp := range spellings {
		t.Run(sp.name, func(t *testing.T) {
			if cost, n := spendOf(t, sp.wd, sp.args...); cost != "0.0045" || n != 1 {
				t.Errorf("spend = $%s in %d attempts; want $0.0045 in 1", cost, n)
			}
			if _, rep, _ := runDoctor(t, nil, sp.wd, keyEnv, sp.args...); rep.Project != want || rep.Dir != canonicalDir(dir) {
				t.Errorf("doctor names project %q in %q; want %q in %q", rep.Project, rep.Dir, want, canonicalDir(dir))
			}
			code, out, _ := run(t, sp.wd, nil, append([]string{"serve", "keys", "list", "--json"}, sp.args...)...)
			var keys []struct{ Project string }
			if code != 0 || json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 1 || keys[0].Project != want {
				t.Errorf("keys list = %d %s; want one key of project %s", code, out, want)
			}
		})
	}
	// The gateway, started through the link, serves the key created under
	// the relative spelling and names the project by its id.
	srv.Enqueue(anthropicfake.TextReply("through the link"))
	base, banner, stop := serveBanner(t, elsewhere, keyEnv, spellings[3].args...)
	if !strings.Contains(banner, "CortexBuild gateway for project "+want+" listening") {
		t.Errorf("banner does not name project %s:\n%s", want, banner)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	oc := openai.NewClient(ooption.WithBaseURL(base+"/v1/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0), ooption.WithHTTPClient(&http.Client{}))
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || cc.Choices[0].Message.Content != "through the link" {
		t.Errorf("chat completion with the key created under another spelling = %+v, %v", cc, err)
	}
	if code, errs := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
	if _, n := spendOf(t, dir); n != 2 {
		t.Errorf("the gateway's call is not in the project's ledger: %d attempts", n)
	}
}

// TestKeysOfTheOldProjectNameAreAdopted: a key created when the project was
// named by its directory's base name (or "." for a relative --config) is
// bound to the project's id and keeps working.
func TestKeysOfTheOldProjectNameAreAdopted(t *testing.T) {
	dir, _ := fakeProject(t, true)
	for _, old := range []string{filepath.Base(dir), "."} {
		code, out, _ := run(t, dir, nil, "serve", "keys", "create", "--name", "old")
		if code != 0 {
			t.Fatal(out)
		}
		path := filepath.Join(dir, config.Dir, "gateway-keys.json")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id := keptProjectID(t, dir)
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), `"project": "`+id+`"`, `"project": "`+old+`"`)), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, _ = run(t, dir, nil, "serve", "keys", "list", "--json")
		if code != 0 || strings.Contains(out, `"project": "`+old+`"`) || strings.Count(out, `"project": "`+id+`"`) == 0 {
			t.Errorf("keys of project %q after keys list = %d %s; want them bound to %s", old, code, out, id)
		}
	}
}

// TestProjectsWithTheSameDirectoryNameShareNoCacheEntries: two projects in
// directories of the same name, with the same request, on one Redis cache:
// the second project calls its provider instead of getting the first's
// answer (while a repeat in the same project is a cache hit).
func TestProjectsWithTheSameDirectoryNameShareNoCacheEntries(t *testing.T) {
	redis := testenv.Redis(t)
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	body := fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
cache:
  backend: redis
  url: ${REDIS_URL}
`, srv.URL())
	vars := map[string]string{"MY_KEY": testKey, "REDIS_URL": redis}
	var dirs []string
	for range 2 {
		dir := filepath.Join(t.TempDir(), "service")
		if err := os.MkdirAll(filepath.Join(dir, config.Dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, config.Dir, config.FileName), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	b := make([]byte, 8)
	rand.Read(b)
	prompt := "what is in this repository? " + hex.EncodeToString(b) // unique to this run
	ask := func(dir string) {
		t.Helper()
		srv.Enqueue(anthropicfake.TextReply("answer for " + dir))
		if code, out, errs := run(t, dir, vars, "invoke", "--agent", "explore", prompt); code != 0 {
			t.Fatalf("invoke in %s = %d %q %q", dir, code, out, errs)
		}
	}
	ask(dirs[0])
	ask(dirs[0]) // a hit: the queued reply stays unused
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("the repeat in the same project reached the provider (%d requests): the cache is not on", n)
	}
	ask(dirs[1])
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("the project in another directory named %q got the first project's cached answer (%d provider requests; want 2)", filepath.Base(dirs[1]), n)
	}
}

// The commands that only read a project's records refuse, with the
// configuration's exit code, to run where there is no project, and leave
// nothing behind; once a ledger exists there they read it.
func TestReportsOutsideAProjectCreateNothing(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"spend"}, {"budget", "show"}, {"task", "show", "T1"}, {"spend", "--json"}} {
		code, out, errs := run(t, dir, nil, args...)
		if code != ExitConfig || !strings.Contains(out+errs, "no CortexBuild project in") || !strings.Contains(out+errs, "cortexbuild init") {
			t.Errorf("%v outside a project = %d %q %q", args, code, out, errs)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the reports left %v behind", entries)
	}
	if code, _, errs := run(t, dir, nil, "budget", "set", "month", "10"); code != 0 {
		t.Fatalf("budget set = %d %s", code, errs)
	}
	if code, out, errs := run(t, dir, nil, "budget", "show"); code != 0 || !strings.Contains(out, "10.00") {
		t.Errorf("budget show with a ledger = %d %q %q", code, out, errs)
	}
}

// Shell completion offers the project's names: its agents (the spec's
// and its custom ones) for --agent, its provider instances for consent's
// PROVIDER, models for --model and the catalog's namespaces for pricing's
// --provider.
func TestCompletionOffersTheProjectsNames(t *testing.T) {
	dir := writeConfig(t, `orchestration: true
providers:
  alpha:
    type: anthropic
  beta:
    type: openai_compatible
    profile: ollama
    base_url: http://127.0.0.1:11434/v1
    models:
      balanced: qwen3-coder
agents:
  reviewer2:
    tier: balanced
`)
	for _, c := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"invoke", "--agent", ""}, []string{"planner", "critic", "reviewer2"}, []string{"alpha"}},
		{[]string{"invoke", "--agent", "cr"}, []string{"critic"}, []string{"planner"}},
		{[]string{"consent", "grant", ""}, []string{"alpha", "beta"}, []string{"planner"}},
		{[]string{"invoke", "--model", "qwen"}, []string{"qwen3-coder"}, []string{"claude-sonnet-4-6"}},
		{[]string{"invoke", "--model", "claude-son"}, []string{"claude-sonnet-4-6"}, nil},
		{[]string{"pricing", "show", "--provider", ""}, []string{"anthropic", "gemini"}, []string{"alpha"}},
	} {
		code, out, errs := run(t, dir, nil, append([]string{"__complete"}, c.args...)...)
		lines := strings.Split(out, "\n")
		if code != 0 {
			t.Errorf("%v: exit %d %s", c.args, code, errs)
		}
		for _, w := range c.want {
			if !slices.Contains(lines, w) {
				t.Errorf("%v: %q not offered:\n%s", c.args, w, out)
			}
		}
		for _, n := range c.not {
			if slices.Contains(lines, n) {
				t.Errorf("%v: %q offered:\n%s", c.args, n, out)
			}
		}
	}
}
