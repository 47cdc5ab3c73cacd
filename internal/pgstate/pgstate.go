// Package pgstate keeps a project's shared state in PostgreSQL: the
// records that a single machine keeps in files under .cortexbuild/ (the
// gateway's virtual keys, the locality consents, the project's pause, the
// circuit breakers) when
// the project's store is PostgreSQL (store.backend: postgres), so that
// every replica of a fleet sees the change any one of them, or a command,
// makes.
//
// A [Store] is one project's state in one database. It holds sets of
// records, each named by its kind ("gateway-keys", "consent", ...); a
// record is an id and a JSON document, which the owner of the kind encodes
// and decodes. Every set has a version, raised by every change in the same
// transaction: a [View] looks at the version at most once per period and
// re-reads the set when it moved, so a change made by another process is
// seen at most that period later, for one small query per period.
//
// A change ([Set.Change]) is a transaction that locks the set's version
// row, reads the records as they are now, and writes what the caller's
// function made of them: two processes changing one set at once are
// serialised, and neither loses the other's change. A record added by a
// change is inserted, never upserted: the primary key (project, kind, id)
// refuses a second record with the id of an existing one.
//
// Beside the sets, the store keeps the web console's login sessions
// ([Sessions]): rows read on every page load, which a set's
// read-everything-on-change would not suit.
//
// The tables live in their own schema ([DefaultSchema]), apart from the
// ledger's, created idempotently with their own schema version
// (state_schema_version); a database created by a newer program is
// refused.
package pgstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema the tables live in unless [Options.Schema]
// says otherwise.
const DefaultSchema = "cortexbuild_state"

// SchemaVersion is the version of the tables this build creates and reads.
const SchemaVersion = 1

// ErrSchemaTooNew: the tables were created by a newer program.
var ErrSchemaTooNew = errors.New("pgstate: the shared state's tables are newer than this program")

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Options are how [Open] connects.
type Options struct {
	// Project is the project whose state the store reads and writes;
	// required.
	Project string
	// Schema is where the tables live; [DefaultSchema] when empty.
	Schema string
	// Dial, when set, makes the connections (the locality gate's
	// service dialer); it is handed host names, not addresses.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxConns bounds the pool; pgx's default when zero.
	MaxConns int32
}

// Store is one project's shared state in one PostgreSQL database. Safe
// for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	schema  string // sanitized identifier
	project string
	where   string // "PostgreSQL at host:port", for messages
}

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN), and creates the schema and its tables when missing.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	if o.Project == "" {
		return nil, errors.New("pgstate: no project")
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if !schemaName.MatchString(o.Schema) {
		return nil, fmt.Errorf("pgstate: schema %q: lower-case letters, digits and _, at most 63", o.Schema)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("pgstate: the PostgreSQL URL (store.dsn) cannot be parsed")
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.Dial != nil {
		cfg.ConnConfig.DialFunc = pgconn.DialFunc(o.Dial)
		cfg.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstate: connect: %w", err)
	}
	where := "PostgreSQL at " + net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	s := &Store{pool: pool, schema: pgx.Identifier{o.Schema}.Sanitize(), project: o.Project, where: where}
	if err := s.create(ctx, o.Schema); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the connections.
func (s *Store) Close() { s.pool.Close() }

// Project is the project the store reads and writes.
func (s *Store) Project() string { return s.project }

// q qualifies the tables of a statement with the store's schema.
func (s *Store) q(sql string) string {
	return strings.ReplaceAll(sql, "_S_.", s.schema+".")
}

// create makes the schema and the tables, one process at a time.
func (s *Store) create(ctx context.Context, schema string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "cortexbuild state "+schema); err != nil {
			return fmt.Errorf("pgstate: connect: %w", err)
		}
		stmts := []string{
			`CREATE SCHEMA IF NOT EXISTS ` + s.schema,
			`CREATE TABLE IF NOT EXISTS _S_.state_schema_version (
				version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
			// Added after version 1 without raising it: a table older
			// programs do not read, so that a replica of the previous
			// release still starts during a rolling update.
			sessionsTable,
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, s.q(q)); err != nil {
				return fmt.Errorf("pgstate: creating the tables: %w", err)
			}
		}
		var cur int
		if err := tx.QueryRow(ctx, s.q(`SELECT coalesce(max(version), 0) FROM _S_.state_schema_version`)).Scan(&cur); err != nil {
			return fmt.Errorf("pgstate: reading the schema version: %w", err)
		}
		if cur > SchemaVersion {
			return fmt.Errorf("%w: schema %s is at version %d, this program knows up to %d", ErrSchemaTooNew, schema, cur, SchemaVersion)
		}
		if cur == SchemaVersion {
			return nil
		}
		stmts = []string{
			// One row per set: its version, raised by every change.
			`CREATE TABLE IF NOT EXISTS _S_.sets (
				project TEXT NOT NULL,
				kind    TEXT NOT NULL,
				version BIGINT NOT NULL DEFAULT 0,
				PRIMARY KEY (project, kind))`,
			// The records; seq keeps the order they were added in.
			`CREATE TABLE IF NOT EXISTS _S_.records (
				project    TEXT NOT NULL,
				kind       TEXT NOT NULL,
				id         TEXT NOT NULL,
				seq        BIGINT GENERATED ALWAYS AS IDENTITY,
				data       JSONB NOT NULL,
				updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
				PRIMARY KEY (project, kind, id),
				FOREIGN KEY (project, kind) REFERENCES _S_.sets (project, kind))`,
			`INSERT INTO _S_.state_schema_version (version) VALUES (1) ON CONFLICT DO NOTHING`,
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, s.q(q)); err != nil {
				return fmt.Errorf("pgstate: creating the tables: %w", err)
			}
		}
		return nil
	})
}

// Record is one record of a set: its id, unique in the set, and its JSON
// document.
type Record struct {
	ID   string
	Data json.RawMessage
}

// Set is the records of one kind of the store's project.
type Set struct {
	s    *Store
	kind string
}

// Set returns the set of records of kind.
func (s *Store) Set(kind string) *Set { return &Set{s: s, kind: kind} }

// Kind is the set's kind.
func (t *Set) Kind() string { return t.kind }

// Version returns the set's version: 0 before its first change, raised by
// every change.
func (t *Set) Version(ctx context.Context) (int64, error) {
	var v int64
	err := t.s.pool.QueryRow(ctx, t.s.q(`SELECT version FROM _S_.sets WHERE project = $1 AND kind = $2`), t.s.project, t.kind).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, t.err("reading", err)
	}
	return v, nil
}

// Load returns the set's version and records, in the order they were
// added, as of one moment.
func (t *Set) Load(ctx context.Context) (int64, []Record, error) {
	var v int64
	var recs []Record
	err := pgx.BeginTxFunc(ctx, t.s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, t.s.q(`SELECT version FROM _S_.sets WHERE project = $1 AND kind = $2`), t.s.project, t.kind).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			v, err = 0, nil
		}
		if err != nil {
			return err
		}
		recs, err = t.records(ctx, tx)
		return err
	})
	if err != nil {
		return 0, nil, t.err("reading", err)
	}
	return v, recs, nil
}

func (t *Set) records(ctx context.Context, tx pgx.Tx) ([]Record, error) {
	rows, err := tx.Query(ctx, t.s.q(`SELECT id, data FROM _S_.records WHERE project = $1 AND kind = $2 ORDER BY seq`), t.s.project, t.kind)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Record, error) {
		var rec Record
		var data []byte
		err := r.Scan(&rec.ID, &data)
		rec.Data = data
		return rec, err
	})
}

// Change runs fn on the set's records as they are now, under the lock of
// the set's version row, and writes what fn returns when it reports a
// change: records with a new id are inserted (in their order), changed
// ones updated, missing ones deleted, and the version raised, all in one
// transaction. It returns the set's version and records after the change
// (as they were when fn reports none). An error of fn is returned as it
// is, and nothing is written.
func (t *Set) Change(ctx context.Context, fn func([]Record) ([]Record, bool, error)) (int64, []Record, error) {
	var v int64
	var out []Record
	var fnErr error
	err := pgx.BeginFunc(ctx, t.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, t.s.q(`INSERT INTO _S_.sets (project, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING`), t.s.project, t.kind); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, t.s.q(`SELECT version FROM _S_.sets WHERE project = $1 AND kind = $2 FOR UPDATE`), t.s.project, t.kind).Scan(&v); err != nil {
			return err
		}
		old, err := t.records(ctx, tx)
		if err != nil {
			return err
		}
		next, changed, err := fn(slices.Clone(old))
		if err != nil {
			fnErr = err
			return err
		}
		if !changed {
			out = old
			return nil
		}
		was := make(map[string]json.RawMessage, len(old))
		for _, r := range old {
			was[r.ID] = r.Data
		}
		seen := make(map[string]bool, len(next))
		for _, r := range next {
			if seen[r.ID] {
				fnErr = fmt.Errorf("pgstate: %s: two records with id %q", t.kind, r.ID)
				return fnErr
			}
			seen[r.ID] = true
			if !json.Valid(r.Data) {
				fnErr = fmt.Errorf("pgstate: %s: record %q is not JSON", t.kind, r.ID)
				return fnErr
			}
			data, ok := was[r.ID]
			switch {
			case !ok:
				if _, err := tx.Exec(ctx, t.s.q(`INSERT INTO _S_.records (project, kind, id, data) VALUES ($1, $2, $3, $4)`), t.s.project, t.kind, r.ID, []byte(r.Data)); err != nil {
					return err
				}
			case !bytes.Equal(data, r.Data):
				if _, err := tx.Exec(ctx, t.s.q(`UPDATE _S_.records SET data = $4, updated_at = now() WHERE project = $1 AND kind = $2 AND id = $3`), t.s.project, t.kind, r.ID, []byte(r.Data)); err != nil {
					return err
				}
			}
		}
		for _, r := range old {
			if !seen[r.ID] {
				if _, err := tx.Exec(ctx, t.s.q(`DELETE FROM _S_.records WHERE project = $1 AND kind = $2 AND id = $3`), t.s.project, t.kind, r.ID); err != nil {
					return err
				}
			}
		}
		if err := tx.QueryRow(ctx, t.s.q(`UPDATE _S_.sets SET version = version + 1 WHERE project = $1 AND kind = $2 RETURNING version`), t.s.project, t.kind).Scan(&v); err != nil {
			return err
		}
		// What is returned is what the database holds (jsonb's form).
		out, err = t.records(ctx, tx)
		return err
	})
	if fnErr != nil {
		return 0, nil, fnErr
	}
	if err != nil {
		return 0, nil, t.err("writing", err)
	}
	return v, out, nil
}

// Import adds the records whose id the set does not hold yet, and returns
// how many it added: a record the set holds is never replaced. Importing
// the same records again adds nothing.
func (t *Set) Import(ctx context.Context, recs []Record) (int, error) {
	n := 0
	_, _, err := t.Change(ctx, func(cur []Record) ([]Record, bool, error) {
		n = 0
		for _, r := range recs {
			if !slices.ContainsFunc(cur, func(c Record) bool { return c.ID == r.ID }) {
				cur = append(cur, r)
				n++
			}
		}
		return cur, n > 0, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// err wraps a database error, naming the set. An error of the server
// (a PgError) is quoted; any other (no connection, a connection cut, a
// timeout) is an [UnreachableError], which names the server by host and
// port only: pgx's text of a failed connection names the database user
// and the database, which a client of the gateway has no business seeing.
func (t *Set) err(what string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) && !errors.Is(err, context.Canceled) {
		return &UnreachableError{What: fmt.Sprintf("shared state (%s): %s", t.kind, what), Where: t.s.where, Err: err}
	}
	return fmt.Errorf("shared state (PostgreSQL, %s): %s: %w", t.kind, what, err)
}

// UnreachableError is a shared state the process could not read or change
// because its server could not be reached. Its message names the server
// by host and port; Err, the driver's error, is for logs.
type UnreachableError struct {
	What  string // "shared state (keys): read", …
	Where string // "PostgreSQL at host:port"
	Err   error
}

func (e *UnreachableError) Error() string {
	return e.What + ": the shared state's " + e.Where + " is unreachable"
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// View is a cached reader of a set: it looks at the set's version at most
// once per Every and re-reads the records when the version moved, so a
// change another process makes is seen at most Every later; changes made
// through the view are seen at once. Safe for concurrent use.
type View struct {
	Set *Set
	// Every is the longest another process's change can go unseen; zero
	// or less looks on every read.
	Every time.Duration
	// Now, when set, is the clock of the period (tests).
	Now func() time.Time

	mu      sync.Mutex
	last    time.Time // when the set was last looked at
	read    bool
	version int64
	recs    []Record
}

func (v *View) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Records returns the set's version and records as last seen, looking
// again when the period has passed; the records are shared, not to be
// changed. A failed look is an error, and the next read looks again.
func (v *View) Records(ctx context.Context) (int64, []Record, error) {
	return v.look(ctx, v.Every)
}

// Fresh is [View.Records] looking again unless the last look is less
// than maxAge old, whatever the period: what a reader does when the
// record it wants is missing (a key created a moment ago by another
// process). maxAge bounds how often misses make it look.
func (v *View) Fresh(ctx context.Context, maxAge time.Duration) (int64, []Record, error) {
	return v.look(ctx, min(maxAge, v.Every))
}

func (v *View) look(ctx context.Context, every time.Duration) (int64, []Record, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	if v.read && every > 0 && now.Before(v.last.Add(every)) {
		return v.version, v.recs, nil
	}
	ver, err := v.Set.Version(ctx)
	if err != nil {
		v.read = false
		return 0, nil, err
	}
	if !v.read || ver != v.version {
		ver, recs, err := v.Set.Load(ctx)
		if err != nil {
			v.read = false
			return 0, nil, err
		}
		v.version, v.recs = ver, recs
	}
	v.read, v.last = true, now
	return v.version, v.recs, nil
}

// Change is [Set.Change], after which the view holds what it wrote.
func (v *View) Change(ctx context.Context, fn func([]Record) ([]Record, bool, error)) (int64, []Record, error) {
	ver, recs, err := v.Set.Change(ctx, fn)
	if err != nil {
		return 0, nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.read || ver >= v.version {
		v.version, v.recs, v.read, v.last = ver, recs, true, v.now()
	}
	return ver, recs, nil
}
