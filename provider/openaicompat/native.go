package openaicompat

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// A request a client sent in Chat Completions or the Responses API
// ([provider.Native]) is relayed: its body goes upstream as it came, with
// only the edits the gateway owns ([adapterkit.NativeBody]), and the
// answer, the stream's events and error answers come back byte for byte,
// while the adapter still reads them for the Result, the chunks' content
// and the usage that settles the call. The relay bypasses the SDK, which
// would decode and re-encode both; it sends with the same HTTP client
// (the response cap included), key and base URL.

var _ provider.NativeSpeaker = (*Adapter)(nil)

// SpeaksNative reports whether requests in protocol p go to model as they
// are: Chat Completions on every profile (every compatible server speaks
// it), the Responses API where the profile has it ([Profile.Responses]).
func (a *Adapter) SpeaksNative(p provider.Protocol, model string) bool {
	switch p {
	case provider.ProtoChat:
		return true
	case provider.ProtoResponses:
		return a.profile.Responses
	}
	return false
}

// responsesPath is the Responses API's endpoint, relative to the base URL.
const responsesPath = "responses"

// MetaResponsesItem carries, on a reasoning part of a Result read from the
// Responses API, the reasoning item as it came, compacted (id, summary and, when the
// request included it, encrypted_content): the item a later turn sends
// back in its input.
const MetaResponsesItem = "openai.responses_item"

// withheldHeaders are the client headers a relayed request never carries,
// whatever the caller passed in [provider.Native.Header]: credentials and
// the organisation and project a key bills to (the adapter sends its own
// key and nothing else of the kind), and what the HTTP client sets itself
// (a forwarded Accept-Encoding would also turn off its transparent
// decompression).
var withheldHeaders = map[string]bool{
	"Authorization": true, "Api-Key": true, "X-Api-Key": true, "Cookie": true,
	"Openai-Organization": true, "Openai-Project": true,
	"Host": true, "Content-Type": true, "Content-Encoding": true, "Accept": true, "Accept-Encoding": true,
}

// nativeAttempt is one relayed call: the body sent, its edits and the
// answer's response.
type nativeAttempt struct {
	proto  provider.Protocol
	model  string
	stream bool
	body   adapterkit.Body
	query  url.Values // the client's, sent as they are
	edits  []string
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	resp   *http.Response
}

// nativePrepare checks a relayed request and writes the body it goes
// upstream with. The provider judges the body; the decoded request is
// not validated again (it only routes and prices).
func (a *Adapter) nativePrepare(ctx context.Context, req *provider.Request, stream bool) (*nativeAttempt, error) {
	n := req.Native
	at := &nativeAttempt{proto: n.Protocol, model: a.base.Model(req), stream: stream, query: n.Query}
	if at.model == "" {
		return nil, a.base.BadRequest("", fmt.Sprintf("no model for tier %s: set providers.%s.models.%s in llm-config.yaml", req.EffectiveTier(), a.base.Name, req.EffectiveTier()))
	}
	if n.Stream != stream {
		want, call := "a whole answer", "Invoke"
		if n.Stream {
			want, call = "a stream", "Stream"
		}
		return nil, a.base.BadRequest(at.model, fmt.Sprintf("the relayed %s request asks for %s: send it with %s", n.Protocol, want, call))
	}
	var limits []string
	switch n.Protocol {
	case provider.ProtoChat:
		// The first is the one added when the body sets neither.
		limits = []string{"max_tokens", "max_completion_tokens"}
		if a.profile.MaxCompletionTokens {
			limits = []string{"max_completion_tokens", "max_tokens"}
		}
	case provider.ProtoResponses:
		limits = []string{"max_output_tokens"}
	default:
		return nil, a.base.BadRequest(at.model, fmt.Sprintf("protocol %q is not one this adapter relays", n.Protocol))
	}
	// The output limit is clamped to what the estimate priced: the
	// request's, within the model's own limit in the catalog.
	clamped := *req
	if req.MaxTokens > 0 {
		clamped.MaxTokens = a.MaxTokens(req)
	}
	var err error
	if at.body, at.edits, err = adapterkit.NativeBody(&clamped, at.model, limits...); err != nil {
		return nil, a.base.BadRequest(at.model, err.Error())
	}
	// What the body sets is read from the client's body (n's members): the
	// edits above change none of it.
	top := adapterkit.TopOf(n, "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stream_options")
	if asked := top[0].String(); asked != at.model {
		if at.body, err = a.fitModel(at, n.Protocol, top[1:5]); err != nil {
			return nil, a.base.BadRequest(at.model, err.Error())
		}
	}
	if stream && n.Protocol == provider.ProtoChat && a.profile.StreamUsage && !top[5].Get("include_usage").Bool() {
		// The usage chunk settles the call exactly; without it the
		// usage would be an estimate.
		b, err := sjson.SetBytes(at.body.Bytes(), "stream_options.include_usage", true)
		if err != nil {
			return nil, a.base.BadRequest(at.model, "the request body's stream_options cannot be set: "+err.Error())
		}
		at.body = adapterkit.Body{b}
		at.edits = append(at.edits, "stream_options.include_usage=true")
	}
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	return at, nil
}

// fitModel adapts a relayed body to the model the router chose in place
// of the one the client named, where that model refuses what the client
// could not know it would meet: OpenAI's reasoning models take the output
// limit only as max_completion_tokens, and no temperature or top_p. Each
// change is named in the edits. A client that named the model itself gets
// its body as sent, and the provider's word on it. set holds the client's
// max_tokens, max_completion_tokens, temperature and top_p, in that order.
func (a *Adapter) fitModel(at *nativeAttempt, p provider.Protocol, set []gjson.Result) (adapterkit.Body, error) {
	// Each edit is sjson's new copy of the body: without ReplaceInPlace,
	// sjson never writes into the slice it is given, here the client's.
	body := at.body
	if p == provider.ProtoChat && a.profile.MaxCompletionTokens {
		if v := set[0]; v.Exists() && !set[1].Exists() {
			b, err := sjson.SetRawBytes(body.Bytes(), "max_completion_tokens", []byte(v.Raw))
			if err == nil {
				b, err = sjson.DeleteBytes(b, "max_tokens")
			}
			if err != nil {
				return nil, fmt.Errorf("the request body's max_tokens cannot be renamed: %w", err)
			}
			body = adapterkit.Body{b}
			at.edits = append(at.edits, "max_completion_tokens="+v.Raw)
		}
	}
	if a.profile.ReasoningModels && reasoningModel(at.model) {
		for i, k := range []string{"temperature", "top_p"} {
			if set[2+i].Exists() {
				b, err := sjson.DeleteBytes(body.Bytes(), k)
				if err != nil {
					return nil, fmt.Errorf("the request body's %s cannot be dropped: %w", k, err)
				}
				body = adapterkit.Body{b}
				at.edits = append(at.edits, k+"=dropped")
			}
		}
	}
	return body, nil
}

// nativeSend posts the attempt's body with the client's headers (less
// [withheldHeaders]) and the adapter's key; a failure to get an answer is
// returned classified.
func (a *Adapter) nativeSend(at *nativeAttempt, h http.Header) *provider.Error {
	path := chatPath
	if at.proto == provider.ProtoResponses {
		path = responsesPath
	}
	target := a.baseURL + path
	if len(at.query) > 0 {
		target += "?" + at.query.Encode()
	}
	hr, err := http.NewRequestWithContext(at.ctx, http.MethodPost, target, nil)
	if err == nil {
		at.body.Send(hr)
	}
	if err != nil {
		return a.base.Finish(&provider.Error{Kind: provider.KindBadRequest, Provider: a.base.Name, Model: at.model, Diagnostic: provider.Diagnostic{Message: "the relayed request cannot be built"}, Err: err})
	}
	for k, vs := range provider.EndToEnd(h) {
		if !withheldHeaders[http.CanonicalHeaderKey(k)] {
			hr.Header[k] = slices.Clone(vs)
		}
	}
	hr.Header.Set("Authorization", "Bearer "+a.sendKey)
	hr.Header.Set("Content-Type", "application/json")
	if at.stream {
		hr.Header.Set("Accept", "text/event-stream")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	at.start = a.base.Now()
	resp, err := a.hc.Do(hr)
	if err != nil {
		return a.classify(at.ctx, err, nil, at.model)
	}
	at.resp = resp
	return nil
}

// nativeError reads an error answer (status ≥ 400) whole and classifies
// it as the translated route does; Reply holds it as it came.
func (a *Adapter) nativeError(at *nativeAttempt) *provider.Error {
	body, err := io.ReadAll(at.resp.Body)
	at.resp.Body.Close()
	if err != nil {
		return a.classify(at.ctx, err, nil, at.model)
	}
	pe := &provider.Error{Provider: a.base.Name, Model: at.model}
	a.fromHTTP(pe, at.resp.StatusCode, at.resp.Header, body)
	pe.Diagnostic.RequestID = at.resp.Header.Get("x-request-id")
	pe = a.base.Finish(pe)
	pe.Reply = &provider.NativeReply{Status: at.resp.StatusCode, Header: provider.EndToEnd(at.resp.Header), Body: body, Edits: at.edits}
	return pe
}

// invokeNative relays a unary request.
func (a *Adapter) invokeNative(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	at, err := a.nativePrepare(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer at.cancel()
	if pe := a.nativeSend(at, req.Native.Header); pe != nil {
		return nil, pe
	}
	resp := at.resp
	if resp.StatusCode >= 400 {
		return nil, a.nativeError(at)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	latency := a.base.Now().Sub(at.start)
	if err != nil {
		return nil, a.classify(at.ctx, err, nil, at.model)
	}
	a.observe(resp.Header, 0)
	reply := &provider.NativeReply{Status: resp.StatusCode, Header: provider.EndToEnd(resp.Header), Body: body, Edits: at.edits}
	var res *provider.Result
	switch at.proto {
	case provider.ProtoChat:
		cc, err := decodeCompletion(resp, body)
		if err != nil {
			return nil, a.classify(at.ctx, err, nil, at.model)
		}
		if res, err = a.completionResult(req, at.model, cc, resp, gjson.GetBytes(body, "service_tier").String()); err != nil {
			return nil, err
		}
	default:
		if err := checkJSON(resp); err != nil {
			return nil, a.classify(at.ctx, err, nil, at.model)
		}
		obj, err := decodeResponse(body)
		if err != nil {
			return nil, a.classify(at.ctx, err, nil, at.model)
		}
		if obj.Status == "failed" {
			pe := a.responseFailed(at.model, obj, resp.Header.Get("x-request-id"))
			pe.Reply = reply
			return nil, pe
		}
		if res, err = a.responsesResult(req, at.model, obj, nil, resp); err != nil {
			return nil, err
		}
	}
	res.Latency = latency
	res.Native = reply
	return res, nil
}

// checkJSON fails as decodeCompletion does for an answer that is not
// declared JSON.
func checkJSON(resp *http.Response) error {
	ct := resp.Header.Get("content-type")
	mt, _, _ := mime.ParseMediaType(ct)
	if !strings.Contains(mt, "application/json") && !strings.HasSuffix(mt, "+json") {
		return fmt.Errorf("expected destination type of 'string' or '[]byte' for responses with content-type '%s' that is not 'application/json'", ct)
	}
	return nil
}

// serviceTier is the tier an answer says it was served at, "" for the
// standard one ("default"; "auto" is only ever asked for).
func serviceTier(t string) string {
	if t == "default" || t == "auto" {
		return ""
	}
	return t
}
