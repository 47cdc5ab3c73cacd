package ledger

import (
	"context"
	"database/sql"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// CreateSQLiteAt creates the database file at path with only the first
// version migrations applied, as an older program would have left it.
func CreateSQLiteAt(ctx context.Context, path string, version int, opts ...Option) error {
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s := &SQLite{path: path, now: time.Now, w: c}
	return s.migrate(ctx, version, buildOptions(opts).migrationSQL)
}

// CreatePostgresAt creates schema in the database at url with only the
// first version migrations applied, as an older program would have left it.
func CreatePostgresAt(ctx context.Context, url, schema string, version int, opts ...Option) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	p := &Postgres{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), now: time.Now}
	return p.migrate(ctx, schema, version, buildOptions(opts).migrationSQL)
}

// JournalSyncCommit returns synchronous_commit as the connections that
// write the journal table see it, durable or not.
func (p *Postgres) JournalSyncCommit(ctx context.Context, durable bool) (string, error) {
	var v string
	err := p.journalPool(durable).QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	return v, err
}
