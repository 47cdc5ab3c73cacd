package cache

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A small client of the Redis protocol (RESP2), as much of it as the
// cache and the gateway's shared state need: AUTH, SELECT, PING, GET, SET,
// EVALSHA and EVAL over a few pooled connections. A full client library would bring hundreds of commands into
// the binary for these five.

// errNil is a nil bulk reply: GET of a missing key.
var errNil = errors.New("redis: nil")

// redisError is an error reply of the server ("-ERR …").
type redisError string

func (e redisError) Error() string { return "redis: " + string(e) }

// redisConfig is what a Redis URL says.
type redisConfig struct {
	network, addr string
	user, pass    string
	db            int
	tls           *tls.Config
	dialTimeout   time.Duration
	ioTimeout     time.Duration // each command's, unless the context ends sooner
	poolSize      int
}

// parseRedisURL reads redis://[user:password@]host[:port][/db][?options],
// rediss:// (TLS) and unix://[user:password@]/path[?db=n&options]. Options:
// dial_timeout (default 2 s), read_timeout, write_timeout (durations; the
// longer of the last two bounds a command, default 1 s), pool_size, skip_verify (rediss), and
// max_retries, accepted for compatibility (no command is retried).
func parseRedisURL(raw string) (*redisConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	// Short: a cache lookup is on every cached call's path, and a Redis
	// that answers at all answers in milliseconds.
	c := &redisConfig{network: "tcp", dialTimeout: 2 * time.Second, ioTimeout: time.Second, poolSize: 10}
	var rw time.Duration // read_timeout and write_timeout, the longer
	if u.User != nil {
		c.user = u.User.Username()
		c.pass, _ = u.User.Password()
		if c.pass == "" { // redis://password@host
			c.user, c.pass = "", c.user
		}
	}
	q := u.Query()
	dbText := q.Get("db")
	q.Del("db")
	switch u.Scheme {
	case "redis", "rediss":
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "localhost"
		}
		if port == "" {
			port = "6379"
		}
		c.addr = net.JoinHostPort(host, port)
		if p := strings.Trim(u.Path, "/"); p != "" {
			dbText = p
		}
		if u.Scheme == "rediss" {
			c.tls = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
	case "unix":
		c.network, c.addr = "unix", u.Path
		if c.addr == "" {
			return nil, errors.New("unix:// needs the socket's path")
		}
	default:
		return nil, fmt.Errorf("scheme %q: want redis, rediss or unix", u.Scheme)
	}
	if dbText != "" {
		if c.db, err = strconv.Atoi(dbText); err != nil || c.db < 0 {
			return nil, fmt.Errorf("database %q is not a number", dbText)
		}
	}
	for name, vs := range q {
		v := vs[len(vs)-1]
		switch name {
		case "dial_timeout", "read_timeout", "write_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				if n, nerr := strconv.Atoi(v); nerr == nil {
					d, err = time.Duration(n)*time.Second, nil
				}
			}
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("option %s=%q is not a positive duration", name, v)
			}
			if name == "dial_timeout" {
				c.dialTimeout = d
			} else {
				rw = max(rw, d)
			}
		case "pool_size":
			if c.poolSize, err = strconv.Atoi(v); err != nil || c.poolSize < 1 {
				return nil, fmt.Errorf("option pool_size=%q is not a positive number", v)
			}
		case "skip_verify":
			skip, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("option skip_verify=%q is not true or false", v)
			}
			if c.tls != nil {
				c.tls.InsecureSkipVerify = skip
			}
		case "max_retries":
			if _, err := strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("option max_retries=%q is not a number", v)
			}
		default:
			return nil, fmt.Errorf("unknown option %q", name)
		}
	}
	if rw > 0 {
		c.ioTimeout = rw
	}
	return c, nil
}

// respClient sends commands over pooled connections. A connection that
// failed in any way is closed, never reused.
type respClient struct {
	cfg  *redisConfig
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	idle   []*respConn
	closed bool
	slots  chan struct{} // one per open connection, at most poolSize
}

type respConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func newRESPClient(cfg *redisConfig, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *respClient {
	if dial == nil {
		d := &net.Dialer{Timeout: cfg.dialTimeout, KeepAlive: 5 * time.Minute}
		dial = d.DialContext
	}
	return &respClient{cfg: cfg, dial: dial, slots: make(chan struct{}, cfg.poolSize)}
}

// do sends one command and returns its reply: a string for a simple or
// bulk string, an int64, a []any for an array (a nil element for a nil
// bulk string), errNil, or a redisError.
func (rc *respClient) do(ctx context.Context, args ...any) (any, error) {
	select {
	case rc.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cn, err := rc.get(ctx)
	if err != nil {
		<-rc.slots
		return nil, err
	}
	reply, err := cn.roundTrip(ctx, rc.cfg.ioTimeout, args)
	var re redisError
	if err == nil || errors.Is(err, errNil) || errors.As(err, &re) {
		rc.put(cn)
	} else {
		cn.c.Close()
	}
	<-rc.slots
	return reply, err
}

// get takes an idle connection or opens one: dialed, TLS when asked,
// authenticated and on the URL's database.
func (rc *respClient) get(ctx context.Context) (*respConn, error) {
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return nil, errors.New("redis: client is closed")
	}
	if n := len(rc.idle); n > 0 {
		cn := rc.idle[n-1]
		rc.idle = rc.idle[:n-1]
		rc.mu.Unlock()
		return cn, nil
	}
	rc.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, rc.cfg.dialTimeout)
	defer cancel()
	c, err := rc.dial(dctx, rc.cfg.network, rc.cfg.addr)
	if err != nil {
		return nil, err
	}
	if rc.cfg.tls != nil {
		tc := tls.Client(c, rc.cfg.tls.Clone())
		if err := tc.HandshakeContext(dctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	cn := &respConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
	var hello [][]any
	switch {
	case rc.cfg.pass != "" && rc.cfg.user != "":
		hello = append(hello, []any{"AUTH", rc.cfg.user, rc.cfg.pass})
	case rc.cfg.pass != "":
		hello = append(hello, []any{"AUTH", rc.cfg.pass})
	}
	if rc.cfg.db != 0 {
		hello = append(hello, []any{"SELECT", rc.cfg.db})
	}
	for _, args := range hello {
		if _, err := cn.roundTrip(dctx, rc.cfg.ioTimeout, args); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", args[0], err)
		}
	}
	return cn, nil
}

func (rc *respClient) put(cn *respConn) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		cn.c.Close()
		return
	}
	rc.idle = append(rc.idle, cn)
}

// close closes the idle connections; those in use close when returned.
func (rc *respClient) close() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.closed = true
	for _, cn := range rc.idle {
		cn.c.Close()
	}
	rc.idle = nil
	return nil
}

// roundTrip writes one command and reads its reply, within timeout and
// the context's deadline; the context's end interrupts it.
func (cn *respConn) roundTrip(ctx context.Context, timeout time.Duration, args []any) (any, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := cn.c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { cn.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fmt.Fprintf(cn.w, "*%d\r\n", len(args))
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case []byte:
			s = string(v)
		case int:
			s = strconv.Itoa(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		default:
			return nil, fmt.Errorf("redis: argument of type %T", a)
		}
		fmt.Fprintf(cn.w, "$%d\r\n%s\r\n", len(s), s)
	}
	err := cn.w.Flush()
	var reply any
	if err == nil {
		reply, err = readReply(cn.r)
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return reply, err
}

// maxBulk is the longest bulk string read: Redis's own limit.
const maxBulk = 512 << 20

// maxArray is the most elements of an array reply read (the gateway's
// scripts answer with a few, or one per key asked for).
const maxArray = 1 << 20

// readReply reads one RESP2 reply. An array's nil elements are nil; a nil
// array is errNil.
func readReply(r *bufio.Reader) (any, error) {
	return readReplyDepth(r, 0)
}

func readReplyDepth(r *bufio.Reader, depth int) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, redisError(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		switch {
		case err != nil || n < -1 || n > maxBulk:
			return nil, fmt.Errorf("redis: bad bulk length %q", line)
		case n == -1:
			return nil, errNil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		switch {
		case err != nil || n < -1 || n > maxArray || depth > 8:
			return nil, fmt.Errorf("redis: bad array length %q", line)
		case n == -1:
			return nil, errNil
		}
		out := make([]any, n)
		// An error element is kept as the element: the reply as a whole
		// was read, and the connection stays usable.
		for i := range out {
			v, err := readReplyDepth(r, depth+1)
			var re redisError
			switch {
			case errors.Is(err, errNil):
				v = nil
			case errors.As(err, &re):
				v = re
			case err != nil:
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}
