package cli

// Egress through the whole engine: the orchestrator and the adapters built
// from a project's configuration, with the locality gate's resolver and
// dialer replaced. Nothing here reaches a non-loopback address: remote
// names resolve from a map, and the dialer dials loopback for real, serves
// registered remote addresses in memory (net.Pipe) and refuses the rest.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/redis/go-redis/v9"
)

type splitNet struct {
	t      *testing.T
	mu     sync.Mutex
	hosts  map[string][]string
	memory map[string]http.Handler
	dials  []string
}

func newSplitNet(t *testing.T) *splitNet {
	return &splitNet{t: t, hosts: map[string][]string{}, memory: map[string]http.Handler{}}
}

func (n *splitNet) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	as, ok := n.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range as {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func (n *splitNet) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	n.dials = append(n.dials, address)
	h := n.memory[address]
	n.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		n.t.Errorf("the gate dialed a host name: %q", address)
		return nil, err
	}
	if h != nil {
		client, server := net.Pipe()
		srv := &http.Server{Handler: h}
		l := &oneConnListener{c: server, done: make(chan struct{})}
		n.t.Cleanup(func() { srv.Close() })
		go srv.Serve(l) // one connection served in memory, kept alive
		return client, nil
	}
	if !a.Unmap().IsLoopback() {
		return nil, errors.New("test dialer refuses " + address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (n *splitNet) remoteDials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, d := range n.dials {
		host, _, _ := net.SplitHostPort(d)
		if a, err := netip.ParseAddr(host); err != nil || !a.Unmap().IsLoopback() {
			out = append(out, d)
		}
	}
	return out
}

func (n *splitNet) allDials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.dials)
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConnListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// egressEngine builds the project's orchestrator over n.
func egressEngine(t *testing.T, dir string, n *splitNet) (*orchestrator.Orchestrator, *config.File, *env) {
	t.Helper()
	var out, errb strings.Builder
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, wd: dir, registry: builtin.Registry(),
		getenv:    func(k string) string { return keyEnv[k] },
		lookupEnv: func(k string) (string, bool) { v, ok := keyEnv[k]; return v, ok },
		resolver:  n, dial: n.Dial,
	}
	f, err := e.loadConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	o, err := e.buildEngine(f, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o, f, e
}

func hiCall() orchestrator.Call {
	return orchestrator.Call{Agent: "builder", Request: provider.Request{Prompt: "hi", MaxTokens: 16}}
}

func egressProject(t *testing.T, baseURL string) string {
	return writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
routing:
  preference: [claude]
`, baseURL))
}

// A name that resolves to loopback and to a remote address is remote: it
// needs consent, and without it nothing is dialed, loopback included.
func TestEngineSplitDNSRefusedWithoutDialing(t *testing.T) {
	fake := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(fake.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(fake.URL(), "http://"))
	n := newSplitNet(t)
	n.hosts["split.test"] = []string{"127.0.0.1", "203.0.113.9"}
	o, _, _ := egressEngine(t, egressProject(t, "http://split.test:"+port), n)
	fake.Enqueue(anthropicfake.TextReply("must not be served"))
	_, err := o.Invoke(context.Background(), hiCall())
	if !errors.Is(err, locality.ErrRefused) {
		t.Fatalf("Invoke = %v, want a locality refusal", err)
	}
	if d := n.allDials(); len(d) != 0 {
		t.Errorf("dials %q, want none", d)
	}
	if r := fake.Requests(); len(r) != 0 {
		t.Errorf("the loopback fake served %d requests", len(r))
	}
}

// A loopback endpoint that redirects to a remote host is not followed,
// even with consent for the provider: the remote address is never dialed.
func TestEngineRedirectToRemoteRefused(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var hits atomic.Int32
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				http.Redirect(w, r, "http://api.remote.test"+r.URL.Path, status)
			}))
			t.Cleanup(redirector.Close)
			n := newSplitNet(t)
			n.hosts["api.remote.test"] = []string{"203.0.113.7"}
			dir := egressProject(t, redirector.URL)
			o, f, e := egressEngine(t, dir, n)
			if _, err := e.gate(f).Grant(context.Background(), "claude", "alice", redirector.URL); err != nil {
				t.Fatal(err)
			}
			_, err := o.Invoke(context.Background(), hiCall())
			if err == nil {
				t.Fatal("Invoke followed the redirect and succeeded")
			}
			if !errors.Is(err, locality.ReasonRedirect) {
				t.Errorf("Invoke = %v, want a redirect refusal", err)
			}
			if hits.Load() == 0 {
				t.Error("the loopback endpoint was never asked: the test proves nothing")
			}
			if d := n.remoteDials(); len(d) != 0 {
				t.Errorf("remote dials %q, want none", d)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the error carries the key: %v", err)
			}
		})
	}
}

// Consent revoked while the engine runs: the next call is refused and no
// request reaches the remote, although a kept-alive connection to it is
// pooled.
func TestEngineConsentRevokedMidRun(t *testing.T) {
	remote := anthropicfake.NewUnstarted(anthropicfake.WithAPIKey(testKey))
	n := newSplitNet(t)
	n.hosts["api.remote.test"] = []string{"203.0.113.7"}
	n.memory["203.0.113.7:80"] = remote.Handler()
	dir := egressProject(t, "http://api.remote.test")
	o, f, e := egressEngine(t, dir, n)
	ctx := context.Background()
	if _, err := e.gate(f).Grant(ctx, "claude", "alice", "http://api.remote.test"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		remote.Enqueue(anthropicfake.TextReply(fmt.Sprint("answer ", i)))
		out, err := o.Invoke(ctx, hiCall())
		if err != nil || out.Result.Content != fmt.Sprint("answer ", i) {
			t.Fatalf("call %d with consent: %+v, %v", i, out, err)
		}
	}
	if d := n.allDials(); len(d) != 1 {
		t.Fatalf("dials %q for two calls: the connection was not kept alive, the test proves nothing", d)
	}
	store := locality.NewFileStore(filepath.Join(e.stateDir(f), "consent.json"))
	if ok, err := store.Revoke(ctx, "claude"); !ok || err != nil {
		t.Fatalf("revoke = %v, %v", ok, err)
	}
	remote.Enqueue(anthropicfake.TextReply("must not be served"))
	_, err := o.Invoke(ctx, hiCall())
	if !errors.Is(err, locality.ErrRefused) {
		t.Fatalf("after revocation: %v, want a locality refusal", err)
	}
	if r := remote.Requests(); len(r) != 2 {
		t.Errorf("the remote served %d requests, want 2 (none after the revocation)", len(r))
	}
	if d := n.allDials(); len(d) != 1 {
		t.Errorf("dials after revocation %q, want only the first", d)
	}
}

// The same request in two projects sharing one cache: two entries, and a
// hit in one project is a miss in the other.
func TestEngineCacheNeverCrossesProjects(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		mem := cache.NewMemory(cache.MemoryOptions{})
		testCacheAcrossProjects(t, cache.New(mem, cache.Options{}), func() int { return mem.Len() })
	})
	t.Run("redis", func(t *testing.T) {
		url := testenv.Redis(t)
		b := make([]byte, 8)
		rand.Read(b)
		prefix := cache.DefaultRedisPrefix + "test-" + hex.EncodeToString(b) + ":"
		store, err := cache.OpenRedis(context.Background(), url, cache.RedisOptions{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		inspect := redis.NewClient(opt)
		keys := func() []string {
			ks, err := inspect.Keys(context.Background(), prefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			return ks
		}
		t.Cleanup(func() {
			for _, k := range keys() {
				inspect.Del(context.Background(), k)
			}
			inspect.Close()
			store.Close()
		})
		testCacheAcrossProjects(t, cache.New(store, cache.Options{}), func() int { return len(keys()) })
	})
}

func testCacheAcrossProjects(t *testing.T, c *cache.Cache, entries func() int) {
	fake := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(fake.Close)
	n := newSplitNet(t)
	engine := func() *orchestrator.Orchestrator {
		_, f, e := egressEngine(t, egressProject(t, fake.URL()), n)
		o, err := e.buildEngine(f, nil, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a, b := engine(), engine() // two project directories: two projects
	call := orchestrator.Call{Agent: "explore", Request: provider.Request{Prompt: "the same question", MaxTokens: 16}}
	ctx := context.Background()
	steps := []struct {
		name     string
		o        *orchestrator.Orchestrator
		reply    string // "": expect a hit
		want     string
		requests int
		entries  int
	}{
		{"first project, miss", a, "answer for a", "answer for a", 1, 1},
		{"first project, hit", a, "", "answer for a", 1, 1},
		{"second project, miss", b, "answer for b", "answer for b", 2, 2},
		{"second project, hit", b, "", "answer for b", 2, 2},
		{"first project, still its own", a, "", "answer for a", 2, 2},
	}
	for _, st := range steps {
		if st.reply != "" {
			fake.Enqueue(anthropicfake.TextReply(st.reply))
		}
		out, err := st.o.Invoke(ctx, call)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if out.Result.Content != st.want || out.Result.CacheHit != (st.reply == "") {
			t.Errorf("%s: content %q, hit %v; want %q, hit %v", st.name, out.Result.Content, out.Result.CacheHit, st.want, st.reply == "")
		}
		if got := len(fake.Requests()); got != st.requests {
			t.Errorf("%s: the provider served %d requests, want %d", st.name, got, st.requests)
		}
		if got := entries(); got != st.entries {
			t.Errorf("%s: %d cache entries, want %d", st.name, got, st.entries)
		}
	}
}
