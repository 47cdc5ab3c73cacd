package repotest

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// providerSDKs are the module paths of the provider SDKs, without their
// major-version suffix: the only modules the adapters talk to providers
// through.
var providerSDKs = []string{
	"github.com/anthropics/anthropic-sdk-go",
	"github.com/openai/openai-go",
	"google.golang.org/genai",
}

// vendorOwners are module path prefixes that may only hold provider SDKs.
var vendorOwners = []string{"github.com/anthropics/", "github.com/openai/", "google.golang.org/genai"}

var majorSuffix = regexp.MustCompile(`/v[0-9]+$`)

// isProviderSDK reports whether module is one of providerSDKs (any major
// version).
func isProviderSDK(module string) bool {
	base := majorSuffix.ReplaceAllString(module, "")
	for _, p := range providerSDKs {
		if base == p {
			return true
		}
	}
	return false
}

// exactVersion is a released version: vMAJOR.MINOR.PATCH, no pre-release,
// no pseudo-version, no +incompatible.
var exactVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

type requirement struct {
	path, version string
	indirect      bool
}

// goModRequires parses go.mod's require directives (single-line and
// blocks) and the modules its replace directives name.
func goModRequires(data string) (reqs []requirement, replaced map[string]bool) {
	replaced = map[string]bool{}
	block := ""
	for _, raw := range strings.Split(data, "\n") {
		line, comment, _ := strings.Cut(raw, "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case fields[0] == ")":
			block = ""
			continue
		case len(fields) == 2 && fields[1] == "(":
			block = fields[0]
			continue
		}
		kind := block
		if kind == "" {
			kind, fields = fields[0], fields[1:]
		}
		switch kind {
		case "require":
			if len(fields) >= 2 {
				reqs = append(reqs, requirement{path: fields[0], version: fields[1], indirect: strings.TrimSpace(comment) == "indirect"})
			}
		case "replace":
			if len(fields) >= 1 {
				replaced[fields[0]] = true
			}
		}
	}
	return reqs, replaced
}

func TestGoModPinsProviderSDKsExactly(t *testing.T) {
	reqs, replaced := goModRequires(string(readFile(t, "go.mod")))
	sum := string(readFile(t, "go.sum"))
	found := map[string]bool{}
	for _, r := range reqs {
		owned := false
		for _, o := range vendorOwners {
			owned = owned || strings.HasPrefix(r.path, o)
		}
		if !isProviderSDK(r.path) {
			if owned && !r.indirect {
				t.Errorf("go.mod requires %s: a module of a provider's SDK owner that is not a known provider SDK; add it to the SDK group (renovate.json) and to providerSDKs", r.path)
			}
			continue
		}
		found[majorSuffix.ReplaceAllString(r.path, "")] = true
		if !exactVersion.MatchString(r.version) {
			t.Errorf("go.mod requires %s %s: pin a released version exactly (vX.Y.Z), not a pre-release or pseudo-version", r.path, r.version)
		}
		if r.indirect {
			t.Errorf("go.mod requires %s only indirectly; the adapter that uses it should import it", r.path)
		}
		if replaced[r.path] {
			t.Errorf("go.mod replaces %s: the pin must be the version that is built", r.path)
		}
		if !strings.Contains(sum, r.path+" "+r.version+" h1:") {
			t.Errorf("go.sum has no hash for %s %s", r.path, r.version)
		}
	}
	for _, p := range providerSDKs {
		if !found[p] {
			t.Errorf("go.mod does not require the provider SDK %s", p)
		}
	}
}

func TestGoModParser(t *testing.T) {
	reqs, replaced := goModRequires("module x\n\nrequire a.test/b v1.2.3\nrequire (\n\tc.test/d v0.0.0-20240101000000-abcdef123456 // indirect\n)\nreplace a.test/b => ../b\n")
	if len(reqs) != 2 || reqs[0] != (requirement{"a.test/b", "v1.2.3", false}) || reqs[1].path != "c.test/d" || !reqs[1].indirect || !replaced["a.test/b"] {
		t.Errorf("parsed %+v %v", reqs, replaced)
	}
	for v, want := range map[string]bool{"v2.15.0": true, "v3.98.0": true, "v1.2.3-rc.1": false, "v0.0.0-20240101000000-abcdef123456": false, "v2.0.0+incompatible": false} {
		if exactVersion.MatchString(v) != want {
			t.Errorf("exactVersion(%s) = %v, want %v", v, !want, want)
		}
	}
}

// renovateConfig is the part of renovate.json these tests read.
type renovateConfig struct {
	Schedule     []string      `json:"schedule"`
	Automerge    *bool         `json:"automerge"`
	PRCreation   string        `json:"prCreation"`
	PackageRules []packageRule `json:"packageRules"`
}

type packageRule struct {
	MatchManagers     []string `json:"matchManagers"`
	MatchPackageNames []string `json:"matchPackageNames"`
	MatchUpdateTypes  []string `json:"matchUpdateTypes"`
	GroupName         string   `json:"groupName"`
	Schedule          []string `json:"schedule"`
	Automerge         *bool    `json:"automerge"`
}

// matches applies a matchPackageNames entry the way Renovate does for the
// two forms used here: an exact name, or a /regular expression/.
func matches(t *testing.T, pattern, name string) bool {
	if len(pattern) > 2 && strings.HasPrefix(pattern, "/") && strings.HasSuffix(pattern, "/") {
		re, err := regexp.Compile(pattern[1 : len(pattern)-1])
		if err != nil {
			t.Fatalf("renovate.json: pattern %s: %v", pattern, err)
		}
		return re.MatchString(name)
	}
	if strings.ContainsAny(pattern, "*?{}![]") {
		t.Fatalf("renovate.json: pattern %q is a glob; write an exact name or a /regex/ so this test can check it", pattern)
	}
	return pattern == name
}

func (r packageRule) matchesName(t *testing.T, name string) bool {
	for _, p := range r.MatchPackageNames {
		if matches(t, p, name) {
			return true
		}
	}
	return false
}

// weekly reports whether a Renovate schedule runs on one day of the week.
func weekly(schedule []string) bool {
	if len(schedule) == 0 {
		return false
	}
	days := regexp.MustCompile(`(?i)\b(on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b`)
	for _, s := range schedule {
		if days.MatchString(s) && len(days.FindAllString(s, -1)) == 1 {
			continue
		}
		if f := strings.Fields(s); len(f) == 5 && regexp.MustCompile(`^[0-6]$`).MatchString(f[4]) {
			continue
		}
		return false
	}
	return true
}

func TestRenovateGroupsTheProviderSDKsWeekly(t *testing.T) {
	var cfg renovateConfig
	if err := json.Unmarshal(readFile(t, "renovate.json"), &cfg); err != nil {
		t.Fatalf("renovate.json is not valid JSON: %v", err)
	}
	if cfg.Automerge == nil || *cfg.Automerge {
		t.Error("renovate.json must say automerge: false")
	}
	if cfg.PRCreation != "status-success" {
		t.Errorf("prCreation = %q, want status-success: a pull request only once CI is green", cfg.PRCreation)
	}
	reqs, _ := goModRequires(string(readFile(t, "go.mod")))
	var sdks []string
	for _, r := range reqs {
		if isProviderSDK(r.path) {
			sdks = append(sdks, r.path)
		}
	}
	var group *packageRule
	for i, r := range cfg.PackageRules {
		if r.Automerge != nil && *r.Automerge {
			t.Errorf("packageRules[%d] turns automerge on", i)
		}
		if r.GroupName != "" && len(r.MatchPackageNames) > 0 && (len(r.MatchUpdateTypes) == 0 || containsAll(r.MatchUpdateTypes, "minor", "patch")) {
			if r.matchesName(t, sdks[0]) {
				group = &cfg.PackageRules[i]
			}
		}
	}
	if group == nil {
		t.Fatal("renovate.json has no group rule for the provider SDKs' minor and patch updates")
	}
	for _, s := range sdks {
		if !group.matchesName(t, s) {
			t.Errorf("the %q group does not match %s", group.GroupName, s)
		}
		// The next major version is a new module path; it must be caught too.
		next := majorSuffix.ReplaceAllString(s, "") + "/v9"
		if s != "google.golang.org/genai" && !group.matchesName(t, next) {
			t.Errorf("the %q group does not match %s", group.GroupName, next)
		}
	}
	for _, other := range []string{"github.com/spf13/cobra", "github.com/anthropics/other-tool", "google.golang.org/genproto", "github.com/openai/openai-go-extras"} {
		if group.matchesName(t, other) {
			t.Errorf("the %q group also matches %s", group.GroupName, other)
		}
	}
	schedule := group.Schedule
	if len(schedule) == 0 {
		schedule = cfg.Schedule
	}
	if !weekly(schedule) {
		t.Errorf("the provider SDK group's schedule %q is not weekly", schedule)
	}
	if len(group.MatchManagers) > 0 && !containsAll(group.MatchManagers, "gomod") {
		t.Errorf("the group is limited to managers %v, not gomod", group.MatchManagers)
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

func TestWeekly(t *testing.T) {
	for s, want := range map[string]bool{"before 6am on monday": true, "* 0-5 * * 1": true, "after 10pm every weekday": false, "* * * * *": false, "on monday and friday": false} {
		if got := weekly([]string{s}); got != want {
			t.Errorf("weekly(%q) = %v, want %v", s, got, want)
		}
	}
}
