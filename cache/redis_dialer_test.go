package cache_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/cache"
)

// respServer answers the few commands a client sends to connect: HELLO is
// refused (the client falls back to RESP2), PING answers PONG, anything
// else OK. It counts the connections it completed a PING on.
type respServer struct {
	l     net.Listener
	mu    sync.Mutex
	pings int
	cmds  []string // every command, its words joined by spaces
	// hang, when set, makes every command but PING go unanswered until
	// it is closed: a hung server.
	hang chan struct{}
}

func (s *respServer) serve() {
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		go s.conn(c)
	}
}

func (s *respServer) conn(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.cmds = append(s.cmds, strings.Join(args, " "))
		s.mu.Unlock()
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			io.WriteString(c, "-ERR unknown command 'HELLO'\r\n")
		case "PING":
			s.mu.Lock()
			s.pings++
			s.mu.Unlock()
			io.WriteString(c, "+PONG\r\n")
		default:
			if s.hang != nil {
				<-s.hang
				return
			}
			io.WriteString(c, "+OK\r\n")
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(h, "$")))
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// A Dialer is given the URL's host name and port (so that it resolves the
// name itself: the locality gate's ServiceDial), and for rediss:// the TLS
// handshake runs over its connection. Its refusal is the open's error,
// wrapped so that errors.Is finds it.
func TestOpenRedisThroughADialer(t *testing.T) {
	certs := httptest.NewTLSServer(nil) // only for its certificate
	cert := certs.TLS.Certificates[0]
	certs.Close()
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"redis", false}, {"rediss", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var l net.Listener
			var err error
			if tc.tls {
				l, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
			} else {
				l, err = net.Listen("tcp", "127.0.0.1:0")
			}
			if err != nil {
				t.Fatal(err)
			}
			srv := &respServer{l: l}
			go srv.serve()
			t.Cleanup(func() { l.Close() })
			_, port, _ := net.SplitHostPort(l.Addr().String())

			var mu sync.Mutex
			var asked []string
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				mu.Lock()
				asked = append(asked, network+" "+addr)
				mu.Unlock()
				var d net.Dialer
				return d.DialContext(ctx, network, "127.0.0.1:"+port) // "resolved" here
			}
			raw := tc.name + "://cache.local.test:" + port + "/0"
			if tc.tls {
				raw += "?skip_verify=true"
			}
			r, err := cache.OpenRedis(context.Background(), raw, cache.RedisOptions{Dialer: dial})
			if err != nil {
				t.Fatalf("OpenRedis: %v", err)
			}
			r.Close()
			srv.mu.Lock()
			pings := srv.pings
			srv.mu.Unlock()
			if pings == 0 {
				t.Error("the server answered no PING: the client did not talk to it")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) == 0 || asked[0] != "tcp cache.local.test:"+port {
				t.Errorf("the dialer was asked %q, want the URL's host name and port", asked)
			}
		})
	}

	refused := errors.New("refused by the test dialer")
	_, err := cache.OpenRedis(context.Background(), "redis://cache.remote.test:6379/0?max_retries=-1&dial_timeout=1s",
		cache.RedisOptions{Dialer: func(context.Context, string, string) (net.Conn, error) { return nil, refused }})
	if !errors.Is(err, refused) {
		t.Errorf("OpenRedis = %v, want the dialer's refusal inside", err)
	}
}

// A URL's user, password and database are sent on each new connection,
// before its first command: AUTH user password, then SELECT db.
func TestOpenRedisAuthenticatesAndSelects(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &respServer{l: l}
	go srv.serve()
	t.Cleanup(func() { l.Close() })
	r, err := cache.OpenRedis(context.Background(), "redis://app:s3cret@"+l.Addr().String()+"/3", cache.RedisOptions{})
	if err != nil {
		t.Fatalf("OpenRedis: %v", err)
	}
	r.Close()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if want := []string{"AUTH app s3cret", "SELECT 3", "PING"}; strings.Join(srv.cmds, "|") != strings.Join(want, "|") {
		t.Errorf("the server was sent %q, want %q", strings.ReplaceAll(strings.Join(srv.cmds, "|"), "s3cret", "***"), strings.ReplaceAll(strings.Join(want, "|"), "s3cret", "***"))
	}
}
