package nativecorpus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway/internal/nativecorpus"
	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

// captureEnv asks for a capture: "1" (or "all") captures every host, a
// comma-separated list only those named (claude-code, codex, copilot,
// sdk).
const captureEnv = "CORTEXBUILD_CAPTURE_CORPUS"

// inNetns is set in the environment of the test binary re-run in its own
// network and host-name namespaces.
const inNetns = "CORTEXBUILD_CAPTURE_NETNS"

// captureHostname is the host name the CLIs see during a capture, so that
// no machine's name reaches the corpus.
const captureHostname = "devbox"

// corpusDir is the corpus, from this package's directory.
const corpusDir = "../../testdata/native"

var isolated bool // running in a loopback-only network namespace

func TestMain(m *testing.M) {
	if os.Getenv(captureEnv) != "" {
		if code, done := isolate(); done {
			os.Exit(code)
		}
		isolated = os.Getenv(inNetns) != ""
	}
	os.Exit(m.Run())
}

// wants says whether the capture asked for host.
func wants(host string) bool {
	v := os.Getenv(captureEnv)
	if v == "1" || v == "all" {
		return true
	}
	return slices.Contains(strings.Split(v, ","), host)
}

// capture is one run of the capture: the server, the directories the
// clients run in and the credentials they are given (never stored).
type capture struct {
	srv     *captureServer
	root    string // the temporary root, scrubbed away: home is /home/dev in the corpus
	home    string
	project string
	keys    []string
}

// TestCapture captures the corpus again (see the package doc). It is
// skipped unless CORTEXBUILD_CAPTURE_CORPUS is set.
func TestCapture(t *testing.T) {
	if os.Getenv(captureEnv) == "" {
		t.Skip("set " + captureEnv + "=1 to capture the corpus again (root, with the pinned CLIs installed; see the package doc)")
	}
	root, err := os.MkdirTemp("", "corpus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	c := &capture{srv: newCaptureServer(t), root: root, home: filepath.Join(root, "home", "dev")}
	c.project = filepath.Join(c.home, "project")
	if err := os.MkdirAll(c.project, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		name string
		cli  bool
		run  func(t *testing.T, c *capture)
	}{
		{"claude-code", true, captureClaude},
		{"codex", true, captureCodex},
		{"copilot", true, captureCopilot},
		{"sdk", false, captureSDKs},
	} {
		if !wants(h.name) {
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			if h.cli && !isolated {
				t.Fatal("capturing the CLIs needs root, to run them in a network namespace that has only loopback")
			}
			h.run(t, c)
		})
	}
}

// key returns a fresh credential for a client; Check and store make sure
// none reaches the corpus.
func (c *capture) key(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	k := prefix + hex.EncodeToString(b)
	c.keys = append(c.keys, k)
	return k
}

// hostDir is where scripts/install-host-clis.sh installed the CLIs.
func hostDir(t *testing.T) string {
	if d := os.Getenv("CORTEXBUILD_HOSTCLIS"); d != "" {
		return d
	}
	d, err := filepath.Abs("../../../.cache/hostclis")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hostCLI is the path of a host CLI's native binary, after checking that
// it is the pinned version; it returns the version.
func hostCLI(t *testing.T, name string) (path, version string) {
	t.Helper()
	plat, triple := "linux-x64", "x86_64-unknown-linux-musl"
	if runtime.GOARCH == "arm64" {
		plat, triple = "linux-arm64", "aarch64-unknown-linux-musl"
	}
	rel := map[string]string{
		"claude":  "node_modules/@anthropic-ai/claude-code-" + plat + "/claude",
		"codex":   "node_modules/@openai/codex-" + plat + "/vendor/" + triple + "/bin/codex",
		"copilot": "node_modules/@github/copilot-" + plat + "/copilot",
	}[name]
	path = filepath.Join(hostDir(t), rel)
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s is not installed (run scripts/install-host-clis.sh, or set CORTEXBUILD_HOSTCLIS): %v", name, err)
	}
	pins, err := hostversions.Default()
	if err != nil {
		t.Fatal(err)
	}
	version = hostversions.ExtractVersion(string(out))
	for _, p := range pins.Tools {
		if p.Name == name && p.Version != version {
			t.Fatalf("%s is version %s, the pin is %s: run scripts/install-host-clis.sh", name, version, p.Version)
		}
	}
	return path, version
}

// cli runs a host CLI in the project with env and returns its output.
func (c *capture) cli(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.project
	cmd.Env = append([]string{"HOME=" + c.home, "USER=dev", "LOGNAME=dev", "SHELL=/bin/bash",
		"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "NO_COLOR=1", "LANG=C.UTF-8", "TZ=UTC"}, env...)
	cmd.Stdin = strings.NewReader("")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, c.scrub(out.Bytes()))
	}
	return string(c.scrub(out.Bytes()))
}

// scrub replaces the temporary root with nothing: paths read /home/dev/…,
// and Claude Code's project slugs (the path with - for /)
// -home-dev-project.
func (c *capture) scrub(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte(c.root), nil)
	return bytes.ReplaceAll(b, []byte(strings.ReplaceAll(c.root, "/", "-")), nil)
}

// credentialHeaders are the request headers whose values are replaced by
// the placeholder.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie"}

// store scrubs the exchanges and writes them as host-version/NN-what.json,
// replacing what the directory held.
func (c *capture) store(t *testing.T, host, version string, recs []captured) {
	t.Helper()
	if len(recs) == 0 {
		t.Errorf("%s: nothing captured", host)
		return
	}
	dir := filepath.Join(corpusDir, host+"-"+version)
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	slug := regexp.MustCompile(`[^a-z0-9]+`)
	for i, r := range recs {
		e := r.ex
		e.Host, e.Version = host, version
		e.Request.Body = c.scrub(e.Request.Body)
		// An answer may echo the request (the Responses API echoes
		// instructions and tools).
		e.Response.Body = c.scrub(e.Response.Body)
		for k, vs := range e.Request.Header {
			for j, v := range vs {
				vs[j] = string(c.scrub([]byte(v)))
			}
			e.Request.Header[k] = vs
		}
		for _, h := range credentialHeaders {
			for j, v := range e.Request.Header.Values(h) {
				if scheme, _, ok := strings.Cut(v, " "); ok && h == "Authorization" {
					e.Request.Header[h][j] = scheme + " " + nativecorpus.Redacted
				} else {
					e.Request.Header[h][j] = nativecorpus.Redacted
				}
			}
		}
		if e.Request.Header.Get("Content-Length") != "" {
			e.Request.Header.Set("Content-Length", strconv.Itoa(len(e.Request.Body)))
		}
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		for _, leak := range append([]string{c.root, filepath.Base(c.root)}, c.keys...) {
			if bytes.Contains(b, []byte(leak)) || bytes.Contains(e.Request.Body, []byte(leak)) || bytes.Contains(e.Response.Body, []byte(leak)) {
				t.Errorf("%s exchange %d (%s): %q is still in it after scrubbing", host, i+1, r.what, leak)
			}
		}
		if err := nativecorpus.Check(e); err != nil {
			t.Errorf("%s exchange %d (%s): %v", host, i+1, r.what, err)
		}
		what := e.Flow
		if r.what != "" {
			what += "-" + r.what
		}
		name := fmt.Sprintf("%02d-%s.json", i+1, strings.Trim(slug.ReplaceAllString(strings.ToLower(what), "-"), "-"))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s/%s: %s %s (%d bytes) -> %d, stream %v (%d bytes)", filepath.Base(dir), name, e.Request.Method, e.Request.Path,
			len(e.Request.Body), e.Response.Status, e.Response.Stream, len(e.Response.Body))
	}
}
