// Command release builds a CortexBuild release into dist/: static
// binaries for linux and darwin on amd64 and arm64, each packed as
// cortexbuild_<version>_<os>_<arch>.tar.gz with README.md (and LICENSE when
// the repository has one), an OCI image per linux architecture in the
// tarball format 'docker load' and 'podman load' read, an OCI image layout
// holding both, and SHA256SUMS over the archives and image tarballs.
//
// Run it from the repository root, as 'make release' does:
//
//	go run ./tools/release -version v0.3.0
//
// The same commit gives the same bytes: binaries are built with -trimpath,
// archive and image entries are sorted, owned by root (the image's state
// directory by its user) and dated at the commit's time, and gzip headers
// carry no name or time. See docs/operations.md, "Releases".
//
// It lives in the main module but only tools/release imports
// go-containerregistry: the cortexbuild binary does not link it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fs.String("version", "", "release version, e.g. v0.3.0 (make release passes 'git describe --tags --always --dirty')")
	dist := fs.String("dist", "dist", "output directory; its previous release files are replaced")
	revision := fs.String("revision", "", "commit the release is built from (default: git rev-parse HEAD)")
	epoch := fs.String("epoch", "", "date of every archive and image entry, in Unix seconds (default: $SOURCE_DATE_EPOCH, else the commit's time)")
	source := fs.String("source", DefaultSource, "the image's org.opencontainers.image.source label")
	caFile := fs.String("ca-bundle", DefaultCABundle, "CA certificates copied into the image")
	images := fs.Bool("images", true, "build the OCI images too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every input is a flag (-version, -dist, ...)", fs.Arg(0))
	}
	if err := CheckVersion(*version); err != nil {
		return err
	}
	if *revision == "" {
		out, err := git("rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("-revision not given and %w", err)
		}
		*revision = out
	}
	when, err := sourceDate(*epoch)
	if err != nil {
		return err
	}
	r := Release{Version: *version, Revision: *revision, Source: *source, Time: when, Dist: *dist}
	work, err := os.MkdirTemp("", "cortexbuild-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := prepareDist(r.Dist); err != nil {
		return err
	}
	docs, err := archiveDocs(".")
	if err != nil {
		return err
	}
	binaries := map[Platform]string{}
	for _, p := range Platforms {
		bin := filepath.Join(work, p.OS+"_"+p.Arch, "cortexbuild")
		fmt.Printf("== building %s/%s\n", p.OS, p.Arch)
		if err := Build(r.Version, p, bin); err != nil {
			return err
		}
		binaries[p] = bin
		name, err := WriteArchive(r, p, bin, docs)
		if err != nil {
			return err
		}
		fmt.Printf("   %s\n", name)
	}
	if *images {
		ca, err := os.ReadFile(*caFile)
		if err != nil {
			return fmt.Errorf("the image needs a CA bundle: %w (give another with -ca-bundle, or -images=false)", err)
		}
		var built []Image
		for _, p := range Platforms {
			if p.OS != "linux" {
				continue
			}
			fmt.Printf("== image linux/%s\n", p.Arch)
			img, err := BuildImage(r, p, binaries[p], ca)
			if err != nil {
				return err
			}
			name, err := WriteImageTarball(r, img)
			if err != nil {
				return err
			}
			fmt.Printf("   %s\n", name)
			built = append(built, img)
		}
		dir, err := WriteImageLayout(r, built)
		if err != nil {
			return err
		}
		fmt.Printf("   %s/ (OCI image layout, both architectures)\n", filepath.Base(dir))
	}
	if err := WriteSums(r.Dist); err != nil {
		return err
	}
	fmt.Printf("== %s\n", filepath.Join(r.Dist, SumsFile))
	return nil
}

// sourceDate is the time every entry is dated at: the flag, else
// SOURCE_DATE_EPOCH, else the commit's time.
func sourceDate(flagValue string) (time.Time, error) {
	raw, from := flagValue, "-epoch"
	if raw == "" {
		raw, from = os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	if raw == "" {
		out, err := git("log", "-1", "--format=%ct")
		if err != nil {
			return time.Time{}, fmt.Errorf("-epoch not given and %w", err)
		}
		raw, from = out, "the commit time"
	}
	sec, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("%s: %q is not a time in Unix seconds", from, raw)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
