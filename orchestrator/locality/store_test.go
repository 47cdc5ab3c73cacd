package locality

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), ".cortexbuild", "consent.json")
	s := NewFileStore(path)

	// Missing file: empty, and reading creates nothing.
	if cs, err := s.List(ctx); err != nil || len(cs) != 0 {
		t.Fatalf("missing file lists %v, %v", cs, err)
	}
	if _, ok, err := s.Consent(ctx, "cloud"); ok || err != nil {
		t.Fatalf("missing file has consent: %v, %v", ok, err)
	}
	if ok, err := s.Revoke(ctx, "cloud"); ok || err != nil {
		t.Fatalf("revoke on a missing file: %v, %v", ok, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading created the file: %v", err)
	}

	b := Consent{Provider: "b", GrantedBy: "bob", GrantedAt: testTime.Add(time.Hour)}
	for _, c := range []Consent{consentFor("cloud"), b} {
		if err := s.Grant(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if cs, err := s.List(ctx); err != nil || !slices.Equal(cs, []Consent{b, consentFor("cloud")}) {
		t.Errorf("list %+v, %v", cs, err)
	}
	if c, ok, err := s.Consent(ctx, "cloud"); !ok || err != nil || c != consentFor("cloud") {
		t.Errorf("consent %+v, %v, %v", c, ok, err)
	}
	// A second grant replaces the first.
	b2 := b
	b2.GrantedBy = "carol"
	if err := s.Grant(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.Consent(ctx, "b"); c != b2 {
		t.Errorf("re-grant: %+v", c)
	}
	if ok, err := s.Revoke(ctx, "cloud"); !ok || err != nil {
		t.Errorf("revoke: %v, %v", ok, err)
	}
	if ok, err := s.Revoke(ctx, "cloud"); ok || err != nil {
		t.Errorf("second revoke: %v, %v", ok, err)
	}
	if cs, _ := s.List(ctx); !slices.Equal(cs, []Consent{b2}) {
		t.Errorf("after revoke: %+v", cs)
	}
	if err := s.Grant(ctx, Consent{Provider: "x", GrantedAt: testTime}); err == nil {
		t.Error("grant without grantor accepted")
	}

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
		}
	}
	// The file is plain, readable JSON.
	raw, _ := os.ReadFile(path)
	var f consentFile
	if err := json.Unmarshal(raw, &f); err != nil || f.Version != 1 || len(f.Consents) != 1 {
		t.Errorf("file %s: %v", raw, err)
	}
}

func TestFileStoreSharedBetweenInstances(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "consent.json")
	s1, s2 := NewFileStore(path), NewFileStore(path)
	if err := s1.Grant(ctx, consentFor("cloud")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s2.Consent(ctx, "cloud"); !ok || err != nil {
		t.Fatalf("the other instance does not see the grant: %v, %v", ok, err)
	}
	if ok, err := s2.Revoke(ctx, "cloud"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, _ := s1.Consent(ctx, "cloud"); ok {
		t.Error("the first instance still sees a revoked consent")
	}
	// A file written by someone else (another process) is read as is.
	other := `{"version": 1, "consents": [{"provider": "p", "granted_by": "dave", "granted_at": "2026-01-02T03:04:05Z"}]}`
	if err := os.WriteFile(path, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := s1.Consent(ctx, "p"); !ok || err != nil || c.GrantedBy != "dave" {
		t.Errorf("hand-written file: %+v, %v, %v", c, ok, err)
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	ctx := context.Background()
	tests := map[string]string{
		"not JSON":           `{not json`,
		"empty file":         ``,
		"truncated":          `{"version": 1, "consents": [{"provider": "p"`,
		"trailing data":      `{"version": 1, "consents": []} {}`,
		"unknown version":    `{"version": 2, "consents": []}`,
		"no version":         `{"consents": []}`,
		"unknown field":      `{"version": 1, "consents": [], "everyone": true}`,
		"entry without who":  `{"version": 1, "consents": [{"provider": "p", "granted_at": "2026-01-02T03:04:05Z"}]}`,
		"entry without when": `{"version": 1, "consents": [{"provider": "p", "granted_by": "dave"}]}`,
		"duplicate provider": `{"version": 1, "consents": [{"provider": "p", "granted_by": "a", "granted_at": "2026-01-02T03:04:05Z"}, {"provider": "p", "granted_by": "b", "granted_at": "2026-01-02T03:04:05Z"}]}`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "consent.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s := NewFileStore(path)
			check := func(op string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") {
					t.Errorf("%s: %v, want an error naming %s as corrupt", op, err, path)
				}
			}
			_, err := s.List(ctx)
			check("List", err)
			_, _, err = s.Consent(ctx, "p")
			check("Consent", err)
			check("Grant", s.Grant(ctx, consentFor("p")))
			_, err = s.Revoke(ctx, "p")
			check("Revoke", err)
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Errorf("the corrupt file was overwritten: %q", got)
			}

			// The gate fails closed on it, and still allows loopback.
			g, r, _, _ := testGate(t, "")
			g.Consents = s
			r.set("remote.example", "192.0.2.10")
			_, err = g.Check(ctx, "p", "https://remote.example/")
			refusal(t, err, ReasonConsentUnavailable)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("gate error does not name the file: %v", err)
			}
			if dec, err := g.Check(ctx, "p", "http://127.0.0.1:11434/"); err != nil || !dec.Allowed {
				t.Errorf("loopback with a corrupt store: %+v, %v", dec, err)
			}
		})
	}
}

// TestFileStoreConcurrentGrants runs grants from several goroutines and
// two store instances while readers parse the raw file: every read must
// see a whole file, and no grant may be lost.
func TestFileStoreConcurrentGrants(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "consent.json")
	stores := []*FileStore{NewFileStore(path), NewFileStore(path)}
	const writers, grants = 8, 10

	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := os.ReadFile(path)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				var f consentFile
				if err != nil || json.Unmarshal(b, &f) != nil {
					t.Errorf("partial or unreadable file: %v, %q", err, b)
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for i := range grants {
				c := Consent{Provider: fmt.Sprintf("p%02d-%02d", w, i), GrantedBy: "alice", GrantedAt: testTime}
				if err := s.Grant(ctx, c); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()

	cs, err := stores[0].List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != writers*grants {
		t.Errorf("%d consents, want %d", len(cs), writers*grants)
	}
	// The file and the lock file beside it; no temporary file.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files left in the directory: %q", names)
	}
}

// TestGateSeesRevocationByAnotherStore: a revocation through another
// FileStore on the same file (as `cortexbuild consent revoke` in another
// process would do) stops the next connection of a running gate.
func TestGateSeesRevocationByAnotherStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "consent.json")
	g, r, d, _ := testGate(t, "")
	g.Consents = NewFileStore(path)
	r.set("remote.example", "192.0.2.10")
	if _, err := g.Grant(ctx, "cloud", "alice", "http://remote.example/v1"); err != nil {
		t.Fatal(err)
	}
	c := g.Client("cloud", nil)
	if _, err := get(t, c, "http://remote.example/v1"); !errors.Is(err, errTestRefused) {
		t.Fatalf("with consent: %v", err)
	}
	if ok, err := NewFileStore(path).Revoke(ctx, "cloud"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	_, err := get(t, c, "http://remote.example/v1")
	refusal(t, err, ReasonNoConsent)
	if got := d.Dials(); len(got) != 1 {
		t.Errorf("dials %q, want the one made with consent", got)
	}
}
