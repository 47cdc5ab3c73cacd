package locality

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
)

// sharedConsentPair opens one project's consents twice on one PostgreSQL,
// as two replicas would, each looking every recheck on clock now.
func sharedConsentPair(t *testing.T, recheck time.Duration, now func() time.Time) (a, b *SharedStore) {
	a, b, _ = sharedConsentSite(t, recheck, now)
	return a, b
}

func sharedConsentSite(t *testing.T, recheck time.Duration, now func() time.Time) (a, b *SharedStore, site pgstatetest.Site) {
	t.Helper()
	site = pgstatetest.New(t)
	a = NewSharedStore(site.Open(t, "demo").Set(ConsentSet), recheck)
	b = NewSharedStore(site.Open(t, "demo").Set(ConsentSet), recheck)
	a.View.Now, b.View.Now = now, now
	return a, b, site
}

// A consent granted on one replica is seen on another; revoked there, it
// is gone on the first once its period (500 ms) has passed, not before.
func TestSharedConsentAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	clock := testTime
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	a, b := sharedConsentPair(t, 500*time.Millisecond, now)
	if _, ok, err := b.Consent(ctx, "cloud"); ok || err != nil {
		t.Fatalf("before any grant: %v, %v", ok, err)
	}
	if err := a.Grant(ctx, consentFor("cloud")); err != nil {
		t.Fatal(err)
	}
	advance(500 * time.Millisecond)
	c, ok, err := b.Consent(ctx, "cloud")
	if err != nil || !ok || c != consentFor("cloud") {
		t.Fatalf("granted on the other replica: %+v %v %v", c, ok, err)
	}
	if _, ok, _ := a.Consent(ctx, "cloud"); !ok { // a looks now
		t.Fatal("the granting replica lost its consent")
	}
	if revoked, err := b.Revoke(ctx, "cloud"); err != nil || !revoked {
		t.Fatalf("revoke = %v, %v", revoked, err)
	}
	if _, ok, _ := b.Consent(ctx, "cloud"); ok {
		t.Fatal("the replica that revoked still has the consent")
	}
	if _, ok, _ := a.Consent(ctx, "cloud"); !ok {
		t.Fatal("gone before the period passed: the view does not cache")
	}
	advance(500 * time.Millisecond)
	if _, ok, _ := a.Consent(ctx, "cloud"); ok {
		t.Fatal("revoked on another replica, still granted after the period")
	}
	if revoked, err := a.Revoke(ctx, "cloud"); err != nil || revoked {
		t.Fatalf("second revoke = %v, %v", revoked, err)
	}
	if err := a.Grant(ctx, Consent{Provider: ""}); err == nil {
		t.Fatal("a consent without a provider was recorded")
	}
}

// A gate on one replica allows a provider once consent is granted on
// another, and refuses it again once revoked there.
func TestSharedConsentOpensTheGateOfAnotherReplica(t *testing.T) {
	ctx := context.Background()
	a, b, site := sharedConsentSite(t, 0, nil)
	gate, r, _, _ := testGate(t, ModeConsent)
	gate.Consents = b
	r.set("remote.example", "203.0.113.7")
	if _, err := gate.Check(ctx, "cloud", "http://remote.example/v1"); err == nil {
		t.Fatal("remote provider allowed without consent")
	}
	if err := a.Grant(ctx, consentFor("cloud")); err != nil {
		t.Fatal(err)
	}
	if d, err := gate.Check(ctx, "cloud", "http://remote.example/v1"); err != nil || !d.Allowed {
		t.Fatalf("after a grant on another replica: %+v, %v", d, err)
	}
	if _, err := a.Revoke(ctx, "cloud"); err != nil {
		t.Fatal(err)
	}
	if _, err := gate.Check(ctx, "cloud", "http://remote.example/v1"); err == nil {
		t.Fatal("allowed after a revocation on another replica")
	}
	// Consents that cannot be read refuse the provider (fail closed).
	if err := a.Grant(ctx, consentFor("cloud")); err != nil {
		t.Fatal(err)
	}
	site.Exec(t, "ALTER TABLE _S_.records RENAME TO records_away")
	if _, err := gate.Check(ctx, "cloud", "http://remote.example/v1"); err == nil {
		t.Fatal("allowed while the consents cannot be read")
	}
	site.Exec(t, "ALTER TABLE _S_.records_away RENAME TO records")
	if d, err := gate.Check(ctx, "cloud", "http://remote.example/v1"); err != nil || !d.Allowed {
		t.Fatalf("after recovery: %+v, %v", d, err)
	}
}

// Grants and revocations made at once on two replicas lose none of each
// other's.
func TestSharedConsentConcurrentGrantsLoseNothing(t *testing.T) {
	ctx := context.Background()
	a, b := sharedConsentPair(t, 0, nil)
	var wg sync.WaitGroup
	var want []string
	for r, s := range []*SharedStore{a, b} {
		for i := range 10 {
			p := fmt.Sprintf("p%d-%02d", r, i)
			want = append(want, p)
			wg.Go(func() {
				if err := s.Grant(ctx, consentFor(p)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	cs, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Provider)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// The consents a file holds become the shared set's records, each as the
// file has it.
func TestFileRecordsOfConsents(t *testing.T) {
	ctx := context.Background()
	fs := NewFileStore(t.TempDir() + "/consent.json")
	if recs, err := fs.FileRecords(); err != nil || len(recs) != 0 {
		t.Fatalf("missing file = %v, %v", recs, err)
	}
	for _, p := range []string{"x", "y"} {
		if err := fs.Grant(ctx, consentFor(p)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := fs.FileRecords()
	if err != nil || len(recs) != 2 {
		t.Fatalf("records = %v, %v", recs, err)
	}
	for _, r := range recs {
		c, err := decodeConsent(r)
		if err != nil || c != consentFor(r.ID) {
			t.Fatalf("record %s = %+v, %v", r.ID, c, err)
		}
	}
	if _, err := decodeConsent(pgstate.Record{ID: "x", Data: []byte(`{"provider":"y","granted_by":"a","granted_at":"2026-01-01T00:00:00Z"}`)}); err == nil {
		t.Fatal("a record under another provider's id was accepted")
	}
}
