package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// These tests keep the deployment recipe in deploy/ honest against the
// release image this tool builds and the configuration the gateway reads,
// offline: they parse the files, they run nothing but 'haproxy -c' (and
// 'kubectl kustomize' when it is installed). docs/operations.md, "Running
// a fleet".

const deployDir = repoRoot + "/deploy"

// The probes' paths. The liveness path is served by the gateway (checked
// against its source below). The readiness path is the one the gateway's
// readiness handler serves: 200 while the configured engines (PostgreSQL,
// Redis) are reachable, 503 with a JSON body naming the cause otherwise.
// Until the gateway registers it, TestProbePathsAreTheGateways only says
// so in its log; once it does, make that check an error like the liveness
// one. Every recipe here must use exactly these strings.
const (
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
)

// bytesPerRequest is the memory docs/operations.md allows each in-flight
// request when it sizes gateway.max_in_flight (256 KiB); the guidance keeps
// max_in_flight of them under a quarter to a half of the memory limit.
const bytesPerRequest = 256 << 10

func readDeploy(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fleetConfig is a replica's llm-config.yaml, read as the gateway reads it.
type fleetConfig struct {
	file *config.File
	refs []string // the ${VAR} references it makes
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// parseFleetConfig parses a replica's configuration with the loader the
// binary uses and checks what a fleet needs of it: a project id, the
// PostgreSQL store and the Redis cache, both from the environment, the
// listen address on every interface at the image's port.
func parseFleetConfig(t *testing.T, name string, data []byte) fleetConfig {
	t.Helper()
	f, err := config.Parse(name, data, builtin.Registry())
	if err != nil {
		t.Fatalf("%s is not a valid configuration: %v", name, err)
	}
	if f.Project == "" {
		t.Errorf("%s: no project: the replicas share the store and cache, and serve refuses them without one", name)
	}
	if f.Store.Backend != config.StorePostgres || f.Store.DSN.EnvVar() == "" {
		t.Errorf("%s: store.backend %q, dsn %v; want postgres with the DSN from the environment", name, f.Store.Backend, f.Store.DSN)
	}
	if f.Cache.Backend != config.CacheRedis || f.Cache.URL.EnvVar() == "" {
		t.Errorf("%s: cache.backend %q, url %v; want redis with the URL from the environment", name, f.Cache.Backend, f.Cache.URL)
	}
	host, port, err := net.SplitHostPort(f.Gateway.Listen)
	if err != nil || host != "0.0.0.0" || port != strconv.Itoa(Port) {
		t.Errorf("%s: gateway.listen %q, want 0.0.0.0:%d (every interface, the image's port)", name, f.Gateway.Listen, Port)
	}
	if f.Gateway.MaxInFlight <= 0 {
		t.Errorf("%s: gateway.max_in_flight is not set: the memory limit is sized from it", name)
	}
	var refs []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range envRef.FindAllStringSubmatch(line, -1) {
			if !slices.Contains(refs, m[1]) {
				refs = append(refs, m[1])
			}
		}
	}
	return fleetConfig{file: f, refs: refs}
}

// The gateway serves the liveness path, and the readiness path once it
// registers one (see readinessPath).
func TestProbePathsAreTheGateways(t *testing.T) {
	served := gatewayRoutes(t)
	if !served[livenessPath] {
		t.Errorf("the gateway registers no handler for %s (routes: %v): the liveness probes point at nothing", livenessPath, served)
	}
	if !served[readinessPath] {
		t.Errorf("the gateway registers no handler for %s (routes: %v): the readiness probes point at nothing", readinessPath, served)
	}
}

// gatewayRoutes lists the paths the gateway's mux registers, read from
// its source: every g.mux.HandleFunc("<path>", ...).
func gatewayRoutes(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "gateway", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("gateway sources: %v (%d files)", err, len(files))
	}
	re := regexp.MustCompile(`mux\.Handle(?:Func)?\("((?:[A-Z]+ )?/[^"]*)"`)
	routes := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			_, p, ok := strings.Cut(m[1], " ")
			if !ok {
				p = m[1]
			}
			routes[p] = true
		}
	}
	return routes
}

// composeFile is the part of a Compose file these tests read.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	User        string            `yaml:"user"`
	ReadOnly    bool              `yaml:"read_only"`
	Environment map[string]string `yaml:"environment"`
	Expose      []string          `yaml:"expose"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Tmpfs       []string          `yaml:"tmpfs"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	MemLimit        string   `yaml:"mem_limit"`
	Restart         string   `yaml:"restart"`
	CapDrop         []string `yaml:"cap_drop"`
}

// composeVar is a Compose interpolation: ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?message}, ${VAR?message}.
var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate renders s as Compose would with env; it fails the test on a
// required variable env lacks.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return composeVar.ReplaceAllStringFunc(s, func(ref string) string {
		m := composeVar.FindStringSubmatch(ref)
		v, set := env[m[1]]
		switch {
		case set && (v != "" || !strings.HasPrefix(m[2], ":")):
			return v
		case strings.HasSuffix(m[2], "?"):
			t.Fatalf("%s is required: %s", m[1], m[3])
		}
		return m[3]
	})
}

// secretName says whether an environment variable holds a secret.
var secretName = regexp.MustCompile(`(?i)(KEY|PASSWORD|SECRET|TOKEN|DSN|DATABASE_URL|REDIS_URL)`)

// checkNoInlineSecret fails when an environment variable's value written
// in a Compose file carries a secret itself: a secret variable takes its
// whole value from the environment, with no default, and a URL's password
// is a reference.
func checkNoInlineSecret(t *testing.T, where, name, value string) {
	t.Helper()
	for _, m := range composeVar.FindAllStringSubmatch(value, -1) {
		if strings.HasSuffix(m[2], "-") && m[3] != "" && secretName.MatchString(m[1]) {
			t.Errorf("%s: %s has the default %q for %s: a secret is never written here", where, name, m[3], m[1])
		}
	}
	if scheme, rest, ok := strings.Cut(value, "://"); ok && scheme != "" {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok && !regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*(:?\?[^}]*)?\}$`).MatchString(pw) {
				t.Errorf("%s: %s carries a password in its URL: take it from the environment (${VAR})", where, name)
			}
		}
		return
	}
	if secretName.MatchString(name) && composeVar.ReplaceAllString(value, "") != "" {
		t.Errorf("%s: %s = %q is written here; take it from the environment (${%s})", where, name, value, name)
	}
}

// The Compose fleet: three replicas of the release image, each with its
// own volume at the image's state directory, the configuration mounted
// read-only beside it, the shared store and cache from the environment,
// no secret written in the file, PostgreSQL and Redis healthy before the
// replicas start, and HAProxy in front, its probes on the readiness path.
func TestComposeFleet(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(readDeploy(t, "compose.yaml"), &c); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	const version = "v0.3.0"
	env := map[string]string{"CORTEXBUILD_VERSION": version, "POSTGRES_PASSWORD": "p"}
	wantTag, err := ImageTag(version)
	if err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for name, s := range c.Services {
		for k, v := range s.Environment {
			checkNoInlineSecret(t, "deploy/compose.yaml: service "+name, k, v)
		}
		if strings.HasPrefix(s.Image, ImageRepo+":") {
			replicas = append(replicas, name)
		}
	}
	slices.Sort(replicas)
	if len(replicas) != 3 {
		t.Fatalf("deploy/compose.yaml runs %d replicas of %s (%v), want 3", len(replicas), ImageRepo, replicas)
	}
	cfg := parseFleetConfig(t, "deploy/llm-config.yaml", readDeploy(t, "llm-config.yaml"))
	stateVolumes := map[string]string{}
	for _, name := range replicas {
		s := c.Services[name]
		where := "deploy/compose.yaml: " + name
		if img := interpolate(t, s.Image, env); img != wantTag.String() {
			t.Errorf("%s: image %q renders as %q, want the release's %s", where, s.Image, img, wantTag)
		}
		if s.User != ImageUser || !s.ReadOnly {
			t.Errorf("%s: user %q, read_only %v; want the image's user %s on a read-only root", where, s.User, s.ReadOnly, ImageUser)
		}
		if s.Restart != "unless-stopped" && s.Restart != "always" {
			t.Errorf("%s: restart %q: a replica whose process exits is not restarted", where, s.Restart)
		}
		if !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: cap_drop %v, want ALL", where, s.CapDrop)
		}
		if !slices.Contains(s.Tmpfs, "/tmp") {
			t.Errorf("%s: tmpfs %v, want /tmp (the root file system is read-only)", where, s.Tmpfs)
		}
		if !slices.Contains(s.Expose, strconv.Itoa(Port)) {
			t.Errorf("%s: exposes %v, want the listen port %d", where, s.Expose, Port)
		}
		// The command runs serve with the configuration mounted read-only
		// at a path in the state directory but outside .cortexbuild/, so
		// that the project's state is written beside it, in the replica's
		// own volume.
		i := slices.Index(s.Command, "--config")
		if len(s.Command) == 0 || s.Command[0] != "serve" || i < 0 || i+1 >= len(s.Command) {
			t.Fatalf("%s: command %q, want serve --config <file>", where, s.Command)
		}
		cfgPath := s.Command[i+1]
		if path.Dir(cfgPath) != StateDir {
			t.Errorf("%s: --config %s, want a file directly in %s (its .cortexbuild/ is then the replica's state)", where, cfgPath, StateDir)
		}
		mounted := false
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("%s: volume %q is not source:target", where, v)
				continue
			}
			src, target, ro := parts[0], parts[1], len(parts) > 2 && parts[2] == "ro"
			switch {
			case target == StateDir:
				if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
					t.Errorf("%s: %s is the host directory %s, want a named volume of its own", where, StateDir, src)
				}
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s: volume %s is not declared under volumes:", where, src)
				}
				if other, ok := stateVolumes[src]; ok {
					t.Errorf("%s and %s share the volume %s: each replica has its own", other, name, src)
				}
				stateVolumes[src] = name
			case target == cfgPath:
				mounted = src == "./llm-config.yaml" && ro
			case !ro:
				t.Errorf("%s: %s is mounted writable at %s: the only writable volume is the replica's own %s", where, src, target, StateDir)
			}
		}
		if !mounted {
			t.Errorf("%s: ./llm-config.yaml is not mounted read-only at %s", where, cfgPath)
		}
		if !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+StateDir) }) {
			t.Errorf("%s: no volume at %s", where, StateDir)
		}
		for _, v := range cfg.refs {
			if _, ok := s.Environment[v]; !ok {
				t.Errorf("%s: the configuration reads ${%s}, which the replica's environment does not set", where, v)
			}
		}
		dsn := interpolate(t, s.Environment[cfg.file.Store.DSN.EnvVar()], env)
		if u, err := url.Parse(dsn); err != nil || u.Scheme != "postgres" || c.Services[u.Hostname()].Image == "" || !strings.HasPrefix(c.Services[u.Hostname()].Image, "postgres:") {
			t.Errorf("%s: %s = %q, want a postgres:// URL of the Compose PostgreSQL", where, cfg.file.Store.DSN.EnvVar(), dsn)
		}
		if u, err := url.Parse(interpolate(t, s.Environment[cfg.file.Cache.URL.EnvVar()], env)); err != nil || u.Scheme != "redis" || !strings.HasPrefix(c.Services[u.Hostname()].Image, "redis:") {
			t.Errorf("%s: %s, want a redis:// URL of the Compose Redis", where, cfg.file.Cache.URL.EnvVar())
		}
		for _, dep := range []string{"postgres", "redis"} {
			if s.DependsOn[dep].Condition != "service_healthy" || c.Services[dep].Healthcheck == nil || len(c.Services[dep].Healthcheck.Test) == 0 {
				t.Errorf("%s: does not wait for a healthy %s (depends_on %v)", where, dep, s.DependsOn)
			}
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || grace <= cfg.file.Gateway.ShutdownTimeout {
			t.Errorf("%s: stop_grace_period %q, want longer than gateway.shutdown_timeout %v", where, s.StopGracePeriod, cfg.file.Gateway.ShutdownTimeout)
		}
		checkMemory(t, where, s.MemLimit, cfg.file.Gateway.MaxInFlight)
	}

	// HAProxy: published on the port it binds, its servers the replicas
	// on the listen port, its probe the readiness path.
	lb, ok := c.Services["haproxy"]
	if !ok || !strings.HasPrefix(lb.Image, "haproxy:") {
		t.Fatalf("deploy/compose.yaml has no haproxy service (%+v)", lb)
	}
	if !slices.Contains(lb.Volumes, "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro") {
		t.Errorf("haproxy: volumes %v do not mount ./haproxy.cfg where the image reads it", lb.Volumes)
	}
	h := parseHAProxy(t, string(readDeploy(t, "haproxy.cfg")))
	var servers []string
	for _, s := range h.servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil || port != strconv.Itoa(Port) {
			t.Errorf("haproxy.cfg: server %s, want <replica>:%d", s, Port)
		}
		servers = append(servers, host)
	}
	slices.Sort(servers)
	if !slices.Equal(servers, replicas) {
		t.Errorf("haproxy.cfg balances %v, want the replicas %v", servers, replicas)
	}
	if !h.resolvers {
		t.Error("haproxy.cfg: default-server has no resolvers: a replica recreated with another address is not found again")
	}
	if h.checkPath != readinessPath {
		t.Errorf("haproxy.cfg probes %q, want the readiness path %s", h.checkPath, readinessPath)
	}
	if !slices.ContainsFunc(cfg.file.Gateway.AllowedHosts, func(a string) bool { return strings.EqualFold(a, h.checkHost) }) {
		t.Errorf("haproxy.cfg probes with Host %q, which is not in gateway.allowed_hosts %v: every probe would get a 421", h.checkHost, cfg.file.Gateway.AllowedHosts)
	}
	published := false
	for _, p := range lb.Ports {
		published = published || strings.HasSuffix(p, ":"+h.bindPort)
	}
	if !published {
		t.Errorf("haproxy: ports %v do not publish the port it binds, %s", lb.Ports, h.bindPort)
	}
	for _, p := range lb.Ports {
		if host, _, _ := strings.Cut(p, ":"); host == "" || host == "0.0.0.0" {
			t.Logf("haproxy publishes %s on every interface of the host", p)
		}
	}
}

// checkMemory checks a memory limit against docs/operations.md's guidance
// for max_in_flight: at 256 KiB a request, at most half of the limit.
func checkMemory(t *testing.T, where, limit string, maxInFlight int) {
	t.Helper()
	n, err := parseBytes(limit)
	if err != nil {
		t.Errorf("%s: memory limit %q: %v", where, limit, err)
		return
	}
	if need := int64(maxInFlight) * bytesPerRequest; need*2 > n {
		t.Errorf("%s: memory limit %s, but gateway.max_in_flight %d at 256 KiB needs %d MiB, more than half of it", where, limit, maxInFlight, need>>20)
	}
}

// parseBytes reads a memory size as Compose (1g, 512m) or Kubernetes
// (1Gi, 512Mi, 1G) write it.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"K", 1000}, {"M", 1000 * 1000}, {"G", 1000 * 1000 * 1000}, {"b", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("not a size")
			}
			return n * u.mult, nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("not a size")
	}
	return n, nil
}

// haproxyConfig is what the tests read of haproxy.cfg.
type haproxyConfig struct {
	checked              bool // every server is probed (check on default-server or each server)
	resolvers            bool // servers are resolved again at run time
	bindPort             string
	servers              []string // address:port
	checkPath, checkHost string
}

// parseHAProxy reads the frontend's bind port, the servers and the HTTP
// check of haproxy.cfg (haproxy -c checks the rest).
func parseHAProxy(t *testing.T, text string) haproxyConfig {
	t.Helper()
	var h haproxyConfig
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch {
		case f[0] == "bind" && len(f) > 1:
			_, h.bindPort, _ = net.SplitHostPort(f[1])
		case f[0] == "default-server":
			h.checked = slices.Contains(f, "check")
			h.resolvers = slices.Contains(f, "resolvers")
		case f[0] == "server" && len(f) > 2:
			h.servers = append(h.servers, f[2])
			if !slices.Contains(f, "check") && !h.checked {
				defer func() {
					t.Errorf("haproxy.cfg: server %s is not probed (no check): it would get requests while not ready", f[1])
				}()
			}
		case f[0] == "http-check" && len(f) > 1 && f[1] == "send":
			for i := 2; i+1 < len(f); i++ {
				switch f[i] {
				case "uri":
					h.checkPath = f[i+1]
				case "hdr":
					if i+2 < len(f) && strings.EqualFold(f[i+1], "Host") {
						h.checkHost = f[i+2]
					}
				}
			}
		}
	}
	if h.bindPort == "" || len(h.servers) == 0 || h.checkPath == "" {
		t.Fatalf("haproxy.cfg: bind port %q, servers %v, check %q: want all three", h.bindPort, h.servers, h.checkPath)
	}
	return h
}

// HAProxy itself accepts the configuration (haproxy -c). Without haproxy
// the test is skipped, saying so, except in CI, which installs it.
func TestHAProxyConfigParses(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		msg := "haproxy is not installed (apt-get install haproxy): deploy/haproxy.cfg is not checked by HAProxy"
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip("skipped: " + msg)
	}
	out, err := exec.Command(bin, "-c", "-f", filepath.Join(deployDir, "haproxy.cfg")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Configuration file is valid") {
		t.Fatalf("haproxy -c -f deploy/haproxy.cfg: %v\n%s", err, out)
	}
}

// k8sObject is the part of a Kubernetes manifest these tests read.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		// Deployment
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service
		Ports []struct {
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
	// Service selector (spec.selector is a plain map there)
	raw map[string]any
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
		RunAsGroup   *int  `yaml:"runAsGroup"`
		FSGroup      *int  `yaml:"fsGroup"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name      string         `yaml:"name"`
		EmptyDir  map[string]any `yaml:"emptyDir"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name     string `yaml:"name"`
				Key      string `yaml:"key"`
				Optional bool   `yaml:"optional"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

// k8sManifests reads every document of deploy/k8s/*.yaml but the
// kustomization, by file.
func k8sManifests(t *testing.T) map[string][]k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/k8s: %v (%d files)", err, len(files))
	}
	out := map[string][]k8sObject{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if err := n.Decode(&o.raw); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind and metadata.name", f)
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], o)
		}
	}
	return out
}

// portOf resolves a probe's or a Service's port (a number or a container
// port's name) to the container's port number.
func portOf(n yaml.Node, c container) int {
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	return 0
}

// The Kubernetes manifests: a Deployment of three replicas of the release
// image as its user on a read-only root, each with its own /data, the
// configuration from the ConfigMap, the store's DSN and the provider keys
// from the Secret (none written in the manifests), readiness on the
// readiness path and liveness on the liveness path at the listen port,
// memory sized from max_in_flight, and a Service in front.
func TestKubernetesManifests(t *testing.T) {
	byFile := k8sManifests(t)
	var deploys, services, configMaps []k8sObject
	for file, objs := range byFile {
		for _, o := range objs {
			switch o.Kind {
			case "Deployment":
				deploys = append(deploys, o)
			case "Service":
				services = append(services, o)
			case "ConfigMap":
				configMaps = append(configMaps, o)
			case "Secret":
				t.Errorf("deploy/k8s/%s holds a Secret: secret values are never committed; the Deployment references cortexbuild-secrets", file)
			}
		}
	}
	for _, o := range byFile["pdb.yaml"] {
		if o.Kind != "PodDisruptionBudget" {
			continue
		}
		min, _ := dig(o.raw, "spec")["minAvailable"].(int)
		if min < 1 || len(deploys) == 1 && deploys[0].Spec.Replicas != nil && min >= *deploys[0].Spec.Replicas {
			t.Errorf("the PodDisruptionBudget's minAvailable %v, want at least 1 and below the replicas", dig(o.raw, "spec")["minAvailable"])
		}
		for k, v := range dig(o.raw, "spec", "selector", "matchLabels") {
			if len(deploys) == 1 && deploys[0].Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("the PodDisruptionBudget's selector %s=%v does not match the pods", k, v)
			}
		}
	}
	if len(deploys) != 1 || len(services) != 1 || len(configMaps) != 1 {
		t.Fatalf("deploy/k8s has %d Deployments, %d Services, %d ConfigMaps; want one each", len(deploys), len(services), len(configMaps))
	}
	d, svc, cm := deploys[0], services[0], configMaps[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("the Deployment runs %s replicas, want 3", show(d.Spec.Replicas))
	}
	pod := d.Spec.Template.Spec
	labels := d.Spec.Template.Metadata.Labels
	for k, v := range d.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the Deployment's selector %s=%s does not match its pods' labels %v", k, v, labels)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("the pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The image is the release's repository; kustomization.yaml sets the
	// registry and the version.
	if c.Image != ImageRepo {
		t.Errorf("the container's image is %q, want %q (kustomization.yaml sets the registry and the version)", c.Image, ImageRepo)
	}
	if len(c.Command) != 0 {
		t.Errorf("the container overrides the image's entrypoint with %q", c.Command)
	}

	// The configuration: the ConfigMap's llm-config.yaml, mounted as a
	// file directly in /data.
	text, ok := cm.Data["llm-config.yaml"]
	if !ok {
		t.Fatalf("the ConfigMap %s has no llm-config.yaml", cm.Metadata.Name)
	}
	cfg := parseFleetConfig(t, "deploy/k8s/configmap.yaml: llm-config.yaml", []byte(text))
	i := slices.Index(c.Args, "--config")
	if len(c.Args) == 0 || c.Args[0] != "serve" || i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("the container's args %q, want serve --config <file>", c.Args)
	}
	cfgPath := c.Args[i+1]
	if path.Dir(cfgPath) != StateDir {
		t.Errorf("--config %s, want a file directly in %s", cfgPath, StateDir)
	}
	volumes := map[string]int{}
	for j, v := range pod.Volumes {
		volumes[v.Name] = j
	}
	var dataVolume, cfgMounted bool
	for _, m := range c.VolumeMounts {
		j, ok := volumes[m.Name]
		if !ok {
			t.Errorf("volume mount %s names no volume", m.Name)
			continue
		}
		v := pod.Volumes[j]
		switch m.MountPath {
		case StateDir:
			// The replica's own state directory: an emptyDir is the pod's
			// alone (a claim could be shared by every replica).
			dataVolume = v.EmptyDir != nil && !m.ReadOnly
		case cfgPath:
			cfgMounted = v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name && m.SubPath == "llm-config.yaml" && m.ReadOnly
		case "/tmp":
			if v.EmptyDir == nil {
				t.Errorf("/tmp is not an emptyDir")
			}
		default:
			if !m.ReadOnly {
				t.Errorf("volume %s is mounted writable at %s: the writable ones are /data and /tmp", m.Name, m.MountPath)
			}
		}
	}
	if !dataVolume {
		t.Errorf("%s is not an emptyDir of the pod's own, mounted writable", StateDir)
	}
	if !cfgMounted {
		t.Errorf("%s is not the ConfigMap %s's llm-config.yaml, mounted read-only with subPath", cfgPath, cm.Metadata.Name)
	}

	// Secrets only by reference; every variable the configuration reads is
	// set, the store's and the cache's required.
	env := map[string]bool{}
	for _, e := range c.Env {
		if e.Value != nil && secretName.MatchString(e.Name) {
			t.Errorf("env %s has a value written in the manifest: take it from the Secret", e.Name)
		}
		if e.Value == nil && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "") {
			t.Errorf("env %s is neither a value nor a Secret reference", e.Name)
			continue
		}
		env[e.Name] = true
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Optional &&
			(e.Name == cfg.file.Store.DSN.EnvVar() || e.Name == cfg.file.Cache.URL.EnvVar()) {
			t.Errorf("env %s is optional: without it the replica has no shared store or cache", e.Name)
		}
	}
	for _, v := range cfg.refs {
		if !env[v] {
			t.Errorf("the configuration reads ${%s}, which the container's environment does not set", v)
		}
	}

	// Ports and probes.
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != Port {
		t.Errorf("container ports %+v, want %d (gateway.listen, the image's port)", c.Ports, Port)
	}
	for _, p := range []struct {
		what string
		pr   *probe
		path string
	}{{"readinessProbe", c.ReadinessProbe, readinessPath}, {"livenessProbe", c.LivenessProbe, livenessPath}} {
		if p.pr == nil || p.pr.HTTPGet == nil {
			t.Errorf("no %s with httpGet", p.what)
			continue
		}
		if p.pr.HTTPGet.Path != p.path || portOf(p.pr.HTTPGet.Port, c) != Port {
			t.Errorf("%s: GET %s on port %q, want %s on %d", p.what, p.pr.HTTPGet.Path, p.pr.HTTPGet.Port.Value, p.path, Port)
		}
	}
	if c.StartupProbe != nil && (c.StartupProbe.HTTPGet == nil || c.StartupProbe.HTTPGet.Path != livenessPath) {
		t.Errorf("the startupProbe does not probe %s", livenessPath)
	}

	// Resources: memory from max_in_flight, requests within limits.
	checkMemory(t, "the container", c.Resources.Limits["memory"], cfg.file.Gateway.MaxInFlight)
	req, err1 := parseBytes(c.Resources.Requests["memory"])
	lim, err2 := parseBytes(c.Resources.Limits["memory"])
	if err1 != nil || err2 != nil || req > lim {
		t.Errorf("memory request %q and limit %q, want a request at most the limit", c.Resources.Requests["memory"], c.Resources.Limits["memory"])
	}
	if c.Resources.Requests["cpu"] == "" {
		t.Error("no CPU request")
	}
	if l, ok := c.Resources.Limits["cpu"]; ok {
		t.Errorf("a CPU limit (%s): a throttled gateway adds latency to every stream (docs/operations.md)", l)
	}
	if ru := dig(d.raw, "spec", "strategy", "rollingUpdate"); ru == nil || ru["maxUnavailable"] != 0 || ru["maxSurge"] == nil {
		t.Errorf("the Deployment's rollingUpdate %v, want maxUnavailable 0 and a surge: a replica is added before one is taken away", ru)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.file.Gateway.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %s, want longer than gateway.shutdown_timeout %v", show(g), cfg.file.Gateway.ShutdownTimeout)
	}

	// The image's user on a read-only root, nothing more.
	sc, csc := pod.SecurityContext, c.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != UID || sc.RunAsGroup == nil || *sc.RunAsGroup != GID || sc.FSGroup == nil || *sc.FSGroup != GID {
		t.Errorf("pod securityContext runAsNonRoot %s, runAsUser %s, runAsGroup %s, fsGroup %s; want runAsNonRoot as %d:%d with fsGroup %d (the image's user)",
			show(sc.RunAsNonRoot), show(sc.RunAsUser), show(sc.RunAsGroup), show(sc.FSGroup), UID, GID, GID)
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext readOnlyRootFilesystem %s, allowPrivilegeEscalation %s, drop %v; want a read-only root, no privilege escalation, every capability dropped",
			show(csc.ReadOnlyRootFilesystem), show(csc.AllowPrivilegeEscalation), csc.Capabilities.Drop)
	}

	// The Service selects the pods and sends to the listen port.
	sel, _ := svc.raw["spec"].(map[string]any)["selector"].(map[string]any)
	if len(sel) == 0 {
		t.Error("the Service selects nothing")
	}
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("the Service's selector %s=%v does not match the pods' labels %v", k, v, labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || portOf(svc.Spec.Ports[0].TargetPort, c) != Port {
		t.Errorf("the Service has %d ports, its target %q; want one, sending to %d", len(svc.Spec.Ports), targetOf(svc), Port)
	}
	if len(svc.Spec.Ports) == 1 && !slices.ContainsFunc(cfg.file.Gateway.AllowedHosts, func(h string) bool { return h == svc.Metadata.Name }) {
		t.Errorf("gateway.allowed_hosts %v lacks the Service's name %s: its clients would get a 421", cfg.file.Gateway.AllowedHosts, svc.Metadata.Name)
	}
}

// kustomization.yaml lists every manifest and sets the image of the
// release's repository to a registry and a valid version.
func TestKustomization(t *testing.T) {
	var k struct {
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(readDeploy(t, "k8s/kustomization.yaml"), &k); err != nil {
		t.Fatal(err)
	}
	var files []string
	for f := range k8sManifests(t) {
		files = append(files, f)
	}
	slices.Sort(files)
	res := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(res, files) {
		t.Errorf("kustomization.yaml lists %v, want every manifest %v", res, files)
	}
	if len(k.Images) != 1 || k.Images[0].Name != ImageRepo || path.Base(k.Images[0].NewName) != ImageRepo || CheckVersion(k.Images[0].NewTag) != nil {
		t.Fatalf("kustomization.yaml images %+v, want %s set to REGISTRY/%s and a release version", k.Images, ImageRepo, ImageRepo)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("skipped: kubectl is not installed, so 'kubectl kustomize deploy/k8s' is not run (the files were checked above)")
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(deployDir, "k8s")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/k8s: %v\n%s", err, out)
	}
	want := "image: " + k.Images[0].NewName + ":" + k.Images[0].NewTag
	if !strings.Contains(string(out), want) {
		t.Errorf("kubectl kustomize deploy/k8s does not set %q:\n%s", want, out)
	}
}

// show prints an optional manifest field.
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// targetOf is a Service's first target port as written.
func targetOf(o k8sObject) string {
	if len(o.Spec.Ports) == 0 {
		return ""
	}
	return o.Spec.Ports[0].TargetPort.Value
}

// dig walks a manifest's nested maps.
func dig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}
