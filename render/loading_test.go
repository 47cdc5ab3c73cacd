package render

import (
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// This file simulates what each host loads from a rendered project, as
// its loading rules are recorded (observed by running Claude Code 2.1.332,
// Codex CLI 0.171.0 and Copilot CLI 1.0.102 against a fake model, and read
// in the Cursor SDK's source), and counts what reaches the model:
//
//   - Claude Code: CLAUDE.md with @imports expanded and HTML comments
//     stripped; AGENTS.md only when there is no CLAUDE.md; .claude/rules
//     without paths at start, with paths when a matching file is read;
//     agents from .claude/agents.
//   - Codex CLI: AGENTS.override.md, else AGENTS.md (comments kept), cut at
//     32 KiB; agents from .codex/agents/*.toml, where a file with an unknown
//     key (a tools list) or without name, description and
//     developer_instructions is dropped.
//   - Copilot CLI: .github/copilot-instructions.md, AGENTS.md, CLAUDE.md
//     with @imports expanded, .github/instructions with applyTo "**" and
//     .claude/rules without paths at start; the others when a matching file
//     is in context; agents from .github/agents (*.agent.md and *.md) and
//     .claude/agents, one per id, .github/agents winning.
//   - Cursor: AGENTS.md (and CLAUDE.md, as is, with third-party
//     extensibility on); .cursor/rules/*.mdc with alwaysApply true at start,
//     with globs when a matching file is in context; agents from
//     .cursor/agents, then .claude/agents with third-party extensibility
//     on, the first of each name winning.

type simFS map[string]string

type simAgent struct {
	name, model, from string
}

type hostSim struct {
	name    string
	host    Host
	start   func(simFS) string              // what is loaded at session start
	scoped  func(simFS, string) string      // what is loaded for a file in context
	agents  func(simFS) map[string]simAgent // the agents offered
	comment bool                            // whether HTML comments reach the model
}

var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->\n?`)

// expandImports expands Claude-style @path lines (relative to the file).
func expandImports(fs simFS, file string, depth int) string {
	text, ok := fs[file]
	if !ok || depth > 5 {
		return ""
	}
	var b strings.Builder
	for _, ln := range strings.SplitAfter(text, "\n") {
		if s := strings.TrimSpace(ln); strings.HasPrefix(s, "@") && !strings.ContainsAny(s, " \t") {
			b.WriteString(expandImports(fs, path.Clean(path.Join(path.Dir(file), s[1:])), depth+1))
			continue
		}
		b.WriteString(ln)
	}
	return b.String()
}

// frontOf splits frontmatter (as a map of top-level YAML-ish keys) and body.
func frontOf(text string) (map[string]string, string) {
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return nil, text
	}
	i := strings.Index(rest, "\n---\n")
	if i < 0 {
		return nil, text
	}
	keys := map[string]string{}
	last := ""
	for _, ln := range strings.Split(rest[:i], "\n") {
		if strings.HasPrefix(ln, "#") || strings.TrimSpace(ln) == "" {
			continue
		}
		if strings.HasPrefix(ln, "  - ") && last != "" {
			keys[last] += "," + strings.Trim(strings.TrimPrefix(ln, "  - "), `"`)
			continue
		}
		k, v, _ := strings.Cut(ln, ":")
		last = strings.TrimSpace(k)
		keys[last] = strings.Trim(strings.TrimSpace(v), `"`)
	}
	for k, v := range keys {
		keys[k] = strings.TrimPrefix(v, ",")
	}
	return keys, rest[i+5:]
}

// globRE turns a host glob (**, *, ?) into a regexp.
func globRE(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case g[i] == '*':
			b.WriteString("[^/]*")
		case g[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func matchAny(globs, file string) bool {
	for _, g := range strings.Split(globs, ",") {
		if g = strings.TrimSpace(g); g != "" && globRE(g).MatchString(file) {
			return true
		}
	}
	return false
}

func filesIn(fs simFS, dir, suffix string) []string {
	var out []string
	for p := range fs {
		if path.Dir(p) == dir && strings.HasSuffix(p, suffix) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func markdownAgents(fs simFS, dir, suffix string, into map[string]simAgent, stemAsID bool) {
	for _, f := range filesIn(fs, dir, suffix) {
		front, body := frontOf(fs[f])
		if front == nil || front["description"] == "" || strings.TrimSpace(body) == "" {
			continue
		}
		id := front["name"]
		if stemAsID || id == "" {
			id = strings.TrimSuffix(strings.TrimSuffix(path.Base(f), ".md"), ".agent")
		}
		if _, dup := into[id]; !dup {
			into[id] = simAgent{name: id, model: front["model"], from: f}
		}
	}
}

var claudeCode = hostSim{
	name: "Claude Code", host: Claude,
	start: func(fs simFS) string {
		var b strings.Builder
		if _, ok := fs[claudeMD]; ok {
			b.WriteString(expandImports(fs, claudeMD, 0))
		} else {
			b.WriteString(fs[agentsMD])
		}
		for _, f := range filesIn(fs, claudeRulesDir, ".md") {
			if front, body := frontOf(fs[f]); front["paths"] == "" {
				b.WriteString(body)
			}
		}
		return htmlComment.ReplaceAllString(b.String(), "")
	},
	scoped: func(fs simFS, file string) string {
		var b strings.Builder
		for _, f := range filesIn(fs, claudeRulesDir, ".md") {
			if front, body := frontOf(fs[f]); front["paths"] != "" && matchAny(front["paths"], file) {
				b.WriteString(body)
			}
		}
		return b.String()
	},
	agents: func(fs simFS) map[string]simAgent {
		out := map[string]simAgent{}
		markdownAgents(fs, claudeAgentsDir, ".md", out, false)
		return out
	},
}

var codexCLI = hostSim{
	name: "Codex CLI", host: Codex, comment: true,
	start: func(fs simFS) string {
		doc, ok := fs["AGENTS.override.md"]
		if !ok {
			doc = fs[agentsMD]
		}
		if len(doc) > codexMaxBytes {
			doc = doc[:codexMaxBytes]
		}
		return doc
	},
	scoped: func(simFS, string) string { return "" }, // no path-scoped rule files
	agents: func(fs simFS) map[string]simAgent {
		out := map[string]simAgent{}
		for _, f := range filesIn(fs, codexAgentsDir, ".toml") {
			var a codexAgent
			md, err := toml.Decode(fs[f], &a)
			if err != nil || len(md.Undecoded()) > 0 || a.Name == "" || a.Description == "" || a.DeveloperInstructions == "" {
				continue // "Ignoring malformed agent role definition"
			}
			out[a.Name] = simAgent{name: a.Name, model: a.Model, from: f}
		}
		return out
	},
}

var copilotCLI = hostSim{
	name: "Copilot CLI", host: Copilot, comment: true,
	start: func(fs simFS) string {
		var b strings.Builder
		b.WriteString(fs[copilotInstructions])
		b.WriteString(fs[agentsMD])
		b.WriteString(expandImports(fs, claudeMD, 0))
		for _, f := range filesIn(fs, copilotScopedRuleDir, ".instructions.md") {
			if front, body := frontOf(fs[f]); front["applyTo"] == "**" {
				b.WriteString(body)
			}
		}
		for _, f := range filesIn(fs, claudeRulesDir, ".md") {
			if front, body := frontOf(fs[f]); front["paths"] == "" {
				b.WriteString(body)
			}
		}
		return b.String()
	},
	scoped: func(fs simFS, file string) string {
		var b strings.Builder
		for _, f := range filesIn(fs, copilotScopedRuleDir, ".instructions.md") {
			if front, body := frontOf(fs[f]); front["applyTo"] != "**" && matchAny(front["applyTo"], file) {
				b.WriteString(body)
			}
		}
		for _, f := range filesIn(fs, claudeRulesDir, ".md") {
			if front, body := frontOf(fs[f]); front["paths"] != "" && matchAny(front["paths"], file) {
				b.WriteString(body)
			}
		}
		return b.String()
	},
	agents: func(fs simFS) map[string]simAgent {
		out := map[string]simAgent{}
		markdownAgents(fs, copilotAgentsDir, ".md", out, true) // .agent.md and .md; id = file stem
		markdownAgents(fs, claudeAgentsDir, ".md", out, true)
		return out
	},
}

func cursorSim(thirdParty bool) hostSim {
	name := "Cursor"
	if thirdParty {
		name += " (third-party extensibility on)"
	}
	return hostSim{
		name: name, host: Cursor, comment: true,
		start: func(fs simFS) string {
			var b strings.Builder
			if thirdParty {
				b.WriteString(fs[claudeMD]) // read as is: no import expansion in Cursor's rule loader
			}
			b.WriteString(fs[agentsMD])
			for _, f := range filesIn(fs, cursorRulesDir, ".mdc") {
				if front, body := frontOf(fs[f]); front["alwaysApply"] == "true" {
					b.WriteString(body)
				}
			}
			return b.String()
		},
		scoped: func(fs simFS, file string) string {
			var b strings.Builder
			for _, f := range filesIn(fs, cursorRulesDir, ".mdc") {
				if front, body := frontOf(fs[f]); front["alwaysApply"] != "true" && matchAny(front["globs"], file) {
					b.WriteString(body)
				}
			}
			return b.String()
		},
		agents: func(fs simFS) map[string]simAgent {
			out := map[string]simAgent{}
			markdownAgents(fs, cursorAgentsDir, ".md", out, false)
			if thirdParty {
				markdownAgents(fs, claudeAgentsDir, ".md", out, false)
			}
			return out
		},
	}
}

var simulatedHosts = []hostSim{claudeCode, codexCLI, copilotCLI, cursorSim(false), cursorSim(true)}

// subsets returns every non-empty subset of the hosts.
func subsets() [][]Host {
	var out [][]Host
	for mask := 1; mask < 1<<len(allHosts); mask++ {
		var s []Host
		for i, h := range allHosts {
			if mask&(1<<i) != 0 {
				s = append(s, h)
			}
		}
		out = append(out, s)
	}
	return out
}

func toSimFS(files []File) simFS {
	fs := simFS{}
	for _, f := range files {
		fs[f.Path] = string(f.Content)
	}
	return fs
}

func contains(hs []Host, h Host) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// wantGateCount is how often rule-critic-gate reaches host's model at
// session start when targets were rendered: once, except in Copilot when
// Claude Code is rendered too. Copilot loads CLAUDE.md and expands its
// @AGENTS.md import as well as loading AGENTS.md itself, and it loads
// every file Claude Code and Codex are known to load at start, so no
// layout can give all three the gate without Copilot seeing it twice.
func wantGateCount(sim hostSim, targets []Host) int {
	if sim.host == Copilot && contains(targets, Claude) {
		return 2
	}
	return 1
}

// TestCriticGateReachesEveryHostOnce renders every subset of hosts and
// counts, per simulated host, the copies of rule-critic-gate that reach
// the model at session start.
func TestCriticGateReachesEveryHostOnce(t *testing.T) {
	for _, c := range goldenCases {
		src := loadCase(t, c.dir)
		gate := src.Rule(CriticGate)
		needle := strings.SplitN(gate.Body, "\n", 2)[0]
		for _, targets := range subsets() {
			files, err := Render(src, targets)
			if err != nil {
				t.Fatal(err)
			}
			fs := toSimFS(files)
			for _, sim := range simulatedHosts {
				if !contains(targets, sim.host) {
					continue
				}
				start := sim.start(fs)
				if got, want := strings.Count(start, needle), wantGateCount(sim, targets); got != want {
					t.Errorf("%s, targets %v: %s sees rule-critic-gate %d times at start, want %d", c.name, targets, sim.name, got, want)
				}
				if got := strings.Count(start, "independent_reviewer: <model-or-agent-id>"); got != wantGateCount(sim, targets) {
					t.Errorf("%s, targets %v: %s sees the independent_reviewer requirement %d times", c.name, targets, sim.name, got)
				}
				if !sim.comment && strings.Contains(start, "<!--") {
					t.Errorf("%s: %s should not see HTML comments", c.name, sim.name)
				}
			}
		}
	}
}

// TestEveryHostGetsEveryPersonaOnce checks the agents each simulated host
// offers: every persona once, under its rendered name, with the model
// meant for that host (so Copilot's own definition wins over the
// .claude/agents one it also reads), and the critic on a different model
// from the planner.
func TestEveryHostGetsEveryPersonaOnce(t *testing.T) {
	for _, c := range goldenCases {
		src := loadCase(t, c.dir)
		for _, targets := range subsets() {
			files, err := Render(src, targets)
			if err != nil {
				t.Fatal(err)
			}
			fs := toSimFS(files)
			for _, sim := range simulatedHosts {
				if !contains(targets, sim.host) {
					continue
				}
				agents := sim.agents(fs)
				if len(agents) != len(src.Personas) {
					t.Errorf("%s, targets %v: %s offers %d agents, want %d", c.name, targets, sim.name, len(agents), len(src.Personas))
				}
				for _, p := range src.Personas {
					a, ok := agents[p.Name]
					if !ok {
						t.Errorf("%s, targets %v: %s lacks %s", c.name, targets, sim.name, p.Name)
						continue
					}
					if a.model != p.Model(sim.host) {
						t.Errorf("%s, targets %v: %s runs %s on %q (from %s), want %q", c.name, targets, sim.name, p.Name, a.model, a.from, p.Model(sim.host))
					}
				}
				if agents["critic"].model == agents["planner"].model {
					t.Errorf("%s: %s runs critic and planner on the same model %q", c.name, sim.name, agents["critic"].model)
				}
				for _, builtin := range builtinAgents[sim.host] {
					for name := range agents {
						if strings.EqualFold(name, builtin) {
							t.Errorf("%s: %s: agent %q clashes with the host's built-in %q", c.name, sim.name, name, builtin)
						}
					}
				}
			}
		}
	}
}

// TestScopedRulesLoadOnlyForMatchingFiles: a path-scoped rule is not loaded
// at start by any host, and is loaded for a matching file by every host
// with path-scoped rule files (twice in Copilot when Claude Code's
// .claude/rules are rendered too, as Copilot reads those as well). Codex,
// which has none, finds the rule's file through the AGENTS.md index.
func TestScopedRulesLoadOnlyForMatchingFiles(t *testing.T) {
	src := loadCase(t, "testdata/project")
	rule := src.Rule("go-style")
	needle := strings.SplitN(rule.Body, "\n", 2)[0]
	for _, targets := range subsets() {
		files, err := Render(src, targets)
		if err != nil {
			t.Fatal(err)
		}
		fs := toSimFS(files)
		for _, sim := range simulatedHosts {
			if !contains(targets, sim.host) {
				continue
			}
			if strings.Contains(sim.start(fs), needle) {
				t.Errorf("targets %v: %s loads the path-scoped rule at start", targets, sim.name)
			}
			want := 1
			switch {
			case sim.host == Codex:
				want = 0
				if !strings.Contains(fs[agentsMD], "`"+rule.ID+"` (`**/*.go`): `"+rule.Source+"`") {
					t.Errorf("AGENTS.md has no index entry pointing Codex to %s", rule.Source)
				}
			case sim.host == Copilot && contains(targets, Claude):
				want = 2
			}
			if got := strings.Count(sim.scoped(fs, "internal/cli/root.go"), needle); got != want {
				t.Errorf("targets %v: %s loads go-style %d times for a .go file, want %d", targets, sim.name, got, want)
			}
			if got := sim.scoped(fs, "README.md"); strings.Contains(got, needle) {
				t.Errorf("targets %v: %s loads go-style for README.md", targets, sim.name)
			}
		}
	}
}

// TestCodexIgnoresToolsList shows why render never writes tools for Codex:
// the simulated Codex drops such an agent.
func TestCodexIgnoresToolsList(t *testing.T) {
	fs := simFS{codexAgentsDir + "/x.toml": "name = \"x\"\ndescription = \"d\"\ndeveloper_instructions = \"i\"\ntools = [\"Read\"]\n"}
	if len(codexCLI.agents(fs)) != 0 {
		t.Fatal("the simulation keeps an agent with a tools list")
	}
}

// TestClaudeNeedsTheImport shows why CLAUDE.md imports AGENTS.md: with a
// CLAUDE.md that lacks the import, Claude Code never sees AGENTS.md.
func TestClaudeNeedsTheImport(t *testing.T) {
	fs := simFS{agentsMD: "the rules\n", claudeMD: "notes\n"}
	if strings.Contains(claudeCode.start(fs), "the rules") {
		t.Fatal("simulated Claude Code read AGENTS.md beside a CLAUDE.md without the import")
	}
	fs[claudeMD] = "notes\n@AGENTS.md\n"
	if strings.Count(claudeCode.start(fs), "the rules") != 1 {
		t.Fatal("the import does not load AGENTS.md once")
	}
}
