package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

// The host-CLI image: the release's binary and the native binaries of the
// host CLIs at their pinned versions (tools/hostversions), on a base image
// that gives them what they need to run (a C library, a shell); built
// nightly (docs/operations.md, "The host-CLI image"). The CLIs come from a
// directory scripts/install-host-clis.sh filled from npm: npm checked each
// package against the registry's integrity when it installed it, and the
// build takes only packages its lock file records at the pinned version
// with a SHA-512 integrity.
const (
	HostImageRepo = "cortexbuild-hostclis"
	HostCLIsDir   = "/opt/hostclis" // the install directory in the image, as CORTEXBUILD_HOSTCLIS names it
	hiddenLock    = "node_modules/.package-lock.json"
	labelPrefix   = "dev.cortexbuild.hostcli."
)

// HostCLI is a pinned host CLI as its npm platform package holds it.
type HostCLI struct {
	Name    string // the executable, as pinned: claude
	Dir     string // the package's directory under node_modules: @anthropic-ai/claude-code-linux-x64
	Package string // the package's name in the registry: @anthropic-ai/claude-code-linux-x64
	Version string // the package's version: the pin (Codex CLI's platform builds add -<platform>)
	Exec    string // the executable, relative to Dir
}

// npmPlatform is how the CLIs' platform packages name a linux
// architecture, and the target triple of Codex CLI's musl build.
func npmPlatform(p Platform) (plat, triple string, err error) {
	if p.OS == "linux" {
		switch p.Arch {
		case "amd64":
			return "linux-x64", "x86_64-unknown-linux-musl", nil
		case "arm64":
			return "linux-arm64", "aarch64-unknown-linux-musl", nil
		}
	}
	return "", "", fmt.Errorf("no host CLI packages for %s/%s: the host-CLI image is built for linux on amd64 or arm64", p.OS, p.Arch)
}

// HostCLIs returns the platform packages of the pinned Claude Code, Codex
// CLI and Copilot CLI for p, where scripts/install-host-clis.sh installs
// them.
func HostCLIs(pins *hostversions.Pins, p Platform) ([]HostCLI, error) {
	plat, triple, err := npmPlatform(p)
	if err != nil {
		return nil, err
	}
	version := map[string]string{}
	for _, t := range pins.Tools {
		version[t.Name] = t.Version
	}
	var out []HostCLI
	for _, c := range []struct{ name, scope, pkg, exec string }{
		{"claude", "@anthropic-ai", "claude-code", "claude"},
		{"codex", "@openai", "codex", "vendor/" + triple + "/bin/codex"},
		{"copilot", "@github", "copilot", "copilot"},
	} {
		v := version[c.name]
		if v == "" {
			return nil, fmt.Errorf("tools/hostversions pins no version of %s", c.name)
		}
		cli := HostCLI{Name: c.name, Dir: c.scope + "/" + c.pkg + "-" + plat, Package: c.scope + "/" + c.pkg + "-" + plat, Version: v, Exec: c.exec}
		if c.name == "codex" {
			// Codex CLI publishes its platform builds as versions of
			// @openai/codex itself; the script installs one under the
			// platform package's directory name.
			cli.Package, cli.Version = c.scope+"/"+c.pkg, v+"-"+plat
		}
		out = append(out, cli)
	}
	return out, nil
}

// lockEntry is a package as npm's hidden lock file records it.
type lockEntry struct {
	Name      string `json:"name"` // set when the directory is an alias
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
}

var sha512Integrity = regexp.MustCompile(`^sha512-[A-Za-z0-9+/]{86}==$`)

// Installed is a host CLI found in an install directory, with the
// integrity npm checked its package against.
type Installed struct {
	HostCLI
	Integrity string
}

// VerifyHostCLIs checks that dir (where scripts/install-host-clis.sh
// installed the CLIs) holds each of clis as npm installed it: its package
// recorded in node_modules/.package-lock.json under its name at its
// version with a SHA-512 integrity, its package.json saying the same, its
// executable a regular executable file. Every problem is reported.
func VerifyHostCLIs(dir string, clis []HostCLI) ([]Installed, error) {
	lockPath := filepath.Join(dir, filepath.FromSlash(hiddenLock))
	data, err := os.ReadFile(lockPath)
	if err != nil {
		return nil, fmt.Errorf("%w: the host CLIs are taken only as npm installed them (scripts/install-host-clis.sh %s)", err, dir)
	}
	var lock struct {
		Packages map[string]lockEntry `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return nil, fmt.Errorf("%s: %w", lockPath, err)
	}
	var out []Installed
	var problems []string
	for _, c := range clis {
		e, ok := lock.Packages["node_modules/"+c.Dir]
		name := e.Name
		if name == "" {
			name = path.Base(c.Dir)
			if scope := path.Dir(c.Dir); scope != "." {
				name = scope + "/" + name
			}
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: %s lists no node_modules/%s: install %s@%s with scripts/install-host-clis.sh", c.Name, lockPath, c.Dir, c.Package, c.Version))
			continue
		case name != c.Package || e.Version != c.Version:
			problems = append(problems, fmt.Sprintf("%s: node_modules/%s is %s@%s, want %s@%s (tools/hostversions/host-versions.yaml)", c.Name, c.Dir, name, e.Version, c.Package, c.Version))
			continue
		case !sha512Integrity.MatchString(e.Integrity):
			problems = append(problems, fmt.Sprintf("%s: %s records integrity %q for node_modules/%s, want the sha512-… npm checked the package against", c.Name, lockPath, e.Integrity, c.Dir))
			continue
		}
		pkgDir := filepath.Join(dir, "node_modules", filepath.FromSlash(c.Dir))
		var pj struct{ Name, Version string }
		if b, err := os.ReadFile(filepath.Join(pkgDir, "package.json")); err != nil || json.Unmarshal(b, &pj) != nil || pj.Name != c.Package || pj.Version != c.Version {
			problems = append(problems, fmt.Sprintf("%s: %s/package.json is not %s@%s (name %q, version %q, %v): the directory is not what npm recorded", c.Name, pkgDir, c.Package, c.Version, pj.Name, pj.Version, err))
			continue
		}
		exe := filepath.Join(pkgDir, filepath.FromSlash(c.Exec))
		if fi, err := os.Lstat(exe); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			problems = append(problems, fmt.Sprintf("%s: %s is not an executable file (%v)", c.Name, exe, modeOrErr(fi, err)))
			continue
		}
		out = append(out, Installed{HostCLI: c, Integrity: e.Integrity})
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

func modeOrErr(fi fs.FileInfo, err error) any {
	if err != nil {
		return err
	}
	return fi.Mode()
}

// packageFiles lists the files of an installed package under prefix (a
// slash path in the image), with their modes; symbolic links are kept as
// links, and one pointing out of the package is refused.
func packageFiles(pkgDir, prefix string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(pkgDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(pkgDir, p)
		if err != nil {
			return err
		}
		n := path.Join(prefix, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			files = append(files, File{Name: n + "/", Mode: 0o755})
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) || !strings.HasPrefix(path.Join(path.Dir(n), filepath.ToSlash(target)), prefix+"/") {
				return fmt.Errorf("%s links to %s, outside its package", p, target)
			}
			files = append(files, File{Name: n, Mode: 0o777, Link: filepath.ToSlash(target)})
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := int64(0o644)
			if fi.Mode().Perm()&0o111 != 0 {
				mode = 0o755
			}
			files = append(files, File{Name: n, Mode: mode, Data: data})
		default:
			return fmt.Errorf("%s is neither a file, a directory nor a link", p)
		}
		return nil
	})
	return files, err
}

// HostImageTag is the tag the host-CLI image tarball loads as.
func HostImageTag(version string) (name.Tag, error) {
	return name.NewTag(HostImageRepo + ":" + version)
}

// HostImageTarballName is the file name of the host-CLI image tarball.
func HostImageTarballName(version string, p Platform) string {
	return fmt.Sprintf("cortexbuild_%s_hostclis_image_%s_%s.tar", version, p.OS, p.Arch)
}

// HostImageEnv is the host-CLI image's environment: the release image's,
// the base's system directories on PATH, and CORTEXBUILD_HOSTCLIS naming
// the install directory for the host suite (internal/hostcli).
var HostImageEnv = []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + StateDir, "CORTEXBUILD_LLM=1", "CORTEXBUILD_HOSTCLIS=" + HostCLIsDir}

// BuildHostImage builds p's host-CLI image: base, then one layer with the
// release's binary, each verified CLI's package under
// /opt/hostclis/node_modules (the layout the host suite and the install
// script use) linked from /usr/local/bin, and the state directory; the
// release image's configuration, and labels naming each CLI's package,
// version and integrity.
func BuildHostImage(r Release, p Platform, binPath string, base v1.Image, dir string, clis []Installed) (Image, error) {
	bcf, err := base.ConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("the base image: %w", err)
	}
	if bcf.OS != p.OS || bcf.Architecture != p.Arch {
		return Image{}, fmt.Errorf("the base image is for %s/%s, the host CLIs for %s/%s: give a base of their platform", bcf.OS, bcf.Architecture, p.OS, p.Arch)
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return Image{}, err
	}
	dirs := map[string]bool{}
	var files []File
	addDirs := func(n string) {
		for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
			if !dirs[d] {
				dirs[d] = true
				files = append(files, File{Name: d + "/", Mode: 0o755})
			}
		}
	}
	add := func(f File) {
		addDirs(strings.TrimSuffix(f.Name, "/"))
		if strings.HasSuffix(f.Name, "/") {
			if dirs[strings.TrimSuffix(f.Name, "/")] {
				return
			}
			dirs[strings.TrimSuffix(f.Name, "/")] = true
		}
		files = append(files, f)
	}
	add(File{Name: BinaryPath[1:], Mode: 0o755, Data: bin})
	add(File{Name: StateDir[1:] + "/", Mode: 0o755, UID: UID, GID: GID})
	add(File{Name: "tmp/", Mode: 0o1777})
	labels := Labels(r)
	labels["org.opencontainers.image.title"] = HostImageRepo
	if d, err := base.Digest(); err == nil {
		labels["org.opencontainers.image.base.digest"] = d.String()
	}
	for _, c := range clis {
		prefix := HostCLIsDir[1:] + "/node_modules/" + c.Dir
		pf, err := packageFiles(filepath.Join(dir, "node_modules", filepath.FromSlash(c.Dir)), prefix)
		if err != nil {
			return Image{}, err
		}
		for _, f := range pf {
			add(f)
		}
		add(File{Name: "usr/local/bin/" + c.Name, Mode: 0o777, Link: "/" + prefix + "/" + c.Exec})
		labels[labelPrefix+c.Name+".package"] = c.Package
		labels[labelPrefix+c.Name+".version"] = c.Version
		labels[labelPrefix+c.Name+".integrity"] = c.Integrity
	}
	layer, err := layerOf(files, r)
	if err != nil {
		return Image{}, err
	}
	created := v1.Time{Time: r.Time}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: created, CreatedBy: "go run ./tools/release -hostclis", Comment: "cortexbuild " + r.Version + " and the pinned host CLIs",
	}})
	if err != nil {
		return Image{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Image{}, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.Author = r.Source
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = ImageCmd
	cf.Config.Env = HostImageEnv
	cf.Config.User = ImageUser
	cf.Config.WorkingDir = StateDir
	cf.Config.ExposedPorts = map[string]struct{}{fmt.Sprint(Port) + "/tcp": {}}
	cf.Config.Volumes = map[string]struct{}{StateDir: {}}
	cf.Config.StopSignal = "SIGTERM"
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return Image{}, err
	}
	return Image{Platform: p, Image: img}, nil
}

// WriteHostImageTarball writes the host-CLI image as a tarball 'docker
// load -i' reads, tagged cortexbuild-hostclis:<version>, and returns its
// name.
func WriteHostImageTarball(r Release, img Image) (string, error) {
	tag, err := HostImageTag(r.Version)
	if err != nil {
		return "", err
	}
	n := HostImageTarballName(r.Version, img.Platform)
	f, err := os.Create(filepath.Join(r.Dist, n))
	if err != nil {
		return "", err
	}
	if err := tarball.Write(tag, img.Image, f); err != nil {
		f.Close()
		return "", fmt.Errorf("%s: %w", n, err)
	}
	return n, f.Close()
}

// hostCLIsPlatform is the linux platform whose CLI packages dir holds:
// scripts/install-host-clis.sh installs those of the machine it runs on.
func hostCLIsPlatform(pins *hostversions.Pins, dir string) (Platform, []HostCLI, error) {
	var found []Platform
	var clis []HostCLI
	for _, p := range Platforms {
		if p.OS != "linux" {
			continue
		}
		cs, err := HostCLIs(pins, p)
		if err != nil {
			return Platform{}, nil, err
		}
		if slices.ContainsFunc(cs, func(c HostCLI) bool {
			_, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(c.Dir)))
			return err == nil
		}) {
			found, clis = append(found, p), cs
		}
	}
	if len(found) != 1 {
		return Platform{}, nil, fmt.Errorf("-hostclis %s holds the host CLI packages of %d linux platforms (%v), want one: run scripts/install-host-clis.sh %s on the machine of the image's architecture", dir, len(found), found, dir)
	}
	return found[0], clis, nil
}
