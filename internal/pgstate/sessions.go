package pgstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// sessionsTable holds the web console's sessions: one row per session,
// named by the hash of its cookie's token (never the token), with the
// session's form token, the key it was opened with and its expiry.
const sessionsTable = `CREATE TABLE IF NOT EXISTS _S_.console_sessions (
	project    TEXT NOT NULL,
	token_hash TEXT NOT NULL,
	key_id     TEXT NOT NULL,
	csrf       TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (project, token_hash))`

// Session is one web console session as the store keeps it.
type Session struct {
	// CSRF is the session's form (synchronizer) token.
	CSRF string
	// KeyID is the id of the virtual key the session was opened with
	// ("" without authentication).
	KeyID            string
	Created, Expires time.Time
}

// Sessions are the web console's sessions of the store's project, shared
// by every replica: one opened on any of them is found by the others at
// once, and one deleted is gone for all. Safe for concurrent use.
type Sessions struct{ s *Store }

// Sessions returns the project's console sessions.
func (s *Store) Sessions() *Sessions { return &Sessions{s: s} }

// Put records the session named id (the hash of its token), and deletes
// the project's sessions expired at now.
func (ss *Sessions) Put(ctx context.Context, id string, sess Session, now time.Time) error {
	s := ss.s
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q(`DELETE FROM _S_.console_sessions WHERE project = $1 AND expires_at <= $2`), s.project, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q(`INSERT INTO _S_.console_sessions (project, token_hash, key_id, csrf, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`), s.project, id, sess.KeyID, sess.CSRF, sess.Created, sess.Expires)
		return err
	})
	if err != nil {
		return sessionsErr("writing", err)
	}
	return nil
}

// Get returns the session named id; false when there is none.
func (ss *Sessions) Get(ctx context.Context, id string) (Session, bool, error) {
	s := ss.s
	var sess Session
	err := s.pool.QueryRow(ctx, s.q(`SELECT key_id, csrf, created_at, expires_at FROM _S_.console_sessions WHERE project = $1 AND token_hash = $2`),
		s.project, id).Scan(&sess.KeyID, &sess.CSRF, &sess.Created, &sess.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, sessionsErr("reading", err)
	}
	return sess, true, nil
}

// Delete deletes the session named id, if there is one.
func (ss *Sessions) Delete(ctx context.Context, id string) error {
	s := ss.s
	if _, err := s.pool.Exec(ctx, s.q(`DELETE FROM _S_.console_sessions WHERE project = $1 AND token_hash = $2`), s.project, id); err != nil {
		return sessionsErr("deleting", err)
	}
	return nil
}

func sessionsErr(what string, err error) error {
	return fmt.Errorf("shared state (PostgreSQL, console sessions): %s: %w", what, err)
}
