//go:build linux

// Package fleet_test runs a fleet of 'cortexbuild serve' replicas, each
// in its own network namespace with its own project directory, behind
// HAProxy, sharing one PostgreSQL and one Redis on the host
// (docs/operations.md, "Running a fleet"; docs/reliability.md).
package fleet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
)

const upstreamKey = "ak-fleet-upstream"

// fleet is three replicas, HAProxy in front of them, and the host's
// services they share, each behind a forwarder the test can cut.
type fleet struct {
	t        *testing.T
	bin      string
	net      *fleetNet
	pg       *testenv.Proxy
	redis    *testenv.Proxy
	anth     *anthropicfake.Server
	upstream arrivals           // the requests reaching the Anthropic fake
	gem      *geminifake.Server // nil unless the fleet was made withGemini
	dirs     []string           // each replica's project directory
	procs    []*exec.Cmd
	lb       string // HAProxy's base URL
	replicas []string
	dsn      string // the fleet's database, on loopback, for the test's own reads
}

// fleetOption adds to a fleet before its replicas start.
type fleetOption func(f *fleet, providers *strings.Builder)

// withGemini adds gem, the Gemini fake, as the provider "gem" (its
// consent granted).
func withGemini(gem *geminifake.Server) fleetOption {
	return func(f *fleet, providers *strings.Builder) {
		f.gem = gem
		u, _ := url.Parse(gem.URL())
		fwd := testenv.ListenProxy(f.t, net.JoinHostPort(f.net.host, "0"), u.Host)
		fmt.Fprintf(providers, "  gem:\n    type: gemini\n    base_url: http://%s\n    credentials:\n      api_key: ${FLEET_UPSTREAM_KEY}\n", fwd.Addr)
	}
}

func newFleet(t *testing.T, n int, opts ...fleetOption) *fleet {
	rootAndTools(t)
	pgURL, redisURL := testenv.Postgres(t), testenv.Redis(t)
	f := &fleet{t: t, bin: buildBinary(t)}
	f.net = newFleetNet(t, n)
	db := createDatabase(t, pgURL)
	pu, _ := url.Parse(pgURL)
	du := *pu
	du.Path = "/" + db
	f.dsn = du.String()
	f.pg = testenv.ListenProxy(t, net.JoinHostPort(f.net.host, "0"), hostPort(pu, "5432"))
	ru := fleetRedis(t, redisURL)
	f.redis = testenv.ListenProxy(t, net.JoinHostPort(f.net.host, "0"), hostPort(ru, "6379"))
	f.anth = anthropicfake.NewUnstarted(anthropicfake.WithAPIKey(upstreamKey))
	anthSrv := httptest.NewServer(f.upstream.count(f.anth.Handler()))
	t.Cleanup(anthSrv.Close)
	au, _ := url.Parse(anthSrv.URL)
	anthFwd := testenv.ListenProxy(t, net.JoinHostPort(f.net.host, "0"), au.Host)
	var more strings.Builder
	for _, o := range opts {
		o(f, &more)
	}
	cfg := fmt.Sprintf(`orchestration: true
project: fleet
providers:
  claude:
    type: anthropic
    base_url: http://%s
    credentials:
      api_key: ${FLEET_UPSTREAM_KEY}
%sstore:
  backend: postgres
  dsn: postgres://%s@%s/%s?sslmode=disable
cache:
  backend: redis
  url: redis://%s%s
gateway:
  allowed_hosts: [127.0.0.1]
`, anthFwd.Addr, more.String(), pu.User.Username(), f.pg.Addr, db, f.redis.Addr, ru.Path)
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("replica%d", i))
		if err := os.MkdirAll(filepath.Join(dir, ".cortexbuild"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".cortexbuild", "llm-config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		f.dirs = append(f.dirs, dir)
	}
	// Consent once, from replica 0's directory: the others have no file.
	f.cli(0, "consent", "grant", "claude")
	if f.gem != nil {
		f.cli(0, "consent", "grant", "gem")
	}
	f.procs = make([]*exec.Cmd, n)
	for i := range n {
		f.start(i)
	}
	f.lb = startHAProxy(t, f.replicas)
	return f
}

// arrivals records when each request reached a server.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// since returns how many requests arrived after t, and when the last did.
func (a *arrivals) since(t time.Time) (n int, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.at {
		if at.After(t) {
			n++
			last = at
		}
	}
	return n, last
}

// cli runs a cortexbuild command in replica i's project directory, on
// the host, and returns its output.
func (f *fleet) cli(i int, args ...string) string {
	f.t.Helper()
	cmd := exec.Command(f.bin, args...)
	cmd.Dir = f.dirs[i]
	cmd.Env = append(os.Environ(), "FLEET_UPSTREAM_KEY="+upstreamKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("cortexbuild %s (replica %d): %v\n%s", strings.Join(args, " "), i, err, out)
	}
	return string(out)
}

// start runs replica i's 'cortexbuild serve' in its namespace and waits
// for its liveness probe.
func (f *fleet) start(i int) {
	f.t.Helper()
	addr := net.JoinHostPort(f.net.addrs[i], "8787")
	cmd := exec.Command("ip", "netns", "exec", f.net.ns[i], f.bin, "serve", "--listen", addr)
	cmd.Dir = f.dirs[i]
	cmd.Env = append(os.Environ(), "FLEET_UPSTREAM_KEY="+upstreamKey)
	logf, err := os.Create(filepath.Join(f.t.TempDir(), fmt.Sprintf("replica%d.log", i)))
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.procs[i] = cmd
	f.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if f.t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			f.t.Logf("replica %d log:\n%s", i, b)
		}
	})
	base := "http://" + addr
	if len(f.replicas) <= i {
		f.replicas = append(f.replicas, base)
	}
	waitFor(f.t, 20*time.Second, "replica "+fmt.Sprint(i)+"'s /healthz", func() error { return get(base + "/healthz") })
}

func get(u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

// waitFor polls check until it succeeds, failing the test after limit:
// for an effect outside the test process (a process starting).
func waitFor(t *testing.T, limit time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hostPort(u *url.URL, port string) string {
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), port)
	}
	return u.Host
}

// createDatabase makes a database of the test's own on the test server,
// dropped at the end.
func createDatabase(t *testing.T, pgURL string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("cb_fleet_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return name
}

// fleetRedis returns the Redis database the fleet uses: the one after the
// configured test database (modulo 16), which it empties first. Other
// packages' tests, running at the same time, share the configured one
// under prefixes of their own; a fleet cannot set the replicas' prefix,
// and its response cache must start empty.
func fleetRedis(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	db, err := strconv.Atoi(strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		db = 0
	}
	u.Path = "/" + strconv.Itoa((db+1)%16)
	flushRedis(t, u)
	return u
}

// flushRedis empties the database of the Redis server at u.
func flushRedis(t *testing.T, u *url.URL) {
	t.Helper()
	c, err := net.Dial("tcp", hostPort(u, "6379"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = "0"
	}
	fmt.Fprintf(c, "*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n*1\r\n$7\r\nFLUSHDB\r\n", len(db), db)
	r := bufio.NewReader(c)
	for range 2 {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "+OK") {
			t.Fatalf("redis: %q, %v", line, err)
		}
	}
}

// headerServer names, in every answer through HAProxy, the replica that
// gave it (r0, r1, …: the index of f.replicas).
const headerServer = "X-Fleet-Server"

// startHAProxy balances round-robin over backends (base URLs) on a
// loopback port and returns its base URL.
func startHAProxy(t *testing.T, backends []string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  maxconn 2000\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n")
	// A replica refusing connections (killed) gets the request's next try
	// on another; every answer names the replica that gave it.
	fmt.Fprintf(&b, "  retries 2\n  option redispatch 1\n")
	fmt.Fprintf(&b, "frontend fe\n  bind %s\n  default_backend replicas\nbackend replicas\n  balance roundrobin\n  http-response set-header %s %%[srv_name]\n", addr, headerServer)
	for i, be := range backends {
		fmt.Fprintf(&b, "  server r%d %s\n", i, strings.TrimPrefix(be, "http://"))
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("haproxy", "-db", "-f", cfg)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 10*time.Second, "HAProxy", func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	return "http://" + addr
}

// buildBinary builds cmd/cortexbuild into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cortexbuild")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "build", "-o", out, "./cmd/cortexbuild")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

var tokenRE = regexp.MustCompile(`cbk_[A-Za-z0-9]+_[A-Za-z0-9_-]+`)

// createKey creates a virtual key on replica i with extra flags and
// returns its token and id.
func (f *fleet) createKey(i int, name string, flags ...string) (token, id string) {
	f.t.Helper()
	out := f.cli(i, append([]string{"serve", "keys", "create", "--name", name}, flags...)...)
	token = tokenRE.FindString(out)
	if token == "" {
		f.t.Fatalf("no key in the output of keys create:\n%s", out)
	}
	id, _, _ = strings.Cut(strings.TrimPrefix(token, "cbk_"), "_")
	return token, id
}

// ask sends one Messages call with the official SDK to base with token.
func ask(ctx context.Context, base, token string) error {
	c := anthropic.NewClient(option.WithBaseURL(base), option.WithAPIKey(token), option.WithMaxRetries(0))
	_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "claude-sonnet-4-6", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello from the fleet"))},
	})
	return err
}

func status(err error) int {
	var e *anthropic.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	if err == nil {
		return 200
	}
	return -1
}

// TestFleetKeys: a key created on one replica is used at once through
// every replica and the load balancer; revoked on another, it is refused
// everywhere within a second; a key's requests per minute hold across
// the fleet.
func TestFleetKeys(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	token, id := f.createKey(0, "fleet")
	for i, base := range f.replicas {
		if err := ask(ctx, base, token); err != nil {
			t.Fatalf("replica %d refused the key created on replica 0: %v", i, err)
		}
	}
	for range 6 {
		if err := ask(ctx, f.lb, token); err != nil {
			t.Fatalf("through HAProxy: %v", err)
		}
	}
	f.cli(1, "serve", "keys", "revoke", id)
	took := f.seenEverywhere(t, "refused the revoked key", func(base string) bool {
		st := status(ask(ctx, base, token))
		return st == 401 || st == 403
	})
	t.Logf("revocation seen by the replicas after %v", took)

	// --rpm 60 across the fleet: 90 calls at once through the balancer.
	limited, _ := f.createKey(2, "limited", "--rpm", "60")
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 90 {
		wg.Go(func() {
			st := status(ask(ctx, f.lb, limited))
			mu.Lock()
			codes[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[200] > 60 || codes[200] < 55 || codes[200]+codes[429] != 90 {
		t.Errorf("a key with --rpm 60 through three replicas: %v; want at most 60 answered, the rest 429", codes)
	}
	t.Logf("rpm 60 across the fleet: %v", codes)
}

// seenEverywhere waits, from now, until done(base) holds on every replica,
// asking each in a loop of its own, and returns how long each took; a
// replica that took more than a second (the fleet's propagation bound)
// fails the test, saying what it was to do.
func (f *fleet) seenEverywhere(t *testing.T, what string, done func(base string) bool) []time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	took := make([]time.Duration, len(f.replicas))
	for i, base := range f.replicas {
		wg.Go(func() {
			for time.Since(start) < 5*time.Second {
				if done(base) {
					took[i] = time.Since(start)
					return
				}
			}
			took[i] = -1
		})
	}
	wg.Wait()
	for i, d := range took {
		if d < 0 || d > time.Second {
			t.Errorf("replica %d %s after %v; want within 1s", i, what, d)
		}
	}
	return took
}
