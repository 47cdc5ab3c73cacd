package orchestrator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/pgstate/pgstatetest"
	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// A breaker opened on one replica is what another loads; an older state
// saved later does not replace a newer one; saves of many goroutines of
// two replicas at once are all kept.
func TestSharedBreakersAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	site := pgstatetest.New(t)
	a := orchestrator.NewSharedBreakers(site.Open(t, "demo").Set(orchestrator.BreakerSet), 0)
	b := orchestrator.NewSharedBreakers(site.Open(t, "demo").Set(orchestrator.BreakerSet), 0)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	open := orchestrator.BreakerState{Provider: "claude", State: orchestrator.BreakerOpen, Failures: 5, OpenedAt: at, RetryAt: at.Add(30 * time.Second), UpdatedAt: at, Probing: true}
	if err := a.SaveBreaker(ctx, open); err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadBreakers(ctx)
	if err != nil || len(got) != 1 || got[0].State != orchestrator.BreakerOpen || got[0].Failures != 5 || got[0].Probing || !got[0].RetryAt.Equal(open.RetryAt) {
		t.Fatalf("loaded on the other replica = %+v, %v", got, err)
	}
	older := orchestrator.BreakerState{Provider: "claude", State: orchestrator.BreakerClosed, UpdatedAt: at.Add(-time.Second)}
	if err := b.SaveBreaker(ctx, older); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.LoadBreakers(ctx); len(got) != 1 || got[0].State != orchestrator.BreakerOpen {
		t.Fatalf("an older state replaced a newer one: %+v", got)
	}
	closed := orchestrator.BreakerState{Provider: "claude", State: orchestrator.BreakerClosed, UpdatedAt: at.Add(time.Second)}
	if err := b.SaveBreaker(ctx, closed); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.LoadBreakers(ctx); len(got) != 1 || got[0].State != orchestrator.BreakerClosed {
		t.Fatalf("a newer state was not kept: %+v", got)
	}

	var wg sync.WaitGroup
	for r, s := range []*orchestrator.SharedBreakers{a, b} {
		for w := range 4 {
			wg.Go(func() {
				for i := range 5 {
					st := orchestrator.BreakerState{Provider: fmt.Sprintf("p%d-%d-%d", r, w, i), State: orchestrator.BreakerOpen, UpdatedAt: at}
					if err := s.SaveBreaker(ctx, st); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	if got, err := b.LoadBreakers(ctx); err != nil || len(got) != 1+2*4*5 {
		t.Fatalf("after concurrent saves: %d breakers, %v", len(got), err)
	}
}
