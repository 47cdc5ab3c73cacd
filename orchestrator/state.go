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
