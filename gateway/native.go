package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// A request in a provider's own protocol goes to an adapter that speaks
// it natively as the client sent it (provider.Native): the gateway
// decodes it only to route, budget and record it, and relays the
// provider's answer, events and errors as they came. What the gateway
// changes it names: the model (X-CortexBuild-Model), an output limit
// clamped to the model's (X-CortexBuild-Adjusted-Params), the provider's
// credentials in place of the virtual key.

// nativeProtocol is the provider protocol a route's bodies are in.
func nativeProtocol(path string) provider.Protocol {
	switch path {
	case "/v1/messages":
		return provider.ProtoMessages
	case "/v1/chat/completions":
		return provider.ProtoChat
	case "/v1/responses":
		return provider.ProtoResponses
	case "/v1/messages/count_tokens":
		return provider.ProtoCountTokens
	}
	return ""
}

// relayedRequestHeaders returns the client's headers that the provider's
// API defines and that go upstream with a relayed request: every
// anthropic-* header on the Messages route (anthropic-version and
// anthropic-beta are open lists, new betas included), OpenAI-Beta and
// X-Client-Request-Id on the OpenAI routes. Credentials, the account
// selectors that go with them (OpenAI-Organization, OpenAI-Project),
// hop-by-hop headers and the gateway's own never do.
func relayedRequestHeaders(h http.Header, p provider.Protocol) http.Header {
	out := http.Header{}
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		var pass bool
		switch p {
		case provider.ProtoMessages, provider.ProtoCountTokens:
			pass = strings.HasPrefix(ck, "Anthropic-")
		case provider.ProtoChat, provider.ProtoResponses:
			pass = ck == "Openai-Beta" || ck == "X-Client-Request-Id"
		}
		if pass {
			out[ck] = append([]string(nil), vs...)
		}
	}
	return out
}

// relayedQuery returns the client's query parameters that go upstream
// with a relayed request (Claude Code asks for /v1/messages?beta=true):
// all but those whose name may carry a credential (key, token, …), which
// only the gateway's own go with.
func relayedQuery(u *url.URL) url.Values {
	if u.RawQuery == "" {
		return nil
	}
	q := u.Query()
	for k := range q {
		lower := strings.ToLower(k)
		for _, w := range credentialParams {
			if strings.Contains(lower, w) {
				delete(q, k)
				break
			}
		}
	}
	if len(q) == 0 {
		return nil
	}
	return q
}

// credentialParams, in a query parameter's name, say it may carry a
// credential.
var credentialParams = []string{"key", "token", "auth", "secret", "password", "credential", "session", "sig"}

// defaultWebSearches bounds the web searches of a server tool that sets
// no max_uses: the Messages API ends a turn with pause_turn after 10
// iterations of its server-tool loop, and the estimate counts one search
// per iteration.
const defaultWebSearches = 10

// nativeOf describes body, a request in protocol p, for the relay: the
// headers that go with it and what changes its price (web searches, the
// service tier). unmodeled bounds the bytes the decoded request lacks.
func nativeOf(r *http.Request, p provider.Protocol, rb relayBody, stream bool, unmodeled int64) *provider.Native {
	n := &provider.Native{Protocol: p, Body: rb.raw, Members: make([]provider.Member, len(rb.top)), Header: relayedRequestHeaders(r.Header, p), Query: relayedQuery(r.URL), Stream: stream, UnmodeledBytes: unmodeled}
	for i, m := range rb.top {
		n.Members[i] = provider.Member{Key: m.key, Start: m.val.Index, End: m.val.Index + len(m.val.Raw)}
	}
	tools := rb.top.get("tools")
	if tools.IsArray() {
		for _, t := range tools.Array() {
			typ := t.Get("type").String()
			if !strings.HasPrefix(typ, "web_search") {
				continue
			}
			if mu := t.Get("max_uses"); mu.Type == gjson.Number && mu.Int() >= 0 {
				n.WebSearches += mu.Int()
			} else {
				n.WebSearches += defaultWebSearches
			}
		}
	}
	n.ServiceTier = rb.top.get("service_tier").String()
	if p == provider.ProtoResponses && unmodeled == 0 {
		// The decoded request leaves out reasoning items, which the
		// provider reads (and bills) as input: bound them by their bytes.
		rb.top.get("input").ForEach(func(_, it gjson.Result) bool {
			if it.Get("type").String() == "reasoning" {
				n.UnmodeledBytes += int64(len(it.Raw))
			}
			return true
		})
	}
	if t := forcedServerTool(p, rb.top.get("tool_choice"), tools); t != "" {
		n.Required = "tool_choice forces the server tool " + t + ", which only the provider runs"
	}
	return n
}

// forcedServerTool names the server tool (one the provider runs: web
// search, code execution, …) that body's tool_choice forces, "" when it
// forces none. A translated route cannot run it, and dropping it would
// drop what the client required.
func forcedServerTool(p provider.Protocol, choice, tools gjson.Result) string {
	switch p {
	case provider.ProtoMessages:
		if choice.Get("type").String() != "tool" {
			return ""
		}
		name := choice.Get("name").String()
		for _, t := range tools.Array() {
			if typ := t.Get("type").String(); t.Get("name").String() == name && typ != "" && typ != "custom" {
				return name + " (" + typ + ")"
			}
		}
	case provider.ProtoResponses:
		switch typ := choice.Get("type").String(); typ {
		case "", "function", "custom", "allowed_tools", "mcp":
		default:
			return typ
		}
	}
	return ""
}

// minimalDecode is the decoding of a request the full decoders refuse
// (a content block or a value the contract does not model) for a route
// that relays it as sent: the model, stream, the output limit and the
// system text (an agent's persona marker), enough to route, budget and
// record it. Its whole body counts as unmodeled prompt bytes.
func minimalDecode(p provider.Protocol, rb relayBody) (*decoded, error) {
	root := rb.top
	d := &decoded{}
	m := root.get("model")
	if m.Type != gjson.String {
		return nil, badField("model", "required: a string")
	}
	d.model = m.String()
	d.stream = root.get("stream").Bool()
	limit := func(names ...string) (bool, error) {
		for _, n := range names {
			v := root.get(n)
			if !v.Exists() || v.Type == gjson.Null {
				continue
			}
			if v.Type != gjson.Number || v.Int() < 1 || float64(v.Int()) != v.Float() {
				return false, badField(n, "must be a positive integer")
			}
			d.req.MaxTokens = int(min(v.Int(), 1<<31-1))
			return true, nil
		}
		return false, nil
	}
	var system []string
	texts := func(v gjson.Result) {
		if v.Type == gjson.String {
			system = append(system, v.String())
			return
		}
		for _, b := range v.Array() {
			if t := b.Get("text"); t.Type == gjson.String {
				system = append(system, t.String())
			}
		}
	}
	switch p {
	case provider.ProtoCountTokens:
		texts(root.get("system"))
	case provider.ProtoMessages:
		ok, err := limit("max_tokens")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, badField("max_tokens", "Field required: the Messages API takes the output limit from the caller")
		}
		texts(root.get("system"))
	case provider.ProtoChat:
		ok, err := limit("max_completion_tokens", "max_tokens")
		if err != nil {
			return nil, err
		}
		d.modelMax = !ok
		for _, c := range rb.system {
			texts(c)
		}
	case provider.ProtoResponses:
		ok, err := limit("max_output_tokens")
		if err != nil {
			return nil, err
		}
		d.modelMax = !ok
		texts(root.get("instructions"))
	}
	d.req.System = strings.Join(system, "\n\n")
	return d, nil
}

// routesNative reports whether call's first candidate relays it as sent.
func (g *Gateway) routesNative(ctx context.Context, call orchestrator.Call) bool {
	tr := g.opts.Orchestrator.Route(ctx, call)
	kept := tr.Kept()
	return len(kept) > 0 && kept[0].Native
}

// gatewayPrefix starts the name of every header the gateway owns, in
// any case.
const gatewayPrefix = "X-Cortexbuild-"

// nativeReplyHeaders puts a relayed answer's headers on w: the
// provider's end-to-end headers (its request id among them, replacing
// the gateway's), then the gateway's own, which name what it changed
// (the adapter's edits of the body). What a translated route ignores
// does not apply: nothing was ignored.
func nativeReplyHeaders(w http.ResponseWriter, r *http.Request, rep *provider.NativeReply) {
	h := w.Header()
	// The request ids are the provider's; the gateway's invocation id
	// stays in X-CortexBuild-Invocation.
	h.Del("Request-Id")
	h.Del("X-Request-Id")
	h.Del(HeaderIgnored)
	h.Del(HeaderAdjusted)
	n := 0
	for _, vs := range rep.Header {
		n += len(vs)
	}
	// One array holds every value; each header's slice is capped, so that
	// adding to one never writes over the next.
	all := make([]string, 0, n)
	for k, vs := range rep.Header {
		if len(k) >= len(gatewayPrefix) && strings.EqualFold(k[:len(gatewayPrefix)], gatewayPrefix) {
			continue // never the provider's word for the gateway's headers
		}
		all = append(all, vs...)
		h[k] = all[len(all)-len(vs) : len(all) : len(all)]
	}
	h.Set(HeaderRelayed, string(nativeProtocol(r.URL.Path)))
	var adjusted []string
	for _, e := range rep.Edits {
		if !strings.HasPrefix(e, "model=") { // X-CortexBuild-Model says it
			adjusted = append(adjusted, e)
		}
	}
	if len(adjusted) > 0 {
		h.Set(HeaderAdjusted, strings.Join(adjusted, ", "))
	}
}

// writeNative writes a relayed answer as the provider sent it. wait, when
// positive, is the wait the gateway knows of for a relayed error: sent as
// retry-after and retry-after-ms where the provider named none.
func writeNative(w http.ResponseWriter, r *http.Request, rep *provider.NativeReply, wait time.Duration) {
	nativeReplyHeaders(w, r, rep)
	h := w.Header()
	if wait > 0 {
		if h.Get("Retry-After") == "" {
			h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		}
		if h.Get("Retry-After-Ms") == "" {
			h.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(rep.Body)))
	w.WriteHeader(rep.Status)
	_, _ = w.Write(rep.Body)
}

// nativeError returns the provider's own error answer that ended a relayed
// call, when it is what the client should get: an error status the
// provider answered about the request (a bad request, a context too long,
// a rate limit, an overload, a server error). A refusal of the gateway's
// own account (its credentials refused, its quota spent) is the gateway's
// to explain, in the protocol's shape: the client's key is not at fault
// and waiting does not help. Gateway refusals and connection failures
// carry no reply.
func nativeError(err error) *provider.NativeReply {
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Reply == nil || pe.Reply.Status < 400 {
		return nil
	}
	switch pe.Kind {
	case provider.KindAuth, provider.KindQuotaExhausted:
		return nil
	}
	return pe.Reply
}

// writeFailure answers a call that failed: with the provider's own error
// answer, byte for byte, when the call was relayed and the provider
// answered one; otherwise in the protocol's error shape. A relayed error
// that names no wait gets the gateway's (retry-after and
// retry-after-ms, as on its own refusals) when it knows one.
func writeFailure(w http.ResponseWriter, r *http.Request, p protocol, err error) {
	ctx := r.Context()
	if clientGone(ctx) {
		return
	}
	f := classify(ctx, err)
	if rep := nativeError(err); rep != nil {
		writeNative(w, r, rep, f.retryAfter)
		return
	}
	p.writeError(w, r, f)
}

// relayNative writes a relayed stream as the provider sent it: its
// status and headers, then every event's bytes as they arrive. A failure
// after the first event ends the stream with the provider's own error
// event when it sent one, else with one in the protocol's shape; the
// client going away ends it quietly.
func relayNative(w http.ResponseWriter, r *http.Request, s *keptStream) {
	rep := s.Reply()
	nativeReplyHeaders(w, r, rep)
	w.Header().Del("Content-Length")
	w.WriteHeader(rep.Status)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	ctx := r.Context()
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if clientGone(ctx) {
				return
			}
			var pe *provider.Error
			if errors.As(err, &pe) && pe.Reply != nil && pe.Reply.Status == http.StatusOK && len(pe.Reply.Body) > 0 {
				_, _ = w.Write(pe.Reply.Body)
			} else {
				_, _ = w.Write(nativeErrorEvent(s.proto, classify(ctx, err)))
			}
			_ = rc.Flush()
			return
		}
		if len(c.Raw) > 0 {
			if _, err := w.Write(c.Raw); err != nil {
				return
			}
			// The next event already here goes out in the same write;
			// one that is not yet here never holds this one back.
			if c.More {
				continue
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

// nativeErrorEvent is the event that ends a relayed stream the gateway
// cut (the provider went away, the client's budget ran out): the
// protocol's error event.
func nativeErrorEvent(p provider.Protocol, f *failure) []byte {
	switch p {
	case provider.ProtoMessages:
		return fmt.Appendf(nil, "event: error\ndata: %s\n\n", mustJSON(anthropicError(nil, f)))
	case provider.ProtoResponses:
		e := openAIError(f).Error
		return fmt.Appendf(nil, "event: error\ndata: %s\n\n", mustJSON(map[string]any{"type": "error", "code": e.Code, "message": e.Message, "param": e.Param}))
	}
	return fmt.Appendf(nil, "data: %s\n\n", mustJSON(openAIError(f)))
}

// The hosts' own headers naming the session and the subagent a request
// is made in: Claude Code sends its session id on every request and, on a
// subagent's, the subagent's id and its parent's; Codex sends its
// conversation id as session_id (older versions as conversation_id).
// Codex marks a subagent's requests with x-openai-subagent (review,
// compact, …) and its parent thread with x-codex-parent-thread-id.
var (
	sessionHeaders     = []string{"X-Claude-Code-Session-Id", "Session_id", "Session-Id", "Conversation_id"}
	hostAgentHeaders   = []string{"X-Claude-Code-Agent-Id", "X-Openai-Subagent"}
	parentAgentHeaders = []string{"X-Claude-Code-Parent-Agent-Id", "X-Codex-Parent-Thread-Id"}
)

// hostIdentity reads the session, subagent and parent agent ids a host
// sends, for the ledger rows of the call (spend per session and per
// subagent). A value the ledger cannot record as it is (over 200
// characters, control characters) is refused, naming the header.
func hostIdentity(h http.Header) (session, agent, parent string, f *failure) {
	get := func(name string) (string, *failure) {
		v := strings.TrimSpace(headerValue(h, name))
		if err := ledger.CheckHostID(v); err != nil {
			return "", fail(classBadRequest, "%s: a host's id is at most %d printable characters", name, ledger.MaxHostIDLen)
		}
		return v, nil
	}
	first := func(names []string) (string, *failure) {
		for _, name := range names {
			if headerValue(h, name) != "" {
				return get(name)
			}
		}
		return "", nil
	}
	if session, f = first(sessionHeaders); f != nil {
		return
	}
	if agent, f = first(hostAgentHeaders); f != nil {
		return
	}
	parent, f = first(parentAgentHeaders)
	return
}

// headerValue is h.Get for a name that may not be in canonical form
// (session_id: Go does not canonicalise names with an underscore).
func headerValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}
