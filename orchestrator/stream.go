package orchestrator

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/cortexbuild/cortexbuild/provider"
)

type openedStream struct {
	s     provider.Stream
	first provider.Chunk
}

// Stream routes c like Invoke, but streams the answer. Retries and failover
// happen only until the first chunk arrives; after that a failure ends the
// stream with the error, and the last attempt records the partial usage.
func (o *Orchestrator) Stream(ctx context.Context, c Call) (*Stream, error) {
	if o.s.Observer != nil {
		return o.streamObserved(ctx, c)
	}
	return o.stream(ctx, c)
}

func (o *Orchestrator) stream(ctx context.Context, c Call) (*Stream, error) {
	if err := o.loadGate(ctx, &c); err != nil {
		return nil, err
	}
	h, err := o.reserve(ctx, &c)
	if err != nil {
		return nil, err
	}
	v, attempts, trace, err := o.run(ctx, c, func(ctx context.Context, ep *Endpoint, req *provider.Request) (any, error) {
		s, err := ep.Adapter.Stream(ctx, req)
		if err != nil {
			return nil, err
		}
		first, err := s.Recv()
		if err != nil {
			s.Close()
			return nil, err
		}
		return &openedStream{s: s, first: first}, nil
	})
	if err != nil {
		o.settle(ctx, h, &c, attempts, false)
		return nil, err
	}
	os := v.(*openedStream)
	st := &Stream{inner: os.s, first: &os.first, attempts: attempts, trace: trace, id: h.id, estimate: h.estimate, model: os.first.Model, started: os.first.Usage, reply: os.first.Reply}
	if os.first.Final && os.first.Result != nil {
		st.model = os.first.Result.Model
	}
	st.settle = func(ok bool, as []Attempt, res *provider.Result) {
		ctx := context.WithoutCancel(ctx)
		o.settle(ctx, h, &c, as, ok)
		if ok {
			chargedResult(res, as)
			st.review = o.recordTask(ctx, &c, h.id, res, as)
		}
	}
	return st, nil
}

// Stream is an answer in progress through the orchestrator. It implements
// provider.Stream.
type Stream struct {
	inner provider.Stream
	first *provider.Chunk
	// id and estimate are the call's ledger invocation and the upper bound
	// reserved for it.
	id       string
	estimate provider.Money
	// model and started are what the first chunk said: the model
	// answering and the usage reported before the answer.
	model   string
	started *provider.Usage
	// reply is the provider's status and headers when the stream is
	// relayed in its client's protocol, nil when translated.
	reply *provider.NativeReply

	mu       sync.Mutex
	attempts []Attempt
	trace    Trace
	settle   func(ok bool, attempts []Attempt, res *provider.Result)
	settled  bool
	review   *ReviewCheck
	observed func(ok bool, attempts []Attempt, res *provider.Result) // tells the observer, when set
}

// finish settles the stream's reservation once, when it ends.
func (s *Stream) finishLocked(ok bool, res *provider.Result) {
	if s.settled || s.settle == nil {
		return
	}
	s.settled = true
	as := append([]Attempt(nil), s.attempts...)
	s.settle(ok, as, res)
	copy(s.attempts, as) // with unpriced attempts charged
	if s.observed != nil {
		s.observed(ok, as, res)
	}
}

var _ provider.Stream = (*Stream)(nil)

// Recv returns the next chunk; after the final one, io.EOF.
func (s *Stream) Recv() (provider.Chunk, error) {
	var c provider.Chunk
	var err error
	if s.first != nil {
		c, s.first = *s.first, nil
	} else {
		c, err = s.inner.Recv()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		s.failLocked(err)
	case c.Final && c.Result != nil:
		last := &s.attempts[len(s.attempts)-1]
		last.Usage, last.Cost, last.Latency, last.Estimated, last.Unpriced = c.Result.Usage, c.Result.Cost, c.Result.Latency, c.Result.Usage.Estimated, c.Result.Unpriced
		s.finishLocked(true, c.Result)
	}
	return c, err
}

// failLocked records err, which ended the stream, on the last attempt with
// the usage it carries, and settles.
func (s *Stream) failLocked(err error) {
	last := &s.attempts[len(s.attempts)-1]
	last.Outcome, last.Error = provider.KindOf(err).String(), err.Error()
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Usage != nil {
		last.Usage, last.Cost, last.Estimated, last.Unpriced = *pe.Usage, pe.Cost, pe.Usage.Estimated, pe.Unpriced
	}
	s.finishLocked(false, nil)
}

// Close releases the connection. A stream closed before its end settles
// what the provider can bill for it: the error the closed stream ends
// with carries it.
func (s *Stream) Close() error {
	err := s.inner.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.settled {
		// A closed stream's Recv returns its end at once.
		if _, end := s.inner.Recv(); end != nil && !errors.Is(end, io.EOF) {
			s.failLocked(end)
		}
	}
	s.finishLocked(false, nil)
	return err
}

// Served returns the provider serving the stream and the model answering
// as the provider named it from the start (the model asked for when it
// named none), known before the first Recv.
func (s *Stream) Served() (prov, model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.attempts[len(s.attempts)-1]
	model = s.model
	if model == "" {
		model = last.Model
	}
	return last.Provider, model
}

// Reply returns the provider's status and end-to-end headers when the
// stream is relayed in the client's protocol ([provider.Request.Native]):
// its chunks then carry the provider's events as they came
// ([provider.Chunk.Raw]). Nil for a translated stream.
func (s *Stream) Reply() *provider.NativeReply { return s.reply }

// StartUsage returns the usage the provider reported before the answer
// (its input and cache counts), or nil when it reports usage only at the
// end.
func (s *Stream) StartUsage() *provider.Usage { return s.started }

// Attempts returns every attempt, the last one updated as the stream went.
func (s *Stream) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// Review returns what the critic gate made of a critic's finished stream on
// a started task (nil otherwise, or before the stream ended).
func (s *Stream) Review() *ReviewCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.review
}

// Trace returns the routing decision.
func (s *Stream) Trace() Trace { return s.trace }

// InvocationID names the call in the ledger.
func (s *Stream) InvocationID() string { return s.id }

// Estimate is the upper bound reserved before the call.
func (s *Stream) Estimate() provider.Money { return s.estimate }
