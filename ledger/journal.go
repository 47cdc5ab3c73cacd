package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/flock"
)

// The journal is [Fast]'s write-ahead log: every settlement is appended to a
// file of the process's own before the call that made it returns, and
// applied to the store in the background. A process that dies leaves its
// file behind, locked by nobody; the next process to open the store there
// replays it (settlements are idempotent by invocation id) and releases the
// budget leases it held. One file per process, rotated into segments that
// are deleted once every record in them is in the store.
//
// Appending is one write(2) of one line: durable against the death of the
// process (the kernel has the bytes), not against a power cut unless the
// journal syncs every append (FastSync).

// journalVersion is the format version of every line. Fields added to a
// row since (unpriced, key, session, host_agent, parent_agent) are
// optional, left out when empty, and do not change it: a line of an
// earlier program reads as a row without them, and a line of this one
// replayed by an earlier program is applied (its budgets charged) without
// them, rather than kept aside as a format it does not know. A change
// that an earlier program would apply wrongly takes a new version.
const (
	journalSuffix   = ".journal"
	journalVersion  = 1
	segmentMaxBytes = 8 << 20
)

// record is one line of a journal (see journalcodec.go for its format).
type record struct {
	Op string // "settle" or "lease"
	// Settle is the settlement of op "settle".
	Settle *Settlement
	// Lease is the lease id of op "lease": a lease this process reserved,
	// released on replay.
	Lease string
}

// segment is one journal file.
type segment struct {
	path    string
	f       *os.File
	size    int64
	pending int // records appended and not yet in the store
}

// journal is the process's journal in dir.
type journal struct {
	dir  string
	sync bool

	mu   sync.Mutex
	cur  *segment
	segs []*segment
	err  error // set once closed: the journal refuses further writes
	// torn is set when a failed append could not be cut back off the
	// current segment: the next append starts a new one, so that no
	// record follows the torn one.
	torn bool
}

// openJournal creates the process's journal in dir.
func openJournal(dir string, sync bool) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: journal directory: %v", ErrUnavailable, err)
	}
	j := &journal{dir: dir, sync: sync}
	if err := j.rotate(); err != nil {
		return nil, err
	}
	return j, nil
}

// rotate starts a new segment. Called with mu held (or before use).
func (j *journal) rotate() error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(j.dir, fmt.Sprintf("%d-%s%s", os.Getpid(), hex.EncodeToString(b[:]), journalSuffix))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: journal: %v", ErrUnavailable, err)
	}
	if err := flock.TryLock(f); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("%w: journal lock: %v", ErrUnavailable, err)
	}
	s := &segment{path: path, f: f}
	j.cur = s
	j.segs = append(j.segs, s)
	return nil
}

// append writes r and returns the segment holding it; the caller calls
// done(segment) once r is in the store.
func (j *journal) append(r record) (*segment, error) {
	line := append(appendRecord(make([]byte, 0, 512), r), '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return nil, j.err
	}
	s, err := j.writeLocked(line)
	if err != nil {
		return nil, err
	}
	s.size += int64(len(line))
	s.pending++
	return s, nil
}

// writeLocked writes line at the end of the current segment, starting a
// new one first when needed. A write that fails (a full disk) is cut back
// off the file, so the segment holds whole records only and the journal
// takes the next append once there is room again. Called with mu held.
func (j *journal) writeLocked(line []byte) (*segment, error) {
	if j.torn || j.cur.size > segmentMaxBytes {
		old := j.cur
		if err := j.rotate(); err != nil {
			return nil, err
		}
		j.torn = false
		if old.pending == 0 {
			j.dropLocked(old)
		}
	}
	s := j.cur
	op := "write"
	_, err := writeFile(s.f, line)
	if err == nil && j.sync {
		op = "sync"
		err = s.f.Sync()
	}
	if err != nil {
		if s.f.Truncate(s.size) != nil {
			j.torn = true
		}
		return nil, fmt.Errorf("%w: journal %s: %w", ErrUnavailable, op, err)
	}
	return s, nil
}

// writeFile is the journal's write(2); tests replace it to fail writes.
var writeFile = (*os.File).Write

// probe reports whether the journal's disk has room again, without
// leaving a record: it writes a blank line (replay skips those) of a page,
// more than a record takes, so the write needs space the file did not
// already have, and cuts it off again.
func (j *journal) probe() error {
	line := append(bytes.Repeat([]byte{' '}, 4095), '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	s, err := j.writeLocked(line)
	if err != nil {
		return err
	}
	if s.f.Truncate(s.size) != nil {
		s.size += int64(len(line)) // a blank line stays: harmless
	}
	return nil
}

// done marks one record of s as applied; a segment that is not the current
// one and holds nothing pending is deleted, and the current one is emptied
// when everything in it is applied.
func (j *journal) done(s *segment) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s.pending--
	if s.pending > 0 {
		return
	}
	if s != j.cur {
		j.dropLocked(s)
		return
	}
	if s.size > 0 && s.f.Truncate(0) == nil {
		s.size = 0
	}
}

// dropLocked deletes segment s, which holds nothing pending.
func (j *journal) dropLocked(s *segment) {
	s.f.Close()
	os.Remove(s.path)
	for i, x := range j.segs {
		if x == s {
			j.segs = append(j.segs[:i], j.segs[i+1:]...)
			break
		}
	}
}

// pending reports how many records are not yet in the store.
func (j *journal) pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, s := range j.segs {
		n += s.pending
	}
	return n
}

// close closes the journal; files with nothing pending are deleted, others
// stay for the next process to replay.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var left int
	for _, s := range j.segs {
		s.f.Close()
		if s.pending == 0 {
			os.Remove(s.path)
		} else {
			left += s.pending
		}
	}
	j.segs, j.cur = nil, nil
	if j.err == nil {
		j.err = ErrClosed
	}
	if left > 0 {
		return fmt.Errorf("%w: %d settlements are not in the store yet; they stay in the journal under %s and are applied when the store is next opened there", ErrUnavailable, left, j.dir)
	}
	return nil
}

// KeptAside is the bytes of journal records that could not be replayed,
// kept in a file of their own beside the journal (mode 0600, never
// overwritten) instead of being dropped: a record cut short at the end of
// the file (Torn: its process died or the disk filled while writing it,
// so the write never completed and the call that made it was never told
// its settlement was recorded), or a record that cannot be read or applied
// (damage: the file was changed by something else).
type KeptAside struct {
	Journal string // the journal the records were in
	Path    string // the file now holding their bytes, as they were
	Records int    // how many records
	Torn    bool   // only a torn last record
	// Repriced: settlements whose cost was below the price of their
	// usage (see [ReplayPrices]), applied at that price; the file holds
	// the lines as they were found.
	Repriced bool
	Reason   string // the first record's problem, with its line
}

// Error describes k for the operator: where the bytes are and what to do.
func (k KeptAside) Error() string {
	what := fmt.Sprintf("%d damaged record(s) (%s)", k.Records, k.Reason)
	if k.Torn {
		what = "a torn last record (its process died or the disk filled while writing it: the call was never told it was recorded)"
	}
	if k.Repriced {
		return fmt.Sprintf("ledger journal %s: %d settlement(s) cost less than their usage (%s): applied at the usage's price; the lines as found are kept in %s: find out what changed the journal, then remove the file", k.Journal, k.Records, k.Reason, k.Path)
	}
	return fmt.Sprintf("ledger journal %s: %s not applied; the bytes are kept in %s: compare them with 'cortexbuild spend' and remove the file once accounted for", k.Journal, what, k.Path)
}

// Kept-aside files are named <journal>.<KeptAsideTorn or KeptAsideCorrupt>-<UTC time>.
const (
	KeptAsideTorn     = "torn"
	KeptAsideCorrupt  = "corrupt"
	KeptAsideRepriced = "repriced"
)

// ReplayOption configures [ReplayJournals].
type ReplayOption func(*replayOptions)

type replayOptions struct {
	price     RowPricer
	filesOnly bool // not the journal table: a live process's sweep applies it
}

// replayFilesOnly leaves the store's journal table out of a replay.
func replayFilesOnly() ReplayOption { return func(o *replayOptions) { o.filesOnly = true } }

// ReplayPrices checks every replayed settlement against price: a row that
// costs less than its usage, or a settlement that costs less than its rows,
// was changed after it was written (the journal is a plain file). It is
// applied with those figures raised to the price, so that the budgets are
// charged at least what the provider bills, and its line, as found, is kept
// aside in <journal>.repriced-<time> (a [KeptAside] with Repriced set).
func ReplayPrices(price RowPricer) ReplayOption {
	return func(o *replayOptions) { o.price = price }
}

// ReplayReport is what [ReplayJournals] did.
type ReplayReport struct {
	Applied   int         // settlements applied
	KeptAside []KeptAside // records that could not be, and where they are
}

// Replay is [ReplayJournals] returning how many settlements were applied;
// damaged records kept aside are returned as errors (of type [KeptAside]),
// after every journal was replayed. A torn last record, what a process
// killed while writing leaves, is kept aside too but is no error here:
// its call was never acknowledged.
func Replay(ctx context.Context, st Store, dir string, opts ...ReplayOption) (int, error) {
	rep, err := ReplayJournals(ctx, st, dir, opts...)
	errs := []error{err}
	for _, k := range rep.KeptAside {
		if !k.Torn {
			errs = append(errs, k)
		}
	}
	return rep.Applied, errors.Join(errs...)
}

// ReplayJournals applies the journals in dir that no live process holds:
// every settlement (idempotently; in batches where the store takes them,
// as PostgreSQL and SQLite do), then the release of every budget lease
// their processes held. A record that cannot be replayed is kept aside
// (see [KeptAside]) and the others are applied. A journal is deleted once
// applied (its bad records kept aside first); one that cannot be applied
// (the store is down) is left for the next try. On PostgreSQL it also
// applies every settlement of the store's journal table (see [Fast]).
func ReplayJournals(ctx context.Context, st Store, dir string, opts ...ReplayOption) (ReplayReport, error) {
	var o replayOptions
	for _, opt := range opts {
		opt(&o)
	}
	var rep ReplayReport
	paths, err := filepath.Glob(filepath.Join(dir, "*"+journalSuffix))
	if err != nil {
		return rep, err
	}
	sort.Strings(paths)
	var errs []error
	for _, p := range paths {
		n, kept, err := replayFile(ctx, st, p, o.price)
		rep.Applied += n
		rep.KeptAside = append(rep.KeptAside, kept...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if ss, ok := st.(sharedStore); ok && !o.filesOnly {
		// The journal table too: what processes that died left there, and
		// what live ones have not applied yet (applying it twice is
		// harmless, settlements being idempotent).
		for {
			read, applied, err := sweepJournal(ctx, ss, time.Now().Add(24*time.Hour))
			rep.Applied += applied
			if err != nil {
				errs = append(errs, fmt.Errorf("the journal table: %w", err))
				break
			}
			if read < maxApplyBatch {
				break
			}
		}
	}
	return rep, errors.Join(errs...)
}

// badRecord is a journal line that cannot be replayed.
type badRecord struct {
	line     int
	bytes    []byte // the line as it was, with its newline if it had one
	torn     bool
	repriced bool // applied at the price of its usage (ReplayPrices)
	reason   string
}

// replayFile replays one journal file if its process is gone.
func replayFile(ctx context.Context, st Store, path string, price RowPricer) (int, []KeptAside, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil, nil
		}
		return 0, nil, err
	}
	defer f.Close()
	if err := flock.TryLock(f); err != nil {
		return 0, nil, nil // a live process holds it
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, nil, err
	}
	var leases []string
	var bad []badRecord
	applied := 0
	// A store that applies settlements in batches gets them so, each with
	// what keeps its record aside should the store refuse it.
	bs, batched := st.(batchSettler)
	var sets []Settlement
	var keeps []func(format string, a ...any)
	var where []int
	flush := func() error {
		if len(sets) == 0 {
			return nil
		}
		errs := bs.settleBatch(ctx, sets)
		for i, err := range errs {
			switch {
			case err == nil:
				applied++
			case errors.Is(err, ErrAlreadySettled):
			case errors.Is(err, ErrInvalid):
				keeps[i]("refused by the store: %v", err)
			default:
				return fmt.Errorf("ledger journal %s:%d: %w", path, where[i], err)
			}
		}
		sets, keeps, where = sets[:0], keeps[:0], where[:0]
		return nil
	}
	for line, rest := 1, data; len(rest) > 0; line++ {
		text, next, complete := bytes.Cut(rest, []byte("\n"))
		raw := rest[:len(rest)-len(next)]
		rest = next
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		keep := func(format string, a ...any) {
			bad = append(bad, badRecord{line: line, bytes: raw, torn: !complete, reason: fmt.Sprintf("line %d: ", line) + fmt.Sprintf(format, a...)})
		}
		var r jrecord
		if err := json.Unmarshal(text, &r); err != nil {
			if !complete {
				keep("cut short after %d bytes", len(text))
			} else {
				keep("unreadable: %v", err)
			}
			continue
		}
		if r.V != journalVersion {
			keep("format version %d, this program reads %d", r.V, journalVersion)
			continue
		}
		switch r.Op {
		case "settle":
			if r.Settle == nil {
				keep("settle record without a settlement")
				continue
			}
			set := r.Settle.settlement()
			if price != nil {
				if fixed, why := reprice(set, price); why != "" {
					set = fixed
					bad = append(bad, badRecord{line: line, bytes: raw, repriced: true, reason: fmt.Sprintf("line %d: %s", line, why)})
				}
			}
			if batched {
				sets, keeps, where = append(sets, set), append(keeps, keep), append(where, line)
				if len(sets) == maxApplyBatch {
					if err := flush(); err != nil {
						return applied, nil, err
					}
				}
				continue
			}
			err := st.Settle(ctx, set)
			switch {
			case err == nil:
				applied++
			case errors.Is(err, ErrAlreadySettled):
			case errors.Is(err, ErrInvalid):
				keep("refused by the store: %v", err)
			default:
				return applied, nil, fmt.Errorf("ledger journal %s:%d: %w", path, line, err)
			}
		case "lease":
			leases = append(leases, r.Lease)
		default:
			keep("unknown operation %q", r.Op)
		}
	}
	if err := flush(); err != nil {
		return applied, nil, err
	}
	for _, id := range leases {
		if err := st.Release(ctx, id); err != nil {
			return applied, nil, fmt.Errorf("ledger journal %s: releasing lease %s: %w", path, id, err)
		}
	}
	// In the journal's order (a batch's refusals come after the lines
	// read while it filled).
	slices.SortStableFunc(bad, func(a, b badRecord) int { return a.line - b.line })
	kept, err := keepAside(path, bad)
	if err != nil {
		return applied, nil, err // the journal stays: nothing is lost
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return applied, kept, err
	}
	return applied, kept, nil
}

// keepAside writes the bytes of the bad records of the journal at path to
// new files beside it: a torn last record to <path>.torn-<time>, the
// settlements applied at their usage's price to <path>.repriced-<time>, the
// others to <path>.corrupt-<time>.
func keepAside(path string, bad []badRecord) ([]KeptAside, error) {
	var out []KeptAside
	for _, kind := range []string{KeptAsideCorrupt, KeptAsideTorn, KeptAsideRepriced} {
		torn, repriced := kind == KeptAsideTorn, kind == KeptAsideRepriced
		k := KeptAside{Journal: path, Torn: torn, Repriced: repriced}
		var data []byte
		for _, b := range bad {
			if b.repriced == repriced && (repriced || b.torn == torn) {
				if k.Records == 0 {
					k.Reason = b.reason
				}
				k.Records++
				data = append(data, b.bytes...)
			}
		}
		if k.Records == 0 {
			continue
		}
		p, err := writeNew(path+"."+kind+"-"+time.Now().UTC().Format("20060102T150405.000000000Z"), data)
		if err != nil {
			return out, fmt.Errorf("%w: ledger journal %s: keeping %d unreadable record(s) aside: %v (the journal stays as it is)", ErrUnavailable, path, k.Records, err)
		}
		k.Path = p
		out = append(out, k)
	}
	return out, nil
}

// writeNew writes data, synced, to a new file at path (mode 0600), or at
// path-2, path-3… when path exists: an existing file is never replaced.
func writeNew(path string, data []byte) (string, error) {
	for i := 1; ; i++ {
		p := path
		if i > 1 {
			p = fmt.Sprintf("%s-%d", path, i)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(p)
			return "", err
		}
		return p, nil
	}
}
