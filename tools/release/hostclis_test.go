package main

import (
	"archive/tar"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

func pins(t *testing.T) *hostversions.Pins {
	t.Helper()
	p, err := hostversions.Default()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The packages the image takes are the pinned versions, at the paths
// scripts/install-host-clis.sh installs them to (which the host suite
// reads too): the script's binary paths, for each platform, are the
// packages' directories and executables.
func TestHostCLIsAreThePinsWhereTheScriptInstallsThem(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "install-host-clis.sh"))
	if err != nil {
		t.Fatal(err)
	}
	binLine := regexp.MustCompile(`(?m)^bin_(\w+)="\$dir/(\S+)"$`)
	scriptPaths := map[string]string{}
	for _, m := range binLine.FindAllStringSubmatch(string(script), -1) {
		scriptPaths[m[1]] = m[2]
	}
	if len(scriptPaths) != 3 {
		t.Fatalf("scripts/install-host-clis.sh names %d binaries (%v), want claude, codex and copilot", len(scriptPaths), scriptPaths)
	}
	version := map[string]string{}
	for _, tool := range pins(t).Tools {
		version[tool.Name] = tool.Version
	}
	for _, p := range []Platform{{"linux", "amd64"}, {"linux", "arm64"}} {
		plat, triple, err := npmPlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		clis, err := HostCLIs(pins(t), p)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range clis {
			names = append(names, c.Name)
			want := strings.NewReplacer("$plat", plat, "$triple", triple).Replace(scriptPaths[c.Name])
			if got := "node_modules/" + c.Dir + "/" + c.Exec; got != want {
				t.Errorf("%s/%s: %s at %s, the script installs it at %s", p.OS, p.Arch, c.Name, got, want)
			}
			if !strings.HasPrefix(c.Version, version[c.Name]) || (c.Version != version[c.Name] && c.Version != version[c.Name]+"-"+plat) {
				t.Errorf("%s: version %s, pinned %s", c.Name, c.Version, version[c.Name])
			}
		}
		if !slices.Equal(names, []string{"claude", "codex", "copilot"}) {
			t.Errorf("host CLIs %v, want claude, codex and copilot", names)
		}
	}
	if _, err := HostCLIs(pins(t), Platform{"darwin", "arm64"}); err == nil {
		t.Error("HostCLIs accepted darwin: the image is linux")
	}
}

// fakeInstall writes dir as scripts/install-host-clis.sh leaves it: each
// package's files, and npm's hidden lock file recording each at its
// version with the SHA-512 integrity of its bytes.
func fakeInstall(t *testing.T, clis []HostCLI) string {
	t.Helper()
	dir := t.TempDir()
	packages := map[string]map[string]string{}
	for _, c := range clis {
		pkg := filepath.Join(dir, "node_modules", filepath.FromSlash(c.Dir))
		exe := filepath.Join(pkg, filepath.FromSlash(c.Exec))
		if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, []byte("#!/bin/sh\necho "+c.Name+" "+c.Version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		pj, _ := json.Marshal(map[string]string{"name": c.Package, "version": c.Version})
		if err := os.WriteFile(filepath.Join(pkg, "package.json"), pj, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("package.json", filepath.Join(pkg, "manifest.json")); err != nil {
			t.Fatal(err)
		}
		sum := sha512.Sum512(pj)
		e := map[string]string{"version": c.Version, "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}
		if c.Package != c.Dir { // an alias: npm records the real name
			e["name"] = c.Package
		}
		packages["node_modules/"+c.Dir] = e
	}
	writeLock(t, dir, packages)
	return dir
}

func writeLock(t *testing.T, dir string, packages map[string]map[string]string) {
	t.Helper()
	lock, _ := json.Marshal(map[string]any{"lockfileVersion": 3, "requires": true, "packages": packages})
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(hiddenLock)), lock, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLock(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	var lock struct {
		Packages map[string]map[string]string `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(hiddenLock)))
	if err != nil || json.Unmarshal(b, &lock) != nil {
		t.Fatalf("the lock: %v", err)
	}
	return lock.Packages
}

// A directory as npm installed the pinned CLIs is taken, and what npm did
// not install at the pinned version with a SHA-512 integrity is refused,
// naming the CLI and what is wrong.
func TestVerifyHostCLIs(t *testing.T) {
	p := Platform{"linux", "amd64"}
	clis, err := HostCLIs(pins(t), p)
	if err != nil {
		t.Fatal(err)
	}
	dir := fakeInstall(t, clis)
	got, err := VerifyHostCLIs(dir, clis)
	if err != nil {
		t.Fatalf("a good install is refused: %v", err)
	}
	for i, c := range got {
		if c.HostCLI != clis[i] || !sha512Integrity.MatchString(c.Integrity) {
			t.Errorf("verified %+v", c)
		}
	}
	if found, _, err := hostCLIsPlatform(pins(t), dir); err != nil || found != p {
		t.Errorf("the install's platform: %v, %v; want linux/amd64", found, err)
	}

	codex := "node_modules/" + clis[1].Dir
	for name, c := range map[string]struct {
		change func(dir string)
		want   string // with DIR for the install directory
	}{
		"no lock": {func(dir string) { os.Remove(filepath.Join(dir, filepath.FromSlash(hiddenLock))) }, "installed them"},
		"another version": {func(dir string) {
			l := readLock(t, dir)
			l[codex]["version"] = "0.1.0-linux-x64"
			writeLock(t, dir, l)
		}, "codex: " + codex + " is @openai/codex@0.1.0-linux-x64, want @openai/codex@" + clis[1].Version},
		"another package": {func(dir string) {
			l := readLock(t, dir)
			l[codex]["name"] = "@evil/codex"
			writeLock(t, dir, l)
		}, "codex: " + codex + " is @evil/codex@"},
		"not in the lock": {func(dir string) {
			l := readLock(t, dir)
			delete(l, codex)
			writeLock(t, dir, l)
		}, "codex: DIR/" + hiddenLock + " lists no " + codex},
		"sha1 integrity": {func(dir string) {
			l := readLock(t, dir)
			l[codex]["integrity"] = "sha1-3u8x8pRrTl2jJvh5pZBsyfkSJPU="
			writeLock(t, dir, l)
		}, `codex: DIR/` + hiddenLock + ` records integrity "sha1-`},
		"package.json disagrees": {func(dir string) {
			os.WriteFile(filepath.Join(dir, filepath.FromSlash(codex), "package.json"), []byte(`{"name":"@openai/codex","version":"0.1.0"}`), 0o644)
		}, "package.json is not @openai/codex@" + clis[1].Version},
		"not executable": {func(dir string) {
			os.Chmod(filepath.Join(dir, filepath.FromSlash(codex), filepath.FromSlash(clis[1].Exec)), 0o644)
		}, "codex: DIR/" + codex + "/" + clis[1].Exec + " is not an executable file"},
		"no executable": {func(dir string) {
			os.Remove(filepath.Join(dir, filepath.FromSlash(codex), filepath.FromSlash(clis[1].Exec)))
		}, "is not an executable file"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := fakeInstall(t, clis)
			c.change(dir)
			_, err := VerifyHostCLIs(dir, clis)
			want := strings.ReplaceAll(c.want, "DIR", dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one containing %q", err, want)
			}
			if err != nil && strings.Contains(err.Error(), "claude:") {
				t.Errorf("claude, which is as installed, is reported: %v", err)
			}
		})
	}
}

// The flags that cannot work together are refused before anything is
// built, saying what to give.
func TestHostCLIFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-version v1 -hostclis d":                                    "-hostclis needs -hostclis-base",
		"-version v1 -hostclis-base b.tar":                           "-hostclis-base is given without -hostclis",
		"-version v1 -hostclis d -hostclis-base b.tar -images=false": "-images=false turns images off",
	} {
		if _, err := parseFlags(strings.Fields(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", args, err, want)
		}
	}
	if _, err := parseFlags(strings.Fields("-version v1 -hostclis d -hostclis-base b.tar")); err != nil {
		t.Errorf("both host flags: %v", err)
	}
	// A directory without the CLIs is refused before the build.
	err := run(strings.Fields("-version v1 -dist " + t.TempDir() + " -hostclis " + t.TempDir() + " -hostclis-base b.tar"))
	if err == nil || !strings.Contains(err.Error(), "holds the host CLI packages of 0 linux platforms") {
		t.Errorf("run with an empty -hostclis: %v", err)
	}
}

// The host-CLI image is the base's layers and one more: the release's
// binary, each CLI's package as installed (modes and links kept) under
// /opt/hostclis/node_modules, each CLI linked from /usr/local/bin, and the
// state directory owned by the image's user; it runs the gateway as the
// release image does, names each CLI's package, version and integrity in
// its labels, and loads as cortexbuild-hostclis:<version>.
func TestHostImage(t *testing.T) {
	p := Platform{"linux", "amd64"}
	clis, err := HostCLIs(pins(t), p)
	if err != nil {
		t.Fatal(err)
	}
	dir := fakeInstall(t, clis)
	installed, err := VerifyHostCLIs(dir, clis)
	if err != nil {
		t.Fatal(err)
	}
	base, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	bcf, _ := base.ConfigFile()
	bcf = bcf.DeepCopy()
	bcf.OS, bcf.Architecture = "linux", "amd64"
	if base, err = mutate.ConfigFile(base, bcf); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cortexbuild")
	if err := os.WriteFile(bin, []byte("the release binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Release{Version: "v9.9.9", Revision: strings.Repeat("a", 40), Source: DefaultSource, Time: time.Unix(1_700_000_000, 0).UTC(), Dist: t.TempDir()}

	if _, err := BuildHostImage(r, Platform{"linux", "arm64"}, bin, base, dir, installed); err == nil || !strings.Contains(err.Error(), "the base image is for linux/amd64, the host CLIs for linux/arm64") {
		t.Errorf("a base of another architecture: %v", err)
	}
	img, err := BuildHostImage(r, p, bin, base, dir, installed)
	if err != nil {
		t.Fatal(err)
	}
	n, err := WriteHostImageTarball(r, img)
	if err != nil {
		t.Fatal(err)
	}
	if n != "cortexbuild_v9.9.9_hostclis_image_linux_amd64.tar" {
		t.Errorf("tarball %s", n)
	}
	tag, _ := HostImageTag(r.Version)
	loaded, err := tarball.ImageFromPath(filepath.Join(r.Dist, n), &tag)
	if err != nil {
		t.Fatalf("the tarball does not load as %s: %v", tag, err)
	}
	baseLayers, _ := base.Layers()
	layers, err := loaded.Layers()
	if err != nil || len(layers) != len(baseLayers)+1 {
		t.Fatalf("%d layers (%v), want the base's %d and one", len(layers), err, len(baseLayers))
	}
	for i, l := range baseLayers {
		a, _ := l.Digest()
		b, _ := layers[i].Digest()
		if a != b {
			t.Errorf("layer %d is not the base's", i)
		}
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{BinaryPath}) || !slices.Equal(c.Cmd, ImageCmd) || c.User != ImageUser || c.WorkingDir != StateDir {
		t.Errorf("config %+v, want the release image's entrypoint, command, user and working directory", c)
	}
	if !slices.Contains(c.Env, "CORTEXBUILD_HOSTCLIS="+HostCLIsDir) || !slices.Contains(c.Env, "CORTEXBUILD_LLM=1") || !slices.ContainsFunc(c.Env, func(e string) bool {
		return strings.HasPrefix(e, "PATH=/usr/local/bin:") && strings.Contains(e, ":/bin")
	}) {
		t.Errorf("env %q", c.Env)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	for _, ic := range installed {
		for k, want := range map[string]string{".package": ic.Package, ".version": ic.Version, ".integrity": ic.Integrity} {
			if got := c.Labels[labelPrefix+ic.Name+k]; got != want {
				t.Errorf("label %s%s%s = %q, want %q", labelPrefix, ic.Name, k, got, want)
			}
		}
	}
	if c.Labels["org.opencontainers.image.title"] != HostImageRepo || c.Labels["org.opencontainers.image.version"] != r.Version || !strings.HasPrefix(c.Labels["org.opencontainers.image.base.digest"], "sha256:") {
		t.Errorf("labels %v", c.Labels)
	}

	heads, data := layerEntries(t, layers[len(layers)-1])
	if h := heads["usr/local/bin/cortexbuild"]; h == nil || h.Mode != 0o755 || string(data["usr/local/bin/cortexbuild"]) != "the release binary" {
		t.Errorf("usr/local/bin/cortexbuild: %+v", h)
	}
	if d := heads["data/"]; d == nil || d.Uid != UID || d.Gid != GID {
		t.Errorf("data/: %+v, want owned by %d", d, UID)
	}
	for _, ic := range installed {
		prefix := "opt/hostclis/node_modules/" + ic.Dir + "/"
		exe := prefix + ic.Exec
		if h := heads[exe]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || !strings.Contains(string(data[exe]), ic.Version) {
			t.Errorf("%s: %+v, want the installed executable", exe, h)
		}
		if h := heads[prefix+"package.json"]; h == nil || h.Mode != 0o644 {
			t.Errorf("%spackage.json: %+v, want a 0644 file", prefix, h)
		}
		if h := heads[prefix+"manifest.json"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "package.json" {
			t.Errorf("%smanifest.json: %+v, want the package's link kept", prefix, h)
		}
		link := heads["usr/local/bin/"+ic.Name]
		if link == nil || link.Typeflag != tar.TypeSymlink || heads[strings.TrimPrefix(link.Linkname, "/")] == nil || path.Clean(link.Linkname) != "/"+exe {
			t.Errorf("usr/local/bin/%s: %+v, want a link to /%s", ic.Name, link, exe)
		}
	}
	// Every entry's parent directory is in the layer, before it.
	for n := range heads {
		if d := path.Dir(strings.TrimSuffix(n, "/")); d != "." && heads[d+"/"] == nil {
			t.Errorf("%s has no parent directory entry %s/", n, d)
		}
	}
}

// layerEntries reads a layer's entries.
func layerEntries(t *testing.T, l v1.Layer) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	heads, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return heads, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		heads[h.Name], data[h.Name] = h, b
	}
}

// The nightly workflow builds the host-CLI image with this tool's flags
// (they parse, both host flags given) from what the install script
// installed, and runs the host suite, required, against the CLIs of the
// image.
func TestNightlyWorkflowUsesTheseFlags(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "workflows", "hostclis-image.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string            `yaml:"run"`
				Env map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	var release, suite, install bool
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			run := strings.Join(strings.Fields(s.Run), " ")
			install = install || strings.Contains(run, "scripts/install-host-clis.sh")
			for _, line := range strings.Split(strings.ReplaceAll(s.Run, "\\\n", " "), "\n") {
				i := strings.Index(line, "go run ./tools/release ")
				if i < 0 {
					continue
				}
				args := strings.Fields(line[i+len("go run ./tools/release "):])
				for k, a := range args {
					if strings.Contains(a, "$") {
						args[k] = "v1" // a shell expansion: the version or a path
					}
				}
				o, err := parseFlags(args)
				if err != nil || o.hostCLIs == "" || o.hostBase == "" {
					t.Errorf("the workflow runs the release tool with %q: %v, want -hostclis and -hostclis-base", args, err)
				}
				release = true
			}
			if strings.Contains(run, "go test") && strings.Contains(run, "./internal/hostcli") {
				suite = true
				if !strings.Contains(run, "CORTEXBUILD_REQUIRE_HOSTCLIS=1") && s.Env["CORTEXBUILD_REQUIRE_HOSTCLIS"] == "" {
					t.Error("the host suite step does not set CORTEXBUILD_REQUIRE_HOSTCLIS: a missing CLI would skip instead of failing")
				}
				if !strings.Contains(run, "CORTEXBUILD_HOSTCLIS=") && s.Env["CORTEXBUILD_HOSTCLIS"] == "" {
					t.Error("the host suite step does not point CORTEXBUILD_HOSTCLIS at the image's CLIs")
				}
			}
		}
	}
	if !install || !release || !suite {
		t.Errorf("the workflow installs the pins: %v, builds with the release tool: %v, runs the host suite: %v; want all three", install, release, suite)
	}
}
