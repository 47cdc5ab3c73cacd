package gemini

import (
	"context"
	"errors"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
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
	s := &stream{a: a, req: req, at: at, start: a.base.Now()}
	// A thinking model bills thinking it does not stream, or streams only
	// a summary of.
	opened := func() { s.recv.Start(thinks(at.model)) }
	s.next, s.stop = iter.Pull2(a.client.stream(at.ctx, at.model, at.body, opened))
	return s, nil
}

// thinks reports whether model may think before it answers: every model
// but those named as earlier than Gemini 2.5.
func thinks(model string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(model, "models/"), "gemini-")
	version, _, _ := strings.Cut(rest, "-")
	major, minor, _ := strings.Cut(version, ".")
	ma, err := strconv.Atoi(major)
	mi, _ := strconv.Atoi(minor)
	return !ok || err != nil || ma > 2 || ma == 2 && mi >= 5
}

type stream struct {
	a     *Adapter
	req   *provider.Request
	at    *attempt
	next  func() (*generateResponse, error, bool)
	stop  func()
	start time.Time

	acc       accumulator
	recv      adapterkit.Received // what an early end bills
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
		err = s.acc.add(resp)
		if u := s.acc.usage; u != nil {
			s.recv.Report(usageOf(u), s.acc.finish != "")
		}
		if err != nil {
			return provider.Chunk{}, s.fail(s.a.blocked(s.at.model, err))
		}
		for _, p := range s.acc.parts[partsBefore:] {
			if p.Type == provider.PartReasoning && (p.Text != "" || len(p.Meta) > 0) {
				s.recv.Output(p.Text)
				s.pending = append(s.pending, provider.Chunk{Reasoning: p.Text, ReasoningMeta: p.Meta})
			}
		}
		if t := s.acc.text.String()[textBefore:]; t != "" {
			s.recv.Output(t)
			s.pending = append(s.pending, provider.Chunk{Text: t})
		}
		for i := callsBefore; i < len(s.acc.calls); i++ {
			c := s.acc.calls[i]
			s.recv.Output(c.Name + string(c.Arguments))
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

// fail ends the stream with err, attaching what the provider can bill for
// it.
func (s *stream) fail(err error) error {
	if pe, ok := err.(*provider.Error); ok {
		s.bill(pe)
	}
	s.err = err
	s.Close()
	return err
}

// bill attaches to pe, the error that ended the stream, the usage the
// provider can bill for it ([adapterkit.Base.Billed]) and its price.
func (s *stream) bill(pe *provider.Error) {
	if u := s.a.base.Billed(pe.Kind, &s.recv, s.req, Namespace, s.at.model, Images(s.at.model)); u != nil {
		var priced bool
		pe.Usage = u
		pe.Cost, priced = s.a.base.Price(*u, adapterkit.PriceRef{NS: Namespace, Model: s.acc.model}, adapterkit.PriceRef{NS: Namespace, Model: s.at.model})
		pe.Unpriced = !priced
	}
}

// Close stops the stream and releases the connection; it is safe to call
// more than once.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.at.cancel()
		if s.err == nil && !s.done {
			s.pending = nil
			pe := s.a.base.Canceled(s.at.model)
			s.bill(pe)
			s.err = pe
		}
	})
	return nil
}
