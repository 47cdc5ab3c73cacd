package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Notification is something a person should hear about: a paused project,
// an exhausted quota, an unreachable provider, a budget threshold crossed.
type Notification struct {
	Level    string `json:"level"` // info, warning, critical
	Event    string `json:"event"` // project_paused, quota_exhausted, provider_unreachable, budget_threshold, ...
	Project  string `json:"project,omitempty"`
	Provider string `json:"provider,omitempty"`
	// Scope is the ledger scope a budget notification is about
	// (task:<id>, month:<YYYY-MM>, ...).
	Scope   string    `json:"scope,omitempty"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// Notifier delivers notifications.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

type discard struct{}

func (discard) Notify(context.Context, Notification) error { return nil }

// LogNotifier writes notifications to a structured logger.
type LogNotifier struct{ Logger *slog.Logger }

// Notify logs n.
func (l LogNotifier) Notify(ctx context.Context, n Notification) error {
	lg := l.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lvl := slog.LevelInfo
	switch n.Level {
	case "warning":
		lvl = slog.LevelWarn
	case "critical":
		lvl = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("event", n.Event), slog.String("project", n.Project), slog.String("provider", n.Provider)}
	if n.Scope != "" {
		attrs = append(attrs, slog.String("scope", n.Scope))
	}
	lg.LogAttrs(ctx, lvl, n.Message, attrs...)
	return nil
}

// WebhookNotifier POSTs each notification as JSON to URL.
type WebhookNotifier struct {
	URL    string
	Client *http.Client // nil: a client with a 10 s timeout
}

// Notify posts n; a non-2xx answer is an error. The error never repeats
// the URL, whose path often carries the webhook's token.
func (w WebhookNotifier) Notify(ctx context.Context, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", withoutURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	c := w.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", withoutURL(err))
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return &webhookStatusError{host: req.URL.Host, status: resp.Status, code: resp.StatusCode}
	}
	return nil
}

// webhookStatusError is a webhook's non-2xx answer.
type webhookStatusError struct {
	host, status string
	code         int
}

func (e *webhookStatusError) Error() string {
	return fmt.Sprintf("webhook: %s answered %s", e.host, e.status)
}

// Permanent reports whether the webhook would answer the same again: a 4xx
// other than 408 (timeout), 425 (too early) and 429 (too many requests).
func (e *webhookStatusError) Permanent() bool {
	switch e.code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return e.code/100 == 4
}

// permanent reports whether a sink's error says that trying again would
// fail the same way: the error, or one it wraps, has a Permanent method
// that says so (a webhook's 4xx, a refusal of the locality gate for want
// of consent or under local-only).
func permanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// withoutURL unwraps a *url.Error, which repeats the URL.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Notifiers fans a notification out to several sinks; every sink is tried
// and the first error returned.
type Notifiers []Notifier

// Notify delivers n to every sink.
func (ns Notifiers) Notify(ctx context.Context, n Notification) error {
	var first error
	for _, x := range ns {
		if err := x.Notify(ctx, n); err != nil && first == nil {
			first = err
		}
	}
	return first
}
