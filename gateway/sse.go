package gateway

import (
	"errors"
	"io"
	"net/http"

	"github.com/cortexbuild/cortexbuild/provider"
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

// blocks is a protocol's writer of a call's stream as separate content
// blocks (Messages) or output items (Responses): reasoning, text,
// tool-call deltas, and the end with the result.
type blocks interface {
	reasoning(text string, meta provider.Metadata) error
	text(string) error
	tool(*provider.ToolCallDelta) error
	finish(*provider.Result) error
}

// relay writes s to b until its final chunk. A failure of the call (a
// stream cut before its final chunk is one), or tool calls interleaved in
// a way the protocol cannot say, goes to fail; an error writing means the
// client is gone, and ends it quietly.
func relay(s provider.Stream, b blocks, fail func(error)) {
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			err = &provider.Error{Kind: provider.KindNetwork, Diagnostic: provider.Diagnostic{Message: "the stream ended before its final chunk"}}
		}
		if err != nil {
			fail(err)
			return
		}
		if c.Reasoning != "" || len(c.ReasoningMeta) > 0 {
			if b.reasoning(c.Reasoning, c.ReasoningMeta) != nil {
				return
			}
		}
		if c.Text != "" {
			if b.text(c.Text) != nil {
				return
			}
		}
		if d := c.ToolCall; d != nil {
			if err := b.tool(d); err != nil {
				if errors.Is(err, errInterleaved) {
					fail(err)
				}
				return
			}
		}
		if c.Final {
			res := c.Result
			if res == nil {
				res = &provider.Result{}
			}
			_ = b.finish(res)
			return
		}
	}
}
