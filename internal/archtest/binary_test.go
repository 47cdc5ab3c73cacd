package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// What the production binary must not link (docs/benchmarks.md, "Binary
// size and first build"): test machinery, and the modules it was slimmed
// of. The fakes of provider/*/…fake and fakekit are not on the list: the
// simulator (cortexbuild sim, demo) runs them.
var (
	// forbiddenPackages are packages (and the trees under them) that are
	// for tests only.
	forbiddenPackages = []string{
		"testing",
		"net/http/httptest",
		module + "/provider/providertest", // the conformance suite; its fakekit subpackage is allowed below
		module + "/internal/testenv",
		module + "/internal/pgstate/pgstatetest",
		module + "/internal/secretscan",
		module + "/internal/repotest",
		module + "/internal/archtest",
	}
	// allowedUnderForbidden are exceptions to forbiddenPackages.
	allowedUnderForbidden = []string{module + "/provider/providertest/fakekit"}
	// forbiddenModules are import path prefixes kept out of the binary:
	// test libraries, and heavy modules replaced by a little code of ours
	// (the Gemini REST client, the Redis client, the OTLP/HTTP exporter)
	// because they brought far more than was used: Google Cloud
	// authentication and gRPC, hundreds of Redis commands, and gRPC again
	// with golang.org/x/net/trace, whose html/template use kept every
	// exported method of the SDKs' types in the binary.
	forbiddenModules = []string{
		"github.com/google/go-cmp/",
		"github.com/chromedp/",
		"gotest.tools/",
		"github.com/stretchr/testify/",
		"google.golang.org/genai",
		"cloud.google.com/go/",
		"github.com/google/s2a-go",
		"github.com/redis/go-redis/",
		"google.golang.org/grpc",
		"github.com/grpc-ecosystem/",
		"golang.org/x/net/trace",
		"go.opentelemetry.io/otel/exporters/",
	}
)

// goTool returns the go command: the one of the toolchain running this
// test, else the one on PATH.
func goTool(t *testing.T) string {
	t.Helper()
	if gobin := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(gobin) {
		return gobin
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to inspect the binary with: %v", err)
	}
	return p
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

// binaryDeps lists the packages linked into cmd/cortexbuild.
func binaryDeps(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-deps", "./cmd/cortexbuild")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/cortexbuild: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps found only %d packages: the listing is broken", len(deps))
	}
	return deps
}

// forbiddenDeps returns the entries of deps the binary must not link.
func forbiddenDeps(deps []string) []string {
	var bad []string
next:
	for _, d := range deps {
		for _, a := range allowedUnderForbidden {
			if under(d, a) {
				continue next
			}
		}
		for _, p := range forbiddenPackages {
			if under(d, p) {
				bad = append(bad, d)
				continue next
			}
		}
		for _, m := range forbiddenModules {
			if strings.HasPrefix(d, m) || d == strings.TrimSuffix(m, "/") {
				bad = append(bad, d)
				continue next
			}
		}
	}
	return bad
}

func TestBinaryLinksNoTestOrRemovedPackages(t *testing.T) {
	for _, d := range forbiddenDeps(binaryDeps(t)) {
		t.Errorf("cmd/cortexbuild links %s: test-only packages and the modules the binary was slimmed of stay out of it (go list -deps ./cmd/cortexbuild)", d)
	}
}

// The check itself catches what it is for: a production import of a
// testing helper and of a removed module.
func TestForbiddenDepsCatches(t *testing.T) {
	got := forbiddenDeps([]string{"fmt", "testing", "testing/iotest", "github.com/google/go-cmp/cmp", "google.golang.org/genai",
		module + "/provider/providertest", module + "/provider/providertest/fakekit", "github.com/redis/go-redis/v9", "net/http"})
	want := "testing testing/iotest github.com/google/go-cmp/cmp google.golang.org/genai " + module + "/provider/providertest github.com/redis/go-redis/v9"
	if strings.Join(got, " ") != want {
		t.Errorf("forbiddenDeps = %q, want %q", got, want)
	}
}

// MaxStrippedBinaryBytes is the most the release-style build of
// cmd/cortexbuild (-trimpath -ldflags '-s -w') may weigh: 64 MB
// (docs/benchmarks.md, "Binary size and first build").
const MaxStrippedBinaryBytes = 64_000_000

// buildBinary builds cmd/cortexbuild with extra go build flags into a
// temporary directory and returns its path.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: it links the whole binary")
	}
	out := filepath.Join(t.TempDir(), "cortexbuild")
	cmd := exec.Command(goTool(t), append(append([]string{"build"}, flags...), "-o", out, "./cmd/cortexbuild")...)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func TestStrippedBinarySize(t *testing.T) {
	out := buildBinary(t, "-trimpath", "-ldflags", "-s -w")
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	mb := float64(fi.Size()) / 1e6
	t.Logf("stripped cmd/cortexbuild: %.1f MB (limit %.0f MB)", mb, MaxStrippedBinaryBytes/1e6)
	if fi.Size() > MaxStrippedBinaryBytes {
		t.Errorf("the stripped binary weighs %.1f MB, above the limit of %.0f MB: see docs/benchmarks.md, \"Binary size and first build\", for what weighs what (go tool nm -size -sort size)", mb, MaxStrippedBinaryBytes/1e6)
	}
}

// templateExecution returns the symbols of a `go tool nm` listing that
// are there only when the binary can execute a text/template (or an
// html/template): the executor's state methods.
func templateExecution(nm string) []string {
	var found []string
	for line := range strings.Lines(nm) {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(f[len(f)-1], "text/template.(*state).") {
			found = append(found, f[len(f)-1])
		}
	}
	return found
}

// A template's execution calls methods by name through reflection, which
// makes the linker keep every exported method of the SDKs' types (tens of
// megabytes): nothing in the binary may execute one (the console writes
// its pages in Go, gateway/console/html.go).
func TestBinaryExecutesNoTemplate(t *testing.T) {
	out := buildBinary(t)
	nm, err := exec.Command(goTool(t), "tool", "nm", out).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	if len(nm) < 1000 {
		t.Fatalf("go tool nm listed %d bytes: the listing is broken", len(nm))
	}
	if found := templateExecution(string(nm)); len(found) > 0 {
		t.Errorf("cmd/cortexbuild can execute a text/template (it links %s, …): every exported method of every type is then kept; find the caller with go build -ldflags=-dumpdep", found[0])
	}
}

func TestTemplateExecutionCatches(t *testing.T) {
	nm := "  57e180 T text/template.HTMLEscape\n  5f00a0 T text/template.(*state).evalArg\n  5f0980 T text/template.(*state).evalBool\n  503a60 T reflect.Value.MethodByName\n"
	if got := templateExecution(nm); strings.Join(got, " ") != "text/template.(*state).evalArg text/template.(*state).evalBool" {
		t.Errorf("templateExecution = %q", got)
	}
}
