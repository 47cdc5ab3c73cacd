package ledger

import "context"

// Ping asks the database for an answer over one of the pool's
// connections (opening one when none is idle): the readiness probe's
// question, whether the store can be reached now.
func (p *Postgres) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }
