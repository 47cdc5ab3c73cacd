package anthropic

import (
	"context"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/cortexbuild/cortexbuild/provider"
)

var promptTooLong = regexp.MustCompile(`(?i)prompt is too long|context window|too many tokens`)

// classify turns any failure of an SDK call into a *provider.Error. ctx is
// the attempt's context: its cause tells our timeout from the caller's
// cancellation.
func (a *Adapter) classify(ctx context.Context, err error, model string) *provider.Error {
	pe := &provider.Error{Provider: a.name, Model: model, Err: err}
	var apiErr *anthropic.Error
	switch {
	case errors.As(err, &apiErr):
		a.fromAPIError(pe, apiErr)
		pe.Err = nil // the SDK's text repeats the body; the Diagnostic has it
	case ctx.Err() != nil && context.Cause(ctx) == errAttemptTimeout:
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
		pe.Kind = provider.KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		pe.Kind = provider.KindTimeout
	default:
		var ne net.Error
		var oe *net.OpError
		switch {
		case errors.As(err, &oe), errors.As(err, &ne):
			pe.Kind = provider.KindNetwork
			if ne != nil && ne.Timeout() {
				pe.Kind = provider.KindTimeout
			}
		case isTransport(err):
			pe.Kind = provider.KindNetwork
		default:
			// A body the SDK could not decode: the provider broke its protocol.
			pe.Kind = provider.KindServer
			pe.Diagnostic.Message = "unreadable response"
		}
	}
	pe.Diagnostic.Message = provider.Redact(pe.Diagnostic.Message, a.key)
	if pe.Err != nil {
		pe.Err = redacted{pe.Err, a.key}
	}
	return pe
}

// redacted wraps an error whose text might quote a credential.
type redacted struct {
	err    error
	secret string
}

func (r redacted) Error() string { return provider.Redact(r.err.Error(), r.secret) }
func (r redacted) Unwrap() error { return r.err }

func isTransport(err error) bool {
	s := err.Error()
	for _, frag := range []string{"connection reset", "connection refused", "broken pipe", "EOF", "no such host", "TLS handshake", "server closed"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

func (a *Adapter) fromAPIError(pe *provider.Error, e *anthropic.Error) {
	typ := string(e.Type())
	code := string(e.ErrorCode())
	d := provider.Diagnostic{Status: e.StatusCode, Type: typ, Code: code, Message: e.Message, RequestID: e.RequestID}
	var h http.Header
	if e.Response != nil {
		h = e.Response.Header
		if d.RequestID == "" {
			d.RequestID = h.Get("request-id")
		}
	}
	if d.Message == "" && typ == "" {
		d.Message = nonJSONBody(e)
	}
	pe.Diagnostic = d
	pe.RetryAfter = retryAfter(h, a.now())
	if e.StatusCode != http.StatusOK {
		a.observe(h, pe.RetryAfter)
	}
	// The error type decides first: it is also what an error event inside a
	// 200 stream carries.
	switch typ {
	case "overloaded_error":
		pe.Kind = provider.KindOverloaded
		return
	case "rate_limit_error":
		pe.Kind = provider.KindRateLimit
		if code == "enforced_spend_limit_reached" {
			pe.Kind, pe.RetryAfter = provider.KindQuotaExhausted, 0
		}
		return
	case "authentication_error", "permission_error":
		pe.Kind = provider.KindAuth
		return
	case "billing_error":
		pe.Kind = provider.KindQuotaExhausted
		return
	case "timeout_error":
		pe.Kind = provider.KindTimeout
		return
	case "api_error":
		pe.Kind = provider.KindServer
		return
	case "invalid_request_error", "not_found_error", "request_too_large":
		pe.Kind = provider.KindBadRequest
		if promptTooLong.MatchString(e.Message) {
			pe.Kind = provider.KindContextWindowExceeded
		}
		return
	}
	switch s := e.StatusCode; {
	case s == 401 || s == 403:
		pe.Kind = provider.KindAuth
	case s == 402:
		pe.Kind = provider.KindQuotaExhausted
	case s == 429:
		pe.Kind = provider.KindRateLimit
	case s == 408 || s == 504:
		pe.Kind = provider.KindTimeout
	case s == 529 || s == 503:
		pe.Kind = provider.KindOverloaded
	case s >= 500 || s == 200:
		pe.Kind = provider.KindServer
	case s == 409:
		pe.Kind = provider.KindServer
	default:
		pe.Kind = provider.KindBadRequest
		if promptTooLong.MatchString(e.Message) {
			pe.Kind = provider.KindContextWindowExceeded
		}
	}
}

// nonJSONBody describes a body that is not Anthropic's error JSON, such as
// a proxy's HTML error page.
func nonJSONBody(e *anthropic.Error) string {
	raw := strings.TrimSpace(e.RawJSON())
	if raw == "" {
		return "empty error body (status " + strconv.Itoa(e.StatusCode) + ")"
	}
	ct := ""
	if e.Response != nil {
		ct = e.Response.Header.Get("content-type")
	}
	if strings.Contains(ct, "html") || strings.HasPrefix(raw, "<") {
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

var htmlTitle = regexp.MustCompile(`(?is)<title>(.*?)</title>`)

// maxRetryAfter caps a provider-requested delay; anything longer is
// treated as a day, and the orchestrator's own cap applies on top.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads retry-after-ms, then retry-after (seconds or an HTTP
// date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return min(time.Duration(ms*float64(time.Millisecond)), maxRetryAfter)
		}
	}
	if v := h.Get("retry-after"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			return min(time.Duration(s*float64(time.Second)), maxRetryAfter)
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return min(t.Sub(now), maxRetryAfter)
		}
	}
	return 0
}
