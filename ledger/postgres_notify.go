package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
)

// A change that must stop other processes' budget leases at once (a pause,
// a new limit) is announced, in the transaction that makes it, with
// pg_notify on the store's channel, naming the scope; every fast path on
// the store listens there (see fast_shared.go).

// budgetChannel is the channel of a schema and project: a PostgreSQL
// identifier (63 bytes at most) whatever their length.
func budgetChannel(schema, project string) string {
	h := fnv.New64a()
	h.Write([]byte(schema + "\x00" + project))
	return fmt.Sprintf("cortexbuild_budgets_%016x", h.Sum64())
}

// execNotify runs one statement in its own transaction, as exec, and, if
// it affected a row, announces a change of scope on the channel in the
// same transaction: the listeners hear of it once it is committed.
func (p *Postgres) execNotify(ctx context.Context, op string, scope Scope, sql string, args ...any) (int64, error) {
	var n int64
	err := p.tx(ctx, op, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, p.q(sql), args...)
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", p.channel, string(scope))
		return err
	})
	return n, err
}

// listenBudgets opens a connection of its own, listens on the channel,
// calls ready once it listens, and then changed with every scope announced,
// until ctx ends or the connection fails; it returns why it stopped.
func (p *Postgres) listenBudgets(ctx context.Context, ready func(), changed func(Scope)) error {
	if p.closed.Load() {
		return ErrClosed
	}
	// A server that does not answer is unreachable, not waited for.
	cctx, cancel := context.WithTimeout(ctx, listenWait)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return p.listenErr(ctx, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{p.channel}.Sanitize()); err != nil {
		return p.listenErr(ctx, err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return p.listenErr(ctx, err)
		}
		changed(Scope(n.Payload))
	}
}

func (p *Postgres) listenErr(ctx context.Context, err error) error {
	if ctx.Err() != nil || p.closed.Load() {
		return ErrClosed
	}
	return p.unreachable("listen for budget changes", err)
}

// unreachable names the server as unreachable, whatever err is: the
// process is not in contact with it.
func (p *Postgres) unreachable(op string, err error) error {
	cerr := p.pgErr(op, err)
	var se *ServerError
	if errors.As(cerr, &se) {
		return cerr
	}
	return &ServerError{Op: op, Where: p.Where(), Unreachable: true, Err: err}
}

// reach makes one round trip to the server: nil once it has answered, or an
// error naming it as unreachable.
func (p *Postgres) reach(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if err := p.pool.Ping(ctx); err != nil {
		if p.closed.Load() {
			return ErrClosed
		}
		return p.unreachable("check contact", err)
	}
	return nil
}

// listenWait bounds connecting and starting to listen: a server that has
// not answered by then is taken as unreachable.
const listenWait = 5 * time.Second
