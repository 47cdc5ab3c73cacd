package ledger

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// DefaultAlertThresholds are the percentages of a limit at which a scope's
// spend is recorded as an [Alert] unless [WithAlerts] says otherwise.
var DefaultAlertThresholds = []int{50, 80, 100}

// Alert records that a settlement took a scope's spend across a threshold
// of its limit: from below Threshold percent of Limit to at or above it.
// It is written in the settlement's transaction, once per scope, threshold
// and limit: the spend of a scope only grows, so under one limit each
// threshold is crossed once; a new limit (a raised or lowered budget)
// arms every threshold again, as a percentage of the new limit.
type Alert struct {
	ID        int64          `json:"id"`
	Scope     Scope          `json:"scope"`
	Threshold int            `json:"threshold_pct"`
	Limit     provider.Money `json:"limit_usd"`
	// Spent is the scope's spend once the settlement that crossed the
	// threshold was charged.
	Spent     provider.Money `json:"spent_usd"`
	CrossedAt time.Time      `json:"crossed_at"`
	// NotifiedAt is when the alert was announced ([Store.AlertNotified]);
	// zero until then.
	NotifiedAt time.Time `json:"notified_at,omitzero"`
}

// WithAlerts sets the thresholds, in percent of a scope's limit (1 to 100,
// each once), at which settlements record an [Alert]; none turns alerts
// off. The default is [DefaultAlertThresholds]. Every scope with a limit
// is watched, whatever its kind. Processes sharing a database should use
// the same thresholds: each records the crossings of its own settlements.
func WithAlerts(thresholds ...int) Option {
	return func(o *options) { o.alerts = slices.Clone(thresholds); o.alertsSet = true }
}

// alertThresholds validates the thresholds of the options and returns them
// sorted.
func (o options) alertThresholds() ([]int, error) {
	if !o.alertsSet {
		return slices.Clone(DefaultAlertThresholds), nil
	}
	ts := slices.Clone(o.alerts)
	slices.Sort(ts)
	for i, t := range ts {
		if t <= 0 || t > 100 {
			return nil, fmt.Errorf("%w: alert threshold %d%%: write a percentage from 1 to 100", ErrInvalid, t)
		}
		if i > 0 && ts[i-1] == t {
			return nil, fmt.Errorf("%w: alert threshold %d%% is given twice", ErrInvalid, t)
		}
	}
	return ts, nil
}

// thresholdAmount is threshold percent of limit, rounded up, without
// overflowing: the smallest spend that has reached the threshold.
func thresholdAmount(limit provider.Money, threshold int) provider.Money {
	t := provider.Money(threshold)
	return limit/100*t + (limit%100*t+99)/100
}

// crossedThresholds returns the thresholds a charge of amount passed on a
// scope whose spend it took to spent: those with spent − amount below
// their amount and spent at or above it. A scope without a limit, or with
// a zero limit, crosses none.
func crossedThresholds(thresholds []int, limited bool, limit, spent, amount provider.Money) []int {
	if !limited || limit <= 0 || amount <= 0 {
		return nil
	}
	before := spent - amount
	var out []int
	for _, t := range thresholds {
		if need := thresholdAmount(limit, t); before < need && need <= spent {
			out = append(out, t)
		}
	}
	return out
}

// checkClaim validates the arguments of ClaimAlerts.
func checkClaim(hold time.Duration, max int) error {
	if hold <= 0 {
		return fmt.Errorf("%w: claim alerts: the hold %s must be positive", ErrInvalid, hold)
	}
	if max <= 0 {
		return fmt.Errorf("%w: claim alerts: at most %d: ask for one or more", ErrInvalid, max)
	}
	return nil
}

// Statements both stores use for alerts, on a table name with or without
// the schema.

func insertAlertSQL(table string) string {
	return `INSERT INTO ` + table + ` (project, scope, threshold, limit_nanos, spent_nanos, crossed_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (project, scope, threshold, limit_nanos) DO NOTHING`
}

const alertColumns = `id, scope, threshold, limit_nanos, spent_nanos, crossed_at, coalesce(notified_at, 0)`

func alertsSQL(table string) string {
	return `SELECT ` + alertColumns + ` FROM ` + table + ` WHERE project = $1 ORDER BY crossed_at DESC, id DESC`
}

func pendingAlertSQL(table string) string {
	return `SELECT EXISTS (SELECT 1 FROM ` + table + ` WHERE project = $1 AND notified_at IS NULL AND claimed_until <= $2)`
}

func alertNotifiedSQL(table string) string {
	return `UPDATE ` + table + ` SET notified_at = $3 WHERE project = $1 AND id = $2 AND notified_at IS NULL`
}

// alertRows are the rows of a query of alertColumns, as both database
// drivers return them.
type alertRows interface {
	Next() bool
	Scan(...any) error
	Err() error
}

// scanAlerts reads every alert of rows (an empty list, not nil, when
// there is none).
func scanAlerts(rows alertRows) ([]Alert, error) {
	out := []Alert{}
	for rows.Next() {
		a, err := scanAlert(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func scanAlert(sc interface{ Scan(...any) error }) (Alert, error) {
	var a Alert
	var crossed, notified int64
	err := sc.Scan(&a.ID, (*string)(&a.Scope), &a.Threshold, (*int64)(&a.Limit), (*int64)(&a.Spent), &crossed, &notified)
	a.CrossedAt = fromNanos(crossed)
	if notified != 0 {
		a.NotifiedAt = fromNanos(notified)
	}
	return a, err
}

// sortClaimed puts claimed alerts in the order they were crossed.
func sortClaimed(as []Alert) {
	slices.SortFunc(as, func(a, b Alert) int {
		if c := a.CrossedAt.Compare(b.CrossedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
