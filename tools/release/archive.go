package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Release is what one run builds.
type Release struct {
	Version  string    // v0.3.0
	Revision string    // the commit
	Source   string    // the repository's URL
	Time     time.Time // every entry's date: the commit's time
	Dist     string    // the output directory
}

// Platform is a target of the release.
type Platform struct{ OS, Arch string }

// Platforms are the targets, in the order they are built.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Package is the package of the binary; VersionVar is the variable its
// version is written into at link time.
const (
	Package    = "./cmd/cortexbuild"
	VersionVar = "github.com/cortexbuild/cortexbuild/internal/cli.Version"
	Binary     = "cortexbuild"
	SumsFile   = "SHA256SUMS"
)

// ArchiveName is the file name of a platform's archive.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("cortexbuild_%s_%s_%s.tar.gz", version, p.OS, p.Arch)
}

// versionRE is what a version may be: a name that fits in file names and
// image tags ('git describe' output such as v0.3.0-4-g1a2b3c4-dirty).
var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckVersion refuses a version that cannot name the files and the
// image tag.
func CheckVersion(v string) error {
	if v == "" {
		return errors.New("-version is required, e.g. -version v0.3.0 (make release passes 'git describe --tags --always --dirty')")
	}
	if !versionRE.MatchString(v) {
		return fmt.Errorf("-version %q: a version is 1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit (it names files and the image tag), e.g. v0.3.0", v)
	}
	return nil
}

// Build compiles the binary for p into out: static (no cgo: the SQLite
// driver is pure Go), stripped, without local paths, with the version
// set.
func Build(version string, p Platform, out string) error {
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+VersionVar+"="+version,
		"-o", out, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w", p.OS, p.Arch, err)
	}
	return nil
}

// prepareDist creates dist and removes the files of an earlier release
// from it (everything named cortexbuild_* and SHA256SUMS), leaving the
// rest.
func prepareDist(dist string) error {
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cortexbuild_") || e.Name() == SumsFile {
			if err := os.RemoveAll(filepath.Join(dist, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// archiveDocs lists the repository files every archive carries:
// README.md, and LICENSE when there is one.
func archiveDocs(root string) ([]string, error) {
	docs := []string{filepath.Join(root, "README.md")}
	if _, err := os.Stat(docs[0]); err != nil {
		return nil, fmt.Errorf("the archives carry README.md: %w", err)
	}
	lic := filepath.Join(root, "LICENSE")
	if _, err := os.Stat(lic); err == nil {
		docs = append(docs, lic)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return docs, nil
}

// File is one regular file, directory or symbolic link of an archive or
// image layer.
type File struct {
	Name     string // slash-separated, relative; a directory ends in "/"
	Mode     int64
	UID, GID int
	Data     []byte
	Link     string // a symbolic link's target; Data is then empty
}

// WriteTar writes files as a tar stream sorted by name, every entry dated
// mtime, with numeric owners only: the same files give the same bytes
// whatever the file system they came from said.
func WriteTar(w io.Writer, files []File, mtime time.Time) error {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	tw := tar.NewWriter(w)
	for i, f := range files {
		if i > 0 && files[i-1].Name == f.Name {
			return fmt.Errorf("%s is in the archive twice", f.Name)
		}
		h := &tar.Header{Name: f.Name, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case strings.HasSuffix(f.Name, "/"):
			h.Typeflag = tar.TypeDir
		case f.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteTarGz is WriteTar through gzip, with no name or time in the gzip
// header.
func WriteTarGz(w io.Writer, files []File, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := WriteTar(zw, files, mtime); err != nil {
		return err
	}
	return zw.Close()
}

// WriteArchive packs the binary bin of p and the docs (at the archive's
// top level, executable and read-only files) into dist and returns the
// archive's name.
func WriteArchive(r Release, p Platform, bin string, docs []string) (string, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	files := []File{{Name: Binary, Mode: 0o755, Data: data}}
	for _, d := range docs {
		data, err := os.ReadFile(d)
		if err != nil {
			return "", err
		}
		files = append(files, File{Name: filepath.Base(d), Mode: 0o644, Data: data})
	}
	var buf bytes.Buffer
	if err := WriteTarGz(&buf, files, r.Time); err != nil {
		return "", err
	}
	name := ArchiveName(r.Version, p)
	return name, os.WriteFile(filepath.Join(r.Dist, name), buf.Bytes(), 0o644)
}

// WriteSums writes dist/SHA256SUMS over every release file in dist (the
// regular files named cortexbuild_*), sorted, in the format 'sha256sum -c'
// reads.
func WriteSums(dist string) error {
	entries, err := os.ReadDir(dist)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "cortexbuild_") {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dist, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dist, SumsFile), []byte(b.String()), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
