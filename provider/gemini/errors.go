package gemini

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

var (
	overflowRE = regexp.MustCompile(`(?i)input token count.*exceeds the maximum|exceeds the maximum number of tokens`)
)

// classify turns any failure into a *provider.Error.
func (a *Adapter) classify(ctx context.Context, err error, model string) *provider.Error {
	var apiErr *apiError
	var pe *provider.Error
	switch {
	case errors.As(err, &apiErr):
		pe = &provider.Error{Provider: a.base.Name, Model: model}
		a.fromAPIError(pe, apiErr)
	default:
		var ok bool
		if pe, ok = a.base.ClassifyLocal(ctx, err, model); !ok {
			pe = a.base.Unreadable(err, model)
		}
	}
	if pe.Kind == provider.KindRateLimit {
		a.observeRetry(pe.RetryAfter)
	}
	return a.base.Finish(pe)
}

// detail returns the details of one google.rpc type ("RetryInfo").
func details(e *apiError, typ string) []map[string]any {
	var out []map[string]any
	for _, d := range e.Details {
		if t, _ := d["@type"].(string); strings.HasSuffix(t, "google.rpc."+typ) {
			out = append(out, d)
		}
	}
	return out
}

// fromAPIError classifies on the HTTP code, the google.rpc status and the
// details: a bad key is a 400 with ErrorInfo API_KEY_INVALID (auth); a token
// overflow is a 400 (context window); a 429 is a rate limit whose delay is
// RetryInfo.retryDelay, unless a per-day quota is exhausted.
func (a *Adapter) fromAPIError(pe *provider.Error, e *apiError) {
	msg := e.Message
	if adapterkit.LooksLikeHTML("", msg) {
		msg = adapterkit.DescribeBody(e.Code, "text/html", msg)
	}
	status := e.Status
	pe.Diagnostic = provider.Diagnostic{Status: e.Code, Type: status, Message: msg}
	for _, d := range details(e, "ErrorInfo") {
		if r, _ := d["reason"].(string); r != "" {
			pe.Diagnostic.Code = r
		}
	}
	switch {
	case pe.Diagnostic.Code == "API_KEY_INVALID" || strings.Contains(msg, "API key not valid") || e.Code == 401 || e.Code == 403 || status == "PERMISSION_DENIED" || status == "UNAUTHENTICATED":
		pe.Kind = provider.KindAuth
	case overflowRE.MatchString(msg):
		pe.Kind = provider.KindContextWindowExceeded
	case e.Code == 429 || status == "RESOURCE_EXHAUSTED":
		pe.Kind = provider.KindRateLimit
		for _, d := range details(e, "QuotaFailure") {
			if vs, _ := d["violations"].([]any); len(vs) > 0 {
				for _, v := range vs {
					if vm, _ := v.(map[string]any); vm != nil {
						if id, _ := vm["quotaId"].(string); strings.Contains(id, "PerDay") {
							pe.Kind = provider.KindQuotaExhausted
							pe.Diagnostic.Code = id
						}
					}
				}
			}
		}
		if pe.Kind == provider.KindRateLimit {
			for _, d := range details(e, "RetryInfo") {
				if s, _ := d["retryDelay"].(string); s != "" {
					if dur, err := time.ParseDuration(s); err == nil && dur > 0 {
						pe.RetryAfter = min(dur, adapterkit.MaxRetryAfter)
					}
				}
			}
		}
	case status == "FAILED_PRECONDITION" && strings.Contains(strings.ToLower(msg), "billing"):
		pe.Kind = provider.KindQuotaExhausted
	case e.Code == 504 || status == "DEADLINE_EXCEEDED":
		pe.Kind = provider.KindTimeout
	case e.Code == 503 || status == "UNAVAILABLE":
		pe.Kind = provider.KindOverloaded
	case e.Code >= 500:
		pe.Kind = provider.KindServer
	default:
		pe.Kind = provider.KindBadRequest
	}
}
