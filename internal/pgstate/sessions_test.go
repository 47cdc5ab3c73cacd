package pgstate_test

import (
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/pgstate"
	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
)

// A console session put through one opening (one replica) is read by
// another at once and deleted for both by either; a put deletes the
// project's sessions expired at its time, and only the project's.
func TestSessionsAcrossOpenings(t *testing.T) {
	site := pgstatetest.New(t)
	a, b, other := site.Open(t, "p").Sessions(), site.Open(t, "p").Sessions(), site.Open(t, "q").Sessions()
	ctx := t.Context()
	t0 := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	s1 := pgstate.Session{CSRF: "form-1", KeyID: "k1", Created: t0, Expires: t0.Add(time.Hour)}
	if err := a.Put(ctx, "h1", s1, t0); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Get(ctx, "h1")
	if err != nil || !ok || got.CSRF != "form-1" || got.KeyID != "k1" || !got.Expires.Equal(s1.Expires) || !got.Created.Equal(t0) {
		t.Fatalf("another opening reads %+v %v %v", got, ok, err)
	}
	if _, ok, _ := other.Get(ctx, "h1"); ok {
		t.Error("another project reads the session")
	}
	if err := a.Put(ctx, "h1", s1, t0); err == nil {
		t.Error("a second session with the same hash was accepted")
	}
	if err := other.Put(ctx, "hq", pgstate.Session{CSRF: "q", Created: t0, Expires: t0.Add(time.Minute)}, t0); err != nil {
		t.Fatal(err)
	}
	// An hour later the first session has expired: the next put deletes
	// it, not the other project's.
	later := t0.Add(time.Hour)
	if err := b.Put(ctx, "h2", pgstate.Session{CSRF: "form-2", Created: later, Expires: later.Add(time.Hour)}, later); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.Get(ctx, "h1"); ok {
		t.Error("an expired session outlived a later put")
	}
	if _, ok, _ := other.Get(ctx, "hq"); !ok {
		t.Error("a put deleted another project's session")
	}
	if err := a.Delete(ctx, "h2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Get(ctx, "h2"); ok || err != nil {
		t.Errorf("a deleted session is read by another opening: %v %v", ok, err)
	}
	if err := a.Delete(ctx, "h2"); err != nil {
		t.Errorf("deleting a missing session: %v", err)
	}
}

// The sessions' table is added to a schema created before it.
func TestSessionsTableAddedToAnOlderSchema(t *testing.T) {
	site := pgstatetest.New(t)
	site.Open(t, "p").Close()
	site.Exec(t, "DROP TABLE _S_.console_sessions")
	st := site.Open(t, "p")
	t0 := time.Now()
	if err := st.Sessions().Put(t.Context(), "h", pgstate.Session{CSRF: "c", Created: t0, Expires: t0.Add(time.Hour)}, t0); err != nil {
		t.Fatalf("sessions on a schema made before their table: %v", err)
	}
}
