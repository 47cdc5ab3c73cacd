package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexbuild/cortexbuild/provider"
)

// settleBatch applies many settlements in one transaction of three round
// trips, whatever their number:
//
//  1. begin; record every settlement at once (idempotently, by invocation
//     id: those already recorded are left out), reading the reservation
//     each one holds, if any, and its scopes;
//  2. write the ledger rows of those recorded (one multi-row insert), lock
//     the scopes to charge in scope order, drop the settled reservations,
//     draw each lease down once by what its settlements drew from it, and
//     charge each scope once by the sum of its settlements' costs;
//  3. pause the scopes that reached their limit, record the alert
//     thresholds the charges crossed, and commit.
//
// The scope rows, which every process's reservations and settlements of
// those scopes wait for, are locked only for the end of the second round
// trip and the third. Each settlement is applied as [Postgres.Settle]
// applies it (its own reservation's scopes are charged while it holds
// one); errs[i] is the outcome of sets[i]: nil, or wrapping
// ErrAlreadySettled (a later settlement of an id the batch already has
// counts as one) or ErrInvalid; a failure of the database fails them all
// and none took effect.
func (p *Postgres) settleBatch(ctx context.Context, sets []Settlement) []error {
	now := p.now()
	n := nanos(now)
	errs := make([]error, len(sets))
	scopes := make([][]Scope, len(sets))
	first := map[string]int{}
	var todo []int // the valid settlements, one per invocation id
	for i := range sets {
		if scopes[i], errs[i] = checkSettlement(&sets[i], now); errs[i] != nil {
			continue
		}
		if _, dup := first[sets[i].InvocationID]; dup {
			errs[i] = fmt.Errorf("%w: %s", ErrAlreadySettled, sets[i].InvocationID)
			continue
		}
		first[sets[i].InvocationID] = i
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return errs
	}
	// Settlements are recorded in invocation order, so that two
	// transactions recording some of the same ids (a replay racing the
	// process that wrote them) take those rows' locks in the same order.
	slices.SortFunc(todo, func(a, b int) int {
		if sets[a].InvocationID < sets[b].InvocationID {
			return -1
		}
		return 1
	})
	ids := make([]string, len(todo))
	costs := make([]int64, len(todo))
	for k, i := range todo {
		ids[k], costs[k] = sets[i].InvocationID, int64(sets[i].Cost)
	}
	var settled map[string]bool
	err := p.withConn(ctx, "settle", func(c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(p.q(`SELECT invocation_id, scope FROM _S_.holds WHERE invocation_id = ANY($1) ORDER BY invocation_id, scope`), ids)
		b.Queue(p.q(`INSERT INTO _S_.settlements (invocation_id, cost_nanos, reserved_nanos, settled_at)
			SELECT u.id, u.cost, r.amount_nanos, $3 FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u (id, cost, k)
				LEFT JOIN _S_.reservations r ON r.invocation_id = u.id
			ORDER BY u.k
			ON CONFLICT (invocation_id) DO NOTHING
			RETURNING invocation_id, reserved_nanos IS NOT NULL`), ids, costs, n)
		// Applied (now or before): out of the journal table.
		b.Queue(p.q(`DELETE FROM _S_.journal WHERE invocation_id = ANY($1)`), ids)
		held, recorded, err := readRecordBatch(c.SendBatch(ctx, b))
		if err != nil {
			return err
		}
		if len(recorded) == 0 {
			settled = recorded
			_, err := c.Exec(context.WithoutCancel(ctx), "COMMIT")
			return err
		}
		// What the recorded settlements do, summed.
		charges := map[Scope]provider.Money{}
		draws := map[string]provider.Money{}
		var own []string // settled reservations to drop
		rows := attemptColsOf(p.project)
		for _, i := range todo {
			set := &sets[i]
			hasOwn, ok := recorded[set.InvocationID]
			if !ok {
				continue
			}
			charge := scopes[i]
			if hs := held[set.InvocationID]; hasOwn && len(hs) > 0 {
				charge = hs
			}
			if hasOwn {
				own = append(own, set.InvocationID)
			}
			for _, sc := range charge {
				charges[sc] += set.Cost
			}
			if set.Lease != "" && set.Reserved > 0 {
				draws[set.Lease] += set.Reserved
			}
			for _, a := range set.Earlier {
				rows.add(a)
			}
			rows.add(set.Entry)
		}
		chargeScopes := make([]string, 0, len(charges))
		for sc := range charges {
			chargeScopes = append(chargeScopes, string(sc))
		}
		slices.Sort(chargeScopes)
		amounts := make([]int64, len(chargeScopes))
		for k, sc := range chargeScopes {
			amounts[k] = int64(charges[Scope(sc)])
		}
		leases := make([]string, 0, len(draws))
		for l := range draws {
			leases = append(leases, l)
		}
		slices.Sort(leases)
		drawn := make([]int64, len(leases))
		for k, l := range leases {
			drawn[k] = int64(draws[l])
		}

		b = &pgx.Batch{}
		b.Queue(p.q(insertAttemptsSQL("_S_.attempts")), rows.args()...)
		b.Queue(p.q(`INSERT INTO _S_.scopes (project, scope, updated_at) SELECT $3, s, $2 FROM unnest($1::text[]) AS s ORDER BY s
			ON CONFLICT (project, scope) DO NOTHING`), chargeScopes, n, p.project)
		b.Queue(p.q(`SELECT scope FROM _S_.scopes WHERE project = $2 AND scope = ANY($1) ORDER BY scope FOR UPDATE`), chargeScopes, p.project)
		b.Queue(p.q(`DELETE FROM _S_.reservations WHERE invocation_id = ANY($1)`), own)
		// A lease's reservation row before its holds, as a cascading delete
		// locks them.
		b.Queue(p.q(`UPDATE _S_.reservations r SET amount_nanos = greatest(r.amount_nanos - d.amount, 0)
			FROM unnest($1::text[], $2::bigint[]) AS d (id, amount) WHERE r.invocation_id = d.id AND r.amount_nanos > 0`), leases, drawn)
		b.Queue(p.q(`UPDATE _S_.holds h SET amount_nanos = greatest(h.amount_nanos - d.amount, 0)
			FROM unnest($1::text[], $2::bigint[]) AS d (id, amount) WHERE h.invocation_id = d.id AND h.amount_nanos > 0`), leases, drawn)
		b.Queue(p.q(`UPDATE _S_.scopes s SET spent_nanos = s.spent_nanos + c.amount, updated_at = $3
			FROM unnest($1::text[], $2::bigint[]) AS c (scope, amount) WHERE s.project = $4 AND s.scope = c.scope
			RETURNING s.scope, s.limit_nanos, s.spent_nanos, s.paused`), chargeScopes, amounts, n, p.project)
		charged, err := readBatchCharge(c.SendBatch(ctx, b), len(chargeScopes))
		if err != nil {
			return err
		}
		b = p.afterCharge(charged, func(sc Scope) provider.Money { return charges[sc] }, n)
		if err := execBatch(c.SendBatch(context.WithoutCancel(ctx), b), b.Len()); err != nil {
			return err
		}
		settled = recorded
		return nil
	})
	for _, i := range todo {
		if err == nil && !hasKey(settled, sets[i].InvocationID) {
			errs[i] = fmt.Errorf("%w: %s", ErrAlreadySettled, sets[i].InvocationID)
		}
	}
	if err != nil {
		for i := range errs {
			if errs[i] == nil || errors.Is(errs[i], ErrAlreadySettled) {
				errs[i] = err
			}
		}
	}
	return errs
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// readRecordBatch reads the first round trip of settleBatch: the scopes
// each invocation holds, and the settlements recorded (with whether each
// had a reservation of its own).
func readRecordBatch(br pgx.BatchResults) (held map[string][]Scope, recorded map[string]bool, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := br.Exec(); err != nil { // BEGIN
		return nil, nil, err
	}
	held = map[string][]Scope{}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id, sc string
		if err := rows.Scan(&id, &sc); err != nil {
			rows.Close()
			return nil, nil, err
		}
		held[id] = append(held[id], Scope(sc))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	recorded = map[string]bool{}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id string
		var own bool
		if err := rows.Scan(&id, &own); err != nil {
			rows.Close()
			return nil, nil, err
		}
		recorded[id] = own
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	_, err = br.Exec() // the journal rows
	return held, recorded, err
}

// readBatchCharge reads the second round trip of settleBatch and returns
// the charged scopes as they are now.
func readBatchCharge(br pgx.BatchResults, nScopes int) (charged []scopeState, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for range 6 { // rows, ensure scopes, lock them, drop reservations, draw leases (2)
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
	if len(charged) != nScopes {
		return nil, fmt.Errorf("ledger: settle charged %d scopes of %d", len(charged), nScopes)
	}
	return charged, nil
}

// insertAttemptsSQL inserts the rows of [attemptCols.args], in order, in
// one statement.
func insertAttemptsSQL(table string) string {
	return `INSERT INTO ` + table + ` (invocation_id, at, task, agent, provider, model, outcome,
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
		cost_nanos, cache_hit, saving_nanos, estimated, project, unpriced, key_id,
		session, host_agent, parent_agent)
		SELECT id, at, task, agent, provider, model, outcome, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
			cost, cache_hit, saving, estimated, $16, unpriced, key_id, session, host_agent, parent_agent
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::boolean[], $14::bigint[], $15::boolean[], $17::boolean[], $18::text[],
			$19::text[], $20::text[], $21::text[])
			WITH ORDINALITY AS r (id, at, task, agent, provider, model, outcome, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
				cost, cache_hit, saving, estimated, unpriced, key_id, session, host_agent, parent_agent, k)
		ORDER BY k`
}

// attemptCols holds ledger rows column by column, as insertAttemptsSQL
// takes them.
type attemptCols struct {
	project                                                 string
	ids, tasks, agents, providers, models, outcomes         []string
	at, input, output, cacheRead, cacheWrite, cost, savings []int64
	cacheHit, estimated, unpriced                           []bool
	keys                                                    []*string
	sessions, hostAgents, parentAgents                      []string
}

func attemptColsOf(project string) *attemptCols { return &attemptCols{project: project} }

func (c *attemptCols) add(a AttemptRow) {
	c.ids = append(c.ids, a.InvocationID)
	c.at = append(c.at, nanos(a.Time))
	c.tasks = append(c.tasks, a.Task)
	c.agents = append(c.agents, a.Agent)
	c.providers = append(c.providers, a.Provider)
	c.models = append(c.models, a.Model)
	c.outcomes = append(c.outcomes, a.Outcome)
	c.input = append(c.input, a.InputTokens)
	c.output = append(c.output, a.OutputTokens)
	c.cacheRead = append(c.cacheRead, a.CacheReadTokens)
	c.cacheWrite = append(c.cacheWrite, a.CacheWriteTokens)
	c.cost = append(c.cost, int64(a.Cost))
	c.cacheHit = append(c.cacheHit, a.CacheHit)
	c.savings = append(c.savings, int64(a.Saving))
	c.estimated = append(c.estimated, a.EstimatedUsage)
	c.unpriced = append(c.unpriced, a.Unpriced)
	c.keys = append(c.keys, keyColumn(a.Key))
	c.sessions = append(c.sessions, a.Session)
	c.hostAgents = append(c.hostAgents, a.HostAgent)
	c.parentAgents = append(c.parentAgents, a.ParentAgent)
}

func (c *attemptCols) args() []any {
	return []any{c.ids, c.at, c.tasks, c.agents, c.providers, c.models, c.outcomes,
		c.input, c.output, c.cacheRead, c.cacheWrite, c.cost, c.cacheHit, c.savings, c.estimated, c.project, c.unpriced, c.keys,
		c.sessions, c.hostAgents, c.parentAgents}
}

// renewHolds moves the expiry of the reservations ids, and of their holds,
// to until[i] (nanoseconds), and returns the ids it did not renew: those no
// longer held, or already expired (their room may already be another's).
func (p *Postgres) renewHolds(ctx context.Context, ids []string, until []int64) (gone []string, err error) {
	renewed := map[string]bool{}
	err = p.withConn(ctx, "renew holds", func(c *pgxpool.Conn) error {
		clear(renewed)
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		// The reservation rows before their holds, as a cascading delete
		// locks them.
		b.Queue(p.q(`UPDATE _S_.reservations r SET expires_at = u.until FROM unnest($1::text[], $2::bigint[]) AS u (id, until)
			WHERE r.invocation_id = u.id AND r.expires_at > $3 RETURNING r.invocation_id`), ids, until, nanos(p.now()))
		b.Queue(p.q(`UPDATE _S_.holds h SET expires_at = u.until FROM unnest($1::text[], $2::bigint[]) AS u (id, until)
			WHERE h.invocation_id = u.id AND h.expires_at > $3`), ids, until, nanos(p.now()))
		b.Queue("COMMIT")
		br := c.SendBatch(context.WithoutCancel(ctx), b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			renewed[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !renewed[id] {
			gone = append(gone, id)
		}
	}
	return gone, nil
}

// writeJournal writes settlements to the journal table in one statement
// (one round trip), each with the lease it draws on and its journal line.
// With durable false the commit does not wait for the server's disk
// (synchronous_commit off): the settlements are in the server, seen by
// every process, and survive the death of this one and of its machine; a
// crash of the database server may lose the last fraction of a second of
// them. A settlement already in the table is left as it is.
func (p *Postgres) writeJournal(ctx context.Context, ids, leases, lines []string, durable bool) error {
	if p.closed.Load() {
		return ErrClosed
	}
	_, err := p.journalPool(durable).Exec(ctx, p.q(`INSERT INTO _S_.journal (invocation_id, project, lease, line, written_at)
		SELECT u.id, $4, u.lease, u.line, $5 FROM unnest($1::text[], $2::text[], $3::text[]) AS u (id, lease, line)
		ON CONFLICT (invocation_id) DO NOTHING`), ids, leases, lines, p.project, nanos(p.now()))
	return p.read("journal settlements", err)
}

// journalPool is the pool writeJournal writes with.
func (p *Postgres) journalPool(durable bool) *pgxpool.Pool {
	if durable || p.jpool == nil {
		return p.pool
	}
	return p.jpool
}

// journaled returns up to max settlements of the journal table written at
// or before before, oldest first, as their journal lines.
func (p *Postgres) journaled(ctx context.Context, before time.Time, max int) ([]string, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	rows, err := p.pool.Query(ctx, p.q(`SELECT line FROM _S_.journal WHERE project = $1 AND written_at <= $2 ORDER BY written_at LIMIT $3`),
		p.project, nanos(before), max)
	if err != nil {
		return nil, p.read("read the journal", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return lines, p.read("read the journal", err)
}
