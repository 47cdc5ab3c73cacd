package gateway

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
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

	"github.com/cortexbuild/cortexbuild/internal/atomicfile"
)

// KeyFileName is the file, in the project's .cortexbuild/ directory, that
// holds the gateway's virtual keys.
const KeyFileName = "gateway-keys.json"

// keyPrefix starts every virtual key, so that one is recognisable in a
// configuration file or a leaked log.
const keyPrefix = "cbk_"

// Errors of [KeyStore.Check] and [KeyStore.Revoke].
var (
	// ErrInvalidKey: the token is not a key of this store.
	ErrInvalidKey = errors.New("invalid API key")
	// ErrRevokedKey: the key was revoked.
	ErrRevokedKey = errors.New("this API key was revoked")
	// ErrNoSuchKey: Revoke named no key of the store.
	ErrNoSuchKey = errors.New("no such key")
)

// Role is what a key may do.
type Role string

// The roles. A key's role is fixed when it is created.
const (
	// RoleCall keys make model calls (the /v1/ routes) and nothing else.
	RoleCall Role = "call"
	// RoleAdmin keys open the web console, which replaces provider keys,
	// grants and revokes consent, and pauses and resumes; they make no
	// model calls.
	RoleAdmin Role = "admin"
)

// Roles are the roles a key can be created with.
var Roles = []Role{RoleCall, RoleAdmin}

// Key is a virtual key as the store describes it: everything but the
// secret, which is kept only as a SHA-256 hash and shown once, when the key
// is created.
type Key struct {
	// ID is the public part of the key ("cbk_<ID>_<secret>").
	ID string `json:"id"`
	// Name is a label for people ("claude-code on laptop").
	Name string `json:"name,omitempty"`
	// Project is the project the key belongs to.
	Project string `json:"project"`
	// Agent and Task, when set, bind every call made with the key to that
	// agent and that task: a request naming another is refused.
	Agent string `json:"agent,omitempty"`
	Task  string `json:"task,omitempty"`
	// Role is what the key may do. A key written without one (by a
	// version that had no roles) is a call key: it keeps making model
	// calls and no longer opens the console.
	Role Role `json:"role,omitempty"`
	// Models, when set, are the only model names the key may send (names
	// as GET /v1/models lists them, or the exact provider/model one
	// resolves to).
	Models []string `json:"models,omitempty"`
	// CreatedAt is when the key was created; RevokedAt when it was
	// revoked (nil while it is active).
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Hint is how the key is shown in listings: its public prefix, never the
// secret.
func (k Key) Hint() string { return keyPrefix + k.ID + "_…" }

// Active reports whether the key is not revoked.
func (k Key) Active() bool { return k.RevokedAt == nil }

// Admin reports whether the key has the admin role. Any other value
// (none, or one this version does not know) is a call key.
func (k Key) Admin() bool { return k.Role == RoleAdmin }

// storedKey is a key as written to the file.
type storedKey struct {
	Key
	// SHA256 is the hex SHA-256 of the whole token.
	SHA256 string `json:"sha256"`
}

type keyFile struct {
	Version int         `json:"version"`
	Keys    []storedKey `json:"keys"`
}

// KeySpec describes a key to create.
type KeySpec struct {
	Name    string
	Project string
	// Role defaults to [RoleCall]. An admin key takes no Agent, Task or
	// Models: those scope model calls, which it does not make.
	Role   Role
	Agent  string
	Task   string
	Models []string
}

// Check refuses a spec that cannot make a usable key; an empty Role is
// the default, call.
func (spec KeySpec) Check() error {
	if spec.Role == "" {
		spec.Role = RoleCall
	}
	switch {
	case !slices.Contains(Roles, spec.Role):
		return fmt.Errorf("unknown key role %q: the roles are call (model calls) and admin (the console)", spec.Role)
	case spec.Role == RoleAdmin && (spec.Agent != "" || spec.Task != "" || len(spec.Models) > 0):
		return errors.New("an admin key makes no model calls: it takes no agent, task or models")
	case slices.Contains(spec.Models, ""):
		return errors.New("an allowed model name is empty")
	}
	return nil
}

// KeyStore keeps virtual keys in a JSON file with mode 0600, hashed. Every
// method is safe for concurrent use; a change made by another process
// (cortexbuild serve keys revoke while the server runs) is seen on the next
// check, because the file is stat'ed on every check (at most once per
// [KeyStore.SetRecheck] period) and re-read when it changed.
type KeyStore struct {
	path string
	now  func() time.Time

	mu    sync.Mutex
	poll  filepoll.Throttle
	keys  []storedKey
	stamp os.FileInfo // the file as last read; nil when it did not exist
	read  bool
}

// OpenKeyStore returns the store kept at path; the file need not exist yet.
func OpenKeyStore(path string) *KeyStore {
	return &KeyStore{path: path, now: time.Now}
}

// SetRecheck bounds how often a check looks at the file: a key revoked by
// another process is refused at most d later. Zero (the default) looks on
// every check; 'cortexbuild serve' uses a fraction of a second. Changes
// made through this store are seen at once.
func (s *KeyStore) SetRecheck(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poll.Every = d
}

// Path is the file the store uses.
func (s *KeyStore) Path() string { return s.path }

// refresh re-reads the file when it changed since the last read, looking
// at most once per recheck period; a failed look is retried on the next
// call. The caller holds s.mu.
func (s *KeyStore) refresh() error {
	if due := s.poll.Due(); s.read && !due {
		return nil
	}
	if err := s.load(); err != nil {
		s.poll.Reset()
		return err
	}
	return nil
}

func (s *KeyStore) load() error {
	st, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.keys, s.stamp, s.read = nil, nil, true
		return nil
	}
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	// The mode is checked on every look, before the unchanged file is
	// skipped: a chmod changes neither its content nor its mtime.
	if err := atomicfile.CheckPrivate(s.path, st); err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	if s.read && s.stamp != nil && os.SameFile(st, s.stamp) && st.ModTime().Equal(s.stamp.ModTime()) && st.Size() == s.stamp.Size() {
		return nil
	}
	data, st, err := atomicfile.ReadPrivate(s.path)
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	var f keyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("key store: %s is not a key file: %v", s.path, err)
	}
	if f.Version != 1 {
		return fmt.Errorf("key store: %s has version %d; this build reads version 1", s.path, f.Version)
	}
	s.keys, s.stamp, s.read = f.Keys, st, true
	return nil
}

// write replaces the file atomically with mode 0600. The caller holds s.mu.
func (s *KeyStore) write(keys []storedKey) error {
	data, err := json.MarshalIndent(keyFile{Version: 1, Keys: keys}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(atomicfile.Target(s.path), append(data, '\n'), 0o755); err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	s.read = false // re-stat on the next refresh
	return s.refresh()
}

// Create makes a key and returns its token, the only time the secret is
// available, with the key's description.
func (s *KeyStore) Create(spec KeySpec) (string, Key, error) {
	if err := spec.Check(); err != nil {
		return "", Key{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return "", Key{}, err
	}
	var idb [8]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", Key{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Key{}, err
	}
	id := hex.EncodeToString(idb[:])
	token := keyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(token))
	k := Key{ID: id, Name: spec.Name, Project: spec.Project, Agent: spec.Agent, Task: spec.Task,
		Role: cmp.Or(spec.Role, RoleCall), Models: slices.Clone(spec.Models), CreatedAt: s.now().UTC().Truncate(time.Second)}
	keys := append(slices.Clone(s.keys), storedKey{Key: k, SHA256: hex.EncodeToString(sum[:])})
	if err := s.write(keys); err != nil {
		return "", Key{}, err
	}
	return token, k, nil
}

// List returns every key, active and revoked, oldest first.
func (s *KeyStore) List() ([]Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return nil, err
	}
	out := make([]Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = k.Key
	}
	return out, nil
}

// Rebind binds to project the keys bound to one of the names in from, and
// returns how many it changed. It is how a project adopts the keys created
// while its name was derived from the spelling of its path (its directory's
// base name, or "."): they stay valid under its stable id.
func (s *KeyStore) Rebind(project string, from ...string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return 0, err
	}
	keys := slices.Clone(s.keys)
	n := 0
	for i := range keys {
		if keys[i].Project != project && slices.Contains(from, keys[i].Project) {
			keys[i].Project = project
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, s.write(keys)
}

// Revoke revokes the key with id (its hint "cbk_<id>_…" is accepted too)
// and returns it. Revoking a revoked key changes nothing.
func (s *KeyStore) Revoke(id string) (Key, error) {
	id = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(id, keyPrefix), "…"), "_")
	if i := strings.IndexByte(id, '_'); i >= 0 {
		id = id[:i] // a whole token: keep its public part only
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return Key{}, err
	}
	keys := slices.Clone(s.keys)
	for i := range keys {
		if keys[i].ID != id {
			continue
		}
		if keys[i].RevokedAt != nil {
			return keys[i].Key, nil
		}
		now := s.now().UTC().Truncate(time.Second)
		keys[i].RevokedAt = &now
		if err := s.write(keys); err != nil {
			return Key{}, err
		}
		return keys[i].Key, nil
	}
	return Key{}, fmt.Errorf("%w %q", ErrNoSuchKey, id)
}

// Check returns the key a token belongs to. The token's public part finds
// the record; the secret is compared as a SHA-256 hash in constant time.
// It fails with [ErrInvalidKey] or [ErrRevokedKey], or an error reading
// the store.
func (s *KeyStore) Check(token string) (Key, error) {
	s.mu.Lock()
	if err := s.refresh(); err != nil {
		s.mu.Unlock()
		return Key{}, err
	}
	keys := s.keys
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(token))
	id := ""
	if rest, ok := strings.CutPrefix(token, keyPrefix); ok {
		id, _, _ = strings.Cut(rest, "_")
	}
	var want [sha256.Size]byte
	var found *storedKey
	for i := range keys {
		if keys[i].ID == id {
			found = &keys[i]
			break
		}
	}
	if found != nil {
		if b, err := hex.DecodeString(found.SHA256); err == nil && len(b) == sha256.Size {
			copy(want[:], b)
		}
	}
	// Compare even when no record matched, so that an unknown id and a
	// wrong secret take the same time.
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || found == nil {
		return Key{}, ErrInvalidKey
	}
	if found.RevokedAt != nil {
		return Key{}, ErrRevokedKey
	}
	return found.Key, nil
}
