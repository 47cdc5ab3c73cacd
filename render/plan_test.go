package render

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func mustPlan(t *testing.T, opts Options) *Plan {
	t.Helper()
	p, err := NewPlan(opts)
	if err != nil {
		t.Fatalf("NewPlan(%+v): %v", opts, err)
	}
	return p
}

func mustRender(t *testing.T, opts Options) *Plan {
	t.Helper()
	p := mustPlan(t, opts)
	if err := p.Apply(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return p
}

func readFile(t *testing.T, dir, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(dir, rel string) bool {
	_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
	return err == nil
}

// tree returns every file under dir with its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// project copies testdata/project's sources into a temporary directory.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range tree(t, "testdata/project") {
		writeFile(t, dir, rel, content)
	}
	return dir
}

func ops(p *Plan) map[string]Op {
	out := map[string]Op{}
	for _, a := range p.Actions {
		out[a.Path] = a.Op
	}
	return out
}

func TestRenderWritesEveryHostAndReRunIsByteIdentical(t *testing.T) {
	a, b := project(t), project(t)
	pa := mustRender(t, Options{Dir: a})
	mustRender(t, Options{Dir: b})
	ta, tb := tree(t, a), tree(t, b)
	if len(ta) != len(tb) {
		t.Fatalf("two renders wrote %d and %d files", len(ta), len(tb))
	}
	for p, c := range ta {
		if tb[p] != c {
			t.Errorf("%s differs between two renders", p)
		}
	}
	for _, want := range []string{agentsMD, claudeMD, ".claude/agents/critic.md", ".claude/rules/go-style.md",
		".codex/agents/critic.toml", copilotInstructions, ".github/agents/cortex-explore.agent.md",
		".github/instructions/go-style.instructions.md", ".cursor/rules/go-style.mdc", ".cursor/agents/docs_writer.md", ManifestPath} {
		if _, ok := ta[want]; !ok {
			t.Errorf("render did not write %s", want)
		}
	}
	for _, a := range pa.Actions {
		if a.Op != OpCreate {
			t.Errorf("first render: %s is %s, want create", a.Path, a.Op)
		}
	}

	// Re-running changes nothing, not even modification times.
	info := map[string]os.FileInfo{}
	for p := range ta {
		fi, _ := os.Stat(filepath.Join(a, p))
		info[p] = fi
	}
	again := mustRender(t, Options{Dir: a})
	if !again.UpToDate() {
		t.Errorf("second render is not up to date: %v", again.Changes())
	}
	for p, c := range tree(t, a) {
		fi, _ := os.Stat(filepath.Join(a, p))
		if c != ta[p] || !fi.ModTime().Equal(info[p].ModTime()) {
			t.Errorf("second render touched %s", p)
		}
	}
}

func TestRefusesToOverwriteAFileItDidNotWrite(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, agentsMD, "# Our own agent rules\n")
	writeFile(t, dir, ".github/agents/critic.agent.md", "---\ndescription: ours\n---\nOur critic.\n")
	p := mustPlan(t, Options{Dir: dir})
	err := p.Apply()
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Actions) != 2 {
		t.Fatalf("Apply = %v, want a conflict on 2 files", err)
	}
	msg := err.Error()
	for _, want := range []string{"AGENTS.md: not written by cortexbuild render", ".github/agents/critic.agent.md: not written", "--force", "nothing was written"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if string(readFile(t, dir, agentsMD)) != "# Our own agent rules\n" || exists(dir, claudeMD) || exists(dir, ManifestPath) {
		t.Errorf("a refused render wrote files: %v", tree(t, dir))
	}

	// --force overwrites, and the files are render's from then on.
	forced := mustRender(t, Options{Dir: dir, Force: true})
	if len(forced.Conflicts()) != 2 || strings.HasPrefix(string(readFile(t, dir, agentsMD)), "# Our own") {
		t.Fatalf("--force did not overwrite")
	}
	if !mustPlan(t, Options{Dir: dir}).UpToDate() {
		t.Error("not up to date after --force")
	}
}

func TestRefusesToOverwriteAHandEditedGeneratedFile(t *testing.T) {
	dir := project(t)
	mustRender(t, Options{Dir: dir})
	edited := strings.Replace(string(readFile(t, dir, ".claude/agents/critic.md")), "You are the critic", "You are our critic", 1)
	writeFile(t, dir, ".claude/agents/critic.md", edited)
	// A source change makes render want to rewrite the edited file.
	writeFile(t, dir, ".cortexbuild/agents/critic.md", "---\nmodels:\n  claude: haiku\n---\n")
	p := mustPlan(t, Options{Dir: dir})
	c := p.Conflicts()
	if len(c) != 1 || c[0].Path != ".claude/agents/critic.md" || !strings.Contains(c[0].Conflict, "edited by hand") {
		t.Fatalf("conflicts = %+v, want the edited critic", c)
	}
	if err := p.Apply(); err == nil {
		t.Fatal("Apply overwrote a hand-edited file")
	}
	if string(readFile(t, dir, ".claude/agents/critic.md")) != edited || strings.Contains(string(readFile(t, dir, ".github/agents/critic.agent.md")), "haiku") {
		t.Fatal("a refused render changed files")
	}
	mustRender(t, Options{Dir: dir, Force: true})
	if got := string(readFile(t, dir, ".claude/agents/critic.md")); strings.Contains(got, "our critic") || !strings.Contains(got, "model: haiku") {
		t.Errorf("--force did not rewrite the edited file:\n%s", got)
	}
}

func TestACorrectlyEditedFileIsAdopted(t *testing.T) {
	// A file with exactly the content render writes is render's, whoever wrote it.
	dir := t.TempDir()
	files, err := Render(loadCase(t, dir), []Host{Claude})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, claudeMD, string(files[slices.IndexFunc(files, func(f File) bool { return f.Path == claudeMD })].Content))
	p := mustRender(t, Options{Dir: dir, Targets: []Host{Claude}})
	if ops(p)[claudeMD] != OpUnchanged || len(p.Conflicts()) != 0 {
		t.Errorf("identical CLAUDE.md: %v", ops(p)[claudeMD])
	}
}

func TestForeignFilesThatDoTheJobAreKept(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, claudeMD, "# Team notes\n\n@AGENTS.md\n")
	writeFile(t, dir, copilotInstructions, "Use tabs.\n")
	p := mustRender(t, Options{Dir: dir})
	if ops(p)[claudeMD] != OpKeep || ops(p)[copilotInstructions] != OpKeep {
		t.Fatalf("ops = %v", ops(p))
	}
	if string(readFile(t, dir, claudeMD)) != "# Team notes\n\n@AGENTS.md\n" || string(readFile(t, dir, copilotInstructions)) != "Use tabs.\n" {
		t.Error("kept files were changed")
	}
	if !mustPlan(t, Options{Dir: dir}).UpToDate() {
		t.Error("kept files count as drift")
	}
	// --clean leaves them alone too.
	mustRender(t, Options{Dir: dir, Clean: true})
	if !exists(dir, claudeMD) || !exists(dir, copilotInstructions) {
		t.Error("--clean removed files render did not write")
	}

	// A CLAUDE.md without the import is a conflict: Claude Code would not see the rules.
	dir = t.TempDir()
	writeFile(t, dir, claudeMD, "# Team notes\n")
	c := mustPlan(t, Options{Dir: dir}).Conflicts()
	if len(c) != 1 || c[0].Path != claudeMD {
		t.Errorf("CLAUDE.md without @AGENTS.md: conflicts = %+v", c)
	}
}

func TestCleanRemovesOnlyItsOwnFiles(t *testing.T) {
	dir := project(t)
	mustRender(t, Options{Dir: dir})
	writeFile(t, dir, ".claude/agents/mine.md", "---\nname: mine\ndescription: mine\n---\nMine.\n")
	writeFile(t, dir, ".github/workflows/ci.yml", "on: push\n")
	writeFile(t, dir, "README.md", "# readme\n")

	// Clean one host: its files go, AGENTS.md stays for the others.
	mustRender(t, Options{Dir: dir, Targets: []Host{Cursor}, Clean: true})
	if exists(dir, cursorAgentsDir) || exists(dir, cursorRulesDir) || exists(dir, ".cursor") {
		t.Error("--clean --target cursor left Cursor files or empty directories")
	}
	if !exists(dir, agentsMD) || !exists(dir, ".claude/agents/critic.md") {
		t.Error("--clean --target cursor removed other hosts' files")
	}
	m, _, _ := readManifest(dir)
	if slices.Contains(m.Targets, Cursor) {
		t.Errorf("manifest still targets cursor: %v", m.Targets)
	}
	// A render without --target now renders the remaining hosts only.
	if p := mustPlan(t, Options{Dir: dir}); !p.UpToDate() || slices.Contains(p.Targets, Cursor) {
		t.Errorf("default targets after cleaning cursor = %v, up to date %v", p.Targets, p.UpToDate())
	}

	// Clean the rest.
	p := mustRender(t, Options{Dir: dir, Clean: true})
	if len(p.Conflicts()) != 0 {
		t.Fatalf("conflicts: %+v", p.Conflicts())
	}
	left := tree(t, dir)
	var generated []string
	for f := range left {
		if !strings.HasPrefix(f, SourceDir+"/") && f != ".claude/agents/mine.md" && f != ".github/workflows/ci.yml" && f != "README.md" {
			generated = append(generated, f)
		}
	}
	if len(generated) > 0 || exists(dir, ManifestPath) {
		t.Errorf("--clean left %v (manifest: %v)", generated, exists(dir, ManifestPath))
	}
	for _, keep := range []string{".claude/agents/mine.md", ".github/workflows/ci.yml", "README.md", ".cortexbuild/agents/critic.md"} {
		if !exists(dir, keep) {
			t.Errorf("--clean removed %s, which render did not write", keep)
		}
	}
	if exists(dir, ".github/agents") || exists(dir, ".codex") {
		t.Error("--clean left empty directories")
	}
}

func TestCleanNeedsNoValidSources(t *testing.T) {
	dir := t.TempDir()
	mustRender(t, Options{Dir: dir})
	writeFile(t, dir, AgentsDir+"/critic.md", "---\nbogus: 1\n---\n")
	if _, err := NewPlan(Options{Dir: dir}); err == nil {
		t.Fatal("a render accepted invalid sources")
	}
	mustRender(t, Options{Dir: dir, Clean: true})
	if exists(dir, agentsMD) || exists(dir, ManifestPath) {
		t.Error("clean with invalid sources left files")
	}
}

func TestCleanRefusesHandEditedFiles(t *testing.T) {
	dir := t.TempDir()
	mustRender(t, Options{Dir: dir})
	writeFile(t, dir, ".codex/agents/critic.toml", "name = \"critic\"\n# tuned by hand\n")
	p := mustPlan(t, Options{Dir: dir, Clean: true})
	if err := p.Apply(); err == nil || !strings.Contains(err.Error(), ".codex/agents/critic.toml: edited by hand") {
		t.Fatalf("clean of an edited file: %v", err)
	}
	if !exists(dir, agentsMD) || !exists(dir, ".codex/agents/critic.toml") {
		t.Fatal("a refused clean removed files")
	}
	mustRender(t, Options{Dir: dir, Clean: true, Force: true})
	if exists(dir, ".codex/agents/critic.toml") || exists(dir, agentsMD) {
		t.Error("--clean --force kept files")
	}
}

func TestCheckDetectsDrift(t *testing.T) {
	dir := project(t)
	if p := mustPlan(t, Options{Dir: dir}); p.UpToDate() {
		t.Fatal("an unrendered project is up to date")
	}
	mustRender(t, Options{Dir: dir})
	if p := mustPlan(t, Options{Dir: dir}); !p.UpToDate() {
		t.Fatalf("fresh render not up to date: %+v", p.Changes())
	}
	cases := []struct {
		name   string
		change func()
		path   string
		op     Op
	}{
		{"generated file edited", func() { writeFile(t, dir, ".cursor/agents/critic.md", "edited\n") }, ".cursor/agents/critic.md", OpUpdate},
		{"generated file deleted", func() { os.Remove(filepath.Join(dir, ".codex/agents/planner.toml")) }, ".codex/agents/planner.toml", OpCreate},
		{"source changed", func() {
			writeFile(t, dir, ".cortexbuild/rules/commit-messages.md", "---\ndescription: changed\n---\nChanged.\n")
		}, agentsMD, OpUpdate},
		{"persona removed", func() { os.Remove(filepath.Join(dir, ".cortexbuild/agents/docs_writer.md")) }, ".github/agents/docs_writer.agent.md", OpRemove},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustRender(t, Options{Dir: dir, Force: true})
			c.change()
			p := mustPlan(t, Options{Dir: dir})
			if p.UpToDate() || ops(p)[c.path] != c.op {
				t.Errorf("after %s: up to date %v, %s is %q, want %q", c.name, p.UpToDate(), c.path, ops(p)[c.path], c.op)
			}
		})
	}
	// Rendering again brings it back, removing the stale persona's files.
	mustRender(t, Options{Dir: dir, Force: true})
	if !mustPlan(t, Options{Dir: dir}).UpToDate() || exists(dir, ".codex/agents/docs_writer.toml") {
		t.Error("re-render did not converge")
	}
}

func TestTargetsAccumulateInTheManifest(t *testing.T) {
	dir := t.TempDir()
	mustRender(t, Options{Dir: dir, Targets: []Host{Codex}})
	if exists(dir, claudeMD) || !exists(dir, agentsMD) || !exists(dir, ".codex/agents/critic.toml") {
		t.Fatal("--target codex wrote the wrong files")
	}
	mustRender(t, Options{Dir: dir, Targets: []Host{Claude}})
	m, _, err := readManifest(dir)
	if err != nil || !slices.Equal(m.Targets, []Host{Claude, Codex}) {
		t.Fatalf("manifest targets = %v, %v", m.Targets, err)
	}
	if p := mustPlan(t, Options{Dir: dir}); !p.UpToDate() || !slices.Equal(p.Targets, []Host{Claude, Codex}) {
		t.Errorf("default targets = %v, up to date %v", p.Targets, p.UpToDate())
	}
	// Cleaning codex keeps AGENTS.md, which CLAUDE.md imports.
	mustRender(t, Options{Dir: dir, Targets: []Host{Codex}, Clean: true})
	if !exists(dir, agentsMD) || exists(dir, ".codex") {
		t.Error("clean codex: wrong files left")
	}
}

func TestSymlinkIsNotOverwrittenWithoutForce(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, agentsMD, "rules\n")
	if err := os.Symlink("AGENTS.md", filepath.Join(dir, claudeMD)); err != nil {
		t.Skip("no symlinks here:", err)
	}
	c := mustPlan(t, Options{Dir: dir}).Conflicts()
	if len(c) != 2 || c[1].Path != claudeMD || c[1].Conflict != "is a symbolic link" {
		t.Fatalf("conflicts = %+v", c)
	}
	mustRender(t, Options{Dir: dir, Force: true})
	if fi, _ := os.Lstat(filepath.Join(dir, claudeMD)); fi.Mode()&fs.ModeSymlink != 0 || !hasImportLine(readFile(t, dir, claudeMD)) {
		t.Error("--force did not replace the symlink with the rendered CLAUDE.md")
	}
}

func TestBadManifestIsRefused(t *testing.T) {
	for name, content := range map[string]string{
		"not json":      "{",
		"unknown key":   `{"comment":"","targets":[],"files":[],"extra":1}`,
		"foreign path":  `{"comment":"","targets":[],"files":[{"path":"../etc/passwd","hosts":["claude"],"sha256":"` + strings.Repeat("0", 64) + `"}]}`,
		"unowned path":  `{"comment":"","targets":[],"files":[{"path":"go.mod","hosts":["claude"],"sha256":"` + strings.Repeat("0", 64) + `"}]}`,
		"unknown host":  `{"comment":"","targets":["vim"],"files":[]}`,
		"short hash":    `{"comment":"","targets":[],"files":[{"path":"AGENTS.md","hosts":["claude"],"sha256":"abc"}]}`,
		"nested output": `{"comment":"","targets":[],"files":[{"path":".claude/agents/x/y.md","hosts":["claude"],"sha256":"` + strings.Repeat("0", 64) + `"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, ManifestPath, content)
			if _, err := NewPlan(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), ManifestPath) {
				t.Errorf("NewPlan with a bad manifest: %v", err)
			}
		})
	}
}

func TestCodexChainWarnings(t *testing.T) {
	dir := t.TempDir()
	if w := mustPlan(t, Options{Dir: dir}).Warnings; len(w) != 0 {
		t.Errorf("warnings for the default render: %v", w)
	}
	writeFile(t, dir, ".cortexbuild/rules/huge.md", "---\ndescription: a long rule\n---\n"+strings.Repeat("Write it all down. ", 2000)+"\n")
	w := mustPlan(t, Options{Dir: dir}).Warnings
	if len(w) != 1 || !strings.Contains(w[0], "over its 32768-byte limit") || !strings.Contains(w[0], "project_doc_max_bytes") {
		t.Errorf("warnings = %v", w)
	}
	if w := mustPlan(t, Options{Dir: dir, Targets: []Host{Claude}}).Warnings; len(w) != 0 {
		t.Errorf("Codex warning without the codex target: %v", w)
	}

	// The chain includes AGENTS.md files above the project, up to the git root.
	root := t.TempDir()
	writeFile(t, root, ".git/HEAD", "ref: refs/heads/main\n")
	writeFile(t, root, agentsMD, strings.Repeat("x", 31*1024)+"\n")
	sub := filepath.Join(root, "services", "api")
	w = mustPlan(t, Options{Dir: sub}).Warnings
	if len(w) != 1 || !strings.Contains(w[0], "../../AGENTS.md 31745") {
		t.Errorf("chain warnings = %v", w)
	}

	dir = t.TempDir()
	writeFile(t, dir, "AGENTS.override.md", "local\n")
	w = mustPlan(t, Options{Dir: dir}).Warnings
	if len(w) != 1 || !strings.Contains(w[0], "AGENTS.override.md") {
		t.Errorf("override warnings = %v", w)
	}
}

func TestApplyWritesNothingOnConflictEvenForOtherHosts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ".cursor/agents/planner.md", "ours\n")
	p := mustPlan(t, Options{Dir: dir})
	if err := p.Apply(); err == nil {
		t.Fatal("no conflict")
	}
	if got := tree(t, dir); len(got) != 1 {
		t.Errorf("refused apply wrote %d files", len(got)-1)
	}
}
