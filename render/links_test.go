package render

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
}

// files returns the regular files under dir (links not followed).
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A .claude/agents linked to a directory outside the project (such as
// ~/.claude/agents) is refused up front, --force or not, naming the link
// and where it points, and nothing is written anywhere.
func TestSymlinkedDirOutsideProjectIsRefused(t *testing.T) {
	dir := project(t)
	outside := t.TempDir()
	writeFile(t, outside, "theirs.md", "someone else's agent\n")
	symlink(t, outside, filepath.Join(dir, ".claude", "agents"))
	before := files(t, dir)
	for _, opts := range []Options{{Dir: dir}, {Dir: dir, Force: true}, {Dir: dir, Targets: []Host{Claude}}} {
		_, err := NewPlan(opts)
		if err == nil || !strings.Contains(err.Error(), ".claude/agents is a symbolic link to "+outside) || !strings.Contains(err.Error(), "outside the project") {
			t.Fatalf("NewPlan(%+v) = %v, want a refusal naming the link and its target", opts, err)
		}
	}
	if got := tree(t, outside); len(got) != 1 || got["theirs.md"] != "someone else's agent\n" {
		t.Errorf("outside the project: %v", got)
	}
	if after := files(t, dir); !maps.Equal(before, after) {
		t.Errorf("the project changed: %d files before, %d after", len(before), len(after))
	}
}

// A clean does not delete through a link either: the files a render
// wrote, moved outside and linked back, stay where the link points.
func TestCleanThroughSymlinkOutsideProjectIsRefused(t *testing.T) {
	dir := project(t)
	mustRender(t, Options{Dir: dir, Targets: []Host{Claude}})
	outside := filepath.Join(t.TempDir(), "agents")
	if err := os.Rename(filepath.Join(dir, ".claude", "agents"), outside); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(dir, ".claude", "agents"))
	before := files(t, outside)
	for _, opts := range []Options{{Dir: dir, Clean: true}, {Dir: dir, Clean: true, Force: true}} {
		if _, err := NewPlan(opts); err == nil || !strings.Contains(err.Error(), ".claude/agents is a symbolic link to "+outside) {
			t.Fatalf("NewPlan(%+v) = %v", opts, err)
		}
	}
	if after := files(t, outside); len(before) == 0 || !maps.Equal(before, after) {
		t.Errorf("outside the project: %d files before, %d after", len(before), len(after))
	}
}

// A file render writes that is a link to a file outside the project is
// refused the same way, and the target keeps its content.
func TestSymlinkedFileOutsideProjectIsRefused(t *testing.T) {
	dir := project(t)
	outside := t.TempDir()
	writeFile(t, outside, "AGENTS.md", "not the project's\n")
	symlink(t, filepath.Join(outside, "AGENTS.md"), filepath.Join(dir, agentsMD))
	for _, force := range []bool{false, true} {
		_, err := NewPlan(Options{Dir: dir, Force: force})
		if err == nil || !strings.Contains(err.Error(), "AGENTS.md is a symbolic link to "+filepath.Join(outside, "AGENTS.md")) {
			t.Fatalf("NewPlan(force=%v) = %v", force, err)
		}
	}
	if b := readFile(t, outside, "AGENTS.md"); string(b) != "not the project's\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	if exists(dir, ManifestPath) || exists(dir, claudeMD) {
		t.Error("a refused render wrote files")
	}
}

// A link that stays inside the project is followed as before.
func TestSymlinkedDirInsideProjectIsWritten(t *testing.T) {
	dir := project(t)
	if err := os.MkdirAll(filepath.Join(dir, "shared", "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join("..", "shared", "agents"), filepath.Join(dir, ".claude", "agents"))
	mustRender(t, Options{Dir: dir, Targets: []Host{Claude}})
	if !exists(dir, "shared/agents/critic.md") {
		t.Error("render did not write through a link inside the project")
	}
}

// A plan made before a link was swapped for one that leads out writes
// nothing when applied.
func TestApplyChecksLinksAgain(t *testing.T) {
	dir := project(t)
	outside := t.TempDir()
	p := mustPlan(t, Options{Dir: dir})
	symlink(t, outside, filepath.Join(dir, ".claude", "agents"))
	if err := p.Apply(); err == nil || !strings.Contains(err.Error(), ".claude/agents is a symbolic link to "+outside) {
		t.Fatalf("Apply = %v", err)
	}
	if got := tree(t, outside); len(got) != 0 {
		t.Errorf("written outside the project: %v", got)
	}
	if exists(dir, agentsMD) || exists(dir, ManifestPath) {
		t.Error("a refused Apply wrote files")
	}
}

// The temporary files of a render killed between writing and renaming are
// removed by the next render; files with similar names that render did
// not make stay.
func TestLeftoversOfAnInterruptedRenderAreRemoved(t *testing.T) {
	dir := project(t)
	mustRender(t, Options{Dir: dir})
	var leftovers []string
	for _, rel := range []string{agentsMD, ".claude/agents/critic.md", ManifestPath} {
		full := tempName(filepath.Join(dir, filepath.FromSlash(rel)))
		if err := os.WriteFile(full, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
		leftovers = append(leftovers, full)
	}
	users := []string{".AGENTS.md.tmp", ".AGENTS.md.tmpNOTES", ".AGENTS.md.tmp-1", ".AGENTS.md.tmpabc.bak", "AGENTS.md.tmpabc", ".AGENTS.md.tmpzzzzzzzzzzzzzz", ".claude/agents/.mine.md.tmpabc", ".claude/agents/mine.md"}
	for _, u := range users {
		writeFile(t, dir, u, "user file\n")
	}
	if err := os.Mkdir(filepath.Join(dir, ".AGENTS.md.tmpdir1"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "AGENTS.md", filepath.Join(dir, ".AGENTS.md.tmplink1"))

	// A dry run removes nothing.
	mustPlan(t, Options{Dir: dir})
	for _, l := range leftovers {
		if _, err := os.Stat(l); err != nil {
			t.Fatalf("planning removed %s", l)
		}
	}
	mustRender(t, Options{Dir: dir})
	for _, l := range leftovers {
		if _, err := os.Lstat(l); err == nil {
			t.Errorf("leftover %s was not removed", l)
		}
	}
	for _, u := range append(users, ".AGENTS.md.tmpdir1", ".AGENTS.md.tmplink1") {
		if !exists(dir, u) {
			t.Errorf("user file %s was removed", u)
		}
	}
}
