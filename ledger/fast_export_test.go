package ledger

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Abandon leaves f as a killed process would: its journal files stay
// behind, unlocked, and nothing more reaches them.
func (f *Fast) Abandon() {
	f.mu.Lock()
	f.closed = true // no lease window ends any more
	for l := range f.all {
		if l.stop != nil {
			l.stop()
		}
	}
	f.mu.Unlock()
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

// SettleBatch exposes the PostgreSQL store's batch settlement to tests.
func (p *Postgres) SettleBatch(ctx context.Context, sets []Settlement) []error {
	return p.settleBatch(ctx, sets)
}

// JournalFull makes every journal write fail, while set, as on a full
// disk: a few bytes of the record reach the file, then ENOSPC.
var JournalFull atomic.Bool

func init() {
	writeFile = func(f *os.File, b []byte) (int, error) {
		if JournalFull.Load() {
			n, _ := f.Write(b[:min(len(b), 7)])
			return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return f.Write(b)
	}
}

// SetCloseWait sets how long Close waits for pending settlements, until
// the test ends.
func SetCloseWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := closeWait
	closeWait = d
	t.Cleanup(func() { closeWait = old })
}

// WaitGiveBacks waits for the lease give-backs running in the background.
func (f *Fast) WaitGiveBacks() { f.bg.Wait() }
