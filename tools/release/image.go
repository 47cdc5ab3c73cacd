package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// What the image is made of; docs/operations.md, "The container image",
// describes each.
const (
	DefaultSource   = "https://github.com/cortexbuild/cortexbuild"
	DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

	ImageRepo  = "cortexbuild"
	BinaryPath = "/usr/local/bin/cortexbuild"
	CABundle   = "/etc/ssl/certs/ca-certificates.crt"
	StateDir   = "/data"
	UID, GID   = 65532, 65532
	Port       = 8787
)

// ImageUser is the user the image runs as: numeric, so that a runtime
// checking "not root" needs no passwd lookup.
var ImageUser = strconv.Itoa(UID) + ":" + strconv.Itoa(GID)

// ImageCmd is the image's default command after its entrypoint: the
// gateway on every interface of the container, with virtual keys (the
// gateway refuses --no-auth off loopback), answering requests whose Host
// is a loopback name, which is what a client of a published port sends
// (docker run -p 8787:8787, then http://localhost:8787).
var ImageCmd = []string{"serve", "--listen", "0.0.0.0:" + strconv.Itoa(Port),
	"--allow-host", "localhost", "--allow-host", "127.0.0.1", "--allow-host", "::1"}

// ImageEnv is the image's environment: orchestration mode on (serve
// needs it and there is no configuration file by default), HOME in the
// state directory.
var ImageEnv = []string{"PATH=/usr/local/bin", "HOME=" + StateDir, "CORTEXBUILD_LLM=1"}

// Image is one built image and its platform.
type Image struct {
	Platform Platform
	Image    v1.Image
}

// ImageTarballName is the file name of a platform's image tarball.
func ImageTarballName(version string, p Platform) string {
	return fmt.Sprintf("cortexbuild_%s_image_%s_%s.tar", version, p.OS, p.Arch)
}

// ImageLayoutName is the directory of the OCI image layout holding every
// architecture.
func ImageLayoutName(version string) string {
	return fmt.Sprintf("cortexbuild_%s_image_oci", version)
}

// ImageTag is the tag the image tarballs load as.
func ImageTag(version string) (name.Tag, error) {
	return name.NewTag(ImageRepo + ":" + version)
}

// imageFiles are the image's one layer: the binary, the CA bundle, a
// nonroot user and group, the state directory it owns and a /tmp.
func imageFiles(bin, ca []byte) []File {
	dir := func(n string) File { return File{Name: n, Mode: 0o755} }
	return []File{
		dir("etc/"),
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:" + StateDir + ":/sbin/nologin\n")},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		dir("etc/ssl/"),
		dir("etc/ssl/certs/"),
		{Name: CABundle[1:], Mode: 0o644, Data: ca},
		{Name: StateDir[1:] + "/", Mode: 0o755, UID: UID, GID: GID},
		{Name: "tmp/", Mode: 0o1777},
		dir("usr/"),
		dir("usr/local/"),
		dir("usr/local/bin/"),
		{Name: BinaryPath[1:], Mode: 0o755, Data: bin},
	}
}

// BuildImage builds p's image from scratch (no base image): one layer,
// and a configuration that runs the gateway as the nonroot user.
func BuildImage(r Release, p Platform, binPath string, ca []byte) (Image, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return Image{}, err
	}
	layer, err := layerOf(imageFiles(bin, ca), r)
	if err != nil {
		return Image{}, err
	}
	created := v1.Time{Time: r.Time}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: created, CreatedBy: "go run ./tools/release", Comment: "cortexbuild " + r.Version,
	}})
	if err != nil {
		return Image{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Image{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Arch, variant(p)
	cf.Created = created
	cf.Author = r.Source
	cf.Config = v1.Config{
		Entrypoint:   []string{BinaryPath},
		Cmd:          ImageCmd,
		Env:          ImageEnv,
		User:         ImageUser,
		WorkingDir:   StateDir,
		ExposedPorts: map[string]struct{}{strconv.Itoa(Port) + "/tcp": {}},
		Volumes:      map[string]struct{}{StateDir: {}},
		StopSignal:   "SIGTERM",
		Labels:       Labels(r),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return Image{}, err
	}
	return Image{Platform: p, Image: img}, nil
}

// layerOf is an image layer holding files, dated at the release's time.
func layerOf(files []File, r Release) (v1.Layer, error) {
	var layerTar bytes.Buffer
	if err := WriteTar(&layerTar, files, r.Time); err != nil {
		return nil, err
	}
	data := layerTar.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// Labels are the image's OCI annotations.
func Labels(r Release) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "cortexbuild",
		"org.opencontainers.image.version":  r.Version,
		"org.opencontainers.image.revision": r.Revision,
		"org.opencontainers.image.source":   r.Source,
		"org.opencontainers.image.created":  r.Time.Format(time.RFC3339),
	}
}

// variant is the CPU variant runtimes expect of an arm64 image.
func variant(p Platform) string {
	if p.Arch == "arm64" {
		return "v8"
	}
	return ""
}

// WriteImageTarball writes img as a tarball 'docker load -i' and 'podman
// load -i' read, tagged cortexbuild:<version>, and returns its name.
func WriteImageTarball(r Release, img Image) (string, error) {
	tag, err := ImageTag(r.Version)
	if err != nil {
		return "", err
	}
	n := ImageTarballName(r.Version, img.Platform)
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

// WriteImageLayout writes an OCI image layout whose index holds every
// image with its platform (for 'skopeo copy oci:DIR docker://...' or
// 'podman load' of a multi-architecture image), and returns its path.
func WriteImageLayout(r Release, imgs []Image) (string, error) {
	dir := filepath.Join(r.Dist, ImageLayoutName(r.Version))
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	for _, img := range imgs {
		plat := v1.Platform{OS: img.Platform.OS, Architecture: img.Platform.Arch, Variant: variant(img.Platform)}
		if err := lp.AppendImage(img.Image, layout.WithPlatform(plat),
			layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": r.Version})); err != nil {
			return "", err
		}
	}
	return dir, nil
}
