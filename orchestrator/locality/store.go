package locality

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/atomicfile"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"
)

// MemoryStore is a ConsentStore in memory, for tests and for embedding.
// The zero value is empty and ready to use.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]Consent
}

// NewMemoryStore returns a store holding cs.
func NewMemoryStore(cs ...Consent) *MemoryStore {
	s := &MemoryStore{m: make(map[string]Consent, len(cs))}
	for _, c := range cs {
		s.m[c.Provider] = c
	}
	return s
}

// Consent implements ConsentStore.
func (s *MemoryStore) Consent(ctx context.Context, provider string) (Consent, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[provider]
	return c, ok, nil
}

// Grant implements ConsentStore.
func (s *MemoryStore) Grant(ctx context.Context, c Consent) error {
	if err := c.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]Consent{}
	}
	s.m[c.Provider] = c
	return nil
}

// Revoke implements ConsentStore.
func (s *MemoryStore) Revoke(ctx context.Context, provider string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[provider]
	delete(s.m, provider)
	return ok, nil
}

// List implements ConsentStore.
func (s *MemoryStore) List(ctx context.Context) ([]Consent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Consent, 0, len(s.m))
	for _, c := range s.m {
		out = append(out, c)
	}
	sortConsents(out)
	return out, nil
}

func sortConsents(cs []Consent) {
	slices.SortFunc(cs, func(a, b Consent) int { return strings.Compare(a.Provider, b.Provider) })
}

// DefaultConsentFile is where a project keeps its consents, relative to
// the project root.
const DefaultConsentFile = ".cortexbuild/consent.json"

// fileVersion is the version of the consent file format.
const fileVersion = 1

// consentFile is the JSON layout of a consent file.
type consentFile struct {
	Version  int       `json:"version"`
	Consents []Consent `json:"consents"`
}

// FileStore is a ConsentStore kept in a JSON file, such as
// .cortexbuild/consent.json.
//
// Every call reads the file again, so a grant or revocation by another
// process is seen by the next call. A missing file holds no consent; a file
// that cannot be parsed is an error naming it, and is never overwritten.
// Writes replace the file atomically (a temporary file in the same
// directory, synced, then renamed over it) with mode 0600, so a reader
// never sees a partial file. Calls are serialised across every FileStore
// of this process on the same path, and a grant or revocation holds the
// lock file beside the file (consent.json.lock, see [atomicfile.Locked])
// from its read to its write, so that of two processes granting or
// revoking at once neither change is lost.
type FileStore struct {
	path string
}

// NewFileStore returns the store kept in the file at path. It touches
// nothing until used.
func NewFileStore(path string) *FileStore { return &FileStore{path: path} }

// Path returns the file's path.
func (s *FileStore) Path() string { return s.path }

// fileLocks serialises FileStores of this process by absolute path.
var fileLocks sync.Map // string -> *sync.Mutex

func (s *FileStore) lock() func() {
	key, err := filepath.Abs(s.path)
	if err != nil {
		key = filepath.Clean(s.path)
	}
	m, _ := fileLocks.LoadOrStore(key, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Consent implements ConsentStore.
func (s *FileStore) Consent(ctx context.Context, provider string) (Consent, bool, error) {
	defer s.lock()()
	cs, err := s.read()
	if err != nil {
		return Consent{}, false, err
	}
	for _, c := range cs {
		if c.Provider == provider {
			return c, true, nil
		}
	}
	return Consent{}, false, nil
}

// Grant implements ConsentStore.
func (s *FileStore) Grant(ctx context.Context, c Consent) error {
	if err := c.validate(); err != nil {
		return err
	}
	defer s.lock()()
	return atomicfile.Locked(s.path, 0o700, func() error {
		cs, err := s.read()
		if err != nil {
			return err
		}
		cs = slices.DeleteFunc(cs, func(old Consent) bool { return old.Provider == c.Provider })
		return s.write(append(cs, c))
	})
}

// Revoke implements ConsentStore.
func (s *FileStore) Revoke(ctx context.Context, provider string) (revoked bool, err error) {
	defer s.lock()()
	err = atomicfile.Locked(s.path, 0o700, func() error {
		cs, err := s.read()
		if err != nil {
			return err
		}
		n := len(cs)
		cs = slices.DeleteFunc(cs, func(c Consent) bool { return c.Provider == provider })
		if revoked = len(cs) < n; !revoked {
			return nil
		}
		return s.write(cs)
	})
	return revoked, err
}

// List implements ConsentStore.
func (s *FileStore) List(ctx context.Context) ([]Consent, error) {
	defer s.lock()()
	cs, err := s.read()
	if err != nil {
		return nil, err
	}
	sortConsents(cs)
	return cs, nil
}

// read parses the file; a missing file is empty.
func (s *FileStore) read() ([]Consent, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locality: reading consent file: %w", err)
	}
	corrupt := func(why error) error {
		return fmt.Errorf("locality: consent file %s is corrupt (fix or delete it, then grant consent again): %w", s.path, why)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f consentFile
	if err := dec.Decode(&f); err != nil {
		return nil, corrupt(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt(errors.New("data after the JSON object"))
	}
	if f.Version != fileVersion {
		return nil, corrupt(fmt.Errorf("version %d, want %d", f.Version, fileVersion))
	}
	seen := map[string]bool{}
	for i, c := range f.Consents {
		if err := c.validate(); err != nil {
			return nil, corrupt(fmt.Errorf("entry %d: %w", i, err))
		}
		if seen[c.Provider] {
			return nil, corrupt(fmt.Errorf("two entries for provider %q", c.Provider))
		}
		seen[c.Provider] = true
	}
	return f.Consents, nil
}

// write replaces the file atomically with cs.
func (s *FileStore) write(cs []Consent) (err error) {
	sortConsents(cs)
	if cs == nil {
		cs = []Consent{}
	}
	b, err := json.MarshalIndent(consentFile{Version: fileVersion, Consents: cs}, "", "  ")
	if err != nil {
		return fmt.Errorf("locality: encoding consent file: %w", err)
	}
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o700); err != nil {
		return fmt.Errorf("locality: writing consent file %s: %w", s.path, err)
	}
	return nil
}

// ConsentSet is the kind of the shared state's set that holds the
// consents.
const ConsentSet = "consent"

// SharedStore is a ConsentStore kept in the project's shared state in
// PostgreSQL (store.backend: postgres), one record per provider, for every
// replica of a fleet: a grant or revocation made by any process is seen by
// the others at most the view's period (Every) later, and at once by the
// process that made it. Of two processes granting or revoking at once,
// neither change is lost (see [pgstate.Set.Change]).
type SharedStore struct {
	View *pgstate.View
}

// NewSharedStore returns the consents kept in set, looked at at most once
// per recheck.
func NewSharedStore(set *pgstate.Set, recheck time.Duration) *SharedStore {
	return &SharedStore{View: &pgstate.View{Set: set, Every: recheck}}
}

func decodeConsent(r pgstate.Record) (Consent, error) {
	var c Consent
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Consent{}, fmt.Errorf("locality: the shared consent %q is corrupt: %w", r.ID, err)
	}
	if err := c.validate(); err != nil || c.Provider != r.ID {
		return Consent{}, fmt.Errorf("locality: the shared consent %q is corrupt: %v", r.ID, err)
	}
	return c, nil
}

// Consent implements ConsentStore.
func (s *SharedStore) Consent(ctx context.Context, provider string) (Consent, bool, error) {
	_, recs, err := s.View.Records(ctx)
	if err != nil {
		return Consent{}, false, fmt.Errorf("locality: reading consents: %w", err)
	}
	for _, r := range recs {
		if r.ID == provider {
			c, err := decodeConsent(r)
			return c, err == nil, err
		}
	}
	return Consent{}, false, nil
}

// Grant implements ConsentStore.
func (s *SharedStore) Grant(ctx context.Context, c Consent) error {
	if err := c.validate(); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, _, err = s.View.Change(ctx, func(recs []pgstate.Record) ([]pgstate.Record, bool, error) {
		i := slices.IndexFunc(recs, func(r pgstate.Record) bool { return r.ID == c.Provider })
		if i < 0 {
			return append(recs, pgstate.Record{ID: c.Provider, Data: b}), true, nil
		}
		recs[i].Data = b
		return recs, true, nil
	})
	if err != nil {
		return fmt.Errorf("locality: granting consent: %w", err)
	}
	return nil
}

// Revoke implements ConsentStore.
func (s *SharedStore) Revoke(ctx context.Context, provider string) (revoked bool, err error) {
	_, _, err = s.View.Change(ctx, func(recs []pgstate.Record) ([]pgstate.Record, bool, error) {
		n := len(recs)
		recs = slices.DeleteFunc(recs, func(r pgstate.Record) bool { return r.ID == provider })
		revoked = len(recs) < n
		return recs, revoked, nil
	})
	if err != nil {
		return false, fmt.Errorf("locality: revoking consent: %w", err)
	}
	return revoked, nil
}

// List implements ConsentStore.
func (s *SharedStore) List(ctx context.Context) ([]Consent, error) {
	_, recs, err := s.View.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("locality: reading consents: %w", err)
	}
	cs := make([]Consent, 0, len(recs))
	for _, r := range recs {
		c, err := decodeConsent(r)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	sortConsents(cs)
	return cs, nil
}

// FileRecords returns the consents the file holds as the records of
// [ConsentSet], for a project moving its state to PostgreSQL.
func (s *FileStore) FileRecords() ([]pgstate.Record, error) {
	defer s.lock()()
	cs, err := s.read()
	if err != nil {
		return nil, err
	}
	recs := make([]pgstate.Record, 0, len(cs))
	for _, c := range cs {
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		recs = append(recs, pgstate.Record{ID: c.Provider, Data: b})
	}
	return recs, nil
}
