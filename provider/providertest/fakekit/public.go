package fakekit

import (
	"context"
	"net"
	"net/http"
)

// Public is the part of a [Core] that every fake exports unchanged. A fake
// embeds it (through an unexported alias, so that the embedded field stays
// unexported) to promote exactly these methods, and keeps the *Core itself
// for the internal operations.
type Public[Route ~string, Reply, Recorded any] struct {
	c *Core[Route, Reply, Recorded]
}

// PublicOf returns the exported view of c.
func PublicOf[Route ~string, Reply, Recorded any](c *Core[Route, Reply, Recorded]) Public[Route, Reply, Recorded] {
	return Public[Route, Reply, Recorded]{c: c}
}

// URL is the base URL of a started fake ("http://127.0.0.1:PORT"); "" for
// an unstarted one.
func (p Public[Route, Reply, Recorded]) URL() string { return p.c.URL() }

// Client is an *http.Client configured for the started fake (nil for an
// unstarted one).
func (p Public[Route, Reply, Recorded]) Client() *http.Client { return p.c.Client() }

// Close releases every held reply, stops a started fake and waits for its
// handlers to return. It is safe to call more than once.
func (p Public[Route, Reply, Recorded]) Close() { p.c.Close() }

// EnqueueRoute appends replies to the FIFO queue of route. It panics on a
// reply that cannot be sent.
func (p Public[Route, Reply, Recorded]) EnqueueRoute(route Route, replies ...Reply) {
	p.c.EnqueueRoute(route, replies...)
}

// Pending is how many scripted replies of route are still queued.
func (p Public[Route, Reply, Recorded]) Pending(route Route) int { return p.c.Pending(route) }

// Requests returns a copy of every request received so far, in arrival
// order.
func (p Public[Route, Reply, Recorded]) Requests() []Recorded { return p.c.Requests() }

// ForgetRequests drops the requests recorded so far (see [Core.ForgetRequests]).
func (p Public[Route, Reply, Recorded]) ForgetRequests() { p.c.ForgetRequests() }

// WaitRequests blocks until at least n requests have been received (as
// Requests counts them) or ctx is done. It does not poll.
func (p Public[Route, Reply, Recorded]) WaitRequests(ctx context.Context, n int) error {
	return p.c.WaitRequests(ctx, n)
}

// OpenConns is the number of TCP connections currently open to the fake
// (tracked through ConnState).
func (p Public[Route, Reply, Recorded]) OpenConns() int { return p.c.OpenConns() }

// WaitOpenConns blocks until exactly n connections are open or ctx is
// done. The server notices a client-side close asynchronously; this waits
// for it without polling.
func (p Public[Route, Reply, Recorded]) WaitOpenConns(ctx context.Context, n int) error {
	return p.c.WaitOpenConns(ctx, n)
}

// ActiveConns is the number of open connections that are serving a request
// (not idle in a client's keep-alive pool).
func (p Public[Route, Reply, Recorded]) ActiveConns() int { return p.c.ActiveConns() }

// WaitActiveConns blocks until exactly n connections are serving a request
// or ctx is done: a client that stopped reading a stream must close its
// connection, and one that finished must return it to its pool idle.
func (p Public[Route, Reply, Recorded]) WaitActiveConns(ctx context.Context, n int) error {
	return p.c.WaitActiveConns(ctx, n)
}

// ConnState is an http.Server ConnState hook counting open connections.
// New installs it on a started fake; set it yourself when serving the
// fake's Handler on a server of your own.
func (p Public[Route, Reply, Recorded]) ConnState(c net.Conn, state http.ConnState) {
	p.c.ConnState(c, state)
}
