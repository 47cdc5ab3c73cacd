package render

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
)

// Where a project keeps its sources, relative to the project directory.
const (
	SourceDir = ".cortexbuild"
	AgentsDir = SourceDir + "/agents"
	RulesDir  = SourceDir + "/rules"
)

// The personas of the spec, in its order. Each has a built-in default in
// defaults/agents/<id>.md.
var builtinPersonas = []string{
	"planner", "critic", "builder", "tester_validator", "security_compliance",
	"optimizer", "pr_reviewer", "explore", "recurrence_guard", "enterprise_orchestrator",
}

// Personas and rules render gives special meaning to.
const (
	criticID   = "critic"
	plannerID  = "planner"
	CriticGate = "rule-critic-gate"
)

//go:embed defaults
var defaults embed.FS

// Persona is one agent persona after the project's override (if any) was
// merged over the built-in default.
type Persona struct {
	ID          string // file stem: planner, critic, ...
	Name        string // the name every host sees: ID, or cortex-<ID> on a clash with a host built-in
	Description string // one line
	// Models is the model per host; a missing host or "inherit" means the
	// host's own default.
	Models map[Host]string
	// Tools lists tools from the vocabulary (read, search, edit, execute,
	// web, agent, todo); nil means every tool the host offers.
	Tools []string
	Body  string // Markdown, ends with one newline
	// Source is the project file that defined or overrode the persona
	// (slash-separated, relative to the project directory), or "" for a
	// built-in default used as is.
	Source  string
	Builtin bool

	modelPos map[Host]yamlx.Pos // where each model was set, for errors
	pos      yamlx.Pos
}

// ReadOnly reports whether the persona may neither edit files nor run
// commands.
func (p *Persona) ReadOnly() bool {
	return p.Tools != nil && !slices.Contains(p.Tools, "edit") && !slices.Contains(p.Tools, "execute")
}

// Model returns the persona's model on h, or "" for the host's default.
func (p *Persona) Model(h Host) string {
	m := p.Models[h]
	if strings.EqualFold(m, inherit) {
		return ""
	}
	return m
}

// origin names where the persona comes from, for messages.
func (p *Persona) origin() string {
	if p.Source != "" {
		return p.Source
	}
	return "the built-in " + p.ID + " persona"
}

// Rule is one project rule.
type Rule struct {
	ID          string // file stem: rule-critic-gate, ...
	Description string // one line
	// Paths are the globs of a path-scoped rule; empty means always on.
	Paths  []string
	Body   string // Markdown, ends with one newline
	Source string // project file, or "" for a built-in rule
}

// Scoped reports whether the rule applies only to matching paths.
func (r *Rule) Scoped() bool { return len(r.Paths) > 0 }

// Sources are the personas and rules render writes.
type Sources struct {
	Personas []*Persona // the spec's ten in its order, then project personas by id
	Rules    []*Rule    // rule-critic-gate first, then by id
}

// Persona returns the persona with id, or nil.
func (s *Sources) Persona(id string) *Persona {
	for _, p := range s.Personas {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// Rule returns the rule with id, or nil.
func (s *Sources) Rule(id string) *Rule {
	for _, r := range s.Rules {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// personaFront is a persona file's frontmatter.
type personaFront struct {
	Pos         yamlx.Pos
	Description *string     `yaml:"description"`
	Models      *hostModels `yaml:"models"`
	Tools       *[]string   `yaml:"tools"`
}

type hostModels struct {
	Pos     yamlx.Pos
	Claude  *string `yaml:"claude"`
	Codex   *string `yaml:"codex"`
	Copilot *string `yaml:"copilot"`
	Cursor  *string `yaml:"cursor"`
}

func (m *hostModels) each(f func(Host, *string)) {
	f(Claude, m.Claude)
	f(Codex, m.Codex)
	f(Copilot, m.Copilot)
	f(Cursor, m.Cursor)
}

// ruleFront is a rule file's frontmatter.
type ruleFront struct {
	Pos         yamlx.Pos
	Description *string   `yaml:"description"`
	Paths       *[]string `yaml:"paths"`
}

var idRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// Limits on what a source may hold, so that every host accepts the output.
const (
	maxDescription = 1024  // one line of hover or picker text
	maxBody        = 30000 // Copilot's limit for an agent's body
	maxModel       = 200
)

// LoadSources reads the built-in personas and rules and merges the
// project's .cortexbuild/agents/*.md and .cortexbuild/rules/*.md over them.
// Every problem is reported at once, as file:line:column.
func LoadSources(dir string) (*Sources, error) {
	return loadSources(os.DirFS(dir))
}

func loadSources(project fs.FS) (*Sources, error) {
	l := &loader{}
	src := &Sources{}
	builtins := map[string]*Persona{}
	for _, id := range builtinPersonas {
		file := "defaults/agents/" + id + ".md"
		data, err := defaults.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("render: built-in persona %s: %w", id, err)
		}
		p := l.persona(file, id, data, nil)
		if p == nil {
			return nil, fmt.Errorf("render: built-in persona %s is invalid: %w", id, l.errs.Err())
		}
		// Positions in the built-in files mean nothing to users.
		p.Builtin, p.Source, p.modelPos, p.pos = true, "", map[Host]yamlx.Pos{}, yamlx.Pos{}
		builtins[id] = p
		src.Personas = append(src.Personas, p)
	}
	gate, err := defaults.ReadFile("defaults/rules/" + CriticGate + ".md")
	if err != nil {
		return nil, fmt.Errorf("render: built-in rule: %w", err)
	}
	builtinRules := map[string]*Rule{}
	if r := l.rule("defaults/rules/"+CriticGate+".md", CriticGate, gate); r != nil {
		r.Source = ""
		builtinRules[CriticGate] = r
		src.Rules = append(src.Rules, r)
	} else {
		return nil, fmt.Errorf("render: built-in rule %s is invalid: %w", CriticGate, l.errs.Err())
	}

	var custom []*Persona
	for _, file := range l.list(project, AgentsDir) {
		id := strings.TrimSuffix(path.Base(file), ".md")
		data, err := fs.ReadFile(project, file)
		if err != nil {
			l.add(file, 0, "cannot read: %v", err)
			continue
		}
		base := builtins[id]
		p := l.persona(file, id, data, base)
		if p == nil {
			continue
		}
		if base != nil {
			*base = *p
			continue
		}
		custom = append(custom, p)
	}
	sort.Slice(custom, func(i, j int) bool { return custom[i].ID < custom[j].ID })
	src.Personas = append(src.Personas, custom...)

	var rules []*Rule
	for _, file := range l.list(project, RulesDir) {
		id := strings.TrimSuffix(path.Base(file), ".md")
		data, err := fs.ReadFile(project, file)
		if err != nil {
			l.add(file, 0, "cannot read: %v", err)
			continue
		}
		r := l.rule(file, id, data)
		if r == nil {
			continue
		}
		if base := builtinRules[id]; base != nil {
			*base = *r
			continue
		}
		rules = append(rules, r)
	}
	sort.Slice(rules, func(i, j int) bool { return rules[i].ID < rules[j].ID })
	src.Rules = append(src.Rules, rules...)

	l.checkNames(src)
	if err := l.err(); err != nil {
		return nil, err
	}
	return src, nil
}

// loader collects every problem in the sources.
type loader struct {
	errs yamlx.Errors
}

func (l *loader) add(file string, line int, format string, args ...any) {
	l.errs = append(l.errs, &yamlx.Error{Pos: yamlx.Pos{File: file, Line: line, Column: 1}, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) addAt(p yamlx.Pos, format string, args ...any) {
	l.errs = append(l.errs, p.Errorf(format, args...))
}

// err returns the problems sorted by file and position, or nil.
func (l *loader) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	sort.SliceStable(l.errs, func(i, j int) bool {
		a, b := l.errs[i].Pos, l.errs[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return &SourceError{Errs: l.errs}
}

// SourceError lists every problem found in the personas and rules, each as
// file:line:column: message.
type SourceError struct {
	Errs yamlx.Errors
}

func (e *SourceError) Error() string { return e.Errs.Error() }

// list returns the .md files of dir in project, sorted; anything else in
// the directory but hidden files is an error, so a misnamed file is not
// silently ignored.
func (l *loader) list(project fs.FS, dir string) []string {
	entries, err := fs.ReadDir(project, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		l.add(dir, 0, "cannot read the directory: %v", err)
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // .DS_Store, editor swap files
		}
		file := dir + "/" + e.Name()
		id, isMD := strings.CutSuffix(e.Name(), ".md")
		switch {
		case e.IsDir():
			l.add(file, 0, "is a directory; %s holds one .md file per entry, with no subdirectories", dir)
		case !isMD:
			l.add(file, 0, "is not a .md file; %s holds one <id>.md file per entry", dir)
		case !idRE.MatchString(id):
			l.add(file, 0, "file name %q is not a valid id: use lower-case letters, digits, '-' and '_', starting with a letter (at most 63 characters)", id)
		default:
			out = append(out, file)
		}
	}
	return out
}

// frontmatter splits data into its YAML frontmatter (padded with one
// newline per line before it, so positions are the file's) and the body.
func (l *loader) frontmatter(file string, data []byte) (front []byte, body string, ok bool) {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		l.add(file, 1, "starts with a byte order mark; save the file as UTF-8 without one")
		return nil, "", false
	}
	rest, found := bytes.CutPrefix(data, []byte("---\n"))
	if !found {
		l.add(file, 1, "must start with a '---' line opening the YAML frontmatter (description: ...), closed by another '---' line")
		return nil, "", false
	}
	end := -1
	if bytes.HasPrefix(rest, []byte("---\n")) || bytes.Equal(rest, []byte("---")) {
		end = 0
	} else if i := bytes.Index(rest, []byte("\n---\n")); i >= 0 {
		end = i + 1
	} else if bytes.HasSuffix(rest, []byte("\n---")) {
		end = len(rest) - 3
	}
	if end < 0 {
		l.add(file, 1, "the frontmatter opened on line 1 is never closed: add a '---' line after it")
		return nil, "", false
	}
	front = append([]byte("\n"), rest[:end]...)
	body = string(rest[min(end+4, len(rest)):])
	return front, normalizeBody(body), true
}

// normalizeBody trims blank lines around the Markdown and trailing spaces
// on each line, and ends it with one newline ("" stays "").
func normalizeBody(s string) string {
	lines := strings.Split(s, "\n")
	for i, ln := range lines {
		lines[i] = strings.TrimRight(ln, " \t")
	}
	s = strings.Trim(strings.Join(lines, "\n"), "\n")
	if s == "" {
		return ""
	}
	return s + "\n"
}

// decode decodes the frontmatter strictly into out.
func (l *loader) decode(file string, front []byte, out any) bool {
	if err := yamlx.Decode(file, front, out); err != nil {
		var es yamlx.Errors
		if errors.As(err, &es) {
			l.errs = append(l.errs, es...)
		} else {
			l.add(file, 0, "%v", err)
		}
		return false
	}
	return true
}

// persona parses one persona file. base, when set, is the built-in the
// file overrides: keys left out keep the built-in's values.
func (l *loader) persona(file, id string, data []byte, base *Persona) *Persona {
	front, body, ok := l.frontmatter(file, data)
	if !ok {
		return nil
	}
	var f personaFront
	if !l.decode(file, front, &f) {
		return nil
	}
	before := len(l.errs)
	p := &Persona{ID: id, Name: agentName(id), Source: file, Models: map[Host]string{}, modelPos: map[Host]yamlx.Pos{}, pos: yamlx.Pos{File: file, Line: 1, Column: 1}}
	if base != nil {
		p.Description, p.Body, p.Tools = base.Description, base.Body, base.Tools
		for h, m := range base.Models {
			p.Models[h] = m
		}
		p.Builtin = true
	}
	if f.Description != nil {
		p.Description = l.oneLine(f.Pos.Key("description"), "description", *f.Description)
	} else if base == nil {
		l.addAt(f.Pos, "missing required key \"description\": one line saying what the %s persona does and when to use it (hosts show it when choosing an agent)", id)
	}
	if f.Models != nil {
		f.Models.each(func(h Host, m *string) {
			if m == nil {
				return
			}
			at := f.Models.Pos.Key(string(h))
			p.Models[h] = l.model(at, h, *m)
			p.modelPos[h] = at
		})
	}
	if f.Tools != nil {
		p.Tools = l.tools(f.Pos.Key("tools"), *f.Tools)
	}
	if body != "" {
		p.Body = body
	} else if base == nil {
		l.add(file, 0, "the persona has no instructions: write them as Markdown after the closing '---' (hosts skip an agent with an empty body)")
	}
	if len(p.Body) > maxBody {
		l.add(file, 0, "the instructions are %d characters; GitHub Copilot accepts at most %d", len(p.Body), maxBody)
	}
	if len(l.errs) > before {
		return nil
	}
	return p
}

// rule parses one rule file. Rules are not merged: a project file with a
// built-in rule's id replaces it whole.
func (l *loader) rule(file, id string, data []byte) *Rule {
	front, body, ok := l.frontmatter(file, data)
	if !ok {
		return nil
	}
	var f ruleFront
	if !l.decode(file, front, &f) {
		return nil
	}
	before := len(l.errs)
	r := &Rule{ID: id, Source: file, Body: body}
	if f.Description != nil {
		r.Description = l.oneLine(f.Pos.Key("description"), "description", *f.Description)
	} else {
		l.addAt(f.Pos, "missing required key \"description\": one line saying what the rule is about")
	}
	if f.Paths != nil {
		r.Paths = l.globs(f.Pos.Key("paths"), *f.Paths)
		if len(r.Paths) == 0 && len(l.errs) == before {
			l.addAt(f.Pos.Key("paths"), "paths is empty: list the globs the rule applies to, or remove paths for a rule that is always on")
		}
	}
	if body == "" {
		l.add(file, 0, "the rule has no text: write it as Markdown after the closing '---'")
	}
	if id == CriticGate {
		if r.Scoped() {
			l.addAt(f.Pos.Key("paths"), "%s must stay always on (no paths): a path-scoped rule is not loaded at session start by Claude Code, so the gate would be lost", CriticGate)
		}
		if !strings.Contains(body, "independent_reviewer:") || !strings.Contains(body, "critic") {
			l.add(file, 0, "%s must keep requiring the critic agent and its `independent_reviewer: <model-or-agent-id>` line", CriticGate)
		}
	}
	if len(l.errs) > before {
		return nil
	}
	return r
}

func (l *loader) oneLine(at yamlx.Pos, key, s string) string {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		l.addAt(at, "%s is empty", key)
	case strings.ContainsAny(s, "\n\r"):
		l.addAt(at, "%s must be a single line (Cursor reads agent frontmatter line by line); put details in the body", key)
	case len(s) > maxDescription:
		l.addAt(at, "%s is %d characters; keep it under %d", key, len(s), maxDescription)
	case hasControl(s):
		l.addAt(at, "%s contains a control character", key)
	}
	return s
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func (l *loader) model(at yamlx.Pos, h Host, m string) string {
	m = strings.TrimSpace(m)
	switch {
	case m == "":
		l.addAt(at, "models.%s is empty: write a %s model, or inherit for the host's default", h, h.Title())
	case len(m) > maxModel || strings.ContainsAny(m, "\n\r") || hasControl(m):
		l.addAt(at, "models.%s must be one short line naming a model", h)
	case h == Codex && slices.Contains(claudeAliases, strings.ToLower(m)):
		l.addAt(at, "models.codex: %q is a Claude Code alias; Codex CLI needs an OpenAI model id such as gpt-6.2-sol or gpt-5.5", m)
	}
	return m
}

func (l *loader) tools(at yamlx.Pos, tools []string) []string {
	if len(tools) == 1 && tools[0] == allTools {
		return nil
	}
	out := []string{}
	for _, t := range tools {
		switch {
		case t == allTools:
			l.addAt(at, "tools: %q means every tool and must be alone in the list", allTools)
		case !slices.Contains(toolVocabulary, t):
			l.addAt(at, "tools: unknown tool %q; valid tools: %s, or [%s] for every tool", t, strings.Join(toolVocabulary, ", "), allTools)
		case slices.Contains(out, t):
			l.addAt(at, "tools: %q is listed twice", t)
		default:
			out = append(out, t)
		}
	}
	// Keep the vocabulary's order so output does not depend on how the
	// list was written.
	slices.SortFunc(out, func(a, b string) int {
		return slices.Index(toolVocabulary, a) - slices.Index(toolVocabulary, b)
	})
	return out
}

func (l *loader) globs(at yamlx.Pos, globs []string) []string {
	var out []string
	for _, g := range globs {
		g = strings.TrimSpace(g)
		switch {
		case g == "":
			l.addAt(at, "paths: an empty pattern")
		case strings.Contains(g, ","):
			l.addAt(at, "paths: %q contains a comma; hosts join patterns with commas, so list each pattern separately (write [\"src/**/*.ts\", \"src/**/*.tsx\"], not a {ts,tsx} set)", g)
		case strings.HasPrefix(g, "/") || filepath.IsAbs(g) || slices.Contains(strings.Split(g, "/"), ".."):
			l.addAt(at, "paths: %q must be relative to the project directory, without ..", g)
		case g == "**" || g == "**/*" || g == "*":
			l.addAt(at, "paths: %q matches every file; remove paths to make the rule always on (Claude Code does not load a rule with paths at session start, even for **/*)", g)
		case strings.ContainsAny(g, "\n\r\"") || hasControl(g):
			l.addAt(at, "paths: %q contains a quote or a control character", g)
		case slices.Contains(out, g):
			l.addAt(at, "paths: %q is listed twice", g)
		default:
			out = append(out, g)
		}
	}
	return out
}

// checkNames reports personas whose rendered names collide (a project
// persona named cortex-explore next to explore).
func (l *loader) checkNames(src *Sources) {
	seen := map[string]*Persona{}
	for _, p := range src.Personas {
		if q, dup := seen[p.Name]; dup {
			l.add(p.Source, 0, "persona %s is rendered as %q, the name %s already has; rename the file", p.ID, p.Name, q.origin())
			continue
		}
		seen[p.Name] = p
	}
}
