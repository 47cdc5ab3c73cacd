package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Checker is implemented by the stores that can check their own data
// ([SQLite] and [Postgres]).
type Checker interface {
	// Check looks the store over and returns what it checked and the
	// problems it found, at most a few (none: nothing is wrong). An error
	// means the check could not run (a store too damaged to answer is
	// reported as a problem, not as an error).
	Check(ctx context.Context) (Check, error)
}

// Check is what [Checker.Check] found.
type Check struct {
	Checked  string   // what was checked, in a phrase
	Problems []string // the first problems found; none when all is well
}

// maxProblems bounds the problems a check returns.
const maxProblems = 10

// consistencyChecks are the ledger's own invariants, checked by both back
// ends after the database's own check: each query counts the rows that
// break one ("_S_." stands for the schema of the tables). Every query
// scans its tables once (NOT IN builds one lookup of the subquery).
var consistencyChecks = []struct{ what, query string }{
	{"holds on a scope the scopes table does not know", `SELECT count(*) FROM _S_.holds WHERE (project, scope) NOT IN (SELECT project, scope FROM _S_.scopes)`},
	{"settlements without their attempt row", `SELECT count(*) FROM _S_.settlements WHERE invocation_id NOT IN (SELECT invocation_id FROM _S_.attempts)`},
	{"scopes with a negative spend", `SELECT count(*) FROM _S_.scopes WHERE spent_nanos < 0`},
	{"task events of a task the tasks table does not know", `SELECT count(*) FROM _S_.task_events WHERE (project, task) NOT IN (SELECT project, id FROM _S_.tasks)`},
}

const consistencyChecked = "holds against scopes, settlements against attempts, spends not negative, task events against tasks"

// consistency runs consistencyChecks with count, which runs one query
// (with "_S_." already replaced) and returns its count.
func consistency(ctx context.Context, count func(ctx context.Context, query string) (int64, error)) ([]string, error) {
	var problems []string
	for _, c := range consistencyChecks {
		n, err := count(ctx, c.query)
		if err != nil {
			return problems, fmt.Errorf("%s: %w", c.what, err)
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%d %s", n, c.what))
		}
	}
	return problems, nil
}

// Check implements [Checker]: SQLite's own PRAGMA integrity_check (every
// page, every index against its table), then the ledger's invariants.
func (s *SQLite) Check(ctx context.Context) (Check, error) {
	db, err := s.reader()
	if err != nil {
		return Check{}, err
	}
	c := Check{Checked: "PRAGMA integrity_check; " + consistencyChecked}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("PRAGMA integrity_check(%d)", maxProblems))
	if err != nil {
		if isCorrupt(err) {
			c.Problems = []string{err.Error()}
			return c, nil
		}
		return c, sqliteErr("integrity check", err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return c, sqliteErr("integrity check", err)
		}
		for _, l := range strings.Split(line, "\n") {
			if l != "ok" && l != "" && !strings.HasPrefix(l, "*** in database") && len(c.Problems) < maxProblems {
				c.Problems = append(c.Problems, l)
			}
		}
	}
	if err := rows.Err(); err != nil {
		if isCorrupt(err) {
			c.Problems = append(c.Problems, err.Error())
			return c, nil
		}
		return c, sqliteErr("integrity check", err)
	}
	if len(c.Problems) > 0 {
		return c, nil // the invariants of a damaged file mean little
	}
	problems, err := consistency(ctx, func(ctx context.Context, q string) (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, strings.ReplaceAll(q, "_S_.", "")).Scan(&n)
		return n, err
	})
	c.Problems = problems
	if err != nil {
		if isCorrupt(err) {
			c.Problems = append(c.Problems, err.Error())
			return c, nil
		}
		return c, sqliteErr("consistency check", err)
	}
	return c, nil
}

// isCorrupt reports whether a driver error says the file is damaged.
func isCorrupt(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB
	}
	return false
}

// Check implements [Checker]: the schema version (the server keeps its
// own pages consistent; a damaged page would fail the queries), then the
// ledger's invariants.
func (p *Postgres) Check(ctx context.Context) (Check, error) {
	c := Check{Checked: "schema version; " + consistencyChecked}
	v, err := p.SchemaVersion(ctx)
	if err != nil {
		return c, err
	}
	if v != LatestSchemaVersion {
		c.Problems = append(c.Problems, fmt.Sprintf("schema at version %d; this program expects %d", v, LatestSchemaVersion))
	}
	problems, err := consistency(ctx, func(ctx context.Context, q string) (int64, error) {
		var n int64
		err := p.pool.QueryRow(ctx, p.q(q)).Scan(&n)
		return n, err
	})
	c.Problems = append(c.Problems, problems...)
	if err != nil {
		return c, p.read("consistency check", err)
	}
	return c, nil
}
