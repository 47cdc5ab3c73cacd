package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultListen is where 'cortexbuild serve' listens unless told otherwise:
// loopback only.
const DefaultListen = "127.0.0.1:8787"

// ErrNoAuthNotLoopback refuses to serve without authentication on an
// address other machines can reach.
var ErrNoAuthNotLoopback = errors.New("authentication can be turned off only on a loopback address")

// hardStop is how long handlers get to return once their contexts are
// cancelled at the shutdown deadline, before their connections are closed
// under them.
const hardStop = 5 * time.Second

// Server serves a handler on one listener with a graceful shutdown:
// [Server.Shutdown] stops accepting, lets in-flight requests finish until
// its context ends, then cancels the ones still running (their contexts'
// cause is [ErrShuttingDown], so streams end with the protocol's error
// event and the orchestrator settles or releases their reservations) and
// waits for them to return.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	base   context.Context
	cancel context.CancelCauseFunc
	// mu guards active; idle is signalled when it drops to zero. A
	// counter rather than a WaitGroup: a request may still start on an
	// accepted connection while Shutdown waits.
	mu     sync.Mutex
	active int
	idle   *sync.Cond

	stopOnce sync.Once
	stopErr  error
}

// Listen binds addr and returns a server for the gateway (and whatever is
// mounted on it). A gateway without authentication is refused unless addr
// is a loopback address.
func (g *Gateway) Listen(addr string) (*Server, error) {
	if g.opts.NoAuth {
		// Refuse before binding, so that nothing is ever reachable from
		// another machine without a key, even for a moment.
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if ip := net.ParseIP(strings.Trim(host, "[]")); (ip == nil && host != "localhost") || (ip != nil && !ip.IsLoopback()) {
			return nil, fmt.Errorf("%w: %s is not one (listen on 127.0.0.1 or ::1, or keep authentication on)", ErrNoAuthNotLoopback, addr)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if g.opts.NoAuth && !IsLoopback(ln.Addr()) {
		ln.Close()
		return nil, fmt.Errorf("%w: %s is not one (listen on 127.0.0.1 or ::1, or keep authentication on)", ErrNoAuthNotLoopback, addr)
	}
	s := NewServer(ln, g)
	s.srv.ReadHeaderTimeout = g.opts.HeaderTimeout
	return s, nil
}

// NewServer returns a server for h on ln. Call [Server.Serve] to start it.
func NewServer(ln net.Listener, h http.Handler) *Server {
	base, cancel := context.WithCancelCause(context.Background())
	s := &Server{ln: ln, base: base, cancel: cancel}
	s.idle = sync.NewCond(&s.mu)
	s.srv = &http.Server{
		Handler:           s.track(h),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	return s
}

// track counts in-flight requests.
func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.active++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.active--
			if s.active == 0 {
				s.idle.Broadcast()
			}
			s.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the server's base URL, "http://127.0.0.1:8787".
func (s *Server) URL() string {
	if a, ok := s.ln.Addr().(*net.TCPAddr); ok {
		host := a.IP.String()
		if a.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
		return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
	}
	return "http://" + s.ln.Addr().String()
}

// InFlight is the number of requests being served.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Serve accepts connections until Shutdown; it returns nil after a
// shutdown.
func (s *Server) Serve() error {
	err := s.srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully: no new connections, in-flight
// requests run until ctx ends, then the remaining ones are cancelled and
// Shutdown waits for their handlers to return (closing their connections
// if they do not within a few seconds). It returns an error saying how
// many requests were cancelled, or nil when all finished in time. Later
// calls return the first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.shutdown(ctx) })
	return s.stopErr
}

func (s *Server) shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err == nil {
		s.cancel(ErrShuttingDown)
		return nil
	}
	n := s.InFlight()
	s.cancel(ErrShuttingDown)
	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		for s.active > 0 {
			s.idle.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	t := time.NewTimer(hardStop)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = s.srv.Close()
		<-done
	}
	_ = s.srv.Close()
	if n == 0 {
		return nil
	}
	return fmt.Errorf("gateway: %d in-flight requests were cancelled at the shutdown deadline", n)
}

// IsLoopback reports whether addr is a loopback address (127.0.0.0/8,
// ::1).
func IsLoopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
