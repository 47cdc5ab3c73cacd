// Package archtest enforces the rules of direction of ARCHITECTURE.md as a
// test, in the manner of Go's own go/build/deps_test.go.
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cortexbuild/cortexbuild"

// vendorSDKs maps each vendor SDK import prefix to the one package tree
// allowed to import it.
var vendorSDKs = map[string]string{
	"github.com/anthropics/":  "provider/anthropic",
	"github.com/openai/":      "provider/openaicompat",
	"google.golang.org/genai": "provider/gemini",
}

// vendorStrings may appear only under provider/<vendor>/ (and in docs).
var vendorStrings = []string{
	"api.anthropic.com", "anthropic-version", "x-api-key",
	"api.openai.com", "x-ratelimit-",
	"generativelanguage.googleapis.com", "x-goog-api-key",
}

type pkgFiles struct {
	imports map[string][]string // import path -> files
	source  map[string]string   // file -> content
}

// walk returns, per package directory (relative, slash-separated), the
// imports and sources of its non-test Go files.
func walk(t *testing.T) map[string]*pkgFiles {
	t.Helper()
	root := filepath.Join("..", "..")
	pkgs := map[string]*pkgFiles{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		p := pkgs[rel]
		if p == nil {
			p = &pkgFiles{imports: map[string][]string{}, source: map[string]string{}}
			pkgs[rel] = p
		}
		p.source[path] = string(src)
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			p.imports[ip] = append(p.imports[ip], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 5 {
		t.Fatalf("found only %d packages: the walk is broken", len(pkgs))
	}
	return pkgs
}

func isStd(path string) bool { return !strings.Contains(strings.Split(path, "/")[0], ".") }

func under(dir, tree string) bool { return dir == tree || strings.HasPrefix(dir, tree+"/") }

func TestOnlyVendorPackagesImportVendorSDKs(t *testing.T) {
	for dir, p := range walk(t) {
		for imp, files := range p.imports {
			for prefix, owner := range vendorSDKs {
				if strings.HasPrefix(imp, prefix) && !under(dir, owner) {
					t.Errorf("%s imports %s; only %s may (files: %v)", dir, imp, owner, files)
				}
			}
		}
	}
}

func TestProviderImportsOnlyTheStandardLibrary(t *testing.T) {
	p := walk(t)["provider"]
	if p == nil {
		t.Fatal("no provider package")
	}
	for imp, files := range p.imports {
		if !isStd(imp) {
			t.Errorf("provider imports %s (files %v); the contract uses the standard library only", imp, files)
		}
	}
}

func TestLeavesDoNotImportEachOther(t *testing.T) {
	leaves := []string{"pricing", "budget", "cache", "ledger"}
	upper := []string{"orchestrator", "config", "internal/cli", "gateway", "health", "render"}
	for dir, p := range walk(t) {
		isLeaf := false
		for _, l := range leaves {
			isLeaf = isLeaf || under(dir, l)
		}
		if !isLeaf {
			continue
		}
		for imp := range p.imports {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			for _, other := range append(leaves, upper...) {
				if under(rel, other) && !under(dir, other) {
					t.Errorf("leaf %s imports %s", dir, imp)
				}
			}
		}
	}
}

func TestVendorStringsStayInVendorPackages(t *testing.T) {
	for dir, p := range walk(t) {
		if under(dir, "provider/anthropic") || under(dir, "provider/openaicompat") || under(dir, "provider/gemini") || under(dir, "internal/archtest") {
			continue
		}
		// The gateway serves the vendors' protocols to host tools, so it
		// names their request headers (x-api-key); it still imports no
		// vendor SDK and never calls a vendor.
		if under(dir, "gateway") {
			continue
		}
		for file, src := range p.source {
			low := strings.ToLower(src)
			for _, s := range vendorStrings {
				if strings.Contains(low, s) {
					t.Errorf("%s mentions %q: vendor wire details belong in provider/<vendor>", file, s)
				}
			}
		}
	}
}

// telemetryLibs are the OpenTelemetry and Prometheus import prefixes: only
// observe's exporter packages and the composition root may import them, so
// the orchestrator (a public package) stays free of them and an
// unconfigured build links no exporter code into it.
var telemetryLibs = []string{"go.opentelemetry.io/", "github.com/prometheus/"}

func TestTelemetryLibrariesStayInObserve(t *testing.T) {
	for dir, p := range walk(t) {
		if under(dir, "observe/tracing") || under(dir, "observe/metrics") || under(dir, "internal/cli") {
			continue
		}
		for imp, files := range p.imports {
			for _, lib := range telemetryLibs {
				if strings.HasPrefix(imp, lib) {
					t.Errorf("%s imports %s (files %v); only observe/tracing, observe/metrics and internal/cli may", dir, imp, files)
				}
			}
		}
	}
	// observe itself is the vocabulary: the standard library and provider.
	obs := walk(t)["observe"]
	if obs == nil {
		t.Fatal("no observe package")
	}
	for imp, files := range obs.imports {
		if !isStd(imp) && imp != module+"/provider" {
			t.Errorf("observe imports %s (files %v); it may use only the standard library and provider", imp, files)
		}
	}
}
