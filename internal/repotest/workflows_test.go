// Package repotest checks the repository's files that are not Go code but
// that the project's promises rest on: the GitHub Actions workflows (CI,
// the nightly provider smoke test and the nightly host-CLI image), the
// provider SDK pins in go.mod and the Renovate configuration that bumps
// them.
package repotest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/internal/builtin"
)

// root is the repository root, from this package's directory.
var root = filepath.Join("..", "..")

// pagerDutySecret is the one repository secret the smoke workflow may use
// besides the providers' credentials.
const pagerDutySecret = "PAGERDUTY_ROUTING_KEY"

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// workflow is the part of a GitHub Actions workflow these tests read.
type workflow struct {
	Name string               `yaml:"name"`
	On   map[string]yaml.Node `yaml:"on"`
	Jobs map[string]job       `yaml:"jobs"`
}

type job struct {
	RunsOn   string             `yaml:"runs-on"`
	Services map[string]service `yaml:"services"`
	Env      map[string]string  `yaml:"env"`
	Steps    []step             `yaml:"steps"`
}

type service struct {
	Image string   `yaml:"image"`
	Ports []string `yaml:"ports"`
}

type step struct {
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

// loadWorkflow parses a workflow and checks the structure GitHub Actions
// requires: triggers, jobs with a runner and steps, each step either uses
// an action at a version or runs a command.
func loadWorkflow(t *testing.T, rel string) workflow {
	t.Helper()
	var w workflow
	if err := yaml.Unmarshal(readFile(t, rel), &w); err != nil {
		t.Fatalf("%s is not valid YAML: %v", rel, err)
	}
	if w.Name == "" || len(w.On) == 0 || len(w.Jobs) == 0 {
		t.Fatalf("%s: needs name, on and jobs: %+v", rel, w)
	}
	for name, j := range w.Jobs {
		if j.RunsOn == "" || len(j.Steps) == 0 {
			t.Errorf("%s: job %s needs runs-on and steps", rel, name)
		}
		for i, s := range j.Steps {
			if (s.Uses == "") == (s.Run == "") {
				t.Errorf("%s: job %s step %d must have exactly one of uses and run", rel, name, i)
			}
			if s.Uses != "" && !regexp.MustCompile(`^[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w.-]+$`).MatchString(s.Uses) {
				t.Errorf("%s: job %s step %d: uses %q is not owner/repo@ref", rel, name, i, s.Uses)
			}
		}
	}
	return w
}

var secretRef = regexp.MustCompile(`\$\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// schemaEnvVars returns every environment variable a registered adapter
// type's credentials schema names, and the first variable of every
// credential some profile requires (what the smoke test needs).
func schemaEnvVars() (all map[string]bool, required []string) {
	all = map[string]bool{}
	for _, reg := range builtin.Registry().All() {
		for _, f := range reg.Credentials {
			for _, v := range f.EnvVars {
				all[v] = true
			}
			if (f.Required || len(f.RequiredProfiles) > 0) && len(f.EnvVars) > 0 && !slices.Contains(required, f.EnvVars[0]) {
				required = append(required, f.EnvVars[0])
			}
		}
	}
	return all, required
}

func TestProviderSmokeWorkflow(t *testing.T) {
	const rel = ".github/workflows/provider-smoke.yml"
	w := loadWorkflow(t, rel)
	if _, ok := w.On["workflow_dispatch"]; !ok {
		t.Error("the smoke workflow cannot be run by hand: add workflow_dispatch")
	}
	var sched []struct {
		Cron string `yaml:"cron"`
	}
	if n, ok := w.On["schedule"]; !ok || n.Decode(&sched) != nil || len(sched) == 0 {
		t.Fatal("the smoke workflow has no schedule")
	}
	for _, s := range sched {
		if err := validCron(s.Cron); err != nil {
			t.Errorf("cron %q: %v", s.Cron, err)
		}
	}

	allowed, required := schemaEnvVars()
	allowed[pagerDutySecret] = true
	for _, m := range secretRef.FindAllStringSubmatch(string(readFile(t, rel)), -1) {
		if !allowed[m[1]] {
			t.Errorf("secrets.%s is neither a credentials-schema variable nor %s", m[1], pagerDutySecret)
		}
	}

	var smoke *step
	for _, j := range w.Jobs {
		if !slices.ContainsFunc(j.Steps, func(s step) bool {
			return s.Uses != "" && strings.HasPrefix(s.Uses, "actions/setup-go@") && s.With["go-version-file"] == "go.mod"
		}) {
			t.Error("the smoke job does not take Go from go.mod")
		}
		for i := range j.Steps {
			if strings.Contains(j.Steps[i].Run, "providers smoke") {
				smoke = &j.Steps[i]
			}
		}
	}
	if smoke == nil {
		t.Fatal("no step runs 'providers smoke'")
	}
	run := strings.Join(strings.Fields(smoke.Run), " ")
	if !strings.HasPrefix(run, "go run ./cmd/cortexbuild providers smoke") || !strings.Contains(run, "--live") {
		t.Errorf("the smoke step runs %q, want go run ./cmd/cortexbuild providers smoke --live", run)
	}
	// Every secret lands in the variable of the same name, and every
	// credential some adapter requires is provided.
	for k, v := range smoke.Env {
		if m := secretRef.FindStringSubmatch(v); m != nil && m[1] != k {
			t.Errorf("env %s takes secrets.%s; map each secret to the variable of its own name", k, m[1])
		}
	}
	for _, v := range required {
		if smoke.Env[v] != "${{ secrets."+v+" }}" {
			t.Errorf("the smoke step does not set %s from secrets.%s: that adapter would be skipped every night", v, v)
		}
	}
	m := regexp.MustCompile(`--pagerduty-routing-key-env\s+(\S+)`).FindStringSubmatch(run)
	if m == nil || smoke.Env[m[1]] != "${{ secrets."+pagerDutySecret+" }}" {
		t.Errorf("the smoke step does not page through secrets.%s (run %q)", pagerDutySecret, run)
	}
}

// readmeTestCommand returns the README's test command: the quick-start
// line commented "every test".
func readmeTestCommand(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(\S.*?)\s+#\s*every test`).FindSubmatch(readFile(t, "README.md"))
	if m == nil {
		t.Fatal("README.md has no line commented '# every test'")
	}
	return string(m[1])
}

func TestCIWorkflowRunsTheREADMETestCommand(t *testing.T) {
	w := loadWorkflow(t, ".github/workflows/ci.yml")
	for _, ev := range []string{"push", "pull_request"} {
		if _, ok := w.On[ev]; !ok {
			t.Errorf("ci does not run on %s", ev)
		}
	}
	cmd := readmeTestCommand(t)
	var ran, goFromMod bool
	var images []string
	var env map[string]string
	for _, j := range w.Jobs {
		for _, s := range j.Services {
			images = append(images, s.Image)
		}
		for _, s := range j.Steps {
			for _, line := range strings.Split(s.Run, "\n") {
				ran = ran || strings.TrimSpace(line) == cmd
			}
			goFromMod = goFromMod || (strings.HasPrefix(s.Uses, "actions/setup-go@") && s.With["go-version-file"] == "go.mod")
		}
		if ran && env == nil {
			env = j.Env
		}
	}
	if !ran {
		t.Errorf("no CI step runs the README's test command %q", cmd)
	}
	if !goFromMod {
		t.Error("CI does not take Go from go.mod")
	}
	for _, svc := range []string{"postgres:", "redis:"} {
		if !slices.ContainsFunc(images, func(i string) bool { return strings.HasPrefix(i, svc) }) {
			t.Errorf("CI has no %s service container (images %v)", strings.TrimSuffix(svc, ":"), images)
		}
	}
	for _, v := range []string{"CORTEXBUILD_TEST_POSTGRES", "CORTEXBUILD_TEST_REDIS", "CI"} {
		if env[v] == "" {
			t.Errorf("the CI job does not set %s: the integration tests would skip", v)
		}
	}
	if refs := secretRef.FindAllString(string(readFile(t, ".github/workflows/ci.yml")), -1); len(refs) > 0 {
		t.Errorf("CI uses secrets %v; tests never need one", refs)
	}
}

// cronFields are the ranges of the five fields of a cron expression as
// GitHub Actions reads it: minute, hour, day of month, month, day of week.
var cronFields = []struct {
	name     string
	min, max int
	names    []string
}{
	{"minute", 0, 59, nil},
	{"hour", 0, 23, nil},
	{"day of month", 1, 31, nil},
	{"month", 1, 12, []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	{"day of week", 0, 6, []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// validCron checks a POSIX five-field cron expression: each field *, a
// value, a range a-b, any of them with a /step, or a comma list of those.
func validCron(expr string) error {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return fmt.Errorf("has %d fields, want 5 (minute hour day-of-month month day-of-week)", len(fields))
	}
	for i, f := range fields {
		spec := cronFields[i]
		value := func(s string) (int, error) {
			for j, n := range spec.names {
				if strings.EqualFold(s, n) {
					return spec.min + j, nil
				}
			}
			v, err := strconv.Atoi(s)
			if err != nil || v < spec.min || v > spec.max {
				return 0, fmt.Errorf("%s: %q is not in %d-%d", spec.name, s, spec.min, spec.max)
			}
			return v, nil
		}
		for _, part := range strings.Split(f, ",") {
			base, step, hasStep := strings.Cut(part, "/")
			if hasStep {
				if n, err := strconv.Atoi(step); err != nil || n < 1 {
					return fmt.Errorf("%s: step %q is not a positive number", spec.name, step)
				}
			}
			if base == "*" {
				continue
			}
			lo, hi, isRange := strings.Cut(base, "-")
			a, err := value(lo)
			if err != nil {
				return err
			}
			if isRange {
				b, err := value(hi)
				if err != nil {
					return err
				}
				if b < a {
					return fmt.Errorf("%s: range %q runs backwards", spec.name, base)
				}
			}
		}
	}
	return nil
}

func TestValidCron(t *testing.T) {
	for _, ok := range []string{"17 4 * * *", "*/15 * * * *", "0 0 1,15 * MON-FRI", "0 6 * JAN-MAR 1", "5-10/2 0 * * 0"} {
		if err := validCron(ok); err != nil {
			t.Errorf("validCron(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "17 4 * *", "17 4 * * * *", "60 4 * * *", "0 24 * * *", "0 0 0 * *", "0 0 * 13 *", "0 0 * * 7", "*/0 * * * *", "0 0 * * FUNDAY", "30-10 * * * *", "@daily"} {
		if err := validCron(bad); err == nil {
			t.Errorf("validCron(%q) accepted", bad)
		}
	}
}

// The nightly host-CLI image workflow (docs/operations.md, "The host-CLI
// image"): a valid schedule, runnable by hand, Go from go.mod, and no
// secret (it builds and tests; it publishes nothing). tools/release's
// TestNightlyWorkflowUsesTheseFlags checks what it runs.
func TestHostCLIImageWorkflow(t *testing.T) {
	const rel = ".github/workflows/hostclis-image.yml"
	w := loadWorkflow(t, rel)
	if _, ok := w.On["workflow_dispatch"]; !ok {
		t.Error("the host-CLI image workflow cannot be run by hand: add workflow_dispatch")
	}
	var sched []struct {
		Cron string `yaml:"cron"`
	}
	if n, ok := w.On["schedule"]; !ok || n.Decode(&sched) != nil || len(sched) == 0 {
		t.Fatal("the host-CLI image workflow has no schedule")
	}
	for _, s := range sched {
		if err := validCron(s.Cron); err != nil {
			t.Errorf("cron %q: %v", s.Cron, err)
		}
	}
	for name, j := range w.Jobs {
		if !slices.ContainsFunc(j.Steps, func(s step) bool {
			return strings.HasPrefix(s.Uses, "actions/setup-go@") && s.With["go-version-file"] == "go.mod"
		}) {
			t.Errorf("job %s does not take Go from go.mod", name)
		}
	}
	if refs := secretRef.FindAllString(string(readFile(t, rel)), -1); len(refs) > 0 {
		t.Errorf("the host-CLI image workflow uses secrets %v; it needs none", refs)
	}
}
