package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
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
//   - A pause or a budget change, made by any process, is announced in its
//     transaction (pg_notify); every process listens on a connection of its
//     own and closes its leases on the scope as it hears of it, so its next
//     call on the scope is decided by the store. While the listening
//     connection is down no call is admitted; once it listens again, every
//     lease is closed (it may have missed an announcement).
//   - A call is admitted against a lease only if the process has had an
//     answer from the store within the contact window ([FastContactWindow],
//     250 ms by default): journal writes, renewals, applied batches, new
//     leases and the listening connection count; past it, one round trip
//     (shared by the calls that wait for it) comes first.
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
	// listenBudgets hears of the changes other processes make to budgets
	// and pauses (see [Postgres.listenBudgets]).
	listenBudgets(ctx context.Context, ready func(), changed func(Scope)) error
	// reach makes one round trip to the server.
	reach(ctx context.Context) error
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
				start := f.now()
				down = ss.writeJournal(ctx, ids, leases, lines, f.o.sync)
				cancel()
				if down == nil {
					f.touch(start)
				}
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
	start := f.now()
	until := start.Add(f.o.ttl)
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
			if err == nil {
				f.touch(start)
			}
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

// contactPingWait bounds the round trip a call waits for when the process
// has not heard from the store within the contact window: a store that has
// not answered by then is taken as unreachable.
const contactPingWait = time.Second

// touch records an answer of the store to an exchange that started at t.
func (f *Fast) touch(t time.Time) {
	n := t.UnixNano()
	for {
		old := f.contact.Load()
		if n <= old || f.contact.CompareAndSwap(old, n) {
			return
		}
	}
}

// inContactLocked reports whether the store answered an exchange that
// started within the contact window before now.
func (f *Fast) inContactLocked(now time.Time) bool {
	return f.shared == nil || now.UnixNano()-f.contact.Load() <= int64(f.o.contact)
}

// contactPing is a round trip to the store that callers share.
type contactPing struct {
	done chan struct{}
	err  error
}

// reach makes one round trip to the store, or waits for the one under way,
// and returns nil once the store has answered, or a [*WriteError] naming
// it as unreachable.
func (f *Fast) reach(ctx context.Context) error {
	f.mu.Lock()
	p := f.pinging
	if p == nil {
		p = &contactPing{done: make(chan struct{})}
		f.pinging = p
		go func() {
			start := f.now()
			pctx, cancel := context.WithTimeout(context.Background(), contactPingWait)
			err := f.shared.reach(pctx)
			cancel()
			if err == nil {
				f.touch(start)
			}
			f.mu.Lock()
			f.pinging = nil
			f.mu.Unlock()
			p.err = err
			close(p.done)
		}()
	}
	f.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
	if p.err != nil {
		if errors.Is(p.err, ErrClosed) {
			return ErrClosed
		}
		return f.newWriteError(false, p.err)
	}
	return nil
}

// listen keeps a connection listening for the budget changes other
// processes announce, until Close: no call is admitted while it is down.
// first is closed once it has listened or failed once.
func (f *Fast) listen(ctx context.Context, first chan struct{}) {
	defer f.listener.Done()
	once := sync.OnceFunc(func() { close(first) })
	defer once()
	backoff := 10 * time.Millisecond
	for {
		err := f.shared.listenBudgets(ctx, func() {
			f.listening()
			backoff = 10 * time.Millisecond
			once()
		}, f.changed)
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return
		}
		f.mu.Lock()
		was := f.listenErr
		f.listenErr = err
		f.mu.Unlock()
		if was == nil {
			f.onErr(fmt.Errorf("ledger: new calls are refused until this process hears of budget changes again: %w", err))
		}
		once()
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

// listening records that the connection listens (again): every lease is
// closed, as announcements may have been missed while it was down.
func (f *Fast) listening() {
	f.touch(f.now())
	f.mu.Lock()
	f.epoch++
	was := f.listenErr
	f.listenErr = nil
	var backs []func(context.Context)
	for _, l := range f.leases {
		backs = append(backs, f.closeLocked(l))
	}
	f.mu.Unlock()
	for _, b := range backs {
		f.async(b)
	}
	if was != nil {
		f.onErr(fmt.Errorf("ledger: this process hears of budget changes again (it had failed: %v)", was))
	}
}

// changed closes the leases on sc, which another process (or this one)
// paused or gave a new limit: the next call on it is decided by the store.
func (f *Fast) changed(sc Scope) {
	f.touch(f.now())
	f.mu.Lock()
	f.epoch++
	var backs []func(context.Context)
	for _, l := range f.leases {
		if slices.Contains(l.scopes, sc) {
			backs = append(backs, f.closeLocked(l))
		}
	}
	f.mu.Unlock()
	for _, b := range backs {
		f.async(b)
	}
}
