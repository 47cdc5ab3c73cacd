package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexbuild/cortexbuild/provider"
)

// DefaultSchema is the PostgreSQL schema the tables live in unless
// [WithSchema] says otherwise.
const DefaultSchema = "cortexbuild_ledger"

// Postgres is the [Store] shared by several processes through one
// PostgreSQL database (a pgx connection pool). Every transaction that reads
// a budget to decide locks the scope rows first, with SELECT … FOR UPDATE in
// scope order, so concurrent reservations and settlements of a scope are
// serialised and never deadlock on each other; the holds are summed by a
// later statement of the same transaction, which sees every hold committed
// before the lock was granted. A transaction that PostgreSQL aborts as a
// deadlock or serialization failure is retried.
type Postgres struct {
	pool   *pgxpool.Pool
	schema string // quoted
	now    func() time.Time
	closed atomic.Bool

	project string // every row the store reads or writes is this project's
	alerts  []int  // the thresholds, in percent of a limit, whose crossing a settlement records
	addr    string // host:port of the server, named when it cannot be reached
	channel string // where changes of a budget or a pause are announced (budgetChannel)
	// jpool writes the fast path's journal table without waiting for the
	// server's disk (synchronous_commit off); it connects on first use.
	jpool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// OpenPostgres connects to the database at url (a postgres:// URL or a
// key=value DSN), creates the schema ([DefaultSchema] or [WithSchema]) if
// missing and brings its tables up to date.
func OpenPostgres(ctx context.Context, url string, opts ...Option) (*Postgres, error) {
	o := buildOptions(opts)
	if err := o.checkProject(); err != nil {
		return nil, err
	}
	alerts, err := o.alertThresholds()
	if err != nil {
		return nil, err
	}
	if o.schema == "" {
		o.schema = DefaultSchema
	}
	if !schemaName.MatchString(o.schema) {
		return nil, fmt.Errorf("%w: schema %q: lower-case letters, digits and _, at most 63", ErrInvalid, o.schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: PostgreSQL URL: %v", ErrInvalid, err)
	}
	if o.maxConns > 0 {
		cfg.MaxConns = o.maxConns
	}
	if o.dial != nil {
		cfg.ConnConfig.DialFunc = pgconn.DialFunc(o.dial)
		// The dialer resolves: pgx hands it the name, not addresses it
		// looked up on its own.
		cfg.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	}
	jcfg := cfg.Copy()
	jcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	jcfg.MaxConns, jcfg.MinConns = 2, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, pgErr("connect", err)
	}
	jpool, err := pgxpool.NewWithConfig(ctx, jcfg)
	if err != nil {
		pool.Close()
		return nil, pgErr("connect", err)
	}
	p := &Postgres{pool: pool, jpool: jpool, schema: pgx.Identifier{o.schema}.Sanitize(), project: o.project, alerts: alerts, now: o.now,
		addr: serverAddr(cfg.ConnConfig), channel: budgetChannel(o.schema, o.project)}
	if err := pool.Ping(ctx); err != nil {
		p.closePools()
		return nil, p.pgErr("connect", err)
	}
	if err := p.migrate(ctx, o.schema, LatestSchemaVersion, o.migrationSQL); err != nil {
		p.closePools()
		return nil, err
	}
	return p, nil
}

// serverAddr names the server of a connection configuration as host:port
// (its first host, and how many others it may fall back to): never its
// user, password or options.
func serverAddr(c *pgx.ConnConfig) string {
	addr := net.JoinHostPort(c.Host, fmt.Sprint(c.Port))
	if n := len(c.Fallbacks); n > 0 {
		addr += fmt.Sprintf(" (or %d other hosts)", n)
	}
	return addr
}

// Where names the server (host:port), for messages: never its user,
// password or options.
func (p *Postgres) Where() string { return "PostgreSQL at " + p.addr }

// pgErr classifies err as [pgErr] does and, when the server cannot be
// reached or used, names it: "the ledger's PostgreSQL at host:port is
// unreachable" when it could not be reached (no connection, a connection
// cut, a timeout, a server shutting down), "… cannot take the write" when
// it answered with an error (a full disk, too many connections).
func (p *Postgres) pgErr(op string, err error) error {
	cerr := pgErr(op, err)
	if cerr == nil || !errors.Is(cerr, ErrUnavailable) || errors.Is(err, ErrClosed) {
		return cerr
	}
	se := &ServerError{Op: op, Where: p.Where(), Unreachable: true, Err: err}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code[:2] != "08" && pe.Code[:2] != "57" {
		se.Unreachable = false
	}
	if se.Unreachable && !p.closed.Load() {
		// The idle connections are as dead as the one that failed (the
		// server restarted, the network was cut): the next statement
		// opens a new one instead of failing on each of them in turn.
		p.pool.Reset()
		if p.jpool != nil {
			p.jpool.Reset()
		}
	}
	return se
}

// ServerError is what a store on a database server returns when the server
// cannot be reached or refuses work: it names the server (host:port, never
// credentials) and wraps [ErrUnavailable] and the driver's error.
type ServerError struct {
	Op          string // what was being done: "reserve", "settle", …
	Where       string // "PostgreSQL at host:port"
	Unreachable bool   // no connection, or a connection lost; else the server answered with an error
	Err         error
}

func (e *ServerError) Error() string {
	if e.Unreachable {
		return fmt.Sprintf("ledger: %s: the ledger's %s is unreachable: %v", e.Op, e.Where, e.Err)
	}
	return fmt.Sprintf("ledger: %s: the ledger's %s cannot take the write: %v", e.Op, e.Where, e.Err)
}

func (e *ServerError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// q qualifies the tables of a statement with the store's schema.
func (p *Postgres) q(sql string) string { return strings.ReplaceAll(sql, "_S_.", p.schema+".") }

// migrate brings the schema up to version target, one migration per
// transaction.
func (p *Postgres) migrate(ctx context.Context, schema string, target int, expand func(string) string) error {
	for {
		var left bool
		err := p.tx(ctx, "migrate", func(tx pgx.Tx) error {
			// One migrator at a time per schema, across processes.
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "cortexbuild ledger "+schema); err != nil {
				return err
			}
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				if _, err := tx.Exec(ctx, "CREATE SCHEMA "+p.schema); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, p.q(`CREATE TABLE IF NOT EXISTS _S_.schema_version (
				version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at BIGINT NOT NULL)`)); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, p.q("SELECT version FROM _S_.schema_version"))
			if err != nil {
				return err
			}
			applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil {
				return err
			}
			if cur := slices.Max(append(applied, 0)); cur > LatestSchemaVersion {
				return fmt.Errorf("%w: schema %s is at version %d, this program knows up to %d", ErrSchemaTooNew, schema, cur, LatestSchemaVersion)
			}
			m, ok := nextMigration(applied, target)
			if left = ok; !ok {
				return nil
			}
			for _, q := range m.postgres {
				if _, err := tx.Exec(ctx, p.q(expand(q))); err != nil {
					return fmt.Errorf("ledger: migration %d (%s): %w", m.version, m.description, err)
				}
			}
			_, err = tx.Exec(ctx, p.q("INSERT INTO _S_.schema_version (version, description, applied_at) VALUES ($1, $2, $3)"),
				m.version, m.description, nanos(p.now()))
			return err
		})
		if err != nil {
			return err
		}
		if !left {
			return nil
		}
	}
}

// pgErr classifies an error: failures to reach or use the server wrap
// ErrUnavailable.
func pgErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", // connection exception
			"28", // invalid authorization
			"3D", // invalid catalog name (no such database)
			"53", // insufficient resources (disk full, too many connections)
			"57", // operator intervention (shutdown)
			"58": // system error (I/O)
			return fmt.Errorf("ledger: %s: %w: %v", op, ErrUnavailable, err)
		}
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "closed pool") || strings.Contains(err.Error(), "conn closed") {
		return fmt.Errorf("ledger: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("ledger: %s: %w", op, err)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// tx runs fn in a transaction, retrying it when PostgreSQL aborts it as a
// deadlock victim or a serialization failure. Errors of the store's own pass
// through; driver errors are classified.
func (p *Postgres) tx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	if p.closed.Load() {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		err := p.tryTx(ctx, fn)
		if err == nil {
			return nil
		}
		if isOwn(err) {
			return err
		}
		if c := pgCode(err); (c == "40001" || c == "40P01") && attempt < 20 && ctx.Err() == nil {
			continue
		}
		if p.closed.Load() {
			return ErrClosed
		}
		return p.pgErr(op, err)
	}
}

func (p *Postgres) tryTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	// Commit even if ctx ends now, so that the outcome matches the nil
	// returned.
	return tx.Commit(context.WithoutCancel(ctx))
}

// withConn runs fn on a pooled connection; fn manages its own transaction
// (BEGIN and COMMIT travel in the same batches as the statements, to save
// round trips). A transaction fn leaves open is rolled back. Deadlock
// victims and serialization failures are retried like in tx.
func (p *Postgres) withConn(ctx context.Context, op string, fn func(c *pgxpool.Conn) error) error {
	if p.closed.Load() {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		err := func() error {
			c, err := p.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release() // destroys a connection left in a transaction
			err = fn(c)
			if c.Conn().PgConn().TxStatus() != 'I' && !c.Conn().IsClosed() {
				if _, rerr := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil && err == nil {
					err = rerr
				}
			}
			return err
		}()
		if err == nil || isOwn(err) {
			return err
		}
		if c := pgCode(err); (c == "40001" || c == "40P01") && attempt < 20 && ctx.Err() == nil {
			continue
		}
		if p.closed.Load() {
			return ErrClosed
		}
		return p.pgErr(op, err)
	}
}

// exec runs one statement in its own transaction and returns the rows it
// affected.
func (p *Postgres) exec(ctx context.Context, op, sql string, args ...any) (int64, error) {
	var n int64
	err := p.tx(ctx, op, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, p.q(sql), args...)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// read checks that the store is open before a read.
func (p *Postgres) read(op string, err error) error {
	if p.closed.Load() {
		return ErrClosed
	}
	return p.pgErr(op, err)
}

// SetBudget implements [Store].
func (p *Postgres) SetBudget(ctx context.Context, scope Scope, limit provider.Money) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if limit < 0 {
		return fmt.Errorf("%w: negative limit $%s for %s", ErrInvalid, limit, scope)
	}
	_, err := p.execNotify(ctx, "set budget", scope, setBudgetSQL("_S_.scopes", true), string(scope), int64(limit), nanos(p.now()), p.project)
	return err
}

// SetDefaultBudget implements [Store].
func (p *Postgres) SetDefaultBudget(ctx context.Context, scope Scope, limit provider.Money) (bool, error) {
	if err := checkBudget(scope, limit); err != nil {
		return false, err
	}
	n, err := p.execNotify(ctx, "set budget", scope, setBudgetSQL("_S_.scopes", false), string(scope), int64(limit), nanos(p.now()), p.project)
	return n > 0, err
}

// RemoveBudget implements [Store].
func (p *Postgres) RemoveBudget(ctx context.Context, scope Scope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	_, err := p.exec(ctx, "remove budget", removeBudgetSQL("_S_.scopes", false), string(scope), nanos(p.now()), p.project)
	return err
}

// RemoveDefaultBudget implements [Store].
func (p *Postgres) RemoveDefaultBudget(ctx context.Context, scope Scope) (bool, error) {
	if err := scope.Validate(); err != nil {
		return false, err
	}
	n, err := p.exec(ctx, "remove budget", removeBudgetSQL("_S_.scopes", true), string(scope), nanos(p.now()), p.project)
	return n > 0, err
}

// Budget implements [Store].
func (p *Postgres) Budget(ctx context.Context, scope Scope) (Budget, error) {
	if err := scope.Validate(); err != nil {
		return Budget{}, err
	}
	if p.closed.Load() {
		return Budget{}, ErrClosed
	}
	b, err := scanBudgetPg(p.pool.QueryRow(ctx, p.q(budgetSQLPg)+" WHERE s.project = $3 AND s.scope = $2", nanos(p.now()), string(scope), p.project))
	if errors.Is(err, pgx.ErrNoRows) {
		return Budget{Scope: scope}, nil
	}
	return b, p.read("budget", err)
}

// journaledHold is true of the reservation id when a settlement in the
// journal table draws on it (its own, or the lease it names): expired or
// not, the hold stays counted until that settlement is applied, so that the
// room of a process that died is never given back before what it spent is
// charged.
func journaledHold(id string) string {
	return `EXISTS (SELECT 1 FROM _S_.journal j WHERE j.invocation_id = ` + id + ` OR j.lease = ` + id + `)`
}

// budgetSQLPg is budgetSQL counting the expired holds that journaled
// settlements draw on.
var budgetSQLPg = `SELECT s.scope, s.limit_nanos, s.spent_nanos, s.paused, s.pause_reason,
		CAST(coalesce((SELECT sum(h.amount_nanos) FROM _S_.holds h WHERE h.project = s.project AND h.scope = s.scope
			AND (h.expires_at > $1 OR ` + journaledHold("h.invocation_id") + `)), 0) AS BIGINT)
		FROM _S_.scopes s`

func scanBudgetPg(sc pgx.Row) (Budget, error) {
	var b Budget
	var limit *int64
	err := sc.Scan((*string)(&b.Scope), &limit, (*int64)(&b.Spent), &b.Paused, &b.PauseReason, (*int64)(&b.Held))
	if limit != nil {
		b.Limited, b.Limit = true, provider.Money(*limit)
	}
	return b, err
}

// Budgets implements [Store].
func (p *Postgres) Budgets(ctx context.Context) ([]Budget, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	rows, err := p.pool.Query(ctx, p.q(budgetSQLPg)+" WHERE s.project = $2 AND s.limit_nanos IS NOT NULL ORDER BY s.scope", nanos(p.now()), p.project)
	if err != nil {
		return nil, p.read("budgets", err)
	}
	defer rows.Close()
	var out []Budget
	for rows.Next() {
		b, err := scanBudgetPg(rows)
		if err != nil {
			return nil, p.read("budgets", err)
		}
		out = append(out, b)
	}
	return out, p.read("budgets", rows.Err())
}

// Reserve implements [Store].
func (p *Postgres) Reserve(ctx context.Context, r Reservation) error {
	now := p.now()
	scopes, err := checkReservation(r, now)
	if err != nil {
		return err
	}
	n, ss := nanos(now), scopeStrings(scopes)
	return p.withConn(ctx, "reserve", func(c *pgxpool.Conn) error {
		// First round trip: begin, create missing scope rows, lock them in
		// scope order, release expired holds (of these scopes, and an
		// expired reservation of this id), check for a duplicate, and sum
		// the unexpired holds, in a statement after the lock so that it
		// sees every hold committed before the lock was granted.
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(p.q(`INSERT INTO _S_.scopes (project, scope, updated_at) SELECT $3, s, $2 FROM unnest($1::text[]) AS s ORDER BY s
			ON CONFLICT (project, scope) DO NOTHING`), ss, n, p.project)
		b.Queue(p.q(`SELECT scope, limit_nanos, spent_nanos, paused, pause_reason FROM _S_.scopes
			WHERE project = $2 AND scope = ANY($1) ORDER BY scope FOR UPDATE`), ss, p.project)
		b.Queue(p.q(`DELETE FROM _S_.reservations WHERE expires_at <= $2 AND (invocation_id = $3 OR invocation_id IN
			(SELECT invocation_id FROM _S_.holds WHERE project = $4 AND scope = ANY($1) AND expires_at <= $2))
			AND NOT `+journaledHold("_S_.reservations.invocation_id")), ss, n, r.InvocationID, p.project)
		b.Queue(p.q(`SELECT EXISTS (SELECT 1 FROM _S_.reservations WHERE invocation_id = $1)
			OR EXISTS (SELECT 1 FROM _S_.settlements WHERE invocation_id = $1)`), r.InvocationID)
		b.Queue(p.q(`SELECT scope, CAST(sum(amount_nanos) AS BIGINT) FROM _S_.holds
			WHERE project = $3 AND scope = ANY($1) AND (expires_at > $2 OR `+journaledHold("_S_.holds.invocation_id")+`) GROUP BY scope`), ss, n, p.project)
		states, dup, err := readReserveBatch(c.SendBatch(ctx, b), len(scopes))
		if err != nil {
			return err
		}
		if dup {
			return fmt.Errorf("%w: %s", ErrDuplicateInvocation, r.InvocationID)
		}
		if err := admit(states, r.Amount); err != nil {
			return err
		}
		// Second round trip: hold and commit.
		b = &pgx.Batch{}
		b.Queue(p.q(`WITH r AS (
				INSERT INTO _S_.reservations (invocation_id, amount_nanos, created_at, expires_at) VALUES ($1, $2, $3, $4)
				RETURNING invocation_id)
			INSERT INTO _S_.holds (project, invocation_id, scope, amount_nanos, expires_at)
			SELECT $6, r.invocation_id, s, $2, $4 FROM r, unnest($5::text[]) AS s`),
			r.InvocationID, int64(r.Amount), n, nanos(r.ExpiresAt), ss, p.project)
		b.Queue("COMMIT")
		err = execBatch(c.SendBatch(context.WithoutCancel(ctx), b), 2)
		if pgCode(err) == "23505" { // a concurrent reservation of the same id won
			return fmt.Errorf("%w: %s", ErrDuplicateInvocation, r.InvocationID)
		}
		return err
	})
}

// execBatch reads n statement results of a batch and closes it.
func execBatch(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	return br.Close()
}

func readReserveBatch(br pgx.BatchResults, nScopes int) (states []scopeState, dup bool, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for range 2 { // BEGIN, ensure the scopes
		if _, err := br.Exec(); err != nil {
			return nil, false, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	for rows.Next() {
		var st scopeState
		var limit *int64
		if err := rows.Scan((*string)(&st.scope), &limit, (*int64)(&st.spent), &st.paused, &st.reason); err != nil {
			rows.Close()
			return nil, false, err
		}
		if limit != nil {
			st.limited, st.limit = true, provider.Money(*limit)
		}
		states = append(states, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(states) != nScopes {
		return nil, false, fmt.Errorf("ledger: reserve locked %d scopes of %d", len(states), nScopes)
	}
	if _, err := br.Exec(); err != nil {
		return nil, false, err
	}
	if err := br.QueryRow().Scan(&dup); err != nil {
		return nil, false, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, false, err
	}
	held := map[Scope]provider.Money{}
	for rows.Next() {
		var sc string
		var h int64
		if err := rows.Scan(&sc, &h); err != nil {
			rows.Close()
			return nil, false, err
		}
		held[Scope(sc)] = provider.Money(h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	for i := range states {
		states[i].held = held[states[i].scope]
	}
	return states, dup, nil
}

// Settle implements [Store].
func (p *Postgres) Settle(ctx context.Context, set Settlement) error {
	now := p.now()
	scopes, err := checkSettlement(&set, now)
	if err != nil {
		return err
	}
	n := nanos(now)
	return p.withConn(ctx, "settle", func(c *pgxpool.Conn) error {
		// First round trip, outside the transaction (a reservation's
		// scopes never change): which scopes to charge, the reservation's
		// if it is still there.
		b := &pgx.Batch{}
		b.Queue(p.q(`SELECT amount_nanos FROM _S_.reservations WHERE invocation_id = $1`), set.InvocationID)
		b.Queue(p.q(`SELECT scope FROM _S_.holds WHERE invocation_id = $1 ORDER BY scope`), set.InvocationID)
		reserved, held, err := readSettleBatch(c.SendBatch(ctx, b))
		if err != nil {
			return err
		}
		charge := scopes
		if reserved != nil && len(held) > 0 {
			charge = held
		}
		ss := scopeStrings(charge)
		// Second round trip: begin, record the settlement (a second one
		// conflicts, and the transaction is rolled back), lock the scopes in
		// order, drop the reservation, charge, shrink the lease drawn from
		// (its reservation row before its holds, as a cascading delete
		// locks them), and write the ledger rows.
		b = &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(p.q(`INSERT INTO _S_.settlements (invocation_id, cost_nanos, reserved_nanos, settled_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (invocation_id) DO NOTHING`), set.InvocationID, int64(set.Cost), reserved, n)
		b.Queue(p.q(`INSERT INTO _S_.scopes (project, scope, updated_at) SELECT $3, s, $2 FROM unnest($1::text[]) AS s ORDER BY s
			ON CONFLICT (project, scope) DO NOTHING`), ss, n, p.project)
		b.Queue(p.q(`SELECT scope FROM _S_.scopes WHERE project = $2 AND scope = ANY($1) ORDER BY scope FOR UPDATE`), ss, p.project)
		b.Queue(p.q(`DELETE FROM _S_.reservations WHERE invocation_id = $1`), set.InvocationID)
		b.Queue(p.q(`UPDATE _S_.scopes SET spent_nanos = spent_nanos + $2, updated_at = $3 WHERE project = $4 AND scope = ANY($1)
			RETURNING scope, limit_nanos, spent_nanos, paused`), ss, int64(set.Cost), n, p.project)
		rest := 0
		if set.Lease != "" && set.Reserved > 0 {
			b.Queue(p.q(`UPDATE _S_.reservations SET amount_nanos = greatest(amount_nanos - $2, 0)
				WHERE invocation_id = $1 AND amount_nanos > 0`), set.Lease, int64(set.Reserved))
			b.Queue(p.q(`UPDATE _S_.holds SET amount_nanos = greatest(amount_nanos - $2, 0)
				WHERE invocation_id = $1 AND amount_nanos > 0`), set.Lease, int64(set.Reserved))
			rest += 2
		}
		for _, a := range set.Earlier {
			b.Queue(p.q(insertAttemptSQL("_S_.attempts")), attemptArgs(p.project, a)...)
		}
		b.Queue(p.q(insertAttemptSQL("_S_.attempts")), attemptArgs(p.project, set.Entry)...)
		rest += len(set.Earlier) + 1
		charged, err := readChargeBatch(c.SendBatch(ctx, b), set.InvocationID, rest)
		if err != nil {
			return err
		}
		// Third round trip: pause the scopes that reached their limit,
		// record the alert thresholds crossed, and commit.
		b = p.afterCharge(charged, func(Scope) provider.Money { return set.Cost }, n)
		return execBatch(c.SendBatch(context.WithoutCancel(ctx), b), b.Len())
	})
}

func readSettleBatch(br pgx.BatchResults) (reserved *int64, held []Scope, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	var amt int64
	switch err := br.QueryRow().Scan(&amt); {
	case err == nil:
		reserved = &amt
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var sc string
		if err := rows.Scan(&sc); err != nil {
			return nil, nil, err
		}
		held = append(held, Scope(sc))
	}
	return reserved, held, rows.Err()
}

// readChargeBatch reads the settlement batch, of which rest statements
// follow the charge, and returns the charged scopes as they are now.
func readChargeBatch(br pgx.BatchResults, id string, rest int) (charged []scopeState, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := br.Exec(); err != nil { // BEGIN
		return nil, err
	}
	tag, err := br.Exec()
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("%w: %s", ErrAlreadySettled, id)
	}
	for range 3 { // ensure scopes, lock them, drop the reservation
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	if charged, err = chargedScopes(rows); err != nil {
		return nil, err
	}
	for range rest {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	return charged, nil
}

// Release implements [Store].
func (p *Postgres) Release(ctx context.Context, invocationID string) error {
	if err := validID(invocationID); err != nil {
		return err
	}
	_, err := p.exec(ctx, "release", `DELETE FROM _S_.reservations WHERE invocation_id = $1`, invocationID)
	return err
}

// Shrink implements [Store]. Like Release, it locks the reservation row
// before its holds and no scope row: lowering a hold frees room, which a
// concurrent reservation sees once this commits, and never needs a budget
// decided.
func (p *Postgres) Shrink(ctx context.Context, invocationID string, amount provider.Money) error {
	if err := checkShrink(invocationID, amount); err != nil {
		return err
	}
	return p.withConn(ctx, "shrink", func(c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(p.q(`UPDATE _S_.reservations SET amount_nanos = $2 WHERE invocation_id = $1 AND amount_nanos > $2`),
			invocationID, int64(amount))
		b.Queue(p.q(`UPDATE _S_.holds SET amount_nanos = $2 WHERE invocation_id = $1 AND amount_nanos > $2`),
			invocationID, int64(amount))
		b.Queue("COMMIT")
		return execBatch(c.SendBatch(context.WithoutCancel(ctx), b), 4)
	})
}

// ExpireReservations implements [Store].
func (p *Postgres) ExpireReservations(ctx context.Context, now time.Time) (int, error) {
	n, err := p.exec(ctx, "expire reservations", `DELETE FROM _S_.reservations WHERE expires_at <= $1 AND NOT `+journaledHold("_S_.reservations.invocation_id"), nanos(now))
	return int(n), err
}

// RecordAttempt implements [Store].
func (p *Postgres) RecordAttempt(ctx context.Context, a AttemptRow) error {
	if err := checkAttempt(&a, p.now()); err != nil {
		return err
	}
	_, err := p.exec(ctx, "record attempt", insertAttemptSQL("_S_.attempts"), attemptArgs(p.project, a)...)
	return err
}

// Attempts implements [Store].
func (p *Postgres) Attempts(ctx context.Context, f Filter) ([]AttemptRow, error) {
	f.By = ByNone
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	if p.closed.Load() {
		return nil, ErrClosed
	}
	where, args := filterWhere(p.project, f, 1)
	rows, err := p.pool.Query(ctx, p.q("SELECT "+attemptColumns+" FROM _S_.attempts"+where+" ORDER BY at, id"), args...)
	if err != nil {
		return nil, p.read("attempts", err)
	}
	defer rows.Close()
	var out []AttemptRow
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, p.read("attempts", err)
		}
		out = append(out, a)
	}
	return out, p.read("attempts", rows.Err())
}

// Spend implements [Store].
func (p *Postgres) Spend(ctx context.Context, f Filter) (SpendReport, error) {
	if err := checkFilter(f); err != nil {
		return SpendReport{}, err
	}
	if p.closed.Load() {
		return SpendReport{}, ErrClosed
	}
	q, args := spendQuery(p.project, f, p.q("_S_.attempts"))
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return SpendReport{}, p.read("spend", err)
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
			return SpendReport{}, p.read("spend", err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return SpendReport{}, p.read("spend", err)
	}
	return buildReport(f, got), nil
}

// Pause implements [Store].
func (p *Postgres) Pause(ctx context.Context, scope Scope, reason string) error {
	return p.pause(ctx, scope, reason, "manual")
}

// PauseForBudget implements [Store].
func (p *Postgres) PauseForBudget(ctx context.Context, scope Scope, reason string) error {
	return p.pause(ctx, scope, reason, "budget")
}

func (p *Postgres) pause(ctx context.Context, scope Scope, reason, kind string) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	_, err := p.execNotify(ctx, "pause", scope, pauseSQL("_S_.scopes", kind), string(scope), pauseText(reason), nanos(p.now()), p.project)
	return err
}

// Resume implements [Store].
func (p *Postgres) Resume(ctx context.Context, scope Scope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	_, err := p.exec(ctx, "resume", resumeSQL("_S_.scopes"), string(scope), nanos(p.now()), p.project)
	return err
}

// Paused implements [Store].
func (p *Postgres) Paused(ctx context.Context, scope Scope) (string, bool, error) {
	b, err := p.Budget(ctx, scope)
	return b.PauseReason, b.Paused, err
}

// lockTask locks a task's row for the rest of the transaction and returns
// its risk and state, or an error wrapping ErrNoTask. The lock lets events be
// appended meanwhile (their foreign key only shares the key).
func (p *Postgres) lockTask(ctx context.Context, tx pgx.Tx, id string) (risk, state string, err error) {
	err = tx.QueryRow(ctx, p.q(`SELECT risk, state FROM _S_.tasks WHERE project = $2 AND id = $1 FOR NO KEY UPDATE`), id, p.project).Scan(&risk, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		err = errNoTask(id)
	}
	return risk, state, err
}

// loadTask reads a task with its events, in tx or, if tx is nil, from the
// pool.
func (p *Postgres) loadTask(ctx context.Context, tx pgx.Tx, id string) (Task, error) {
	var rows pgx.Rows
	var err error
	if tx != nil {
		rows, err = tx.Query(ctx, p.q(taskSQL("_S_.")), id, p.project)
	} else {
		rows, err = p.pool.Query(ctx, p.q(taskSQL("_S_.")), id, p.project)
	}
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
func (p *Postgres) StartTask(ctx context.Context, id, risk string) (Task, error) {
	if err := checkTaskStart(id, risk); err != nil {
		return Task{}, err
	}
	now := p.now()
	var t Task
	err := p.tx(ctx, "start task", func(tx pgx.Tx) error {
		// A concurrent start of the same new task waits here for the other
		// to commit, and then finds its row.
		tag, err := tx.Exec(ctx, p.q(insertTaskSQL("_S_.tasks")+" ON CONFLICT (project, id) DO NOTHING"), id, risk, TaskOpen, nanos(now), p.project)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			old, state, err := p.lockTask(ctx, tx, id)
			switch {
			case err != nil:
				return err
			case state == TaskCompleted:
				return errTaskCompleted(id)
			case old != risk:
				if _, err := tx.Exec(ctx, p.q(setTaskRiskSQL("_S_.tasks")), id, risk, p.project); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, p.q(insertTaskEventSQL("_S_.task_events")), taskEventArgs(p.project, riskEvent(id, old, risk, now))...); err != nil {
					return err
				}
			}
		}
		t, err = p.loadTask(ctx, tx, id)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// Task implements [TaskStore].
func (p *Postgres) Task(ctx context.Context, id string) (Task, error) {
	if err := checkTaskID(id); err != nil {
		return Task{}, err
	}
	if p.closed.Load() {
		return Task{}, ErrClosed
	}
	t, err := p.loadTask(ctx, nil, id)
	if errors.Is(err, ErrNoTask) {
		return Task{}, err
	}
	if err != nil {
		return Task{}, p.read("task", err)
	}
	return t, nil
}

// AddTaskEvent implements [TaskStore].
func (p *Postgres) AddTaskEvent(ctx context.Context, e TaskEvent) error {
	if err := checkTaskEvent(&e, p.now()); err != nil {
		return err
	}
	return p.tx(ctx, "add task event", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, p.q(insertTaskEventSQL("_S_.task_events")), taskEventArgs(p.project, e)...)
		if pgCode(err) == "23503" { // the foreign key: no such task
			return errNoTask(e.Task)
		}
		return err
	})
}

// CompleteTask implements [TaskStore].
func (p *Postgres) CompleteTask(ctx context.Context, id, decision string, seen int) (Task, error) {
	if err := checkTaskID(id); err != nil {
		return Task{}, err
	}
	if err := checkTaskText(id, "decision", decision); err != nil {
		return Task{}, err
	}
	now := p.now()
	var t Task
	err := p.tx(ctx, "complete task", func(tx pgx.Tx) error {
		// Concurrent completions wait here for the first to commit, and
		// then see the task completed.
		_, state, err := p.lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		if state == TaskCompleted {
			return errTaskCompleted(id)
		}
		if seen >= 0 {
			var n int
			if err := tx.QueryRow(ctx, p.q("SELECT count(*) FROM _S_.task_events WHERE project = $2 AND task = $1"), id, p.project).Scan(&n); err != nil {
				return err
			}
			if n != seen {
				return errTaskChanged(id, seen, n)
			}
		}
		if _, err := tx.Exec(ctx, p.q(completeTaskSQL("_S_.tasks")), id, TaskCompleted, nanos(now), p.project); err != nil {
			return err
		}
		e := TaskEvent{Task: id, Time: now, Kind: EventCompleted, Detail: decision}
		if _, err := tx.Exec(ctx, p.q(insertTaskEventSQL("_S_.task_events")), taskEventArgs(p.project, e)...); err != nil {
			return err
		}
		t, err = p.loadTask(ctx, tx, id)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// SchemaVersion implements [Store].
func (p *Postgres) SchemaVersion(ctx context.Context) (int, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	var v int
	err := p.pool.QueryRow(ctx, p.q("SELECT coalesce(max(version), 0) FROM _S_.schema_version")).Scan(&v)
	return v, p.read("schema version", err)
}

// Close implements [Store].
func (p *Postgres) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.closePools()
	return nil
}

func (p *Postgres) closePools() {
	p.pool.Close()
	if p.jpool != nil {
		p.jpool.Close()
	}
}

// chargedScopes reads the scope rows a charge returned (scope, limit,
// spent, paused): how many there were, and those that reached their limit
// without being paused yet.
func chargedScopes(rows pgx.Rows) (charged []scopeState, err error) {
	defer rows.Close()
	for rows.Next() {
		var st scopeState
		var limit *int64
		if err := rows.Scan((*string)(&st.scope), &limit, (*int64)(&st.spent), &st.paused); err != nil {
			return nil, err
		}
		if limit != nil {
			st.limited, st.limit = true, provider.Money(*limit)
		}
		charged = append(charged, st)
	}
	return charged, rows.Err()
}

// afterCharge returns the last round trip of a settlement, given the
// scopes it charged (locked, as they are after the charge) and the amount
// charged to each: pause those that reached their limit, record the alert
// thresholds the charges crossed, and commit. Nothing is added to it when
// no scope reached its limit or crossed a threshold.
func (p *Postgres) afterCharge(charged []scopeState, amount func(Scope) provider.Money, n int64) *pgx.Batch {
	b := &pgx.Batch{}
	for _, st := range charged {
		if !st.paused && reachedLimit(st.limited, st.limit, st.spent) {
			b.Queue(p.q(`UPDATE _S_.scopes SET paused = true, pause_kind = 'budget', pause_reason = $2, updated_at = $3
				WHERE project = $4 AND scope = $1`), string(st.scope), pauseReason(st.scope, st.limit, st.spent), n, p.project)
		}
		for _, t := range crossedThresholds(p.alerts, st.limited, st.limit, st.spent, amount(st.scope)) {
			b.Queue(p.q(insertAlertSQL("_S_.budget_alerts")), p.project, string(st.scope), t, int64(st.limit), int64(st.spent), n)
		}
	}
	b.Queue("COMMIT")
	return b
}

// Alerts implements [Store].
func (p *Postgres) Alerts(ctx context.Context, limit int) ([]Alert, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	q, args := p.q(alertsSQL("_S_.budget_alerts")), []any{p.project}
	if limit > 0 {
		q, args = q+" LIMIT $2", append(args, limit)
	}
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, p.read("alerts", err)
	}
	defer rows.Close()
	out, err := scanAlerts(rows)
	return out, p.read("alerts", err)
}

// ClaimAlerts implements [Store]. The alerts are locked as they are
// claimed, skipping those another claim is locking: two processes never
// claim the same alert. When no alert waits, it only reads.
func (p *Postgres) ClaimAlerts(ctx context.Context, hold time.Duration, max int) ([]Alert, error) {
	if err := checkClaim(hold, max); err != nil {
		return nil, err
	}
	if p.closed.Load() {
		return nil, ErrClosed
	}
	now := p.now()
	var pending bool
	if err := p.pool.QueryRow(ctx, p.q(pendingAlertSQL("_S_.budget_alerts")), p.project, nanos(now)).Scan(&pending); err != nil {
		return nil, p.read("claim alerts", err)
	}
	if !pending {
		return nil, nil
	}
	var out []Alert
	err := p.tx(ctx, "claim alerts", func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, p.q(`WITH c AS (SELECT id AS claimed FROM _S_.budget_alerts
				WHERE project = $1 AND notified_at IS NULL AND claimed_until <= $2 ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED)
			UPDATE _S_.budget_alerts SET claimed_until = $3 FROM c WHERE id = c.claimed
			RETURNING `+alertColumns), p.project, nanos(now), nanos(now.Add(hold)), max)
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
func (p *Postgres) AlertNotified(ctx context.Context, id int64) error {
	_, err := p.exec(ctx, "alert notified", alertNotifiedSQL("_S_.budget_alerts"), p.project, id, nanos(p.now()))
	return err
}
