package repotest

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// make test (the README's test command) ends with the list of skipped
// tests and their reasons, so that a missing PostgreSQL, Redis or tool is
// seen in its default output: its recipe, run on a package with a test
// that skips, prints the reason.
func TestMakeTestListsSkippedTests(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it runs go test on a package")
	}
	m := regexp.MustCompile(`(?m)^test:.*\n\t(.+)$`).FindSubmatch(readFile(t, "Makefile"))
	if m == nil {
		t.Fatal("Makefile has no test target with a one-line recipe")
	}
	recipe := string(m[1])
	if !strings.Contains(recipe, "./...") {
		t.Fatalf("the test recipe %q does not run ./...", recipe)
	}
	recipe = strings.ReplaceAll(recipe, "$(GO)", "go")
	recipe = strings.ReplaceAll(recipe, "-race ", "") // the point is the output, not the race detector
	recipe = strings.ReplaceAll(recipe, "./...", "./internal/repotest/testdata/skips")
	cmd := exec.Command("sh", "-c", recipe)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", recipe, err, out)
	}
	for _, want := range []string{"=== Skipped", "TestNeedsAService", "the example service is not reachable at 127.0.0.1:1; set EXAMPLE_URL"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make test's output lacks %q:\n%s", want, out)
		}
	}
}

// make demo says what it does while a first build runs: a line saying a
// build is starting, then each package as it compiles (go build -v), then
// the demo itself.
func TestMakeDemoSaysWhatItBuilds(t *testing.T) {
	m := regexp.MustCompile(`(?m)^demo:.*\n((?:\t.+\n)+)`).FindSubmatch(readFile(t, "Makefile"))
	if m == nil {
		t.Fatal("Makefile has no demo target")
	}
	lines := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	if len(lines) < 3 {
		t.Fatalf("the demo recipe %q does not announce, build and run", m[1])
	}
	if !strings.Contains(lines[0], "echo") || !strings.Contains(lines[0], "build") {
		t.Errorf("the demo recipe does not start by saying it builds: %q", lines[0])
	}
	build := ""
	for _, l := range lines {
		if strings.Contains(l, " build ") {
			build = l
		}
	}
	if !strings.Contains(build, " -v ") || !strings.Contains(build, "./cmd/cortexbuild") {
		t.Errorf("the demo recipe does not build with -v (naming each package it compiles): %q", build)
	}
	if !strings.Contains(lines[len(lines)-1], "cortexbuild demo") {
		t.Errorf("the demo recipe does not end by running the demo: %q", lines[len(lines)-1])
	}
}
