package provider

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// Protocol names a provider API a client can speak: a request in one of
// them can be relayed unchanged to an adapter that speaks it natively
// (see [Native]).
type Protocol string

// The protocols the gateway serves.
const (
	// ProtoMessages is Anthropic's Messages API (POST /v1/messages).
	ProtoMessages Protocol = "anthropic.messages"
	// ProtoChat is OpenAI's Chat Completions API (POST /v1/chat/completions).
	ProtoChat Protocol = "openai.chat"
	// ProtoResponses is OpenAI's Responses API (POST /v1/responses).
	ProtoResponses Protocol = "openai.responses"
	// ProtoCountTokens is the Messages API's token count (POST
	// /v1/messages/count_tokens): free, never billed (see [NativeCounter]).
	ProtoCountTokens Protocol = "anthropic.count_tokens"
)

// Member is one member of a JSON object: its key, unescaped, and where
// its value lies in the document, [Start, End).
type Member struct {
	Key        string
	Start, End int
}

// Native is a request as a client sent it in a provider's own protocol.
// An adapter that speaks Protocol natively for the model chosen
// ([NativeSpeaker]) sends Body upstream as it is, with only the edits the
// gateway owns: the model the router chose ([Request.Model]), an output
// limit above [Request.MaxTokens] clamped to it, and the provider's
// credentials. An adapter that does not speak it serves the decoded
// [Request] as usual (a translated route).
type Native struct {
	Protocol Protocol
	// Body is the client's request body, untouched.
	Body []byte
	// Members, when not nil, are Body's top-level members in order, as the
	// gateway's one pass over Body found them, so that an adapter reads
	// the few it checks or edits without crossing a 200 KB prompt again.
	// They describe Body: whoever changes Body sets Members to nil.
	Members []Member `json:"-"`
	// Header holds the client's request headers the provider's API
	// defines (its version and beta headers, …), to be
	// sent as they are; never the client's credentials, hop-by-hop
	// headers or the gateway's own.
	Header http.Header
	// Query holds the client's query parameters (Claude Code's
	// beta=true), sent as they are; never one whose name may carry a
	// credential.
	Query url.Values
	// Stream says Body asks for a streamed answer.
	Stream bool
	// UnmodeledBytes counts the bytes of Body's content that the decoded
	// Request does not hold (content blocks and fields the contract does
	// not model): the estimate bounds each byte as a prompt token.
	UnmodeledBytes int64
	// WebSearches bounds the web searches the provider may run for the
	// request (its server tools at their max_uses, or the provider's
	// documented default): the estimate prices them.
	WebSearches int64
	// ServiceTier is the service tier Body asks for ("priority", "flex",
	// …), "" for the provider's default: the estimate prices it.
	ServiceTier string
	// Required, when set, says why only an adapter speaking Protocol can
	// serve the request (a server tool the client forced, a content block
	// the contract does not model); a route to another is refused with it.
	Required string
	// Scanned says the gateway read only Body's top level: the Request
	// holds what routes it (the model, the output limit, the system
	// text) and no content, UnmodeledBytes is the whole body, and
	// Request.PromptCache is the longest cache lifetime a scan of every
	// byte found Body may ask for.
	Scanned bool
	// Full, when set (with Scanned), returns the request decoded in full,
	// for the estimates that must be exact ([Request.Exact]); it decodes
	// once, and fails for a body the decoder cannot hold.
	Full func() (*Request, error) `json:"-"`
}

// Exact returns r with its content when the gateway read only its top
// level ([Native.Full]): the fully decoded request with r's model, tier
// and output limit. Otherwise, or when the body cannot be decoded (its
// bound by bytes then stands), r itself.
func (r *Request) Exact() *Request {
	if r.Native == nil || r.Native.Full == nil {
		return r
	}
	full, err := r.Native.Full()
	if err != nil || full == nil {
		return r
	}
	out := *full
	out.Model, out.Tier, out.MaxTokens, out.CeilingEstimate = r.Model, r.Tier, r.MaxTokens, r.CeilingEstimate
	return &out
}

// NativeSpeaker is implemented by adapters that can relay a [Native]
// request unchanged.
type NativeSpeaker interface {
	// SpeaksNative reports whether requests in p go to model as they are.
	SpeaksNative(p Protocol, model string) bool
}

// NativeCounter is implemented by adapters that relay a token count
// request ([ProtoCountTokens]) as sent: the provider counts, nothing is
// billed. The reply is the provider's, an error status included; an error
// is a failure to get one.
type NativeCounter interface {
	CountNative(ctx context.Context, req *Request) (*NativeReply, error)
}

// SpeaksNative reports whether a speaks req's native protocol for model.
func SpeaksNative(a Adapter, req *Request, model string) bool {
	if req.Native == nil {
		return false
	}
	s, ok := a.(NativeSpeaker)
	return ok && s.SpeaksNative(req.Native.Protocol, model)
}

// NativeReply is a provider's answer to a [Native] request as it came:
// the status, the end-to-end headers (hop-by-hop ones and Content-Length
// removed) and, for a unary answer or an error, the body.
type NativeReply struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
	// Edits names what the adapter changed in the client's request, with
	// the value applied ("model=claude-sonnet-4-6", "max_tokens=32000",
	// "stream_options.include_usage=true"), for the gateway to say so.
	Edits []string `json:"edits,omitempty"`
}

// Clone returns a deep copy of r (nil for nil).
func (r *NativeReply) Clone() *NativeReply {
	if r == nil {
		return nil
	}
	return &NativeReply{Status: r.Status, Header: r.Header.Clone(), Body: append([]byte(nil), r.Body...), Edits: append([]string(nil), r.Edits...)}
}

// HopHeaders are the headers that describe one connection and are never
// relayed (RFC 9110 §7.6.1), with Content-Length, which a relay sets anew.
var HopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}

// EndToEnd returns a copy of h without [HopHeaders] and the headers its
// Connection header names.
func EndToEnd(h http.Header) http.Header {
	out := h.Clone()
	for _, c := range h.Values("Connection") {
		for name := range strings.SplitSeq(c, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out.Del(name)
			}
		}
	}
	for _, k := range HopHeaders {
		delete(out, k) // in canonical form, as net/http keys a header it reads
	}
	return out
}
