package adapterkit_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// writeCounter counts the writes made on the connections it dials.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// TestSendWritesASmallBodyWithTheHead: a body Send makes, in pieces or
// not, reaches the server whole and announced by its length; one of up to
// 64 KiB goes with the request's head in one write, as a body in one slice
// would, where a reader net/http cannot tell from a stream costs a write
// of the head before it.
func TestSendWritesASmallBodyWithTheHead(t *testing.T) {
	var got []byte
	var length int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		length = r.ContentLength
	}))
	defer srv.Close()
	var writes atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return writeCounter{c, &writes}, err
	}}
	defer tr.CloseIdleConnections()
	big := bytes.Repeat([]byte("x"), 100<<10)
	for _, tc := range []struct {
		name   string
		body   adapterkit.Body
		writes int64 // 0: not checked
	}{
		{"pieces", adapterkit.Body{[]byte(`{"model":`), []byte(`"m"`), nil, []byte(`,"x":1}`)}, 1},
		{"one slice", adapterkit.Body{[]byte(`{"model":"m"}`)}, 1},
		{"big pieces", adapterkit.Body{big[:50<<10], []byte(`"m"`), big[50<<10:]}, 0},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		tc.body.Send(req)
		writes.Store(0)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if want := tc.body.Bytes(); !bytes.Equal(got, want) || length != int64(len(want)) {
			t.Errorf("%s: the server got %d bytes announced as %d; want the body's %d", tc.name, len(got), length, len(want))
		}
		if n := writes.Load(); tc.writes > 0 && n != tc.writes {
			t.Errorf("%s: the request took %d writes; want %d", tc.name, n, tc.writes)
		}
		again, _ := req.GetBody()
		if b, _ := io.ReadAll(again); !bytes.Equal(b, tc.body.Bytes()) {
			t.Errorf("%s: GetBody gives %d bytes; want the body again", tc.name, len(b))
		}
	}
}
