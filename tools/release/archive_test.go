package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two packings of the same files give the same bytes, whatever the files'
// dates, owners and order on disk: entries are sorted, dated at the
// release time and owned by root, and gzip keeps no name or time.
func TestArchivesAreReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "cortexbuild")
	readme := filepath.Join(dir, "README.md")
	lic := filepath.Join(dir, "LICENSE")
	for p, data := range map[string]string{bin: "\x7fELF fake binary", readme: "# read me\n", lic: "license\n"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	when := time.Date(2026, 11, 2, 10, 4, 5, 0, time.UTC)
	pack := func(dist string, docs []string) []byte {
		t.Helper()
		if err := os.MkdirAll(dist, 0o755); err != nil {
			t.Fatal(err)
		}
		r := Release{Version: "v1.2.3", Time: when, Dist: dist}
		name, err := WriteArchive(r, Platform{"linux", "arm64"}, bin, docs)
		if err != nil {
			t.Fatal(err)
		}
		if name != "cortexbuild_v1.2.3_linux_arm64.tar.gz" {
			t.Errorf("archive name %q", name)
		}
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	first := pack(filepath.Join(dir, "one"), []string{readme, lic})
	// Other dates and modes on disk, the docs listed in another order.
	later := time.Now().Add(time.Hour)
	for _, p := range []string{bin, readme, lic} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	second := pack(filepath.Join(dir, "two"), []string{lic, readme})
	if !bytes.Equal(first, second) {
		t.Fatalf("two packings of the same files differ (%d and %d bytes)", len(first), len(second))
	}

	zr, err := gzip.NewReader(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q, time %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(when) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, owner %d:%d (%q:%q); want %v, 0:0", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname, when)
		}
		want := int64(0o644)
		if h.Name == "cortexbuild" {
			want = 0o755
		}
		if h.Mode != want {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, want)
		}
	}
	if got := strings.Join(names, " "); got != "LICENSE README.md cortexbuild" {
		t.Errorf("entries %q, want LICENSE README.md cortexbuild in that order", got)
	}
}

func TestSumsListEveryReleaseFile(t *testing.T) {
	dist := t.TempDir()
	for n, data := range map[string]string{"cortexbuild_v1_linux_amd64.tar.gz": "a", "cortexbuild_v1_image_linux_amd64.tar": "b", "notes.txt": "c"} {
		if err := os.WriteFile(filepath.Join(dist, n), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dist, "cortexbuild_v1_image_oci"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteSums(dist); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dist, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  cortexbuild_v1_image_linux_amd64.tar\n" +
		"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  cortexbuild_v1_linux_amd64.tar.gz\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS =\n%s\nwant\n%s", got, want)
	}
}

func TestBadVersionsAreRefused(t *testing.T) {
	for v, want := range map[string]string{
		"":            "-version is required",
		"v1.0/evil":   `-version "v1.0/evil": a version is`,
		"-v1":         `-version "-v1": a version is`,
		"v1.0.0+meta": `-version "v1.0.0+meta": a version is`,
	} {
		err := CheckVersion(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckVersion(%q) = %v, want an error containing %q", v, err, want)
		}
	}
	for _, v := range []string{"v0.3.0", "v0.3.0-4-g1a2b3c4-dirty", "1a2b3c4"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v", v, err)
		}
	}
}
