package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
)

// The files under .cortexbuild/ whose records move to PostgreSQL when the
// project's store is PostgreSQL.
const (
	consentFile      = "consent.json"
	projectStateFile = "project-state.json"
	// importedSuffix is added to a file's name once its records are in
	// the shared state: the file is kept, and no longer read.
	importedSuffix = ".imported"
)

// sharedProject is a project's shared state, opened once per process.
type sharedProject struct {
	store    *pgstate.Store
	consents *locality.SharedStore
	pause    *orchestrator.SharedState
	breakers *orchestrator.SharedBreakers
}

// sharedStates are the shared states a process opened, by configuration
// file; closed when the command ends.
type sharedStates struct {
	mu sync.Mutex
	m  map[string]*sharedProject
}

func (s *sharedStates) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, p := range s.m {
		p.store.Close()
		delete(s.m, k)
	}
}

// sharedPostgres reports whether the project keeps its shared state
// (keys, consents, pause) in PostgreSQL: when its store is PostgreSQL.
func sharedPostgres(f *config.File) bool { return f.Store.Backend == config.StorePostgres }

// sharedState opens the project's shared state in the PostgreSQL of
// store.dsn, once per process, and the first time moves into it the
// records of the files an earlier setup on one machine kept (see
// importFiles). Its views look for other processes' changes at most every
// e.recheck.
func (e *env) sharedState(ctx context.Context, f *config.File) (*sharedProject, error) {
	if e.shared == nil {
		return nil, withCode(ExitFailure, errors.New("shared state: opened outside a command"))
	}
	e.shared.mu.Lock()
	defer e.shared.mu.Unlock()
	if p, ok := e.shared.m[f.Path]; ok {
		return p, nil
	}
	dsn, err := f.Store.DSN.Resolve(e.lookupEnv)
	if err != nil {
		return nil, withCode(ExitConfig, err)
	}
	mode := locality.ModeConsent
	if f.Locality.Mode == config.LocalityLocalOnly {
		mode = locality.ModeLocalOnly
	}
	// The store's connections pass the locality gate's service rule,
	// which asks no consent record: the gate's mode is all it needs.
	g := &locality.Gate{Mode: mode, Resolver: e.resolver, Dial: e.dial}
	st, err := pgstate.Open(ctx, dsn, pgstate.Options{Project: e.project(f), Dial: g.ServiceDial(svcStore), MaxConns: 4})
	if r := refusedAt(f.Store.DSN.Pos(), err); r != nil {
		return nil, r
	}
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("shared state: %w", err))
	}
	p := &sharedProject{
		store:    st,
		consents: locality.NewSharedStore(st.Set(locality.ConsentSet), e.recheck),
		pause:    orchestrator.NewSharedState(st.Set(orchestrator.PauseSet), e.recheck),
		breakers: orchestrator.NewSharedBreakers(st.Set(orchestrator.BreakerSet), e.recheck),
	}
	if err := e.importFiles(ctx, f, st); err != nil {
		st.Close()
		return nil, withCode(ExitFailure, err)
	}
	if e.shared.m == nil {
		e.shared.m = map[string]*sharedProject{}
	}
	e.shared.m[f.Path] = p
	return p, nil
}

// importFiles moves into the shared state the records of the files a
// project kept under .cortexbuild/ before its store was PostgreSQL (its
// virtual keys, its consents, its pause): each record the shared state
// does not hold yet is added, one it holds is kept as it is (never
// overwritten), and the file is then renamed with the suffix .imported,
// kept for reference and no longer read. Importing is so done once per
// file; a rename that fails leaves the file to be imported again, which
// adds nothing twice.
func (e *env) importFiles(ctx context.Context, f *config.File, st *pgstate.Store) error {
	dir := e.stateDir(f)
	files := []struct {
		set, path, what string
		records         func() ([]pgstate.Record, error)
	}{
		{gateway.KeySet, e.keyPath(f), "virtual keys", func() ([]pgstate.Record, error) {
			ks := gateway.OpenKeyStore(e.keyPath(f))
			// Keys created under the names older versions gave the
			// project belong to it.
			if _, err := ks.Rebind(e.project(f), filepath.Base(e.projectDir(f)), "."); err != nil {
				return nil, err
			}
			return ks.FileRecords()
		}},
		{locality.ConsentSet, filepath.Join(dir, consentFile), "consents", func() ([]pgstate.Record, error) {
			return locality.NewFileStore(filepath.Join(dir, consentFile)).FileRecords()
		}},
		{orchestrator.PauseSet, filepath.Join(dir, projectStateFile), "project pause", func() ([]pgstate.Record, error) {
			return (&orchestrator.FileState{Path: filepath.Join(dir, projectStateFile)}).FileRecords()
		}},
	}
	for _, file := range files {
		if _, err := os.Lstat(file.path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		recs, err := file.records()
		if err != nil {
			return fmt.Errorf("moving %s into the shared state (PostgreSQL): %w; fix or remove the file", file.path, err)
		}
		n, err := st.Set(file.set).Import(ctx, recs)
		if err != nil {
			return fmt.Errorf("moving %s into the shared state (PostgreSQL): %w", file.path, err)
		}
		kept := file.path + importedSuffix
		if err := os.Rename(file.path, kept); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("moving %s into the shared state (PostgreSQL): its %d records are there; renaming it: %w", file.path, len(recs), err)
		}
		fmt.Fprintf(e.stderr, "cortexbuild: moved the %s of %s into the shared state (PostgreSQL): %d added, %d already there; the file is kept as %s and no longer read\n",
			file.what, file.path, n, len(recs)-n, kept)
	}
	return nil
}

// keyStore opens the project's key store: the shared one in PostgreSQL
// when the project's store is PostgreSQL, else the file, after binding to
// the project's id the keys created under the names an older version gave
// the project (the base name of its directory, or "." for a relative
// --config).
func (e *env) keyStore(ctx context.Context, f *config.File) (*gateway.KeyStore, error) {
	if sharedPostgres(f) {
		p, err := e.sharedState(ctx, f)
		if err != nil {
			return nil, err
		}
		ks := gateway.OpenSharedKeyStore(p.store.Set(gateway.KeySet))
		ks.SetRecheck(e.recheck)
		return ks, nil
	}
	ks := gateway.OpenKeyStore(e.keyPath(f))
	if _, err := ks.Rebind(e.project(f), filepath.Base(e.projectDir(f)), "."); err != nil {
		return nil, err
	}
	return ks, nil
}

// projectState is where the project's pause is kept: the shared state
// when the project's store is PostgreSQL (opened on first use), else
// .cortexbuild/project-state.json.
func (e *env) projectState(f *config.File) orchestrator.State {
	if sharedPostgres(f) {
		return &sharedPause{e: e, f: f}
	}
	return &orchestrator.FileState{Path: filepath.Join(e.stateDir(f), projectStateFile), Recheck: e.recheck}
}

// sharedPause opens the shared state on first use; a failure to open is
// every call's error (so a call is refused, not let through).
type sharedPause struct {
	e *env
	f *config.File
}

func (s *sharedPause) state(ctx context.Context) (orchestrator.State, error) {
	p, err := s.e.sharedState(ctx, s.f)
	if err != nil {
		return nil, err
	}
	return p.pause, nil
}

func (s *sharedPause) Paused(ctx context.Context) (string, bool, error) {
	st, err := s.state(ctx)
	if err != nil {
		return "", false, err
	}
	return st.Paused(ctx)
}

func (s *sharedPause) Pause(ctx context.Context, reason string) error {
	st, err := s.state(ctx)
	if err != nil {
		return err
	}
	return st.Pause(ctx, reason)
}

func (s *sharedPause) Resume(ctx context.Context) error {
	st, err := s.state(ctx)
	if err != nil {
		return err
	}
	return st.Resume(ctx)
}

// consentStore is where the project's consents are kept: the shared state
// when the project's store is PostgreSQL (opened on first use), else
// .cortexbuild/consent.json.
func (e *env) consentStore(f *config.File) locality.ConsentStore {
	if sharedPostgres(f) {
		return &sharedConsents{e: e, f: f}
	}
	return locality.NewFileStore(filepath.Join(e.stateDir(f), consentFile))
}

// sharedConsents opens the shared state on first use, so that building a
// gate needs no connection; a failure to open is every call's error.
type sharedConsents struct {
	e *env
	f *config.File
}

func (s *sharedConsents) store(ctx context.Context) (locality.ConsentStore, error) {
	p, err := s.e.sharedState(ctx, s.f)
	if err != nil {
		return nil, err
	}
	return p.consents, nil
}

func (s *sharedConsents) Consent(ctx context.Context, provider string) (locality.Consent, bool, error) {
	st, err := s.store(ctx)
	if err != nil {
		return locality.Consent{}, false, err
	}
	return st.Consent(ctx, provider)
}

func (s *sharedConsents) Grant(ctx context.Context, c locality.Consent) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	return st.Grant(ctx, c)
}

func (s *sharedConsents) Revoke(ctx context.Context, provider string) (bool, error) {
	st, err := s.store(ctx)
	if err != nil {
		return false, err
	}
	return st.Revoke(ctx, provider)
}

func (s *sharedConsents) List(ctx context.Context) ([]locality.Consent, error) {
	st, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.List(ctx)
}

// sharedBreakers opens the shared state on first use; a failure to open
// is every call's error.
type sharedBreakers struct {
	e *env
	f *config.File
}

func (s *sharedBreakers) LoadBreakers(ctx context.Context) ([]orchestrator.BreakerState, error) {
	p, err := s.e.sharedState(ctx, s.f)
	if err != nil {
		return nil, err
	}
	return p.breakers.LoadBreakers(ctx)
}

func (s *sharedBreakers) SaveBreaker(ctx context.Context, st orchestrator.BreakerState) error {
	p, err := s.e.sharedState(ctx, s.f)
	if err != nil {
		return err
	}
	return p.breakers.SaveBreaker(ctx, st)
}
