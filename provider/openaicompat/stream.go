package openaicompat

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// Stream starts req and returns its chunks. A failed HTTP status surfaces
// on the first Recv. A request relayed in a protocol the adapter speaks
// ([Adapter.SpeaksNative]) goes upstream as it came, and each of its
// events comes back as a chunk with its bytes in Raw.
func (a *Adapter) Stream(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	if provider.SpeaksNative(a, req, a.base.Model(req)) {
		return a.streamNative(ctx, req)
	}
	at, err := a.begin(ctx, req, true)
	if err != nil {
		return nil, err
	}
	s := &stream{a: a, req: req, at: at, start: a.base.Now(), byIndex: map[int64]int{}}
	// The SDK sends the body and returns the response unread; its SSE
	// decoder reads the events, each decoded into a fixed chunk.
	var resp *http.Response
	err = a.client.Post(at.ctx, chatPath, at.body, &resp, at.opts...)
	s.events = ssestream.NewStream[wireChunk](ssestream.NewDecoder(resp), err)
	if at.raw != nil && at.raw.StatusCode < 400 {
		a.observe(at.raw.Header, 0)
	}
	if err == nil {
		// A reasoning model bills reasoning that Chat Completions never
		// streams.
		s.recv.Start(a.ModelCapabilities(at.model).Has(provider.CapReasoning))
	}
	return s, nil
}

// chunkEvents is a stream of decoded chunks.
type chunkEvents interface {
	Next() bool
	Current() wireChunk
	Err() error
	Close() error
}

type call struct {
	id, name string
	args     strings.Builder
}

type stream struct {
	a   *Adapter
	req *provider.Request
	at  *attempt
	// events yields the answer's chunks (an *ssestream.Stream).
	events chunkEvents
	start  time.Time

	text      strings.Builder
	calls     []*call
	byIndex   map[int64]int // wire index -> position in calls of the call now open there
	finish    string
	respModel string
	tier      string // service_tier the chunks report (read on a relay only)
	usage     *provider.Usage
	recv      adapterkit.Received // what an early end bills
	pending   []provider.Chunk
	started   bool // the first chunk went out
	done      bool
	err       error
	closeOnce sync.Once
}

func (s *stream) raw() *http.Response { return s.at.raw }

// Recv returns the next chunk, the final chunk with the whole result, then
// io.EOF.
func (s *stream) Recv() (provider.Chunk, error) {
	for {
		// A caller that gave up is told so, even when the rest of the
		// answer is already here.
		if err := s.at.ctx.Err(); err != nil && s.err == nil && !s.done {
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, nil, s.at.model))
		}
		if len(s.pending) > 0 {
			c := s.pending[0]
			s.pending = s.pending[1:]
			if !s.started {
				// The model answering; usage comes only at the end.
				s.started, c.Model = true, s.respModel
			}
			return c, nil
		}
		if s.err != nil {
			return provider.Chunk{}, s.err
		}
		if s.done {
			return provider.Chunk{}, io.EOF
		}
		if s.events.Next() {
			c := chunk(s.events.Current())
			s.handle(&c)
			continue
		}
		if err := s.events.Err(); err != nil {
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, s.raw(), s.at.model))
		}
		if s.at.ctx.Err() != nil {
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, s.at.ctx.Err(), nil, s.at.model))
		}
		// The stream ended. Without a finish reason it was cut short.
		if s.finish == "" {
			return provider.Chunk{}, s.fail(s.a.base.Truncated(s.at.model, "a finish_reason", s.requestID()))
		}
		res, err := s.result()
		if err != nil {
			return provider.Chunk{}, s.fail(err)
		}
		s.done = true
		s.Close()
		return provider.Chunk{Final: true, Result: res}, nil
	}
}

func (s *stream) requestID() string {
	if r := s.raw(); r != nil {
		return r.Header.Get("x-request-id")
	}
	return ""
}

// handle turns one wire chunk into zero or more chunks. Tool-call
// fragments are keyed by index and id: a fragment with a new id at an index
// in use starts a new call (some servers reuse index 0 for every call).
func (s *stream) handle(c *chunk) {
	if c.Model != "" {
		s.respModel = c.Model
	}
	u, reported := c.Usage.usage()
	if reported {
		s.usage = &u
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // one answer per request; n > 1 is never asked for
		}
		d := ch.Delta
		s.recv.Output(d.Content)
		if d.Content != "" {
			s.text.WriteString(d.Content)
			s.pending = append(s.pending, provider.Chunk{Text: d.Content})
		}
		for _, tc := range d.ToolCalls {
			pos, open := s.byIndex[tc.Index]
			if !open || (tc.ID != "" && s.calls[pos].id != "" && tc.ID != s.calls[pos].id) {
				pos = len(s.calls)
				s.calls = append(s.calls, &call{})
				s.byIndex[tc.Index] = pos
			}
			cl := s.calls[pos]
			delta := &provider.ToolCallDelta{Index: pos, Arguments: tc.Function.Arguments}
			if tc.ID != "" && cl.id == "" {
				cl.id, delta.ID = tc.ID, tc.ID
			}
			if tc.Function.Name != "" && cl.name == "" {
				cl.name, delta.Name = tc.Function.Name, tc.Function.Name
			}
			cl.args.WriteString(tc.Function.Arguments)
			s.recv.Output(tc.Function.Name + tc.Function.Arguments)
			s.pending = append(s.pending, provider.Chunk{ToolCall: delta})
		}
		if ch.FinishReason != "" {
			s.finish = ch.FinishReason
		}
	}
	if reported {
		// The usage chunk follows the finish reason: its counts are final.
		s.recv.Report(u, s.finish != "")
	}
}

func (s *stream) result() (*provider.Result, error) {
	res := &provider.Result{Provider: s.a.base.Name, Model: s.respModel, RawStopReason: s.finish, ToolCalls: []provider.ToolCall{}, RequestID: s.requestID()}
	if res.Model == "" {
		res.Model = s.at.model
	}
	res.Content = s.text.String()
	if res.Content != "" {
		res.Parts = append(res.Parts, provider.Part{Type: provider.PartText, Text: res.Content})
	}
	for _, c := range s.calls {
		args, err := normaliseArguments(c.args.String())
		if err != nil {
			return nil, s.a.protocolError(s.at.model, s.raw(), "tool call "+c.id+": "+err.Error())
		}
		res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	for i := range res.ToolCalls {
		res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall, ToolCall: &res.ToolCalls[i]})
	}
	res.StopReason = stopReason(s.finish, len(res.ToolCalls) > 0)
	if s.usage != nil {
		res.Usage = *s.usage
	} else {
		res.Usage = estimateUsage(s.req, res)
	}
	res.Usage.ServiceTier = serviceTier(s.tier)
	var priced bool
	res.Cost, priced = s.a.cost(res.Model, s.at.model, res.Usage)
	res.Unpriced = !priced
	res.Latency = s.a.base.Now().Sub(s.start)
	return res, nil
}

// fail ends the stream with err, attaching what the provider can bill for
// it and releasing the connection.
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
	ns, id := s.a.profile.priceRef(s.a.baseURL, s.at.model)
	if u := s.a.base.Billed(pe.Kind, &s.recv, s.req, ns, id, Images(ns, id)); u != nil {
		var priced bool
		pe.Usage = u
		pe.Cost, priced = s.a.cost(s.respModel, s.at.model, *u)
		pe.Unpriced = !priced
	}
	if pe.Diagnostic.RequestID == "" {
		pe.Diagnostic.RequestID = s.requestID()
	}
}

// Close releases the connection; it is safe to call more than once.
func (s *stream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		err = s.events.Close()
		s.at.cancel()
		if s.err == nil && !s.done {
			s.pending = nil
			pe := s.a.base.Canceled(s.at.model)
			s.bill(pe)
			s.err = pe
		}
	})
	return err
}
