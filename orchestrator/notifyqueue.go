package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// NotifySettings configure how the notifications of calls are sent: from a
// bounded queue per sink, by a sender of their own, so that a sink that is
// slow or never answers (a webhook) neither delays nor fails a call.
type NotifySettings struct {
	// Queue bounds the notifications waiting for one sink, besides the one
	// being sent; one more is dropped, and the drop is logged. Default 256.
	Queue int
	// Attempts is how often a sink is tried for one notification before it
	// is dropped (logged). Default 4. A failure that says it is permanent
	// (a webhook's 4xx other than 408, 425 and 429, a refusal of the
	// locality gate for want of consent or under local-only) is dropped at
	// once.
	Attempts int
	// Backoff returns the wait before retry n (1-based). Default
	// DefaultNotifyBackoff.
	Backoff func(n int) time.Duration
	// Timeout bounds one attempt. Default 10 s.
	Timeout time.Duration
	// Logger hears every dropped notification (a warning, "notification
	// dropped", with its event and the reason). Default slog.Default().
	Logger *slog.Logger
}

// DefaultNotifyBackoff is 1 s × 2ⁿ⁻¹, capped at 30 s.
func DefaultNotifyBackoff(n int) time.Duration {
	return min(time.Second<<min(n-1, 5), 30*time.Second)
}

func (s *NotifySettings) defaults() {
	if s.Queue <= 0 {
		s.Queue = 256
	}
	if s.Attempts <= 0 {
		s.Attempts = 4
	}
	if s.Backoff == nil {
		s.Backoff = DefaultNotifyBackoff
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Second
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
}

// notifyQueues sends notifications to each sink of a Notifier from a queue
// of its own.
type notifyQueues []*notifyQueue

func newNotifyQueues(n Notifier, s NotifySettings) notifyQueues {
	s.defaults()
	var qs notifyQueues
	for _, sink := range sinksOf(n) {
		qs = append(qs, &notifyQueue{s: s, sink: sink})
	}
	return qs
}

// sinksOf flattens Notifiers into its sinks; discard has none.
func sinksOf(n Notifier) []Notifier {
	switch x := n.(type) {
	case discard:
		return nil
	case Notifiers:
		var out []Notifier
		for _, y := range x {
			out = append(out, sinksOf(y)...)
		}
		return out
	}
	return []Notifier{n}
}

func (qs notifyQueues) add(n Notification) {
	for _, q := range qs {
		q.add(n)
	}
}

// drain waits until every queue is empty or ctx ends; then what is left is
// dropped (logged) and ctx's error returned.
func (qs notifyQueues) drain(ctx context.Context) error {
	for _, q := range qs {
		if err := q.drain(ctx); err != nil {
			for _, q := range qs {
				q.abandon()
			}
			return err
		}
	}
	return nil
}

// notifyQueue is one sink's queue. Its sender runs only while there is
// something to send: an idle queue holds no goroutine.
type notifyQueue struct {
	s    NotifySettings
	sink Notifier

	mu      sync.Mutex
	items   []Notification
	running bool
	idle    chan struct{} // closed when the running sender stops
	// abort ends the sender's attempts and waits: Drain ran out of time.
	abort  context.Context
	cancel context.CancelFunc
}

func (q *notifyQueue) add(n Notification) {
	q.mu.Lock()
	if len(q.items) >= q.s.Queue {
		q.mu.Unlock()
		q.dropped(n, fmt.Sprintf("the queue is full (%d waiting)", q.s.Queue))
		return
	}
	q.items = append(q.items, n)
	if !q.running {
		q.running = true
		q.idle = make(chan struct{})
		if q.abort == nil || q.abort.Err() != nil {
			q.abort, q.cancel = context.WithCancel(context.Background())
		}
		go q.run(q.abort, q.idle)
	}
	q.mu.Unlock()
}

func (q *notifyQueue) run(abort context.Context, idle chan struct{}) {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			close(idle)
			q.mu.Unlock()
			return
		}
		n := q.items[0]
		q.items[0] = Notification{}
		q.items = q.items[1:]
		q.mu.Unlock()
		if abort.Err() != nil {
			q.dropped(n, "not sent before the process stopped")
			continue
		}
		q.send(abort, n)
	}
}

// send tries the sink up to Attempts times, backing off between tries; a
// permanent failure is not tried again.
func (q *notifyQueue) send(abort context.Context, n Notification) {
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(abort, q.s.Timeout)
		err := q.sink.Notify(ctx, n)
		cancel()
		switch {
		case err == nil:
			return
		case abort.Err() != nil:
			q.dropped(n, "not sent before the process stopped")
			return
		case permanent(err):
			q.dropped(n, fmt.Sprintf("refused, not retried: %v", err))
			return
		case try >= q.s.Attempts:
			q.dropped(n, fmt.Sprintf("failed %d times, last: %v", try, err))
			return
		}
		if sleep(abort, q.s.Backoff(try)) != nil {
			q.dropped(n, "not sent before the process stopped")
			return
		}
	}
}

func (q *notifyQueue) drain(ctx context.Context) error {
	q.mu.Lock()
	running, idle := q.running, q.idle
	q.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// abandon ends the sender's attempt and drops what is queued.
func (q *notifyQueue) abandon() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cancel != nil {
		q.cancel()
	}
}

func (q *notifyQueue) dropped(n Notification, reason string) {
	q.s.Logger.LogAttrs(context.Background(), slog.LevelWarn, "notification dropped",
		slog.String("event", n.Event), slog.String("level", n.Level), slog.String("project", n.Project),
		slog.String("provider", n.Provider), slog.String("reason", reason))
}

// Drain waits until the notifications queued so far are sent (or dropped
// after their last attempt) or until ctx ends; then those still waiting are
// dropped, each with a log line, and ctx's error is returned. A command
// drains before it exits, within a bound, so that what it notified is
// delivered. Notifications made after a Drain that returned nil are queued
// and sent as before; after one that ran out of time, those queued before
// its sender has stopped are dropped too.
func (o *Orchestrator) Drain(ctx context.Context) error { return o.notes.drain(ctx) }
