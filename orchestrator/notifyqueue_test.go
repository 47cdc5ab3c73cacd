package orchestrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// logLines is a log/slog destination that tests read while the
// notification senders write.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// dropped returns the "notification dropped" lines.
func (l *logLines) dropped() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
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
	w := newWorld(t, func(s *orchestrator.Settings) {
		withPreference("anthropic", false)(s)
		s.Notifier = orchestrator.WebhookNotifier{URL: hook + "/services/" + hookToken, Client: &http.Client{}} // no timeout of its own
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
	logs := &logLines{}
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
	drops := logs.dropped()
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
			logs := &logLines{}
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
			drops := logs.dropped()
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
