package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Fast is a [Store] that takes budget admission and spend recording off the
// call path without giving up either guarantee:
//
//   - Budget leases. Far from a limit, a call's estimate is admitted against
//     a lease: a reservation of many estimates' worth that this process took
//     in the store (all or nothing, like any reservation), so no other
//     process can spend it. Admission is then a few nanoseconds in memory.
//     A lease is small next to what the budget has left (an eighth of the
//     headroom at most), admits calls for a short window (2 s by default,
//     so that a pause or a lowered limit set elsewhere is seen within it),
//     and gives back what it did not use. Near a limit (the headroom is less
//     than eight estimates), and whenever a scope is paused, every call is
//     reserved exactly as [Store.Reserve] does, so a call is refused only
//     when it does not fit.
//   - A journal. A settlement is appended to the process's journal (one
//     write(2)) before Settle returns, and applied to the store in the
//     background; reads flush first, so the process reads its own writes. A
//     killed process's journal is replayed by the next one to open the
//     store in the same directory: nothing billed is lost, nothing is
//     counted twice (settlements are idempotent by invocation id).
//
// Durability: a settlement survives the death of the process once Settle
// returns; it survives a power cut once it is in the store (milliseconds
// later), or at once with [FastSync]. Lease holds count as held in
// [Budget], so reports may show more held than the calls in flight.
type Fast struct {
	Store
	j     *journal
	dir   string
	now   func() time.Time
	o     fastOptions
	onErr func(error)

	mu        sync.Mutex
	all       map[*lease]bool          // every lease not yet released
	leases    map[string]*lease        // by scope set: the lease admitting calls
	acquiring map[string]chan struct{} // by scope set: a lease being reserved
	holds     map[string]drawn         // by invocation: what it drew from a lease
	closed    bool
	lastScan  time.Time

	queue   chan job
	hurry   chan struct{} // a Flush waits: apply what is queued now
	workers sync.WaitGroup
	bg      sync.WaitGroup // lease give-backs in flight
	flushMu sync.Mutex
	flushed *sync.Cond
	pending int
}

// lease is a reservation this process admits calls against.
type lease struct {
	id     string
	key    string
	scopes []Scope
	amount provider.Money // reserved in the store
	used   provider.Money // drawn by calls admitted and not released
	until  time.Time      // admits calls until then
	open   bool
	// settled is what the applied settlements drawn on the lease took off
	// its hold in the store.
	settled provider.Money
	// seg holds the lease's journal record, done once it is released.
	seg      *segment
	released bool
	// inflight counts admitted calls not yet settled or released; unapplied
	// their settlements not yet in the store. The lease is released when
	// it is closed and both are zero.
	inflight, unapplied int
}

type drawn struct {
	l      *lease
	amount provider.Money
}

type job struct {
	s   Settlement
	seg *segment
	l   *lease
}

// FastOption configures [NewFast].
type FastOption func(*fastOptions)

type fastOptions struct {
	window  time.Duration
	factor  int64
	sync    bool
	workers int
	onErr   func(error)
	now     func() time.Time
}

// FastLeaseWindow sets how long a lease admits calls (default 2 s).
func FastLeaseWindow(d time.Duration) FastOption { return func(o *fastOptions) { o.window = d } }

// FastLeaseFactor sets a lease's size in estimates of the call that takes
// it (default 64), before the headroom cap of an eighth of what is left.
func FastLeaseFactor(n int) FastOption { return func(o *fastOptions) { o.factor = int64(n) } }

// FastSync makes every journal append wait for the disk (fsync): a
// settlement then survives a power cut as soon as Settle returns, at the
// cost of a disk flush per call.
func FastSync() FastOption { return func(o *fastOptions) { o.sync = true } }

// FastOnError receives the errors of background writes (the settlement
// stays in the journal and is retried; an invalid one is dropped after
// being reported), and a [KeptAside] for every journal record a replay
// could not apply. Default: none are reported.
func FastOnError(f func(error)) FastOption { return func(o *fastOptions) { o.onErr = f } }

// FastClock sets the clock for lease windows (default time.Now).
func FastClock(now func() time.Time) FastOption { return func(o *fastOptions) { o.now = now } }

// ErrNoJournal is returned by [NewFast] where file locks, which journals
// need, are not available; use the store directly there.
var ErrNoJournal = errors.New("ledger: journals need file locks, which this system lacks")

// NewFast wraps st. dir holds the journals (for the embedded store, next to
// its database, so that every process sharing the database shares the
// directory); journals left there by processes that died are replayed
// first. Close closes st too.
func NewFast(ctx context.Context, st Store, dir string, opts ...FastOption) (*Fast, error) {
	if !journalSupported {
		return nil, ErrNoJournal
	}
	o := fastOptions{window: 2 * time.Second, factor: 64, workers: 128, now: time.Now, onErr: func(error) {}}
	for _, f := range opts {
		f(&o)
	}
	if o.factor < 1 || o.window <= 0 {
		return nil, fmt.Errorf("%w: lease factor and window must be positive", ErrInvalid)
	}
	rep, err := ReplayJournals(ctx, st, dir)
	if err != nil {
		return nil, fmt.Errorf("replaying the journals of %s: %w", dir, err)
	}
	for _, k := range rep.KeptAside {
		o.onErr(k)
	}
	j, err := openJournal(dir, o.sync)
	if err != nil {
		return nil, err
	}
	f := &Fast{Store: st, j: j, dir: dir, now: o.now, o: o, onErr: o.onErr,
		all: map[*lease]bool{}, leases: map[string]*lease{}, acquiring: map[string]chan struct{}{}, holds: map[string]drawn{},
		queue: make(chan job, 4096), hurry: make(chan struct{}, 1), lastScan: o.now()}
	f.flushed = sync.NewCond(&f.flushMu)
	if bs, ok := st.(batchSettler); ok {
		f.workers.Add(1)
		go f.workBatches(bs)
	} else {
		for range o.workers {
			f.workers.Add(1)
			go f.work()
		}
	}
	return f, nil
}

func scopeKey(scopes []Scope) string {
	ss := make([]string, len(scopes))
	for i, s := range scopes {
		ss[i] = string(s)
	}
	slices.Sort(ss)
	return strings.Join(slices.Compact(ss), "\x00")
}

func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "lease_" + hex.EncodeToString(b[:])
}

// Reserve admits r against this process's lease on r's scopes, taking a new
// lease when needed, or reserves it exactly near a limit.
func (f *Fast) Reserve(ctx context.Context, r Reservation) error {
	if r.Amount < 0 || r.InvocationID == "" || len(r.Scopes) == 0 {
		return f.Store.Reserve(ctx, r) // the store says what is wrong
	}
	key := scopeKey(r.Scopes)
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return ErrClosed
		}
		if _, dup := f.holds[r.InvocationID]; dup {
			f.mu.Unlock()
			return fmt.Errorf("%w: %s", ErrDuplicateInvocation, r.InvocationID)
		}
		now := f.now()
		var giveBack func(context.Context)
		if l := f.leases[key]; l != nil {
			if l.open && now.Before(l.until) && l.amount-l.used >= r.Amount {
				l.used += r.Amount
				l.inflight++
				f.holds[r.InvocationID] = drawn{l, r.Amount}
				f.mu.Unlock()
				return nil
			}
			// The lease is spent or stale: what it will not use goes back
			// before the budget is looked at again.
			giveBack = f.closeLocked(l)
		}
		if wait, busy := f.acquiring[key]; busy {
			f.mu.Unlock()
			if giveBack != nil {
				giveBack(ctx)
			}
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
			}
		}
		done := make(chan struct{})
		f.acquiring[key] = done
		f.mu.Unlock()
		if giveBack != nil {
			giveBack(ctx)
		}
		leased, err := f.acquire(ctx, key, r)
		f.mu.Lock()
		delete(f.acquiring, key)
		close(done)
		f.mu.Unlock()
		if err != nil || !leased {
			return err
		}
	}
}

// acquire takes a lease for r's scopes, or reserves r exactly when the
// budget is too close to a limit (or paused) for a lease. It reports
// whether a lease was installed (r is then admitted by the caller's retry).
func (f *Fast) acquire(ctx context.Context, key string, r Reservation) (bool, error) {
	f.scanOrphans(ctx)
	size := r.Amount * provider.Money(f.o.factor)
	if size == 0 {
		size = provider.Dollar / 1000 // room for free calls' zero estimates
	}
	for _, sc := range r.Scopes {
		b, err := f.Store.Budget(ctx, sc)
		if err != nil {
			return false, err
		}
		if b.Paused {
			size = 0
			break
		}
		if rem, limited := b.Remaining(); limited {
			size = min(size, rem/8)
		}
	}
	if size < r.Amount || size == 0 {
		return false, f.exact(ctx, r)
	}
	id := newLeaseID()
	seg, err := f.j.append(record{Op: "lease", Lease: id})
	if err != nil {
		return false, err
	}
	expires := r.ExpiresAt.Add(f.o.window)
	if err := f.Store.Reserve(ctx, Reservation{InvocationID: id, Amount: size, Scopes: r.Scopes, ExpiresAt: expires}); err != nil {
		f.j.done(seg)
		if errors.Is(err, ErrOverBudget) || errors.Is(err, ErrPaused) {
			// Someone took the room meanwhile: this call is decided exactly.
			return false, f.exact(ctx, r)
		}
		return false, err
	}
	l := &lease{id: id, key: key, scopes: slices.Clone(r.Scopes), amount: size, until: f.now().Add(f.o.window), open: true, seg: seg}
	f.mu.Lock()
	f.leases[key] = l
	f.all[l] = true
	f.mu.Unlock()
	return true, nil
}

// exact reserves r in the store itself, once the store has every pending
// settlement: near a limit, a call is decided on actual costs, not on the
// estimates still held for calls already settled.
func (f *Fast) exact(ctx context.Context, r Reservation) error {
	if err := f.catchUp(ctx); err != nil {
		return err
	}
	if err := f.Store.Reserve(ctx, r); err != nil {
		return err
	}
	f.mu.Lock()
	f.holds[r.InvocationID] = drawn{}
	f.mu.Unlock()
	return nil
}

// closeLocked stops l admitting calls and returns what gives back its
// unused part (nil if nothing is to be done); the caller runs it after
// unlocking, or hands it to [Fast.async].
func (f *Fast) closeLocked(l *lease) func(context.Context) {
	if !l.open {
		return nil
	}
	l.open = false
	if f.leases[l.key] == l {
		delete(f.leases, l.key)
	}
	return f.retireLocked(l)
}

// retireLocked returns what gives back a closed lease's unused part, or
// releases it when nothing is left drawn on it.
func (f *Fast) retireLocked(l *lease) func(context.Context) {
	if l.open || l.released {
		return nil
	}
	if l.inflight == 0 && l.unapplied == 0 {
		l.released = true
		delete(f.all, l)
		return func(ctx context.Context) { f.giveBack(ctx, l) }
	}
	keep := l.used - l.settled
	return func(ctx context.Context) {
		if err := f.Store.Shrink(ctx, l.id, keep); err != nil {
			f.onErr(fmt.Errorf("ledger: giving back the unused part of budget lease %s: %w (it is given back when its calls end)", l.id, err))
		}
	}
}

// retireIdleLocked releases a closed lease, in the background, once
// nothing is drawn on it.
func (f *Fast) retireIdleLocked(l *lease) {
	if !l.open && l.inflight == 0 && l.unapplied == 0 {
		f.async(f.retireLocked(l))
	}
}

// async runs a give-back in the background; Close waits for it.
func (f *Fast) async(fn func(context.Context)) {
	if fn == nil {
		return
	}
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		fn(context.Background())
	}()
}

// giveBack releases a lease in the store; its journal record is then done
// (until then, a replay would release it).
func (f *Fast) giveBack(ctx context.Context, l *lease) {
	if err := f.Store.Release(ctx, l.id); err != nil {
		f.onErr(fmt.Errorf("ledger: releasing budget lease %s: %w (the journal keeps it for the next process; it also expires on its own)", l.id, err))
		return
	}
	f.j.done(l.seg)
}

// Settle journals s and applies it in the background.
func (f *Fast) Settle(ctx context.Context, s Settlement) error {
	f.mu.Lock()
	d, ok := f.holds[s.InvocationID]
	delete(f.holds, s.InvocationID)
	switch {
	case ok && d.l != nil && s.Cost == 0:
		// Nothing billed: the draw goes back to the lease, as on Release;
		// the settlement only records the rows.
		d.l.used -= d.amount
		d.l.inflight--
		f.retireIdleLocked(d.l)
		d.l = nil
	case ok && d.l != nil:
		s.Lease, s.Reserved = d.l.id, d.amount
		d.l.inflight--
		d.l.unapplied++
	}
	f.mu.Unlock()
	seg, err := f.j.append(record{Op: "settle", Settle: &s})
	if err != nil {
		// The journal cannot take it: write it through, or say so.
		if d.l != nil {
			f.mu.Lock()
			d.l.unapplied--
			f.mu.Unlock()
		}
		return f.Store.Settle(ctx, s)
	}
	f.flushMu.Lock()
	f.pending++
	f.flushMu.Unlock()
	f.queue <- job{s: s, seg: seg, l: d.l}
	return nil
}

// batchSettler is implemented by stores that apply many settlements in one
// transaction for much less than one at a time.
type batchSettler interface {
	settleBatch(ctx context.Context, sets []Settlement) []error
}

// maxApplyBatch bounds the settlements applied in one transaction, and
// applyLinger how long the first of them waits for others to join it (a
// transaction's cost is mostly per transaction, not per settlement; the
// settlements are already safe in the journal meanwhile).
const (
	maxApplyBatch = 256
	applyLinger   = 100 * time.Millisecond
)

// workBatches applies journaled settlements to a store that takes them in
// batches: what arrives within applyLinger of the first, up to
// maxApplyBatch, per transaction; a Flush cuts the wait short.
func (f *Fast) workBatches(bs batchSettler) {
	defer f.workers.Done()
	batch := make([]job, 0, maxApplyBatch)
	linger := time.NewTimer(applyLinger)
	for jb := range f.queue {
		batch = append(batch[:0], jb)
		linger.Reset(applyLinger)
	fill:
		for len(batch) < maxApplyBatch {
			select {
			case jb, ok := <-f.queue:
				if !ok {
					break fill
				}
				batch = append(batch, jb)
			case <-linger.C:
				break fill
			case <-f.hurry:
				break fill
			}
		}
		f.applyBatch(bs, batch)
	}
}

func (f *Fast) applyBatch(bs batchSettler, batch []job) {
	sets := make([]Settlement, len(batch))
	for i, jb := range batch {
		sets[i] = jb.s
	}
	backoff := 10 * time.Millisecond
	for {
		errs := bs.settleBatch(context.Background(), sets)
		var retry error
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrAlreadySettled) && !errors.Is(err, ErrInvalid) {
				retry = err
				break
			}
		}
		if retry == nil {
			for i, jb := range batch {
				if errors.Is(errs[i], ErrInvalid) {
					f.onErr(fmt.Errorf("ledger: settlement of %s dropped: %w", jb.s.InvocationID, errs[i]))
				}
				f.applied(jb)
			}
			return
		}
		if errors.Is(retry, ErrClosed) {
			// They stay in the journal for the next process.
			f.onErr(fmt.Errorf("ledger: %d settlements not applied: %w", len(batch), retry))
			f.flushMu.Lock()
			f.pending -= len(batch)
			f.flushed.Broadcast()
			f.flushMu.Unlock()
			return
		}
		f.onErr(fmt.Errorf("ledger: %d settlements wait in the journal: %w", len(batch), retry))
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// work applies journaled settlements to the store.
func (f *Fast) work() {
	defer f.workers.Done()
	for jb := range f.queue {
		f.apply(jb)
	}
}

func (f *Fast) apply(jb job) {
	backoff := 10 * time.Millisecond
	for {
		err := f.Store.Settle(context.Background(), jb.s)
		if err == nil || errors.Is(err, ErrAlreadySettled) {
			break
		}
		if errors.Is(err, ErrClosed) {
			// It stays in the journal for the next process.
			f.onErr(fmt.Errorf("ledger: settlement of %s not applied: %w", jb.s.InvocationID, err))
			f.flushMu.Lock()
			f.pending--
			f.flushed.Broadcast()
			f.flushMu.Unlock()
			return
		}
		if errors.Is(err, ErrInvalid) {
			f.onErr(fmt.Errorf("ledger: settlement of %s dropped: %w", jb.s.InvocationID, err))
			break
		}
		f.onErr(fmt.Errorf("ledger: settlement of %s waits in the journal: %w", jb.s.InvocationID, err))
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
	f.applied(jb)
}

// applied records that jb's settlement is in the store.
func (f *Fast) applied(jb job) {
	f.j.done(jb.seg)
	if jb.l != nil {
		f.mu.Lock()
		jb.l.unapplied--
		jb.l.settled += jb.s.Reserved
		f.retireIdleLocked(jb.l)
		f.mu.Unlock()
	}
	f.flushMu.Lock()
	f.pending--
	if f.pending == 0 {
		f.flushed.Broadcast()
	}
	f.flushMu.Unlock()
}

// readWait bounds how long a read or an exact reservation waits for
// pending settlements: a store that cannot take them is reported as
// unavailable rather than waited for.
const readWait = 5 * time.Second

// catchUp waits, at most readWait, until pending settlements are in the
// store.
func (f *Fast) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	return f.Flush(ctx)
}

// Flush waits until every settlement made so far is in the store.
func (f *Fast) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		f.flushMu.Lock()
		f.flushed.Broadcast()
		f.flushMu.Unlock()
	})
	defer stop()
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	for f.pending > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %d settlements not yet applied: %v", ErrUnavailable, f.pending, ctx.Err())
		}
		select {
		case f.hurry <- struct{}{}:
		default:
		}
		f.flushed.Wait()
	}
	return nil
}

// Drain applies every pending settlement and gives back every lease; the
// next call takes a new one. Call it when no call is in flight (before a
// report that must show nothing held, or at shutdown).
func (f *Fast) Drain(ctx context.Context) error {
	var backs []func(context.Context)
	f.mu.Lock()
	for _, l := range f.leases {
		backs = append(backs, f.closeLocked(l))
	}
	f.mu.Unlock()
	for _, b := range backs {
		if b != nil {
			b(ctx)
		}
	}
	err := f.Flush(ctx)
	f.bg.Wait()
	return err
}

// Release gives a call's draw back to its lease (no store write), or
// releases its exact reservation.
func (f *Fast) Release(ctx context.Context, invocationID string) error {
	f.mu.Lock()
	d, ok := f.holds[invocationID]
	delete(f.holds, invocationID)
	if ok && d.l != nil {
		d.l.used -= d.amount
		d.l.inflight--
		f.retireIdleLocked(d.l)
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	return f.Store.Release(ctx, invocationID)
}

// closeScope stops every lease on sc from admitting calls and gives back
// what they will not use.
func (f *Fast) closeScope(ctx context.Context, sc Scope) {
	var backs []func(context.Context)
	f.mu.Lock()
	for _, l := range f.leases {
		if slices.Contains(l.scopes, sc) {
			backs = append(backs, f.closeLocked(l))
		}
	}
	f.mu.Unlock()
	for _, b := range backs {
		if b != nil {
			b(ctx)
		}
	}
}

// scanOrphans replays, at most every few seconds, the journals of
// processes that died while sharing this directory.
func (f *Fast) scanOrphans(ctx context.Context) {
	f.mu.Lock()
	now := f.now()
	if now.Sub(f.lastScan) < 5*time.Second {
		f.mu.Unlock()
		return
	}
	f.lastScan = now
	f.mu.Unlock()
	rep, err := ReplayJournals(ctx, f.Store, f.dir)
	for _, k := range rep.KeptAside {
		f.onErr(k)
	}
	if err != nil {
		f.onErr(fmt.Errorf("ledger: replaying journals: %w", err))
	}
}

// The methods below change what leases may admit, or read what the store
// holds: they close leases or apply pending settlements first.

// SetBudget implements [Store]; leases on the scope stop admitting calls.
func (f *Fast) SetBudget(ctx context.Context, sc Scope, limit provider.Money) error {
	f.closeScope(ctx, sc)
	return f.Store.SetBudget(ctx, sc, limit)
}

// SetDefaultBudget implements [Store]; leases on the scope stop admitting
// calls.
func (f *Fast) SetDefaultBudget(ctx context.Context, sc Scope, limit provider.Money) (bool, error) {
	f.closeScope(ctx, sc)
	return f.Store.SetDefaultBudget(ctx, sc, limit)
}

// Pause implements [Store]; leases on the scope stop admitting calls.
func (f *Fast) Pause(ctx context.Context, sc Scope, reason string) error {
	f.closeScope(ctx, sc)
	return f.Store.Pause(ctx, sc, reason)
}

// PauseForBudget implements [Store]; leases on the scope stop admitting
// calls.
func (f *Fast) PauseForBudget(ctx context.Context, sc Scope, reason string) error {
	f.closeScope(ctx, sc)
	return f.Store.PauseForBudget(ctx, sc, reason)
}

// Budget implements [Store], after applying pending settlements.
func (f *Fast) Budget(ctx context.Context, sc Scope) (Budget, error) {
	if err := f.catchUp(ctx); err != nil {
		return Budget{}, err
	}
	return f.Store.Budget(ctx, sc)
}

// Budgets implements [Store], after applying pending settlements.
func (f *Fast) Budgets(ctx context.Context) ([]Budget, error) {
	if err := f.catchUp(ctx); err != nil {
		return nil, err
	}
	return f.Store.Budgets(ctx)
}

// Attempts implements [Store], after applying pending settlements.
func (f *Fast) Attempts(ctx context.Context, fl Filter) ([]AttemptRow, error) {
	if err := f.catchUp(ctx); err != nil {
		return nil, err
	}
	return f.Store.Attempts(ctx, fl)
}

// Spend implements [Store], after applying pending settlements.
func (f *Fast) Spend(ctx context.Context, fl Filter) (SpendReport, error) {
	if err := f.catchUp(ctx); err != nil {
		return SpendReport{}, err
	}
	return f.Store.Spend(ctx, fl)
}

// Close applies what is pending (for up to 10 s), gives back every lease,
// closes the journal (deleting it when empty) and the store. Settlements
// that could not be applied stay in the journal for the next process.
func (f *Fast) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.leases = map[string]*lease{}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ferr := f.Flush(ctx)
	close(f.queue)
	f.workers.Wait()
	f.bg.Wait()
	// Every lease still held is released: calls still drawing on one
	// belong to a process that is going away.
	f.mu.Lock()
	left := make([]*lease, 0, len(f.all))
	for l := range f.all {
		l.open, l.released = false, true
		left = append(left, l)
	}
	f.all = map[*lease]bool{}
	f.mu.Unlock()
	for _, l := range left {
		f.giveBack(ctx, l)
	}
	jerr := f.j.close()
	return errors.Join(ferr, jerr, f.Store.Close())
}
