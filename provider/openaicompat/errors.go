package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"

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
	overflowRE = regexp.MustCompile(`(?i)maximum context length|context length|context window|exceeds the context|too many tokens|prompt is too long|input is too long`)
	tryAgainRE = regexp.MustCompile(`(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|s|m|h))+)`)
	overloadRE = regexp.MustCompile(`(?i)overloaded|slow down|capacity`)
)

// classify turns any failure into a *provider.Error. raw is the HTTP
// response when there was one: its status, headers and body decide, not
// the SDK's parse of it (which fails on a proxy's HTML page or a bare
// string error).
func (a *Adapter) classify(ctx context.Context, err error, raw *http.Response, model string) *provider.Error {
	pe := &provider.Error{Provider: a.base.Name, Model: model}
	var se *ssestream.StreamError
	var apiErr *openai.Error
	tooLarge, over := a.base.TooLarge(ctx, err, model)
	switch {
	case over:
		// Before the status: an error body past the cap was not read whole.
		pe = tooLarge
	case raw != nil && raw.StatusCode >= 400:
		a.fromHTTP(pe, raw.StatusCode, raw.Header, readBody(raw))
		pe.Diagnostic.RequestID = raw.Header.Get("x-request-id")
	case errors.As(err, &se):
		eb, _ := parseErrorBody(se.Event.Data)
		a.fromBody(pe, http.StatusOK, eb)
	case errors.As(err, &apiErr):
		a.fromBody(pe, apiErr.StatusCode, errBody{Type: apiErr.Type, Code: apiErr.Code, Message: apiErr.Message, Param: apiErr.Param})
	default:
		local, ok := a.base.ClassifyLocal(ctx, err, model)
		if !ok {
			local = a.base.Unreadable(err, model)
		}
		pe = local
	}
	if raw != nil && pe.Diagnostic.RequestID == "" {
		pe.Diagnostic.RequestID = raw.Header.Get("x-request-id")
	}
	return a.base.Finish(pe)
}

func (a *Adapter) protocolError(model string, raw *http.Response, msg string) *provider.Error {
	id := ""
	if raw != nil {
		id = raw.Header.Get("x-request-id")
	}
	return a.base.Protocol(model, id, msg)
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
		eb.Message = adapterkit.DescribeBody(status, h.Get("content-type"), string(body))
	}
	a.fromBody(pe, status, eb)
	if pe.Kind == provider.KindRateLimit {
		pe.RetryAfter = retryAfter(h, eb.Message, a.base.Now())
	} else {
		pe.RetryAfter = adapterkit.RetryAfterHeader(h, a.base.Now()) // overload may carry one too
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

// retryAfter finds a rate limit's delay: retry-after-ms, retry-after, the
// reset of the exhausted x-ratelimit window, or the message's "try again
// in 2.4s".
func retryAfter(h http.Header, msg string, now time.Time) time.Duration {
	if d := adapterkit.RetryAfterHeader(h, now); d > 0 {
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
		return min(d, adapterkit.MaxRetryAfter)
	}
	if m := tryAgainRE.FindStringSubmatch(msg); m != nil {
		if r, err := time.ParseDuration(m[1]); err == nil && r > 0 {
			return min(r, adapterkit.MaxRetryAfter)
		}
	}
	return 0
}
