package render

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cortexbuild/cortexbuild/internal/agentmark"
	"github.com/cortexbuild/cortexbuild/internal/yamlx"
)

// File is one file render writes.
type File struct {
	Path    string // slash-separated, relative to the project directory
	Hosts   []Host // the hosts the file is written for
	Content []byte
	// accept, when set, reports whether an existing file that render did
	// not write already does this file's job; render then leaves it alone.
	accept func(existing []byte) bool
	// acceptNote says why such a file is left alone.
	acceptNote string
}

// Output paths. Per host loading rules: AGENTS.md is the canonical home of
// the always-on rules (Codex, Copilot and Cursor read it; Claude Code reads
// it through CLAUDE.md's import).
const (
	agentsMD             = "AGENTS.md"
	claudeMD             = "CLAUDE.md"
	claudeAgentsDir      = ".claude/agents"
	claudeRulesDir       = ".claude/rules"
	codexAgentsDir       = ".codex/agents"
	copilotInstructions  = ".github/copilot-instructions.md"
	copilotAgentsDir     = ".github/agents"
	copilotScopedRuleDir = ".github/instructions"
	cursorRulesDir       = ".cursor/rules"
	cursorAgentsDir      = ".cursor/agents"
)

// ownedPrefixes are the only places render writes; a manifest naming
// anything else is refused.
var ownedPrefixes = []string{
	claudeAgentsDir + "/", claudeRulesDir + "/", codexAgentsDir + "/", copilotAgentsDir + "/",
	copilotScopedRuleDir + "/", cursorRulesDir + "/", cursorAgentsDir + "/",
}

func ownedPath(p string) bool {
	if p == agentsMD || p == claudeMD || p == copilotInstructions {
		return true
	}
	for _, pre := range ownedPrefixes {
		if rest, ok := strings.CutPrefix(p, pre); ok && rest != "" && !strings.Contains(rest, "/") {
			return true
		}
	}
	return false
}

// criticClosing ends every critic persona's instructions (rule-critic-gate).
const criticClosing = `## Closing line (required)

You are the independent reviewer rule-critic-gate asks for. If you run on the model that wrote
the plan, say so and do not approve. End your output with this line, alone, naming the model or
agent id you run on:

independent_reviewer: <model-or-agent-id>
`

// Render turns the sources into the files of the target hosts (every host
// when targets is empty), sorted by path. It refuses, with a *SourceError,
// a configuration where a host's critic model is unset, inherit, or the
// planner's model on that host.
func Render(src *Sources, targets []Host) ([]File, error) {
	targets, err := normalizeTargets(targets)
	if err != nil {
		return nil, err
	}
	if err := checkCriticModels(src, targets); err != nil {
		return nil, err
	}
	r := &renderer{src: src, personas: withCriticClosing(src.Personas)}
	files := []File{r.agentsMD()}
	for _, h := range targets {
		switch h {
		case Claude:
			files = append(files, r.claude()...)
		case Codex:
			files = append(files, r.codex()...)
		case Copilot:
			files = append(files, r.copilot()...)
		case Cursor:
			files = append(files, r.cursor()...)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// normalizeTargets returns targets in host order without duplicates, or
// every host when targets is empty.
func normalizeTargets(targets []Host) ([]Host, error) {
	if len(targets) == 0 {
		return slices.Clone(allHosts), nil
	}
	var out []Host
	for _, h := range allHosts {
		if slices.Contains(targets, h) {
			out = append(out, h)
		}
	}
	for _, h := range targets {
		if !h.valid() {
			return nil, fmt.Errorf("%w %q (valid targets: %s)", ErrUnknownTarget, h, joinHosts(allHosts))
		}
	}
	return out, nil
}

// checkCriticModels enforces rule-critic-gate at render time.
func checkCriticModels(src *Sources, targets []Host) error {
	critic, planner := src.Persona(criticID), src.Persona(plannerID)
	if critic == nil || planner == nil {
		return fmt.Errorf("render: the planner and critic personas are missing")
	}
	var errs yamlx.Errors
	for _, h := range targets {
		cm, pm := critic.Model(h), planner.Model(h)
		switch {
		case cm == "":
			word := "unset"
			if critic.Models[h] != "" {
				word = fmt.Sprintf("%q", critic.Models[h])
			}
			errs = append(errs, critic.modelAt(h).Errorf("models.%s: the critic's %s model is %s; rule-critic-gate needs the critic on a named model different from the planner's (%s), so that it cannot fall back to the session's model: set models.%s in %s",
				h, h.Title(), word, orDefault(pm), h, critic.editPath()))
		case strings.EqualFold(cm, pm):
			// Blame the project setting that made them equal.
			blame, other := critic, planner
			if _, set := critic.modelPos[h]; !set {
				blame, other = planner, critic
			}
			errs = append(errs, blame.modelAt(h).Errorf("models.%s: on %s the critic and the planner would both run on %q (the %s's model comes from %s); rule-critic-gate needs the critic on a different model from the plan's author: change one of them",
				h, h.Title(), cm, other.ID, other.origin()))
		}
	}
	if len(errs) > 0 {
		return &SourceError{Errs: errs}
	}
	return nil
}

func orDefault(m string) string {
	if m == "" {
		return "the host's default"
	}
	return fmt.Sprintf("%q", m)
}

// modelAt is where p's model for h was set, for messages.
func (p *Persona) modelAt(h Host) yamlx.Pos {
	if at, ok := p.modelPos[h]; ok {
		return at
	}
	if p.Source != "" {
		return p.pos
	}
	return yamlx.Pos{File: p.origin()}
}

// editPath is the project file that overrides p.
func (p *Persona) editPath() string {
	if p.Source != "" {
		return p.Source
	}
	return AgentsDir + "/" + p.ID + ".md"
}

// withCriticClosing returns personas with the critic's body ending in the
// independent_reviewer instruction (added unless the body already ends
// with that line).
func withCriticClosing(ps []*Persona) []*Persona {
	out := make([]*Persona, len(ps))
	for i, p := range ps {
		out[i] = p
		if p.ID != criticID {
			continue
		}
		lines := strings.Split(strings.TrimRight(p.Body, "\n"), "\n")
		if strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "independent_reviewer:") {
			continue
		}
		c := *p
		c.Body = p.Body + "\n" + criticClosing
		out[i] = &c
	}
	return out
}

// personaText is the prompt a host gets for persona p: the agentmark line
// naming the CortexBuild agent (p.ID, the name the gateway knows, also when
// the file is cortex-<id>), then the body. A Copilot subagent's prompt is
// its persona alone (Copilot does not give it AGENTS.md), so there the
// always-on rules follow the persona text. The critic's closing line stays
// last.
func (r *renderer) personaText(p *Persona, h Host) string {
	body, closing := p.Body, ""
	if p.ID == criticID {
		body, closing = splitClosing(p.Body)
	}
	var b strings.Builder
	b.WriteString(agentmark.Line(p.ID) + "\n")
	b.WriteString(body)
	if h == Copilot {
		b.WriteString(r.subagentRules())
	}
	b.WriteString(closing)
	return b.String()
}

// splitClosing splits a critic body into its text and its closing: the
// criticClosing section render appended, or the body's own final
// independent_reviewer line.
func splitClosing(body string) (text, closing string) {
	if t, ok := strings.CutSuffix(body, "\n"+criticClosing); ok {
		return t + "\n", criticClosing
	}
	trimmed := strings.TrimRight(body, "\n")
	i := strings.LastIndex(trimmed, "\n")
	if i < 0 || !strings.HasPrefix(strings.TrimSpace(trimmed[i+1:]), "independent_reviewer:") {
		return body, ""
	}
	return body[:i+1], body[i+1:]
}

// subagentRulesHeading opens the always-on rules in a Copilot persona.
const subagentRulesHeading = "## Project rules (generated by cortexbuild render from " + RulesDir + "/)"

// subagentRules is every always-on rule, for a persona whose host does not
// give its subagents the project's instruction files.
func (r *renderer) subagentRules() string {
	rules := r.alwaysOn()
	if len(rules) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + subagentRulesHeading + "\n\n")
	b.WriteString("These are the rules of AGENTS.md, which this tool does not load for you; they apply to your work too.\n")
	for _, rule := range rules {
		fmt.Fprintf(&b, "\n### %s\n\n%s", rule.ID, rule.Body)
	}
	return b.String()
}

type renderer struct {
	src      *Sources
	personas []*Persona
}

func (r *renderer) alwaysOn() []*Rule {
	var out []*Rule
	for _, rule := range r.src.Rules {
		if !rule.Scoped() {
			out = append(out, rule)
		}
	}
	return out
}

func (r *renderer) scoped() []*Rule {
	var out []*Rule
	for _, rule := range r.src.Rules {
		if rule.Scoped() {
			out = append(out, rule)
		}
	}
	return out
}

// markdownMarker is the generated-file marker of a Markdown file without
// frontmatter (an HTML comment: Claude Code strips it, the others show it).
func markdownMarker(what string) string {
	return "<!-- Generated by cortexbuild render. Do not edit; " + what + " -->\n"
}

// personaMarker is the marker comment (YAML or TOML, both start with #)
// at the top of a persona's frontmatter or TOML file.
func personaMarker(p *Persona) string {
	if p.Source != "" {
		return "# Generated by cortexbuild render from " + p.Source + ". Do not edit; change that file and run cortexbuild render.\n"
	}
	return "# Generated by cortexbuild render from the built-in " + p.ID + " persona. Do not edit; override it in " + p.editPath() + " and run cortexbuild render.\n"
}

func ruleMarker(rule *Rule) string {
	return "# Generated by cortexbuild render from " + rule.Source + ". Do not edit; change that file and run cortexbuild render.\n"
}

// agentsMD renders AGENTS.md: every always-on rule, the persona roster (Codex
// spawns agents only when instructions ask it to) and an index of the
// path-scoped rules for hosts without path-scoped rule files. Its content
// does not depend on the targets, so rendering one host never rewrites it
// for another.
func (r *renderer) agentsMD() File {
	var b strings.Builder
	b.WriteString(markdownMarker("change .cortexbuild/rules/ or .cortexbuild/agents/ and run cortexbuild render."))
	b.WriteString("# Project rules\n\n")
	b.WriteString("These rules apply to every task in this repository, whichever AI coding tool runs it. This\n")
	b.WriteString("file is their one home; the tools' own instruction files point here instead of repeating them.\n")
	for _, rule := range r.alwaysOn() {
		fmt.Fprintf(&b, "\n## %s\n\n%s", rule.ID, rule.Body)
	}
	b.WriteString("\n## Agent personas\n\n")
	b.WriteString("This project defines these agents. Spawn the matching one when a task calls for it; each\n")
	b.WriteString("runs on the model its definition names.\n\n")
	for _, p := range r.personas {
		fmt.Fprintf(&b, "- `%s`: %s\n", p.Name, p.Description)
	}
	if scoped := r.scoped(); len(scoped) > 0 {
		b.WriteString("\n## Path-scoped rules\n\n")
		b.WriteString("These rules apply only to matching files. Tools that load path-scoped rules themselves\n")
		b.WriteString("already have them; otherwise read the rule's file before you change a matching file.\n\n")
		for _, rule := range scoped {
			fmt.Fprintf(&b, "- `%s` (%s): `%s`. %s\n", rule.ID, codeList(rule.Paths), rule.Source, rule.Description)
		}
	}
	return File{Path: agentsMD, Hosts: slices.Clone(allHosts), Content: []byte(b.String())}
}

func codeList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, ", ")
}

// hasImportLine reports whether a CLAUDE.md imports AGENTS.md.
func hasImportLine(data []byte) bool {
	for _, ln := range strings.Split(string(data), "\n") {
		if s := strings.TrimSpace(ln); s == "@AGENTS.md" || s == "@./AGENTS.md" {
			return true
		}
	}
	return false
}

// claude renders Claude Code's files: CLAUDE.md importing AGENTS.md (Claude
// Code reads AGENTS.md only when there is no CLAUDE.md, so the import
// gives it the rules exactly once), one subagent per persona, and the
// path-scoped rules as .claude/rules with paths (lazy: loaded when Claude
// reads a matching file). Always-on rules never go to .claude/rules.
func (r *renderer) claude() []File {
	files := []File{{
		Path:       claudeMD,
		Hosts:      []Host{Claude},
		Content:    []byte(markdownMarker("the project's rules are in AGENTS.md, imported on the next line.") + "@AGENTS.md\n"),
		accept:     hasImportLine,
		acceptNote: "not written by cortexbuild render, but it already imports @AGENTS.md",
	}}
	for _, p := range r.personas {
		var b strings.Builder
		b.WriteString("---\n")
		b.WriteString(personaMarker(p))
		fmt.Fprintf(&b, "name: %s\n", p.Name)
		fmt.Fprintf(&b, "description: %s\n", yamlScalar(p.Description))
		if p.Tools != nil {
			var names []string
			for _, t := range p.Tools {
				names = append(names, claudeTools[t]...)
			}
			fmt.Fprintf(&b, "tools: %s\n", strings.Join(names, ", "))
		}
		if m := p.Model(Claude); m != "" {
			fmt.Fprintf(&b, "model: %s\n", yamlScalar(m))
		}
		b.WriteString("---\n")
		b.WriteString(r.personaText(p, Claude))
		files = append(files, File{Path: claudeAgentsDir + "/" + p.Name + ".md", Hosts: []Host{Claude}, Content: []byte(b.String())})
	}
	for _, rule := range r.scoped() {
		var b strings.Builder
		b.WriteString("---\n")
		b.WriteString(ruleMarker(rule))
		b.WriteString("paths:\n")
		for _, g := range rule.Paths {
			fmt.Fprintf(&b, "  - %s\n", yamlScalarQuoted(g))
		}
		b.WriteString("---\n")
		b.WriteString(rule.Body)
		files = append(files, File{Path: claudeRulesDir + "/" + rule.ID + ".md", Hosts: []Host{Claude}, Content: []byte(b.String())})
	}
	return files
}

// yamlScalarQuoted always double-quotes s: globs that start with * are
// YAML aliases when plain.
func yamlScalarQuoted(s string) string {
	q := yamlScalar(s)
	if strings.HasPrefix(q, `"`) {
		return q
	}
	return `"` + q + `"`
}

// codex renders one .codex/agents/<name>.toml per persona: name,
// description and developer_instructions (all three required), the model,
// and sandbox_mode for read-only personas. Never a tools list: Codex
// rejects the whole agent for it. The rules reach Codex through AGENTS.md.
func (r *renderer) codex() []File {
	var files []File
	for _, p := range r.personas {
		var b strings.Builder
		b.WriteString(personaMarker(p))
		fmt.Fprintf(&b, "name = %s\n", tomlString(p.Name))
		fmt.Fprintf(&b, "description = %s\n", tomlString(p.Description))
		if m := p.Model(Codex); m != "" {
			fmt.Fprintf(&b, "model = %s\n", tomlString(m))
		}
		if p.ReadOnly() {
			b.WriteString("sandbox_mode = \"read-only\"\n")
		}
		fmt.Fprintf(&b, "developer_instructions = %s\n", tomlMultiline(r.personaText(p, Codex)))
		files = append(files, File{Path: codexAgentsDir + "/" + p.Name + ".toml", Hosts: []Host{Codex}, Content: []byte(b.String())})
	}
	return files
}

// copilot renders GitHub Copilot's files. Copilot loads AGENTS.md itself,
// so .github/copilot-instructions.md points there instead of repeating the
// rules (which would give Copilot each rule twice). Agents go to
// .github/agents/<name>.agent.md (a read-only persona gets read and search
// tools, never disable-model-invocation, which would hide it from
// delegation); path-scoped rules to .github/instructions with applyTo.
func (r *renderer) copilot() []File {
	var b strings.Builder
	b.WriteString(markdownMarker("change .cortexbuild/rules/ and run cortexbuild render."))
	b.WriteString("# Copilot instructions\n\n")
	b.WriteString("This repository's always-on rules are in `AGENTS.md` at its root, which Copilot also loads.\n")
	b.WriteString("They are not repeated here, so that each reaches the model once. Follow them; they are:\n\n")
	for _, rule := range r.alwaysOn() {
		fmt.Fprintf(&b, "- `%s`: %s\n", rule.ID, rule.Description)
	}
	files := []File{{
		Path:       copilotInstructions,
		Hosts:      []Host{Copilot},
		Content:    []byte(b.String()),
		accept:     func([]byte) bool { return true },
		acceptNote: "not written by cortexbuild render; left as is (Copilot reads the rules from AGENTS.md)",
	}}
	for _, p := range r.personas {
		var b strings.Builder
		b.WriteString("---\n")
		b.WriteString(personaMarker(p))
		fmt.Fprintf(&b, "name: %s\n", p.Name)
		fmt.Fprintf(&b, "description: %s\n", yamlScalar(p.Description))
		if p.Tools != nil {
			fmt.Fprintf(&b, "tools: %s\n", yamlFlowList(p.Tools))
		}
		if m := p.Model(Copilot); m != "" {
			fmt.Fprintf(&b, "model: %s\n", yamlScalar(m))
		}
		b.WriteString("---\n")
		b.WriteString(r.personaText(p, Copilot))
		files = append(files, File{Path: copilotAgentsDir + "/" + p.Name + ".agent.md", Hosts: []Host{Copilot}, Content: []byte(b.String())})
	}
	for _, rule := range r.scoped() {
		var b strings.Builder
		b.WriteString("---\n")
		b.WriteString(ruleMarker(rule))
		fmt.Fprintf(&b, "applyTo: %s\n", yamlScalarQuoted(strings.Join(rule.Paths, ",")))
		fmt.Fprintf(&b, "description: %s\n", yamlScalar(rule.Description))
		b.WriteString("---\n")
		b.WriteString(rule.Body)
		files = append(files, File{Path: copilotScopedRuleDir + "/" + rule.ID + ".instructions.md", Hosts: []Host{Copilot}, Content: []byte(b.String())})
	}
	return files
}

// cursor renders Cursor's files. Cursor loads AGENTS.md itself, so only
// path-scoped rules become .cursor/rules/<id>.mdc (globs, alwaysApply
// false, written as Cursor writes them). Agents go to .cursor/agents,
// whose parser is line based, not YAML: single-line scalars, no quotes,
// no lists.
func (r *renderer) cursor() []File {
	var files []File
	for _, rule := range r.scoped() {
		var b strings.Builder
		b.WriteString("---\n")
		b.WriteString(ruleMarker(rule))
		fmt.Fprintf(&b, "description: %s\n", yamlScalar(rule.Description))
		fmt.Fprintf(&b, "globs: %s\n", yamlScalarQuoted(strings.Join(rule.Paths, ", ")))
		b.WriteString("alwaysApply: false\n")
		b.WriteString("---\n")
		b.WriteString(rule.Body)
		files = append(files, File{Path: cursorRulesDir + "/" + rule.ID + ".mdc", Hosts: []Host{Cursor}, Content: []byte(b.String())})
	}
	for _, p := range r.personas {
		var b strings.Builder
		b.WriteString("---\n")
		b.WriteString(personaMarker(p))
		fmt.Fprintf(&b, "name: %s\n", p.Name)
		fmt.Fprintf(&b, "description: %s\n", p.Description)
		if m := p.Model(Cursor); m != "" {
			fmt.Fprintf(&b, "model: %s\n", m)
		}
		if p.ReadOnly() {
			b.WriteString("readonly: true\n")
		}
		b.WriteString("---\n")
		b.WriteString(r.personaText(p, Cursor))
		files = append(files, File{Path: cursorAgentsDir + "/" + p.Name + ".md", Hosts: []Host{Cursor}, Content: []byte(b.String())})
	}
	return files
}
