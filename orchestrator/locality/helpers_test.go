package locality

// Network rules for every test in this package: no code path may open a
// connection to an address that is not loopback. Host names resolve
// through recordingResolver (a map; nothing reaches DNS), and connections
// are opened by recordingDialer, which refuses every non-loopback address
// unless a test registered an in-memory server for it (served over
// net.Pipe: no socket at all).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingResolver resolves from a map and records every lookup.
type recordingResolver struct {
	mu      sync.Mutex
	hosts   map[string][]net.IPAddr
	fail    map[string]error
	lookups []string
}

func newResolver() *recordingResolver {
	return &recordingResolver{hosts: map[string][]net.IPAddr{}, fail: map[string]error{}}
}

// set makes host resolve to addrs (none: an empty answer).
func (r *recordingResolver) set(host string, addrs ...string) *recordingResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	ipas := []net.IPAddr{}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil {
			panic("bad test address " + a)
		}
		ipas = append(ipas, net.IPAddr{IP: ip})
	}
	r.hosts[host] = ipas
	return r
}

func (r *recordingResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	if err := r.fail[host]; err != nil {
		return nil, err
	}
	ipas, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(ipas), nil
}

func (r *recordingResolver) Lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lookups)
}

// errTestRefused is the recording dialer's answer to a non-loopback
// address.
var errTestRefused = errors.New("test dialer: refusing a non-loopback address")

// recordingDialer records every dial. It dials loopback addresses for
// real, serves addresses registered with serve in memory, and refuses
// everything else. Asked for anything but an IP address and port, it
// fails the test.
type recordingDialer struct {
	t      *testing.T
	mu     sync.Mutex
	dials  []string // "network address"
	memory map[string]*memServer
}

func newDialer(t *testing.T) *recordingDialer {
	return &recordingDialer{t: t, memory: map[string]*memServer{}}
}

func (d *recordingDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, network+" "+address)
	mem := d.memory[address]
	d.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		d.t.Errorf("dial %q: %v", address, err)
		return nil, err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		d.t.Errorf("the gate dialed a host name: %q", address)
		return nil, fmt.Errorf("test dialer: %q is not an IP address", address)
	}
	if mem != nil {
		return mem.dial(ctx)
	}
	if !a.Unmap().IsLoopback() {
		return nil, errTestRefused
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// Dials returns every dial so far.
func (d *recordingDialer) Dials() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.dials)
}

// RemoteDials returns the dials to addresses that are not loopback.
func (d *recordingDialer) RemoteDials() []string {
	var out []string
	for _, s := range d.Dials() {
		_, address, _ := strings.Cut(s, " ")
		host, _, _ := net.SplitHostPort(address)
		if a, err := netip.ParseAddr(host); err != nil || !a.Unmap().IsLoopback() {
			out = append(out, s)
		}
	}
	return out
}

// serve makes address (a non-loopback "ip:port") answer with h, in
// memory. It returns the server, which counts connections and requests.
func (d *recordingDialer) serve(address string, h http.Handler) *memServer {
	m := &memServer{l: &pipeListener{ch: make(chan net.Conn), done: make(chan struct{})}}
	m.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.requests.Add(1)
		h.ServeHTTP(w, r)
	})}
	go m.srv.Serve(m.l)
	d.t.Cleanup(func() { m.srv.Close() })
	d.mu.Lock()
	d.memory[address] = m
	d.mu.Unlock()
	return m
}

// memServer is an HTTP server reachable only through net.Pipe.
type memServer struct {
	srv      *http.Server
	l        *pipeListener
	conns    atomic.Int64
	requests atomic.Int64
}

func (m *memServer) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case m.l.ch <- server:
		m.conns.Add(1)
		return client, nil
	case <-m.l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// brokenStore fails every call.
type brokenStore struct{}

var errBroken = errors.New("store is down")

func (brokenStore) Consent(context.Context, string) (Consent, bool, error) {
	return Consent{}, false, errBroken
}
func (brokenStore) Grant(context.Context, Consent) error         { return errBroken }
func (brokenStore) Revoke(context.Context, string) (bool, error) { return false, errBroken }
func (brokenStore) List(context.Context) ([]Consent, error)      { return nil, errBroken }

var testTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func consentFor(provider string) Consent { return consentAt(provider, "http://remote.example/v1") }

// consentAt is a consent for provider covering endpoint's scheme, host and
// port.
func consentAt(provider, endpoint string) Consent {
	return Consent{Provider: provider, GrantedBy: "alice", GrantedAt: testTime, Endpoint: endpoint}
}

// testGate returns a gate wired to a fresh recording resolver and dialer.
func testGate(t *testing.T, mode Mode, consents ...Consent) (*Gate, *recordingResolver, *recordingDialer, *MemoryStore) {
	t.Helper()
	r, d, s := newResolver(), newDialer(t), NewMemoryStore(consents...)
	g := &Gate{Mode: mode, Consents: s, Resolver: r, Dial: d.Dial, Now: func() time.Time { return testTime }}
	return g, r, d, s
}

// refusal returns err's *Error or fails the test.
func refusal(t *testing.T, err error, want Reason) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *locality.Error", err, err)
	}
	if e.Reason != want {
		t.Fatalf("reason %v, want %v (error: %v)", e.Reason, want, err)
	}
	if !errors.Is(err, ErrRefused) || !errors.Is(err, want) {
		t.Fatalf("errors.Is(err, ErrRefused/%v) is false for %v", want, err)
	}
	return e
}
