package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// loadImage reads p's image tarball back as 'docker load' would: by the
// tag its manifest names.
func loadImage(t *testing.T, r builtRelease, p Platform) v1.Image {
	t.Helper()
	path := filepath.Join(r.dir, ImageTarballName(r.version, p))
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{"cortexbuild:" + r.version}) {
		t.Fatalf("%s: manifest.json holds %+v, want one image tagged cortexbuild:%s", path, m, r.version)
	}
	tag, err := ImageTag(r.version)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// layerFiles reads the image's one layer.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
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
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		heads[h.Name], data[h.Name] = h, b
	}
}

// Each image tarball loads as cortexbuild:<version> for its platform and
// runs the release's binary as the gateway, as uid 65532 in /data, with
// its labels; the layer holds the binary of the archive, the CA bundle,
// the user and the state directory it owns.
func TestImageTarballs(t *testing.T) {
	r := distRelease(t)
	for _, p := range Platforms {
		if p.OS != "linux" {
			continue
		}
		t.Run(p.Arch, func(t *testing.T) {
			img := loadImage(t, r, p)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != p.Arch {
				t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, p.Arch)
			}
			c := cf.Config
			if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/cortexbuild"}) {
				t.Errorf("entrypoint %q", c.Entrypoint)
			}
			if len(c.Cmd) < 3 || c.Cmd[0] != "serve" || !slices.Contains(c.Cmd, "0.0.0.0:8787") || slices.Contains(c.Cmd, "--no-auth") {
				t.Errorf("cmd %q, want serve on 0.0.0.0:8787 with keys", c.Cmd)
			}
			// Inside a container the address a request arrives on is not
			// loopback: the loopback names a published port's clients send
			// are allowed by name.
			for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
				if i := slices.Index(c.Cmd, h); i < 1 || c.Cmd[i-1] != "--allow-host" {
					t.Errorf("cmd %q lacks --allow-host %s", c.Cmd, h)
				}
			}
			if c.User != "65532:65532" || c.WorkingDir != "/data" {
				t.Errorf("user %q in %q, want 65532:65532 in /data", c.User, c.WorkingDir)
			}
			for _, e := range []string{"HOME=/data", "CORTEXBUILD_LLM=1"} {
				if !slices.Contains(c.Env, e) {
					t.Errorf("env %q lacks %s", c.Env, e)
				}
			}
			if _, ok := c.ExposedPorts["8787/tcp"]; !ok {
				t.Errorf("exposed ports %v, want 8787/tcp", c.ExposedPorts)
			}
			if _, ok := c.Volumes["/data"]; !ok {
				t.Errorf("volumes %v, want /data", c.Volumes)
			}
			l := c.Labels
			if l["org.opencontainers.image.version"] != r.version || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(l["org.opencontainers.image.revision"]) || l["org.opencontainers.image.source"] != DefaultSource {
				t.Errorf("labels %v, want version %s, a commit and the source", l, r.version)
			}

			heads, data := layerFiles(t, img)
			bin := heads["usr/local/bin/cortexbuild"]
			if bin == nil || bin.Mode != 0o755 || bin.Uid != 0 {
				t.Fatalf("usr/local/bin/cortexbuild: %+v, want an executable owned by root", bin)
			}
			if !bytes.Equal(data["usr/local/bin/cortexbuild"], releaseBinary(t, r, p)) {
				t.Errorf("the image's binary is not the one in %s", ArchiveName(r.version, p))
			}
			checkBinary(t, ImageTarballName(r.version, p), p, data["usr/local/bin/cortexbuild"])
			if !bytes.Contains(data["etc/ssl/certs/ca-certificates.crt"], []byte("-----BEGIN CERTIFICATE-----")) {
				t.Error("etc/ssl/certs/ca-certificates.crt holds no certificate")
			}
			if !strings.Contains(string(data["etc/passwd"]), ":x:65532:65532:") || !strings.Contains(string(data["etc/group"]), ":x:65532:") {
				t.Errorf("etc/passwd and etc/group lack the nonroot user:\n%s%s", data["etc/passwd"], data["etc/group"])
			}
			if d := heads["data/"]; d == nil || d.Typeflag != tar.TypeDir || d.Uid != 65532 || d.Gid != 65532 || d.Mode&0o700 != 0o700 {
				t.Errorf("data/: %+v, want a directory owned by 65532", d)
			}
		})
	}
}

// The OCI image layout indexes both architectures' images, each with its
// platform.
func TestImageLayoutIndexesBothArchitectures(t *testing.T) {
	r := distRelease(t)
	idx, err := layout.ImageIndexFromPath(filepath.Join(r.dir, ImageLayoutName(r.version)))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		img := loadImage(t, r, Platform{d.Platform.OS, d.Platform.Architecture})
		if want, err := img.Digest(); err != nil || want != d.Digest {
			t.Errorf("%s in the layout is %s, its tarball's image %s (%v)", got[len(got)-1], d.Digest, want, err)
		}
		if d.Annotations["org.opencontainers.image.ref.name"] != r.version {
			t.Errorf("%s: annotations %v", got[len(got)-1], d.Annotations)
		}
	}
	if !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("layout index holds %v, want linux/amd64 and linux/arm64", got)
	}
}

// inNetns marks the test binary re-run in a network namespace of its own.
const inNetns = "CORTEXBUILD_RELEASE_NETNS"

// The image of this machine's architecture runs: its layer unpacked into
// a root directory, its entrypoint and command run there (chroot) as its
// user, in a network namespace of the test's own with only loopback. A
// virtual key is created in the state directory, the gateway answers
// /healthz, refuses /v1/models without the key and serves it with the
// key, and stops on SIGTERM.
func TestImageServes(t *testing.T) {
	r := distRelease(t)
	if os.Getenv(inNetns) == "" {
		if os.Geteuid() != 0 {
			msg := "needs root: the test runs the image's entrypoint in a chroot as uid 65532, in a network namespace of its own"
			if testenv.InCI() {
				t.Fatal(msg)
			}
			t.Skip("skipped: " + msg)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestImageServes$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), inNetns+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestImageServes") {
			t.Fatalf("in a network namespace: %v\n%s", err, out)
		}
		return
	}
	if err := testenv.LoopbackUp(); err != nil {
		t.Fatal(err)
	}
	img := loadImage(t, r, Platform{"linux", runtime.GOARCH})
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, img, root)
	uid, gid := imageUser(t, cf.Config.User)
	if uid == 0 {
		t.Fatalf("the image runs as root (%q)", cf.Config.User)
	}
	command := func(args ...string) *exec.Cmd { return imageCommand(cf, root, uid, gid, args...) }

	// The README's steps: a starter configuration, consent for its
	// provider, a key; all in the state directory.
	for _, args := range [][]string{{"init"}, {"consent", "grant", "anthropic"}} {
		if out, err := command(args...).CombinedOutput(); err != nil {
			t.Fatalf("%s in the image: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := command("serve", "keys", "create", "--name", "image-test").Output()
	key := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(key, "cbk_") {
		t.Fatalf("serve keys create in the image: %v, %q", err, out)
	}

	srv := command(cf.Config.Cmd...)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testenv.Buffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on http://\S+:(\d+)$`).FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
		exited <- srv.Wait()
	}()
	var port string
	select {
	case port = <-listening:
	case err := <-exited:
		t.Fatalf("the image's command %q exited before listening: %v\n%s", cf.Config.Cmd, err, stderr.String())
	case <-time.After(2 * time.Minute):
		srv.Process.Kill()
		t.Fatalf("the image's command %q did not say it listens within 2 minutes\n%s", cf.Config.Cmd, stderr.String())
	}
	base := "http://127.0.0.1:" + port
	get := func(path, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz", ""); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz = %d %s", code, body)
	}
	if code, _ := get("/v1/models", ""); code != 401 {
		t.Errorf("/v1/models without a key = %d, want 401", code)
	}
	code, body := get("/v1/models", key)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &models) != nil || len(models.Data) == 0 {
		t.Errorf("/v1/models with the key = %d %s", code, body)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil || !strings.Contains(stderr.String(), "gateway stopped") {
		t.Errorf("after SIGTERM: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), key) {
		t.Error("the key is in the gateway's output")
	}
	for _, f := range []string{"data/.cortexbuild/llm-config.yaml", "data/.cortexbuild/state.db", "data/.cortexbuild/gateway-keys.json", "data/.cortexbuild/project-id"} {
		fi, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			t.Errorf("state: %v", err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
			t.Errorf("%s is owned by %d, want the image's user %d", f, st.Uid, uid)
		}
	}
}

// Every deployment of the image is a project of its own: the project root
// is always /data, so the project id is not derived from the path but
// generated on first use and kept in the state volume. Two unpacked
// images, each initialised and used as the README says, have two
// different ids of the form data-<8 hex digits>, each kept in its
// /data/.cortexbuild/project-id, owned by the image's user; using a
// deployment again keeps its id.
func TestImageDeploymentsAreProjectsOfTheirOwn(t *testing.T) {
	r := distRelease(t)
	if os.Geteuid() != 0 {
		msg := "needs root: the test runs the image's entrypoint in a chroot as uid 65532"
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip("skipped: " + msg)
	}
	img := loadImage(t, r, Platform{"linux", runtime.GOARCH})
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := imageUser(t, cf.Config.User)
	deploy := func() (root, id string) {
		t.Helper()
		root = t.TempDir()
		unpack(t, img, root)
		for _, args := range [][]string{{"init"}, {"serve", "keys", "create", "--name", "deployment"}, {"budget", "show"}} {
			if out, err := imageCommand(cf, root, uid, gid, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s in the image: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		return root, keptID(t, root, uid)
	}
	rootA, a := deploy()
	_, b := deploy()
	idForm := regexp.MustCompile(`^data-[0-9a-f]{8}$`)
	if a == b || !idForm.MatchString(a) || !idForm.MatchString(b) {
		t.Fatalf("two deployments of the image have project ids %q and %q; want two different data-<8 hex digits>", a, b)
	}
	if out, err := imageCommand(cf, rootA, uid, gid, "budget", "show").CombinedOutput(); err != nil {
		t.Fatalf("budget show in the first deployment again: %v\n%s", err, out)
	}
	if id := keptID(t, rootA, uid); id != a {
		t.Errorf("the first deployment's id after another command: %q, want its %q kept", id, a)
	}
}

// imageCommand is the image's entrypoint with args, run as a container
// runtime runs it: in root (chroot), as uid:gid, with the image's
// environment and working directory.
func imageCommand(cf *v1.ConfigFile, root string, uid, gid uint32, args ...string) *exec.Cmd {
	argv := append(slices.Clone(cf.Config.Entrypoint), args...)
	return &exec.Cmd{Path: argv[0], Args: argv, Env: cf.Config.Env, Dir: cf.Config.WorkingDir,
		SysProcAttr: &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}}
}

// keptID reads the project id a deployment keeps in its state volume,
// checking that the image's user owns it.
func keptID(t *testing.T, root string, uid uint32) string {
	t.Helper()
	path := filepath.Join(root, "data", ".cortexbuild", "project-id")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the deployment's kept project id: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("%s: %v, not owned by the image's user %d", path, err, uid)
	}
	return strings.TrimSpace(string(b))
}

// imageUser parses the image's "uid:gid".
func imageUser(t *testing.T, user string) (uint32, uint32) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("the image's user %q is not uid:gid", user)
	}
	return uint32(uid), uint32(gid)
}

// unpack writes the image's layer under root with its owners and modes,
// as a container runtime does.
func unpack(t *testing.T, img v1.Image, root string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(root, filepath.FromSlash(h.Name))
			if !strings.HasPrefix(path, root+string(filepath.Separator)) {
				t.Fatalf("layer entry %q is outside the root", h.Name)
			}
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(path, 0o755)
			case tar.TypeReg:
				var f *os.File
				if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
					_, err = io.Copy(f, tr)
					err = errors.Join(err, f.Close())
				}
			default:
				err = fmt.Errorf("layer entry %q has type %c, which this test does not unpack", h.Name, h.Typeflag)
			}
			if err == nil {
				err = os.Lchown(path, h.Uid, h.Gid)
			}
			if err == nil {
				err = os.Chmod(path, h.FileInfo().Mode())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
	}
}
