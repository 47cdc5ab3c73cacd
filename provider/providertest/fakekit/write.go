package fakekit

import (
	"fmt"
	"maps"
	"net/http"
)

// WithHeader returns a copy of headers with name set to value; headers
// itself is not modified. It backs the fakes' Reply.WithHeader.
func WithHeader(headers map[string]string, name, value string) map[string]string {
	h := make(map[string]string, len(headers)+1)
	maps.Copy(h, headers)
	h[name] = value
	return h
}

// Hold waits for a reply's gate. It returns true at once for a nil gate or
// when gate is closed (or receives), and false when the client went away
// (the handler should write nothing). When the Core is closed meanwhile it
// aborts the connection (panics with http.ErrAbortHandler).
func (c *Core[Route, Reply, Recorded]) Hold(r *http.Request, gate <-chan struct{}) bool {
	if gate == nil {
		return true
	}
	select {
	case <-gate:
		return true
	case <-r.Context().Done():
		return false
	case <-c.Done():
		panic(http.ErrAbortHandler)
	}
}

// WriteBody writes body after the headers the caller has set on w. cut in
// (0, len(body)) writes only that many bytes, flushes them and then drops
// the connection (panics with http.ErrAbortHandler).
func WriteBody(w http.ResponseWriter, status int, body []byte, cut int) {
	w.WriteHeader(status)
	if cut > 0 && cut < len(body) {
		_, _ = w.Write(body[:cut])
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
	_, _ = w.Write(body)
}

// StreamWriter writes a streamed response piece by piece, flushing after
// each, so that a client sees every event as soon as it is written. The
// framing (event names, separators) is the caller's.
type StreamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// NewStreamWriter returns a StreamWriter on w. It writes nothing.
func NewStreamWriter(w http.ResponseWriter) *StreamWriter {
	return &StreamWriter{w: w, rc: http.NewResponseController(w)}
}

// StartStream writes status with the headers the caller has set on w and
// flushes them; the error is that of the flush (the client is gone or w
// cannot flush).
func StartStream(w http.ResponseWriter, status int) (*StreamWriter, error) {
	sw := NewStreamWriter(w)
	w.WriteHeader(status)
	return sw, sw.Flush()
}

// Printf formats one piece of the stream, writes it and flushes it.
func (sw *StreamWriter) Printf(format string, args ...any) error {
	if _, err := fmt.Fprintf(sw.w, format, args...); err != nil {
		return err
	}
	return sw.Flush()
}

// Flush sends what has been written so far.
func (sw *StreamWriter) Flush() error { return sw.rc.Flush() }

// Cut flushes what has been written and then drops the connection
// abruptly (panics with http.ErrAbortHandler): the client sees a stream
// that ends without its terminator.
func (sw *StreamWriter) Cut() {
	_ = sw.Flush()
	panic(http.ErrAbortHandler)
}
