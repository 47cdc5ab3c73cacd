package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/filepoll"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"

	"github.com/cortexbuild/cortexbuild/internal/atomicfile"
)

// State persists whether the project is paused (after a provider refused
// its credentials) so a restart does not lift the pause.
type State interface {
	Paused(ctx context.Context) (reason string, paused bool, err error)
	Pause(ctx context.Context, reason string) error
	Resume(ctx context.Context) error
}

// MemoryState keeps the pause in memory.
type MemoryState struct {
	mu     sync.Mutex
	reason string
	paused bool
}

// Paused reports the pause.
func (m *MemoryState) Paused(context.Context) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason, m.paused, nil
}

// Pause records a pause.
func (m *MemoryState) Pause(_ context.Context, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reason, m.paused = reason, true
	return nil
}

// Resume lifts it.
func (m *MemoryState) Resume(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reason, m.paused = "", false
	return nil
}

// FileState keeps the pause in a JSON file (for example
// .cortexbuild/project-state.json), written atomically with mode 0600 and
// looked at on every call (at most once per Recheck), re-read when it
// changed, so another process's pause or resume is seen.
type FileState struct {
	Path string
	Now  func() time.Time
	// Recheck bounds how often Paused looks at the file: another
	// process's pause is seen at most Recheck later. Zero looks on every
	// call. This process's own Pause and Resume are seen at once.
	Recheck time.Duration

	mu     sync.Mutex
	poll   filepoll.Throttle
	looked bool
	seen   os.FileInfo // the file as last read; nil when it did not exist
	cached fileState
}

type fileState struct {
	Paused   bool      `json:"paused"`
	Reason   string    `json:"reason,omitempty"`
	PausedAt time.Time `json:"paused_at,omitzero"`
}

// read returns the recorded state. The caller holds f.mu.
func (f *FileState) read() (fileState, error) {
	f.poll.Every = f.Recheck
	if due := f.poll.Due(); f.looked && !due {
		return f.cached, nil
	}
	f.looked = false // until this look succeeds
	var s fileState
	fi, err := os.Stat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		f.seen, f.cached, f.looked = nil, s, true
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if f.seen != nil && os.SameFile(fi, f.seen) && fi.ModTime().Equal(f.seen.ModTime()) && fi.Size() == f.seen.Size() {
		f.looked = true
		return f.cached, nil
	}
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		f.seen, f.cached, f.looked = nil, s, true
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s is corrupt (%v): fix or delete it", f.Path, err)
	}
	f.seen, f.cached, f.looked = fi, s, true
	return s, nil
}

func (f *FileState) write(s fileState) error {
	f.looked = false // the next read looks at what was written
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(f.Path, append(b, '\n'), 0o755)
}

// Paused reports the recorded pause.
func (f *FileState) Paused(context.Context) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.read()
	return s.Reason, s.Paused, err
}

// Pause records a pause.
func (f *FileState) Pause(_ context.Context, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	return f.write(fileState{Paused: true, Reason: reason, PausedAt: now().UTC()})
}

// Resume lifts the pause.
func (f *FileState) Resume(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write(fileState{})
}

// PauseSet is the kind of the shared state's set that holds the project's
// pause.
const PauseSet = "project-pause"

// pauseRecord is the id of the one record of [PauseSet].
const pauseRecord = "project"

// SharedState keeps the pause in the project's shared state in PostgreSQL
// (store.backend: postgres), for every replica of a fleet: a pause or
// resume made by any process is seen by the others at most Recheck later
// (the view's period), and at once by the process that made it.
type SharedState struct {
	View *pgstate.View
	Now  func() time.Time
}

// NewSharedState returns the pause kept in set, looked at at most once per
// recheck.
func NewSharedState(set *pgstate.Set, recheck time.Duration) *SharedState {
	return &SharedState{View: &pgstate.View{Set: set, Every: recheck}}
}

// Paused reports the recorded pause.
func (s *SharedState) Paused(ctx context.Context) (string, bool, error) {
	_, recs, err := s.View.Records(ctx)
	if err != nil {
		return "", false, fmt.Errorf("project pause: %w", err)
	}
	for _, r := range recs {
		if r.ID == pauseRecord {
			var st fileState
			if err := json.Unmarshal(r.Data, &st); err != nil {
				return "", false, fmt.Errorf("project pause: the shared record is not a pause: %v", err)
			}
			return st.Reason, st.Paused, nil
		}
	}
	return "", false, nil
}

// Pause records a pause.
func (s *SharedState) Pause(ctx context.Context, reason string) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	b, err := json.Marshal(fileState{Paused: true, Reason: reason, PausedAt: now().UTC()})
	if err != nil {
		return err
	}
	return s.put(ctx, []pgstate.Record{{ID: pauseRecord, Data: b}})
}

// Resume lifts the pause.
func (s *SharedState) Resume(ctx context.Context) error { return s.put(ctx, nil) }

func (s *SharedState) put(ctx context.Context, recs []pgstate.Record) error {
	_, _, err := s.View.Change(ctx, func([]pgstate.Record) ([]pgstate.Record, bool, error) { return recs, true, nil })
	if err != nil {
		return fmt.Errorf("project pause: %w", err)
	}
	return nil
}

// FileRecords returns the pause the file holds as the records of
// [PauseSet] (none when the file is missing or holds no pause), for a
// project moving its state to PostgreSQL.
func (f *FileState) FileRecords() ([]pgstate.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looked = false
	s, err := f.read()
	if err != nil || !s.Paused {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return []pgstate.Record{{ID: pauseRecord, Data: b}}, nil
}
