package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
)

// dropped returns the "notification dropped" lines logs holds.
func dropped(logs *testenv.Buffer) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="notification dropped"`) {
			out = append(out, line)
		}
	}
	return out
}

// hookToken is in the webhook's path, as a chat webhook's token is: it
// must never reach a log line.
const hookToken = "hook-token-7f3a"

// notifyingWorld is a world whose first provider is down, so that every
// call notifies provider_unreachable once, with a webhook as the one sink.
func notifyingWorld(t *testing.T, hook string, ns orchestrator.NotifySettings) *world {
	return notifyingWorldWith(t, orchestrator.WebhookNotifier{URL: hook + "/services/" + hookToken, Client: &http.Client{}}, ns) // no timeout of its own
}

// notifyingWorldWith is notifyingWorld with sink as the one sink.
func notifyingWorldWith(t *testing.T, sink orchestrator.Notifier, ns orchestrator.NotifySettings) *world {
	w := newWorld(t, func(s *orchestrator.Settings) {
		withPreference("anthropic", false)(s)
		s.Notifier = sink
		s.Notify = ns
		s.Breaker.Disabled = true // every call tries the provider that is down, and notifies
	})
	w.anth.Close()
	return w
}

// A webhook that never answers delays no call: each call returns while
// the webhook handler still holds the first notification, and the queue
// behind it, bounded, drops the one too many with a log line.
func TestNotificationsNeverWaitForTheWebhook(t *testing.T) {
	arrived := make(chan orchestrator.Notification, 16)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n orchestrator.Notification
		json.NewDecoder(r.Body).Decode(&n)
		arrived <- n
		<-release
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() { close(release) }) // runs first: the handlers return, then the server closes
	logs := &testenv.Buffer{}
	w := notifyingWorld(t, hook.URL, orchestrator.NotifySettings{
		Queue:   2,
		Backoff: func(int) time.Duration { return 0 },
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	})

	call := func(i int) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := w.invoke(t, orchestrator.Call{Agent: "builder"})
			if err != nil {
				done <- err
				return
			}
			done <- nil
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d has not returned while the webhook holds a notification: the call waits for the webhook", i)
		}
	}
	call(1)
	select {
	case n := <-arrived:
		if n.Event != "provider_unreachable" {
			t.Errorf("the webhook got %+v; want provider_unreachable", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook never got the first call's notification")
	}
	// The sender is held by the webhook; two notifications wait behind
	// it, and the next is one too many.
	for i := 2; i <= 4; i++ {
		call(i)
	}
	drops := dropped(logs)
	if len(drops) != 1 || !strings.Contains(drops[0], "event=provider_unreachable") || !strings.Contains(drops[0], "the queue is full (2 waiting)") || !strings.Contains(drops[0], "level=WARN") {
		t.Errorf("dropped lines = %q; want one warning naming the event and the full queue", drops)
	}
	if len(arrived) != 0 {
		t.Errorf("%d more notifications reached the webhook while it held the first", len(arrived))
	}
}

// A webhook that fails gets the notification again, after a backoff, and
// answers it; one that keeps failing has it dropped, with a log line that
// says so without the webhook's URL.
func TestNotificationsRetryAFailedWebhook(t *testing.T) {
	for _, c := range []struct {
		name     string
		failures int // answers 503 this many times, then 204
		posts    int
		dropped  string
	}{
		{"answers after a failure", 1, 2, ""},
		{"keeps failing", 10, 3, "failed 3 times, last: webhook: 127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []orchestrator.Notification
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var n orchestrator.Notification
				json.Unmarshal(b, &n)
				mu.Lock()
				defer mu.Unlock()
				got = append(got, n)
				if len(got) <= c.failures {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(hook.Close)
			logs := &testenv.Buffer{}
			var waits []int
			w := notifyingWorld(t, hook.URL, orchestrator.NotifySettings{
				Attempts: 3,
				Backoff: func(n int) time.Duration {
					waits = append(waits, n) // one sender: no lock needed beyond Drain's
					return 0
				},
				Logger: slog.New(slog.NewTextHandler(logs, nil)),
			})
			if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := w.o.Drain(ctx); err != nil {
				t.Fatalf("drain: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != c.posts {
				t.Fatalf("the webhook got %d posts; want %d", len(got), c.posts)
			}
			for _, n := range got {
				if n.Event != "provider_unreachable" {
					t.Errorf("posted %+v; want the provider_unreachable notification each time", n)
				}
			}
			if want := c.posts - 1; len(waits) != want {
				t.Errorf("backed off before retries %v; want %d", waits, want)
			}
			drops := dropped(logs)
			switch {
			case c.dropped == "" && len(drops) != 0:
				t.Errorf("dropped lines = %q; want none", drops)
			case c.dropped != "" && (len(drops) != 1 || !strings.Contains(drops[0], c.dropped) || !strings.Contains(drops[0], "503")):
				t.Errorf("dropped lines = %q; want one saying %q", drops, c.dropped)
			}
			for _, d := range drops {
				if strings.Contains(d, hookToken) {
					t.Errorf("a log line repeats the webhook's token: %s", d)
				}
			}
		})
	}
}

// countedSink counts the attempts made on the sink it wraps.
type countedSink struct {
	orchestrator.Notifier
	tries atomic.Int32
}

func (c *countedSink) Notify(ctx context.Context, n orchestrator.Notification) error {
	c.tries.Add(1)
	return c.Notifier.Notify(ctx, n)
}

// errSink fails every notification with err.
type errSink struct{ err error }

func (s errSink) Notify(context.Context, orchestrator.Notification) error { return s.err }

// remoteName resolves every name to a documentation address off this
// machine.
type remoteName struct{}

func (remoteName) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP("203.0.113.7")}}, nil
}

// A failure that trying again would not change (the locality gate's
// refusal under local-only or for want of consent, a webhook's 4xx other
// than 408, 425 and 429) is tried once and dropped at once, with a line
// naming the event and the reason, never the token; a 429 is retried.
func TestNotificationsDropPermanentFailuresAtOnce(t *testing.T) {
	answering := func(code int) string {
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		t.Cleanup(hook.Close)
		return hook.URL
	}
	gate := &locality.Gate{
		Mode:     locality.ModeLocalOnly,
		Resolver: remoteName{},
		Dial: func(context.Context, string, string) (net.Conn, error) {
			t.Error("the gate dialed a remote webhook")
			return nil, errors.New("not dialed")
		},
	}
	for _, c := range []struct {
		name    string
		sink    orchestrator.Notifier
		tries   int32
		dropped string
	}{
		{"refused under local-only", orchestrator.WebhookNotifier{
			URL:    "http://hooks.example.test/services/" + hookToken,
			Client: gate.ServiceClient(locality.Service{Name: "webhook", Key: "notifications.webhook_url"}, nil),
		}, 1, "refused, not retried: webhook: webhook (hooks.example.test → 203.0.113.7) is not on this machine and locality mode is local-only"},
		{"refused for want of consent", errSink{fmt.Errorf("webhook: %w", &locality.Error{Provider: "hooks", Host: "203.0.113.7", Reason: locality.ReasonNoConsent})},
			1, "refused, not retried: webhook: provider \\\"hooks\\\" (203.0.113.7) is not on this machine and this project has no consent"},
		{"answered 404", orchestrator.WebhookNotifier{URL: answering(http.StatusNotFound) + "/services/" + hookToken},
			1, "refused, not retried: webhook: 127.0.0.1"},
		{"answered 429", orchestrator.WebhookNotifier{URL: answering(http.StatusTooManyRequests) + "/services/" + hookToken},
			3, "failed 3 times, last: webhook: 127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &testenv.Buffer{}
			var backoffs atomic.Int32
			sink := &countedSink{Notifier: c.sink}
			w := notifyingWorldWith(t, sink, orchestrator.NotifySettings{
				Attempts: 3,
				Backoff:  func(int) time.Duration { backoffs.Add(1); return 0 },
				Logger:   slog.New(slog.NewTextHandler(logs, nil)),
			})
			if _, err := w.invoke(t, orchestrator.Call{Agent: "builder"}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := w.o.Drain(ctx); err != nil {
				t.Fatalf("drain: %v", err)
			}
			if got := sink.tries.Load(); got != c.tries {
				t.Errorf("the sink was tried %d times; want %d", got, c.tries)
			}
			if got, want := backoffs.Load(), c.tries-1; got != want {
				t.Errorf("backed off %d times; want %d", got, want)
			}
			drops := dropped(logs)
			if len(drops) != 1 || !strings.Contains(drops[0], "event=provider_unreachable") || !strings.Contains(drops[0], c.dropped) {
				t.Errorf("dropped lines = %q; want one naming the event and saying %q", drops, c.dropped)
			}
			for _, d := range drops {
				if strings.Contains(d, hookToken) {
					t.Errorf("a log line repeats the webhook's token: %s", d)
				}
			}
		})
	}
}
