package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// Stream starts req and returns its events as chunks. The SDK sends the
// encoded request here; a failed HTTP status surfaces on the first Recv.
// A relayed request ([provider.Native]) streams every event of the answer
// as one chunk with its bytes (see the package doc).
func (a *Adapter) Stream(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	if provider.SpeaksNative(a, req, a.base.Model(req)) {
		return a.streamNative(ctx, req)
	}
	at, err := a.begin(ctx, req, true)
	if err != nil {
		return nil, err
	}
	s := &stream{a: a, req: req, ctx: at.ctx, cancel: at.cancel, model: at.model, start: a.base.Now(), blocks: map[int64]*block{}}
	// As Messages.NewStreaming does: the response comes back unread, or
	// the error on the first Recv.
	var resp *http.Response
	err = at.encodeErr
	if err == nil {
		err = a.client.Post(at.ctx, messagesPath, at.body, &resp, at.opts...)
	}
	s.sdk = ssestream.NewStream[wireEvent](ssestream.NewDecoder(resp), err)
	if err == nil {
		s.recv.Start(at.thinks)
	}
	s.raw = at.raw
	if s.raw != nil {
		a.observe(s.raw.Header, 0)
	}
	return s, nil
}

type block struct {
	kind      string // text, thinking, redacted_thinking, tool_use
	text      strings.Builder
	id, name  string
	args      strings.Builder
	signature string
	data      string
	toolIndex int
}

type stream struct {
	a      *Adapter
	req    *provider.Request
	sdk    *ssestream.Stream[wireEvent]
	raw    *http.Response
	ctx    context.Context
	cancel context.CancelFunc
	model  string
	start  time.Time

	blocks    map[int64]*block
	order     []int64
	tools     int
	usage     provider.Usage
	gotUsage  bool
	recv      adapterkit.Received // what an early end bills
	respModel string
	stop      string
	started   bool // the first chunk went out
	done      bool
	err       error
	closeOnce sync.Once

	// A relayed stream reads the body itself: sse splits it into events,
	// resp is the answer (reply its status and headers, for the first
	// chunk), edits what was changed in the client's body. pending is a
	// failure of the call, for the first Recv (pendingReply its answer).
	native       bool
	sse          *adapterkit.SSEReader
	resp         *http.Response
	body         io.Closer
	reply        *provider.NativeReply
	edits        []string
	pending      error
	pendingReply *provider.NativeReply
}

// Recv returns the next chunk, the final chunk with the whole result, then
// io.EOF.
func (s *stream) Recv() (provider.Chunk, error) {
	if s.err != nil {
		return provider.Chunk{}, s.err
	}
	if s.done {
		return provider.Chunk{}, io.EOF
	}
	// A caller that gave up is told so, even when the SDK already holds
	// the rest of the answer.
	if err := s.ctx.Err(); err != nil {
		return provider.Chunk{}, s.fail(s.a.classify(s.ctx, err, s.model))
	}
	if s.native {
		return s.recvNative()
	}
	for s.sdk.Next() {
		ev := s.sdk.Current()
		if c, ok, err := s.handle(&ev); err != nil {
			return provider.Chunk{}, s.fail(err)
		} else if ok {
			return s.first(c), nil
		}
	}
	if err := s.sdk.Err(); err != nil {
		return provider.Chunk{}, s.fail(s.a.classify(s.ctx, err, s.model))
	}
	if s.ctx.Err() != nil {
		return provider.Chunk{}, s.fail(s.a.classify(s.ctx, s.ctx.Err(), s.model))
	}
	return provider.Chunk{}, s.fail(s.a.base.Truncated(s.model, "message_stop", s.requestID()))
}

// first adds to the stream's first chunk the model answering and the
// usage message_start reported.
func (s *stream) first(c provider.Chunk) provider.Chunk {
	if !s.started {
		s.started = true
		c.Model = s.respModel
		if s.gotUsage {
			u := s.usage
			c.Usage = &u
		}
	}
	return c
}

func (s *stream) requestID() string {
	if s.raw == nil {
		return ""
	}
	return s.raw.Header.Get("request-id")
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
	if u := s.a.base.Billed(pe.Kind, &s.recv, s.req, Namespace, s.model, Images(s.model)); u != nil {
		var priced bool
		pe.Usage = u
		pe.Cost, priced = s.a.base.Price(*u, adapterkit.PriceRef{NS: Namespace, Model: s.respModel}, adapterkit.PriceRef{NS: Namespace, Model: s.model})
		pe.Unpriced = !priced
	}
	if pe.Diagnostic.RequestID == "" {
		pe.Diagnostic.RequestID = s.requestID()
	}
}

func (s *stream) handle(ev *wireEvent) (provider.Chunk, bool, error) {
	switch ev.Type {
	case "message_start":
		m := &ev.Message
		s.respModel = m.Model
		s.usage = m.Usage.usage()
		s.gotUsage = true
		s.recv.Report(s.usage, false)
	case "content_block_start":
		cb := ev.ContentBlock
		b := &block{kind: cb.Type, id: cb.ID, name: cb.Name, signature: cb.Signature, data: cb.Data}
		s.blocks[ev.Index] = b
		s.order = append(s.order, ev.Index)
		s.recv.Output(cb.Name + cb.Text + cb.Thinking)
		switch cb.Type {
		case "tool_use":
			b.toolIndex = s.tools
			s.tools++
			return provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: b.toolIndex, ID: cb.ID, Name: cb.Name}}, true, nil
		case "text":
			if cb.Text != "" {
				b.text.WriteString(cb.Text)
				return provider.Chunk{Text: cb.Text}, true, nil
			}
		case "thinking":
			b.text.WriteString(cb.Thinking)
			if cb.Thinking != "" {
				return provider.Chunk{Reasoning: cb.Thinking}, true, nil
			}
		}
	case "content_block_delta":
		b := s.blocks[ev.Index]
		if b == nil {
			return provider.Chunk{}, false, s.protocolError("content_block_delta for a block that never started")
		}
		d := ev.Delta
		s.recv.Output(d.Text + d.PartialJSON + d.Thinking)
		switch d.Type {
		case "text_delta":
			b.text.WriteString(d.Text)
			if d.Text != "" {
				return provider.Chunk{Text: d.Text}, true, nil
			}
		case "input_json_delta":
			b.args.WriteString(d.PartialJSON)
			// A server tool's input (web search) is no call of the
			// caller's: its fragments are output, not tool-call deltas.
			if d.PartialJSON != "" && b.kind == "tool_use" {
				return provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: b.toolIndex, Arguments: d.PartialJSON}}, true, nil
			}
		case "thinking_delta":
			b.text.WriteString(d.Thinking)
			if d.Thinking != "" {
				return provider.Chunk{Reasoning: d.Thinking}, true, nil
			}
		case "signature_delta":
			b.signature = d.Signature
			if d.Signature != "" {
				return provider.Chunk{ReasoningMeta: reasoningPart("", MetaSignature, d.Signature).Meta}, true, nil
			}
		}
	case "message_delta":
		s.stop = ev.Delta.StopReason
		// Counts here are cumulative: they replace, never add to, what
		// message_start said.
		u := ev.Usage
		s.usage.OutputTokens = u.OutputTokens
		if u.InputTokens > 0 || u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
			prev := s.usage
			s.usage = provider.UsageExclusive(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
			s.usage.CacheWriteLongTokens = min(prev.CacheWriteLongTokens, s.usage.CacheWriteTokens)
			s.usage.WebSearchRequests, s.usage.ServiceTier = prev.WebSearchRequests, prev.ServiceTier
		}
		if t := u.OutputTokensDetails.ThinkingTokens; t > 0 {
			s.usage.ReasoningTokens = t
		}
		s.gotUsage = true
		s.recv.Report(s.usage, true)
	case "message_stop":
		res, err := s.result()
		if err != nil {
			return provider.Chunk{}, false, err
		}
		s.done = true
		s.Close()
		return provider.Chunk{Final: true, Result: res}, true, nil
	}
	return provider.Chunk{}, false, nil
}

func (s *stream) protocolError(msg string) *provider.Error {
	return s.a.base.Protocol(s.model, s.requestID(), msg)
}

func (s *stream) result() (*provider.Result, error) {
	res := &provider.Result{Provider: s.a.base.Name, Model: s.respModel, RawStopReason: s.stop, StopReason: stopReason(s.stop), ToolCalls: []provider.ToolCall{}, RequestID: s.requestID()}
	if res.Model == "" {
		res.Model = s.model
	}
	var text []string
	for _, idx := range s.order {
		b := s.blocks[idx]
		switch b.kind {
		case "text":
			text = append(text, b.text.String())
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartText, Text: b.text.String()})
		case "thinking":
			res.Parts = append(res.Parts, reasoningPart(b.text.String(), MetaSignature, b.signature))
		case "redacted_thinking":
			res.Parts = append(res.Parts, reasoningPart("", MetaRedactedThinking, b.data))
		case "tool_use":
			args := strings.TrimSpace(b.args.String())
			if args == "" {
				args = "{}"
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(args), &obj); err != nil {
				return nil, s.protocolError("tool call " + b.id + " arguments are not a JSON object: " + err.Error())
			}
			res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: b.id, Name: b.name, Arguments: json.RawMessage(args)})
			res.Parts = append(res.Parts, provider.Part{Type: provider.PartToolCall})
		}
	}
	relink(res)
	res.Content = strings.Join(text, "")
	res.Usage = s.usage
	var priced bool
	res.Cost, priced = s.a.base.Price(res.Usage, adapterkit.PriceRef{NS: Namespace, Model: res.Model}, adapterkit.PriceRef{NS: Namespace, Model: s.model})
	res.Unpriced = !priced
	res.Latency = s.a.base.Now().Sub(s.start)
	return res, nil
}

// Close releases the connection; it is safe to call more than once.
func (s *stream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		switch {
		case s.sdk != nil:
			err = s.sdk.Close()
		case s.body != nil:
			err = s.body.Close()
		}
		s.cancel()
		if s.err == nil && !s.done {
			pe := s.a.base.Canceled(s.model)
			s.bill(pe)
			s.err = pe
		}
	})
	return err
}
