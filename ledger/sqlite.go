package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cortexbuild/cortexbuild/provider"
)

// DefaultSQLitePath is where the embedded store lives, relative to the
// project root.
const DefaultSQLitePath = ".cortexbuild/ledger.db"

// SQLite is the embedded [Store]: one database file in WAL mode. Writes go
// through a single connection, one transaction at a time, each begun with
// BEGIN IMMEDIATE so that writers in other processes sharing the file wait
// for the lock (busy_timeout) instead of failing half-way. Reads use a
// separate pool and never block the writer.
//
// Writes are group-committed: operations that arrive while a transaction
// runs wait and then run one after the other in the next transaction, which
// commits them together (one WAL append and, with synchronous=FULL, one
// fsync). Each operation still sees the effects of those before it, exactly
// as if it had its own transaction, and returns only once its transaction
// has committed. An operation refused on its own terms (a budget, a
// duplicate) does not disturb the others; a failure of the database fails
// every operation of the transaction, and none of them took effect.
type SQLite struct {
	path string
	now  func() time.Time
	// project is the project whose rows the store reads and writes.
	project string
	// alerts are the thresholds, in percent of a limit, whose crossing a
	// settlement records.
	alerts []int
	// durable is the configured synchronous mode (FULL or NORMAL); sync is
	// the writer connection's current one. A transaction that only holds,
	// shrinks or releases reservations commits with NORMAL: losing it to a
	// power cut loses nothing of value (a hold only guards concurrency, and
	// every process holding one died too), and the next durable commit
	// syncs it.
	durable, sync string

	qmu     sync.Mutex // guards queue and leading
	queue   []*writeOp // operations waiting for the next transaction
	leading bool       // a goroutine is running transactions
	mu      sync.Mutex // the writer connection: held for each transaction
	wdb     *sql.DB
	w       *sql.Conn
	st      sqliteStmts
	rdb     *sql.DB
	closed  atomic.Bool
}

// sqliteStmts are the writer's prepared statements.
type sqliteStmts struct {
	begin, commit, rollback                            *sql.Stmt
	state, insertScope, cleanupScope, cleanupID, dup   *sql.Stmt
	insertHold, holdsOf, deleteHolds, insertSettlement *sql.Stmt
	shrinkHolds, drawFromLease                         *sql.Stmt
	charge, pauseBudget, insertAttempt                 *sql.Stmt
	taskState, insertTask, setTaskRisk, completeTask   *sql.Stmt
	insertTaskEvent, task, insertAlert                 *sql.Stmt
	// readTaskState is taskState on the read pool.
	readTaskState *sql.Stmt
}

var _ Store = (*SQLite)(nil)

// OpenSQLite opens (creating it and its directory if needed) the database
// file at path and brings its schema up to date. The file is created with
// mode 0600.
func OpenSQLite(ctx context.Context, path string, opts ...Option) (*SQLite, error) {
	o := buildOptions(opts)
	if err := o.checkProject(); err != nil {
		return nil, err
	}
	alerts, err := o.alertThresholds()
	if err != nil {
		return nil, err
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("%w: SQLite path %q (empty, or contains ? or #)", ErrInvalid, path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	// The file is never opened here but by SQLite alone: closing any
	// descriptor of it would drop every POSIX lock this process holds on
	// it, SQLite's included (another store of the process may have the
	// file open), and a client in another process that then finds itself
	// the last connection checkpoints and deletes the WAL under the
	// running stores. SQLite creates a new file with its default mode; it
	// is made 0600 as soon as it exists, before anything but its header is
	// written (the -wal and -shm files, created at the first write, take
	// the database file's mode).
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)

	dsn := path + "?" + strings.Join([]string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", o.busyTimeout.Milliseconds()),
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(" + o.synchronous + ")",
	}, "&")
	s := &SQLite{path: path, now: o.now, project: o.project, alerts: alerts, durable: o.synchronous, sync: o.synchronous}
	s.wdb, err = sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxLifetime(0)
	fail := func(err error) (*SQLite, error) {
		if s.w != nil {
			s.w.Close()
		}
		s.wdb.Close()
		if s.rdb != nil {
			s.rdb.Close()
		}
		return nil, err
	}
	if s.w, err = connect(ctx, s.wdb, o.busyTimeout); err != nil {
		return fail(sqliteErr("open "+path, err))
	}
	if created {
		if err := privateFiles(path); err != nil {
			return fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
		}
	}
	if err := s.migrate(ctx, LatestSchemaVersion, o.migrationSQL); err != nil {
		return fail(err)
	}
	if err := s.prepare(ctx); err != nil {
		return fail(sqliteErr("prepare", err))
	}
	s.rdb, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
	}
	s.rdb.SetMaxOpenConns(4)
	if s.st.readTaskState, err = s.rdb.PrepareContext(ctx, taskStateSQL); err != nil {
		return fail(sqliteErr("prepare", err))
	}
	return s, nil
}

// privateFiles makes a database file SQLite has just created, and its
// -wal and -shm files if they exist yet, readable by their owner only. It
// changes modes by name and opens nothing (see [OpenSQLite]).
func privateFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && (p == path || !errors.Is(err, fs.ErrNotExist)) {
			return err
		}
	}
	return nil
}

// connect opens the writer connection. Switching a new file to WAL mode
// needs a lock for which SQLite does not wait when another process is
// doing the same (waiting could deadlock), so the first open of a file by
// several processes at once is retried until the busy timeout.
func connect(ctx context.Context, db *sql.DB, busyTimeout time.Duration) (*sql.Conn, error) {
	deadline := time.Now().Add(busyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		c, err := db.Conn(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().Add(delay).After(deadline) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// migrate brings the schema up to version target, one migration at a time.
func (s *SQLite) migrate(ctx context.Context, target int, expand func(string) string) error {
	for {
		done, err := s.migrateOne(ctx, target, expand)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration up to target, if any, in one
// transaction.
func (s *SQLite) migrateOne(ctx context.Context, target int, expand func(string) string) (done bool, err error) {
	if _, err := s.w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false, sqliteErr("migrate", err)
	}
	defer func() {
		if err != nil {
			s.w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		return false, sqliteErr("migrate", err)
	}
	applied, err := s.appliedVersions(ctx)
	if err != nil {
		return false, sqliteErr("migrate", err)
	}
	if cur := slices.Max(append(applied, 0)); cur > LatestSchemaVersion {
		return false, fmt.Errorf("%w: %s is at version %d, this program knows up to %d", ErrSchemaTooNew, s.path, cur, LatestSchemaVersion)
	}
	m, ok := nextMigration(applied, target)
	if ok {
		for _, q := range m.sqlite {
			if _, err := s.w.ExecContext(ctx, expand(q)); err != nil {
				return false, fmt.Errorf("ledger: migration %d (%s): %w", m.version, m.description, sqliteErr("migrate", err))
			}
		}
		if _, err := s.w.ExecContext(ctx, "INSERT INTO schema_version (version, description, applied_at) VALUES ($1, $2, $3)",
			m.version, m.description, nanos(s.now())); err != nil {
			return false, sqliteErr("migrate", err)
		}
	}
	if _, err := s.w.ExecContext(ctx, "COMMIT"); err != nil {
		return false, sqliteErr("migrate", err)
	}
	return !ok, nil
}

// appliedVersions lists the versions recorded in schema_version.
func (s *SQLite) appliedVersions(ctx context.Context) ([]int, error) {
	rows, err := s.w.QueryContext(ctx, "SELECT version FROM schema_version")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *SQLite) prepare(ctx context.Context) error {
	var err error
	p := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = s.w.PrepareContext(ctx, q)
		return st
	}
	s.st = sqliteStmts{
		begin:    p("BEGIN IMMEDIATE"),
		commit:   p("COMMIT"),
		rollback: p("ROLLBACK"),
		state: p(`SELECT s.limit_nanos, s.spent_nanos, s.paused, s.pause_reason,
				coalesce(sum(CASE WHEN h.expires_at > $2 THEN h.amount_nanos END), 0),
				count(CASE WHEN h.expires_at <= $2 THEN 1 END)
			FROM scopes s LEFT JOIN holds h ON h.project = s.project AND h.scope = s.scope
			WHERE s.project = $3 AND s.scope = $1 GROUP BY s.scope`),
		insertScope: p(`INSERT INTO scopes (project, scope, updated_at) VALUES ($3, $1, $2) ON CONFLICT (project, scope) DO NOTHING`),
		cleanupScope: p(`DELETE FROM holds WHERE invocation_id IN
			(SELECT invocation_id FROM holds WHERE project = $3 AND scope = $1 AND expires_at <= $2)`),
		cleanupID: p(`DELETE FROM holds WHERE invocation_id = $1`),
		// Live holds of the id, expired holds of the id, and a settlement.
		dup: p(`SELECT count(CASE WHEN expires_at > $2 THEN 1 END), count(CASE WHEN expires_at <= $2 THEN 1 END),
				EXISTS (SELECT 1 FROM settlements WHERE invocation_id = $1)
			FROM holds WHERE invocation_id = $1`),
		insertHold:  p(`INSERT INTO holds (invocation_id, scope, amount_nanos, created_at, expires_at, project) VALUES ($1, $2, $3, $4, $5, $6)`),
		holdsOf:     p(`SELECT scope, amount_nanos FROM holds WHERE invocation_id = $1 ORDER BY scope`),
		deleteHolds: p(`DELETE FROM holds WHERE invocation_id = $1`),
		shrinkHolds: p(`UPDATE holds SET amount_nanos = $2 WHERE invocation_id = $1 AND amount_nanos > $2`),
		drawFromLease: p(`UPDATE holds SET amount_nanos = max(amount_nanos - $2, 0)
			WHERE invocation_id = $1 AND amount_nanos > 0`),
		insertSettlement: p(`INSERT INTO settlements (invocation_id, cost_nanos, reserved_nanos, settled_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (invocation_id) DO NOTHING`),
		charge: p(`INSERT INTO scopes (project, scope, spent_nanos, updated_at) VALUES ($4, $1, $2, $3)
			ON CONFLICT (project, scope) DO UPDATE SET spent_nanos = scopes.spent_nanos + excluded.spent_nanos, updated_at = excluded.updated_at
			RETURNING limit_nanos, spent_nanos, paused`),
		pauseBudget:     p(`UPDATE scopes SET paused = 1, pause_kind = 'budget', pause_reason = $2, updated_at = $3 WHERE project = $4 AND scope = $1`),
		insertAttempt:   p(insertAttemptSQL("attempts")),
		taskState:       p(taskStateSQL),
		insertTask:      p(insertTaskSQL("tasks")),
		setTaskRisk:     p(setTaskRiskSQL("tasks")),
		completeTask:    p(completeTaskSQL("tasks")),
		insertTaskEvent: p(insertTaskEventSQL("task_events")),
		task:            p(taskSQL("")),
		insertAlert:     p(insertAlertSQL("budget_alerts")),
	}
	return err
}

func insertAttemptSQL(table string) string {
	return `INSERT INTO ` + table + ` (invocation_id, at, task, agent, provider, model, outcome,
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
		cost_nanos, cache_hit, saving_nanos, estimated, project, unpriced, key_id,
		session, host_agent, parent_agent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`
}

// attemptArgs are the arguments of insertAttemptSQL for a row of project.
func attemptArgs(project string, a AttemptRow) []any {
	return []any{a.InvocationID, nanos(a.Time), a.Task, a.Agent, a.Provider, a.Model, a.Outcome,
		a.InputTokens, a.OutputTokens, a.CacheReadTokens, a.CacheWriteTokens,
		int64(a.Cost), a.CacheHit, int64(a.Saving), a.EstimatedUsage, project, a.Unpriced, keyColumn(a.Key),
		a.Session, a.HostAgent, a.ParentAgent}
}

// keyColumn is the key_id of a row: NULL for a call made without a
// virtual key.
func keyColumn(id string) *string {
	if id == "" {
		return nil
	}
	return &id
}

// sqliteErr classifies a driver error: the ones that mean the database
// cannot be reached or written wrap ErrUnavailable.
func sqliteErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY,
			sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_PERM:
			return fmt.Errorf("ledger: %s: %w: %v", op, ErrUnavailable, err)
		}
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ledger: %s: %w: %v", op, ErrUnavailable, err)
	}
	return fmt.Errorf("ledger: %s: %w", op, err)
}

// writeOp is one operation waiting for a write transaction.
type writeOp struct {
	op   string
	fn   func(ctx context.Context) error
	err  error
	wake chan bool // true: lead the next transaction; false: done, err is set
}

// maxBatch bounds the operations of one transaction, so that writers in
// other processes wait for the lock no longer than that.
const maxBatch = 128

// taskStateSQL reads a task's risk and state ($1 the task, $2 the project).
const taskStateSQL = `SELECT risk, state FROM tasks WHERE project = $2 AND id = $1`

// write runs fn in a write transaction on the writer connection, possibly
// together with other operations (see [SQLite]), and returns once that
// transaction has committed or rolled back. The store's own refusals
// (budget, duplicate, invalid) pass through unchanged; driver errors are
// classified. fn must not write anything it would regret before it returns
// such a refusal: the transaction goes on and commits.
//
// ctx is checked before the operation is queued; the transaction itself is
// not interrupted by it (its statements take microseconds, and waiting for
// another process's lock is bounded by busy_timeout), which spares the
// driver a goroutine per statement and makes the outcome match the error
// returned.
func (s *SQLite) write(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	w := &writeOp{op: op, fn: fn, wake: make(chan bool, 1)}
	s.qmu.Lock()
	s.queue = append(s.queue, w)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	if !lead {
		lead = <-w.wake
	}
	if lead {
		s.lead()
		<-w.wake
	}
	return w.err
}

// lead runs one transaction of the queued operations (the leader's own is
// the first of them), then hands the lead to the first operation still
// waiting, if any.
func (s *SQLite) lead() {
	s.qmu.Lock()
	n := min(len(s.queue), maxBatch)
	batch := s.queue[:n:n]
	s.queue = s.queue[n:]
	s.qmu.Unlock()

	s.runBatch(batch)
	for _, w := range batch {
		w.wake <- false
	}

	s.qmu.Lock()
	defer s.qmu.Unlock()
	if len(s.queue) == 0 {
		s.leading = false
		s.queue = nil
		return
	}
	s.queue[0].wake <- true
}

// runBatch runs the operations of batch in one transaction and sets each
// one's err.
func (s *SQLite) runBatch(batch []*writeOp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failAll := func(err error) {
		for _, w := range batch {
			if w.err == nil || !isOwn(w.err) || errors.Is(err, ErrClosed) {
				w.err = err
			}
		}
	}
	if s.closed.Load() {
		failAll(ErrClosed)
		return
	}
	ctx := context.Background()
	want := "NORMAL"
	for _, w := range batch {
		if w.op != "reserve" && w.op != "release" && w.op != "shrink" {
			want = s.durable
		}
	}
	if want != s.sync {
		if _, err := s.w.ExecContext(ctx, "PRAGMA synchronous="+want); err != nil {
			failAll(sqliteErr(batch[0].op, err))
			return
		}
		s.sync = want
	}
	if _, err := s.st.begin.ExecContext(ctx); err != nil {
		failAll(sqliteErr(batch[0].op, err))
		return
	}
	for _, w := range batch {
		err := w.fn(ctx)
		if err == nil || isOwn(err) {
			w.err = err
			continue
		}
		// The database failed: nothing of this transaction stays.
		s.st.rollback.ExecContext(ctx)
		failAll(sqliteErr(w.op, err))
		return
	}
	if _, err := s.st.commit.ExecContext(ctx); err != nil {
		s.st.rollback.ExecContext(ctx)
		failAll(sqliteErr(batch[0].op, err))
	}
}

// isOwn reports whether err is one of the store's own outcomes rather than
// a driver failure.
func isOwn(err error) bool {
	return errors.Is(err, ErrOverBudget) || errors.Is(err, ErrPaused) || errors.Is(err, ErrDuplicateInvocation) ||
		errors.Is(err, ErrAlreadySettled) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, ErrNoTask) || errors.Is(err, ErrTaskCompleted)
}

// exec runs one statement outside the prepared set in a write transaction.
func (s *SQLite) exec(ctx context.Context, op, q string, args ...any) (int64, error) {
	var n int64
	err := s.write(ctx, op, func(ctx context.Context) error {
		res, err := s.w.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// reader returns the read pool, or ErrClosed.
func (s *SQLite) reader() (*sql.DB, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return s.rdb, nil
}

// SetBudget implements [Store].
func (s *SQLite) SetBudget(ctx context.Context, scope Scope, limit provider.Money) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if limit < 0 {
		return fmt.Errorf("%w: negative limit $%s for %s", ErrInvalid, limit, scope)
	}
	_, err := s.exec(ctx, "set budget", setBudgetSQL("scopes", true), string(scope), int64(limit), nanos(s.now()), s.project)
	return err
}

// SetDefaultBudget implements [Store].
func (s *SQLite) SetDefaultBudget(ctx context.Context, scope Scope, limit provider.Money) (bool, error) {
	if err := checkBudget(scope, limit); err != nil {
		return false, err
	}
	n, err := s.exec(ctx, "set budget", setBudgetSQL("scopes", false), string(scope), int64(limit), nanos(s.now()), s.project)
	return n > 0, err
}

// checkBudget validates the arguments of SetBudget and SetDefaultBudget.
func checkBudget(scope Scope, limit provider.Money) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if limit < 0 {
		return fmt.Errorf("%w: negative limit $%s for %s", ErrInvalid, limit, scope)
	}
	return nil
}

// setBudgetSQL sets a limit and lifts a pause the budget caused if the
// spend is now below the limit. An operator's limit (SetBudget) is marked;
// a default one changes only a limit that is not.
func setBudgetSQL(table string, operator bool) string {
	set, only := "true", ""
	if !operator {
		set, only = "false", " WHERE NOT t.limit_set"
	}
	return `INSERT INTO ` + table + ` AS t (project, scope, limit_nanos, limit_set, updated_at) VALUES ($4, $1, $2, ` + set + `, $3)
		ON CONFLICT (project, scope) DO UPDATE SET
			limit_nanos = excluded.limit_nanos,
			limit_set = excluded.limit_set,
			paused = CASE WHEN t.pause_kind = 'budget' AND t.spent_nanos < excluded.limit_nanos THEN false ELSE t.paused END,
			pause_reason = CASE WHEN t.pause_kind = 'budget' AND t.spent_nanos < excluded.limit_nanos THEN '' ELSE t.pause_reason END,
			pause_kind = CASE WHEN t.pause_kind = 'budget' AND t.spent_nanos < excluded.limit_nanos THEN '' ELSE t.pause_kind END,
			updated_at = excluded.updated_at` + only
}

// removeBudgetSQL removes a scope's limit, or with defaultOnly only a
// default one (not an operator's), the way SetDefaultBudget changes one.
func removeBudgetSQL(table string, defaultOnly bool) string {
	only := ""
	if defaultOnly {
		only = " AND limit_nanos IS NOT NULL AND NOT limit_set"
	}
	return `UPDATE ` + table + ` SET limit_nanos = NULL, limit_set = false,
		paused = CASE WHEN pause_kind = 'budget' THEN false ELSE paused END,
		pause_reason = CASE WHEN pause_kind = 'budget' THEN '' ELSE pause_reason END,
		pause_kind = CASE WHEN pause_kind = 'budget' THEN '' ELSE pause_kind END,
		updated_at = $2
		WHERE project = $3 AND scope = $1` + only
}

// RemoveBudget implements [Store].
func (s *SQLite) RemoveBudget(ctx context.Context, scope Scope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	_, err := s.exec(ctx, "remove budget", removeBudgetSQL("scopes", false), string(scope), nanos(s.now()), s.project)
	return err
}

// RemoveDefaultBudget implements [Store].
func (s *SQLite) RemoveDefaultBudget(ctx context.Context, scope Scope) (bool, error) {
	if err := scope.Validate(); err != nil {
		return false, err
	}
	n, err := s.exec(ctx, "remove budget", removeBudgetSQL("scopes", true), string(scope), nanos(s.now()), s.project)
	return n > 0, err
}

// budgetSQL selects scopes with their unexpired holds ($1 is now).
func budgetSQL(schema string) string {
	return `SELECT s.scope, s.limit_nanos, s.spent_nanos, s.paused, s.pause_reason,
		CAST(coalesce((SELECT sum(h.amount_nanos) FROM ` + schema + `holds h WHERE h.project = s.project AND h.scope = s.scope AND h.expires_at > $1), 0) AS BIGINT)
		FROM ` + schema + `scopes s`
}

func scanBudget(sc interface{ Scan(...any) error }) (Budget, error) {
	var b Budget
	var limit sql.NullInt64
	err := sc.Scan((*string)(&b.Scope), &limit, (*int64)(&b.Spent), &b.Paused, &b.PauseReason, (*int64)(&b.Held))
	b.Limited, b.Limit = limit.Valid, provider.Money(limit.Int64)
	return b, err
}

// Budget implements [Store].
func (s *SQLite) Budget(ctx context.Context, scope Scope) (Budget, error) {
	if err := scope.Validate(); err != nil {
		return Budget{}, err
	}
	db, err := s.reader()
	if err != nil {
		return Budget{}, err
	}
	b, err := scanBudget(db.QueryRowContext(ctx, budgetSQL("")+" WHERE s.project = $3 AND s.scope = $2", nanos(s.now()), string(scope), s.project))
	if errors.Is(err, sql.ErrNoRows) {
		return Budget{Scope: scope}, nil
	}
	return b, sqliteErr("budget", err)
}

// Budgets implements [Store].
func (s *SQLite) Budgets(ctx context.Context) ([]Budget, error) {
	db, err := s.reader()
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, budgetSQL("")+" WHERE s.project = $2 AND s.limit_nanos IS NOT NULL ORDER BY s.scope", nanos(s.now()), s.project)
	if err != nil {
		return nil, sqliteErr("budgets", err)
	}
	defer rows.Close()
	var out []Budget
	for rows.Next() {
		b, err := scanBudget(rows)
		if err != nil {
			return nil, sqliteErr("budgets", err)
		}
		out = append(out, b)
	}
	return out, sqliteErr("budgets", rows.Err())
}

// Reserve implements [Store].
func (s *SQLite) Reserve(ctx context.Context, r Reservation) error {
	now := s.now()
	scopes, err := checkReservation(r, now)
	if err != nil {
		return err
	}
	n := nanos(now)
	return s.write(ctx, "reserve", func(ctx context.Context) error {
		var live, expired int
		var settled bool
		if err := s.st.dup.QueryRowContext(ctx, r.InvocationID, n).Scan(&live, &expired, &settled); err != nil {
			return err
		}
		if live > 0 || settled {
			return fmt.Errorf("%w: %s", ErrDuplicateInvocation, r.InvocationID)
		}
		if expired > 0 { // an expired reservation of the same id is gone, not a duplicate
			if _, err := s.st.cleanupID.ExecContext(ctx, r.InvocationID); err != nil {
				return err
			}
		}
		states := make([]scopeState, len(scopes))
		for i, sc := range scopes {
			st := scopeState{scope: sc}
			var limit sql.NullInt64
			var expired int64
			err := s.st.state.QueryRowContext(ctx, string(sc), n, s.project).Scan(&limit, (*int64)(&st.spent), &st.paused, &st.reason, (*int64)(&st.held), &expired)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if _, err := s.st.insertScope.ExecContext(ctx, string(sc), n, s.project); err != nil {
					return err
				}
			case err != nil:
				return err
			}
			st.limited, st.limit = limit.Valid, provider.Money(limit.Int64)
			if expired > 0 {
				if _, err := s.st.cleanupScope.ExecContext(ctx, string(sc), n, s.project); err != nil {
					return err
				}
			}
			states[i] = st
		}
		if err := admit(states, r.Amount); err != nil {
			return err
		}
		for _, sc := range scopes {
			if _, err := s.st.insertHold.ExecContext(ctx, r.InvocationID, string(sc), int64(r.Amount), n, nanos(r.ExpiresAt), s.project); err != nil {
				return err
			}
		}
		return nil
	})
}

// Settle implements [Store].
func (s *SQLite) Settle(ctx context.Context, set Settlement) error {
	now := s.now()
	scopes, err := checkSettlement(&set, now)
	if err != nil {
		return err
	}
	n := nanos(now)
	return s.write(ctx, "settle", func(ctx context.Context) error {
		held, reserved, err := s.holdsOf(ctx, set.InvocationID)
		if err != nil {
			return err
		}
		res, err := s.st.insertSettlement.ExecContext(ctx, set.InvocationID, int64(set.Cost), reserved, n)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			return fmt.Errorf("%w: %s", ErrAlreadySettled, set.InvocationID)
		}
		if len(held) > 0 {
			scopes = held
			if _, err := s.st.deleteHolds.ExecContext(ctx, set.InvocationID); err != nil {
				return err
			}
		}
		if set.Lease != "" && set.Reserved > 0 {
			if _, err := s.st.drawFromLease.ExecContext(ctx, set.Lease, int64(set.Reserved)); err != nil {
				return err
			}
		}
		for _, sc := range scopes {
			if err := s.chargeScope(ctx, sc, set.Cost, n); err != nil {
				return err
			}
		}
		return s.insertRows(ctx, &set)
	})
}

// chargeScope adds amount to a scope's spend, pausing it when the spend
// reaches its limit and recording the alert thresholds it crossed.
func (s *SQLite) chargeScope(ctx context.Context, sc Scope, amount provider.Money, n int64) error {
	var limit sql.NullInt64
	var spent int64
	var paused bool
	if err := s.st.charge.QueryRowContext(ctx, string(sc), int64(amount), n, s.project).Scan(&limit, &spent, &paused); err != nil {
		return err
	}
	for _, t := range crossedThresholds(s.alerts, limit.Valid, provider.Money(limit.Int64), provider.Money(spent), amount) {
		if _, err := s.st.insertAlert.ExecContext(ctx, s.project, string(sc), t, limit.Int64, spent, n); err != nil {
			return err
		}
	}
	if !paused && reachedLimit(limit.Valid, provider.Money(limit.Int64), provider.Money(spent)) {
		reason := pauseReason(sc, provider.Money(limit.Int64), provider.Money(spent))
		if _, err := s.st.pauseBudget.ExecContext(ctx, string(sc), reason, n, s.project); err != nil {
			return err
		}
	}
	return nil
}

// insertRows writes a settlement's ledger rows, the earlier ones first.
func (s *SQLite) insertRows(ctx context.Context, set *Settlement) error {
	for _, a := range set.Earlier {
		if _, err := s.st.insertAttempt.ExecContext(ctx, attemptArgs(s.project, a)...); err != nil {
			return err
		}
	}
	_, err := s.st.insertAttempt.ExecContext(ctx, attemptArgs(s.project, set.Entry)...)
	return err
}

// settleBatch applies many settlements of calls admitted against budget
// leases in one transaction: each is recorded (idempotently, by invocation
// id) with its rows, and the charges to each scope and the draws on each
// lease are summed and applied once. A settlement with a Lease must not
// also hold a reservation of its own ([Fast] never makes one); one without
// a Lease is applied as [SQLite.Settle] applies it. errs[i] is the outcome
// of sets[i]: nil, or wrapping ErrAlreadySettled or ErrInvalid; a failure
// of the database fails them all.
func (s *SQLite) settleBatch(ctx context.Context, sets []Settlement) []error {
	now := s.now()
	n := nanos(now)
	errs := make([]error, len(sets))
	scopes := make([][]Scope, len(sets))
	valid := 0
	for i := range sets {
		scopes[i], errs[i] = checkSettlement(&sets[i], now)
		if errs[i] == nil {
			valid++
		}
	}
	if valid == 0 {
		return errs
	}
	err := s.write(ctx, "settle", func(ctx context.Context) error {
		charges := map[Scope]provider.Money{}
		var order []Scope
		draws := map[string]provider.Money{}
		for i := range sets {
			if errs[i] != nil {
				continue
			}
			set := &sets[i]
			sc := scopes[i]
			var held []Scope
			var reserved sql.NullInt64
			if set.Lease == "" {
				var err error
				if held, reserved, err = s.holdsOf(ctx, set.InvocationID); err != nil {
					return err
				}
			}
			res, err := s.st.insertSettlement.ExecContext(ctx, set.InvocationID, int64(set.Cost), reserved, n)
			if err != nil {
				return err
			}
			if k, err := res.RowsAffected(); err != nil {
				return err
			} else if k == 0 {
				errs[i] = fmt.Errorf("%w: %s", ErrAlreadySettled, set.InvocationID)
				continue
			}
			if len(held) > 0 {
				sc = held
				if _, err := s.st.deleteHolds.ExecContext(ctx, set.InvocationID); err != nil {
					return err
				}
			}
			if set.Lease != "" && set.Reserved > 0 {
				draws[set.Lease] += set.Reserved
			}
			for _, x := range sc {
				if _, seen := charges[x]; !seen {
					order = append(order, x)
				}
				charges[x] += set.Cost
			}
			if err := s.insertRows(ctx, set); err != nil {
				return err
			}
		}
		for lease, amount := range draws {
			if _, err := s.st.drawFromLease.ExecContext(ctx, lease, int64(amount)); err != nil {
				return err
			}
		}
		for _, x := range order {
			if err := s.chargeScope(ctx, x, charges[x], n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			if errs[i] == nil || errors.Is(errs[i], ErrAlreadySettled) {
				errs[i] = err
			}
		}
	}
	return errs
}

// holdsOf returns the scopes an invocation holds and the amount it
// reserved (not valid without a reservation).
func (s *SQLite) holdsOf(ctx context.Context, id string) ([]Scope, sql.NullInt64, error) {
	var amount sql.NullInt64
	rows, err := s.st.holdsOf.QueryContext(ctx, id)
	if err != nil {
		return nil, amount, err
	}
	defer rows.Close()
	var out []Scope
	for rows.Next() {
		var sc string
		if err := rows.Scan(&sc, &amount.Int64); err != nil {
			return nil, amount, err
		}
		amount.Valid = true
		out = append(out, Scope(sc))
	}
	return out, amount, rows.Err()
}

// Release implements [Store].
func (s *SQLite) Release(ctx context.Context, invocationID string) error {
	if err := validID(invocationID); err != nil {
		return err
	}
	return s.write(ctx, "release", func(ctx context.Context) error {
		_, err := s.st.deleteHolds.ExecContext(ctx, invocationID)
		return err
	})
}

// Shrink implements [Store].
func (s *SQLite) Shrink(ctx context.Context, invocationID string, amount provider.Money) error {
	if err := checkShrink(invocationID, amount); err != nil {
		return err
	}
	return s.write(ctx, "shrink", func(ctx context.Context) error {
		_, err := s.st.shrinkHolds.ExecContext(ctx, invocationID, int64(amount))
		return err
	})
}

// ExpireReservations implements [Store].
func (s *SQLite) ExpireReservations(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.write(ctx, "expire reservations", func(ctx context.Context) error {
		rows, err := s.w.QueryContext(ctx, `DELETE FROM holds WHERE expires_at <= $1 RETURNING invocation_id`, nanos(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		ids := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids[id] = true
		}
		n = len(ids)
		return rows.Err()
	})
	return n, err
}

// RecordAttempt implements [Store].
func (s *SQLite) RecordAttempt(ctx context.Context, a AttemptRow) error {
	if err := checkAttempt(&a, s.now()); err != nil {
		return err
	}
	return s.write(ctx, "record attempt", func(ctx context.Context) error {
		_, err := s.st.insertAttempt.ExecContext(ctx, attemptArgs(s.project, a)...)
		return err
	})
}

const attemptColumns = `invocation_id, at, task, agent, provider, model, outcome,
	input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	cost_nanos, cache_hit, saving_nanos, estimated, unpriced, coalesce(key_id, ''),
	session, host_agent, parent_agent`

func scanAttempt(sc interface{ Scan(...any) error }) (AttemptRow, error) {
	var a AttemptRow
	var at int64
	err := sc.Scan(&a.InvocationID, &at, &a.Task, &a.Agent, &a.Provider, &a.Model, &a.Outcome,
		&a.InputTokens, &a.OutputTokens, &a.CacheReadTokens, &a.CacheWriteTokens,
		(*int64)(&a.Cost), &a.CacheHit, (*int64)(&a.Saving), &a.EstimatedUsage, &a.Unpriced, &a.Key,
		&a.Session, &a.HostAgent, &a.ParentAgent)
	a.Time = fromNanos(at)
	return a, err
}

// Attempts implements [Store].
func (s *SQLite) Attempts(ctx context.Context, f Filter) ([]AttemptRow, error) {
	f.By = ByNone
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	db, err := s.reader()
	if err != nil {
		return nil, err
	}
	where, args := filterWhere(s.project, f, 1)
	rows, err := db.QueryContext(ctx, "SELECT "+attemptColumns+" FROM attempts"+where+" ORDER BY at, id", args...)
	if err != nil {
		return nil, sqliteErr("attempts", err)
	}
	defer rows.Close()
	var out []AttemptRow
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, sqliteErr("attempts", err)
		}
		out = append(out, a)
	}
	return out, sqliteErr("attempts", rows.Err())
}

// Spend implements [Store].
func (s *SQLite) Spend(ctx context.Context, f Filter) (SpendReport, error) {
	if err := checkFilter(f); err != nil {
		return SpendReport{}, err
	}
	db, err := s.reader()
	if err != nil {
		return SpendReport{}, err
	}
	q, args := spendQuery(s.project, f, "attempts")
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return SpendReport{}, sqliteErr("spend", err)
	}
	defer rows.Close()
	var got []spendRow
	for rows.Next() {
		var r spendRow
		key := any(&r.key)
		if f.By == ByMonth {
			key = &r.bucket
		}
		if err := rows.Scan(append([]any{key}, totalsDest(&r.t)...)...); err != nil {
			return SpendReport{}, sqliteErr("spend", err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return SpendReport{}, sqliteErr("spend", err)
	}
	return buildReport(f, got), nil
}

// Pause implements [Store].
func (s *SQLite) Pause(ctx context.Context, scope Scope, reason string) error {
	return s.pause(ctx, scope, reason, "manual")
}

// PauseForBudget implements [Store].
func (s *SQLite) PauseForBudget(ctx context.Context, scope Scope, reason string) error {
	return s.pause(ctx, scope, reason, "budget")
}

func (s *SQLite) pause(ctx context.Context, scope Scope, reason, kind string) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	_, err := s.exec(ctx, "pause", pauseSQL("scopes", kind), string(scope), pauseText(reason), nanos(s.now()), s.project)
	return err
}

func pauseText(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return "paused"
	}
	return reason
}

// pauseSQL pauses a scope; kind is "manual" (lifted only by Resume) or
// "budget" (lifted also by raising the budget above the spend).
func pauseSQL(table, kind string) string {
	return `INSERT INTO ` + table + ` AS t (project, scope, paused, pause_kind, pause_reason, updated_at) VALUES ($4, $1, true, '` + kind + `', $2, $3)
		ON CONFLICT (project, scope) DO UPDATE SET paused = true, pause_kind = '` + kind + `', pause_reason = excluded.pause_reason, updated_at = excluded.updated_at`
}

func resumeSQL(table string) string {
	return `UPDATE ` + table + ` SET paused = false, pause_kind = '', pause_reason = '', updated_at = $2 WHERE project = $3 AND scope = $1`
}

// Resume implements [Store].
func (s *SQLite) Resume(ctx context.Context, scope Scope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	_, err := s.exec(ctx, "resume", resumeSQL("scopes"), string(scope), nanos(s.now()), s.project)
	return err
}

// Paused implements [Store].
func (s *SQLite) Paused(ctx context.Context, scope Scope) (string, bool, error) {
	b, err := s.Budget(ctx, scope)
	return b.PauseReason, b.Paused, err
}

// taskState returns the risk and state of a task, or an error wrapping
// ErrNoTask.
func (s *SQLite) taskState(ctx context.Context, id string) (risk, state string, err error) {
	err = s.st.taskState.QueryRowContext(ctx, id, s.project).Scan(&risk, &state)
	if errors.Is(err, sql.ErrNoRows) {
		err = errNoTask(id)
	}
	return risk, state, err
}

// loadTask reads a task with its events in the write transaction.
func (s *SQLite) loadTask(ctx context.Context, id string) (Task, error) {
	rows, err := s.st.task.QueryContext(ctx, id, s.project)
	if err != nil {
		return Task{}, err
	}
	defer rows.Close()
	t, found, err := scanTask(id, rows)
	if err == nil && !found {
		err = errNoTask(id)
	}
	return t, err
}

// StartTask implements [TaskStore].
func (s *SQLite) StartTask(ctx context.Context, id, risk string) (Task, error) {
	if err := checkTaskStart(id, risk); err != nil {
		return Task{}, err
	}
	now := s.now()
	var t Task
	err := s.write(ctx, "start task", func(ctx context.Context) error {
		old, state, err := s.taskState(ctx, id)
		switch {
		case errors.Is(err, ErrNoTask):
			if _, err := s.st.insertTask.ExecContext(ctx, id, risk, TaskOpen, nanos(now), s.project); err != nil {
				return err
			}
		case err != nil:
			return err
		case state == TaskCompleted:
			return errTaskCompleted(id)
		case old != risk:
			if _, err := s.st.setTaskRisk.ExecContext(ctx, id, risk, s.project); err != nil {
				return err
			}
			if _, err := s.st.insertTaskEvent.ExecContext(ctx, taskEventArgs(s.project, riskEvent(id, old, risk, now))...); err != nil {
				return err
			}
		}
		t, err = s.loadTask(ctx, id)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// Task implements [TaskStore].
func (s *SQLite) Task(ctx context.Context, id string) (Task, error) {
	if err := checkTaskID(id); err != nil {
		return Task{}, err
	}
	db, err := s.reader()
	if err != nil {
		return Task{}, err
	}
	rows, err := db.QueryContext(ctx, taskSQL(""), id, s.project)
	if err != nil {
		return Task{}, sqliteErr("task", err)
	}
	defer rows.Close()
	t, found, err := scanTask(id, rows)
	if err != nil {
		return Task{}, sqliteErr("task", err)
	}
	if !found {
		return Task{}, errNoTask(id)
	}
	return t, nil
}

// AddTaskEvent implements [TaskStore].
func (s *SQLite) AddTaskEvent(ctx context.Context, e TaskEvent) error {
	if err := checkTaskEvent(&e, s.now()); err != nil {
		return err
	}
	// A call may name a task nobody started (a host's own task id): that
	// is answered from the read pool, without taking the write lock. A
	// task started after this read is the same as one started after the
	// event; one that exists is checked again in the write transaction.
	if _, err := s.reader(); err == nil {
		var risk, state string
		// A look-up by key is not cancelled: with a context that can be,
		// the driver starts a goroutine per statement to watch it.
		rctx := context.WithoutCancel(ctx)
		if err := s.st.readTaskState.QueryRowContext(rctx, e.Task, s.project).Scan(&risk, &state); errors.Is(err, sql.ErrNoRows) {
			return errNoTask(e.Task)
		}
	}
	return s.write(ctx, "add task event", func(ctx context.Context) error {
		if _, _, err := s.taskState(ctx, e.Task); err != nil {
			return err
		}
		_, err := s.st.insertTaskEvent.ExecContext(ctx, taskEventArgs(s.project, e)...)
		return err
	})
}

// CompleteTask implements [TaskStore].
func (s *SQLite) CompleteTask(ctx context.Context, id, decision string, seen int) (Task, error) {
	if err := checkTaskID(id); err != nil {
		return Task{}, err
	}
	if err := checkTaskText(id, "decision", decision); err != nil {
		return Task{}, err
	}
	now := s.now()
	var t Task
	err := s.write(ctx, "complete task", func(ctx context.Context) error {
		_, state, err := s.taskState(ctx, id)
		if err != nil {
			return err
		}
		if state == TaskCompleted {
			return errTaskCompleted(id)
		}
		if seen >= 0 {
			var n int
			if err := s.w.QueryRowContext(ctx, "SELECT count(*) FROM task_events WHERE project = ? AND task = ?", s.project, id).Scan(&n); err != nil {
				return err
			}
			if n != seen {
				return errTaskChanged(id, seen, n)
			}
		}
		if _, err := s.st.completeTask.ExecContext(ctx, id, TaskCompleted, nanos(now), s.project); err != nil {
			return err
		}
		e := TaskEvent{Task: id, Time: now, Kind: EventCompleted, Detail: decision}
		if _, err := s.st.insertTaskEvent.ExecContext(ctx, taskEventArgs(s.project, e)...); err != nil {
			return err
		}
		t, err = s.loadTask(ctx, id)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// Alerts implements [Store].
func (s *SQLite) Alerts(ctx context.Context, limit int) ([]Alert, error) {
	db, err := s.reader()
	if err != nil {
		return nil, err
	}
	q, args := alertsSQL("budget_alerts"), []any{s.project}
	if limit > 0 {
		q, args = q+" LIMIT $2", append(args, limit)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, sqliteErr("alerts", err)
	}
	defer rows.Close()
	out, err := scanAlerts(rows)
	return out, sqliteErr("alerts", err)
}

// ClaimAlerts implements [Store]. When no alert waits, it only reads.
func (s *SQLite) ClaimAlerts(ctx context.Context, hold time.Duration, max int) ([]Alert, error) {
	if err := checkClaim(hold, max); err != nil {
		return nil, err
	}
	db, err := s.reader()
	if err != nil {
		return nil, err
	}
	now := s.now()
	var pending bool
	if err := db.QueryRowContext(ctx, pendingAlertSQL("budget_alerts"), s.project, nanos(now)).Scan(&pending); err != nil {
		return nil, sqliteErr("claim alerts", err)
	}
	if !pending {
		return nil, nil
	}
	var out []Alert
	err = s.write(ctx, "claim alerts", func(ctx context.Context) error {
		out = nil
		rows, err := s.w.QueryContext(ctx, `UPDATE budget_alerts SET claimed_until = $3
			WHERE id IN (SELECT id FROM budget_alerts WHERE project = $1 AND notified_at IS NULL AND claimed_until <= $2 ORDER BY id LIMIT $4)
			RETURNING `+alertColumns, s.project, nanos(now), nanos(now.Add(hold)), max)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = scanAlerts(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortClaimed(out)
	return out, nil
}

// AlertNotified implements [Store].
func (s *SQLite) AlertNotified(ctx context.Context, id int64) error {
	_, err := s.exec(ctx, "alert notified", alertNotifiedSQL("budget_alerts"), s.project, id, nanos(s.now()))
	return err
}

// SchemaVersion implements [Store].
func (s *SQLite) SchemaVersion(ctx context.Context) (int, error) {
	db, err := s.reader()
	if err != nil {
		return 0, err
	}
	var v int
	err = db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_version").Scan(&v)
	return v, sqliteErr("schema version", err)
}

// Close implements [Store].
func (s *SQLite) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range []*sql.Stmt{s.st.begin, s.st.commit, s.st.rollback, s.st.state, s.st.insertScope,
		s.st.cleanupScope, s.st.cleanupID, s.st.dup, s.st.insertHold, s.st.holdsOf, s.st.deleteHolds,
		s.st.shrinkHolds, s.st.drawFromLease, s.st.insertSettlement, s.st.charge, s.st.pauseBudget, s.st.insertAttempt,
		s.st.taskState, s.st.insertTask, s.st.setTaskRisk, s.st.completeTask, s.st.insertTaskEvent, s.st.task, s.st.insertAlert, s.st.readTaskState} {
		if st != nil {
			st.Close()
		}
	}
	errW := s.w.Close()
	errWDB := s.wdb.Close()
	errR := s.rdb.Close()
	return errors.Join(errW, errWDB, errR)
}
