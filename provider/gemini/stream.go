package gemini

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Stream starts req and returns its chunks. Each server chunk's text is a
// delta; function calls arrive whole. The stream has no end marker: it ends
// when the server closes it, and an answer without a finishReason was cut
// short.
func (a *Adapter) Stream(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	at, err := a.begin(ctx, req)
	if err != nil {
		return nil, err
	}
	next, stop := iter.Pull2(a.client.stream(at.ctx, at.model, at.body))
	return &stream{a: a, at: at, next: next, stop: stop, start: a.base.Now()}, nil
}

type stream struct {
	a     *Adapter
	at    *attempt
	next  func() (*generateResponse, error, bool)
	stop  func()
	start time.Time

	acc       accumulator
	pending   []provider.Chunk
	started   bool // the first chunk went out
	done      bool
	err       error
	closeOnce sync.Once
}

// Recv returns the next chunk, the final chunk with the whole result, then
// io.EOF.
func (s *stream) Recv() (provider.Chunk, error) {
	for {
		// A caller that gave up is told so, even when the rest of the
		// answer is already here.
		if err := s.at.ctx.Err(); err != nil && s.err == nil && !s.done {
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, s.at.model))
		}
		if len(s.pending) > 0 {
			c := s.pending[0]
			s.pending = s.pending[1:]
			return s.first(c), nil
		}
		if s.err != nil {
			return provider.Chunk{}, s.err
		}
		if s.done {
			return provider.Chunk{}, io.EOF
		}
		resp, err, ok := s.next()
		if !ok {
			return s.end()
		}
		var mal *errMalformed
		if errors.As(err, &mal) {
			return provider.Chunk{}, s.fail(s.a.base.Protocol(s.at.model, s.acc.requestID, mal.Error()))
		}
		if err != nil {
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, s.at.model))
		}
		textBefore, callsBefore, partsBefore := s.acc.text.Len(), len(s.acc.calls), len(s.acc.parts)
		if err := s.acc.add(resp); err != nil {
			return provider.Chunk{}, s.fail(s.a.blocked(s.at.model, err))
		}
		for _, p := range s.acc.parts[partsBefore:] {
			if p.Type == provider.PartReasoning && (p.Text != "" || len(p.Meta) > 0) {
				s.pending = append(s.pending, provider.Chunk{Reasoning: p.Text, ReasoningMeta: p.Meta})
			}
		}
		if t := s.acc.text.String()[textBefore:]; t != "" {
			s.pending = append(s.pending, provider.Chunk{Text: t})
		}
		for i := callsBefore; i < len(s.acc.calls); i++ {
			c := s.acc.calls[i]
			s.pending = append(s.pending, provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}})
		}
	}
}

// first adds to the stream's first chunk the model answering and the
// usage reported so far.
func (s *stream) first(c provider.Chunk) provider.Chunk {
	if !s.started {
		s.started = true
		c.Model = s.acc.model
		if s.acc.usage != nil {
			u := usageOf(s.acc.usage)
			c.Usage = &u
		}
	}
	return c
}

// end finishes a stream the server closed: complete with a finishReason,
// truncated without one.
func (s *stream) end() (provider.Chunk, error) {
	if s.at.ctx.Err() != nil {
		return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, s.at.ctx.Err(), s.at.model))
	}
	if s.acc.finish == "" {
		return provider.Chunk{}, s.fail(s.a.base.Truncated(s.at.model, "a finishReason", s.acc.requestID))
	}
	res, err := s.a.result(&s.acc, s.at.model)
	if err != nil {
		return provider.Chunk{}, s.fail(err)
	}
	res.Latency = s.a.base.Now().Sub(s.start)
	s.done = true
	s.Close()
	return provider.Chunk{Final: true, Result: res}, nil
}

// fail ends the stream with err, attaching the usage reported so far.
func (s *stream) fail(err error) error {
	if pe, ok := err.(*provider.Error); ok && s.acc.usage != nil {
		if res, rerr := s.a.result(&s.acc, s.at.model); rerr == nil {
			u := res.Usage
			pe.Usage, pe.Cost, pe.Unpriced = &u, res.Cost, res.Unpriced
		}
	}
	s.err = err
	s.Close()
	return err
}

// Close stops the stream and releases the connection; it is safe to call
// more than once.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.at.cancel()
		if s.err == nil && !s.done {
			s.pending = nil
			s.err = s.a.base.Canceled(s.at.model)
		}
	})
	return nil
}
