package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// FuzzTarget is what the shared fuzz targets need of an adapter.
type FuzzTarget struct {
	// New returns the adapter under test, sending every request to base
	// through hc (a plain client when hc is nil).
	New func(tb testing.TB, base string, hc *http.Client) provider.Adapter
	// Secret is the API key New configures: no error may contain it.
	Secret string
}

// fuzzBase is the base URL of a [Fuzzer]'s adapter: a loopback address
// that nothing is sent to, since the fuzzer's transport answers in memory.
const fuzzBase = "http://127.0.0.1:9"

// Fuzzer calls an adapter whose HTTP client answers every request in
// memory with the response set for the call, byte for byte: the fuzz
// targets feed it arbitrary bodies.
//
// It does not use a loopback server. Under `go test -fuzz` every package,
// net/http included, is instrumented for coverage, and a server's and a
// pooled connection's goroutines make that coverage depend on scheduling;
// two loopback round trips also made an execution cost about a
// millisecond on two cores. Each new input the fuzzer took for
// interesting was then minimised in the worker, for up to
// -fuzzminimizetime (60 s): on a stream body of a few kilobytes that
// outlasted any short -fuzztime, so the worker reported no executions and
// fuzzed nothing new until it was stopped (docs/reliability.md, Fuzzing).
type Fuzzer struct {
	target  FuzzTarget
	rt      *memTransport
	adapter provider.Adapter
}

// NewFuzzer returns a Fuzzer for target.
func NewFuzzer(tb testing.TB, target FuzzTarget) *Fuzzer {
	rt := &memTransport{status: http.StatusOK}
	return &Fuzzer{target: target, rt: rt, adapter: target.New(tb, fuzzBase, &http.Client{Transport: rt})}
}

// Call answers one call of the adapter, streamed or not, with status,
// contentType and body, and checks what every fuzz target of an adapter
// checks: no panic (the fuzzer reports one), exactly one request sent (the
// SDK's retries are off), a failure is a *provider.Error with a kind that
// does not leak the secret, a success carries a result, and every response
// body is closed once the call (and its stream) is done.
func (z *Fuzzer) Call(t *testing.T, stream bool, status int, contentType string, body []byte) (*provider.Result, error) {
	t.Helper()
	trips := z.rt.respond(status, contentType, body)
	// A call that neither ends nor heeds its context (a parser that loops)
	// crashes the process before the fuzzer's own 10 s limit, with the
	// input and every goroutine's stack, so that the fuzzer keeps the input.
	watchdog := time.AfterFunc(8*time.Second, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("call still running after 8 s on body %q:\n%s", body, buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &provider.Request{Prompt: "hi", Tools: []provider.ToolDef{weatherTool}}
	var res *provider.Result
	var err error
	if stream {
		var s provider.Stream
		if s, err = z.adapter.Stream(ctx, req); err == nil {
			res, err = provider.Collect(s)
			if cerr := s.Close(); cerr != nil {
				t.Errorf("Close = %v", cerr)
			}
		}
	} else {
		res, err = z.adapter.Invoke(ctx, req)
	}
	if err != nil {
		CheckFailure(t, err, z.target.Secret)
	} else if res == nil {
		t.Fatal("no result and no error")
	}
	if n, open := z.rt.counts(); n-trips != 1 {
		t.Errorf("%d requests for one call; want 1", n-trips)
	} else if open != 0 {
		t.Errorf("%d response bodies left open after the call", open)
	}
	return res, err
}

// memTransport answers every request with the response set last by
// respond. It counts the requests and the response bodies not closed yet.
type memTransport struct {
	mu          sync.Mutex
	status      int
	contentType string
	body        []byte
	trips, open int
}

// respond sets the response to every following request and returns the
// number of requests so far.
func (m *memTransport) respond(status int, contentType string, body []byte) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status, m.contentType, m.body = status, contentType, bytes.Clone(body)
	return m.trips
}

func (m *memTransport) counts() (trips, open int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trips, m.open
}

func (m *memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil { // a RoundTripper reads and closes the request body
		_, err := io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trips++
	m.open++
	h := http.Header{}
	h.Set("Content-Type", m.contentType)
	h.Set("Content-Length", strconv.Itoa(len(m.body)))
	return &http.Response{
		Status:     strconv.Itoa(m.status) + " " + http.StatusText(m.status),
		StatusCode: m.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(len(m.body)), Request: req,
		Body: &memBody{r: bytes.NewReader(m.body), t: m},
	}, nil
}

// memBody is a response body of a memTransport.
type memBody struct {
	r      *bytes.Reader
	t      *memTransport
	closed bool
}

func (b *memBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("http: read on closed response body")
	}
	return b.r.Read(p)
}

func (b *memBody) Close() error {
	if !b.closed {
		b.closed = true
		b.t.mu.Lock()
		b.t.open--
		b.t.mu.Unlock()
	}
	return nil
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

// SeedFake is what [FakeBodies] needs of an adapter's wire-faithful fake
// answering R replies.
type SeedFake[R any] interface {
	URL() string
	Enqueue(replies ...R)
	Close()
}

// FakeBodies returns the body fake sends for each of replies, streamed or
// not, to target's adapter, for seeding a fuzz corpus with what a fake
// really sends. It closes fake.
func FakeBodies[R any](tb testing.TB, target FuzzTarget, fake SeedFake[R], stream bool, replies ...R) [][]byte {
	defer fake.Close()
	hc, bodies := Recording()
	a := target.New(tb, fake.URL(), hc)
	for _, r := range replies {
		fake.Enqueue(r)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if stream {
			if s, err := a.Stream(ctx, &provider.Request{Prompt: "hi"}); err == nil {
				provider.Collect(s)
				s.Close()
			}
		} else {
			a.Invoke(ctx, &provider.Request{Prompt: "hi"})
		}
		cancel()
	}
	return bodies()
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

// AddSeed adds values (the arguments of one input) to f's seed corpus and
// hands them to [WriteSeeds] under name.
func AddSeed(f *testing.F, name string, values ...any) {
	f.Add(values...)
	WriteSeeds(f, name, values...)
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
