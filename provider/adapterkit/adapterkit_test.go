package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, 1500 * time.Millisecond},
		{map[string]string{"retry-after": "2"}, 2 * time.Second},
		{map[string]string{"retry-after": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"retry-after": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{map[string]string{"retry-after": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"retry-after": "99999999"}, MaxRetryAfter},
		{map[string]string{"retry-after": "soon"}, 0},
		{nil, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := RetryAfterHeader(h, now); got != tt.want {
			t.Errorf("%v = %s, want %s", tt.h, got, tt.want)
		}
	}
}

func TestDescribeBody(t *testing.T) {
	if got := DescribeBody(502, "text/html", "<html><title>502 Bad Gateway</title></html>"); got != "non-JSON error page from an intermediary (proxy or gateway): 502 Bad Gateway" {
		t.Errorf("html = %q", got)
	}
	if got := DescribeBody(500, "", ""); !strings.Contains(got, "empty error body (status 500)") {
		t.Errorf("empty = %q", got)
	}
	if got := DescribeBody(500, "text/plain", strings.Repeat("x", 500)); len(got) > 240 || !strings.HasPrefix(got, "unexpected error body: ") {
		t.Errorf("long = %q", got)
	}
}

func TestClassifyLocal(t *testing.T) {
	b := &Base{Name: "p", Secret: "sk-secret-value"}
	timedOut, cancel := context.WithTimeoutCause(context.Background(), 0, ErrAttemptTimeout)
	defer cancel()
	<-timedOut.Done()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	live := context.Background()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		kind provider.Kind
		ok   bool
	}{
		{"attempt timeout", timedOut, errors.New("decode error"), provider.KindTimeout, true},
		{"caller cancel hides the decode error", canceled, errors.New("unexpected end of JSON input"), provider.KindCanceled, true},
		{"refused", live, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, provider.KindNetwork, true},
		{"cut", live, fmt.Errorf("read: %w", io.ErrUnexpectedEOF), provider.KindNetwork, true},
		{"deadline", live, context.DeadlineExceeded, provider.KindTimeout, true},
		{"body read whole, truncated JSON", live, fmt.Errorf("error parsing response json: %w", io.ErrUnexpectedEOF), 0, false},
		{"body cut while read", live, fmt.Errorf("error reading response body: %w", io.ErrUnexpectedEOF), provider.KindNetwork, true},
		{"something else", live, errors.New("json: cannot unmarshal"), 0, false},
	}
	for _, tt := range tests {
		pe, ok := b.ClassifyLocal(tt.ctx, tt.err, "m")
		if ok != tt.ok || (ok && pe.Kind != tt.kind) {
			t.Errorf("%s: %v %v", tt.name, pe, ok)
		}
	}
	pe := b.Finish(&provider.Error{Kind: provider.KindAuth, Diagnostic: provider.Diagnostic{Message: "bad key sk-secret-value"}, Err: errors.New("echo sk-secret-value")})
	if strings.Contains(pe.Error(), "sk-secret-value") {
		t.Errorf("Finish leaks: %v", pe)
	}
}

func TestBaseModelsAndTimeouts(t *testing.T) {
	b := NewBase(provider.Settings{Models: map[provider.Tier]string{provider.TierBalanced: "mine"}, Timeout: 7 * time.Second}, "typ", map[provider.Tier]string{provider.TierBalanced: "def", provider.TierFastCheap: "cheap"}, "")
	if b.Name != "typ" || b.ModelFor(provider.TierBalanced) != "mine" || b.ModelFor(provider.TierFastCheap) != "cheap" {
		t.Errorf("base = %+v", b)
	}
	if got := b.Model(&provider.Request{Model: "explicit"}); got != "explicit" {
		t.Errorf("explicit model = %q", got)
	}
	if b.AttemptTimeout(&provider.Request{}) != 7*time.Second || b.AttemptTimeout(&provider.Request{Timeout: time.Second}) != time.Second {
		t.Error("timeouts wrong")
	}
	if _, err := b.Estimate("ns", "m", &provider.Request{Prompt: "x"}, nil); provider.KindOf(err) != provider.KindBadRequest {
		t.Errorf("estimate without a catalog = %v", err)
	}
}

// A formatter that prints an error's fields (%+v, %#v, a struct dump of
// the provider error) finds no credential in it: the wrapper keeps the
// redacted text, not the secret.
func TestFinishKeepsNoSecretInFields(t *testing.T) {
	b := &Base{Name: "p", Secret: "sk-secret-value"}
	pe := b.Finish(&provider.Error{Kind: provider.KindNetwork, Err: errors.New("connection reset")})
	for _, s := range []string{fmt.Sprintf("%+v", *pe), fmt.Sprintf("%#v", *pe), fmt.Sprintf("%#v", pe.Err), fmt.Sprintf("%v", pe.Err)} {
		if strings.Contains(s, "sk-secret-value") {
			t.Errorf("the secret is in %s", s)
		}
	}
	if pe.Err.Error() != "connection reset" || !errors.Is(pe, pe.Err) {
		t.Errorf("the wrapped error changed: %v", pe.Err)
	}
}
