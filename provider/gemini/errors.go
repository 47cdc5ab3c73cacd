package gemini

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/cortexbuild/cortexbuild/provider"
)

var (
	overflowRE  = regexp.MustCompile(`(?i)input token count.*exceeds the maximum|exceeds the maximum number of tokens`)
	htmlTitleRE = regexp.MustCompile(`(?is)<title>(.*?)</title>`)
)

// maxRetryAfter caps a provider-requested delay.
const maxRetryAfter = 24 * time.Hour

// classify turns any failure into a *provider.Error.
func (a *Adapter) classify(ctx context.Context, err error, model string) *provider.Error {
	pe := &provider.Error{Provider: a.name, Model: model}
	var apiErr genai.APIError
	var apiErrPtr *genai.APIError
	switch {
	case errors.As(err, &apiErr):
		a.fromAPIError(pe, apiErr)
	case errors.As(err, &apiErrPtr):
		a.fromAPIError(pe, *apiErrPtr)
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
		pe.Kind, pe.Err = provider.KindCanceled, err
	case errors.Is(err, context.DeadlineExceeded):
		pe.Kind, pe.Err = provider.KindTimeout, err
	default:
		pe.Err = err
		var ne net.Error
		var oe *net.OpError
		switch {
		case errors.As(err, &oe), errors.As(err, &ne):
			pe.Kind = provider.KindNetwork
			if ne != nil && ne.Timeout() {
				pe.Kind = provider.KindTimeout
			}
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), isTransport(err):
			pe.Kind = provider.KindNetwork
		default:
			pe.Kind = provider.KindServer
			pe.Diagnostic.Message = "unreadable response"
		}
	}
	pe.Diagnostic.Message = provider.Redact(pe.Diagnostic.Message, a.key)
	if pe.Err != nil {
		pe.Err = redacted{pe.Err, a.key}
	}
	if pe.Kind == provider.KindRateLimit {
		a.observeRetry(pe.RetryAfter)
	}
	return pe
}

type redacted struct {
	err    error
	secret string
}

func (r redacted) Error() string { return provider.Redact(r.err.Error(), r.secret) }
func (r redacted) Unwrap() error { return r.err }

func isTransport(err error) bool {
	s := err.Error()
	for _, frag := range []string{"connection reset", "connection refused", "broken pipe", "unexpected EOF", "no such host", "TLS handshake", "server closed"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

// detail returns the details of one google.rpc type ("RetryInfo").
func details(e genai.APIError, typ string) []map[string]any {
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
func (a *Adapter) fromAPIError(pe *provider.Error, e genai.APIError) {
	msg := e.Message
	if strings.HasPrefix(strings.TrimSpace(msg), "<") {
		title := ""
		if m := htmlTitleRE.FindStringSubmatch(msg); m != nil {
			title = ": " + strings.TrimSpace(m[1])
		}
		msg = "non-JSON error page from an intermediary (proxy or gateway)" + title
	}
	status := e.Status
	if _, err := strconv.Atoi(strings.Fields(status + " x")[0]); err == nil {
		status = "" // the SDK puts "502 Bad Gateway" here for non-JSON bodies
	}
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
						pe.RetryAfter = min(dur, maxRetryAfter)
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
