package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// EventBudgetThreshold is the event of the notification that announces a
// budget alert: a scope's spend crossed a threshold of its limit.
const EventBudgetThreshold = "budget_threshold"

// alertClaim is how long an alert claimed for announcing is held before
// another claim (of this process or another) may take it: a failed
// notification is retried once it runs out.
const alertClaim = time.Minute

// alertBatch bounds the alerts claimed at once.
const alertBatch = 32

// AnnounceAlerts announces, through the notifier, the budget alerts the
// ledger recorded that no process has announced yet: one notification
// each (event budget_threshold; info below 80 %, warning from 80 %,
// critical at 100 %), naming the scope, the threshold, the spend and the
// limit. Processes sharing a ledger announce each alert once between them
// ([ledger.Store.ClaimAlerts]). An alert whose notification fails is not
// marked: it is announced again once its claim runs out (a minute later),
// by this process or another; the error says which failed. It returns how
// many it announced. Without a ledger or a notifier it does nothing, and
// leaves the alerts to a process that has one.
func (o *Orchestrator) AnnounceAlerts(ctx context.Context) (int, error) {
	if o.s.Ledger == nil || !o.notifies {
		return 0, nil
	}
	n := 0
	for {
		as, err := o.s.Ledger.ClaimAlerts(ctx, alertClaim, alertBatch)
		if err != nil {
			return n, fmt.Errorf("budget alerts: %w", err)
		}
		var failed error
		for _, a := range as {
			if err := o.s.Notifier.Notify(ctx, alertNotification(o.s.Project, a)); err != nil {
				failed = errors.Join(failed, fmt.Errorf("budget alert %s %d%%: %w (it is retried in %s)", a.Scope, a.Threshold, err, alertClaim))
				continue
			}
			if err := o.s.Ledger.AlertNotified(ctx, a.ID); err != nil {
				return n, fmt.Errorf("budget alerts: %w", err)
			}
			n++
		}
		if failed != nil || len(as) < alertBatch {
			return n, failed
		}
	}
}

// WatchAlerts announces budget alerts (see AnnounceAlerts) every interval
// until ctx ends, telling onErr about each failure.
func (o *Orchestrator) WatchAlerts(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := o.AnnounceAlerts(ctx); err != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// alertNotification is the notification of one budget alert.
func alertNotification(project string, a ledger.Alert) Notification {
	level, tail := "info", ""
	switch {
	case a.Threshold >= 100:
		level, tail = "critical", "; it is paused"
	case a.Threshold >= 80:
		level = "warning"
	}
	return Notification{
		Level:   level,
		Event:   EventBudgetThreshold,
		Project: project,
		Scope:   string(a.Scope),
		Message: fmt.Sprintf("budget of %s reached %d%%: spent $%s of $%s%s", a.Scope, a.Threshold, a.Spent, a.Limit, tail),
		At:      a.CrossedAt,
	}
}
