package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/cortexbuild/cortexbuild/provider"
)

// DefaultMaxResponseBytes bounds a provider's answer when the
// configuration sets no max_response_bytes: 32 MiB.
const DefaultMaxResponseBytes int64 = 32 << 20

// TooLargeError is the read error of a response body that went past its
// provider's max_response_bytes. The SDKs pass a body's read error on
// (wrapped with %w, or as it is), so errors.As finds it in what they
// return, unary or streamed.
type TooLargeError struct {
	Provider string
	Max      int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("response from %s exceeded max_response_bytes (%d)", e.Provider, e.Max)
}

// HTTPClient returns the client the adapter sends every request with: hc
// (a plain client when nil), its transport wrapped so that no response
// body yields more than b.MaxResponseBytes bytes. The bytes counted are
// those the SDK reads from the body: the whole of a unary answer, the
// cumulative bytes of a stream. hc itself is not changed; its redirect
// policy, jar and timeout are kept.
func (b *Base) HTTPClient(hc *http.Client) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &limitTransport{next: next, provider: b.Name, max: b.MaxResponseBytes}
	return &c
}

// limitTransport wraps every response body in a limitedBody.
type limitTransport struct {
	next     http.RoundTripper
	provider string
	max      int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	trip, _ := req.Context().Value(capKey{}).(*capTrip)
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, err: &TooLargeError{Provider: t.provider, Max: t.max}, trip: trip}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t *limitTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// capKey keys an attempt's capTrip in its context ([Base.Attempt]).
type capKey struct{}

// capTrip records that a body of the attempt went past the cap. An SDK
// may hide the read error behind its own: the Gemini SDK's line scanner
// hands the partial last line over before the error, and the SDK then
// reports that line's JSON as malformed instead.
type capTrip struct{ over atomic.Bool }

// limitedBody yields at most left more bytes of rc. Reading past them
// closes rc (the connection is dropped, not drained: the rest of the
// answer is never read) and fails every later Read with err. Read is not
// called concurrently (an http body's contract); Close may be.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	err  error
	over bool
	trip *capTrip // nil outside an attempt
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.over {
		return 0, l.err
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1] // one byte past the limit tells "over" from "exactly at"
	}
	n, err := l.rc.Read(p)
	if int64(n) > l.left {
		n = int(l.left)
		l.left, l.over = 0, true
		if l.trip != nil {
			l.trip.over.Store(true)
		}
		l.rc.Close()
		return n, l.err
	}
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }

// TooLarge classifies a failure of an attempt whose answer went past the
// cap: err carries a [*TooLargeError], or ctx (the attempt's, from
// [Base.Attempt]) saw one even though the SDK reported something else.
//
// It is a server failure, the kind of any other answer that breaks the
// provider's protocol (a malformed body): the provider was reached and
// answered, so it is not a network failure, and nothing about the request
// is wrong. The orchestrator backs off and retries it a bounded number of
// times (routing's server attempts), then fails over to the next provider,
// and the circuit breaker counts it, so a provider that keeps sending
// oversized answers is routed around rather than retried forever. A
// stream that already delivered chunks ends with it and, as for any
// mid-stream failure, carries the usage billed so far.
func (b *Base) TooLarge(ctx context.Context, err error, model string) (*provider.Error, bool) {
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		if trip, _ := ctx.Value(capKey{}).(*capTrip); trip == nil || !trip.over.Load() {
			return nil, false
		}
		tl = &TooLargeError{Provider: b.Name, Max: b.MaxResponseBytes}
	}
	return &provider.Error{Kind: provider.KindServer, Provider: b.Name, Model: model, Diagnostic: provider.Diagnostic{Message: tl.Error()}, Err: err}, true
}
