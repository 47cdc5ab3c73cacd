package anthropic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

var _ provider.NativeSpeaker = (*Adapter)(nil)

// SpeaksNative reports whether requests in protocol p go to model as the
// client sent them: Messages API requests do, for every model.
func (a *Adapter) SpeaksNative(p provider.Protocol, model string) bool {
	return p == provider.ProtoMessages || p == provider.ProtoCountTokens
}

var _ provider.NativeCounter = (*Adapter)(nil)

// countPath is the token count endpoint, relative to the base URL.
const countPath = "v1/messages/count_tokens"

// CountNative relays a count_tokens request as the client sent it, with
// the model the router chose, and returns the provider's answer as it
// came: an error status is a reply, not an error.
func (a *Adapter) CountNative(ctx context.Context, req *provider.Request) (*provider.NativeReply, error) {
	model := a.base.Model(req)
	unlimited := *req
	unlimited.MaxTokens = 0 // a count has no output limit
	body, edits, err := adapterkit.NativeBody(&unlimited, model)
	if err != nil {
		return nil, a.base.BadRequest(model, err.Error())
	}
	actx, cancel := a.base.Attempt(ctx, req)
	defer cancel()
	var raw *http.Response
	var out []byte
	opts := append([]option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&raw)},
		relayOptions(req.Native)...)
	params, bodyOpts := sendBody(body)
	err = a.client.Post(actx, countPath, params, &out, append(opts, bodyOpts...)...)
	if rep := errorReply(err, edits); rep != nil {
		return rep, nil
	}
	if err != nil {
		return nil, a.classify(actx, err, model)
	}
	return &provider.NativeReply{Status: raw.StatusCode, Header: provider.EndToEnd(raw.Header), Body: out, Edits: edits}, nil
}

// beginNative prepares a relayed request ([provider.Native]): the
// client's body with only the edits the gateway owns (the model, an output
// limit above the request's own, clamped to the model's in the catalog),
// and the client's headers in place of the SDK's, credentials excepted.
// None of the betas the translated path derives from Request.Meta is
// added. stream is the kind of call asked for; a body that asks for the
// other is refused.
func (a *Adapter) beginNative(ctx context.Context, req *provider.Request, stream bool) (*attempt, error) {
	at := &attempt{model: a.base.Model(req)}
	limited := *req
	if req.MaxTokens > 0 {
		limited.MaxTokens = a.base.MaxTokens(Namespace, at.model, req)
	}
	body, edits, err := adapterkit.NativeBody(&limited, at.model, "max_tokens")
	if err != nil {
		return nil, a.base.BadRequest(at.model, err.Error())
	}
	top := adapterkit.TopOf(req.Native, "stream", "thinking")
	if asks := top[0].Bool(); asks != stream {
		call := "Invoke"
		if asks {
			call = "Stream"
		}
		return nil, a.base.BadRequest(at.model, fmt.Sprintf("the relayed request body sets \"stream\": %v: it is sent with %s", asks, call))
	}
	switch top[1].Get("type").String() {
	case "enabled", "adaptive":
		at.thinks = true
	}
	at.nbody, at.edits, at.native = body, edits, true
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	at.opts = append([]option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&at.raw)},
		relayOptions(req.Native)...)
	return at, nil
}

// sendBody is how a relayed body goes to the SDK's Post: one slice as it
// is; pieces (an edited body, see [adapterkit.Body]) as a reader, with a
// middleware that announces their length as a slice's would be, so that
// the provider gets the same request either way.
func sendBody(b adapterkit.Body) (any, []option.RequestOption) {
	if len(b) == 1 {
		return b[0], nil
	}
	return b.Reader(), []option.RequestOption{option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		b.Send(r)
		return next(r)
	})}
}

// postNative posts at's relayed body to the Messages endpoint, the answer
// into res.
func (a *Adapter) postNative(at *attempt, res any) error {
	params, opts := sendBody(at.nbody)
	return a.client.Post(at.ctx, messagesPath, params, res, append(slices.Clip(at.opts), opts...)...)
}

// relayOptions sends n's headers (see headerOptions) and its query
// parameters as the client sent them.
func relayOptions(n *provider.Native) []option.RequestOption {
	opts := headerOptions(n.Header)
	for _, k := range slices.Sorted(maps.Keys(n.Query)) {
		for _, v := range n.Query[k] {
			opts = append(opts, option.WithQueryAdd(k, v))
		}
	}
	return opts
}

// headerOptions sends the client's headers in place of the SDK's: the
// first value of each replaces the SDK's, the others are added after it.
// Credentials, cookies and hop-by-hop headers are never taken from the
// client: the adapter sends its own key only.
func headerOptions(h http.Header) []option.RequestOption {
	var opts []option.RequestOption
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		vs := h[k]
		if len(vs) == 0 || !relayable(k) {
			continue
		}
		opts = append(opts, option.WithHeader(k, vs[0]))
		for _, v := range vs[1:] {
			opts = append(opts, option.WithHeaderAdd(k, v))
		}
	}
	return opts
}

// notRelayed are headers a client's request never passes on: its
// credentials and cookies, the connection's own, and what the HTTP client
// sets anew.
var notRelayed = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "Cookie", "Host", "Expect"}

// credentialWords, in a header's name, say it may carry a credential.
var credentialWords = []string{"auth", "api-key", "apikey", "token", "secret", "password", "credential", "cookie", "session"}

// relayable reports whether the client's header name may go upstream.
func relayable(name string) bool {
	if slices.ContainsFunc(notRelayed, func(n string) bool { return strings.EqualFold(n, name) }) ||
		slices.ContainsFunc(provider.HopHeaders, func(n string) bool { return strings.EqualFold(n, name) }) {
		return false
	}
	lower := strings.ToLower(name)
	return !slices.ContainsFunc(credentialWords, func(w string) bool { return strings.Contains(lower, w) })
}

// invokeNative relays req and returns the answer decoded as a translated
// call's is, with the provider's bytes in Result.Native.
func (a *Adapter) invokeNative(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	at, err := a.beginNative(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer at.cancel()
	start := a.base.Now()
	var body []byte
	err = a.postNative(at, &body)
	latency := a.base.Now().Sub(start)
	if at.raw != nil {
		a.observe(at.raw.Header, 0)
	}
	if err != nil {
		pe := a.classify(at.ctx, err, at.model)
		pe.Reply = errorReply(err, at.edits)
		return nil, pe
	}
	id := ""
	ct := ""
	status := http.StatusOK
	var header http.Header
	if at.raw != nil {
		id, ct, status, header = at.raw.Header.Get("request-id"), at.raw.Header.Get("content-type"), at.raw.StatusCode, at.raw.Header
	}
	msg, err := decodeAnswer(ct, body)
	if err != nil {
		return nil, a.classify(at.ctx, err, at.model)
	}
	if msg == nil {
		return nil, a.base.Protocol(at.model, id, "the response is null")
	}
	u := msg.Usage.usage()
	nativeUsage(&u, gjson.GetBytes(body, "usage"))
	res := a.resultWith(msg, at.model, u)
	res.Latency, res.RequestID = latency, id
	res.Native = &provider.NativeReply{Status: status, Header: provider.EndToEnd(header), Body: body, Edits: at.edits}
	return res, nil
}

// nativeUsage adds to u what a relayed answer's usage reports beyond the
// translated path's counts: the web searches run (server_tool_use) and
// the service tier served ("" for standard).
func nativeUsage(u *provider.Usage, usage gjson.Result) {
	if n := usage.Get("server_tool_use.web_search_requests"); n.Type == gjson.Number {
		u.WebSearchRequests = n.Int()
	}
	if t := usage.Get("service_tier"); t.Type == gjson.String {
		u.ServiceTier = serviceTier(t.String())
	}
}

// serviceTier is the tier an answer names, "" for the standard one.
func serviceTier(t string) string {
	if t == "standard" {
		return ""
	}
	return t
}

// errorReply is the upstream's error answer to a relayed request as it
// came (status, end-to-end headers, body bytes), nil when err is no error
// status. The SDK reads the body of an error status and puts the bytes
// back: they are read here, and put back again.
func errorReply(err error, edits []string) *provider.NativeReply {
	var e *anthropic.Error
	if !errors.As(err, &e) || e.Response == nil || e.StatusCode < 400 {
		return nil
	}
	var body []byte
	if e.Response.Body != nil {
		body, _ = io.ReadAll(e.Response.Body)
		e.Response.Body = io.NopCloser(bytes.NewReader(body))
	}
	return &provider.NativeReply{Status: e.StatusCode, Header: provider.EndToEnd(e.Response.Header), Body: body, Edits: edits}
}

// streamNative relays a streamed req: the answer is read event by event
// with [adapterkit.SSEReader], each event one chunk with its bytes.
func (a *Adapter) streamNative(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	at, err := a.beginNative(ctx, req, true)
	if err != nil {
		return nil, err
	}
	s := &stream{a: a, req: req, ctx: at.ctx, cancel: at.cancel, model: at.model, start: a.base.Now(), blocks: map[int64]*block{}, native: true, edits: at.edits}
	var resp *http.Response
	err = a.postNative(at, &resp)
	s.raw = at.raw
	if s.raw != nil {
		a.observe(s.raw.Header, 0)
	}
	if err != nil {
		// As the translated stream: the failure comes with the first Recv.
		s.pending, s.pendingReply = err, errorReply(err, at.edits)
		return s, nil
	}
	s.resp, s.body = resp, resp.Body
	s.sse = adapterkit.NewSSEReader(resp.Body, 0)
	s.reply = &provider.NativeReply{Status: resp.StatusCode, Header: provider.EndToEnd(resp.Header), Edits: at.edits}
	s.recv.Start(at.thinks)
	return s, nil
}

// recvNative returns the next event of a relayed stream as a chunk.
func (s *stream) recvNative() (provider.Chunk, error) {
	if s.pending != nil {
		pe := s.a.classify(s.ctx, s.pending, s.model)
		pe.Reply = s.pendingReply
		return provider.Chunk{}, s.fail(pe)
	}
	ev, err := s.sse.Next()
	switch {
	case err == nil:
	case s.ctx.Err() != nil:
		return provider.Chunk{}, s.fail(s.a.classify(s.ctx, s.ctx.Err(), s.model))
	case errors.Is(err, io.EOF):
		return provider.Chunk{}, s.fail(s.a.base.Truncated(s.model, "message_stop", s.requestID()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		// A stream cut inside an event, or a last event whose blank line
		// never came: only a complete one is read.
		if len(ev.Data) == 0 || !gjson.ValidBytes(ev.Data) {
			return provider.Chunk{}, s.fail(s.a.base.Truncated(s.model, "message_stop", s.requestID()))
		}
	default:
		return provider.Chunk{}, s.fail(s.a.classify(s.ctx, err, s.model))
	}
	return s.nativeEvent(ev)
}

// nativeEvent turns one relayed event into its chunk: its bytes, and the
// content a translated stream reads of it.
func (s *stream) nativeEvent(ev adapterkit.SSEEvent) (provider.Chunk, error) {
	if ev.Name == "error" {
		return provider.Chunk{}, s.fail(s.eventError(ev))
	}
	var c provider.Chunk
	if data := bytes.TrimSpace(ev.Data); len(data) > 0 {
		var we wireEvent
		if err := decodeEvent(data, &we); err != nil {
			return provider.Chunk{}, s.fail(s.a.classify(s.ctx, err, s.model))
		}
		got, ok, err := s.handle(&we)
		if err != nil {
			return provider.Chunk{}, s.fail(err)
		}
		switch we.Type {
		case "message_start":
			nativeUsage(&s.usage, gjson.GetBytes(data, "message.usage"))
			s.recv.Report(s.usage, false)
		case "message_delta":
			nativeUsage(&s.usage, gjson.GetBytes(data, "usage"))
			s.recv.Report(s.usage, true)
		}
		if ok {
			c = got
		}
	}
	c.Raw, c.More = ev.Raw, s.sse.Ready()
	if !s.started && s.reply != nil {
		c.Reply = s.reply
	}
	return s.first(c), nil
}

// eventError is the provider error an `event: error` ends a stream with,
// classified as the SDK's error of it would be; its Reply holds the
// stream's status and headers and the event's bytes.
func (s *stream) eventError(ev adapterkit.SSEEvent) *provider.Error {
	e := &anthropic.Error{}
	var h http.Header
	if r := s.resp; r != nil {
		e.Request, e.Response, e.StatusCode = r.Request, r, r.StatusCode
		e.RequestID, e.WorkspaceID = r.Header.Get("request-id"), r.Header.Get("anthropic-workspace-id")
		h = provider.EndToEnd(r.Header)
	}
	var err error = e
	if e.UnmarshalJSON(ev.Data) != nil {
		err = fmt.Errorf("received error while streaming: %s", ev.Data)
	}
	pe := s.a.classify(s.ctx, err, s.model)
	status := http.StatusOK
	if s.resp != nil {
		status = s.resp.StatusCode
	}
	pe.Reply = &provider.NativeReply{Status: status, Header: h, Body: ev.Raw, Edits: s.edits}
	return pe
}
