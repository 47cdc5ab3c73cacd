package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ManifestPath is where render records the files it wrote, relative to the
// project directory. Commit it with them: without it render cannot tell its
// own files from hand-written ones.
const ManifestPath = SourceDir + "/render-manifest.json"

// Op is what a plan does to one file.
type Op string

// The operations of a plan.
const (
	OpCreate    Op = "create"    // the file is missing
	OpUpdate    Op = "update"    // the file differs from what render writes
	OpRemove    Op = "remove"    // render wrote the file, and no longer renders it (or --clean)
	OpUnchanged Op = "unchanged" // the file is as render writes it
	OpKeep      Op = "keep"      // a file render did not write already does the job; left alone
)

// Action is one file's part of a plan.
type Action struct {
	Path string
	Op   Op
	// Conflict, when not empty, says why the file is not render's to
	// change: it was not written by render, or was edited by hand since.
	// A plan with conflicts is applied only with Force, and then the
	// action overwrites or deletes the file anyway.
	Conflict string
	// Note explains an OpKeep.
	Note string

	content []byte // what to write (create, update)
	hosts   []Host
}

// Options say what to render, where, and how.
type Options struct {
	// Dir is the project directory (where AGENTS.md goes).
	Dir string
	// Targets are the hosts to render or clean. Empty means the hosts the
	// manifest records from earlier runs, or every host when there is no
	// manifest.
	Targets []Host
	// Clean removes the files render generated for the targets instead of
	// writing them.
	Clean bool
	// Force overwrites or deletes files render did not write, or that
	// were edited by hand since it wrote them.
	Force bool
}

// Plan is what rendering (or cleaning) would change, computed without
// writing anything. Apply carries it out.
type Plan struct {
	Dir      string
	Targets  []Host
	Clean    bool
	Force    bool
	Actions  []Action // sorted by path; the manifest is not among them
	Warnings []string // for stderr; they do not stop the render

	manifest     []byte // the manifest to write, or nil to remove it
	manifestDisk []byte // the manifest on disk, or nil
}

// Changes returns the actions that change a file: create, update, remove.
func (p *Plan) Changes() []Action {
	var out []Action
	for _, a := range p.Actions {
		if a.Op == OpCreate || a.Op == OpUpdate || a.Op == OpRemove {
			out = append(out, a)
		}
	}
	return out
}

// Conflicts returns the actions on files that are not render's to change.
func (p *Plan) Conflicts() []Action {
	var out []Action
	for _, a := range p.Actions {
		if a.Conflict != "" {
			out = append(out, a)
		}
	}
	return out
}

// ManifestChanged reports whether Apply would rewrite or remove the
// manifest.
func (p *Plan) ManifestChanged() bool { return !bytes.Equal(p.manifest, p.manifestDisk) }

// ManifestOp is what Apply does to the manifest: create, update, remove
// (a clean that leaves no generated file) or unchanged.
func (p *Plan) ManifestOp() Op {
	switch {
	case !p.ManifestChanged():
		return OpUnchanged
	case p.manifest == nil:
		return OpRemove
	case p.manifestDisk == nil:
		return OpCreate
	}
	return OpUpdate
}

// UpToDate reports whether every file is as render writes it (what
// --check tests).
func (p *Plan) UpToDate() bool {
	return len(p.Changes()) == 0 && len(p.Conflicts()) == 0 && !p.ManifestChanged()
}

// ConflictError is Apply's refusal to change files render did not write or
// that were edited by hand, without Force. Nothing was written.
type ConflictError struct {
	Actions []Action
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refusing to change %d file(s) that cortexbuild render did not write or that were edited by hand since; nothing was written:", len(e.Actions))
	for _, a := range e.Actions {
		fmt.Fprintf(&b, "\n  %s: %s", a.Path, a.Conflict)
	}
	b.WriteString("\nmove the changes into " + AgentsDir + "/ or " + RulesDir + "/ (or delete the files), or re-run with --force to overwrite them")
	return b.String()
}

// manifest is the on-disk record of what render wrote.
type manifest struct {
	Comment string          `json:"comment"`
	Targets []Host          `json:"targets"`
	Files   []manifestEntry `json:"files"`
}

type manifestEntry struct {
	Path   string `json:"path"`
	Hosts  []Host `json:"hosts"`
	SHA256 string `json:"sha256"`
}

const manifestComment = "Written by cortexbuild render: the files it generated, with their SHA-256, so that it never overwrites or deletes a file it did not write or that was edited by hand. Commit it with them."

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// readManifest reads and checks the manifest; a missing one is empty.
func readManifest(dir string) (*manifest, []byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ManifestPath)))
	if errors.Is(err, fs.ErrNotExist) {
		return &manifest{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, nil, fmt.Errorf("render: %s is not a render manifest (%v); restore it from version control, or delete it and re-run with --force", ManifestPath, err)
	}
	for _, h := range m.Targets {
		if !h.valid() {
			return nil, nil, fmt.Errorf("render: %s names an unknown host %q", ManifestPath, h)
		}
	}
	for _, e := range m.Files {
		if path.Clean(e.Path) != e.Path || !ownedPath(e.Path) {
			return nil, nil, fmt.Errorf("render: %s lists %q, which render never writes; restore the manifest from version control or delete it", ManifestPath, e.Path)
		}
		if len(e.SHA256) != 64 {
			return nil, nil, fmt.Errorf("render: %s: bad sha256 for %s", ManifestPath, e.Path)
		}
		for _, h := range e.Hosts {
			if !h.valid() {
				return nil, nil, fmt.Errorf("render: %s: %s names an unknown host %q", ManifestPath, e.Path, h)
			}
		}
	}
	return &m, data, nil
}

// encode writes the manifest with one line per file, so that its diffs
// read like the render's.
func (m *manifest) encode() ([]byte, error) {
	var b bytes.Buffer
	comment, err := json.Marshal(m.Comment)
	if err != nil {
		return nil, err
	}
	targets, err := json.Marshal(m.Targets)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "{\n  \"comment\": %s,\n  \"targets\": %s,\n  \"files\": [\n", comment, targets)
	for i, e := range m.Files {
		line, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		sep := ","
		if i == len(m.Files)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s%s\n", line, sep)
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes(), nil
}

func (m *manifest) entry(p string) *manifestEntry {
	for i := range m.Files {
		if m.Files[i].Path == p {
			return &m.Files[i]
		}
	}
	return nil
}

// diskFile is what is at a path on disk.
type diskFile struct {
	exists  bool
	content []byte
	problem string // a symlink or a directory where a file belongs
}

func readDisk(dir, rel string) (diskFile, error) {
	full := filepath.Join(dir, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return diskFile{}, nil
	}
	if err != nil {
		return diskFile{}, fmt.Errorf("render: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return diskFile{exists: true, problem: "is a symbolic link"}, nil
	case fi.IsDir():
		return diskFile{exists: true, problem: "is a directory"}, nil
	case !fi.Mode().IsRegular():
		return diskFile{exists: true, problem: "is not a regular file"}, nil
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return diskFile{}, fmt.Errorf("render: %w", err)
	}
	return diskFile{exists: true, content: data}, nil
}

// NewPlan loads the sources of the project in opts.Dir, renders them for
// the targets and compares the result with the disk and the manifest.
// It writes nothing. A clean needs no sources, so invalid ones do not
// stop it.
func NewPlan(opts Options) (*Plan, error) {
	var src *Sources
	if !opts.Clean {
		var err error
		if src, err = LoadSources(opts.Dir); err != nil {
			return nil, err
		}
	}
	return newPlan(src, opts)
}

func newPlan(src *Sources, opts Options) (*Plan, error) {
	m, mdata, err := readManifest(opts.Dir)
	if err != nil {
		return nil, err
	}
	targets := opts.Targets
	if len(targets) == 0 {
		targets = m.Targets
	}
	if targets, err = normalizeTargets(targets); err != nil {
		return nil, err
	}
	p := &Plan{Dir: opts.Dir, Targets: slices.Clone(targets), Clean: opts.Clean, Force: opts.Force, manifestDisk: mdata}
	var files []File
	if !opts.Clean {
		if files, err = Render(src, targets); err != nil {
			return nil, err
		}
	}
	// Every path the plan may write or remove must stay inside the
	// project, whatever the symbolic links on the way: checked before
	// anything is read or written.
	paths := []string{ManifestPath}
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	for _, e := range m.Files {
		paths = append(paths, e.Path)
	}
	if err := checkInside(opts.Dir, paths); err != nil {
		return nil, err
	}
	inTargets := func(hs []Host) bool {
		for _, h := range hs {
			if slices.Contains(targets, h) {
				return true
			}
		}
		return false
	}

	// The manifest after this run: entries of hosts left alone stay.
	next := &manifest{Comment: manifestComment}
	desired := map[string]bool{}
	for _, f := range files {
		desired[f.Path] = true
		disk, err := readDisk(opts.Dir, f.Path)
		if err != nil {
			return nil, err
		}
		a := Action{Path: f.Path, content: f.Content, hosts: f.Hosts}
		entry := m.entry(f.Path)
		switch {
		case disk.problem == "is a directory":
			return nil, fmt.Errorf("render: cannot write %s: a directory is in the way", f.Path)
		case disk.problem != "":
			a.Op, a.Conflict = OpUpdate, disk.problem
		case !disk.exists:
			a.Op = OpCreate
		case bytes.Equal(disk.content, f.Content):
			a.Op = OpUnchanged
		case entry == nil && f.accept != nil && f.accept(disk.content):
			a.Op, a.Note = OpKeep, f.acceptNote
		case entry == nil:
			a.Op, a.Conflict = OpUpdate, "not written by cortexbuild render"
		case hashOf(disk.content) != entry.SHA256:
			a.Op, a.Conflict = OpUpdate, "edited by hand since cortexbuild render wrote it"
		default:
			a.Op = OpUpdate
		}
		p.Actions = append(p.Actions, a)
		if a.Op != OpKeep {
			next.Files = append(next.Files, manifestEntry{Path: f.Path, Hosts: f.Hosts, SHA256: hashOf(f.Content)})
		}
	}

	// Files render wrote earlier: keep those of other hosts, remove the
	// targets' files it no longer renders (all of them with Clean).
	remaining := map[Host]bool{} // hosts that keep files of their own after this run
	for _, e := range m.Files {
		if len(e.Hosts) == 1 && !slices.Contains(targets, e.Hosts[0]) {
			remaining[e.Hosts[0]] = true
		}
	}
	for _, e := range m.Files {
		if desired[e.Path] {
			continue
		}
		remove := inTargets(e.Hosts)
		if len(e.Hosts) > 1 {
			// A shared file (AGENTS.md) goes only when no host keeps
			// files of its own.
			remove = len(remaining) == 0
		}
		if !remove {
			next.Files = append(next.Files, e)
			continue
		}
		disk, err := readDisk(opts.Dir, e.Path)
		if err != nil {
			return nil, err
		}
		switch {
		case !disk.exists:
			// Already gone: just forget it.
		case disk.problem != "":
			p.Actions = append(p.Actions, Action{Path: e.Path, Op: OpRemove, Conflict: disk.problem})
		case hashOf(disk.content) != e.SHA256:
			p.Actions = append(p.Actions, Action{Path: e.Path, Op: OpRemove, Conflict: "edited by hand since cortexbuild render wrote it"})
		default:
			p.Actions = append(p.Actions, Action{Path: e.Path, Op: OpRemove})
		}
	}
	sort.Slice(p.Actions, func(i, j int) bool { return p.Actions[i].Path < p.Actions[j].Path })

	// Targets recorded for the next run without --target.
	seenT := map[Host]bool{}
	for _, h := range m.Targets {
		seenT[h] = true
	}
	for _, h := range targets {
		seenT[h] = !opts.Clean
	}
	for _, h := range allHosts {
		if seenT[h] {
			next.Targets = append(next.Targets, h)
		}
	}
	sort.Slice(next.Files, func(i, j int) bool { return next.Files[i].Path < next.Files[j].Path })
	if len(next.Files) > 0 {
		data, err := next.encode()
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		p.manifest = data
	}

	if !opts.Clean && slices.Contains(targets, Codex) {
		p.Warnings = append(p.Warnings, codexChainWarnings(opts.Dir, files)...)
	}
	return p, nil
}

// Apply carries the plan out: it writes and removes files, then the
// manifest. It refuses a plan with conflicts unless it was made with Force,
// and then writes nothing.
func (p *Plan) Apply() error {
	if c := p.Conflicts(); len(c) > 0 && !p.Force {
		return &ConflictError{Actions: c}
	}
	// The links may have changed since the plan was made: check again
	// before writing anything.
	paths := []string{ManifestPath}
	for _, a := range p.Actions {
		paths = append(paths, a.Path)
	}
	if err := checkInside(p.Dir, paths); err != nil {
		return err
	}
	if err := removeLeftovers(p.Dir, paths); err != nil {
		return err
	}
	var removed []string
	for _, a := range p.Actions {
		full := filepath.Join(p.Dir, filepath.FromSlash(a.Path))
		switch a.Op {
		case OpCreate, OpUpdate:
			if err := writeFileAtomic(full, a.content); err != nil {
				return err
			}
		case OpRemove:
			if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("render: %w", err)
			}
			removed = append(removed, a.Path)
		}
	}
	mpath := filepath.Join(p.Dir, filepath.FromSlash(ManifestPath))
	switch {
	case p.manifest != nil && p.ManifestChanged():
		if err := writeFileAtomic(mpath, p.manifest); err != nil {
			return err
		}
	case p.manifest == nil && p.manifestDisk != nil:
		if err := os.Remove(mpath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("render: %w", err)
		}
		removed = append(removed, ManifestPath)
	}
	removeEmptyDirs(p.Dir, removed)
	return nil
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	var tmp *os.File
	var err error
	for range 10 {
		name := tempName(path)
		tmp, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("render: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("render: %w", err)
	}
	return nil
}

// tempName returns a name for the temporary file writeFileAtomic writes
// before renaming it to path: ".<name>.tmp<random uint64 in base 36>"
// beside it. A render killed between the two leaves it behind;
// removeLeftovers removes it on the next run.
func tempName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
}

// isTempOf reports whether name is a temporary file tempName makes for a
// file called base: the exact pattern, lower-case base-36 digits that make
// a uint64.
func isTempOf(name, base string) bool {
	prefix := "." + base + ".tmp"
	suffix, ok := strings.CutPrefix(name, prefix)
	if !ok || suffix == "" || len(suffix) > 13 || strings.Trim(suffix, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		return false
	}
	_, err := strconv.ParseUint(suffix, 36, 64)
	return err == nil
}

// removeLeftovers removes the temporary files an interrupted render left
// beside the files at paths (relative to dir): regular files named exactly
// as tempName names them for one of those files, nothing else.
func removeLeftovers(dir string, paths []string) error {
	byDir := map[string][]string{}
	for _, p := range paths {
		byDir[path.Dir(p)] = append(byDir[path.Dir(p)], path.Base(p))
	}
	for d, bases := range byDir {
		full := filepath.Join(dir, filepath.FromSlash(d))
		entries, err := os.ReadDir(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("render: %w", err)
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || !slices.ContainsFunc(bases, func(b string) bool { return isTempOf(e.Name(), b) }) {
				continue
			}
			if err := os.Remove(filepath.Join(full, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("render: removing the leftover of an interrupted render: %w", err)
			}
		}
	}
	return nil
}

// checkInside refuses, naming the link and where it points, when writing
// or removing one of paths (relative to dir, slash-separated) would go
// outside the project directory because a symbolic link on the way (a
// directory such as .claude/agents, or the file itself) resolves outside
// it. Parts that do not exist yet are created as plain directories, so
// they cannot lead out.
func checkInside(dir string, paths []string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	root, err := resolveDir(abs)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	for _, rel := range paths {
		cur := abs
		for _, part := range strings.Split(rel, "/") {
			cur = filepath.Join(cur, part)
			fi, err := os.Lstat(cur)
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if err != nil {
				return fmt.Errorf("render: %w", err)
			}
			if fi.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			link, _ := filepath.Rel(abs, cur)
			link = filepath.ToSlash(link)
			target, _ := os.Readlink(cur)
			resolved, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return fmt.Errorf("render: %s is a symbolic link to %s, which does not resolve (%v); render never writes outside the project: remove the link (or make it a real directory) and re-run; nothing was written", link, target, err)
			}
			if r, err := filepath.Rel(root, resolved); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return fmt.Errorf("render: %s is a symbolic link to %s (%s), outside the project %s; render never writes outside the project: remove the link (or make it a real directory) and re-run; nothing was written", link, target, resolved, root)
			}
		}
	}
	return nil
}

// resolveDir is filepath.EvalSymlinks for a directory that may not exist
// yet (render creates it): its nearest existing ancestor resolved, the
// rest appended.
func resolveDir(abs string) (string, error) {
	r, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) && filepath.Dir(abs) != abs {
		parent, err := resolveDir(filepath.Dir(abs))
		return filepath.Join(parent, filepath.Base(abs)), err
	}
	return r, err
}

// removeEmptyDirs removes the directories of removed files that are now
// empty (.claude/agents, then .claude), never the project directory.
func removeEmptyDirs(dir string, removed []string) {
	dirs := map[string]bool{}
	for _, r := range removed {
		for d := path.Dir(r); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	// Deepest first.
	sort.Slice(list, func(i, j int) bool { return strings.Count(list[i], "/") > strings.Count(list[j], "/") })
	for _, d := range list {
		os.Remove(filepath.Join(dir, filepath.FromSlash(d))) // fails, harmlessly, unless empty
	}
}

// codexMaxBytes is Codex CLI's default project_doc_max_bytes: it reads that
// much of the AGENTS.md chain (from the git root down to the working
// directory) and silently drops the rest.
const codexMaxBytes = 32 * 1024

// codexChainWarnings warns when the AGENTS.md chain Codex reads at the
// project directory passes its limit, or when an AGENTS.override.md hides
// the rendered AGENTS.md from Codex.
func codexChainWarnings(dir string, files []File) []string {
	var warns []string
	var size int
	for _, f := range files {
		if f.Path == agentsMD {
			size = len(f.Content)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(abs, "AGENTS.override.md")); err == nil {
		warns = append(warns, "AGENTS.override.md exists here: Codex CLI reads it instead of AGENTS.md, so it does not see the rendered rules (rule-critic-gate among them); move its content into "+RulesDir+"/ and delete it")
		if fi, err := os.Stat(filepath.Join(abs, "AGENTS.override.md")); err == nil {
			size = int(fi.Size())
		}
	}
	parts := []string{fmt.Sprintf("AGENTS.md %d", size)}
	total := size
	// Parent directories up to the git root add their AGENTS.md.
	if root := gitRoot(abs); root != "" && root != abs {
		for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
			for _, name := range []string{"AGENTS.override.md", "AGENTS.md"} {
				if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
					rel, _ := filepath.Rel(abs, filepath.Join(d, name))
					parts = append(parts, fmt.Sprintf("%s %d", filepath.ToSlash(rel), fi.Size()))
					total += int(fi.Size())
					break
				}
			}
			if d == root || d == filepath.Dir(d) {
				break
			}
		}
	}
	if total > codexMaxBytes {
		warns = append(warns, fmt.Sprintf("the AGENTS.md chain Codex CLI reads here is %d bytes (%s), over its %d-byte limit: Codex silently drops the rest. Shorten the rules in %s/, or raise project_doc_max_bytes in ~/.codex/config.toml",
			total, strings.Join(parts, " + "), codexMaxBytes, RulesDir))
	}
	return warns
}

// gitRoot returns the nearest directory at or above dir holding .git, or "".
func gitRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
