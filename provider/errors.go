package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind classifies a provider failure. The orchestrator applies the spec's
// failure table by Kind alone, never by status code or message text.
//
// A Kind is itself an error value so that callers can write
// errors.Is(err, provider.KindRateLimit).
type Kind uint8

// The kinds. The first seven are the rows of the spec's failure table; the
// rest refine them where the right response differs.
const (
	KindUnknown Kind = iota
	// KindTimeout: the attempt ran out of time (per-attempt timeout or a
	// provider 504/408). Retry once on a smaller tier, then fail over.
	KindTimeout
	// KindRateLimit: a 429 that clears by waiting; RetryAfter says how long
	// when the provider said.
	KindRateLimit
	// KindAuth: the credentials were refused (401, 403, an invalid key).
	// Pause the project; never retry.
	KindAuth
	// KindBadRequest: the request is wrong; the Diagnostic says why. Never
	// retry.
	KindBadRequest
	// KindServer: the provider failed (5xx, or an answer that breaks its own
	// protocol). Retry with backoff.
	KindServer
	// KindNetwork: the provider could not be reached, or the connection broke
	// (including a stream cut before its end marker). Retry once.
	KindNetwork
	// KindCapabilityMissing: the provider or model cannot do what the request
	// needs; Capability names it. Re-route.
	KindCapabilityMissing
	// KindQuotaExhausted: a 429/400/402 that will not clear by waiting
	// (billing, spend limit, per-day quota). No retry; fail over if enabled.
	KindQuotaExhausted
	// KindContextWindowExceeded: the prompt does not fit this model's window;
	// a longer-context model could serve it.
	KindContextWindowExceeded
	// KindOverloaded: the provider is temporarily overloaded (529, 503). A
	// server-class failure: backoff, then fail over.
	KindOverloaded
	// KindCanceled: the caller's context was cancelled. Stop; never retry.
	KindCanceled
	kindCount
)

var kindNames = [kindCount]string{
	KindUnknown:               "unknown",
	KindTimeout:               "timeout",
	KindRateLimit:             "rate_limit",
	KindAuth:                  "auth",
	KindBadRequest:            "bad_request",
	KindServer:                "server",
	KindNetwork:               "network",
	KindCapabilityMissing:     "capability_missing",
	KindQuotaExhausted:        "quota_exhausted",
	KindContextWindowExceeded: "context_window_exceeded",
	KindOverloaded:            "overloaded",
	KindCanceled:              "canceled",
}

// Kinds lists every kind but KindUnknown.
func Kinds() []Kind {
	out := make([]Kind, 0, kindCount-1)
	for k := KindUnknown + 1; k < kindCount; k++ {
		out = append(out, k)
	}
	return out
}

// String returns the kind's name, such as "rate_limit".
func (k Kind) String() string {
	if k < kindCount {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Error makes a Kind usable as an errors.Is target.
func (k Kind) Error() string { return "provider: " + k.String() }

// ServerClass reports whether k is a provider-side failure worth retrying
// with backoff (server error or overload).
func (k Kind) ServerClass() bool { return k == KindServer || k == KindOverloaded }

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown error kind %q", string(b))
}

// Diagnostic is everything the provider said about a failure, for the user
// and for support: never a credential.
type Diagnostic struct {
	// Status is the HTTP status (200 for an error event inside a stream).
	Status int `json:"status,omitempty"`
	// Type and Code are the provider's error type and code, as sent.
	Type string `json:"type,omitempty"`
	Code string `json:"code,omitempty"`
	// Param is the request field the provider blamed, when it says.
	Param string `json:"param,omitempty"`
	// Message is the provider's message, secrets redacted.
	Message string `json:"message,omitempty"`
	// RequestID is the provider's request id.
	RequestID string `json:"request_id,omitempty"`
}

// Error is the one error type adapters return. Use errors.Is with a [Kind]
// (errors.Is(err, provider.KindRateLimit)) or errors.As to read the fields.
type Error struct {
	Kind Kind
	// Provider is the adapter instance name; Model the model addressed.
	Provider string
	Model    string
	// RetryAfter is the delay the provider asked for (rate limits,
	// overload); zero when it did not say.
	RetryAfter time.Duration
	// Capability is the missing capability, for KindCapabilityMissing.
	Capability Capability
	// Diagnostic is what the provider said.
	Diagnostic Diagnostic
	// Usage is what was billed before the failure (a stream that broke
	// midway), or nil when nothing was; Cost is its price, and Unpriced
	// says the catalog could not price it (as [Result.Unpriced]).
	Usage    *Usage
	Cost     Money
	Unpriced bool
	// Reply is the provider's error answer as it came, when the request
	// was relayed in its client's protocol ([Request.Native]): the
	// status, headers and body of an error status, or (Status 200) the
	// raw error event that ended a stream. Nil otherwise.
	Reply *NativeReply
	// Err is the underlying cause, if any.
	Err error
}

// Error formats the failure for a person: provider, kind, status, the
// provider's type and message, request id, retry delay, cause.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Provider != "" {
		b.WriteString(e.Provider)
		if e.Model != "" {
			b.WriteString(" (" + e.Model + ")")
		}
		b.WriteString(": ")
	}
	b.WriteString(strings.ReplaceAll(e.Kind.String(), "_", " "))
	d := e.Diagnostic
	var tags []string
	if d.Status != 0 {
		tags = append(tags, strconv.Itoa(d.Status))
	}
	if d.Type != "" {
		tags = append(tags, d.Type)
	}
	if d.Code != "" && d.Code != d.Type {
		tags = append(tags, d.Code)
	}
	if len(tags) > 0 {
		b.WriteString(" (" + strings.Join(tags, " ") + ")")
	}
	if e.Kind == KindCapabilityMissing && e.Capability != "" {
		b.WriteString(": missing " + string(e.Capability))
	}
	if d.Message != "" {
		b.WriteString(": " + d.Message)
	}
	if d.Param != "" {
		b.WriteString(" [param " + d.Param + "]")
	}
	if d.RequestID != "" {
		b.WriteString(" [request " + d.RequestID + "]")
	}
	if e.RetryAfter > 0 {
		b.WriteString("; retry after " + e.RetryAfter.String())
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, k) true for the error's Kind k.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// KindOf returns the Kind of err: the kind of the first [*Error] in its
// chain; KindCanceled or KindTimeout for bare context errors; KindUnknown
// otherwise (and for nil).
func KindOf(err error) Kind {
	if err == nil {
		return KindUnknown
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	switch {
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	}
	return KindUnknown
}

// RetryAfterOf returns the retry delay carried by err, or zero.
func RetryAfterOf(err error) time.Duration {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.RetryAfter
	}
	return 0
}

// ErrCapabilityMissing returns the error for a request that needs a
// capability a provider or model lacks.
func ErrCapabilityMissing(providerName, model string, c Capability) *Error {
	return &Error{Kind: KindCapabilityMissing, Provider: providerName, Model: model, Capability: c}
}

// Redact replaces every occurrence of each non-empty secret in s with
// "[REDACTED]". Adapters pass provider messages through it with their own
// credentials before putting them in a Diagnostic.
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	return s
}
