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
	"sync/atomic"
	"syscall"
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
//     so that a pause or a lowered limit set elsewhere is seen within it;
//     on PostgreSQL every process hears of one at once, see
//     fast_shared.go), and gives back what it did not use. A scope set whose leases run out
//     within a quarter of their window gets leases twice as large, up to
//     16 times the first, and half as large again when one outlives its
//     window: a busy process takes a lease in the store a few times per
//     window, whatever its rate of calls. Near a limit (the headroom is less
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
// On a store that processes on several machines share (PostgreSQL), the
// journal is a table of the store instead, and holds expire in seconds
// unless their live process renews them (see fast_shared.go and
// [FastHoldTTL]): nothing the money depends on stays on a process's disk.
//
// Durability: a settlement survives the death of the process once Settle
// returns; it survives a power cut once it is in the store (milliseconds
// later), or at once with [FastSync]. Lease holds count as held in
// [Budget], so reports may show more held than the calls in flight; a
// lease's unused part goes back when its window ends, whether or not
// another call comes.
//
// Failing closed: while the journal or the store cannot be written (a full
// disk, a store that refuses writes), Reserve refuses every call with a
// [*WriteError] (it wraps [ErrUnavailable]); on a shared store, also while
// the store cannot be reached (see [FastContactWindow]). A settlement that neither the
// journal nor the store takes is kept in memory and retried; one in the
// journal stays there until the store has it. Calls are admitted again by
// themselves once the journal takes a write and the store applies one.
type Fast struct {
	Store
	j     *journal
	dir   string
	now   func() time.Time
	o     fastOptions
	onErr func(error)

	mu         sync.Mutex
	all        map[*lease]bool          // every lease not yet released
	unreleased []*lease                 // leases whose release the store refused: Close tries them again
	leases     map[string]*lease        // by scope set: the lease admitting calls
	factors    map[string]int64         // by scope set: the next lease's size in estimates, when not the first's
	acquiring  map[string]chan struct{} // by scope set: a lease being reserved
	holds      map[string]drawn         // by invocation: what it drew from a lease
	closed     bool
	lastScan   time.Time
	// Health: while journalErr or storeErr is set, no call is admitted.
	journalErr error // the last failed journal write, until one succeeds
	storeErr   error // the last failed apply, until one succeeds
	// leaseRefused: the store refused a lease's write; said once in the
	// log, until a lease is written again.
	leaseRefused bool
	held         []job // settlements neither in the journal nor in the store
	kept         int   // how many: held, and those being retried

	// With a shared store (PostgreSQL): settlements are committed before
	// Settle returns, and this process's holds are kept on short expiries
	// that it renews.
	shared    sharedStore
	exactHeld map[string]time.Time // exact reservations held: their callers' expiry
	renewErr  error                // the last failed renewal, until one succeeds
	renewStop func() bool
	// contact is when (UnixNano, on the clock of FastClock) the latest
	// exchange the store answered started; pinging is the round trip under
	// way when a call found it older than the contact window.
	contact atomic.Int64
	pinging *contactPing
	// listenErr: the connection that hears of budget changes is down, until
	// it listens again. epoch counts the changes heard (and the times it
	// listened again): a lease reserved across one is not used.
	listenErr  error
	epoch      uint64
	stopListen context.CancelFunc
	listener   sync.WaitGroup
	// unsettled counts the settlements the shared store refused, retried
	// in the background: no call is admitted while it is not zero.
	unsettled int
	retrying  sync.WaitGroup
	jq        chan job // settlements to write to the journal table
	jwriters  sync.WaitGroup

	kick    chan struct{} // wakes the retrier of held settlements
	quit    chan struct{} // closed by Close: retries stop
	retrier sync.WaitGroup
	qmu     sync.RWMutex // guards sends on queue against its closing
	qclosed bool

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
	taken  time.Time      // when it was reserved
	factor int64          // its size in estimates of the call that took it
	open   bool
	stop   func() bool // stops the timer that ends the window
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
	// done, with a shared store, receives the outcome of writing the
	// settlement to the journal table: the caller of Settle waits for it.
	done chan error
	// tabled: the settlement is in the journal table of a shared store.
	tabled bool
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
	after   func(time.Duration, func()) func() bool
	price   RowPricer
	ttl     time.Duration
	contact time.Duration
	commits int
}

// FastPrices checks the settlements of the journals it replays against
// price (see [ReplayPrices]).
func FastPrices(price RowPricer) FastOption { return func(o *fastOptions) { o.price = price } }

// replayOptions are the options of the journals' replays.
func (o *fastOptions) replayOptions() []ReplayOption {
	if o.price == nil {
		return nil
	}
	return []ReplayOption{ReplayPrices(o.price)}
}

// FastLeaseWindow sets how long a lease admits calls (default 2 s).
func FastLeaseWindow(d time.Duration) FastOption { return func(o *fastOptions) { o.window = d } }

// FastLeaseFactor sets a lease's size in estimates of the call that takes
// it (default 64), before the headroom cap of an eighth of what is left.
// Leases of a scope set that run out within a quarter of their window grow
// from there, doubling each time, up to 16 times that size.
func FastLeaseFactor(n int) FastOption { return func(o *fastOptions) { o.factor = int64(n) } }

// FastHoldTTL sets, with a shared store (PostgreSQL), how long a hold of
// this process (a budget lease, or a call reserved exactly) lasts in the
// store unless renewed (default 10 s). The process renews its holds every
// fifth of it, so the room held by a process that died returns to the
// budget at most this long after its death.
func FastHoldTTL(d time.Duration) FastOption { return func(o *fastOptions) { o.ttl = d } }

// FastContactWindow sets, with a shared store (PostgreSQL), how recent the
// store's last answer to this process must be for a call to be admitted
// against a lease in memory (default 250 ms). Any exchange counts (a
// settlement written to the journal table, a renewal, a batch applied, a
// lease taken, the connection that hears of budget changes); past it, the
// call waits for one round trip to the store (shared by the calls waiting
// then, at most a second) and is refused if the store does not answer. A
// busy process's journal writes keep it fresh.
func FastContactWindow(d time.Duration) FastOption { return func(o *fastOptions) { o.contact = d } }

// DefaultContactWindow is the default of [FastContactWindow].
const DefaultContactWindow = 250 * time.Millisecond

// DefaultHoldTTL is the default of [FastHoldTTL].
const DefaultHoldTTL = 10 * time.Second

// FastSync makes every journal append wait for the disk (fsync): a
// settlement then survives a power cut as soon as Settle returns, at the
// cost of a disk flush per call.
func FastSync() FastOption { return func(o *fastOptions) { o.sync = true } }

// FastOnError receives the errors of background writes (the settlement
// stays in the journal, or in memory, and is retried; an invalid one is
// dropped after being reported), says when calls start being refused
// because the journal or the store cannot be written and when those take
// writes again, and gives a [KeptAside] for every journal record a replay
// could not apply. Default: none are reported.
func FastOnError(f func(error)) FastOption { return func(o *fastOptions) { o.onErr = f } }

// FastClock sets the clock for lease windows (default time.Now).
func FastClock(now func() time.Time) FastOption { return func(o *fastOptions) { o.now = now } }

// FastAfterFunc sets the timer that ends lease windows (default
// time.AfterFunc): after(d, fn) runs fn once d has passed on the clock of
// [FastClock] and returns what stops it.
func FastAfterFunc(after func(d time.Duration, fn func()) (stop func() bool)) FastOption {
	return func(o *fastOptions) { o.after = after }
}

func afterFunc(d time.Duration, fn func()) func() bool { return time.AfterFunc(d, fn).Stop }

// maxLeaseGrowth bounds how many times the size of [FastLeaseFactor] a
// lease grows to while leases run out fast.
const maxLeaseGrowth = 16

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
	o := fastOptions{window: 2 * time.Second, factor: 64, workers: 128, now: time.Now, after: afterFunc, onErr: func(error) {},
		ttl: DefaultHoldTTL, contact: DefaultContactWindow, commits: 1}
	for _, f := range opts {
		f(&o)
	}
	if o.factor < 1 || o.window <= 0 || o.ttl <= 0 || o.contact <= 0 {
		return nil, fmt.Errorf("%w: lease factor, window, hold TTL and contact window must be positive", ErrInvalid)
	}
	rep, err := ReplayJournals(ctx, st, dir, o.replayOptions()...)
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
		all: map[*lease]bool{}, leases: map[string]*lease{}, factors: map[string]int64{}, acquiring: map[string]chan struct{}{}, holds: map[string]drawn{},
		queue: make(chan job, 4096), hurry: make(chan struct{}, 1), lastScan: o.now(),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), exactHeld: map[string]time.Time{}}
	f.flushed = sync.NewCond(&f.flushMu)
	f.retrier.Add(1)
	go f.retry()
	if ss, ok := st.(sharedStore); ok {
		f.shared = ss
		f.jq = make(chan job, 4096)
		for range o.commits {
			f.jwriters.Add(1)
			go f.workJournal(ss)
		}
		f.workers.Add(1)
		go f.workBatches(ss)
		f.mu.Lock()
		f.renewStop = f.o.after(f.renewEvery(), f.renew)
		f.mu.Unlock()
		// Calls are admitted once the process listens for budget changes
		// (or refused, if it cannot, until it does).
		lctx, stop := context.WithCancel(context.Background())
		f.stopListen = stop
		first := make(chan struct{})
		f.listener.Add(1)
		go f.listen(lctx, first)
		select {
		case <-first:
		case <-ctx.Done():
		}
	} else if bs, ok := st.(batchSettler); ok {
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
	reached := false
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return ErrClosed
		}
		if f.journalErr != nil || f.storeErr != nil || f.renewErr != nil || f.listenErr != nil || f.unsettled > 0 {
			f.mu.Unlock()
			return f.writeError()
		}
		if _, dup := f.holds[r.InvocationID]; dup {
			f.mu.Unlock()
			return fmt.Errorf("%w: %s", ErrDuplicateInvocation, r.InvocationID)
		}
		now := f.now()
		var giveBack func(context.Context)
		if l := f.leases[key]; l != nil {
			if l.open && now.Before(l.until) && l.amount-l.used >= r.Amount {
				if !reached && !f.inContactLocked(now) {
					// The store may be out of reach: it answers first.
					f.mu.Unlock()
					if err := f.reach(ctx); err != nil {
						return err
					}
					reached = true
					continue
				}
				l.used += r.Amount
				l.inflight++
				f.holds[r.InvocationID] = drawn{l, r.Amount}
				f.mu.Unlock()
				return nil
			}
			// The lease is spent or stale: what it will not use goes back
			// before the budget is looked at again.
			f.resizeLocked(l, now)
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
	f.mu.Lock()
	epoch := f.epoch
	factor := f.o.factor
	if g := f.factors[key]; g > 0 {
		factor = g
	}
	f.mu.Unlock()
	size := r.Amount * provider.Money(factor)
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
	var seg *segment
	expires := r.ExpiresAt.Add(f.o.window)
	if f.shared != nil {
		// The lease lives in the store on a short expiry this process
		// renews: if the process dies, its room comes back by itself.
		expires = f.now().Add(f.o.ttl)
	} else {
		var err error
		if seg, err = f.j.append(record{Op: "lease", Lease: id}); err != nil {
			f.journalFailed(err)
			return false, f.writeError()
		}
	}
	start := f.now()
	if err := f.Store.Reserve(ctx, Reservation{InvocationID: id, Amount: size, Scopes: r.Scopes, ExpiresAt: expires}); err != nil {
		if seg != nil {
			f.j.done(seg)
		}
		if errors.Is(err, ErrOverBudget) || errors.Is(err, ErrPaused) {
			// Someone took the room meanwhile: this call is decided exactly.
			return false, f.exact(ctx, r)
		}
		return false, f.storeRefused(err)
	}
	f.touch(start)
	taken := f.now()
	l := &lease{id: id, key: key, scopes: slices.Clone(r.Scopes), amount: size, taken: taken, factor: factor, until: taken.Add(f.o.window), open: true, seg: seg}
	f.mu.Lock()
	if f.epoch != epoch {
		// A budget changed (or changes may have been missed) while the
		// lease was being taken: it may predate the change, so it admits
		// nothing, and the budget is looked at again.
		l.open, l.released = false, true
		f.mu.Unlock()
		f.giveBack(ctx, l)
		return f.acquire(ctx, key, r)
	}
	if f.leaseRefused {
		f.leaseRefused = false
		defer f.onErr(errors.New("ledger: the store takes writes again: new calls are admitted"))
	}
	f.leases[key] = l
	f.all[l] = true
	f.timeLocked(l, f.o.window)
	f.mu.Unlock()
	return true, nil
}

// resizeLocked sets the size of the next lease on l's scopes as l ends at
// now: twice l's if l ran out within a quarter of its window, half if it
// outlived its window, the same otherwise; never below the size of
// [FastLeaseFactor] nor above [maxLeaseGrowth] times it.
func (f *Fast) resizeLocked(l *lease, now time.Time) {
	if !l.open || l.factor == 0 {
		return
	}
	next := l.factor
	switch {
	case !now.Before(l.until):
		next /= 2
	case now.Sub(l.taken) < f.o.window/4:
		next *= 2
	}
	next = min(max(next, f.o.factor), f.o.factor*maxLeaseGrowth)
	if next == f.o.factor {
		delete(f.factors, l.key)
	} else {
		f.factors[l.key] = next
	}
}

// timeLocked arms the timer that ends l's window in d: its unused part
// then goes back without waiting for another call.
func (f *Fast) timeLocked(l *lease, d time.Duration) {
	l.stop = f.o.after(d, func() { f.expire(l) })
}

// expire closes l once its window has ended, and gives back what it will
// not use.
func (f *Fast) expire(l *lease) {
	f.mu.Lock()
	if f.closed || !l.open {
		f.mu.Unlock()
		return
	}
	if left := l.until.Sub(f.now()); left > 0 {
		f.timeLocked(l, left)
		f.mu.Unlock()
		return
	}
	f.resizeLocked(l, f.now())
	back := f.closeLocked(l)
	f.async(back)
	f.mu.Unlock()
}

// exact reserves r in the store itself, once the store has every pending
// settlement: near a limit, a call is decided on actual costs, not on the
// estimates still held for calls already settled.
func (f *Fast) exact(ctx context.Context, r Reservation) error {
	if err := f.catchUp(ctx); err != nil {
		return err
	}
	until := r.ExpiresAt
	if f.shared != nil {
		// On a short expiry, renewed until the call ends (at most until
		// the caller's).
		r.ExpiresAt = minTime(r.ExpiresAt, f.now().Add(f.o.ttl))
	}
	if err := f.Store.Reserve(ctx, r); err != nil {
		return f.storeRefused(err)
	}
	f.mu.Lock()
	f.holds[r.InvocationID] = drawn{}
	if f.shared != nil {
		f.exactHeld[r.InvocationID] = until
	}
	f.mu.Unlock()
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// closeLocked stops l admitting calls and returns what gives back its
// unused part (nil if nothing is to be done); the caller runs it after
// unlocking, or hands it to [Fast.async].
func (f *Fast) closeLocked(l *lease) func(context.Context) {
	if !l.open {
		return nil
	}
	l.open = false
	if l.stop != nil {
		l.stop()
	}
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
	if l.used >= l.amount {
		// Nothing unused to give back: the calls drawing on it take
		// the rest, as they settle.
		return nil
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
		f.mu.Lock()
		f.unreleased = append(f.unreleased, l)
		f.mu.Unlock()
		return
	}
	if l.seg != nil {
		f.j.done(l.seg)
	}
}

// Settle journals s and applies it in the background.
func (f *Fast) Settle(ctx context.Context, s Settlement) error {
	f.mu.Lock()
	d, ok := f.holds[s.InvocationID]
	delete(f.holds, s.InvocationID)
	delete(f.exactHeld, s.InvocationID)
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
	f.flushMu.Lock()
	f.pending++
	f.flushMu.Unlock()
	jb := job{s: s, l: d.l}
	if f.shared != nil {
		return f.commit(jb)
	}
	seg, err := f.j.append(record{Op: "settle", Settle: &s})
	if err == nil {
		jb.seg = seg
		if !f.enqueue(jb) {
			f.left(1)
		}
		return nil
	}
	if errors.Is(err, ErrClosed) {
		// Close has run: the store is all that is left.
		f.applied(jb)
		return f.Store.Settle(ctx, s)
	}
	// The journal cannot take it: no call is admitted until it can. The
	// settlement is written through to the store, or kept and retried.
	f.journalFailed(err)
	serr := f.Store.Settle(ctx, s)
	switch {
	case serr == nil, errors.Is(serr, ErrAlreadySettled):
		f.applied(jb)
		return serr
	case errors.Is(serr, ErrInvalid):
		f.applied(jb)
		return serr
	}
	f.mu.Lock()
	f.held = append(f.held, jb)
	f.kept++
	n := f.kept
	f.mu.Unlock()
	f.onErr(fmt.Errorf("ledger: the settlement of %s ($%s) is kept in memory and retried: the journal cannot take it (%v), nor the store (%v); %d kept so far, new calls are refused until they are written", s.InvocationID, s.Cost, err, serr, n))
	f.wake()
	return nil
}

// enqueue hands a settlement to the workers that apply it, and reports
// false once Close has stopped them (a journaled one then stays in the
// journal for the next process).
func (f *Fast) enqueue(jb job) bool {
	f.qmu.RLock()
	defer f.qmu.RUnlock()
	if f.qclosed {
		return false
	}
	f.queue <- jb
	return true
}

// left counts n settlements as no longer pending for this process (they
// stay in the journal for the next one).
func (f *Fast) left(n int) {
	f.flushMu.Lock()
	f.pending -= n
	f.flushed.Broadcast()
	f.flushMu.Unlock()
}

func (f *Fast) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// journalFailed records that the journal refused a write: no call is
// admitted until it takes one again.
func (f *Fast) journalFailed(err error) {
	f.mu.Lock()
	first := f.journalErr == nil
	f.journalErr = err
	f.mu.Unlock()
	if first {
		f.onErr(fmt.Errorf("ledger: new calls are refused until the journal can be written again: %w", err))
		f.wake()
	}
}

// storeFailed and storeOK record the outcome of applying settlements.
func (f *Fast) storeFailed(err error) {
	f.mu.Lock()
	f.storeErr = err
	f.mu.Unlock()
}

func (f *Fast) storeOK() {
	f.mu.Lock()
	if f.unsettled > 0 {
		// Settlements the store refused are still being retried.
		f.mu.Unlock()
		return
	}
	was := f.storeErr
	f.storeErr = nil
	f.mu.Unlock()
	if was != nil {
		f.onErr(fmt.Errorf("ledger: the store takes writes again (it had failed: %v)", was))
	}
}

// retry writes the held settlements (to the journal, else to the store)
// and probes the journal until it takes writes again, with backoff.
func (f *Fast) retry() {
	defer f.retrier.Done()
	for {
		select {
		case <-f.kick:
		case <-f.quit:
			return
		}
		backoff := 10 * time.Millisecond
		for !f.recoverJournal() {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-f.quit:
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// recoverJournal makes one pass over the held settlements and reports
// whether the journal is healthy again (everything held is written and
// the journal took a write).
func (f *Fast) recoverJournal() bool {
	f.mu.Lock()
	held := f.held
	f.held = nil
	failing := f.journalErr != nil
	f.mu.Unlock()
	if !failing && len(held) == 0 {
		return true
	}
	var keep []job
	var jerr error
	defer func() {
		f.mu.Lock()
		f.kept -= len(held) - len(keep)
		f.mu.Unlock()
	}()
	for _, jb := range held {
		seg, err := f.j.append(record{Op: "settle", Settle: &jb.s})
		if err == nil {
			jb.seg = seg
			if !f.enqueue(jb) {
				f.left(1)
			}
			continue
		}
		jerr = err
		switch serr := f.Store.Settle(context.Background(), jb.s); {
		case serr == nil, errors.Is(serr, ErrAlreadySettled):
			f.applied(jb)
		case errors.Is(serr, ErrInvalid):
			f.onErr(fmt.Errorf("ledger: settlement of %s dropped: %w", jb.s.InvocationID, serr))
			f.applied(jb)
		default:
			keep = append(keep, jb)
		}
	}
	if len(held) == 0 {
		jerr = f.j.probe()
	}
	f.mu.Lock()
	f.held = append(keep, f.held...)
	if jerr != nil {
		f.journalErr = jerr
	} else if len(f.held) == 0 {
		f.journalErr = nil
	}
	healthy := f.journalErr == nil
	f.mu.Unlock()
	if healthy {
		f.onErr(errors.New("ledger: the journal takes writes again"))
	}
	return healthy
}

// WriteError is what [Fast.Reserve] refuses calls with while the journal
// or the store cannot be written. It wraps [ErrUnavailable] and the write's
// error.
type WriteError struct {
	// Journal is true when the journal cannot be written, false when the
	// store cannot.
	Journal bool
	// Where is the journal's directory, or the store's file ("" when it
	// has none, as PostgreSQL).
	Where string
	// DiskFull is true when the write failed for want of space.
	DiskFull bool
	// Kept counts settlements held in memory (the journal refused them),
	// Waiting those in the journal waiting for the store.
	Kept, Waiting int
	Err           error
}

func (e *WriteError) Error() string {
	var b strings.Builder
	b.WriteString("ledger: new calls are refused: ")
	what := "the store"
	if e.Journal {
		what = "the journal"
	}
	if e.Where != "" {
		what += " at " + e.Where
	}
	var se *ServerError
	server := !e.Journal && errors.As(e.Err, &se)
	switch {
	case server:
		// It names the server and says what is wrong with it.
		b.WriteString(e.Err.Error())
	case e.DiskFull:
		b.WriteString("the disk is full: ")
		fallthrough
	default:
		fmt.Fprintf(&b, "%s cannot be written (%v)", what, e.Err)
	}
	if e.Kept > 0 {
		fmt.Fprintf(&b, "; %d settlements of calls already paid are kept in memory and retried until they are written", e.Kept)
	}
	if e.Waiting > 0 {
		fmt.Fprintf(&b, "; %d settlements wait in the journal and are retried", e.Waiting)
	}
	switch {
	case server && se.Unreachable:
		fmt.Fprintf(&b, ". To fix it, make the %s reachable again (the server, the network between them)", se.Where)
	case e.DiskFull && e.Where != "":
		fmt.Fprintf(&b, ". To fix it, free space on the filesystem holding %s", e.Where)
	case e.DiskFull:
		b.WriteString(". To fix it, free space on the store's disk")
	case e.Journal:
		b.WriteString(". To fix it, make the journal's directory writable (space, permissions, a read-only mount)")
	default:
		b.WriteString(". To fix it, make the store writable again (its disk's space, the file's permissions, the database server)")
	}
	b.WriteString("; calls are admitted again by themselves once everything pending is written")
	return b.String()
}

func (e *WriteError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// writeError describes why no call is admitted now.
func (f *Fast) writeError() error {
	f.mu.Lock()
	jerr, serr, rerr, lerr := f.journalErr, f.storeErr, f.renewErr, f.listenErr
	f.mu.Unlock()
	switch {
	case jerr != nil:
		return f.newWriteError(true, jerr)
	case serr != nil:
		return f.newWriteError(false, serr)
	case rerr != nil:
		return f.newWriteError(false, rerr)
	case lerr != nil:
		return f.newWriteError(false, lerr)
	}
	return fmt.Errorf("%w: the ledger could not be written; retry", ErrUnavailable)
}

// storeRefused turns a reservation the store could not write into a
// [*WriteError] saying so; other errors are returned as they are.
func (f *Fast) storeRefused(err error) error {
	if err == nil || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) {
		return err
	}
	we := f.newWriteError(false, err)
	f.mu.Lock()
	first := !f.leaseRefused
	f.leaseRefused = true
	f.mu.Unlock()
	if first {
		// Each refused call says why; the log says it once, when calls
		// start being refused.
		f.onErr(we)
	}
	return we
}

func (f *Fast) newWriteError(journal bool, err error) *WriteError {
	e := &WriteError{Journal: journal, Err: err, DiskFull: diskFull(err)}
	if journal {
		e.Where = f.dir
	} else if sq, ok := f.Store.(*SQLite); ok {
		e.Where = sq.path
	} else if f.shared != nil {
		e.Where = f.shared.Where()
	}
	f.mu.Lock()
	e.Kept = f.kept
	f.mu.Unlock()
	f.flushMu.Lock()
	e.Waiting = max(f.pending-e.Kept, 0)
	f.flushMu.Unlock()
	return e
}

// diskFull reports whether err means there is no room left on a disk.
func diskFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "disk is full") || strings.Contains(msg, "no space left") ||
		strings.Contains(msg, "disk quota") || strings.Contains(msg, "sqlstate 53100")
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
		ctx, cancel := context.WithTimeout(context.Background(), commitWait)
		start := f.now()
		errs := bs.settleBatch(ctx, sets)
		cancel()
		var retry error
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrAlreadySettled) && !errors.Is(err, ErrInvalid) {
				retry = err
				break
			}
		}
		if retry == nil {
			f.touch(start)
			f.storeOK()
			for i, jb := range batch {
				if errors.Is(errs[i], ErrInvalid) {
					f.onErr(fmt.Errorf("ledger: settlement of %s dropped: %w", jb.s.InvocationID, errs[i]))
				}
				f.applied(jb)
			}
			return
		}
		if errors.Is(retry, ErrClosed) || !f.wait(retry, len(batch), &backoff) {
			// They stay in the journal for the next process; those the
			// journal refused are lost with this process, and Close says so.
			var lost []job
			for _, jb := range batch {
				if jb.seg == nil && !jb.tabled {
					lost = append(lost, jb)
				}
			}
			where := "under " + f.dir
			if f.shared != nil {
				where = "file under " + f.dir + " or the store's journal table"
			}
			f.onErr(fmt.Errorf("ledger: %d settlements not applied; they stay in the journal %s: %w", len(batch)-len(lost), where, retry))
			if len(lost) > 0 {
				f.mu.Lock()
				f.held = append(f.held, lost...)
				f.mu.Unlock()
			}
			f.left(len(batch))
			return
		}
	}
}

// wait records that n settlements could not be applied (no call is
// admitted meanwhile) and waits before they are tried again; it reports
// false once Close has stopped the retries.
func (f *Fast) wait(err error, n int, backoff *time.Duration) bool {
	f.storeFailed(err)
	f.onErr(fmt.Errorf("ledger: %d settlements wait in the journal; new calls are refused until the store takes them: %w", n, err))
	t := time.NewTimer(*backoff)
	defer t.Stop()
	*backoff = min(2**backoff, 2*time.Second)
	select {
	case <-t.C:
		return true
	case <-f.quit:
		return false
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
			f.storeOK()
			break
		}
		if errors.Is(err, ErrInvalid) {
			f.onErr(fmt.Errorf("ledger: settlement of %s dropped: %w", jb.s.InvocationID, err))
			break
		}
		if errors.Is(err, ErrClosed) || !f.wait(err, 1, &backoff) {
			// It stays in the journal for the next process.
			f.onErr(fmt.Errorf("ledger: settlement of %s not applied; it stays in the journal under %s: %w", jb.s.InvocationID, f.dir, err))
			f.left(1)
			return
		}
	}
	f.applied(jb)
}

// applied records that jb's settlement is in the store.
func (f *Fast) applied(jb job) {
	if jb.seg != nil {
		f.j.done(jb.seg)
	}
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
	delete(f.exactHeld, invocationID)
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
	// The journal table is the renewals' sweep's: here only the files.
	rep, err := ReplayJournals(ctx, f.Store, f.dir, append(f.o.replayOptions(), replayFilesOnly())...)
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

// closeWait bounds how long Close waits for pending settlements.
var closeWait = 10 * time.Second

// Close applies what is pending (for up to 10 s, retrying what the
// journal or the store refused), gives back every lease, closes the journal
// (deleting it when empty) and the store. Settlements that could not be
// applied stay in the journal for the next process; those the journal
// could not take either are lost with the process: the error lists each
// with its journal line.
func (f *Fast) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	for l := range f.all {
		if l.stop != nil {
			l.stop()
		}
	}
	if f.renewStop != nil {
		f.renewStop()
	}
	f.leases = map[string]*lease{}
	f.mu.Unlock()
	if f.stopListen != nil {
		f.stopListen()
		f.listener.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	ferr := f.Flush(ctx)
	close(f.quit)
	f.retrier.Wait()
	f.qmu.Lock()
	f.qclosed = true
	if f.jq != nil {
		close(f.jq)
	}
	f.qmu.Unlock()
	f.jwriters.Wait() // they hand settlements to the appliers
	close(f.queue)
	f.workers.Wait()
	f.retrying.Wait()
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
	lost := f.held
	f.held = nil
	again := f.unreleased
	f.unreleased = nil
	f.mu.Unlock()
	for _, l := range append(again, left...) {
		f.giveBack(ctx, l)
	}
	var lerr error
	if len(lost) > 0 {
		lerr = f.lostError(lost)
		ferr = nil // lerr says it all
	}
	jerr := f.j.close()
	return errors.Join(lerr, ferr, jerr, f.Store.Close())
}

// lostError lists the settlements neither the journal nor the store took,
// each with the journal line that would apply it.
func (f *Fast) lostError(lost []job) error {
	var total provider.Money
	var lines strings.Builder
	for _, jb := range lost {
		total += jb.s.Cost
		lines.WriteString("\n")
		lines.Write(appendRecord(nil, record{Op: "settle", Settle: &jb.s}))
	}
	return fmt.Errorf("%w: %d settlements of calls already paid ($%s) were written neither to the journal nor to the store and are lost with this process; "+
		"to recover them, once there is room, save the lines below to a file ending in %s under %s: the next process to open the store applies them:%s",
		ErrUnavailable, len(lost), total, journalSuffix, f.dir, lines.String())
}

// Alerts implements [Store], after applying pending settlements (the
// alerts they cross are recorded as they are applied).
func (f *Fast) Alerts(ctx context.Context, limit int) ([]Alert, error) {
	if err := f.catchUp(ctx); err != nil {
		return nil, err
	}
	return f.Store.Alerts(ctx, limit)
}
