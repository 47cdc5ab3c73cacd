package hostcli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/cli"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// hostDir is where scripts/install-host-clis.sh installed the pinned CLIs:
// CORTEXBUILD_HOSTCLIS, else the script's default, .cache/hostclis in the
// repository, when it is there.
var hostDir = func() string {
	if d := os.Getenv("CORTEXBUILD_HOSTCLIS"); d != "" {
		return d
	}
	if d, err := filepath.Abs("../../.cache/hostclis"); err == nil {
		if _, err := os.Stat(filepath.Join(d, "node_modules")); err == nil {
			return d
		}
	}
	return ""
}()

// required makes a missing prerequisite a failure instead of a skip
// (.ci/run sets it).
var required = os.Getenv("CORTEXBUILD_REQUIRE_HOSTCLIS") != ""

var isolated bool // running in a loopback-only network namespace

func TestMain(m *testing.M) {
	if code, done := isolate(); done {
		os.Exit(code)
	}
	isolated = os.Getenv(inNetns) != ""
	os.Exit(m.Run())
}

// need skips (or, in CI, fails) a test whose prerequisites are missing,
// saying which.
func need(t *testing.T) {
	t.Helper()
	why := ""
	switch {
	case hostDir == "":
		why = "the pinned host CLIs are not installed: run scripts/install-host-clis.sh (into .cache/hostclis), or set CORTEXBUILD_HOSTCLIS to where it installed them"
	case !isolated:
		why = "needs root, to run the host CLIs in a network namespace that has only loopback"
	}
	if why == "" {
		return
	}
	if required {
		t.Fatal(why)
	}
	t.Skip(why)
}

// binary is the path of a host CLI's native binary.
func binary(t *testing.T, name string) string {
	t.Helper()
	plat, triple := "linux-x64", "x86_64-unknown-linux-musl"
	if runtime.GOARCH == "arm64" {
		plat, triple = "linux-arm64", "aarch64-unknown-linux-musl"
	}
	p := map[string]string{
		"claude":  "node_modules/@anthropic-ai/claude-code-" + plat + "/claude",
		"codex":   "node_modules/@openai/codex-" + plat + "/vendor/" + triple + "/bin/codex",
		"copilot": "node_modules/@github/copilot-" + plat + "/copilot",
	}[name]
	path := filepath.Join(hostDir, p)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not installed in %s (run scripts/install-host-clis.sh %s): %v", name, hostDir, hostDir, err)
	}
	return path
}

// world is a rendered project served by `cortexbuild serve`, in front of
// two scripted providers: "claude" (Anthropic's API) serves the planner
// and the main sessions, "gpt" (OpenAI's) the critic, so that the critic
// runs on a model independent of the planner's.
type world struct {
	dir, home string
	base, key string
	claude    *anthropicfake.Server
	gpt       *openaifake.Server
	stop      func()
	mayFail   bool   // a host's non-zero exit is not a failure
	agent     string // the main session's agent in the recipes: planner
}

const (
	anthropicKey = "sk-ant-hostcli-upstream"
	openAIKey    = "sk-hostcli-upstream"
	taskID       = "T-HOST"
)

func newWorld(t *testing.T) *world { return newWorldWith(t, nil) }

// newWorldWith runs before, when set, after render and before serve.
func newWorldWith(t *testing.T, before func(*world)) *world {
	t.Helper()
	w := &world{dir: t.TempDir(), home: t.TempDir(), agent: "planner"}
	w.claude = anthropicfake.New(anthropicfake.WithAPIKey(anthropicKey), anthropicfake.WithDefaultReply(anthropicReply))
	w.gpt = openaifake.New(openaifake.WithAPIKey(openAIKey), openaifake.WithDefaultReply(openaiReply))
	t.Cleanup(func() { w.claude.Close(); w.gpt.Close() })
	config := fmt.Sprintf(`orchestration: true
project: hostcli
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${HOSTCLI_ANTHROPIC_KEY}
  gpt:
    type: openai_compatible
    profile: openai
    base_url: %s/v1
    credentials:
      api_key: ${HOSTCLI_OPENAI_KEY}
routing:
  preference: [claude, gpt]
agents:
  critic:
    providers: [gpt]
`, w.claude.URL(), w.gpt.URL())
	if err := os.MkdirAll(filepath.Join(w.dir, ".cortexbuild"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, ".cortexbuild", "llm-config.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOSTCLI_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("HOSTCLI_OPENAI_KEY", openAIKey)
	t.Chdir(w.dir)
	w.cortexbuild(t, "render", "--target", "claude,codex,copilot")
	w.key = strings.TrimSpace(w.cortexbuild(t, "serve", "keys", "create", "--name", "hosts"))
	if before != nil {
		before(w)
	}
	w.serve(t)
	return w
}

// cortexbuild runs the command in the project and returns its output.
func (w *world) cortexbuild(t *testing.T, args ...string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if code := cli.Main(context.Background(), args, strings.NewReader(""), &out, &errs); code != 0 {
		t.Fatalf("cortexbuild %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errs.String())
	}
	return out.String()
}

// serve starts `cortexbuild serve` on a free loopback port.
func (w *world) serve(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errs bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--listen", "127.0.0.1:0"}, strings.NewReader(""), pw, &errs)
		pw.Close()
	}()
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening on (http://\S+)`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case w.base = <-found:
	case code := <-done:
		cancel()
		t.Fatalf("serve exited with %d:\n%s", code, errs.String())
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("serve did not start in 60 s")
	}
	var stopped bool
	w.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited with %d:\n%s", code, errs.String())
		}
	}
	t.Cleanup(w.stop)
}

// host runs a host CLI in the project with env and returns its output.
func (w *world) host(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = w.dir
	cmd.Env = append([]string{"HOME=" + w.home, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "NO_COLOR=1", "LANG=C.UTF-8"}, env...)
	cmd.Stdin = strings.NewReader("")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && !w.mayFail {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String(), w.upstream())
	}
	return out.String()
}

// upstream lists what the scripted providers were asked, for a failure.
func (w *world) upstream() string {
	var b strings.Builder
	for _, r := range w.claude.Requests() {
		c := anthropicConvo(r.Body)
		fmt.Fprintf(&b, "claude: %s tools=%d first=%.80q last=%v\n", r.Path, len(c.tools), c.firstUser, c.last)
	}
	for _, r := range w.gpt.Requests() {
		c := openaiConvo(r)
		fmt.Fprintf(&b, "gpt: %s tools=%d first=%.80q last=%v\n", r.Path, len(c.tools), c.firstUser, c.last)
	}
	return b.String()
}

// rows stops the gateway and returns the ledger's attempt rows.
func (w *world) rows(t *testing.T) []ledger.AttemptRow {
	t.Helper()
	w.stop()
	st, err := ledger.OpenSQLite(context.Background(), filepath.Join(w.dir, ".cortexbuild", "state.db"), ledger.WithProject("hostcli"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.Attempts(context.Background(), ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("ledger: agent=%s task=%s provider=%s model=%s outcome=%s tokens=%d/%d cost=$%s", r.Agent, r.Task, r.Provider, r.Model, r.Outcome, r.InputTokens, r.OutputTokens, r.Cost)
	}
	return rows
}

// checkCriticSpawn checks the rows of a session whose main session (the
// planner) spawned the rendered critic: both agents served, the critic on
// another provider's model than every planner row.
func checkCriticSpawn(t *testing.T, rows []ledger.AttemptRow) {
	t.Helper()
	planner := map[string]bool{}
	var critic []ledger.AttemptRow
	for _, r := range rows {
		switch r.Agent {
		case "planner":
			planner[r.Model] = true
		case "critic":
			critic = append(critic, r)
		}
	}
	if len(planner) == 0 || len(critic) == 0 {
		t.Fatalf("want planner and critic rows, got %d planner models and %d critic rows", len(planner), len(critic))
	}
	for _, r := range critic {
		if r.Provider != "gpt" || planner[r.Model] || r.Outcome != "ok" || r.Task != taskID {
			t.Errorf("critic row %+v: want an ok row on gpt, of task %s, on a model no planner row used (%v)", r, taskID, planner)
		}
	}
}

// Each host's recipe (docs/gateway.md): the environment and files that
// point it at the gateway, the main session as w.agent on task.

// run runs a host's one-shot mode on a prompt, with more flags.
type run func(prompt string, flags ...string) string

func (w *world) claudeCode(t *testing.T, task string) run { return w.claudeCodeAt(t, task, w.base) }

// claudeCodeAt is Claude Code's recipe with the gateway at base (a tap in
// front of it, say).
func (w *world) claudeCodeAt(t *testing.T, task, base string) run {
	bin := binary(t, "claude")
	env := []string{
		"ANTHROPIC_BASE_URL=" + base,
		"ANTHROPIC_AUTH_TOKEN=" + w.key,
		"ANTHROPIC_CUSTOM_HEADERS=X-CortexBuild-Agent: " + w.agent + "\nX-CortexBuild-Task: " + task,
		"IS_SANDBOX=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	return func(prompt string, flags ...string) string {
		return w.host(t, bin, env, append([]string{"-p", prompt, "--permission-mode", "bypassPermissions"}, flags...)...)
	}
}

func (w *world) codexCLI(t *testing.T, task string) run { return w.codexCLIAt(t, task, w.base, "") }

// codexCLIAt is Codex's recipe with the gateway at base (a tap in front of
// it, say) and more top-level settings of config.toml in extra.
func (w *world) codexCLIAt(t *testing.T, task, base, extra string) run {
	bin := binary(t, "codex")
	codexHome := filepath.Join(w.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	// The recipe's model is a gateway name: Codex then offers its
	// general tools, whose spawn_agent takes the rendered role.
	config := fmt.Sprintf(`model = %q
model_provider = "cortexbuild"
%s
[model_providers.cortexbuild]
name = "CortexBuild gateway"
base_url = "%s/v1"
env_key = "CORTEXBUILD_GATEWAY_KEY"
wire_api = "responses"
http_headers = { "X-CortexBuild-Agent" = %q, "X-CortexBuild-Task" = %q }

[analytics]
enabled = false

[projects.%q]
trust_level = "trusted"
`, w.agent, extra, base, w.agent, task, w.dir)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CODEX_HOME=" + codexHome, "CORTEXBUILD_GATEWAY_KEY=" + w.key}
	return func(prompt string, flags ...string) string {
		return w.host(t, bin, env, append(append([]string{"exec", "--skip-git-repo-check"}, flags...), prompt)...)
	}
}

func (w *world) copilotCLI(t *testing.T, task string) run {
	bin := binary(t, "copilot")
	// Copilot sends no custom headers: a key bound to the task ties the
	// session's calls to it, and the model name names the agent.
	key := strings.TrimSpace(w.cortexbuild(t, "serve", "keys", "create", "--name", "copilot-"+task+"-"+w.agent, "--task", task))
	env := []string{
		"COPILOT_PROVIDER_BASE_URL=" + w.base + "/v1",
		"COPILOT_PROVIDER_TYPE=openai",
		"COPILOT_PROVIDER_WIRE_API=completions",
		"COPILOT_PROVIDER_API_KEY=" + key,
		"COPILOT_MODEL=" + w.agent,
		"XDG_CONFIG_HOME=" + filepath.Join(w.home, ".config"),
	}
	return func(prompt string, flags ...string) string {
		return w.host(t, bin, env, append([]string{"-p", prompt, "--allow-all-tools"}, flags...)...)
	}
}

// scenarios runs the plain turn, the tool loop and the critic spawn, in
// which the critic tries to write a file with any shell tool it has:
// readOnly says whether the host keeps the read-only critic from it.
func scenarios(t *testing.T, w *world, readOnly bool, run run) {
	t.Helper()
	if out := run("Say hello."); !strings.Contains(out, plainAnswer) {
		t.Errorf("plain turn: %s\n%s", out, w.upstream())
	}
	if out := run(askTool + ": print the word."); !strings.Contains(out, toolOutput) {
		t.Errorf("tool loop: %s\n%s", out, w.upstream())
	}
	out := run(askSpawn + ": plan adding hello.txt and have the critic review the plan.")
	t.Logf("transcript:\n%s", out)
	if !strings.Contains(out, criticAnswer) {
		t.Errorf("critic spawn: %s\n%s", out, w.upstream())
	}
	checkCriticSpawn(t, w.rows(t))
	var bodies [][]byte
	for _, r := range w.gpt.Requests() {
		bodies = append(bodies, r.Body)
	}
	shells := criticShell(bodies, openaiBodyConvo)
	_, err := os.Stat(filepath.Join(w.dir, criticFile))
	wrote := err == nil
	switch {
	case readOnly && (len(shells) > 0 || wrote):
		t.Errorf("the read-only critic was given %v and wrote %s: %v", shells, criticFile, wrote)
	case !readOnly && !wrote:
		// A fence for the pin bump: docs/render.md says this host cannot
		// keep a spawned role read-only.
		t.Errorf("the critic, given %v, could not write %s: the host now keeps a read-only role read-only; update docs/render.md and this test", shells, criticFile)
	case !readOnly:
		t.Logf("as docs/render.md says, the read-only critic ran with %v and wrote %s", shells, criticFile)
	}
}

func TestClaudeCode(t *testing.T) {
	need(t)
	w := newWorld(t)
	scenarios(t, w, true, w.claudeCode(t, taskID))
}

func TestCodex(t *testing.T) {
	need(t)
	w := newWorld(t)
	run := w.codexCLI(t, taskID)
	// With a model Codex knows, it declares its tools in an
	// additional_tools item and runs commands through its custom exec
	// tool (JavaScript).
	if out := run(askTool+": print the word.", "-m", "gpt-6.2-sol"); !strings.Contains(out, toolOutput) {
		t.Errorf("tool loop in code mode: %s\n%s", out, w.upstream())
	}
	scenarios(t, w, false, run)
}

func TestCopilot(t *testing.T) {
	need(t)
	w := newWorld(t)
	scenarios(t, w, true, w.copilotCLI(t, taskID))
}

// Each of CortexBuild's refusals reaches the user of each host with
// CortexBuild's reason, not the host's own wording of the status: a budget
// refusal, the pause after a provider refused CortexBuild's own key, a
// key's scope, and the critic gate (a medium-risk task's critic with no
// model but the plan's author's).
func TestRefusalsReachTheUser(t *testing.T) {
	need(t)
	for _, c := range []struct {
		name   string
		before func(t *testing.T, w *world, task string)
		agent  string
		want   string
		called bool // the refused call reached a provider (the one that refused the key)
	}{
		{name: "budget", want: "CortexBuild budget", before: func(t *testing.T, w *world, task string) {
			w.cortexbuild(t, "budget", "set", "task:"+task, "0.000001")
		}},
		{name: "pause", want: "cortexbuild project resume", called: true, before: func(t *testing.T, w *world, task string) {
			t.Setenv("HOSTCLI_ANTHROPIC_KEY", "sk-ant-hostcli-revoked")
		}},
		{name: "critic gate", agent: "critic", want: "its critic must run on a model other than the plan's author", before: func(t *testing.T, w *world, task string) {
			w.criticOn(t, "claude")
			w.cortexbuild(t, "task", "start", task, "--risk", "medium")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := "T-REFUSED"
			w := newWorldWith(t, func(w *world) { c.before(t, w, task) })
			if c.agent != "" {
				// The plan's author: the planner's turn on the task.
				if out := w.claudeCode(t, task)("Say hello."); !strings.Contains(out, plainAnswer) {
					t.Fatalf("the planner's turn: %s", out)
				}
				w.agent = c.agent
			}
			before := len(w.claude.Requests()) + len(w.gpt.Requests())
			w.mayFail = true
			for name, run := range w.hosts(t, task) {
				out := run("Say hello.")
				t.Logf("%s:\n%s", name, out)
				if strings.Contains(out, plainAnswer) || !strings.Contains(out, c.want) {
					t.Errorf("%s does not show the %s refusal (%q):\n%s", name, c.name, c.want, out)
				}
			}
			if n := len(w.claude.Requests()) + len(w.gpt.Requests()) - before; !c.called && n != 0 {
				t.Errorf("the refused calls reached the providers %d times", n)
			}
		})
	}
}

// criticOn rewrites the project's configuration so that the critic runs
// on prov, and only on another vendor's model than the author's.
func (w *world) criticOn(t *testing.T, prov string) {
	path := filepath.Join(w.dir, ".cortexbuild", "llm-config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("critic:\n    providers: [gpt]"), []byte("critic:\n    providers: ["+prov+"]"), 1)
	b = append(b, "critic:\n  require_different_vendor: true\n"...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// hosts is each host's recipe for task.
func (w *world) hosts(t *testing.T, task string) map[string]run {
	return map[string]run{
		"claude":  w.claudeCode(t, task),
		"codex":   w.codexCLI(t, task),
		"copilot": w.copilotCLI(t, task),
	}
}

// A model name the gateway does not know reaches the user of each host
// with the gateway's message, which says how to map it, rather than the
// host's own wording of the status.
func TestUnknownModelReachesTheUser(t *testing.T) {
	need(t)
	w := newWorld(t)
	w.mayFail = true
	for name, run := range w.hosts(t, taskID) {
		out := run("Say hello.", "--model", "llama-99")
		t.Logf("%s:\n%s", name, out)
		if strings.Contains(out, plainAnswer) || !strings.Contains(out, "gateway.models") {
			t.Errorf("%s does not show the gateway's message for an unknown model:\n%s", name, out)
		}
	}
	if n := len(w.claude.Requests()) + len(w.gpt.Requests()); n != 0 {
		t.Errorf("the refused calls reached the providers %d times", n)
	}
}
