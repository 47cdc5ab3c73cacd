package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// These tests read the release 'make release' left in dist/ at the
// repository root. Without one they are skipped, saying so; in CI, which
// runs 'make release' first, they fail.

const repoRoot = "../.."

// builtRelease is a release found in dist/.
type builtRelease struct {
	dir     string
	version string
	sums    map[string]string // file name → SHA-256
	// hostImages are the platforms of the host-CLI images, which only a
	// release built with -hostclis holds.
	hostImages []Platform
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  (cortexbuild_(.+)_(linux|darwin)_(amd64|arm64)\.tar\.gz|cortexbuild_(.+?)_(hostclis_)?image_linux_(amd64|arm64)\.tar)$`)

// distRelease reads dist/SHA256SUMS, skipping the test (failing it in CI)
// when there is none.
func distRelease(t *testing.T) builtRelease {
	t.Helper()
	dir := filepath.Join(repoRoot, "dist")
	data, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if errors.Is(err, fs.ErrNotExist) {
		msg := "no release in dist/ (" + filepath.Join(dir, SumsFile) + " is missing): run 'make release' first"
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip("skipped: " + msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := builtRelease{dir: dir, sums: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		m := sumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("%s: line %q is not '<sha256>  cortexbuild_<version>_<os>_<arch>.tar.gz' or an image tarball", SumsFile, sc.Text())
		}
		r.sums[m[2]] = m[1]
		v := m[3] + m[6]
		if m[7] != "" {
			r.hostImages = append(r.hostImages, Platform{"linux", m[8]})
		}
		if r.version == "" {
			r.version = v
		} else if v != r.version {
			t.Fatalf("%s lists versions %s and %s", SumsFile, r.version, v)
		}
	}
	return r
}

// The release holds an archive per platform and an image per linux
// architecture, and nothing else; SHA256SUMS verifies every file, as
// 'sha256sum -c' does.
func TestReleaseFilesAndChecksums(t *testing.T) {
	r := distRelease(t)
	var want []string
	for _, p := range Platforms {
		want = append(want, ArchiveName(r.version, p))
		if p.OS == "linux" {
			want = append(want, ImageTarballName(r.version, p))
		}
	}
	for _, p := range r.hostImages {
		want = append(want, HostImageTarballName(r.version, p))
	}
	slices.Sort(want)
	got := slices.Sorted(func(yield func(string) bool) {
		for n := range r.sums {
			if !yield(n) {
				return
			}
		}
	})
	if !slices.Equal(got, want) {
		t.Errorf("SHA256SUMS lists\n%v\nwant\n%v", got, want)
	}
	for n, sum := range r.sums {
		actual, err := fileSHA256(filepath.Join(r.dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if actual != sum {
			t.Errorf("%s: SHA-256 %s, SHA256SUMS says %s", n, actual, sum)
		}
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--strict", "-c", SumsFile)
		cmd.Dir = r.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c %s: %v\n%s", SumsFile, err, out)
		}
	}
}

// archiveContents reads an archive's entries and their data.
// archives caches what archiveContents read: each archive is decompressed
// once per test binary.
var archives = struct {
	sync.Mutex
	m map[string]archive
}{m: map[string]archive{}}

type archive struct {
	heads map[string]*tar.Header
	data  map[string][]byte
}

func archiveContents(t *testing.T, path string) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	archives.Lock()
	defer archives.Unlock()
	if a, ok := archives.m[path]; ok {
		return a.heads, a.data
	}
	heads, data := readArchive(t, path)
	archives.m[path] = archive{heads, data}
	return heads, data
}

func readArchive(t *testing.T, path string) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	heads, data := map[string]*tar.Header{}, map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return heads, data
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		heads[h.Name], data[h.Name] = h, b
	}
}

// releaseBinary returns the binary in p's archive.
func releaseBinary(t *testing.T, r builtRelease, p Platform) []byte {
	t.Helper()
	_, data := archiveContents(t, filepath.Join(r.dir, ArchiveName(r.version, p)))
	return data[Binary]
}

// Each archive holds the executable of its platform (the machine in its
// ELF or Mach-O header), built static, stripped, without local paths and
// with the version, and README.md (and LICENSE when the repository has
// one); the image tool is not linked into it.
func TestReleaseArchivesHoldTheirPlatformsBinary(t *testing.T) {
	r := distRelease(t)
	wantFiles := []string{"README.md", Binary}
	if _, err := os.Stat(filepath.Join(repoRoot, "LICENSE")); err == nil {
		wantFiles = append(wantFiles, "LICENSE")
	}
	slices.Sort(wantFiles)
	for _, p := range Platforms {
		name := ArchiveName(r.version, p)
		heads, data := archiveContents(t, filepath.Join(r.dir, name))
		got := slices.Sorted(func(yield func(string) bool) {
			for n := range heads {
				if !yield(n) {
					return
				}
			}
		})
		if !slices.Equal(got, wantFiles) {
			t.Errorf("%s holds %v, want %v", name, got, wantFiles)
		}
		if h := heads[Binary]; h == nil || h.Mode&0o111 != 0o111 || h.Typeflag != tar.TypeReg {
			t.Errorf("%s: %s is not an executable file: %+v", name, Binary, h)
			continue
		}
		if readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md")); err != nil || !bytes.Equal(readme, data["README.md"]) {
			t.Errorf("%s: README.md differs from the repository's (%v)", name, err)
		}
		checkBinary(t, name, p, data[Binary])
	}
}

// checkBinary checks an executable's header and build settings: its
// machine, static and stripped, built without cgo and with -trimpath, and
// without go-containerregistry.
func checkBinary(t *testing.T, where string, p Platform, bin []byte) {
	t.Helper()
	switch p.OS {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Errorf("%s: not an ELF file: %v", where, err)
			return
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		if f.Machine != want || f.Type != elf.ET_EXEC {
			t.Errorf("%s: ELF %v %v, want an executable for %v", where, f.Type, f.Machine, want)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: dynamically linked (%v), want static", where, prog.Type)
			}
		}
		if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
			t.Errorf("%s: has a symbol table or DWARF, want stripped (-s -w)", where)
		}
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Errorf("%s: not a Mach-O file: %v", where, err)
			return
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		if f.Cpu != want || f.Type != macho.TypeExec {
			t.Errorf("%s: Mach-O %v %v, want an executable for %v", where, f.Type, f.Cpu, want)
		}
		if f.Segment("__DWARF") != nil {
			t.Errorf("%s: has DWARF, want stripped (-w)", where)
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Errorf("%s: no build information: %v", where, err)
		return
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"] != p.OS || settings["GOARCH"] != p.Arch {
		t.Errorf("%s: built with CGO_ENABLED=%q -trimpath=%q for %s/%s; want 0, true, %s/%s",
			where, settings["CGO_ENABLED"], settings["-trimpath"], settings["GOOS"], settings["GOARCH"], p.OS, p.Arch)
	}
	// -trimpath keeps -ldflags out of the build information: the version
	// is checked by running the binary (TestReleaseBinaryPrintsItsVersion).
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "github.com/google/go-containerregistry") {
			t.Errorf("%s links %s: only tools/release may", where, d.Path)
		}
	}
}

// The linux binary of this machine's architecture, taken from its
// archive, says the release's version.
func TestReleaseBinaryPrintsItsVersion(t *testing.T) {
	r := distRelease(t)
	if runtime.GOOS != "linux" {
		t.Skip("skipped: the release's linux binaries run only on linux")
	}
	bin := releaseBinary(t, r, Platform{"linux", runtime.GOARCH})
	path := filepath.Join(t.TempDir(), Binary)
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "version")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", ArchiveName(r.version, Platform{"linux", runtime.GOARCH}), err, out)
	}
	if want := "cortexbuild " + r.version + " "; !strings.HasPrefix(string(out), want) {
		t.Errorf("version printed %q, want it to start with %q", out, want)
	}
}
