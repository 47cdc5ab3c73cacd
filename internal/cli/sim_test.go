package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/sim"
)

// runSim runs the command line with the sim command registered (whether or
// not the root registers it yet), in dir, writing stdout to out. It returns
// the exit code and stderr, like env.run.
func runSim(ctx context.Context, dir string, out io.Writer, args ...string) (int, string) {
	var errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: &errb, wd: dir, registry: builtin.Registry(),
		getenv:    func(string) string { return "" },
		lookupEnv: func(string) (string, bool) { return "", false },
	}
	root := e.rootCmd()
	if c, _, err := root.Find([]string{"sim"}); err != nil || c == root {
		root.AddCommand(e.simCmd())
	}
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(out)
	root.SetErr(&errb)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK, errb.String()
	}
	fmt.Fprintln(&errb, "cortexbuild:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, errb.String()
	}
	return ExitUsage, errb.String()
}

func TestSimPrintConfig(t *testing.T) {
	var out bytes.Buffer
	code, errs := runSim(context.Background(), t.TempDir(), &out, "sim", "--print-config")
	if code != ExitOK {
		t.Fatalf("--print-config = %d %s", code, errs)
	}
	f, err := config.Parse("sim.yaml", out.Bytes(), builtin.Registry())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := map[string]string{"anthropic": "http://127.0.0.1:24700", "openai": "http://127.0.0.1:24701/v1", "ollama": "http://127.0.0.1:24702/v1", "vllm": "http://127.0.0.1:24703/v1", "gemini": "http://127.0.0.1:24704"}
	for name, url := range want {
		if p := f.Providers[name]; p == nil || p.BaseURL != url {
			t.Errorf("%s = %+v, want base_url %s", name, p, url)
		}
	}
	if !f.OrchestrationEnabled(func(string) string { return "" }) {
		t.Error("orchestration is off")
	}

	out.Reset()
	code, _ = runSim(context.Background(), t.TempDir(), &out, "sim", "--print-config", "--port-base", "31000", "--host", "::1")
	if f, err := config.Parse("sim.yaml", out.Bytes(), builtin.Registry()); code != ExitOK || err != nil || f.Providers["vllm"].BaseURL != "http://[::1]:31003/v1" {
		t.Errorf("--port-base 31000 --host ::1 = %d %v\n%s", code, err, out.String())
	}
	if code, errs := runSim(context.Background(), t.TempDir(), io.Discard, "sim", "--print-config", "--port-base", "0"); code != ExitUsage || !strings.Contains(errs, "fixed ports") {
		t.Errorf("--print-config --port-base 0 = %d %q", code, errs)
	}
	if code, errs := runSim(context.Background(), t.TempDir(), io.Discard, "sim", "--port-base", "65534"); code != ExitUsage || !strings.Contains(errs, "--port-base 65534") {
		t.Errorf("--port-base 65534 = %d %q", code, errs)
	}
}

func TestSimBadFaultIsAUsageError(t *testing.T) {
	for args, want := range map[string][]string{
		"bogus":                      {`--fault: fault "bogus": unknown provider "bogus"`, "anthropic, openai, ollama, vllm, gemini", sim.Syntax},
		"anthropic:530":              {`unknown anthropic fault "530"`, "valid anthropic faults: 400, 401"},
		"ollama:429":                 {`unknown ollama fault "429"`, "valid ollama faults:"},
		"anthropic:529x-2":           {`bad count "x-2"`, "xinf"},
		"gemini:429:retry-after=abc": {"retry-after=abc"},
	} {
		for _, extra := range [][]string{nil, {"--print-config"}} {
			code, errs := runSim(context.Background(), t.TempDir(), io.Discard, append([]string{"sim", "--fault", args}, extra...)...)
			if code != ExitUsage || !strings.HasPrefix(errs, "cortexbuild: ") {
				t.Errorf("--fault %s %v = %d %q", args, extra, code, errs)
			}
			for _, w := range want {
				if !strings.Contains(errs, w) {
					t.Errorf("--fault %s: stderr %q lacks %q", args, errs, w)
				}
			}
		}
	}
}

func TestSimRefusesNonLoopbackHosts(t *testing.T) {
	for _, h := range []string{"0.0.0.0", "192.168.1.20", "::", "example.com"} {
		for _, extra := range [][]string{{"--port-base", "0"}, {"--print-config"}} {
			code, errs := runSim(context.Background(), t.TempDir(), io.Discard, append([]string{"sim", "--host", h}, extra...)...)
			if code != ExitUsage || !strings.Contains(errs, "--host") || !strings.Contains(errs, "loopback only") {
				t.Errorf("--host %s %v = %d %q", h, extra, code, errs)
			}
		}
	}
}

// serving starts the sim command in the background; it returns once the
// command has printed its endpoints (the text up to the hint line, or the
// JSON document), with a function that cancels it and returns its result.
func serving(t *testing.T, dir string, args ...string) (printed []byte, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	type result struct {
		code int
		errs string
	}
	done := make(chan result, 1)
	go func() {
		code, errs := runSim(ctx, dir, pw, append([]string{"sim", "--port-base", "0"}, args...)...)
		pw.Close()
		done <- result{code, errs}
	}()
	br := bufio.NewReader(pr)
	var buf bytes.Buffer
	if slicesContains(args, "--json") {
		var raw json.RawMessage
		if err := json.NewDecoder(io.TeeReader(br, &buf)).Decode(&raw); err != nil {
			cancel()
			r := <-done
			t.Fatalf("no JSON printed: %v (exit %d, %s)", err, r.code, r.errs)
		}
		buf.Reset()
		buf.Write(raw)
	} else {
		for {
			line, err := br.ReadString('\n')
			buf.WriteString(line)
			if strings.HasPrefix(line, "export ") {
				break
			}
			if err != nil {
				cancel()
				r := <-done
				t.Fatalf("the endpoints were not printed: %v (exit %d, %s)\n%s", err, r.code, r.errs, buf.String())
			}
		}
	}
	go func() { _, _ = io.Copy(io.Discard, br) }() // keep the pipe flowing
	return buf.Bytes(), func() (int, string) {
		cancel()
		r := <-done
		return r.code, r.errs
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestSimServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	printed, stop := serving(t, dir, "--fault", "anthropic:529", "--write-config", "sim/llm-config.yaml")
	path := filepath.Join(dir, "sim", "llm-config.yaml")
	out := string(printed)
	for _, w := range []string{"PROVIDER", "anthropic", "openai_compatible/ollama", "http://127.0.0.1:", "faults, in order, then echo replies: anthropic:529", "wrote " + path,
		"export CORTEXBUILD_SIM_KEY=sim-key; cortexbuild --config " + path + " ..."} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	f, err := config.Load(path, builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	anthropicURL := f.Providers["anthropic"].BaseURL
	if !strings.Contains(out, anthropicURL) {
		t.Errorf("the config's %s is not among the printed endpoints:\n%s", anthropicURL, out)
	}
	post := func() int {
		req, _ := http.NewRequest(http.MethodPost, anthropicURL+"/v1/messages", strings.NewReader(`{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", sim.Key)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if a, b := post(), post(); a != 529 || b != 200 {
		t.Errorf("statuses %d, %d; want 529 then 200", a, b)
	}

	code, errs := stop()
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{"sim: anthropic: fault 529 (call 1 of 1)", "sim: stopped"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if _, err := http.Get(anthropicURL + "/v1/models"); err == nil {
		t.Error("the sim still answers after it stopped")
	}

	// The file is never overwritten without --force.
	before, _ := os.ReadFile(path)
	code, errs = runSim(context.Background(), dir, io.Discard, "sim", "--port-base", "0", "--write-config", "sim/llm-config.yaml")
	if after, _ := os.ReadFile(path); code != ExitFailure || !strings.Contains(errs, "--force") || !bytes.Equal(before, after) {
		t.Errorf("second --write-config = %d %q", code, errs)
	}
	var stdout bytes.Buffer
	code, errs = runSim(context.Background(), dir, &stdout, "sim", "--print-config", "--write-config", "sim/llm-config.yaml", "--force")
	if after, _ := os.ReadFile(path); code != ExitOK || !bytes.Equal(after, stdout.Bytes()) || !strings.Contains(string(after), ":24700") {
		t.Errorf("--print-config --write-config --force = %d %q", code, errs)
	}
}

func TestSimJSON(t *testing.T) {
	printed, stop := serving(t, t.TempDir(), "--json", "--fault", "ollama:503x2", "--fault", "gemini:429:retry-after=31")
	var info simInfo
	if err := json.Unmarshal(printed, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoints) != 5 || info.Endpoints[2].Provider != "ollama" || info.KeyEnv != sim.KeyEnv || info.Key != sim.Key ||
		strings.Join(info.Faults, " ") != "ollama:503x2 gemini:429:retry-after=31" || !strings.Contains(info.Hint, "--config <file>") {
		t.Errorf("info = %+v", info)
	}
	res, err := http.Post(info.Endpoints[2].BaseURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 {
		t.Errorf("ollama answered %d, want 503", res.StatusCode)
	}
	if code, errs := stop(); code != ExitOK || !strings.Contains(errs, "sim: ollama: fault 503 (call 1 of 2)") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
