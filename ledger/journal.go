package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
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
	if err := lockFile(f); err != nil {
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

// Replay applies the journals in dir that no live process holds: every
// settlement (idempotently), then the release of every budget lease their
// processes held. A journal is deleted once applied; one that cannot be
// applied (the store is down) is left for the next try. It returns how many
// settlements were applied.
func Replay(ctx context.Context, st Store, dir string) (int, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+journalSuffix))
	if err != nil {
		return 0, err
	}
	sort.Strings(paths)
	applied := 0
	var errs []error
	for _, p := range paths {
		n, err := replayFile(ctx, st, p)
		applied += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return applied, errors.Join(errs...)
}

// replayFile replays one journal file if its process is gone.
func replayFile(ctx context.Context, st Store, path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return 0, nil // a live process holds it
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var leases []string
	applied := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		var r jrecord
		if err := json.Unmarshal(text, &r); err != nil {
			// A line cut short by a crash mid-write is the last one; any
			// other is damage worth saying so.
			if !bytes.HasSuffix(data, []byte("\n")) && line == bytes.Count(data, []byte("\n"))+1 {
				break
			}
			return applied, fmt.Errorf("ledger journal %s:%d: unreadable record: %v", path, line, err)
		}
		if r.V != journalVersion {
			return applied, fmt.Errorf("ledger journal %s:%d: format version %d, this program reads %d", path, line, r.V, journalVersion)
		}
		switch r.Op {
		case "settle":
			if r.Settle == nil {
				return applied, fmt.Errorf("ledger journal %s:%d: settle record without a settlement", path, line)
			}
			if err := st.Settle(ctx, r.Settle.settlement()); err != nil && !errors.Is(err, ErrAlreadySettled) {
				return applied, fmt.Errorf("ledger journal %s:%d: %w", path, line, err)
			}
			applied++
		case "lease":
			leases = append(leases, r.Lease)
		default:
			return applied, fmt.Errorf("ledger journal %s:%d: unknown operation %q", path, line, r.Op)
		}
	}
	for _, id := range leases {
		if err := st.Release(ctx, id); err != nil {
			return applied, fmt.Errorf("ledger journal %s: releasing lease %s: %w", path, id, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return applied, err
	}
	return applied, nil
}
