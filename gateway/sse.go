package gateway

import (
	"net/http"
)

// sse writes server-sent events, flushing each one.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// newSSE starts a 200 event stream.
func newSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// data writes a data-only event (Chat Completions framing).
func (s *sse) data(payload []byte) error {
	buf := make([]byte, 0, len(payload)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	return s.write(buf)
}

// event writes a named event (Messages framing).
func (s *sse) event(name string, payload []byte) error {
	buf := make([]byte, 0, len(name)+len(payload)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, payload...)
	buf = append(buf, "\n\n"...)
	return s.write(buf)
}

func (s *sse) write(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
