// Package ledger is the durable spend record and budget store of the
// provider layer: it admits an invocation only if every budget it counts
// against can take its estimate, turns the estimate into the actual cost
// when the invocation ends, and keeps one ledger row per attempt.
//
// # Budgets and scopes
//
// A budget is a limit ([provider.Money], exact nano-dollars) on a [Scope]:
// "task:<id>" for all invocations of a task, or "month:<YYYY-MM>" for the
// whole project in a calendar month, which the caller computes in its
// configured time zone ([MonthScope]). A scope without a limit is tracked
// (its spend accumulates) but never refuses. A scope can be paused; a
// settlement that makes a scope reach its limit pauses it, and raising the
// limit ([Store.SetBudget]) or [Store.Resume] lifts that pause.
//
// A settlement that takes a scope's spend across a threshold of its limit
// ([WithAlerts]: 50, 80 and 100 % by default) records an [Alert] in the
// same transaction, once per scope, threshold and limit; [Store.ClaimAlerts]
// and [Store.AlertNotified] let the processes sharing the store announce
// each once.
//
// # The life of a reservation
//
//	                   Reserve(id, estimate, scopes, expires_at)
//	                   all scopes or none; spent+held+estimate <= limit
//	                                    │
//	 *BudgetError / *PausedError ◄──────┤ (nothing held)
//	                                    ▼
//	                          ┌───────────────────┐
//	                          │  hold (estimate)  │  counted in Held of
//	                          │   on every scope  │  every scope
//	                          └─────────┬─────────┘
//	         ┌──────────────────────────┼───────────────────────────┐
//	         ▼                          ▼                           ▼
//	Settle(id, actual, entry)     Release(id)          ExpireReservations(now)
//	hold → spend of the actual    hold dropped,        holds past expires_at
//	cost + ledger row, once;      nothing spent        dropped (a crashed
//	a scope at its limit is                            process leaks nothing);
//	paused                                             Reserve ignores them too
//
// Settle is idempotent by invocation id (a second one returns
// [ErrAlreadySettled] and changes nothing), and settling an invocation
// whose hold is gone still records its spend exactly once, because the money
// was spent. Release is idempotent too. A settlement also writes the
// invocation's earlier attempt rows ([Settlement.Earlier]) in its
// transaction, so a retried settlement never records a row twice.
//
// A budget lease is a reservation that other invocations draw on instead of
// reserving for themselves: each names it in its settlement
// ([Settlement.Lease]), which shrinks the lease's hold by what was drawn in
// the same transaction as the charge, and [Store.Shrink] gives back what the
// lease will not use.
//
// # Back ends
//
// [OpenSQLite] is the embedded default (a file under .cortexbuild/, WAL,
// busy_timeout, one writer at a time with BEGIN IMMEDIATE, so several
// processes may share the file). [OpenPostgres] serves several processes on
// several machines: each transaction locks the scope rows it decides on with
// SELECT … FOR UPDATE in scope order. Both carry a versioned schema
// (schema_version: each migration applied once, in order, in a
// transaction; a newer schema than this program knows is refused with
// [ErrSchemaTooNew]) and pass one conformance suite, ledger/ledgertest.
//
// SQLite commits with synchronous=FULL by default, so nothing committed is
// lost even on a power cut; [WithSynchronousNormal] keeps every commit across
// a crash of the process but may lose the last ones on a crash of the
// machine, for two to four times the throughput. Writes that arrive while a
// transaction runs are committed together in the next one (group commit),
// each still seeing the effects of those before it.
//
// An unreachable store returns errors wrapping [ErrUnavailable], on which
// the orchestrator fails closed for paid endpoints; PostgreSQL's are
// [*ServerError]s naming the server (host:port, never credentials).
//
// [Fast] takes admission and spend recording off the call path with budget
// leases and a journal: a file beside the embedded store, a table of the
// store on PostgreSQL, whose holds then expire in seconds unless renewed.
//
// # Task records
//
// The store also keeps the audit trail of the critic gate ([TaskStore]): a
// task started with a risk level, the plans, reviews and refusals recorded
// on it as events that are only ever appended, and its completion, which
// marks the task and records the decision in one transaction. The store
// keeps the record; the rules of the gate are decided above it.
//
// # Spend reports
//
// [Store.Spend] sums the ledger rows a [Filter] selects, grouped by task,
// agent, provider/model or month; [SpendReport] marshals to JSON with money
// as decimal strings, for `cortexbuild spend --json`.
package ledger
