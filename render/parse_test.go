package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/cortexbuild/cortexbuild/internal/agentmark"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"
)

// This file parses every rendered file back, strictly, in the format its
// host reads: YAML frontmatter with only the keys the host knows, TOML
// with only Codex's agent keys, Cursor's line-based agent frontmatter.

// splitFront splits a file into frontmatter (without the --- lines) and
// body; ok is false when the file has no frontmatter.
func splitFront(t *testing.T, name string, data []byte) (front, body string, ok bool) {
	t.Helper()
	s := string(data)
	rest, found := strings.CutPrefix(s, "---\n")
	if !found {
		return "", s, false
	}
	i := strings.Index(rest, "\n---\n")
	if i < 0 {
		t.Fatalf("%s: frontmatter not closed", name)
	}
	return rest[:i+1], rest[i+5:], true
}

// strictYAML decodes front into out, refusing unknown keys.
func strictYAML(t *testing.T, name, front string, out any) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(front))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		t.Errorf("%s: frontmatter is not the host's YAML: %v\n%s", name, err, front)
	}
}

type claudeAgent struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Tools       string `yaml:"tools"`
	Model       string `yaml:"model"`
}

type claudeRule struct {
	Paths []string `yaml:"paths"`
}

type codexAgent struct {
	Name                  string `toml:"name"`
	Description           string `toml:"description"`
	Model                 string `toml:"model"`
	SandboxMode           string `toml:"sandbox_mode"`
	DeveloperInstructions string `toml:"developer_instructions"`
}

type copilotAgent struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Tools       []string `yaml:"tools"`
	Model       string   `yaml:"model"`
}

type copilotInstruction struct {
	ApplyTo     string `yaml:"applyTo"`
	Description string `yaml:"description"`
}

type cursorRule struct {
	Description string `yaml:"description"`
	Globs       string `yaml:"globs"`
	AlwaysApply *bool  `yaml:"alwaysApply"`
}

// cursorAgentFront parses agent frontmatter the way Cursor does (its SDK's
// subagent loader): line by line, skipping blank lines and # comments,
// splitting each line at its first colon, lower-casing the key and keeping
// the value as written (no quote removal, no lists, no multi-line values).
// It also fails on anything that parser would misread.
func cursorAgentFront(t *testing.T, name, front string) map[string]string {
	t.Helper()
	out := map[string]string{}
	known := []string{"name", "description", "model", "readonly", "is_background", "background", "force-default-model", "tools"}
	for _, ln := range strings.Split(strings.TrimSuffix(front, "\n"), "\n") {
		s := strings.TrimSpace(ln)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, ":")
		if !ok {
			t.Errorf("%s: Cursor ignores the line %q (no colon)", name, ln)
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch {
		case !slices.Contains(known, k):
			t.Errorf("%s: Cursor does not know the key %q", name, k)
		case v == "" || strings.HasPrefix(v, "[") || strings.HasPrefix(v, "-") || strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">"):
			t.Errorf("%s: %s: %q is not a single-line scalar Cursor can read", name, k, v)
		case strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "'"):
			t.Errorf("%s: %s: Cursor keeps quotes, so %s would be read with them", name, k, v)
		case out[k] != "":
			t.Errorf("%s: %s is set twice", name, k)
		}
		out[k] = v
	}
	return out
}

// cursorRuleFront parses .mdc frontmatter the way Cursor's project rule
// loader does: line by line, "key: value" split at the first colon (comment
// lines included), one pair of surrounding quotes removed, no unescaping.
func cursorRuleFront(front string) map[string]string {
	out := map[string]string{}
	for _, ln := range strings.Split(front, "\n") {
		k, v, ok := strings.Cut(ln, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

var copilotToolAliases = []string{"execute", "read", "edit", "search", "agent", "web", "todo"}

var claudeToolNames = []string{"Read", "Grep", "Glob", "Edit", "Write", "Bash", "WebFetch", "WebSearch", "Agent", "TodoWrite"}

// TestOutputsParseBack renders every case for every host and parses each
// file back as its host would.
func TestOutputsParseBack(t *testing.T) {
	for _, c := range goldenCases {
		src := loadCase(t, c.dir)
		files, err := Render(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		personas := map[string]*Persona{}
		for _, p := range withCriticClosing(src.Personas) {
			personas[p.Name] = p
		}
		seen := map[string]int{}
		for _, f := range files {
			name := c.name + ":" + f.Path
			front, body, hasFront := splitFront(t, name, f.Content)
			dir, base := path.Dir(f.Path), path.Base(f.Path)
			if !utf8Clean(f.Content) {
				t.Errorf("%s: not clean UTF-8 text", name)
			}
			if !bytes.HasSuffix(f.Content, []byte("\n")) || bytes.HasSuffix(f.Content, []byte("\n\n")) {
				t.Errorf("%s: should end with exactly one newline", name)
			}
			switch {
			case f.Path == agentsMD || f.Path == claudeMD || f.Path == copilotInstructions:
				if hasFront {
					t.Errorf("%s: must not have frontmatter", name)
				}
				if !strings.HasPrefix(body, "<!-- Generated by cortexbuild render.") {
					t.Errorf("%s: no generated-file marker on line 1", name)
				}
				if f.Path == claudeMD && !hasImportLine(f.Content) {
					t.Errorf("%s: does not import @AGENTS.md", name)
				}
			case dir == claudeAgentsDir:
				var a claudeAgent
				strictYAML(t, name, front, &a)
				p := personas[a.Name]
				if p == nil || base != a.Name+".md" || strings.Contains(a.Name, ":") {
					t.Fatalf("%s: name %q does not match a persona and the file name", name, a.Name)
				}
				seen["claude"]++
				check(t, name, "description", a.Description, p.Description)
				check(t, name, "model", a.Model, p.Model(Claude))
				checkPrompt(t, name, body, p, src, false)
				for _, tool := range splitComma(a.Tools) {
					if !slices.Contains(claudeToolNames, tool) {
						t.Errorf("%s: unknown Claude Code tool %q", name, tool)
					}
				}
				if p.ReadOnly() && slices.ContainsFunc(splitComma(a.Tools), func(s string) bool { return s == "Edit" || s == "Write" || s == "Bash" }) {
					t.Errorf("%s: read-only persona has tools %q", name, a.Tools)
				}
				if p.ID == criticID && a.Tools != "Read, Grep, Glob" {
					t.Errorf("%s: critic tools %q, want Read, Grep, Glob", name, a.Tools)
				}
			case dir == claudeRulesDir:
				var r claudeRule
				strictYAML(t, name, front, &r)
				rule := src.Rule(strings.TrimSuffix(base, ".md"))
				if rule == nil || !slices.Equal(r.Paths, rule.Paths) {
					t.Errorf("%s: paths %q do not match the rule's", name, r.Paths)
				}
				check(t, name, "body", body, rule.Body)
			case dir == codexAgentsDir:
				if hasFront {
					t.Errorf("%s: TOML file starts with ---", name)
				}
				var a codexAgent
				md, err := toml.Decode(string(f.Content), &a)
				if err != nil {
					t.Errorf("%s: not TOML: %v", name, err)
					continue
				}
				if und := md.Undecoded(); len(und) > 0 {
					t.Errorf("%s: keys Codex's agent schema does not have: %v", name, und)
				}
				for _, k := range []string{"name", "description", "developer_instructions"} {
					if !md.IsDefined(k) {
						t.Errorf("%s: Codex requires %s", name, k)
					}
				}
				if md.IsDefined("tools") {
					t.Errorf("%s: a tools list makes Codex drop the agent", name)
				}
				p := personas[a.Name]
				if p == nil || base != a.Name+".toml" {
					t.Fatalf("%s: name %q does not match a persona and the file name", name, a.Name)
				}
				seen["codex"]++
				check(t, name, "description", a.Description, p.Description)
				check(t, name, "model", a.Model, p.Model(Codex))
				checkPrompt(t, name, a.DeveloperInstructions, p, src, false)
				if slices.Contains(claudeAliases, a.Model) {
					t.Errorf("%s: Claude alias %q as a Codex model", name, a.Model)
				}
				if want := map[bool]string{true: "read-only"}[p.ReadOnly()]; a.SandboxMode != want {
					t.Errorf("%s: sandbox_mode = %q, want %q", name, a.SandboxMode, want)
				}
			case dir == copilotAgentsDir:
				var a copilotAgent
				strictYAML(t, name, front, &a)
				id, ok := strings.CutSuffix(base, ".agent.md")
				p := personas[a.Name]
				if !ok || p == nil || id != a.Name {
					t.Fatalf("%s: name %q does not match a persona and the file name", name, a.Name)
				}
				seen["copilot"]++
				check(t, name, "description", a.Description, p.Description)
				check(t, name, "model", a.Model, p.Model(Copilot))
				checkPrompt(t, name, body, p, src, true)
				for _, tool := range a.Tools {
					if !slices.Contains(copilotToolAliases, tool) {
						t.Errorf("%s: %q is not a Copilot tool alias", name, tool)
					}
				}
				if len(body) > 30000 {
					t.Errorf("%s: body over Copilot's 30,000 characters", name)
				}
			case dir == copilotScopedRuleDir:
				var r copilotInstruction
				strictYAML(t, name, front, &r)
				rule := src.Rule(strings.TrimSuffix(base, ".instructions.md"))
				if rule == nil || r.ApplyTo != strings.Join(rule.Paths, ",") || r.Description != rule.Description {
					t.Errorf("%s: applyTo %q / description %q do not match the rule", name, r.ApplyTo, r.Description)
				}
				check(t, name, "body", body, rule.Body)
			case dir == cursorRulesDir:
				var r cursorRule
				strictYAML(t, name, front, &r)
				rule := src.Rule(strings.TrimSuffix(base, ".mdc"))
				if rule == nil || !slices.Equal(cursorGlobs(r.Globs), rule.Paths) || r.AlwaysApply == nil || *r.AlwaysApply {
					t.Errorf("%s: globs %q / alwaysApply do not match the rule", name, r.Globs)
				}
				check(t, name, "body", body, rule.Body)
				kt := cursorRuleFront(front)
				for k := range kt {
					if k != "description" && k != "globs" && k != "alwaysApply" {
						t.Errorf("%s: Cursor's rule loader reads a key %q", name, k)
					}
				}
				if !slices.Equal(cursorGlobs(kt["globs"]), rule.Paths) || kt["alwaysApply"] != "false" || kt["description"] != rule.Description {
					t.Errorf("%s: Cursor's rule loader reads %q", name, kt)
				}
			case dir == cursorAgentsDir:
				a := cursorAgentFront(t, name, front)
				p := personas[a["name"]]
				if p == nil || base != a["name"]+".md" {
					t.Fatalf("%s: name %q does not match a persona and the file name", name, a["name"])
				}
				seen["cursor"]++
				check(t, name, "description", a["description"], p.Description)
				check(t, name, "model", a["model"], p.Model(Cursor))
				check(t, name, "readonly", a["readonly"], map[bool]string{true: "true"}[p.ReadOnly()])
				if strings.TrimSpace(body) == "" {
					t.Errorf("%s: Cursor skips an agent with an empty body", name)
				}
				checkPrompt(t, name, body, p, src, false)
			default:
				t.Errorf("%s: unexpected output file", name)
			}
			isPersona := dir == claudeAgentsDir || dir == codexAgentsDir || dir == copilotAgentsDir || dir == cursorAgentsDir
			if a, err := agentmark.Find(string(f.Content)); !isPersona && (a != "" || err != nil) {
				t.Errorf("%s: carries an agent marker line (%q, %v); only personas may", name, a, err)
			}
			if !ownedPath(f.Path) {
				t.Errorf("%s: written outside the paths render owns", name)
			}
			if hasFront && !strings.HasPrefix(front, "# Generated by cortexbuild render from ") {
				t.Errorf("%s: frontmatter does not start with the generated-file marker", name)
			}
			if dir == codexAgentsDir && !strings.HasPrefix(string(f.Content), "# Generated by cortexbuild render from ") {
				t.Errorf("%s: no generated-file marker", name)
			}
		}
		for _, h := range allHosts {
			if seen[string(h)] != len(src.Personas) {
				t.Errorf("%s: %d %s agents, want %d", c.name, seen[string(h)], h, len(src.Personas))
			}
		}
	}
}

// checkPrompt checks a rendered persona's prompt: the agentmark line naming
// the CortexBuild agent (p.ID, also for cortex-explore) alone on the first
// line, then the persona's body. withRules: the always-on rules follow the
// persona text, under the generated heading, before the critic's closing.
func checkPrompt(t *testing.T, name, got string, p *Persona, src *Sources, withRules bool) {
	t.Helper()
	rest, ok := strings.CutPrefix(got, agentmark.Line(p.ID)+"\n")
	if !ok {
		t.Errorf("%s: the first line is not %q: %q", name, agentmark.Line(p.ID), got[:min(len(got), 80)])
		return
	}
	if a, err := agentmark.Find(got); a != p.ID || err != nil {
		t.Errorf("%s: agentmark.Find = %q, %v; want %q", name, a, err, p.ID)
	}
	var always []*Rule
	for _, r := range src.Rules {
		if !r.Scoped() {
			always = append(always, r)
		}
	}
	if withRules && len(always) > 0 {
		start := strings.Index(rest, "\n"+subagentRulesHeading+"\n")
		if start < 0 {
			t.Errorf("%s: no %q section", name, subagentRulesHeading)
			return
		}
		end := start
		for _, r := range always {
			block := "\n### " + r.ID + "\n\n" + r.Body
			i := strings.Index(rest[end:], block)
			if i < 0 {
				t.Errorf("%s: the always-on rule %s is missing after the persona text", name, r.ID)
				return
			}
			end += i + len(block)
		}
		for _, r := range src.Rules {
			if r.Scoped() && strings.Contains(rest, "### "+r.ID+"\n") {
				t.Errorf("%s: carries the path-scoped rule %s", name, r.ID)
			}
		}
		rest = rest[:start] + rest[end:]
	}
	check(t, name, "body", rest, p.Body)
}

func check(t *testing.T, name, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: %s = %q, want %q", name, what, got, want)
	}
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// cursorGlobs splits a globs string as Cursor does: at commas outside
// braces.
func cursorGlobs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch {
		case r == '{':
			depth++
		case r == '}' && depth > 0:
			depth--
		case r == ',' && depth == 0:
			if g := strings.TrimSpace(s[start:i]); g != "" {
				out = append(out, g)
			}
			start = i + 1
		}
	}
	if g := strings.TrimSpace(s[start:]); g != "" {
		out = append(out, g)
	}
	return out
}

var invalidText = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f]")

func utf8Clean(b []byte) bool {
	return !invalidText.Match(b) && strings.ToValidUTF8(string(b), "\ufffd") == string(b)
}

// TestManifestParsesBack reads the manifest written by a render strictly
// and checks its hashes against the files.
func TestManifestParsesBack(t *testing.T) {
	dir := t.TempDir()
	p := mustPlan(t, Options{Dir: dir})
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	m, data, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatalf("manifest is not JSON: %v", err)
	}
	if len(m.Files) != len(p.Actions) || !slices.Equal(m.Targets, allHosts) {
		t.Errorf("manifest has %d files and targets %v; want %d and all hosts", len(m.Files), m.Targets, len(p.Actions))
	}
	for _, e := range m.Files {
		got := readFile(t, dir, e.Path)
		if hashOf(got) != e.SHA256 {
			t.Errorf("%s: hash in manifest does not match the file", e.Path)
		}
	}
	if !bytes.Equal(mustEncode(t, m), data) {
		t.Errorf("manifest does not round-trip byte for byte")
	}
}

func mustEncode(t *testing.T, m *manifest) []byte {
	t.Helper()
	b, err := m.encode()
	if err != nil {
		t.Fatal(fmt.Errorf("encode: %w", err))
	}
	return b
}
