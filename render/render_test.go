package render

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// The test cases: the built-in sources alone, and a project with overrides,
// a custom persona, an always-on rule and path-scoped rules.
var goldenCases = []struct{ name, dir string }{
	{"default", ""},
	{"project", "testdata/project"},
}

func loadCase(t testing.TB, dir string) *Sources {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	src, err := LoadSources(dir)
	if err != nil {
		t.Fatalf("LoadSources(%s): %v", dir, err)
	}
	return src
}

func renderCase(t testing.TB, dir string, targets ...Host) []File {
	t.Helper()
	files, err := Render(loadCase(t, dir), targets)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return files
}

// concat writes files in one golden text, each under a "==> path <==" line.
func concat(files []File) []byte {
	var b bytes.Buffer
	for i, f := range files {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("==> " + f.Path + " <==\n")
		b.Write(f.Content)
	}
	return b.Bytes()
}

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./render -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered output (run go test ./render -update and review the diff):\n%s", file, firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(same lines)"
}

// TestGolden compares each host's files, rendered for that host alone, and
// the shared AGENTS.md, with testdata/golden/<case>/<host>.golden.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			for _, h := range allHosts {
				var own []File
				for _, f := range renderCase(t, c.dir, h) {
					if f.Path != agentsMD {
						own = append(own, f)
					}
				}
				checkGolden(t, filepath.Join("testdata", "golden", c.name, string(h)+".golden"), concat(own))
			}
			for _, f := range renderCase(t, c.dir) {
				if f.Path == agentsMD {
					checkGolden(t, filepath.Join("testdata", "golden", c.name, "AGENTS.md.golden"), f.Content)
				}
			}
		})
	}
}

// TestRenderIsDeterministic renders the same sources many times, and for
// host subsets, and expects the same bytes for each file every time.
func TestRenderIsDeterministic(t *testing.T) {
	for _, c := range goldenCases {
		first := concat(renderCase(t, c.dir))
		for range 20 {
			if got := concat(renderCase(t, c.dir)); !bytes.Equal(got, first) {
				t.Fatalf("%s: two renders differ:\n%s", c.name, firstDiff(string(first), string(got)))
			}
		}
		all := map[string][]byte{}
		for _, f := range renderCase(t, c.dir) {
			all[f.Path] = f.Content
		}
		for _, h := range allHosts {
			for _, f := range renderCase(t, c.dir, h) {
				if !bytes.Equal(all[f.Path], f.Content) {
					t.Errorf("%s: %s rendered for %s alone differs from the all-host render", c.name, f.Path, h)
				}
			}
		}
	}
}

// TestModelsDifferPerHost: no persona's model string is copied to every host.
func TestModelsDifferPerHost(t *testing.T) {
	src := loadCase(t, "")
	for _, p := range src.Personas {
		seen := map[string][]Host{}
		for _, h := range allHosts {
			m := p.Model(h)
			if m == "" {
				t.Errorf("built-in %s has no %s model", p.ID, h)
			}
			seen[m] = append(seen[m], h)
		}
		for m, hs := range seen {
			if len(hs) == len(allHosts) {
				t.Errorf("%s uses %q on every host", p.ID, m)
			}
		}
	}
	for _, h := range allHosts {
		if cm, pm := src.Persona(criticID).Model(h), src.Persona(plannerID).Model(h); cm == pm {
			t.Errorf("%s: critic and planner share %q", h, cm)
		}
	}
}

func TestAgentNames(t *testing.T) {
	for id, want := range map[string]string{
		"explore": "cortex-explore", // Copilot's and Cursor's built-in
		"Explore": "cortex-Explore",
		"plan":    "cortex-plan", // Claude Code's Plan
		"planner": "planner",
		"worker":  "cortex-worker", // Codex
		"critic":  "critic",
	} {
		if got := agentName(id); got != want {
			t.Errorf("agentName(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestParseTargets(t *testing.T) {
	for in, want := range map[string]string{
		"all":                          "claude,codex,copilot,cursor",
		"cursor,claude":                "claude,cursor",
		" Codex , codex ":              "codex",
		"claude,all":                   "claude,codex,copilot,cursor",
		"claude,codex,copilot,cursor ": "claude,codex,copilot,cursor",
	} {
		got, err := ParseTargets(in)
		if err != nil || joinHosts(got) != strings.ReplaceAll(want, ",", ", ") {
			t.Errorf("ParseTargets(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "vscode", "claude,gemini", ","} {
		_, err := ParseTargets(in)
		if err == nil || !strings.Contains(err.Error(), "claude, codex, copilot, cursor, or all") {
			t.Errorf("ParseTargets(%q) error = %v, want one naming the valid targets", in, err)
		}
	}
}

func TestCriticBodyEndsWithIndependentReviewer(t *testing.T) {
	for _, c := range goldenCases {
		for _, f := range renderCase(t, c.dir) {
			if !strings.Contains(f.Path, "/critic.") {
				continue
			}
			body := strings.TrimRight(string(f.Content), "\n'")
			if !strings.HasSuffix(body, "independent_reviewer: <model-or-agent-id>") {
				t.Errorf("%s/%s does not end with the independent_reviewer line:\n...%s", c.name, f.Path, body[max(0, len(body)-200):])
			}
			if n := strings.Count(string(f.Content), "\nindependent_reviewer: <model-or-agent-id>"); n != 1 {
				t.Errorf("%s/%s has the independent_reviewer line %d times", c.name, f.Path, n)
			}
		}
	}
}
