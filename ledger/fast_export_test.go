package ledger

import "context"

// Abandon leaves f as a killed process would: its journal files stay
// behind, unlocked, and nothing more reaches them.
func (f *Fast) Abandon() {
	f.j.mu.Lock()
	defer f.j.mu.Unlock()
	for _, s := range f.j.segs {
		s.f.Close()
	}
	f.j.segs, f.j.cur = nil, nil
	f.j.err = ErrClosed
}

// SettleBatch exposes the SQLite store's batch settlement to tests.
func (s *SQLite) SettleBatch(ctx context.Context, sets []Settlement) []error {
	return s.settleBatch(ctx, sets)
}
