package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// With a store that processes on several machines share (PostgreSQL), the
// fast path keeps no money state only on the process's disk:
//
//   - The journal is a table of the store. A settlement is written there
//     before Settle returns, in one statement; the settlements that arrive
//     while a write runs go together in the next one, so a busy process
//     makes one round trip for many calls. They are applied to the budgets
//     in the background, in batches, as from a journal file, each deleted
//     from the table in the transaction that applies it.
//   - Holds (budget leases, and calls reserved exactly near a limit) are
//     reserved on a short expiry ([FastHoldTTL], 10 s by default) that the
//     process renews every fifth of it while it holds them. Every
//     reservation, and every budget read, ignores and drops expired holds,
//     except those a settlement still in the journal table draws on: those
//     stay counted until it is applied.
//   - Every process, every fifth of the TTL, applies the settlements the
//     journal table has held for longer than the TTL (those of a process
//     that died). The room held by a process that died therefore returns
//     to the budget, with what it spent charged, at most a TTL and a fifth
//     after its last renewal, while another process runs.
//   - When the store cannot be reached, a settlement is written to the local
//     journal file as a last resort and retried in the background until the
//     store takes it; meanwhile, and while the holds cannot be renewed, no
//     call is admitted. Calls are admitted again by themselves once the
//     store takes every settlement and a renewal.

// sharedStore is a store shared by processes on several machines.
type sharedStore interface {
	batchSettler
	// renewHolds moves the expiry of the reservations ids (and their
	// holds) to until[i], in nanoseconds, and returns the ids it did not
	// renew: no longer held, or already expired.
	renewHolds(ctx context.Context, ids []string, until []int64) (gone []string, err error)
	// writeJournal writes settlements to the journal table: ids, the
	// leases they draw on ("" for none) and their journal lines.
	writeJournal(ctx context.Context, ids, leases, lines []string, durable bool) error
	// journaled returns the journal lines written at or before before.
	journaled(ctx context.Context, before time.Time, max int) ([]string, error)
	// Where names the server, for messages (never credentials).
	Where() string
}

// commitWait bounds one attempt to write or apply a batch of settlements:
// a store that does not answer by then is taken as unreachable.
const commitWait = 5 * time.Second

// commit hands jb to the journal writers and waits for the outcome: nil
// once it is in the journal table (or, the store being unreachable, kept
// and retried), or why it is invalid.
func (f *Fast) commit(jb job) error {
	if _, err := checkSettlement(&jb.s, f.now()); err != nil {
		f.applied(jb)
		return err
	}
	jb.done = make(chan error, 1)
	f.qmu.RLock()
	if f.qclosed {
		f.qmu.RUnlock()
		// Close has stopped the writers: the store is all that is left.
		f.applied(jb)
		return f.Store.Settle(context.Background(), jb.s)
	}
	f.jq <- jb
	f.qmu.RUnlock()
	return <-jb.done
}

// workJournal writes settlements to the journal table as they come: one,
// and every other waiting when it is taken, up to maxApplyBatch, per
// statement; then hands them to the appliers.
func (f *Fast) workJournal(ss sharedStore) {
	defer f.jwriters.Done()
	batch := make([]job, 0, maxApplyBatch)
	var ids, leases, lines []string
	for jb := range f.jq {
		batch = append(batch[:0], jb)
	fill:
		for len(batch) < maxApplyBatch {
			select {
			case jb, ok := <-f.jq:
				if !ok {
					break fill
				}
				batch = append(batch, jb)
			default:
				break fill
			}
		}
		f.mu.Lock()
		down := f.storeErr
		f.mu.Unlock()
		if down == nil {
			ids, leases, lines = ids[:0], leases[:0], lines[:0]
			for _, jb := range batch {
				ids = append(ids, jb.s.InvocationID)
				leases = append(leases, jb.s.Lease)
				lines = append(lines, string(appendRecord(nil, record{Op: "settle", Settle: &jb.s})))
			}
			for try := 0; try < 2; try++ {
				// A second try, on a new connection, after a connection
				// that died while idle (the server restarted, the network
				// was cut and is back).
				ctx, cancel := context.WithTimeout(context.Background(), commitWait)
				down = ss.writeJournal(ctx, ids, leases, lines, f.o.sync)
				cancel()
				if down == nil || !errors.Is(down, ErrUnavailable) {
					break
				}
			}
			if down == nil {
				for _, jb := range batch {
					jb.done <- nil
					jb.done, jb.tabled = nil, true
					f.queue <- jb // closed only once the writers are done
				}
				continue
			}
		}
		f.keep(ss, slices.Clone(batch), down)
	}
}

// retryable returns the first error of errs that is worth retrying (the
// store could not take the settlement), or nil.
func retryable(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, ErrAlreadySettled) && !errors.Is(err, ErrInvalid) {
			return err
		}
	}
	return nil
}

// keep retries settlements the store refused until it takes them: no call
// is admitted meanwhile. Each is also written to the local journal, as a
// last resort should this process stop before the store comes back (the
// next process started there applies it); their calls return at once.
func (f *Fast) keep(ss sharedStore, batch []job, err error) {
	f.mu.Lock()
	first := f.storeErr == nil && f.unsettled == 0
	f.storeErr = err
	f.unsettled += len(batch)
	f.mu.Unlock()
	if first {
		f.onErr(fmt.Errorf("ledger: new calls are refused until the store takes the settlements of the calls already answered, retried meanwhile: %w", err))
	}
	unjournaled := 0
	var jerr error
	for i := range batch {
		seg, err := f.j.append(record{Op: "settle", Settle: &batch[i].s})
		if err != nil {
			unjournaled++
			jerr = err
		}
		batch[i].seg = seg
		batch[i].done <- nil
		batch[i].done = nil
	}
	if unjournaled > 0 {
		f.mu.Lock()
		f.kept += unjournaled
		f.mu.Unlock()
		f.onErr(fmt.Errorf("ledger: %d settlements are kept in memory and retried: the store cannot take them (%v), nor the journal (%v)", unjournaled, err, jerr))
	}
	f.retrying.Add(1)
	go func() {
		defer f.retrying.Done()
		f.applyBatch(ss, batch)
		f.mu.Lock()
		f.unsettled -= len(batch)
		f.kept -= unjournaled
		f.mu.Unlock()
		f.storeOK()
	}()
}

// renewEvery is how often the holds are renewed: a fifth of their TTL, so
// that a renewal can fail a few times before they expire.
func (f *Fast) renewEvery() time.Duration { return f.o.ttl / 5 }

// renew moves the expiry of every hold this process has in the store to a
// TTL from now (an exact reservation's never past its caller's), and arms
// the next renewal.
func (f *Fast) renew() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	until := f.now().Add(f.o.ttl)
	var ids []string
	var exp []int64
	for l := range f.all {
		if !l.released {
			ids = append(ids, l.id)
			exp = append(exp, nanos(until))
		}
	}
	for id, callers := range f.exactHeld {
		ids = append(ids, id)
		exp = append(exp, nanos(minTime(until, callers)))
	}
	f.mu.Unlock()
	if len(ids) > 0 {
		var gone []string
		var err error
		for try := 0; try < 2; try++ { // a second try after a connection that died while idle
			ctx, cancel := context.WithTimeout(context.Background(), f.renewEvery())
			gone, err = f.shared.renewHolds(ctx, ids, exp)
			cancel()
			if err == nil || !errors.Is(err, ErrUnavailable) {
				break
			}
		}
		f.renewed(gone, err)
	} else {
		f.renewed(nil, nil)
	}
	f.sweep()
	f.mu.Lock()
	if !f.closed {
		f.renewStop = f.o.after(f.renewEvery(), f.renew)
	}
	f.mu.Unlock()
}

// renewed records the outcome of a renewal. While renewals fail, no call is
// admitted: the holds may expire in the store. A lease the store no longer
// holds (it expired before a renewal reached the store) admits no more
// calls.
func (f *Fast) renewed(gone []string, err error) {
	if errors.Is(err, ErrClosed) {
		return // the process is stopping
	}
	f.mu.Lock()
	if err != nil {
		first := f.renewErr == nil
		f.renewErr = err
		f.mu.Unlock()
		if first {
			f.onErr(fmt.Errorf("ledger: new calls are refused until this process's budget holds can be renewed: %w", err))
		}
		return
	}
	was := f.renewErr
	f.renewErr = nil
	var backs []func(context.Context)
	var expired []string
	for _, id := range gone {
		delete(f.exactHeld, id)
		for l := range f.all {
			if l.id == id && l.open && !l.released {
				expired = append(expired, id)
				backs = append(backs, f.closeLocked(l))
			}
		}
	}
	f.mu.Unlock()
	for _, b := range backs {
		f.async(b)
	}
	if len(expired) > 0 {
		f.onErr(fmt.Errorf("ledger: budget leases %v expired in the store before they could be renewed: they admit no more calls", expired))
	}
	if was != nil {
		f.onErr(fmt.Errorf("ledger: this process's budget holds are renewed again (it had failed: %v)", was))
	}
}

// sweep applies the settlements the journal table has held for longer than
// the holds' TTL: those of processes that died (a live process applies its
// own within a fraction of a second).
func (f *Fast) sweep() {
	before := f.now().Add(-f.o.ttl)
	for range 16 {
		ctx, cancel := context.WithTimeout(context.Background(), commitWait)
		n, _, err := sweepJournal(ctx, f.shared, before)
		cancel()
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				f.onErr(fmt.Errorf("ledger: applying the settlements other processes left in the journal table: %w", err))
			}
			return
		}
		if n < maxApplyBatch {
			return
		}
	}
}

// sweepJournal applies up to maxApplyBatch settlements of the journal
// table written at or before before; it returns how many it read and how
// many it applied (the others were already).
func sweepJournal(ctx context.Context, ss sharedStore, before time.Time) (read, applied int, err error) {
	lines, err := ss.journaled(ctx, before, maxApplyBatch)
	if err != nil || len(lines) == 0 {
		return 0, 0, err
	}
	sets := make([]Settlement, 0, len(lines))
	for _, line := range lines {
		var r jrecord
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Settle == nil {
			return 0, 0, fmt.Errorf("%w: a line of the journal table cannot be read (%v): %.200s", ErrInvalid, err, line)
		}
		sets = append(sets, r.Settle.settlement())
	}
	errs := ss.settleBatch(ctx, sets)
	if err := retryable(errs); err != nil {
		return 0, 0, err
	}
	for _, err := range errs {
		if err == nil {
			applied++
		}
	}
	return len(lines), applied, nil
}
