package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/filepoll"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"

	"github.com/cortexbuild/cortexbuild/internal/atomicfile"
)

// FileBreakers keeps circuit breaker states in a JSON file (for example
// .cortexbuild/breakers.json) so that the processes of one project (each
// CLI command is one) see each other's open breakers. The file is re-read
// on every load and written atomically with mode 0600; of two records for
// a provider the later one (UpdatedAt) wins. A save holds the lock file
// beside it (breakers.json.lock, see [atomicfile.Locked]) while it reads,
// changes and writes the file, so that no process's save is lost. Between processes the
// one-probe rule is best effort: each process lets at most one probe
// through at a time.
type FileBreakers struct {
	Path string
	// Recheck bounds how often a load looks at the file: another process's
	// breaker change is seen at most Recheck later. Zero looks on every
	// load.
	Recheck time.Duration

	mu     sync.Mutex
	poll   filepoll.Throttle
	looked bool
	// The last file read, by modification time and size: a load that finds
	// the file unchanged is a stat, not a parse (the orchestrator loads
	// before every call).
	seen   os.FileInfo
	cached breakerFile
}

type breakerFile struct {
	Breakers []BreakerState `json:"breakers"`
}

// LoadBreakers reads every stored state; a missing file holds none.
func (f *FileBreakers) LoadBreakers(context.Context) ([]BreakerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bf, err := f.read()
	return bf.Breakers, err
}

// SaveBreaker stores s unless the file holds a later state of its
// provider.
func (f *FileBreakers) SaveBreaker(_ context.Context, s BreakerState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return atomicfile.Locked(f.Path, 0o755, func() error {
		f.poll.Reset()
		f.seen = nil // read what the file holds now, not the last look
		bf, err := f.read()
		if err != nil {
			return err
		}
		s.Probing = false
		i := slices.IndexFunc(bf.Breakers, func(x BreakerState) bool { return x.Provider == s.Provider })
		switch {
		case i < 0:
			bf.Breakers = append(bf.Breakers, s)
		case s.UpdatedAt.Before(bf.Breakers[i].UpdatedAt):
			return nil
		default:
			bf.Breakers[i] = s
		}
		slices.SortFunc(bf.Breakers, func(a, b BreakerState) int { return strings.Compare(a.Provider, b.Provider) })
		b, err := json.MarshalIndent(bf, "", "  ")
		if err != nil {
			return err
		}
		f.poll.Reset()
		return atomicfile.Write(f.Path, append(b, '\n'), 0o755)
	})
}

func (f *FileBreakers) read() (breakerFile, error) {
	f.poll.Every = f.Recheck
	if due := f.poll.Due(); f.looked && !due {
		return breakerFile{Breakers: slices.Clone(f.cached.Breakers)}, nil
	}
	f.looked = false // until this look succeeds
	var bf breakerFile
	fi, err := os.Stat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		f.seen, f.cached, f.looked = nil, breakerFile{}, true
		return bf, nil
	}
	if err != nil {
		return bf, err
	}
	if f.seen != nil && os.SameFile(fi, f.seen) && fi.ModTime().Equal(f.seen.ModTime()) && fi.Size() == f.seen.Size() {
		f.looked = true
		return breakerFile{Breakers: slices.Clone(f.cached.Breakers)}, nil
	}
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		f.seen, f.cached, f.looked = nil, breakerFile{}, true
		return bf, nil
	}
	if err != nil {
		return bf, err
	}
	if err := json.Unmarshal(b, &bf); err != nil {
		f.seen = nil
		return breakerFile{}, fmt.Errorf("%s is corrupt (%v): delete it to reset every breaker", f.Path, err)
	}
	f.seen, f.cached, f.looked = fi, bf, true
	return breakerFile{Breakers: slices.Clone(bf.Breakers)}, nil
}

// BreakerSet is the kind of the shared state's set that holds the circuit
// breakers.
const BreakerSet = "breakers"

// SharedBreakers keeps circuit breaker states in the project's shared
// state in PostgreSQL (store.backend: postgres), one record per provider,
// for every replica of a fleet: a breaker opened by one is seen by the
// others at most the view's period later. Of two records for a provider
// the later one (UpdatedAt) wins, as in [FileBreakers]; a save reads the
// stored state under the lock of the set, so no save is lost. The
// one-probe rule is best effort between processes, as with the file.
type SharedBreakers struct {
	View *pgstate.View
}

// NewSharedBreakers returns the breakers kept in set, looked at at most
// once per recheck.
func NewSharedBreakers(set *pgstate.Set, recheck time.Duration) *SharedBreakers {
	return &SharedBreakers{View: &pgstate.View{Set: set, Every: recheck}}
}

func decodeBreaker(r pgstate.Record) (BreakerState, error) {
	var s BreakerState
	if err := json.Unmarshal(r.Data, &s); err != nil || s.Provider != r.ID {
		return BreakerState{}, fmt.Errorf("circuit breakers: the shared record %q is not a breaker state", r.ID)
	}
	return s, nil
}

// LoadBreakers reads every stored state.
func (b *SharedBreakers) LoadBreakers(ctx context.Context) ([]BreakerState, error) {
	_, recs, err := b.View.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("circuit breakers: %w", err)
	}
	out := make([]BreakerState, 0, len(recs))
	for _, r := range recs {
		s, err := decodeBreaker(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// SaveBreaker stores s unless the set holds a later state of its
// provider.
func (b *SharedBreakers) SaveBreaker(ctx context.Context, s BreakerState) error {
	s.Probing = false
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, _, err = b.View.Change(ctx, func(recs []pgstate.Record) ([]pgstate.Record, bool, error) {
		i := slices.IndexFunc(recs, func(r pgstate.Record) bool { return r.ID == s.Provider })
		if i < 0 {
			return append(recs, pgstate.Record{ID: s.Provider, Data: data}), true, nil
		}
		cur, err := decodeBreaker(recs[i])
		if err == nil && s.UpdatedAt.Before(cur.UpdatedAt) {
			return nil, false, nil
		}
		recs[i].Data = data
		return recs, true, nil
	})
	if err != nil {
		return fmt.Errorf("circuit breakers: %w", err)
	}
	return nil
}
