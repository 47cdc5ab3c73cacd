package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
	"github.com/cortexbuild/cortexbuild/provider"
)

// settable is a clock tests move.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settable) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settable) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sharedPair opens one project's keys twice on one PostgreSQL, as two
// replicas would (two openings, two pools), each looking for the other's
// changes at most every recheck on the clock c.
func sharedPair(t *testing.T, recheck time.Duration, c *settable) (a, b *gateway.KeyStore, site pgstatetest.Site) {
	t.Helper()
	site = pgstatetest.New(t)
	a = gateway.OpenSharedKeyStore(site.Open(t, "demo").Set(gateway.KeySet))
	b = gateway.OpenSharedKeyStore(site.Open(t, "demo").Set(gateway.KeySet))
	for _, s := range []*gateway.KeyStore{a, b} {
		s.SetRecheck(recheck)
		s.SetClock(c.now)
	}
	return a, b, site
}

// A key created on one replica is accepted by another at once (10 ms
// after its last look), even though its period has not passed: a token
// whose key it does not hold makes it look again. Revoked on the
// first, it is refused by the second once the period (here 500 ms) has
// passed, and not before (the period is what one query per period buys).
func TestSharedKeysCreateAndRevokeAcrossReplicas(t *testing.T) {
	c := &settable{t: time.Now()}
	a, b, _ := sharedPair(t, 500*time.Millisecond, c)
	if keys, err := b.List(); err != nil || len(keys) != 0 {
		t.Fatalf("empty store = %v, %v", keys, err)
	}
	token, k, err := a.Create(gateway.KeySpec{Name: "laptop", Project: "demo", Agent: "builder", KeyLimits: gateway.KeyLimits{RPM: 60}})
	if err != nil {
		t.Fatal(err)
	}
	// A miss looks again when the last look is 10 ms old.
	c.add(10 * time.Millisecond)
	got, err := b.Check(token)
	if err != nil || got.ID != k.ID || got.Agent != "builder" || got.RPM != 60 {
		t.Fatalf("check on the other replica = %+v, %v", got, err)
	}
	if _, err := b.Check(strings.TrimSuffix(token, token[len(token)-4:]) + "AAAA"); !errors.Is(err, gateway.ErrInvalidKey) {
		t.Fatalf("wrong secret = %v", err)
	}
	if _, err := b.Revoke(k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(token); !errors.Is(err, gateway.ErrRevokedKey) {
		t.Fatalf("on the replica that revoked: %v", err)
	}
	c.add(489 * time.Millisecond)
	if _, err := a.Check(token); err != nil {
		t.Fatalf("refused before the period passed (the view is not a cache?): %v", err)
	}
	c.add(time.Millisecond)
	if _, err := a.Check(token); !errors.Is(err, gateway.ErrRevokedKey) {
		t.Fatalf("revoked on another replica, after the period: %v", err)
	}
}

// Limits changed on one replica are what the other checks against after
// its period; the expiry is judged on each replica's clock.
func TestSharedKeysUpdateAcrossReplicas(t *testing.T) {
	c := &settable{t: time.Now()}
	a, b, _ := sharedPair(t, 100*time.Millisecond, c)
	token, k, err := a.Create(gateway.KeySpec{Name: "ci", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(token); err != nil {
		t.Fatal(err)
	}
	budget, _ := provider.ParseMoney("5")
	exp := c.now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := a.Update(k.ID, func(k *gateway.Key) error {
		k.Budget, k.TPM, k.ExpiresAt = &budget, 1000, &exp
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.add(100 * time.Millisecond)
	got, err := b.Check(token)
	if err != nil || got.Budget == nil || *got.Budget != budget || got.TPM != 1000 {
		t.Fatalf("updated limits on the other replica = %+v, %v", got, err)
	}
	c.add(time.Hour)
	if _, err := b.Check(token); !errors.Is(err, gateway.ErrExpiredKey) {
		t.Fatalf("expired = %v", err)
	}
	if _, err := b.Update("nope", func(*gateway.Key) error { return nil }); !errors.Is(err, gateway.ErrNoSuchKey) {
		t.Fatalf("update of no key = %v", err)
	}
}

// Keys created at once by many goroutines of two replicas are all kept,
// each accepted by both replicas with its own token, and the database
// holds hashes, never a secret.
func TestSharedKeysConcurrentCreationLosesNothing(t *testing.T) {
	c := &settable{t: time.Now()}
	a, b, site := sharedPair(t, 0, c)
	const workers, each = 8, 6
	type made struct{ id, token string }
	var mu sync.Mutex
	var all []made
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for r, s := range []*gateway.KeyStore{a, b} {
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					token, k, err := s.Create(gateway.KeySpec{Name: fmt.Sprintf("r%d-w%d-%d", r, w, i), Project: "demo"})
					if err != nil {
						errs <- err
						continue
					}
					mu.Lock()
					all = append(all, made{k.ID, token})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range []*gateway.KeyStore{a, b} {
		keys, err := s.List()
		if err != nil || len(keys) != 2*workers*each {
			t.Fatalf("listed %d keys of %d, %v", len(keys), 2*workers*each, err)
		}
		for _, m := range all {
			if k, err := s.Check(m.token); err != nil || k.ID != m.id {
				t.Fatalf("key %s = %+v, %v", m.id, k, err)
			}
		}
	}
	conn, err := pgx.Connect(context.Background(), site.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var dump string
	if err := conn.QueryRow(context.Background(), "SELECT string_agg(data::text, ' ') FROM "+site.Schema+".records").Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		secret := strings.TrimPrefix(m.token, "cbk_"+m.id+"_")
		if strings.Contains(dump, secret) {
			t.Fatal("the database holds a key's secret")
		}
	}
	if !strings.Contains(dump, `"sha256"`) {
		t.Fatal("the database holds no hashes")
	}
}

// When the database cannot be read, a check fails (the request is
// refused), and it works again when the database is back.
func TestSharedKeysFailClosed(t *testing.T) {
	c := &settable{t: time.Now()}
	a, _, site := sharedPair(t, 0, c)
	token, _, err := a.Create(gateway.KeySpec{Name: "x", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	site.Exec(t, "ALTER TABLE _S_.sets RENAME TO sets_away")
	if _, err := a.Check(token); err == nil || errors.Is(err, gateway.ErrInvalidKey) {
		t.Fatalf("check with the table gone = %v; want a store error", err)
	}
	site.Exec(t, "ALTER TABLE _S_.sets_away RENAME TO sets")
	if _, err := a.Check(token); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

// A revocation on one replica is never undone by an update of the same
// key made at the same moment on another: every write reads the key as
// the database holds it, under the lock of the keys' set.
func TestSharedKeysRevocationSurvivesAConcurrentUpdate(t *testing.T) {
	c := &settable{t: time.Now()}
	a, b, _ := sharedPair(t, 0, c)
	for round := range 20 {
		token, k, err := a.Create(gateway.KeySpec{Name: "k", Project: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			// Refused when it comes after the revocation; either way fine.
			a.Update(k.ID, func(k *gateway.Key) error { k.Name = fmt.Sprint("renamed-", round); return nil })
		})
		wg.Go(func() {
			if _, err := b.Revoke(k.ID); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		for _, s := range []*gateway.KeyStore{a, b} {
			if _, err := s.Check(token); !errors.Is(err, gateway.ErrRevokedKey) {
				t.Fatalf("round %d: a revoked key, updated at once elsewhere: %v", round, err)
			}
		}
	}
}

// Through the gateway, keys that cannot be read are a 503 naming them
// (keys_unavailable), in both protocols, and no call reaches a provider;
// the database back, the same key works again.
func TestSharedKeysUnreadableIs503(t *testing.T) {
	c := &settable{t: time.Now()}
	a, _, site := sharedPair(t, 0, c)
	token, _, err := a.Create(gateway.KeySpec{Name: "x", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.Keys = a }))
	chat := `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`
	msgs := `{"model":"claude-sonnet-4-6","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	if code, _, body := w.postAs(t, token, "/v1/chat/completions", chat); code != 200 {
		t.Fatalf("with the keys readable: %d %s", code, body)
	}
	sent := len(w.anth.Requests())
	site.Exec(t, "ALTER TABLE _S_.sets RENAME TO sets_away")
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", chat, `"code":"keys_unavailable"`},
		{"/v1/messages", msgs, `"type":"api_error"`},
	} {
		code, _, body := w.postAs(t, token, c.path, c.body)
		if code != 503 || !strings.Contains(body, c.want) || !strings.Contains(body, "the virtual keys in PostgreSQL (the shared state) cannot be read") {
			t.Errorf("%s with the keys unreadable: %d %s; want 503 %s naming the keys", c.path, code, body, c.want)
		}
	}
	if n := len(w.anth.Requests()) - sent; n != 0 {
		t.Errorf("%d calls reached the provider with the keys unreadable", n)
	}
	site.Exec(t, "ALTER TABLE _S_.sets_away RENAME TO sets")
	if code, _, body := w.postAs(t, token, "/v1/chat/completions", chat); code != 200 {
		t.Fatalf("after recovery: %d %s", code, body)
	}
}
