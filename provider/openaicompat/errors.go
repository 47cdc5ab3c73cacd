package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/cortexbuild/cortexbuild/provider"
)

// errBody is an error body read leniently: OpenAI's {"error":{…}}, vLLM's
// integer code or older top-level shape, a gateway's bare string or FastAPI
// "detail".
type errBody struct {
	Type, Code, Message, Param string
}

// jsonString accepts a JSON string, number or null as text.
type jsonString string

func (s *jsonString) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		*s = jsonString(x)
	case float64:
		*s = jsonString(strconv.FormatFloat(x, 'f', -1, 64))
	case nil:
		*s = ""
	default:
		*s = jsonString(string(b))
	}
	return nil
}

type wireError struct {
	Message jsonString `json:"message"`
	Type    jsonString `json:"type"`
	Code    jsonString `json:"code"`
	Param   jsonString `json:"param"`
}

func parseErrorBody(b []byte) (errBody, bool) {
	var top struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
		Detail json.RawMessage `json:"detail"`
		wireError
	}
	if json.Unmarshal(bytes.TrimSpace(b), &top) != nil {
		return errBody{}, false
	}
	var w wireError
	var str string
	switch {
	case len(top.Error) > 0 && json.Unmarshal(top.Error, &w) == nil && (w.Message != "" || w.Type != "" || w.Code != ""):
	case len(top.Error) > 0 && json.Unmarshal(top.Error, &str) == nil:
		w.Message = jsonString(str)
	case top.Message != "" || top.Object == "error":
		w = top.wireError
	case len(top.Detail) > 0:
		if json.Unmarshal(top.Detail, &str) != nil {
			str = string(top.Detail)
		}
		w.Message = jsonString(str)
	default:
		return errBody{}, false
	}
	return errBody{Type: string(w.Type), Code: string(w.Code), Message: string(w.Message), Param: string(w.Param)}, true
}

var (
	overflowRE  = regexp.MustCompile(`(?i)maximum context length|context length|context window|exceeds the context|too many tokens|prompt is too long|input is too long`)
	tryAgainRE  = regexp.MustCompile(`(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|s|m|h))+)`)
	overloadRE  = regexp.MustCompile(`(?i)overloaded|slow down|capacity`)
	htmlTitleRE = regexp.MustCompile(`(?is)<title>(.*?)</title>`)
)

// classify turns any failure into a *provider.Error. raw is the HTTP
// response when there was one: its status, headers and body decide, not
// the SDK's parse of it (which fails on a proxy's HTML page).
func (a *Adapter) classify(ctx context.Context, err error, raw *http.Response, model string) *provider.Error {
	pe := &provider.Error{Provider: a.name, Model: model}
	var se *ssestream.StreamError
	var apiErr *openai.Error
	switch {
	case raw != nil && raw.StatusCode >= 400:
		body := readBody(raw)
		a.fromHTTP(pe, raw.StatusCode, raw.Header, body)
	case errors.As(err, &se):
		eb, _ := parseErrorBody(se.Event.Data)
		a.fromBody(pe, http.StatusOK, eb)
	case errors.As(err, &apiErr):
		a.fromBody(pe, apiErr.StatusCode, errBody{Type: apiErr.Type, Code: apiErr.Code, Message: apiErr.Message, Param: apiErr.Param})
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
	if raw != nil && pe.Diagnostic.RequestID == "" {
		pe.Diagnostic.RequestID = raw.Header.Get("x-request-id")
	}
	pe.Diagnostic.Message = provider.Redact(pe.Diagnostic.Message, a.key)
	if pe.Err != nil {
		pe.Err = redacted{pe.Err, a.key}
	}
	return pe
}

func (a *Adapter) protocolError(model string, raw *http.Response, msg string) *provider.Error {
	pe := &provider.Error{Kind: provider.KindServer, Provider: a.name, Model: model, Diagnostic: provider.Diagnostic{Message: msg}}
	if raw != nil {
		pe.Diagnostic.RequestID = raw.Header.Get("x-request-id")
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

func readBody(r *http.Response) []byte {
	if r.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

func (a *Adapter) fromHTTP(pe *provider.Error, status int, h http.Header, body []byte) {
	eb, ok := parseErrorBody(body)
	if !ok {
		eb.Message = nonJSONBody(status, h.Get("content-type"), body)
	}
	pe.RetryAfter = retryAfter(h, eb.Message, a.now())
	a.fromBody(pe, status, eb)
	if pe.Kind != provider.KindRateLimit {
		pe.RetryAfter = retryAfterHeader(h, a.now()) // overload may carry one too
	}
	a.observe(h, pe.RetryAfter)
}

// fromBody classifies on status, type, code and message. Status 200 is an
// error inside a stream.
func (a *Adapter) fromBody(pe *provider.Error, status int, eb errBody) {
	pe.Diagnostic = provider.Diagnostic{Status: status, Type: eb.Type, Code: eb.Code, Message: eb.Message, Param: eb.Param}
	tc := strings.ToLower(eb.Type + " " + eb.Code)
	switch {
	case strings.Contains(tc, "context_length_exceeded") || ((status == 400 || status == 413 || status == 422 || status == 200) && overflowRE.MatchString(eb.Message)):
		pe.Kind = provider.KindContextWindowExceeded
	case strings.Contains(tc, "insufficient_quota") || strings.Contains(tc, "billing") || status == 402:
		pe.Kind = provider.KindQuotaExhausted
	case strings.Contains(tc, "invalid_api_key") || status == 401 || status == 403:
		pe.Kind = provider.KindAuth
	case status == 429 || strings.Contains(tc, "rate_limit"):
		pe.Kind = provider.KindRateLimit
	case status == 408 || status == 504:
		pe.Kind = provider.KindTimeout
	case status == 503 || status == 529 || overloadRE.MatchString(eb.Message) && (status >= 500 || status == 200):
		pe.Kind = provider.KindOverloaded
	case status >= 500 || status == 200:
		pe.Kind = provider.KindServer
	default:
		pe.Kind = provider.KindBadRequest
	}
}

func nonJSONBody(status int, contentType string, body []byte) string {
	raw := strings.TrimSpace(string(body))
	if raw == "" {
		return "empty error body (status " + strconv.Itoa(status) + ")"
	}
	if strings.Contains(contentType, "html") || strings.HasPrefix(raw, "<") {
		title := ""
		if m := htmlTitleRE.FindStringSubmatch(raw); m != nil {
			title = ": " + strings.TrimSpace(m[1])
		}
		return "non-JSON error page from an intermediary (proxy or gateway)" + title
	}
	if len(raw) > 200 {
		raw = raw[:200] + "…"
	}
	return "unexpected error body: " + raw
}

const maxRetryAfter = 24 * time.Hour

func retryAfterHeader(h http.Header, now time.Time) time.Duration {
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

// retryAfter finds a rate limit's delay: retry-after-ms, retry-after, the
// reset of the exhausted x-ratelimit window, or the message's "try again
// in 2.4s".
func retryAfter(h http.Header, msg string, now time.Time) time.Duration {
	if d := retryAfterHeader(h, now); d > 0 {
		return d
	}
	var d time.Duration
	for _, kind := range []string{"requests", "tokens"} {
		if h.Get("x-ratelimit-remaining-"+kind) == "0" {
			if r, ok := parseResetDuration(h.Get("x-ratelimit-reset-" + kind)); ok && r > d {
				d = r
			}
		}
	}
	if d > 0 {
		return min(d, maxRetryAfter)
	}
	if m := tryAgainRE.FindStringSubmatch(msg); m != nil {
		if r, err := time.ParseDuration(m[1]); err == nil && r > 0 {
			return min(r, maxRetryAfter)
		}
	}
	return 0
}
