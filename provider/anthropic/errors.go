package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

var promptTooLong = regexp.MustCompile(`(?i)prompt is too long|context window|too many tokens`)

// classify turns any failure of an SDK call into a *provider.Error. ctx is
// the attempt's context: its cause tells our timeout from the caller's
// cancellation.
func (a *Adapter) classify(ctx context.Context, err error, model string) *provider.Error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		pe := &provider.Error{Provider: a.base.Name, Model: model}
		a.fromAPIError(pe, apiErr) // the SDK's own text repeats the body; the Diagnostic has it
		return a.base.Finish(pe)
	}
	if pe, ok := a.base.ClassifyLocal(ctx, err, model); ok {
		return a.base.Finish(pe)
	}
	return a.base.Finish(a.base.Unreadable(err, model))
}

// bodyRequestID returns the request_id of an error body
// ({"type":"error","error":{...},"request_id":"req_..."}), or "".
func bodyRequestID(raw string) string {
	var b struct {
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal([]byte(raw), &b) != nil {
		return ""
	}
	return b.RequestID
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
	if d.RequestID == "" {
		// A proxy may strip the header; the error body names the request too.
		d.RequestID = bodyRequestID(e.RawJSON())
	}
	if d.Message == "" && typ == "" {
		ct := ""
		if h != nil {
			ct = h.Get("content-type")
		}
		d.Message = adapterkit.DescribeBody(e.StatusCode, ct, e.RawJSON())
	}
	pe.Diagnostic = d
	pe.RetryAfter = adapterkit.RetryAfterHeader(h, a.base.Now())
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
	case s >= 500 || s == 200 || s == 409:
		pe.Kind = provider.KindServer
	default:
		pe.Kind = provider.KindBadRequest
		if promptTooLong.MatchString(e.Message) {
			pe.Kind = provider.KindContextWindowExceeded
		}
	}
}
