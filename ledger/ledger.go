package ledger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Store is the durable spend record and budget store. Both implementations
// ([SQLite] and [Postgres]) pass the same conformance suite
// (ledger/ledgertest), and every method is safe for concurrent use by many
// goroutines and, sharing one database, by many processes.
//
// Errors: a store that cannot be reached returns errors wrapping
// [ErrUnavailable] (the orchestrator fails closed on paid endpoints); bad
// arguments wrap [ErrInvalid]; a refused reservation is a [*BudgetError] or a
// [*PausedError].
type Store interface {
	// SetBudget sets the limit of a scope (creating the scope if needed). If
	// the scope was paused because it reached its budget and its spend is now
	// below the new limit, the pause is lifted; a pause set with [Store.Pause]
	// stays until [Store.Resume].
	SetBudget(ctx context.Context, scope Scope, limit provider.Money) error
	// SetDefaultBudget sets the limit of a scope like SetBudget, unless the
	// scope's limit was set with SetBudget: an operator's limit wins over a
	// default (the configuration's) until RemoveBudget. It reports whether
	// it set the limit.
	SetDefaultBudget(ctx context.Context, scope Scope, limit provider.Money) (bool, error)
	// RemoveBudget removes the limit of a scope, whoever set it; its spend
	// stays tracked and a pause caused by the budget is lifted.
	RemoveBudget(ctx context.Context, scope Scope) error
	// RemoveDefaultBudget removes the limit of a scope when it is a
	// default (SetDefaultBudget's); an operator's limit (SetBudget) stays.
	// It reports whether it removed one.
	RemoveDefaultBudget(ctx context.Context, scope Scope) (bool, error)
	// Budget returns the state of one scope. A scope the store has never
	// seen has no limit and nothing spent or held.
	Budget(ctx context.Context, scope Scope) (Budget, error)
	// Budgets returns every scope that has a limit, sorted by scope.
	Budgets(ctx context.Context) ([]Budget, error)

	// Reserve holds r.Amount against every scope of r at once, all or
	// nothing. It fails with a [*PausedError] if a scope is paused, with a
	// [*BudgetError] if a scope with a limit would exceed it (spent + held +
	// amount > limit), and with [ErrDuplicateInvocation] if the invocation
	// already holds a reservation or has been settled. Holds that have
	// expired count for nothing and are released on the way.
	Reserve(ctx context.Context, r Reservation) error
	// Settle turns the invocation's hold into spend of s.Cost, writes
	// s.Entry to the ledger and removes the reservation, in one transaction.
	// It is idempotent by invocation id: a second settlement changes nothing
	// and returns an error wrapping [ErrAlreadySettled]. An invocation with no
	// reservation (released, or expired and cleaned up) is still charged, to
	// s.Scopes, exactly once. A scope whose spend reaches its limit is paused.
	Settle(ctx context.Context, s Settlement) error
	// Release drops the invocation's hold without spending anything. It is
	// idempotent: releasing an unknown or already released invocation
	// returns nil.
	Release(ctx context.Context, invocationID string) error
	// Shrink lowers the hold of a reservation to at most amount, on every
	// scope; a hold already at or below amount, or an unknown or settled
	// invocation, is left as it is (nil error). It is how a budget lease
	// gives back what it will not use while its admitted calls are still
	// running.
	Shrink(ctx context.Context, invocationID string, amount provider.Money) error
	// ExpireReservations releases every reservation whose ExpiresAt is at or
	// before now and returns how many it released; on PostgreSQL, not one
	// that a settlement in the journal table draws on (see [Fast]) until it
	// is applied.
	ExpireReservations(ctx context.Context, now time.Time) (int, error)

	// RecordAttempt appends one row to the ledger. It does not charge any
	// budget: budgets are charged by [Store.Settle].
	RecordAttempt(ctx context.Context, a AttemptRow) error
	// Attempts returns the ledger rows matching f (its By and Location are
	// ignored), oldest first.
	Attempts(ctx context.Context, f Filter) ([]AttemptRow, error)
	// Spend returns the totals of the ledger rows matching f, grouped by
	// f.By.
	Spend(ctx context.Context, f Filter) (SpendReport, error)

	// Pause pauses a scope: every reservation against it is refused with a
	// [*PausedError] carrying reason until [Store.Resume].
	Pause(ctx context.Context, scope Scope, reason string) error
	// PauseForBudget pauses a scope because its budget cannot cover what was
	// asked of it: like a pause from reaching the limit, it is lifted by
	// raising the budget above the spend, or by [Store.Resume].
	PauseForBudget(ctx context.Context, scope Scope, reason string) error
	// Resume lifts any pause of a scope. Resuming a scope that is not paused
	// is not an error.
	Resume(ctx context.Context, scope Scope) error
	// Paused reports whether a scope is paused, and why.
	Paused(ctx context.Context, scope Scope) (reason string, paused bool, err error)

	// Alerts returns the budget alerts settlements recorded (see [Alert]
	// and [WithAlerts]), newest first: all of them, or the limit newest
	// when limit is above zero.
	Alerts(ctx context.Context, limit int) ([]Alert, error)
	// ClaimAlerts claims up to max alerts that are not notified yet and
	// not claimed by anyone (in this process or another) whose claim still
	// runs: each is claimed until the store's clock plus hold, and they are
	// returned in the order they were crossed. The caller announces them
	// and marks each with [Store.AlertNotified]; an alert whose claim runs
	// out unmarked (its announcement failed, its process died) is claimed
	// again by a later call.
	ClaimAlerts(ctx context.Context, hold time.Duration, max int) ([]Alert, error)
	// AlertNotified records that an alert was announced: it is never
	// claimed again. Marking an alert already marked, or unknown, changes
	// nothing.
	AlertNotified(ctx context.Context, id int64) error

	// TaskStore keeps the task records of the critic gate.
	TaskStore

	// SchemaVersion returns the version of the store's schema.
	SchemaVersion(ctx context.Context) (int, error)
	// Close releases the store's connections. It is idempotent; every other
	// method of a closed store returns [ErrClosed].
	Close() error
}

// Sentinel errors. Match them with errors.Is.
var (
	// ErrUnavailable is wrapped by every error that means the store could
	// not be reached or could not write: a refused connection, a lost
	// network, a locked or read-only file, a full disk, a closed store.
	ErrUnavailable = errors.New("ledger: store unavailable")
	// ErrClosed is returned by the methods of a closed store; it wraps
	// ErrUnavailable.
	ErrClosed = fmt.Errorf("ledger: store is closed (%w)", ErrUnavailable)
	// ErrInvalid is wrapped by every error about a malformed argument.
	ErrInvalid = errors.New("ledger: invalid argument")
	// ErrDuplicateInvocation is returned by Reserve for an invocation id
	// that already holds a reservation or has been settled.
	ErrDuplicateInvocation = errors.New("ledger: invocation already reserved or settled")
	// ErrAlreadySettled is returned by a second Settle of the same
	// invocation; nothing was changed, and callers may treat it as success.
	ErrAlreadySettled = errors.New("ledger: invocation already settled")
	// ErrOverBudget matches every [*BudgetError].
	ErrOverBudget = errors.New("ledger: over budget")
	// ErrPaused matches every [*PausedError].
	ErrPaused = errors.New("ledger: scope paused")
	// ErrSchemaTooNew is returned by the constructors when the database was
	// migrated by a newer version of CortexBuild than this one.
	ErrSchemaTooNew = errors.New("ledger: database schema is newer than this program")
)

// BudgetError says that a reservation was refused because a scope would
// exceed its limit. Nothing was held.
type BudgetError struct {
	Scope Scope
	Limit provider.Money
	Spent provider.Money
	Held  provider.Money
	Asked provider.Money // the amount the reservation asked for
}

// Error says which scope refused, with its limit, spend, holds and the
// amount asked.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("ledger: budget of %s would be exceeded: limit $%s, spent $%s, held $%s, asked $%s",
		e.Scope, e.Limit, e.Spent, e.Held, e.Asked)
}

// Is makes errors.Is(err, ErrOverBudget) true.
func (e *BudgetError) Is(target error) bool { return target == ErrOverBudget }

// PausedError says that a reservation was refused because a scope is
// paused. Nothing was held.
type PausedError struct {
	Scope  Scope
	Reason string
}

// Error says which scope is paused and why.
func (e *PausedError) Error() string {
	return fmt.Sprintf("ledger: %s is paused: %s", e.Scope, e.Reason)
}

// Is makes errors.Is(err, ErrPaused) true.
func (e *PausedError) Is(target error) bool { return target == ErrPaused }

// Budget is the state of one scope.
type Budget struct {
	Scope Scope `json:"scope"`
	// Limited says whether the scope has a limit; without one, Limit is
	// zero and the scope never refuses a reservation.
	Limited bool           `json:"limited"`
	Limit   provider.Money `json:"limit_usd"`
	// Spent is the sum of settled costs charged to the scope.
	Spent provider.Money `json:"spent_usd"`
	// Held is the sum of the unexpired reservations against the scope.
	Held        provider.Money `json:"held_usd"`
	Paused      bool           `json:"paused"`
	PauseReason string         `json:"pause_reason,omitempty"`
}

// Remaining returns what can still be reserved against the scope (limit −
// spent − held, never below zero), and false if the scope has no limit.
func (b Budget) Remaining() (provider.Money, bool) {
	if !b.Limited {
		return 0, false
	}
	r := b.Limit - b.Spent - b.Held
	if r < 0 {
		r = 0
	}
	return r, true
}

// Reservation asks to hold an estimated cost against several scopes.
type Reservation struct {
	// InvocationID names the invocation; it is unique for the store's
	// lifetime.
	InvocationID string
	// Amount is the estimate held; zero is allowed.
	Amount provider.Money
	// Scopes are the budgets charged, typically [TaskScope] and
	// [MonthScope]; duplicates are ignored.
	Scopes []Scope
	// ExpiresAt is when the hold lapses if it is neither settled nor
	// released (for example because the process crashed). It must be after
	// the store's clock.
	ExpiresAt time.Time
}

// Settlement is the outcome of a reserved invocation.
type Settlement struct {
	InvocationID string
	// Cost is the actual cost charged to the budgets; it may be above or
	// below the reserved estimate. It is the whole invocation's: the caller
	// makes it the sum of the Cost of Entry and of every Earlier row. The
	// store charges Cost alone and does not add the rows up.
	Cost provider.Money
	// Scopes are charged when the invocation no longer holds a reservation
	// (it was released, or expired and was cleaned up); while the
	// reservation exists, its own scopes are charged. Required.
	Scopes []Scope
	// Entry is the ledger row written with the settlement. An empty
	// Entry.InvocationID is taken from InvocationID; a zero Entry.Time from
	// the store's clock.
	Entry AttemptRow
	// Earlier are the invocation's earlier attempt rows (the failed tries
	// before Entry), written in the same transaction, so that every row of
	// an invocation is recorded exactly once, with its settlement. Their
	// empty InvocationID and zero Time are filled like Entry's. Each row
	// carries its own Cost (usually zero for a failed try, but partial usage
	// may be billed), which [Store.Spend] sums with the other rows.
	Earlier []AttemptRow
	// Lease names a reservation (a budget lease) the invocation drew
	// Reserved from instead of holding a reservation of its own: with the
	// settlement, the lease's hold on every scope shrinks by Reserved (never
	// below zero), and s.Scopes are charged. A lease that no longer exists
	// (released or expired) is ignored. Empty for an invocation that held
	// its own reservation or none; should an invocation have both, its own
	// reservation is settled as usual and the lease shrinks too. Reserved
	// must not be negative, and needs a Lease when it is above zero.
	Lease    string
	Reserved provider.Money
}

// AttemptRow is one ledger row: one attempt of an invocation at one
// provider.
type AttemptRow struct {
	InvocationID string    `json:"invocation_id"`
	Time         time.Time `json:"time"`
	Task         string    `json:"task,omitempty"`
	Agent        string    `json:"agent,omitempty"`
	Provider     string    `json:"provider"`
	Model        string    `json:"model,omitempty"`
	// Outcome is "ok" or the kind of the failure (a provider.Kind's text).
	Outcome          string         `json:"outcome"`
	InputTokens      int64          `json:"input_tokens"`
	OutputTokens     int64          `json:"output_tokens"`
	CacheReadTokens  int64          `json:"cache_read_tokens"`
	CacheWriteTokens int64          `json:"cache_write_tokens"`
	Cost             provider.Money `json:"cost_usd"`
	CacheHit         bool           `json:"cache_hit"`
	// Saving is what a cache hit saved.
	Saving provider.Money `json:"saving_usd"`
	// EstimatedUsage says the token counts were estimated, not reported by
	// the provider.
	EstimatedUsage bool `json:"estimated_usage"`
	// Unpriced says the price catalog lists neither the model the answer
	// named nor the one requested: Cost is then the invocation's
	// reservation (its upper bound), not a price.
	Unpriced bool `json:"unpriced,omitempty"`
	// Key is the public id of the virtual key the call was made with
	// through the gateway ("" for none); never its secret.
	Key string `json:"key,omitempty"`
	// Session is the host's session id of a call made through the gateway
	// by a coding agent (Claude Code's X-Claude-Code-Session-Id, Codex's
	// session_id); "" for none. HostAgent is the host's id of the subagent
	// that made the call ("" for the session's main agent) and ParentAgent
	// the id of the agent that started that subagent. They are client
	// input: the stores keep at most [MaxHostIDLen] printable characters
	// of each (see [CheckHostID]), so a longer or unprintable value is
	// recorded cut and with U+FFFD in place of what could not be kept.
	Session     string `json:"session,omitempty"`
	HostAgent   string `json:"host_agent,omitempty"`
	ParentAgent string `json:"parent_agent,omitempty"`
}

// GroupBy names how [Store.Spend] groups its totals.
type GroupBy string

// The groupings. The key of a group is the task id, the agent name,
// "provider/model", the month as "YYYY-MM", the virtual key's id ("" for
// the rows of calls made without one), the host's session id ("" for the
// calls made without one) or the host's subagent id ("" for the calls of a
// session's main agent, and those made without a session).
const (
	ByNone      GroupBy = ""
	ByTask      GroupBy = "task"
	ByAgent     GroupBy = "agent"
	ByModel     GroupBy = "model"
	ByMonth     GroupBy = "month"
	ByKey       GroupBy = "key"
	BySession   GroupBy = "session"
	ByHostAgent GroupBy = "host_agent"
)

// GroupBys lists the groupings [Store.Spend] takes, ByNone first.
func GroupBys() []GroupBy {
	return []GroupBy{ByNone, ByTask, ByAgent, ByModel, ByMonth, ByKey, BySession, ByHostAgent}
}

// Filter selects ledger rows; empty fields match everything.
type Filter struct {
	Task     string
	Agent    string
	Provider string
	// Key selects the rows of the calls made with one virtual key (its
	// public id).
	Key string
	// Session selects the rows of one host session (see
	// [AttemptRow.Session]).
	Session string
	// From is inclusive and To exclusive.
	From time.Time
	To   time.Time
	// By groups the totals of [Store.Spend].
	By GroupBy
	// Location is the time zone months are counted in for ByMonth (nil
	// means UTC).
	Location *time.Location
}

// Totals sums ledger rows.
type Totals struct {
	Cost             provider.Money `json:"cost_usd"`
	Savings          provider.Money `json:"savings_usd"`
	Attempts         int64          `json:"attempts"`
	CacheHits        int64          `json:"cache_hits"`
	Estimated        int64          `json:"estimated"` // rows with estimated usage
	Unpriced         int64          `json:"unpriced"`  // rows charged their reservation, unpriced
	InputTokens      int64          `json:"input_tokens"`
	OutputTokens     int64          `json:"output_tokens"`
	CacheReadTokens  int64          `json:"cache_read_tokens"`
	CacheWriteTokens int64          `json:"cache_write_tokens"`
}

func (t *Totals) add(o Totals) {
	t.Cost += o.Cost
	t.Savings += o.Savings
	t.Attempts += o.Attempts
	t.CacheHits += o.CacheHits
	t.Estimated += o.Estimated
	t.Unpriced += o.Unpriced
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.CacheReadTokens += o.CacheReadTokens
	t.CacheWriteTokens += o.CacheWriteTokens
}

// SpendGroup is the totals of one group.
type SpendGroup struct {
	Key string `json:"key"`
	Totals
}

// SpendReport is what [Store.Spend] returns: the grand total and, unless
// By is ByNone, one group per key, sorted by key.
type SpendReport struct {
	By     GroupBy      `json:"by,omitempty"`
	Total  Totals       `json:"total"`
	Groups []SpendGroup `json:"groups,omitempty"`
}

// Option configures a store.
type Option func(*options)

type options struct {
	now         func() time.Time
	project     string
	schema      string
	synchronous string
	busyTimeout time.Duration
	maxConns    int32
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	alerts      []int // with alertsSet: the thresholds of WithAlerts
	alertsSet   bool
}

func buildOptions(opts []Option) options {
	o := options{now: time.Now, synchronous: "FULL", busyTimeout: 10 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithClock sets the store's clock, used to tell expired holds and to time
// ledger rows that carry no time. The default is time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithProject confines the store to one project: every scope, hold,
// ledger row and task it reads or writes is the project's, so several
// projects can share one database (and one PostgreSQL schema) with the same
// task ids and months without seeing each other's budgets, spend, pauses or
// tasks. Invocation ids (reservations, settlements) are unique across the
// database. A store opened without it works in the unnamed project "". The
// id is 1 to 100 characters: lower-case letters, digits, '.', '_' and '-',
// starting with a letter or digit (see [ValidProject]).
//
// The rows of a database written before projects existed (schema version
// 3) are adopted by the project of the first store that opens it: the
// migration gives them that project and records it in the adoption table.
func WithProject(id string) Option { return func(o *options) { o.project = id } }

var projectID = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// ValidProject reports whether id is a well-formed project id for
// [WithProject] (the empty id, the unnamed project, is not).
func ValidProject(id string) bool { return projectID.MatchString(id) }

// checkProject validates the project of a store's options.
func (o options) checkProject() error {
	if o.project != "" && !ValidProject(o.project) {
		return fmt.Errorf("%w: project %q: 1 to 100 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit", ErrInvalid, o.project)
	}
	return nil
}

// migrationSQL puts the project in a migration's statement ("_P_").
func (o options) migrationSQL(q string) string {
	return strings.ReplaceAll(q, "_P_", "'"+strings.ReplaceAll(o.project, "'", "''")+"'")
}

// WithSchema sets the PostgreSQL schema the tables live in (created if
// missing); the default is [DefaultSchema]. SQLite ignores it.
func WithSchema(name string) Option { return func(o *options) { o.schema = name } }

// WithSynchronousNormal makes SQLite commit without waiting for the disk
// (PRAGMA synchronous=NORMAL in WAL mode): a crash of the process loses
// nothing, a crash of the machine or a power cut may lose the last
// transactions. The default is FULL, which loses nothing committed.
// PostgreSQL ignores it.
func WithSynchronousNormal() Option { return func(o *options) { o.synchronous = "NORMAL" } }

// WithBusyTimeout sets how long SQLite waits for another process's write
// lock before the operation fails with [ErrUnavailable]; the default is 10
// seconds. PostgreSQL ignores it.
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithMaxConns sets the size of the PostgreSQL connection pool (default:
// pgx's, the larger of 4 and the number of CPUs). SQLite ignores it.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = int32(n) } }

// WithDialer makes PostgreSQL connections with dial, which is given the
// host name (or IP literal) and port of the connection string, or a unix
// socket's path: pgx does not look names up itself then, so dial decides
// on the addresses (the locality gate's ServiceDial). Without it pgx
// resolves and dials. SQLite ignores it.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dial = dial }
}
