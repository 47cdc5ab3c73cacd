package builtin_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/builtin/builtintest"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The add-a-provider checklist (docs/providers/adding-a-provider.md) as a
// test: every registered adapter type must have what the checklist asks
// for, or this fails naming the step.

const module = "github.com/cortexbuild/cortexbuild"

// root is the repository root, from this package's directory.
var root = filepath.Join("..", "..")

// docsPage is the documentation page of an adapter type:
// docs/providers/<type>.md with _ written as - (openai_compatible is
// openai-compatible.md).
func docsPage(typ string) string {
	return filepath.Join("docs", "providers", strings.ReplaceAll(typ, "_", "-")+".md")
}

// packageDir returns the directory of the package that defines reg's
// factory, relative to the repository root.
func packageDir(reg provider.Registration) (string, error) {
	fn := runtime.FuncForPC(reflect.ValueOf(reg.New).Pointer())
	if fn == nil {
		return "", fmt.Errorf("cannot tell where the factory is defined")
	}
	name := fn.Name() // github.com/cortexbuild/cortexbuild/provider/anthropic.Registration.func1
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if slash < 0 || dot < 0 {
		return "", fmt.Errorf("unexpected function name %q", name)
	}
	pkg := strings.TrimSuffix(name[:slash+1+dot], "_test") // an external test package is its package's directory
	rel, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return "", fmt.Errorf("factory defined outside this module, in %s", pkg)
	}
	return filepath.FromSlash(rel), nil
}

// callsConformanceSuite reports whether a test file in dir calls
// providertest.Run.
func callsConformanceSuite(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	if err != nil {
		return false, err
	}
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			return false, err
		}
		local := "" // the name providertest is imported as
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/provider/providertest" {
				local = "providertest"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
						found = true
					}
				}
			}
			return !found
		})
		if found {
			return true, nil
		}
	}
	return false, nil
}

// checklistProblems returns what reg lacks of the checklist, one line per
// missing item, naming the step and the file to touch.
func checklistProblems(reg provider.Registration, cat *pricing.Catalog) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	// Step 10: the documentation page, which names the type.
	page := docsPage(reg.Type)
	if data, err := os.ReadFile(filepath.Join(root, page)); err != nil {
		add("step 10: no documentation page %s", filepath.ToSlash(page))
	} else if !strings.Contains(string(data), reg.Type) {
		add("step 10: %s never names the type %q", filepath.ToSlash(page), reg.Type)
	}

	// Step 5: the credentials schema.
	if len(reg.Credentials) == 0 {
		add("step 5: no credentials schema (Registration.Credentials is empty)")
	}
	for _, f := range reg.Credentials {
		if f.Name == "" || f.Description == "" {
			add("step 5: credential %q needs a name and a description", f.Name)
		}
		if (f.Required || len(f.RequiredProfiles) > 0) && len(f.EnvVars) == 0 {
			add("step 5: credential %q is required but names no environment variable: the nightly smoke test cannot supply it", f.Name)
		}
		for _, p := range f.RequiredProfiles {
			if !slices.Contains(reg.Profiles, p) {
				add("step 5: credential %q is required for unknown profile %q", f.Name, p)
			}
		}
	}

	// Step 3: a model for every tier, each priced by the catalog.
	for _, tier := range provider.Tiers {
		m := reg.DefaultModels[tier]
		if m == "" {
			add("step 3: no %s model in Registration.DefaultModels", tier)
			continue
		}
		if _, err := cat.Find(m); err != nil {
			add("step 3: the %s model %q is not in pricing/catalog.yaml", tier, m)
		}
	}

	// Step 4: capabilities.
	if len(reg.Capabilities.List()) == 0 {
		add("step 4: no capabilities declared")
	}

	// Step 8: a smoke fixture for what the smoke test runs by default.
	profile := ""
	if len(reg.Profiles) > 0 {
		profile = reg.Profiles[0]
	}
	if _, ok := builtintest.Lookup(reg.Type, profile); !ok {
		add("step 8: no smoke fixture for type %q profile %q in internal/builtin/builtintest", reg.Type, profile)
	}

	// Step 1: a conformance test in the adapter's package.
	dir, err := packageDir(reg)
	if err != nil {
		add("step 1: %v", err)
	} else if ok, err := callsConformanceSuite(dir); err != nil {
		add("step 1: reading %s: %v", dir, err)
	} else if !ok {
		add("step 1: no test in %s calls providertest.Run (the conformance suite)", filepath.ToSlash(dir))
	}
	return out
}

func TestEveryRegisteredAdapterCompletesTheChecklist(t *testing.T) {
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	regs := builtin.Registry().All()
	if len(regs) == 0 {
		t.Fatal("no adapter type is registered")
	}
	for _, reg := range regs {
		for _, p := range checklistProblems(reg, cat) {
			t.Errorf("adapter type %s: %s", reg.Type, p)
		}
	}
}

func TestChecklistCatchesAnIncompleteAdapter(t *testing.T) {
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	reg := provider.Registration{
		Type:          "half_done",
		DefaultModels: map[provider.Tier]string{provider.TierBalanced: "no-such-model"},
		New:           func(provider.Settings) (provider.Adapter, error) { return nil, context.Canceled },
	}
	got := strings.Join(checklistProblems(reg, cat), "\n")
	for _, want := range []string{
		"step 10: no documentation page docs/providers/half-done.md",
		"step 5: no credentials schema",
		"step 3: no reasoning_heavy model", "step 3: no fast_cheap model", `step 3: the balanced model "no-such-model" is not in pricing/catalog.yaml`,
		"step 4: no capabilities declared",
		`step 8: no smoke fixture for type "half_done"`,
		"step 1: no test in internal/builtin calls providertest.Run",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	reg.Credentials = []provider.CredentialField{{Name: "api_key", Required: true, Description: "a key"}}
	if got := strings.Join(checklistProblems(reg, cat), "\n"); !strings.Contains(got, "names no environment variable") {
		t.Errorf("a required credential without a variable passes:\n%s", got)
	}
}

func TestDocsPageNames(t *testing.T) {
	if got := filepath.ToSlash(docsPage("openai_compatible")); got != "docs/providers/openai-compatible.md" {
		t.Errorf("docsPage = %q", got)
	}
}
