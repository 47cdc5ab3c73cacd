package orchestrator_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// A pause recorded on one replica pauses another once its period (here
// 500 ms) has passed, not before; a resume there lifts it on the first.
func TestSharedPauseAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	site := pgstatetest.New(t)
	var mu sync.Mutex
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	a := orchestrator.NewSharedState(site.Open(t, "demo").Set(orchestrator.PauseSet), 500*time.Millisecond)
	b := orchestrator.NewSharedState(site.Open(t, "demo").Set(orchestrator.PauseSet), 500*time.Millisecond)
	a.View.Now, b.View.Now, a.Now = now, now, now
	if _, paused, err := b.Paused(ctx); paused || err != nil {
		t.Fatalf("before any pause: %v, %v", paused, err)
	}
	if err := a.Pause(ctx, "claude refused its key"); err != nil {
		t.Fatal(err)
	}
	if _, paused, _ := a.Paused(ctx); !paused {
		t.Fatal("the replica that paused is not paused")
	}
	if _, paused, _ := b.Paused(ctx); paused {
		t.Fatal("paused before the period passed: the view does not cache")
	}
	advance(500 * time.Millisecond)
	reason, paused, err := b.Paused(ctx)
	if err != nil || !paused || reason != "claude refused its key" {
		t.Fatalf("paused on another replica: %q %v %v", reason, paused, err)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	advance(500 * time.Millisecond)
	if _, paused, _ := a.Paused(ctx); paused {
		t.Fatal("resumed on another replica, still paused after the period")
	}
	// Another project on the same database is not paused by this one.
	if err := a.Pause(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	other := orchestrator.NewSharedState(site.Open(t, "other").Set(orchestrator.PauseSet), 0)
	if _, paused, _ := other.Paused(ctx); paused {
		t.Fatal("another project is paused")
	}
	// A pause that cannot be read is an error (the orchestrator refuses
	// the call), until it can be read again.
	site.Exec(t, "ALTER TABLE _S_.sets RENAME TO sets_away")
	if _, _, err := other.Paused(ctx); err == nil {
		t.Fatal("no error with the table gone")
	}
	site.Exec(t, "ALTER TABLE _S_.sets_away RENAME TO sets")
	if _, paused, err := other.Paused(ctx); err != nil || paused {
		t.Fatalf("after recovery: %v, %v", paused, err)
	}
}

// The pause a file holds is the shared set's record; a file without a
// pause (or none) gives none.
func TestFileStateRecords(t *testing.T) {
	ctx := context.Background()
	fs := &orchestrator.FileState{Path: filepath.Join(t.TempDir(), "project-state.json")}
	if recs, err := fs.FileRecords(); err != nil || len(recs) != 0 {
		t.Fatalf("missing file = %v, %v", recs, err)
	}
	if err := fs.Pause(ctx, "why"); err != nil {
		t.Fatal(err)
	}
	recs, err := fs.FileRecords()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records = %v, %v", recs, err)
	}
	site := pgstatetest.New(t)
	set := site.Open(t, "demo").Set(orchestrator.PauseSet)
	if _, err := set.Import(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if reason, paused, err := orchestrator.NewSharedState(set, 0).Paused(ctx); err != nil || !paused || reason != "why" {
		t.Fatalf("imported pause = %q %v %v", reason, paused, err)
	}
	if err := fs.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, err := fs.FileRecords(); err != nil || len(recs) != 0 {
		t.Fatalf("resumed file = %v, %v", recs, err)
	}
}
