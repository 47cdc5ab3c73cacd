package gateway

import (
	"cmp"
	"context"
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

	"github.com/cortexbuild/cortexbuild/internal/atomicfile"
	"github.com/cortexbuild/cortexbuild/internal/filepoll"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
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
	// ErrNoSuchKey: Revoke or Update named no key of the store.
	ErrNoSuchKey = errors.New("no such key")
	// ErrExpiredKey: the key's expiry has passed; the error is an
	// [*ExpiredKeyError], which says when.
	ErrExpiredKey = errors.New("this API key expired")
)

// ExpiredKeyError says that a key expired, and when.
type ExpiredKeyError struct {
	ID string
	At time.Time
}

func (e *ExpiredKeyError) Error() string {
	return fmt.Sprintf("API key %s expired at %s", e.ID, e.At.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrExpiredKey) true.
func (e *ExpiredKeyError) Is(target error) bool { return target == ErrExpiredKey }

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
	// Agents, when set, are the only agents the key may call as, each on
	// its own tier and providers (like a key bound to one Agent).
	Agents []string `json:"agents,omitempty"`
	// KeyLimits are the key's budget, rate limits and expiry.
	KeyLimits
	// CreatedAt is when the key was created; RevokedAt when it was
	// revoked (nil while it is active).
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// KeyLimits are what a call key may spend, how fast, and until when. The
// zero value limits nothing.
type KeyLimits struct {
	// Budget, when set, is what the calls made with the key may cost per
	// Period, in USD: enforced by the ledger like the task and month
	// budgets (a reservation against the key's scope, all or nothing with
	// the others).
	Budget *provider.Money `json:"budget_usd,omitempty"`
	// Period is the budget's period: day, month (the default) or total
	// (the key's lifetime). Days and months are counted in the project's
	// budget time zone (budgets.timezone).
	Period string `json:"budget_period,omitempty"`
	// RPM and TPM, when positive, bound the model calls and the tokens
	// (input and output, as the providers bill them) per minute of the
	// key, in each gateway process.
	RPM int   `json:"rpm,omitempty"`
	TPM int64 `json:"tpm,omitempty"`
	// ExpiresAt, when set, is when the key stops being accepted.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// BudgetPeriod returns the period of the key's budget: Period, or month
// when none is set.
func (l KeyLimits) BudgetPeriod() string { return cmp.Or(l.Period, ledger.PeriodMonth) }

// Check refuses limits that cannot be enforced: a negative budget, an
// unknown period, a period without a budget, negative rates.
func (l KeyLimits) Check() error {
	switch {
	case l.Budget != nil && *l.Budget < 0:
		return fmt.Errorf("the key's budget $%s is negative: give an amount in USD of 0 or more", *l.Budget)
	case l.Period != "" && !slices.Contains(ledger.Periods, l.Period):
		return fmt.Errorf("unknown budget period %q: use day, month or total", l.Period)
	case l.Period != "" && l.Budget == nil:
		return fmt.Errorf("a budget period (%s) needs a budget: give one with --budget", l.Period)
	case l.RPM < 0:
		return fmt.Errorf("the key's requests per minute (%d) is negative: give 0 (no limit) or more", l.RPM)
	case l.TPM < 0:
		return fmt.Errorf("the key's tokens per minute (%d) is negative: give 0 (no limit) or more", l.TPM)
	}
	return nil
}

// Expired reports whether the key's expiry is at or before now.
func (k Key) Expired(now time.Time) bool { return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) }

// ParseExpiry reads an expiry as given at the command line: a duration
// from now ("720h"), a date ("2027-01-31": the key expires at the start of
// that day, UTC) or an RFC 3339 time. It must be after now.
func ParseExpiry(s string, now time.Time) (time.Time, error) {
	var at time.Time
	if d, err := time.ParseDuration(s); err == nil {
		at = now.Add(d)
	} else if t, err := time.Parse("2006-01-02", s); err == nil {
		at = t
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		at = t
	} else {
		return time.Time{}, fmt.Errorf("expiry %q: give a duration (720h), a date (2027-01-31) or an RFC 3339 time (2027-01-31T18:00:00Z)", s)
	}
	at = at.UTC().Truncate(time.Second)
	if !at.After(now) {
		return time.Time{}, fmt.Errorf("expiry %q is %s, not in the future", s, at.Format(time.RFC3339))
	}
	return at, nil
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
	// Agents allow the key to call as these agents only.
	Agents []string
	// KeyLimits are the key's budget, rate limits and expiry.
	KeyLimits
}

// Check refuses a spec that cannot make a usable key; an empty Role is
// the default, call.
func (spec KeySpec) Check() error {
	return Key{Role: spec.Role, Agent: spec.Agent, Task: spec.Task, Models: spec.Models, Agents: spec.Agents, KeyLimits: spec.KeyLimits}.Check()
}

// Check refuses a key that cannot be used as it is described: an unknown
// role, an admin key with call limits, empty names, an agent binding with
// a list of agents besides, or limits that [KeyLimits.Check] refuses.
func (k Key) Check() error {
	role := cmp.Or(k.Role, RoleCall)
	limited := k.Budget != nil || k.Period != "" || k.RPM != 0 || k.TPM != 0
	switch {
	case !slices.Contains(Roles, role):
		return fmt.Errorf("unknown key role %q: the roles are call (model calls) and admin (the console)", k.Role)
	case role == RoleAdmin && (k.Agent != "" || k.Task != "" || len(k.Models) > 0 || len(k.Agents) > 0 || limited):
		return errors.New("an admin key makes no model calls: it takes no agent, agents, task, models, budget or rate limits")
	case slices.Contains(k.Models, ""):
		return errors.New("an allowed model name is empty")
	case slices.Contains(k.Agents, ""):
		return errors.New("an allowed agent name is empty")
	case k.Agent != "" && len(k.Agents) > 0:
		return fmt.Errorf("the key is bound to agent %s: it takes no list of agents besides (give --agents alone)", k.Agent)
	}
	return k.KeyLimits.Check()
}

// KeyStore keeps virtual keys in a JSON file with mode 0600, hashed. Every
// method is safe for concurrent use; a change made by another process
// (cortexbuild serve keys revoke while the server runs) is seen on the next
// check, because the file is stat'ed on every check (at most once per
// [KeyStore.SetRecheck] period) and re-read when it changed. Every write
// (Create, Update, Revoke, Rebind) holds an exclusive lock on the file
// gateway-keys.json.lock beside it, taken by every process and store
// writing the file, and changes the keys the file holds at that moment:
// concurrent commands, gateways and consoles lose none of each other's
// writes.
//
// A store opened with [OpenSharedKeyStore] keeps the keys in PostgreSQL
// instead (a project on store.backend: postgres), one row per key, for
// every replica of a fleet: the same methods, the same checks; a key
// created or revoked by any process is seen by the others at most one
// recheck period later.
type KeyStore struct {
	path   string
	shared *pgstate.View // nil: the file at path
	now    func() time.Time

	mu    sync.Mutex
	poll  filepoll.Throttle
	keys  []storedKey
	stamp os.FileInfo // the file as last read; nil when it did not exist
	read  bool
	// version is the shared set's version the keys were decoded from.
	version int64
}

// KeySet is the kind of the shared state's set that holds the keys.
const KeySet = "gateway-keys"

// sharedTimeout bounds one look at, or one change of, the shared keys.
const sharedTimeout = 10 * time.Second

// OpenSharedKeyStore returns the store that keeps its keys in the shared
// set (the project's [KeySet] in its PostgreSQL state).
func OpenSharedKeyStore(set *pgstate.Set) *KeyStore {
	s := &KeyStore{now: time.Now}
	s.shared = &pgstate.View{Set: set, Now: func() time.Time {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.now()
	}}
	return s
}

// Shared reports whether the store keeps its keys in PostgreSQL.
func (s *KeyStore) Shared() bool { return s.shared != nil }

// OpenKeyStore returns the store kept at path; the file need not exist yet.
func OpenKeyStore(path string) *KeyStore {
	return &KeyStore{path: path, now: time.Now}
}

// SetClock sets the clock that stamps new keys and tells expired ones
// (default time.Now).
func (s *KeyStore) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetRecheck bounds how often a check looks at the file: a key revoked by
// another process is refused at most d later. Zero (the default) looks on
// every check; 'cortexbuild serve' uses a fraction of a second. Changes
// made through this store are seen at once.
func (s *KeyStore) SetRecheck(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poll.Every = d
	if s.shared != nil {
		s.shared.Every = d
	}
}

// Path is the file the store uses ("" for a shared store).
func (s *KeyStore) Path() string { return s.path }

// refresh re-reads the file when it changed since the last read, looking
// at most once per recheck period; a failed look is retried on the next
// call. The caller holds s.mu.
func (s *KeyStore) refresh() error {
	if s.shared != nil {
		return s.refreshShared()
	}
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
	keys, st, err := s.readFile()
	if err != nil {
		return err
	}
	s.keys, s.stamp, s.read = keys, st, true
	return nil
}

// readFile reads the keys the file holds now; a missing file holds none
// (and a nil stamp).
func (s *KeyStore) readFile() ([]storedKey, os.FileInfo, error) {
	data, st, err := atomicfile.ReadPrivate(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("key store: %w", err)
	}
	var f keyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, nil, fmt.Errorf("key store: %s is not a key file: %v", s.path, err)
	}
	if f.Version != 1 {
		return nil, nil, fmt.Errorf("key store: %s has version %d; this build reads version 1", s.path, f.Version)
	}
	return f.Keys, st, nil
}

// refreshShared reads the shared keys when their set changed and the
// period has passed.
func (s *KeyStore) refreshShared() error { return s.lookShared(false) }

// errKeysUnreachable: the shared key store's database could not be read
// (unreachable, or not answering in time), which passes; every other
// error of the key store needs the operator.
var errKeysUnreachable = errors.New("the virtual keys in PostgreSQL (the shared state) cannot be read")

// missLook bounds how often a token whose key the store does not hold
// makes a shared store look again before its period: a key created by
// another process a moment ago is accepted at once, and a stream of
// unknown tokens costs the database one small query per missLook.
const missLook = 10 * time.Millisecond

// lookShared reads the shared keys when their set changed; fresh looks
// unless the last look is less than missLook old. The caller holds s.mu,
// which the view's clock takes: the view is asked without it.
func (s *KeyStore) lookShared(fresh bool) error {
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	var ver int64
	var recs []pgstate.Record
	var err error
	if fresh {
		ver, recs, err = s.shared.Fresh(ctx, missLook)
	} else {
		ver, recs, err = s.shared.Records(ctx)
	}
	cancel()
	s.mu.Lock()
	if err != nil {
		if errors.Is(err, pgstate.ErrSchemaTooNew) {
			return fmt.Errorf("key store: %w", err)
		}
		return fmt.Errorf("key store: %w: %w", errKeysUnreachable, err)
	}
	if s.read && ver == s.version {
		return nil
	}
	keys, err := decodeKeys(recs)
	if err != nil {
		return err
	}
	s.keys, s.version, s.read = keys, ver, true
	return nil
}

func decodeKeys(recs []pgstate.Record) ([]storedKey, error) {
	keys := make([]storedKey, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Data, &keys[i]); err != nil || keys[i].ID != r.ID {
			return nil, fmt.Errorf("key store: the shared key %q is not a key record", r.ID)
		}
	}
	return keys, nil
}

func encodeKeys(keys []storedKey) ([]pgstate.Record, error) {
	recs := make([]pgstate.Record, len(keys))
	for i, k := range keys {
		b, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		recs[i] = pgstate.Record{ID: k.ID, Data: b}
	}
	return recs, nil
}

// changeShared is [KeyStore.change] on the shared set: fn runs on the
// keys as the database holds them, under the lock of the set.
func (s *KeyStore) changeShared(fn func(keys []storedKey) ([]storedKey, bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	var fnErr error
	ver, recs, err := s.shared.Change(ctx, func(recs []pgstate.Record) ([]pgstate.Record, bool, error) {
		keys, err := decodeKeys(recs)
		if err == nil {
			var changed bool
			if keys, changed, err = fn(keys); err == nil && !changed {
				return nil, false, nil
			}
		}
		var out []pgstate.Record
		if err == nil {
			out, err = encodeKeys(keys)
		}
		fnErr = err
		return out, true, err
	})
	if fnErr != nil {
		return fnErr // the keys' own error, as the file store gives it
	}
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	keys, err := decodeKeys(recs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if !s.read || ver >= s.version {
		s.keys, s.version, s.read = keys, ver, true
	}
	s.mu.Unlock()
	return nil
}

// change is every write of the store: holding the lock file beside the
// key file (which every process changing it takes, see
// [atomicfile.Locked]), it reads the keys the file holds now, never the
// copy of an earlier look, runs fn on them, and replaces the file with
// what fn returns when it reports a change. A key written by another
// process in between is so never lost nor undone, and once change returns
// nil, what fn made is in the file. The store's own view is updated at
// once.
func (s *KeyStore) change(fn func(keys []storedKey) ([]storedKey, bool, error)) error {
	if s.shared != nil {
		return s.changeShared(fn)
	}
	path := atomicfile.Target(s.path)
	return atomicfile.Locked(path, 0o755, func() error {
		keys, st, err := s.readFile()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.keys, s.stamp, s.read = keys, st, true // what the file holds now
		s.mu.Unlock()
		keys, changed, err := fn(slices.Clone(keys))
		if err != nil || !changed {
			return err
		}
		data, err := json.MarshalIndent(keyFile{Version: 1, Keys: keys}, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(path, append(data, '\n'), 0o755); err != nil {
			return fmt.Errorf("key store: %w", err)
		}
		if st, err = os.Stat(s.path); err != nil {
			return fmt.Errorf("key store: %w", err)
		}
		s.mu.Lock()
		s.keys, s.stamp, s.read = keys, st, true
		s.mu.Unlock()
		return nil
	})
}

// clock returns the store's clock's time.
func (s *KeyStore) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

// Create makes a key and returns its token, the only time the secret is
// available, with the key's description. The key is in the file when
// Create returns.
func (s *KeyStore) Create(spec KeySpec) (string, Key, error) {
	if err := spec.Check(); err != nil {
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
	now := s.clock()
	if spec.ExpiresAt != nil && !spec.ExpiresAt.After(now) {
		return "", Key{}, fmt.Errorf("the expiry %s is not in the future", spec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	k := Key{ID: id, Name: spec.Name, Project: spec.Project, Agent: spec.Agent, Task: spec.Task,
		Role: cmp.Or(spec.Role, RoleCall), Models: slices.Clone(spec.Models), Agents: slices.Clone(spec.Agents),
		KeyLimits: spec.KeyLimits, CreatedAt: now.UTC().Truncate(time.Second)}
	err := s.change(func(keys []storedKey) ([]storedKey, bool, error) {
		return append(keys, storedKey{Key: k, SHA256: hex.EncodeToString(sum[:])}), true, nil
	})
	if err != nil {
		return "", Key{}, err
	}
	return token, k, nil
}

// List returns every key, active and revoked, oldest first.
// Key returns the key named id; ok is false when the store holds none. A
// shared store not holding it looks again first: another replica may
// have created it a moment ago.
func (s *KeyStore) Key(id string) (k Key, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return Key{}, false, err
	}
	find := func() int { return slices.IndexFunc(s.keys, func(k storedKey) bool { return k.ID == id }) }
	i := find()
	if i < 0 && s.shared != nil {
		if err := s.lookShared(true); err != nil {
			return Key{}, false, err
		}
		i = find()
	}
	if i < 0 {
		return Key{}, false, nil
	}
	return s.keys[i].Key, true, nil
}

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
	stale := func(k storedKey) bool { return k.Project != project && slices.Contains(from, k.Project) }
	s.mu.Lock()
	err := s.refresh()
	found := slices.ContainsFunc(s.keys, stale)
	s.mu.Unlock()
	if err != nil || !found {
		return 0, err // nothing to change: no lock taken, nothing written
	}
	n := 0
	err = s.change(func(keys []storedKey) ([]storedKey, bool, error) {
		n = 0
		for i := range keys {
			if stale(keys[i]) {
				keys[i].Project = project
				n++
			}
		}
		return keys, n > 0, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// PublicID returns the id of a key named by its id, its hint
// "cbk_<id>_…" or its whole token (whose secret is dropped).
func PublicID(id string) string {
	id = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(id, keyPrefix), "…"), "_")
	if i := strings.IndexByte(id, '_'); i >= 0 {
		id = id[:i] // a whole token: keep its public part only
	}
	return id
}

// Update changes the key with id (or its hint) with change, which is
// given a copy of the key: its name, allowed agents and models, and
// limits may change; its id, project, role and dates may not. The changed
// key is checked like a new one and written for every process sharing the
// file (each sees it on its next check). A revoked key is not changed.
func (s *KeyStore) Update(id string, change func(*Key) error) (Key, error) {
	return s.modify(id, func(k *Key) (bool, error) {
		if k.RevokedAt != nil {
			return false, fmt.Errorf("key %s was revoked: create another with 'cortexbuild serve keys create'", k.ID)
		}
		old := *k
		if err := change(k); err != nil {
			return false, err
		}
		if k.ID != old.ID || k.Project != old.Project || k.Role != old.Role || !k.CreatedAt.Equal(old.CreatedAt) || k.RevokedAt != old.RevokedAt {
			return false, errors.New("a key's id, project, role and dates cannot be changed")
		}
		return true, k.Check()
	})
}

// Revoke revokes the key with id (its hint "cbk_<id>_…" is accepted too)
// and returns it. Revoking a revoked key changes nothing.
func (s *KeyStore) Revoke(id string) (Key, error) {
	return s.modify(id, func(k *Key) (bool, error) {
		if k.RevokedAt != nil {
			return false, nil
		}
		now := s.clock().UTC().Truncate(time.Second)
		k.RevokedAt = &now
		return true, nil
	})
}

// modify runs fn on a copy of the key with id (or its hint), as the file
// holds it now (read under the file's lock, see [KeyStore.change]), and
// writes the keys for every process sharing the file when fn reports a
// change. It returns the key as fn left it.
func (s *KeyStore) modify(id string, fn func(*Key) (changed bool, err error)) (Key, error) {
	id = PublicID(id)
	var k Key
	err := s.change(func(keys []storedKey) ([]storedKey, bool, error) {
		i := slices.IndexFunc(keys, func(k storedKey) bool { return k.ID == id })
		if i < 0 {
			return nil, false, fmt.Errorf("%w %q", ErrNoSuchKey, id)
		}
		k = keys[i].Key
		k.Models, k.Agents = slices.Clone(k.Models), slices.Clone(k.Agents)
		changed, err := fn(&k)
		if err != nil || !changed {
			return nil, false, err
		}
		keys[i].Key = k
		return keys, true, nil
	})
	if err != nil {
		return Key{}, err
	}
	return k, nil
}

// Check returns the key a token belongs to. The token's public part finds
// the record; the secret is compared as a SHA-256 hash in constant time.
// It fails with [ErrInvalidKey], [ErrRevokedKey], an [*ExpiredKeyError],
// or an error reading the store.
func (s *KeyStore) Check(token string) (Key, error) {
	s.mu.Lock()
	if err := s.refresh(); err != nil {
		s.mu.Unlock()
		return Key{}, err
	}
	id := ""
	if rest, ok := strings.CutPrefix(token, keyPrefix); ok {
		id, _, _ = strings.Cut(rest, "_")
	}
	if s.shared != nil && id != "" && !slices.ContainsFunc(s.keys, func(k storedKey) bool { return k.ID == id }) {
		// Perhaps created by another replica since the last look.
		if err := s.lookShared(true); err != nil {
			s.mu.Unlock()
			return Key{}, err
		}
	}
	keys, now := s.keys, s.now()
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(token))
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
	if found.Expired(now) {
		return Key{}, &ExpiredKeyError{ID: found.ID, At: *found.ExpiresAt}
	}
	return found.Key, nil
}

// FileRecords returns the keys the file holds as the records of [KeySet]
// (hashes and descriptions, as the file has them), for a project moving
// its keys to PostgreSQL. A shared store has no file and returns none.
func (s *KeyStore) FileRecords() ([]pgstate.Record, error) {
	if s.shared != nil {
		return nil, nil
	}
	keys, _, err := s.readFile()
	if err != nil {
		return nil, err
	}
	return encodeKeys(keys)
}
