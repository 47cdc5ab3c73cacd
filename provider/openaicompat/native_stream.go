package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// streamNative relays a streamed request. Every upstream event is one
// chunk whose Raw holds its bytes; the first carries the status and
// end-to-end headers in Reply. A failed status or a failure to connect
// surfaces on the first Recv, as on the translated route.
func (a *Adapter) streamNative(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	at, err := a.nativePrepare(ctx, req, true)
	if err != nil {
		return nil, err
	}
	s := &nativeStream{a: a, req: req, at: at}
	if at.proto == provider.ProtoChat {
		s.chat = &stream{a: a, req: req, at: &attempt{model: at.model}, byIndex: map[int64]int{}}
	} else {
		s.rs = &respState{byOutput: map[int64]int{}, items: map[int64]json.RawMessage{}}
	}
	if pe := a.nativeSend(at, req.Native.Header); pe != nil {
		s.err = pe
		at.cancel()
		return s, nil
	}
	resp := at.resp
	if resp.StatusCode >= 400 {
		s.err = a.nativeError(at)
		at.cancel()
		return s, nil
	}
	s.body = resp.Body
	s.header = provider.EndToEnd(resp.Header)
	a.observe(resp.Header, 0)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("content-type")); mt != "text/event-stream" {
		s.err = a.protocolError(at.model, resp, "the answer to a streamed request is not an event stream (content-type "+resp.Header.Get("content-type")+")")
		s.body.Close()
		at.cancel()
		return s, nil
	}
	s.sse = adapterkit.NewSSEReader(readErrors{resp.Body}, 0)
	if s.chat != nil {
		s.chat.at.raw, s.chat.start = resp, at.start
	}
	// A reasoning model bills reasoning it streams at most a summary of.
	s.received().Start(a.ModelCapabilities(at.model).Has(provider.CapReasoning))
	return s, nil
}

// respState is what a relayed Responses stream has received.
type respState struct {
	model    string
	calls    int                       // tool calls announced so far
	byOutput map[int64]int             // output_index -> tool call index of a function call
	items    map[int64]json.RawMessage // output_index -> the item as output_item.done gave it
	recv     adapterkit.Received
}

// nativeStream is a relayed stream of either protocol.
type nativeStream struct {
	a      *Adapter
	req    *provider.Request
	at     *nativeAttempt
	body   io.ReadCloser
	sse    *adapterkit.SSEReader
	header http.Header
	chat   *stream    // Chat Completions: the translated stream's state, fed the same chunks
	rs     *respState // Responses

	pending   []provider.Chunk
	started   bool
	done      bool
	err       error
	closeOnce sync.Once
}

func (s *nativeStream) received() *adapterkit.Received {
	if s.chat != nil {
		return &s.chat.recv
	}
	return &s.rs.recv
}

// respModel is the model the answer names so far.
func (s *nativeStream) respModel() string {
	if s.chat != nil {
		return s.chat.respModel
	}
	return s.rs.model
}

func (s *nativeStream) requestID() string {
	if s.at.resp != nil {
		return s.at.resp.Header.Get("x-request-id")
	}
	return ""
}

// Recv returns the next chunk: one per upstream event, then io.EOF after
// the final one.
func (s *nativeStream) Recv() (provider.Chunk, error) {
	for {
		if err := s.at.ctx.Err(); err != nil && s.err == nil && !s.done {
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, nil, s.at.model))
		}
		if len(s.pending) > 0 {
			c := s.pending[0]
			s.pending = s.pending[1:]
			c.More = len(s.pending) > 0 || s.sse.Ready()
			if !s.started {
				s.started = true
				c.Reply = &provider.NativeReply{Status: s.at.resp.StatusCode, Header: s.header, Edits: s.at.edits}
				c.Model = s.respModel()
			}
			return c, nil
		}
		if s.err != nil {
			return provider.Chunk{}, s.err
		}
		if s.done {
			return provider.Chunk{}, io.EOF
		}
		ev, err := s.sse.Next()
		switch {
		case err == nil:
		case errors.As(err, new(*readError)):
			// The connection failed (cut, over the response cap, the
			// caller gone): not the stream's own end.
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, nil, s.at.model))
		case errors.Is(err, io.EOF):
			if err := s.end(); err != nil {
				return provider.Chunk{}, s.fail(err)
			}
			continue
		case errors.Is(err, io.ErrUnexpectedEOF) && (len(ev.Data) == 0 || json.Valid(ev.Data) || isDone(ev.Data)):
			// The last event without its blank line, whole: the
			// server closed right after it.
		case errors.Is(err, io.ErrUnexpectedEOF):
			return provider.Chunk{}, s.fail(s.a.base.Truncated(s.at.model, "the end of its last event", s.requestID()))
		default:
			return provider.Chunk{}, s.fail(s.a.classify(s.at.ctx, err, nil, s.at.model))
		}
		if s.chat != nil {
			err = s.chatEvent(ev)
		} else {
			err = s.responsesEvent(ev)
		}
		if err != nil {
			return provider.Chunk{}, s.fail(err)
		}
		if s.done {
			s.release()
		}
	}
}

// readError is a failure to read the answer's body. The SSE reader
// passes it on as it is, so that a connection cut inside an event (which
// the transport may report as io.ErrUnexpectedEOF) is not taken for a
// stream whose server closed it after its last event.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// readErrors wraps the errors of r, except io.EOF, in *readError.
type readErrors struct{ r io.Reader }

func (r readErrors) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = &readError{err}
	}
	return n, err
}

func isDone(data []byte) bool { return string(bytes.TrimSpace(data)) == "[DONE]" }

// push queues the chunks of one event: the first carries raw; an event
// with no content is a chunk with raw alone.
func (s *nativeStream) push(raw []byte, content ...provider.Chunk) {
	if len(content) == 0 {
		content = []provider.Chunk{{}}
	}
	content[0].Raw = raw
	s.pending = append(s.pending, content...)
}

// eventError is the error an event reported after the 200; Reply holds
// the event as it came.
func (s *nativeStream) eventError(pe *provider.Error, raw []byte) *provider.Error {
	pe.Reply = &provider.NativeReply{Status: s.at.resp.StatusCode, Header: s.header, Body: raw, Edits: s.at.edits}
	return pe
}

// chatEvent reads one Chat Completions event.
func (s *nativeStream) chatEvent(ev adapterkit.SSEEvent) error {
	st := s.chat
	data := bytes.TrimSpace(ev.Data)
	// The chunk, its error and its service tier, in one pass over the
	// event for a text chunk; else the error and tier in one pass over
	// its top level, and the chunk decoded after.
	var c chunk
	var top eventTop
	fast := len(data) > 0 && data[0] == '{' && decodeTextEvent(data, &c, &top)
	if !fast && len(data) > 0 && data[0] == '{' {
		t := adapterkit.Top(data, "error", "service_tier")
		top = eventTop{err: rawOf(t[0]), tier: rawOf(t[1])}
	}
	switch {
	case isDone(data):
		res, err := s.chatResult()
		if err != nil {
			return err
		}
		s.push(ev.Raw, provider.Chunk{Final: true, Result: res})
		s.done = true
		return nil
	case len(data) == 0:
		s.push(ev.Raw)
		return nil
	case top.err != nil:
		eb, _ := parseErrorBody(data)
		return s.eventError(s.a.streamError(s.at.model, eb, s.requestID()), ev.Raw)
	}
	// A chunk the fast path left (usage, tool calls, a name in another
	// case) is not tried on it a second time.
	if !fast {
		if err := decodeChunkSlowly(data, &c); err != nil {
			return s.a.base.Finish(s.a.base.Unreadable(err, s.at.model))
		}
	}
	if t := adapterkit.NewJSONCursor(top.tier); t.Next() == '"' {
		st.tier, _ = t.String()
	}
	st.handle(&c)
	content := st.pending
	st.pending = nil
	s.push(ev.Raw, content...)
	return nil
}

// rawOf is r's bytes as they are in the event, nil when r does not
// exist.
func rawOf(r gjson.Result) []byte {
	if !r.Exists() {
		return nil
	}
	return []byte(r.Raw)
}

// chatResult is the Result of a Chat Completions stream that gave its
// finish reason.
func (s *nativeStream) chatResult() (*provider.Result, error) {
	if s.chat.finish == "" {
		return nil, s.a.base.Truncated(s.at.model, "a finish_reason", s.requestID())
	}
	return s.chat.result()
}

// end handles the end of the upstream stream: a Chat Completions stream
// that gave its finish reason is complete without [DONE] (some gateways
// send none); anything else was cut short.
func (s *nativeStream) end() error {
	if s.chat == nil {
		return s.a.base.Truncated(s.at.model, "a response.completed event", s.requestID())
	}
	res, err := s.chatResult()
	if err != nil {
		return err
	}
	s.pending = append(s.pending, provider.Chunk{Final: true, Result: res})
	s.done = true
	s.release()
	return nil
}

// respEvent is the part of a Responses stream event the adapter reads.
type respEvent struct {
	Type        string          `json:"type"`
	OutputIndex int64           `json:"output_index"`
	Delta       string          `json:"delta"`
	Item        json.RawMessage `json:"item"`
	Response    *respObject     `json:"response"`
}

// responsesEvent reads one Responses event.
func (s *nativeStream) responsesEvent(ev adapterkit.SSEEvent) error {
	rs := s.rs
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		s.push(ev.Raw)
		return nil
	}
	var e respEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return s.a.base.Finish(s.a.base.Unreadable(err, s.at.model))
	}
	if e.Type == "" {
		e.Type = ev.Name
	}
	switch e.Type {
	case "response.created", "response.in_progress", "response.queued":
		if e.Response != nil && e.Response.Model != "" {
			rs.model = e.Response.Model
		}
	case "response.output_item.added":
		var it respItem
		if json.Unmarshal(e.Item, &it) == nil && it.Type == "function_call" {
			d := &provider.ToolCallDelta{Index: rs.calls, ID: it.CallID, Name: it.Name, Arguments: string(it.Arguments)}
			rs.byOutput[e.OutputIndex] = rs.calls
			rs.calls++
			rs.recv.Output(it.Name + string(it.Arguments))
			s.push(ev.Raw, provider.Chunk{ToolCall: d})
			return nil
		}
	case "response.function_call_arguments.delta":
		if i, ok := rs.byOutput[e.OutputIndex]; ok && e.Delta != "" {
			rs.recv.Output(e.Delta)
			s.push(ev.Raw, provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: i, Arguments: e.Delta}})
			return nil
		}
	case "response.output_text.delta":
		if e.Delta != "" {
			rs.recv.Output(e.Delta)
			s.push(ev.Raw, provider.Chunk{Text: e.Delta})
			return nil
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if e.Delta != "" {
			rs.recv.Output(e.Delta)
			s.push(ev.Raw, provider.Chunk{Reasoning: e.Delta})
			return nil
		}
	case "response.custom_tool_call_input.delta":
		rs.recv.Output(e.Delta)
	case "response.output_item.done":
		rs.items[e.OutputIndex] = slices.Clone(e.Item)
		var it respItem
		if json.Unmarshal(e.Item, &it) != nil {
			break
		}
		_, announced := rs.byOutput[e.OutputIndex]
		if (it.Type == "function_call" && !announced) || it.Type == "custom_tool_call" {
			// A call that came whole: one fragment with everything.
			args, err := it.arguments()
			if err != nil {
				return s.a.protocolError(s.at.model, s.at.resp, "tool call "+it.CallID+": "+err.Error())
			}
			d := &provider.ToolCallDelta{Index: rs.calls, ID: it.CallID, Name: it.Name, Arguments: string(args)}
			rs.byOutput[e.OutputIndex] = rs.calls
			rs.calls++
			rs.recv.Output(it.Name)
			s.push(ev.Raw, provider.Chunk{ToolCall: d})
			return nil
		}
	case "response.completed", "response.incomplete":
		if e.Response == nil {
			return s.a.protocolError(s.at.model, s.at.resp, e.Type+" carries no response")
		}
		res, err := s.a.responsesResult(s.req, s.at.model, e.Response, rs.doneItems(), s.at.resp)
		if err != nil {
			return err
		}
		res.Latency = s.a.base.Now().Sub(s.at.start)
		s.push(ev.Raw, provider.Chunk{Final: true, Result: res})
		s.done = true
		return nil
	case "response.failed":
		obj := e.Response
		if obj == nil {
			obj = &respObject{}
		}
		if u, ok := obj.Usage.usage(); ok {
			rs.recv.Report(u, true)
		}
		return s.eventError(s.a.responseFailed(s.at.model, obj, s.requestID()), ev.Raw)
	case "error":
		eb, _ := parseErrorBody(ev.Data)
		return s.eventError(s.a.streamError(s.at.model, eb, s.requestID()), ev.Raw)
	}
	s.push(ev.Raw)
	return nil
}

// doneItems are the output items the stream delivered whole, in output
// order.
func (rs *respState) doneItems() []json.RawMessage {
	idx := make([]int64, 0, len(rs.items))
	for i := range rs.items {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	out := make([]json.RawMessage, len(idx))
	for k, i := range idx {
		out[k] = rs.items[i]
	}
	return out
}

// fail ends the stream with err, attaching what the provider can bill for
// it, and releases the connection.
func (s *nativeStream) fail(err error) error {
	if pe, ok := err.(*provider.Error); ok {
		s.bill(pe)
	}
	s.err = err
	s.Close()
	return err
}

// bill attaches to pe the usage the provider can bill for the stream it
// ended ([adapterkit.Base.Billed]) and its price.
func (s *nativeStream) bill(pe *provider.Error) {
	ns, id := s.a.profile.priceRef(s.a.baseURL, s.at.model)
	if u := s.a.base.Billed(pe.Kind, s.received(), s.req, ns, id, Images(ns, id)); u != nil {
		var priced bool
		pe.Usage = u
		pe.Cost, priced = s.a.cost(s.respModel(), s.at.model, *u)
		pe.Unpriced = !priced
	}
	if pe.Diagnostic.RequestID == "" {
		pe.Diagnostic.RequestID = s.requestID()
	}
}

// release closes the body once the final chunk is queued. What may
// follow the end is not read: a server that holds the connection open
// after it must not hold the caller.
func (s *nativeStream) release() { s.Close() }

// Close releases the connection; it is safe to call more than once.
func (s *nativeStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.body != nil {
			err = s.body.Close()
		}
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
