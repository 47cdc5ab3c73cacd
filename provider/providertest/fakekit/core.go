package fakekit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Spec describes the protocol-specific parts a [Core] needs.
type Spec[Reply, Recorded any] struct {
	// Name prefixes panic messages (e.g. "anthropicfake").
	Name string
	// Validate, if set, reports a reply that cannot be sent;
	// [Core.EnqueueRoute] panics on it.
	Validate func(*Reply) error
	// Clone, if set, deep-copies a recorded request for [Core.Requests],
	// so that callers cannot alias the recorded header or body.
	Clone func(Recorded) Recorded
}

// Core is the shared state of a fake server: FIFO queues of Reply per
// Route, the recorded requests of type Recorded, the open connections and,
// once started, the HTTP server. The zero value is not usable; create
// one with [New]. All methods are safe for concurrent use.
type Core[Route ~string, Reply, Recorded any] struct {
	spec Spec[Reply, Recorded]

	mu       sync.Mutex
	queues   map[Route][]Reply
	recorded []Recorded
	conns    map[net.Conn]http.ConnState
	changed  chan struct{} // closed and replaced on every recorded request or connection change

	done      chan struct{}
	closeOnce sync.Once
	closed    bool // guarded by mu: the server is closing; idle connections are closed
	srv       *http.Server
	listener  net.Listener
	url       string
	client    *http.Client
}

// New returns an unstarted Core.
func New[Route ~string, Reply, Recorded any](spec Spec[Reply, Recorded]) *Core[Route, Reply, Recorded] {
	return &Core[Route, Reply, Recorded]{
		spec:    spec,
		queues:  make(map[Route][]Reply),
		conns:   make(map[net.Conn]http.ConnState),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Start serves h on a loopback address (127.0.0.1, or [::1] when there is
// no IPv4 loopback) with [Core.ConnState] installed as the ConnState hook.
// It panics when no loopback address can be listened on. Call it at most
// once.
func (c *Core[Route, Reply, Recorded]) Start(h http.Handler) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if l, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("%s: cannot listen on loopback: %v", c.spec.Name, err))
		}
	}
	c.srv = &http.Server{Handler: h, ConnState: c.ConnState}
	c.listener, c.url = l, "http://"+l.Addr().String()
	c.client = &http.Client{Transport: &http.Transport{}}
	go func() { _ = c.srv.Serve(l) }() // returns when Close closes the listener
}

// URL is the base URL of a started fake ("http://127.0.0.1:PORT"); "" for
// an unstarted one.
func (c *Core[Route, Reply, Recorded]) URL() string {
	return c.url
}

// Client is an *http.Client configured for the started fake (nil for an
// unstarted one).
func (c *Core[Route, Reply, Recorded]) Client() *http.Client {
	return c.client
}

// Done is closed by [Core.Close]: a handler holding a reply selects on it
// to give up.
func (c *Core[Route, Reply, Recorded]) Done() <-chan struct{} { return c.done }

// Stall holds a reply mid-answer until release is closed (or receives),
// and reports whether to go on: false once the client is gone. A Close of
// the fake meanwhile aborts the handler, cutting the connection.
func (c *Core[Route, Reply, Recorded]) Stall(r *http.Request, release <-chan struct{}) bool {
	select {
	case <-release:
		return true
	case <-r.Context().Done():
		return false
	case <-c.done:
		panic(http.ErrAbortHandler)
	}
}

// Close releases every held reply (closes [Core.Done]), stops a started
// fake and waits for its handlers to return, as httptest.Server.Close
// does: it stops listening, closes the idle connections at once and the
// others when their request ends, and returns when none is left. It is
// safe to call more than once.
func (c *Core[Route, Reply, Recorded]) Close() {
	c.closeOnce.Do(func() { close(c.done) })
	if c.srv == nil {
		return
	}
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.listener.Close()
		c.srv.SetKeepAlivesEnabled(false)
		for conn, st := range c.conns {
			if st == http.StateIdle || st == http.StateNew {
				conn.Close()
			}
		}
	}
	c.mu.Unlock()
	c.client.CloseIdleConnections()
	_ = c.waitFor(context.Background(), func() bool { return len(c.conns) == 0 })
}

// EnqueueRoute appends replies to the FIFO queue of route. It panics on a
// reply that Spec.Validate rejects, enqueueing none of them.
func (c *Core[Route, Reply, Recorded]) EnqueueRoute(route Route, replies ...Reply) {
	if c.spec.Validate != nil {
		for i := range replies {
			if err := c.spec.Validate(&replies[i]); err != nil {
				panic(fmt.Sprintf("%s: Enqueue: reply %d: %v", c.spec.Name, i, err))
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[route] = append(c.queues[route], replies...)
}

// Pending is how many replies of route are still queued.
func (c *Core[Route, Reply, Recorded]) Pending(route Route) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queues[route])
}

// Next pops the next reply of route; ok is false when the queue is empty.
func (c *Core[Route, Reply, Recorded]) Next(route Route) (r Reply, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[route]
	if len(q) == 0 {
		return r, false
	}
	r = q[0]
	c.queues[route] = q[1:]
	return r, true
}

// Record stores an arrived request and wakes the waiters.
func (c *Core[Route, Reply, Recorded]) Record(r Recorded) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recorded = append(c.recorded, r)
	c.notifyLocked()
}

// ForgetRequests drops the requests recorded so far, so that a long run
// (a soak) does not grow the heap; Requests and WaitRequests count only
// what arrives after.
func (c *Core[Route, Reply, Recorded]) ForgetRequests() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recorded = nil
}

// Requests returns a copy of every request received so far, in arrival
// order.
func (c *Core[Route, Reply, Recorded]) Requests() []Recorded {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Recorded, len(c.recorded))
	for i, r := range c.recorded {
		if c.spec.Clone != nil {
			r = c.spec.Clone(r)
		}
		out[i] = r
	}
	return out
}

// WaitRequests blocks until at least n requests have been received (as
// Requests counts them) or ctx is done. It does not poll.
func (c *Core[Route, Reply, Recorded]) WaitRequests(ctx context.Context, n int) error {
	return c.waitFor(ctx, func() bool { return len(c.recorded) >= n })
}

// OpenConns is the number of TCP connections currently open to the fake
// (tracked through ConnState).
func (c *Core[Route, Reply, Recorded]) OpenConns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// WaitOpenConns blocks until exactly n connections are open or ctx is
// done. The server notices a client-side close asynchronously; this waits
// for it without polling.
func (c *Core[Route, Reply, Recorded]) WaitOpenConns(ctx context.Context, n int) error {
	return c.waitFor(ctx, func() bool { return len(c.conns) == n })
}

// ActiveConns is the number of open connections that are serving a request
// (not idle in a client's keep-alive pool).
func (c *Core[Route, Reply, Recorded]) ActiveConns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.activeLocked()
}

func (c *Core[Route, Reply, Recorded]) activeLocked() int {
	n := 0
	for _, st := range c.conns {
		if st != http.StateIdle {
			n++
		}
	}
	return n
}

// WaitActiveConns blocks until exactly n connections are serving a request
// or ctx is done: a client that stopped reading a stream must close its
// connection, and one that finished must return it to its pool idle.
func (c *Core[Route, Reply, Recorded]) WaitActiveConns(ctx context.Context, n int) error {
	return c.waitFor(ctx, func() bool { return c.activeLocked() == n })
}

// ConnState is an http.Server ConnState hook counting open connections.
// [Core.Start] installs it; set it yourself when serving the fake's handler
// on a server of your own.
func (c *Core[Route, Reply, Recorded]) ConnState(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(c.conns, conn)
	default:
		c.conns[conn] = state
		if c.closed && (state == http.StateIdle || state == http.StateNew) {
			conn.Close() // ConnState is called again with StateClosed
		}
	}
	c.notifyLocked()
}

// waitFor waits until cond (called with c.mu held) holds or ctx is done.
func (c *Core[Route, Reply, Recorded]) waitFor(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ok, ch := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifyLocked wakes every waiter; c.mu must be held.
func (c *Core[Route, Reply, Recorded]) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
