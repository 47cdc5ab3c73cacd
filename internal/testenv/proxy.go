package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy passes TCP connections from its address to a target server
// (PostgreSQL, Redis, a provider's fake). Cut closes its listener and
// every connection through it: the server is then unreachable through the
// proxy, as when its host goes away; Restore listens again on the same
// address. It is closed when the test ends.
type Proxy struct {
	// Addr is where the proxy listens (host:port).
	Addr string

	t      testing.TB
	target string
	mu     sync.Mutex
	ln     net.Listener // nil while cut
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	stall  chan struct{} // while stalled; closed by Heal
}

// NewProxy starts a proxy to target on a free loopback port.
func NewProxy(t testing.TB, target string) *Proxy { return ListenProxy(t, "127.0.0.1:0", target) }

// ListenProxy starts a proxy to target listening on addr (host:port; port
// 0 for a free one), for a host address other than loopback, such as a
// bridge that network namespaces reach.
func ListenProxy(t testing.TB, addr, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Heal(); p.Cut(); p.wg.Wait() })
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

// pipe copies between c and a new connection to the target until either
// side closes or the proxy is cut.
func (p *Proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, stalling{src, p})
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
	c.Close()
	up.Close()
}

// Cut closes the listener and every connection through the proxy: nothing
// reaches the target through it until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the proxy's address; it does nothing when the
// proxy is not cut.
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return
	}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// Stall holds everything the proxy forwards, as a network that loses every
// packet until it heals (and then delivers them): no connection through it
// fails, none is answered, until Heal.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stall == nil {
		p.stall = make(chan struct{})
	}
}

// Heal delivers what the proxy held since Stall, and forwards again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stall != nil {
		close(p.stall)
		p.stall = nil
	}
}

// stalling passes on what r reads once the proxy is not stalled.
type stalling struct {
	r io.Reader
	p *Proxy
}

func (s stalling) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	s.p.mu.Lock()
	stall := s.p.stall
	s.p.mu.Unlock()
	if stall != nil {
		<-stall
	}
	return n, err
}
