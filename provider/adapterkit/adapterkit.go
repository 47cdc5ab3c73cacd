// Package adapterkit holds what every provider adapter does the same way,
// so each vendor package keeps only what is vendor-specific: model choice
// by tier, per-attempt deadlines, pricing through the catalog, the
// classification of failures that never reached the provider (deadline,
// cancellation, transport), retry-after headers, descriptions of non-JSON
// error pages, redaction of the adapter's credential, and the usage a
// stream that ends before its end is billed ([Received], [Base.Billed]).
//
// It imports only the standard library and provider.
package adapterkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// MaxRetryAfter caps any provider-requested delay; the orchestrator applies
// its own, smaller cap on top.
const MaxRetryAfter = 24 * time.Hour

// ErrAttemptTimeout is the cause of an attempt's context when the attempt
// timeout, not the caller, ended it.
var ErrAttemptTimeout = errors.New("attempt timed out")

// Base is the vendor-neutral state of an adapter instance.
type Base struct {
	Name    string
	Models  map[provider.Tier]string
	Extra   provider.CapabilitySet
	Pricer  provider.Pricer
	Now     func() time.Time
	Timeout time.Duration
	// MaxResponseBytes bounds every response body (see [Base.HTTPClient]).
	MaxResponseBytes int64
	// Secret is the credential to redact from anything shown.
	Secret string
}

// NewBase fills a Base from settings: the instance name (typ when unset),
// the tier mapping (defaults overlaid with the configuration's), the clock,
// the response cap ([DefaultMaxResponseBytes] when unset).
func NewBase(s provider.Settings, typ string, defaults map[provider.Tier]string, secret string) Base {
	b := Base{Name: s.Name, Extra: s.Capabilities, Pricer: s.Pricer, Now: s.Now, Timeout: s.Timeout, MaxResponseBytes: s.MaxResponseBytes, Secret: secret, Models: map[provider.Tier]string{}}
	if b.Name == "" {
		b.Name = typ
	}
	if b.MaxResponseBytes <= 0 {
		b.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if b.Now == nil {
		b.Now = time.Now
	}
	for t, m := range defaults {
		b.Models[t] = m
	}
	for t, m := range s.Models {
		b.Models[t] = m
	}
	return b
}

// ModelFor returns the model configured for tier t ("" when none is).
func (b *Base) ModelFor(t provider.Tier) string { return b.Models[t] }

// Model returns the model req addresses: its explicit Model, else its
// tier's.
func (b *Base) Model(req *provider.Request) string {
	if req.Model != "" {
		return req.Model
	}
	return b.Models[req.EffectiveTier()]
}

// AttemptTimeout returns req's timeout, else the provider's, else the
// default 300 s.
func (b *Base) AttemptTimeout(req *provider.Request) time.Duration {
	if req.Timeout <= 0 && b.Timeout > 0 {
		return b.Timeout
	}
	return req.EffectiveTimeout()
}

// Attempt returns a context bounded by req's attempt timeout; its cause is
// [ErrAttemptTimeout] when the timeout ended it. It also records whether a
// response body of the attempt went past the cap (see [Base.TooLarge]).
func (b *Base) Attempt(ctx context.Context, req *provider.Request) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, capKey{}, new(capTrip))
	return context.WithTimeoutCause(ctx, b.AttemptTimeout(req), ErrAttemptTimeout)
}

// Validate runs req.Validate and names this adapter and model in its error.
func (b *Base) Validate(req *provider.Request, model string) error {
	err := req.Validate()
	var pe *provider.Error
	if errors.As(err, &pe) {
		pe.Provider, pe.Model = b.Name, model
	}
	return err
}

// ResponseSchema checks that model, with capabilities caps, can honour
// req's response format, and returns its schema decoded (nil when req sets
// none).
func (b *Base) ResponseSchema(req *provider.Request, model string, caps provider.CapabilitySet) (map[string]any, error) {
	if req.ResponseFormat == nil {
		return nil, nil
	}
	if !caps.Has(provider.CapStructuredOutput) {
		return nil, b.BadRequest(model, fmt.Sprintf("model %s cannot hold its answer to a JSON schema (it lacks %s): drop response_format or route to a model that has it", model, provider.CapStructuredOutput))
	}
	var schema map[string]any
	if err := json.Unmarshal(req.ResponseFormat.Schema, &schema); err != nil || schema == nil {
		return nil, b.BadRequest(model, "response_format.schema must be a JSON Schema object")
	}
	return schema, nil
}

// BadRequest returns a bad-request error of this adapter.
func (b *Base) BadRequest(model, msg string) *provider.Error {
	return &provider.Error{Kind: provider.KindBadRequest, Provider: b.Name, Model: model, Diagnostic: provider.Diagnostic{Message: msg}}
}

// ModelCapabilities returns base, the configured extras, and the long
// context and vision capabilities the price catalog records for model in
// namespace ns.
func (b *Base) ModelCapabilities(base provider.CapabilitySet, ns, model string) provider.CapabilitySet {
	s := base.Union(b.Extra)
	if b.Pricer != nil {
		if l, err := b.Pricer.Limits(ns, model); err == nil {
			s = s.Union(l.Capabilities())
		}
	}
	return s
}

// Estimate prices an upper bound of req on model, each image bounded by
// images (the adapter's formula for model); an unpriceable request is a
// bad-request error saying why.
func (b *Base) Estimate(ns, model string, req *provider.Request, images provider.ImageTokens) (provider.Money, error) {
	if b.Pricer == nil {
		return 0, b.BadRequest(model, "no price catalog configured: the request cannot be priced")
	}
	m, err := b.Pricer.Estimate(ns, model, req, images, b.Now())
	if err != nil {
		pe := b.BadRequest(model, err.Error())
		pe.Err = err
		return 0, pe
	}
	return m, nil
}

// MaxTokens returns the output limit to send for req on model: req's max
// tokens clamped to the model's max_output_tokens in the catalog, the
// limit [Base.Estimate] prices (unclamped when the catalog does not list
// the model). No answer can bill more output than what is sent.
func (b *Base) MaxTokens(ns, model string, req *provider.Request) int {
	n := req.EffectiveMaxTokens()
	if b.Pricer != nil {
		if l, err := b.Pricer.Limits(ns, model); err == nil && l.MaxOutputTokens > 0 && int64(n) > l.MaxOutputTokens {
			return int(l.MaxOutputTokens)
		}
	}
	return n
}

// PriceRef names a model in a pricing namespace.
type PriceRef struct{ NS, Model string }

// Price prices usage u of an answer by the first of refs the catalog lists:
// the model the answer names, then the model the request asked for (a new
// dated snapshot, a fine-tune or a deployment name the catalog does not
// know is priced as what was asked). priced is false when none is
// listed (or there is no catalog): the cost is then zero and must not be
// taken as the bill. Usage of no tokens is priced at zero.
func (b *Base) Price(u provider.Usage, refs ...PriceRef) (cost provider.Money, priced bool) {
	if u == (provider.Usage{Estimated: u.Estimated}) {
		return 0, true
	}
	if b.Pricer == nil {
		return 0, false
	}
	for _, r := range refs {
		if r.Model == "" {
			continue
		}
		if c, err := b.Pricer.Cost(r.NS, r.Model, u, b.Now()); err == nil {
			return c, true
		}
	}
	return 0, false
}

// ClassifyLocal classifies a failure that did not come from the provider's
// answer: the attempt timeout, the caller's cancellation or deadline, a
// transport failure, an answer larger than the provider's cap. It returns
// false for anything else, which the vendor code classifies. An
// unreadable answer (the SDK could not decode it) is a server error.
func (b *Base) ClassifyLocal(ctx context.Context, err error, model string) (*provider.Error, bool) {
	if pe, ok := b.TooLarge(ctx, err, model); ok {
		// What the SDK made of the body it stopped reading follows from
		// the cap, as does any later cancellation of the attempt.
		return pe, true
	}
	pe := &provider.Error{Provider: b.Name, Model: model}
	var ne net.Error
	var oe *net.OpError
	switch {
	case ctx.Err() != nil && context.Cause(ctx) == ErrAttemptTimeout:
		pe.Kind = provider.KindTimeout
		pe.Diagnostic.Message = "no complete answer within the attempt timeout"
	case ctx.Err() != nil:
		// The caller gave up; whatever the SDK made of the cut connection
		// (a read or decode error) is a consequence.
		pe.Kind, pe.Err = provider.KindCanceled, context.Cause(ctx)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			pe.Kind = provider.KindTimeout
		}
	case errors.Is(err, context.Canceled):
		pe.Kind, pe.Err = provider.KindCanceled, err
	case errors.Is(err, context.DeadlineExceeded):
		pe.Kind, pe.Err = provider.KindTimeout, err
	case decodeFailure(err):
		// The body came whole but is not valid JSON: the provider's
		// answer, not the connection, is broken (a truncated document
		// ends in io.ErrUnexpectedEOF all the same).
		return nil, false
	case errors.As(err, &oe), errors.As(err, &ne):
		pe.Kind, pe.Err = provider.KindNetwork, err
		if ne != nil && ne.Timeout() {
			pe.Kind = provider.KindTimeout
		}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), isTransport(err):
		pe.Kind, pe.Err = provider.KindNetwork, err
	default:
		return nil, false
	}
	return pe, true
}

// Unreadable is the error for an answer the SDK could not decode: the
// provider broke its own protocol.
func (b *Base) Unreadable(err error, model string) *provider.Error {
	return &provider.Error{Kind: provider.KindServer, Provider: b.Name, Model: model, Diagnostic: provider.Diagnostic{Message: "unreadable response"}, Err: err}
}

// decodeFailure reports whether err is the SDK's failure to parse a body
// it had already read in full ("error parsing response json: …", as the
// Anthropic and OpenAI SDKs say; a failed read is "error reading response
// body: …").
func decodeFailure(err error) bool {
	return strings.Contains(err.Error(), "error parsing response json")
}

func isTransport(err error) bool {
	s := err.Error()
	for _, frag := range []string{"connection reset", "connection refused", "broken pipe", "unexpected EOF", "no such host", "TLS handshake", "server closed"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

// Finish redacts the adapter's credential from the error's message and
// cause before it leaves the adapter.
func (b *Base) Finish(pe *provider.Error) *provider.Error {
	pe.Diagnostic.Message = provider.Redact(pe.Diagnostic.Message, b.Secret)
	if pe.Err != nil {
		if _, done := pe.Err.(redacted); !done {
			pe.Err = redacted{pe.Err, provider.Redact(pe.Err.Error(), b.Secret)}
		}
	}
	return pe
}

// redacted wraps an error whose text might quote a credential. It keeps
// the redacted text, not the credential: a formatter that prints the
// error's fields (%+v, %#v) finds no secret in it.
type redacted struct {
	err error
	msg string
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

// Canceled is the error a stream reports after its caller closed it.
func (b *Base) Canceled(model string) *provider.Error {
	return &provider.Error{Kind: provider.KindCanceled, Provider: b.Name, Model: model, Diagnostic: provider.Diagnostic{Message: "stream closed by the caller"}}
}

// Truncated is the error of a stream that ended before its end marker.
func (b *Base) Truncated(model, what, requestID string) *provider.Error {
	return &provider.Error{Kind: provider.KindNetwork, Provider: b.Name, Model: model, Diagnostic: provider.Diagnostic{Message: "stream ended without " + what + " (truncated)", RequestID: requestID}}
}

// Protocol is the error of an answer that breaks the provider's protocol.
func (b *Base) Protocol(model, requestID, msg string) *provider.Error {
	return &provider.Error{Kind: provider.KindServer, Provider: b.Name, Model: model, Diagnostic: provider.Diagnostic{Message: msg, RequestID: requestID}}
}

// RetryAfterHeader reads retry-after-ms, then retry-after (seconds or an
// HTTP date), capped at [MaxRetryAfter]; zero when absent.
func RetryAfterHeader(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return min(time.Duration(ms*float64(time.Millisecond)), MaxRetryAfter)
		}
	}
	if v := h.Get("retry-after"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			return min(time.Duration(s*float64(time.Second)), MaxRetryAfter)
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return min(t.Sub(now), MaxRetryAfter)
		}
	}
	return 0
}

var htmlTitle = regexp.MustCompile(`(?is)<title>(.*?)</title>`)

// LooksLikeHTML reports whether an error body is a web page rather than the
// provider's JSON.
func LooksLikeHTML(contentType, body string) bool {
	return strings.Contains(contentType, "html") || strings.HasPrefix(strings.TrimSpace(body), "<")
}

// DescribeBody turns an error body that is not the provider's JSON into a
// diagnostic: a proxy's HTML page by its title, an empty body, or the start
// of whatever else came.
func DescribeBody(status int, contentType, body string) string {
	raw := strings.TrimSpace(body)
	if raw == "" {
		return "empty error body (status " + strconv.Itoa(status) + ")"
	}
	if LooksLikeHTML(contentType, raw) {
		title := ""
		if m := htmlTitle.FindStringSubmatch(raw); m != nil {
			title = ": " + strings.TrimSpace(m[1])
		}
		return "non-JSON error page from an intermediary (proxy or gateway)" + title
	}
	if len(raw) > 200 {
		raw = raw[:200] + "…"
	}
	return "unexpected error body: " + raw
}

// Limits keeps the latest rate-limit status an adapter observed; the zero
// value reports nothing known. It is safe for concurrent use.
type Limits struct {
	mu sync.Mutex
	s  provider.RateLimitStatus
}

// Status returns the latest status.
func (l *Limits) Status() provider.RateLimitStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s
}

// Record keeps s when it says anything at all.
func (l *Limits) Record(s provider.RateLimitStatus) {
	if !s.Known() {
		return
	}
	l.mu.Lock()
	l.s = s
	l.mu.Unlock()
}
