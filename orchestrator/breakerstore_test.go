package orchestrator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// Eight stores of one breaker file (as eight processes have) save ten
// providers' breakers each at once: every save is in the file afterwards.
func TestFileBreakersOfSeveralStoresLoseNoSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "breakers.json")
	const stores, each = 8, 10
	var wg sync.WaitGroup
	for i := range stores {
		st := &orchestrator.FileBreakers{Path: path}
		wg.Go(func() {
			for j := range each {
				s := orchestrator.BreakerState{Provider: fmt.Sprintf("p%d-%d", i, j), State: orchestrator.BreakerOpen, Failures: 3, UpdatedAt: time.Unix(1700000000, 0)}
				if err := st.SaveBreaker(context.Background(), s); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := (&orchestrator.FileBreakers{Path: path}).LoadBreakers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != stores*each {
		t.Errorf("the file holds %d breakers after %d saves: some were lost", len(got), stores*each)
	}
}
