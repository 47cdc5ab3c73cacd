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
// With -hostclis DIR and -hostclis-base FILE it also builds the host-CLI
// image, cortexbuild_<version>_hostclis_image_linux_<arch>.tar: the base
// image, the linux binary, and the native binaries of the host CLIs pinned
// in tools/hostversions as scripts/install-host-clis.sh installed them into
// DIR from npm (docs/operations.md, "The host-CLI image"); the nightly
// workflow .github/workflows/hostclis-image.yml builds it and runs the host
// suite against it.
//
// It lives in the main module but only tools/release imports
// go-containerregistry: the cortexbuild binary does not link it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	version, dist, revision, epoch, source, caFile string
	images                                         bool
	hostCLIs, hostBase                             string
}

// parseFlags reads the command line and refuses combinations that cannot
// work before anything is built.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.StringVar(&o.version, "version", "", "release version, e.g. v0.3.0 (make release passes 'git describe --tags --always --dirty')")
	fs.StringVar(&o.dist, "dist", "dist", "output directory; its previous release files are replaced")
	fs.StringVar(&o.revision, "revision", "", "commit the release is built from (default: git rev-parse HEAD)")
	fs.StringVar(&o.epoch, "epoch", "", "date of every archive and image entry, in Unix seconds (default: $SOURCE_DATE_EPOCH, else the commit's time)")
	fs.StringVar(&o.source, "source", DefaultSource, "the image's org.opencontainers.image.source label")
	fs.StringVar(&o.caFile, "ca-bundle", DefaultCABundle, "CA certificates copied into the image")
	fs.BoolVar(&o.images, "images", true, "build the OCI images too")
	fs.StringVar(&o.hostCLIs, "hostclis", "", "also build the host-CLI image (cortexbuild-hostclis:<version>) with the pinned Claude Code, Codex CLI and Copilot CLI that scripts/install-host-clis.sh installed into this directory; needs -hostclis-base")
	fs.StringVar(&o.hostBase, "hostclis-base", "", "the host-CLI image's base, as 'docker save' writes it (a linux image of the CLIs' architecture with a C library and a shell, e.g. debian:12-slim)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: every input is a flag (-version, -dist, ...)", fs.Arg(0))
	}
	if err := CheckVersion(o.version); err != nil {
		return o, err
	}
	switch {
	case o.hostCLIs != "" && o.hostBase == "":
		return o, errors.New("-hostclis needs -hostclis-base: the host CLIs need a C library and a shell, which the release image does not have (docker save debian:12-slim -o base.tar)")
	case o.hostCLIs == "" && o.hostBase != "":
		return o, errors.New("-hostclis-base is given without -hostclis: name the directory scripts/install-host-clis.sh installed the host CLIs into")
	case o.hostCLIs != "" && !o.images:
		return o, errors.New("-hostclis builds an image, but -images=false turns images off")
	}
	return o, nil
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	// The host CLIs are checked before anything is built.
	var host *hostBuild
	if o.hostCLIs != "" {
		if host, err = prepareHost(o.hostCLIs, o.hostBase); err != nil {
			return err
		}
	}
	if o.revision == "" {
		out, err := git("rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("-revision not given and %w", err)
		}
		o.revision = out
	}
	when, err := sourceDate(o.epoch)
	if err != nil {
		return err
	}
	r := Release{Version: o.version, Revision: o.revision, Source: o.source, Time: when, Dist: o.dist}
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
	if o.images {
		ca, err := os.ReadFile(o.caFile)
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
	if host != nil {
		fmt.Printf("== host-CLI image linux/%s\n", host.platform.Arch)
		img, err := BuildHostImage(r, host.platform, binaries[host.platform], host.base, o.hostCLIs, host.clis)
		if err != nil {
			return err
		}
		name, err := WriteHostImageTarball(r, img)
		if err != nil {
			return err
		}
		fmt.Printf("   %s\n", name)
	}
	if err := WriteSums(r.Dist); err != nil {
		return err
	}
	fmt.Printf("== %s\n", filepath.Join(r.Dist, SumsFile))
	return nil
}

// hostBuild is what the host-CLI image is built from.
type hostBuild struct {
	platform Platform
	clis     []Installed
	base     v1.Image
}

// prepareHost finds and verifies the pinned host CLIs in dir and reads the
// base image.
func prepareHost(dir, basePath string) (*hostBuild, error) {
	pins, err := hostversions.Default()
	if err != nil {
		return nil, err
	}
	p, clis, err := hostCLIsPlatform(pins, dir)
	if err != nil {
		return nil, err
	}
	installed, err := VerifyHostCLIs(dir, clis)
	if err != nil {
		return nil, err
	}
	base, err := tarball.ImageFromPath(basePath, nil)
	if err != nil {
		return nil, fmt.Errorf("-hostclis-base %s: %w (write it with docker save IMAGE -o FILE)", basePath, err)
	}
	return &hostBuild{platform: p, clis: installed, base: base}, nil
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
