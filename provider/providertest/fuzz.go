package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// RawServer is a loopback HTTP server that answers every request with the
// response set last by [RawServer.Respond], byte for byte: the fuzz
// targets of the adapters feed it arbitrary bodies. It counts connections
// serving a request, so that a target can check that the adapter closed
// (or returned to its pool) every connection it opened.
type RawServer struct {
	srv *httptest.Server

	mu          sync.Mutex
	status      int
	contentType string
	body        []byte
	conns       map[net.Conn]http.ConnState
	changed     chan struct{}
}

// NewRawServer starts a RawServer that tb closes when it ends.
func NewRawServer(tb testing.TB) *RawServer {
	s := &RawServer{status: http.StatusOK, contentType: "application/json", conns: map[net.Conn]http.ConnState{}, changed: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = s.connState
	s.srv.Start()
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL.
func (s *RawServer) URL() string { return s.srv.URL }

// Respond sets the response to every following request.
func (s *RawServer) Respond(status int, contentType string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.contentType, s.body = status, contentType, bytes.Clone(body)
}

func (s *RawServer) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	status, ct, body := s.status, s.contentType, s.body
	s.mu.Unlock()
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func (s *RawServer) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	default:
		s.conns[c] = st
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// WaitIdle blocks until no connection is serving a request (each is idle
// in the client's pool or closed) or ctx is done. It does not poll.
func (s *RawServer) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		active := 0
		for _, st := range s.conns {
			if st != http.StateIdle {
				active++
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if active == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d connections still serving a request: %w", active, ctx.Err())
		}
	}
}

// CheckFailure fails t unless err is a *provider.Error with a kind, and
// neither its text nor its diagnostic contains secret.
func CheckFailure(t testing.TB, err error, secret string) {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *provider.Error", err, err)
	}
	if pe.Kind == provider.KindUnknown {
		t.Errorf("error without a kind: %v", err)
	}
	if secret != "" {
		if strings.Contains(err.Error(), secret) || strings.Contains(pe.Diagnostic.Message, secret) || strings.Contains(fmt.Sprintf("%+v", pe.Diagnostic), secret) {
			t.Errorf("error leaks the key: %v", err)
		}
	}
}

// FuzzCall answers one call of a with status, contentType and body from
// srv, streamed or not, and checks what every fuzz target of an adapter
// checks: no panic (the fuzzer reports one), a failure is a
// *provider.Error with a kind that does not leak secret, a success carries
// a result, and no connection is left serving a request afterwards.
func FuzzCall(t *testing.T, srv *RawServer, a provider.Adapter, stream bool, status int, contentType string, body []byte, secret string) (*provider.Result, error) {
	t.Helper()
	srv.Respond(status, contentType, body)
	// A call that neither ends nor heeds its context (a parser that loops)
	// crashes the process, so that the fuzzer keeps the input.
	watchdog := time.AfterFunc(time.Minute, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("call still running after a minute on body %q:\n%s", body, buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &provider.Request{Prompt: "hi", Tools: []provider.ToolDef{weatherTool}}
	var res *provider.Result
	var err error
	if stream {
		var s provider.Stream
		if s, err = a.Stream(ctx, req); err == nil {
			res, err = provider.Collect(s)
			if cerr := s.Close(); cerr != nil {
				t.Errorf("Close = %v", cerr)
			}
		}
	} else {
		res, err = a.Invoke(ctx, req)
	}
	if err != nil {
		CheckFailure(t, err, secret)
	} else if res == nil {
		t.Fatal("no result and no error")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if werr := srv.WaitIdle(wctx); werr != nil {
		t.Errorf("connection leak after the call: %v", werr)
	}
	return res, err
}

// Recording returns an HTTP client that keeps a copy of every response
// body it reads, for seeding fuzz corpora with what a fake really sends,
// and a function returning the bodies so far.
func Recording() (*http.Client, func() [][]byte) {
	rt := &recorder{}
	return &http.Client{Transport: rt}, func() [][]byte {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		out := make([][]byte, 0, len(rt.bodies))
		for _, b := range rt.bodies {
			out = append(out, bytes.Clone(b.Bytes()))
		}
		return out
	}
}

type recorder struct {
	mu     sync.Mutex
	bodies []*bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	r.mu.Lock()
	r.bodies = append(r.bodies, buf)
	r.mu.Unlock()
	resp.Body = &teeBody{ReadCloser: resp.Body, r: r, buf: buf}
	return resp, nil
}

type teeBody struct {
	io.ReadCloser
	r   *recorder
	buf *bytes.Buffer
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	b.buf.Write(p[:n])
	b.r.mu.Unlock()
	return n, err
}

// WriteSeeds writes each of values (the arguments of one f.Add call) as a
// file of f's seed corpus, testdata/fuzz/<FuzzName>/<name>, when the
// environment says CORTEXBUILD_UPDATE_FUZZ_SEEDS=1; otherwise it does
// nothing. The committed files are what `go test` runs.
func WriteSeeds(f *testing.F, name string, values ...any) {
	if os.Getenv("CORTEXBUILD_UPDATE_FUZZ_SEEDS") != "1" {
		return
	}
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch x := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", x)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", x)
		case int:
			fmt.Fprintf(&b, "int(%d)\n", x)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", x)
		case bool:
			fmt.Fprintf(&b, "bool(%t)\n", x)
		default:
			f.Fatalf("WriteSeeds: unsupported %T", v)
		}
	}
	dir := filepath.Join("testdata", "fuzz", f.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		f.Fatal(err)
	}
}
