package fakekit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

type rec struct {
	Path string
	Body []byte
}

func cloneRec(r rec) rec {
	r.Body = slices.Clone(r.Body)
	return r
}

var spec = Spec[string, rec]{Name: "fakekit-test", Clone: cloneRec}

func newCore() *Core[string, string, rec] { return New[string](spec) }

func TestQueuesAreFIFOPerRoute(t *testing.T) {
	c := newCore()
	c.EnqueueRoute("a", "a1", "a2")
	c.EnqueueRoute("b", "b1")
	c.EnqueueRoute("a", "a3")
	if got := c.Pending("a"); got != 3 {
		t.Fatalf("Pending(a) = %d, want 3", got)
	}
	if got := c.Pending("b"); got != 1 {
		t.Fatalf("Pending(b) = %d, want 1", got)
	}
	for _, want := range []string{"a1", "a2", "a3"} {
		got, ok := c.Next("a")
		if !ok || got != want {
			t.Fatalf("Next(a) = %q, %v; want %q, true", got, ok, want)
		}
	}
	if got, ok := c.Next("a"); ok || got != "" {
		t.Fatalf("Next(a) on empty queue = %q, %v; want zero, false", got, ok)
	}
	if got, ok := c.Next("unknown"); ok || got != "" {
		t.Fatalf("Next(unknown) = %q, %v; want zero, false", got, ok)
	}
	if got := c.Pending("b"); got != 1 {
		t.Fatalf("Pending(b) after draining a = %d, want 1", got)
	}
}

type route string

func TestEnqueueValidates(t *testing.T) {
	c := New[route](Spec[int, rec]{
		Name: "fakekit-test",
		Validate: func(r *int) error {
			if *r < 0 {
				return errors.New("negative")
			}
			return nil
		},
	})
	defer func() {
		got := recover()
		if got != "fakekit-test: Enqueue: reply 1: negative" {
			t.Fatalf("panic = %v", got)
		}
		if n := c.Pending("r"); n != 0 {
			t.Fatalf("Pending after rejected batch = %d, want 0", n)
		}
	}()
	c.EnqueueRoute("r", 1, -1, 2)
	t.Fatal("EnqueueRoute accepted an invalid reply")
}

func TestRandIsReproducible(t *testing.T) {
	seed := uint64(42)
	a, b := NewRand(&seed), NewRand(&seed)
	for range 3 {
		if x, y := a.String("abc", 8), b.String("abc", 8); x != y || len(x) != 8 {
			t.Fatalf("String: %q vs %q", x, y)
		}
		if x, y := a.Bytes(4), b.Bytes(4); !slices.Equal(x, y) || len(x) != 4 {
			t.Fatalf("Bytes: %v vs %v", x, y)
		}
		if x, y := a.IntN(10), b.IntN(10); x != y || x < 0 || x >= 10 {
			t.Fatalf("IntN: %d vs %d", x, y)
		}
	}
	if NewRand(nil).IntN(1) != 0 {
		t.Fatal("IntN(1) != 0")
	}
}

func TestRequestsAreCopies(t *testing.T) {
	c := newCore()
	body := []byte("hello")
	c.Record(rec{Path: "/x", Body: body})
	got := c.Requests()
	if len(got) != 1 || got[0].Path != "/x" || string(got[0].Body) != "hello" {
		t.Fatalf("Requests() = %+v", got)
	}
	got[0].Body[0] = 'J'
	if again := c.Requests(); string(again[0].Body) != "hello" {
		t.Fatalf("Requests() aliases the recorded body: %q", again[0].Body)
	}

	// Without a clone function the values are returned as stored.
	n := New[string, string, int](Spec[string, int]{})
	n.Record(7)
	if got := n.Requests(); !slices.Equal(got, []int{7}) {
		t.Fatalf("Requests() = %v, want [7]", got)
	}
}

func TestWaitRequestsWakesOnRecord(t *testing.T) {
	c := newCore()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.WaitRequests(ctx, 2) }()
	c.Record(rec{Path: "/1"})
	c.Record(rec{Path: "/2"})
	if err := <-errc; err != nil {
		t.Fatalf("WaitRequests: %v", err)
	}
	// Already satisfied: returns at once, even with a done context.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := c.WaitRequests(done, 2); err != nil {
		t.Fatalf("WaitRequests(satisfied) = %v, want nil", err)
	}
}

func TestWaitRequestsHonoursContext(t *testing.T) {
	c := newCore()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.WaitRequests(ctx, 1) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRequests after cancel = %v, want context.Canceled", err)
	}
}

func TestCloseClosesDoneAndIsIdempotent(t *testing.T) {
	c := newCore()
	select {
	case <-c.Done():
		t.Fatal("Done closed before Close")
	default:
	}
	c.Close()
	c.Close()
	<-c.Done()
	if c.URL() != "" || c.Client() != nil {
		t.Fatalf("unstarted core: URL() = %q, Client() = %v; want \"\", nil", c.URL(), c.Client())
	}
}

func TestConnectionCountingOnLoopback(t *testing.T) {
	c := newCore()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	c.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Record(rec{Path: r.URL.Path})
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-c.Done():
			}
		}
		io.WriteString(w, "ok")
	}))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if c.URL() == "" || c.Client() == nil {
		t.Fatal("started core has no URL or Client")
	}
	get := func(path string) error {
		resp, err := c.Client().Get(c.URL() + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}

	// One finished request leaves one idle keep-alive connection.
	if err := get("/a"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitOpenConns(ctx, 1); err != nil {
		t.Fatalf("WaitOpenConns(1): %v (open %d)", err, c.OpenConns())
	}
	if err := c.WaitActiveConns(ctx, 0); err != nil {
		t.Fatalf("WaitActiveConns(0): %v (active %d)", err, c.ActiveConns())
	}

	// A held request is active until released.
	errc := make(chan error, 1)
	go func() { errc <- get("/hold") }()
	<-entered
	if err := c.WaitActiveConns(ctx, 1); err != nil {
		t.Fatalf("WaitActiveConns(1): %v (active %d)", err, c.ActiveConns())
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := c.WaitActiveConns(ctx, 0); err != nil {
		t.Fatalf("WaitActiveConns(0) after release: %v", err)
	}
	if err := c.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("WaitRequests(2): %v", err)
	}

	// Closing the client's idle connections closes them on the server.
	c.Client().CloseIdleConnections()
	if err := c.WaitOpenConns(ctx, 0); err != nil {
		t.Fatalf("WaitOpenConns(0): %v (open %d)", err, c.OpenConns())
	}
}

func TestCloseReleasesHeldHandlers(t *testing.T) {
	c := newCore()
	entered := make(chan struct{})
	c.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-c.Done()
		panic(http.ErrAbortHandler)
	}))
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Client().Get(c.URL())
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	c.Close() // must not hang on the held handler
	if err := <-errc; err == nil {
		t.Fatal("held request succeeded; want an aborted connection")
	}
}

func TestPublicForwards(t *testing.T) {
	c := newCore()
	p := PublicOf(c)
	p.EnqueueRoute("q", "r1")
	if p.Pending("q") != 1 {
		t.Fatal("Public.EnqueueRoute did not reach the queue")
	}
	c.Record(rec{Path: "/p"})
	if got := p.Requests(); len(got) != 1 || got[0].Path != "/p" {
		t.Fatalf("Public.Requests() = %+v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if p.OpenConns() != 0 || p.ActiveConns() != 0 {
		t.Fatal("unstarted core reports connections")
	}
	if err := p.WaitOpenConns(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitActiveConns(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if p.URL() != "" || p.Client() != nil {
		t.Fatal("unstarted core has a URL or Client")
	}
	p.Close()
	<-c.Done()
}
