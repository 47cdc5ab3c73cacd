package adapterkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

// closeRecorder is a body that records its Close.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestLimitedBody(t *testing.T) {
	const max = 100
	tooLarge := &TooLargeError{Provider: "openai", Max: max}
	for _, size := range []int{0, 1, max - 1, max, max + 1, 3 * max} {
		for _, chunk := range []int{1, 7, max, 4096} {
			t.Run(fmt.Sprintf("size-%d-read-%d", size, chunk), func(t *testing.T) {
				rc := &closeRecorder{Reader: bytes.NewReader(bytes.Repeat([]byte("x"), size))}
				l := &limitedBody{rc: rc, left: max, err: tooLarge}
				var got int
				var err error
				buf := make([]byte, chunk)
				for err == nil {
					var n int
					n, err = l.Read(buf)
					got += n
				}
				if size <= max {
					if err != io.EOF || got != size {
						t.Errorf("read %d bytes, then %v; want all %d, then EOF", got, err, size)
					}
					if rc.closed {
						t.Error("a body within the cap was closed by the limiter")
					}
					return
				}
				if err != error(tooLarge) || got != max {
					t.Errorf("read %d bytes, then %v; want %d, then %v", got, err, max, tooLarge)
				}
				if !rc.closed {
					t.Error("the body past the cap was not closed")
				}
				if n, err := l.Read(buf); n != 0 || err != error(tooLarge) {
					t.Errorf("Read after the cap = %d, %v", n, err)
				}
			})
		}
	}
}

func TestHTTPClientLimitsBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("stream") != "" {
			// Many small writes: a stream whose events are each small and
			// whose total is not.
			for range n / 10 {
				io.WriteString(w, "data: 12\n")
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Write(bytes.Repeat([]byte("x"), n))
	}))
	defer srv.Close()

	redirected := false
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { redirected = true; return nil }}
	b := NewBase(provider.Settings{Name: "openai", MaxResponseBytes: 4096}, "openai_compatible", nil, "")
	c := b.HTTPClient(hc)
	if hc.Transport != nil {
		t.Error("HTTPClient changed the client it was given")
	}
	if c.CheckRedirect == nil {
		t.Error("the redirect policy was dropped")
	} else if c.CheckRedirect(nil, nil); !redirected {
		t.Error("the redirect policy is not the given client's")
	}
	get := func(query string) (int, error) {
		resp, err := c.Get(srv.URL + "/?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		return len(data), err
	}
	for _, q := range []string{"n=4096", "n=4000&stream=1"} {
		if n, err := get(q); err != nil {
			t.Errorf("%s: %d bytes, %v; want no error within the cap", q, n, err)
		}
	}
	for _, q := range []string{"n=4097", "n=1000000", "n=5000&stream=1"} {
		n, err := get(q)
		var tl *TooLargeError
		if !errors.As(err, &tl) || n != 4096 {
			t.Fatalf("%s: %d bytes, %v; want 4096 bytes, then a *TooLargeError", q, n, err)
		}
		if want := "response from openai exceeded max_response_bytes (4096)"; err.Error() != want {
			t.Errorf("error %q; want %q", err, want)
		}
		// As an SDK passes it on.
		pe, ok := b.ClassifyLocal(context.Background(), fmt.Errorf("error reading response body: %w", err), "gpt-x")
		if !ok || pe.Kind != provider.KindServer || pe.Provider != "openai" || !strings.Contains(pe.Diagnostic.Message, "max_response_bytes (4096)") {
			t.Errorf("classified as %+v, %v; want a server error naming the cap", pe, ok)
		}
	}
}

func TestDefaultMaxResponseBytes(t *testing.T) {
	for _, v := range []int64{0, -1} {
		if b := NewBase(provider.Settings{MaxResponseBytes: v}, "x", nil, ""); b.MaxResponseBytes != DefaultMaxResponseBytes {
			t.Errorf("MaxResponseBytes %d gives a cap of %d; want the default %d", v, b.MaxResponseBytes, DefaultMaxResponseBytes)
		}
	}
}
