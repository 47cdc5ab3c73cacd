package ledger

// A migration moves the schema from version-1 to version. Each is applied
// once, in order, in its own transaction, which also records it in the
// schema_version table; a database whose highest version is above the last
// one here was written by a newer program and is refused with
// [ErrSchemaTooNew]. Migrations are never edited once released: a change is
// a new migration.
type migration struct {
	version     int
	description string
	sqlite      []string
	postgres    []string // "_S_." stands for the quoted schema
	// In both lists "_P_" stands for the project of the store that applies
	// the migration, as an SQL string literal (see [WithProject]).
}

// nextMigration returns the first migration up to version target that is
// not among the applied versions; ok is false when none is left. Versions
// are applied by what is recorded, not by the highest one: a database that
// recorded a later version before an earlier one existed (migrations
// written in parallel, the later one released first) gets the earlier one
// too.
func nextMigration(applied []int, target int) (m migration, ok bool) {
	done := map[int]bool{}
	for _, v := range applied {
		done[v] = true
	}
	for _, m := range migrations {
		if m.version <= target && !done[m.version] {
			return m, true
		}
	}
	return migration{}, false
}

// LatestSchemaVersion is the schema version this package writes: the
// version of the last migration.
const LatestSchemaVersion = 9

var migrations = []migration{
	{
		version:     1,
		description: "scopes, reservations, holds, settlements and attempts",
		sqlite: []string{
			`CREATE TABLE scopes (
				scope        TEXT PRIMARY KEY,
				limit_nanos  INTEGER CHECK (limit_nanos >= 0),
				spent_nanos  INTEGER NOT NULL DEFAULT 0,
				paused       INTEGER NOT NULL DEFAULT 0,
				pause_kind   TEXT NOT NULL DEFAULT '',
				pause_reason TEXT NOT NULL DEFAULT '',
				updated_at   INTEGER NOT NULL DEFAULT 0
			) STRICT, WITHOUT ROWID`,
			// One row per scope of each reservation; the embedded store has a
			// single writer, so the rows of one invocation need no parent
			// row to be created or removed together, and one B-tree is
			// written instead of four.
			`CREATE TABLE holds (
				invocation_id TEXT NOT NULL,
				scope         TEXT NOT NULL,
				amount_nanos  INTEGER NOT NULL CHECK (amount_nanos >= 0),
				created_at    INTEGER NOT NULL,
				expires_at    INTEGER NOT NULL,
				PRIMARY KEY (invocation_id, scope)
			) STRICT, WITHOUT ROWID`,
			`CREATE TABLE settlements (
				invocation_id  TEXT PRIMARY KEY,
				cost_nanos     INTEGER NOT NULL,
				reserved_nanos INTEGER,
				settled_at     INTEGER NOT NULL
			) STRICT, WITHOUT ROWID`,
			`CREATE TABLE attempts (
				id                 INTEGER PRIMARY KEY,
				invocation_id      TEXT NOT NULL,
				at                 INTEGER NOT NULL,
				task               TEXT NOT NULL,
				agent              TEXT NOT NULL,
				provider           TEXT NOT NULL,
				model              TEXT NOT NULL,
				outcome            TEXT NOT NULL,
				input_tokens       INTEGER NOT NULL,
				output_tokens      INTEGER NOT NULL,
				cache_read_tokens  INTEGER NOT NULL,
				cache_write_tokens INTEGER NOT NULL,
				cost_nanos         INTEGER NOT NULL,
				cache_hit          INTEGER NOT NULL,
				saving_nanos       INTEGER NOT NULL,
				estimated          INTEGER NOT NULL
			) STRICT`,
		},
		postgres: []string{
			`CREATE TABLE _S_.scopes (
				scope        TEXT PRIMARY KEY,
				limit_nanos  BIGINT CHECK (limit_nanos >= 0),
				spent_nanos  BIGINT NOT NULL DEFAULT 0,
				paused       BOOLEAN NOT NULL DEFAULT false,
				pause_kind   TEXT NOT NULL DEFAULT '',
				pause_reason TEXT NOT NULL DEFAULT '',
				updated_at   BIGINT NOT NULL DEFAULT 0
			)`,
			`CREATE TABLE _S_.reservations (
				invocation_id TEXT PRIMARY KEY,
				amount_nanos  BIGINT NOT NULL CHECK (amount_nanos >= 0),
				created_at    BIGINT NOT NULL,
				expires_at    BIGINT NOT NULL
			)`,
			`CREATE INDEX reservations_expires_at ON _S_.reservations (expires_at)`,
			`CREATE TABLE _S_.holds (
				invocation_id TEXT NOT NULL REFERENCES _S_.reservations (invocation_id) ON DELETE CASCADE,
				scope         TEXT NOT NULL,
				amount_nanos  BIGINT NOT NULL,
				expires_at    BIGINT NOT NULL,
				PRIMARY KEY (invocation_id, scope)
			)`,
			`CREATE INDEX holds_scope ON _S_.holds (scope, expires_at)`,
			`CREATE TABLE _S_.settlements (
				invocation_id  TEXT PRIMARY KEY,
				cost_nanos     BIGINT NOT NULL,
				reserved_nanos BIGINT,
				settled_at     BIGINT NOT NULL
			)`,
			`CREATE TABLE _S_.attempts (
				id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
				invocation_id      TEXT NOT NULL,
				at                 BIGINT NOT NULL,
				task               TEXT NOT NULL,
				agent              TEXT NOT NULL,
				provider           TEXT NOT NULL,
				model              TEXT NOT NULL,
				outcome            TEXT NOT NULL,
				input_tokens       BIGINT NOT NULL,
				output_tokens      BIGINT NOT NULL,
				cache_read_tokens  BIGINT NOT NULL,
				cache_write_tokens BIGINT NOT NULL,
				cost_nanos         BIGINT NOT NULL,
				cache_hit          BOOLEAN NOT NULL,
				saving_nanos       BIGINT NOT NULL,
				estimated          BOOLEAN NOT NULL
			)`,
			`CREATE INDEX attempts_invocation ON _S_.attempts (invocation_id)`,
		},
	},
	{
		version:     2,
		description: "indexes of the ledger for spend reports by time, task and agent",
		sqlite: []string{
			`CREATE INDEX attempts_task ON attempts (task, at)`,
		},
		postgres: []string{
			`CREATE INDEX attempts_at ON _S_.attempts (at)`,
			`CREATE INDEX attempts_task ON _S_.attempts (task, at)`,
			`CREATE INDEX attempts_agent ON _S_.attempts (agent, at)`,
		},
	},
	{
		version:     3,
		description: "tasks and their audit trail of events",
		// completed_at is NULL while a task is open. Events are only ever
		// appended; their id orders the events of one instant. The embedded
		// store does not enforce foreign keys: its single writer checks that
		// the task exists in the transaction that appends the event.
		sqlite: []string{
			`CREATE TABLE tasks (
				id           TEXT PRIMARY KEY,
				risk         TEXT NOT NULL,
				state        TEXT NOT NULL,
				created_at   INTEGER NOT NULL,
				completed_at INTEGER
			) STRICT, WITHOUT ROWID`,
			`CREATE TABLE task_events (
				id            INTEGER PRIMARY KEY,
				task          TEXT NOT NULL REFERENCES tasks (id),
				at            INTEGER NOT NULL,
				kind          TEXT NOT NULL,
				invocation_id TEXT NOT NULL,
				agent         TEXT NOT NULL,
				provider      TEXT NOT NULL,
				model         TEXT NOT NULL,
				reviewer      TEXT NOT NULL,
				detail        TEXT NOT NULL
			) STRICT`,
			`CREATE INDEX task_events_task ON task_events (task, at)`,
		},
		postgres: []string{
			`CREATE TABLE _S_.tasks (
				id           TEXT PRIMARY KEY,
				risk         TEXT NOT NULL,
				state        TEXT NOT NULL,
				created_at   BIGINT NOT NULL,
				completed_at BIGINT
			)`,
			`CREATE TABLE _S_.task_events (
				id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
				task          TEXT NOT NULL REFERENCES _S_.tasks (id),
				at            BIGINT NOT NULL,
				kind          TEXT NOT NULL,
				invocation_id TEXT NOT NULL,
				agent         TEXT NOT NULL,
				provider      TEXT NOT NULL,
				model         TEXT NOT NULL,
				reviewer      TEXT NOT NULL,
				detail        TEXT NOT NULL
			)`,
			`CREATE INDEX task_events_task ON _S_.task_events (task, at, id)`,
		},
	},
	{
		version:     4,
		description: "every scope, hold, ledger row and task belongs to a project; limits set by an operator are marked",
		// The rows written before this version carry no project: they are
		// adopted by the project of the store that applies the migration
		// (the first program of version 4 to open the database), which is
		// recorded in the adoption table. SQLite cannot change a primary
		// key, so the scopes, tasks and task_events tables are rebuilt;
		// holds and attempts only gain a column. limit_set marks a limit
		// set with SetBudget, which SetDefaultBudget leaves alone; the
		// limits of before were all defaults.
		sqlite: []string{
			`ALTER TABLE scopes RENAME TO scopes_v3`,
			`CREATE TABLE scopes (
				project      TEXT NOT NULL,
				scope        TEXT NOT NULL,
				limit_nanos  INTEGER CHECK (limit_nanos >= 0),
				spent_nanos  INTEGER NOT NULL DEFAULT 0,
				paused       INTEGER NOT NULL DEFAULT 0,
				pause_kind   TEXT NOT NULL DEFAULT '',
				pause_reason TEXT NOT NULL DEFAULT '',
				updated_at   INTEGER NOT NULL DEFAULT 0,
				limit_set    INTEGER NOT NULL DEFAULT 0,
				PRIMARY KEY (project, scope)
			) STRICT, WITHOUT ROWID`,
			`INSERT INTO scopes (project, scope, limit_nanos, spent_nanos, paused, pause_kind, pause_reason, updated_at)
				SELECT _P_, scope, limit_nanos, spent_nanos, paused, pause_kind, pause_reason, updated_at FROM scopes_v3`,
			`DROP TABLE scopes_v3`,
			`ALTER TABLE holds ADD COLUMN project TEXT NOT NULL DEFAULT ''`,
			`UPDATE holds SET project = _P_`,
			`ALTER TABLE attempts ADD COLUMN project TEXT NOT NULL DEFAULT ''`,
			`UPDATE attempts SET project = _P_`,
			`DROP INDEX attempts_task`,
			`CREATE INDEX attempts_task ON attempts (project, task, at)`,
			`ALTER TABLE task_events RENAME TO task_events_v3`,
			`ALTER TABLE tasks RENAME TO tasks_v3`,
			`CREATE TABLE tasks (
				project      TEXT NOT NULL,
				id           TEXT NOT NULL,
				risk         TEXT NOT NULL,
				state        TEXT NOT NULL,
				created_at   INTEGER NOT NULL,
				completed_at INTEGER,
				PRIMARY KEY (project, id)
			) STRICT, WITHOUT ROWID`,
			`CREATE TABLE task_events (
				id            INTEGER PRIMARY KEY,
				project       TEXT NOT NULL,
				task          TEXT NOT NULL,
				at            INTEGER NOT NULL,
				kind          TEXT NOT NULL,
				invocation_id TEXT NOT NULL,
				agent         TEXT NOT NULL,
				provider      TEXT NOT NULL,
				model         TEXT NOT NULL,
				reviewer      TEXT NOT NULL,
				detail        TEXT NOT NULL,
				FOREIGN KEY (project, task) REFERENCES tasks (project, id)
			) STRICT`,
			`INSERT INTO tasks (project, id, risk, state, created_at, completed_at)
				SELECT _P_, id, risk, state, created_at, completed_at FROM tasks_v3`,
			`INSERT INTO task_events (id, project, task, at, kind, invocation_id, agent, provider, model, reviewer, detail)
				SELECT id, _P_, task, at, kind, invocation_id, agent, provider, model, reviewer, detail FROM task_events_v3`,
			`DROP TABLE task_events_v3`,
			`DROP TABLE tasks_v3`,
			`CREATE INDEX task_events_task ON task_events (project, task, at)`,
			`CREATE TABLE adoption (project TEXT NOT NULL, schema_version INTEGER NOT NULL) STRICT`,
			`INSERT INTO adoption (project, schema_version) VALUES (_P_, 4)`,
		},
		postgres: []string{
			`ALTER TABLE _S_.scopes ADD COLUMN project TEXT NOT NULL DEFAULT _P_`,
			`ALTER TABLE _S_.scopes ALTER COLUMN project DROP DEFAULT`,
			`ALTER TABLE _S_.scopes DROP CONSTRAINT scopes_pkey`,
			`ALTER TABLE _S_.scopes ADD PRIMARY KEY (project, scope)`,
			`ALTER TABLE _S_.scopes ADD COLUMN limit_set BOOLEAN NOT NULL DEFAULT false`,
			`ALTER TABLE _S_.holds ADD COLUMN project TEXT NOT NULL DEFAULT _P_`,
			`ALTER TABLE _S_.holds ALTER COLUMN project DROP DEFAULT`,
			`DROP INDEX _S_.holds_scope`,
			`CREATE INDEX holds_scope ON _S_.holds (project, scope, expires_at)`,
			`ALTER TABLE _S_.attempts ADD COLUMN project TEXT NOT NULL DEFAULT _P_`,
			`ALTER TABLE _S_.attempts ALTER COLUMN project DROP DEFAULT`,
			`DROP INDEX _S_.attempts_at`,
			`DROP INDEX _S_.attempts_task`,
			`DROP INDEX _S_.attempts_agent`,
			`CREATE INDEX attempts_at ON _S_.attempts (project, at)`,
			`CREATE INDEX attempts_task ON _S_.attempts (project, task, at)`,
			`CREATE INDEX attempts_agent ON _S_.attempts (project, agent, at)`,
			`ALTER TABLE _S_.task_events DROP CONSTRAINT task_events_task_fkey`,
			`ALTER TABLE _S_.tasks ADD COLUMN project TEXT NOT NULL DEFAULT _P_`,
			`ALTER TABLE _S_.tasks ALTER COLUMN project DROP DEFAULT`,
			`ALTER TABLE _S_.tasks DROP CONSTRAINT tasks_pkey`,
			`ALTER TABLE _S_.tasks ADD PRIMARY KEY (project, id)`,
			`ALTER TABLE _S_.task_events ADD COLUMN project TEXT NOT NULL DEFAULT _P_`,
			`ALTER TABLE _S_.task_events ALTER COLUMN project DROP DEFAULT`,
			`ALTER TABLE _S_.task_events ADD FOREIGN KEY (project, task) REFERENCES _S_.tasks (project, id)`,
			`DROP INDEX _S_.task_events_task`,
			`CREATE INDEX task_events_task ON _S_.task_events (project, task, at, id)`,
			`CREATE TABLE _S_.adoption (project TEXT NOT NULL, schema_version INTEGER NOT NULL)`,
			`INSERT INTO _S_.adoption (project, schema_version) VALUES (_P_, 4)`,
		},
	},
	{
		version:     5,
		description: "attempts flagged unpriced: charged the reservation because the catalog lists neither model",
		sqlite:      []string{`ALTER TABLE attempts ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0`},
		postgres:    []string{`ALTER TABLE _S_.attempts ADD COLUMN unpriced BOOLEAN NOT NULL DEFAULT false`},
	},
	{
		version:     6,
		description: "budget alerts: a scope's spend crossed a threshold of its limit",
		// One row per scope, threshold and limit, written by the settlement
		// that crossed it; claimed_until and notified_at let one process
		// announce it (see Store.ClaimAlerts).
		sqlite: []string{
			`CREATE TABLE budget_alerts (
				id            INTEGER PRIMARY KEY,
				project       TEXT NOT NULL,
				scope         TEXT NOT NULL,
				threshold     INTEGER NOT NULL CHECK (threshold > 0 AND threshold <= 100),
				limit_nanos   INTEGER NOT NULL,
				spent_nanos   INTEGER NOT NULL,
				crossed_at    INTEGER NOT NULL,
				claimed_until INTEGER NOT NULL DEFAULT 0,
				notified_at   INTEGER,
				UNIQUE (project, scope, threshold, limit_nanos)
			) STRICT`,
			`CREATE INDEX budget_alerts_unnotified ON budget_alerts (project, id) WHERE notified_at IS NULL`,
		},
		postgres: []string{
			`CREATE TABLE _S_.budget_alerts (
				id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
				project       TEXT NOT NULL,
				scope         TEXT NOT NULL,
				threshold     INTEGER NOT NULL CHECK (threshold > 0 AND threshold <= 100),
				limit_nanos   BIGINT NOT NULL,
				spent_nanos   BIGINT NOT NULL,
				crossed_at    BIGINT NOT NULL,
				claimed_until BIGINT NOT NULL DEFAULT 0,
				notified_at   BIGINT,
				UNIQUE (project, scope, threshold, limit_nanos)
			)`,
			`CREATE INDEX budget_alerts_unnotified ON _S_.budget_alerts (project, id) WHERE notified_at IS NULL`,
		},
	},
	{
		version:     7,
		description: "attempts name the virtual key of a gateway call (its public id; NULL without one)",
		sqlite: []string{
			`ALTER TABLE attempts ADD COLUMN key_id TEXT`,
			`CREATE INDEX attempts_key ON attempts (project, key_id, at)`,
		},
		postgres: []string{
			`ALTER TABLE _S_.attempts ADD COLUMN key_id TEXT`,
			`CREATE INDEX attempts_key ON _S_.attempts (project, key_id, at)`,
		},
	},
	{
		version:     8,
		description: "attempts name the host session, subagent and parent agent of a gateway call ('' for none)",
		// The rows written before this version had no host: they read as
		// made without a session, by no subagent.
		sqlite: []string{
			`ALTER TABLE attempts ADD COLUMN session TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE attempts ADD COLUMN host_agent TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE attempts ADD COLUMN parent_agent TEXT NOT NULL DEFAULT ''`,
			`CREATE INDEX attempts_session ON attempts (project, session, at)`,
		},
		postgres: []string{
			`ALTER TABLE _S_.attempts ADD COLUMN session TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE _S_.attempts ADD COLUMN host_agent TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE _S_.attempts ADD COLUMN parent_agent TEXT NOT NULL DEFAULT ''`,
			`CREATE INDEX attempts_session ON _S_.attempts (project, session, at)`,
		},
	},
	{
		version:     9,
		description: "the fast path's settlement journal in the shared store (PostgreSQL; SQLite keeps it in files)",
		// A settlement is written here, in one statement, before its call
		// returns, and deleted in the transaction that applies it. A hold a
		// journaled settlement draws on (its own reservation, or the lease
		// it names) stays counted, expired or not, until it is applied.
		// SQLite's table stays empty (its fast path journals to files
		// beside the database); it keeps the two dialects' tables the same.
		sqlite: []string{
			`CREATE TABLE journal (
				invocation_id TEXT PRIMARY KEY,
				project TEXT NOT NULL,
				lease TEXT NOT NULL,
				line TEXT NOT NULL,
				written_at INTEGER NOT NULL)`,
		},
		postgres: []string{
			`CREATE TABLE _S_.journal (
				invocation_id TEXT PRIMARY KEY,
				project TEXT NOT NULL,
				lease TEXT NOT NULL,
				line TEXT NOT NULL,
				written_at BIGINT NOT NULL)`,
			`CREATE INDEX journal_lease ON _S_.journal (lease) WHERE lease <> ''`,
		},
	},
}

// SchemaVersions returns the versions of the migrations this program
// applies, in order; the last is [LatestSchemaVersion].
func SchemaVersions() []int {
	out := make([]int, len(migrations))
	for i, m := range migrations {
		out[i] = m.version
	}
	return out
}
