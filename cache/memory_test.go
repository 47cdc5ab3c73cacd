package cache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/cache/cachetest"
)

func TestMemoryConformance(t *testing.T) {
	cachetest.Run(t, func(t *testing.T) cachetest.Instance {
		clock := new(cachetest.Clock)
		return cachetest.Instance{
			Store:   cache.NewMemory(cache.MemoryOptions{MaxEntries: 100, Now: clock.Now}),
			Advance: clock.Advance,
		}
	})
}

func TestMemoryLRU(t *testing.T) {
	ctx := context.Background()
	k := func(i int) cache.Key { return cachetest.TestKey(fmt.Sprint(i)) }
	for _, tc := range []struct {
		name string
		ops  []string // "put N" or "get N"
		max  int
		want []int // keys present afterwards
		gone []int // keys evicted
	}{
		{"bound holds", []string{"put 1", "put 2", "put 3", "put 4"}, 3, []int{2, 3, 4}, []int{1}},
		{"oldest goes first", []string{"put 1", "put 2", "put 3", "put 4", "put 5"}, 3, []int{3, 4, 5}, []int{1, 2}},
		{"a read refreshes", []string{"put 1", "put 2", "put 3", "get 1", "put 4"}, 3, []int{1, 3, 4}, []int{2}},
		{"a write refreshes", []string{"put 1", "put 2", "put 3", "put 1", "put 4"}, 3, []int{1, 3, 4}, []int{2}},
		{"a miss does not evict", []string{"put 1", "put 2", "get 9", "get 8"}, 2, []int{1, 2}, nil},
		{"bound of one", []string{"put 1", "put 2"}, 1, []int{2}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := cache.NewMemory(cache.MemoryOptions{MaxEntries: tc.max})
			for _, op := range tc.ops {
				var verb string
				var n int
				fmt.Sscan(op, &verb, &n)
				if verb == "put" {
					if err := m.Put(ctx, k(n), cachetest.SampleEntry(fmt.Sprint(n)), time.Hour); err != nil {
						t.Fatal(err)
					}
				} else if _, _, err := m.Get(ctx, k(n)); err != nil {
					t.Fatal(err)
				}
				if m.Len() > tc.max {
					t.Fatalf("after %q the store holds %d entries; bound %d", op, m.Len(), tc.max)
				}
			}
			// Check the evicted first: reading a present key refreshes it.
			for _, n := range tc.gone {
				if _, ok, _ := m.Get(ctx, k(n)); ok {
					t.Errorf("key %d is still there; want it evicted", n)
				}
			}
			for _, n := range tc.want {
				if e, ok, _ := m.Get(ctx, k(n)); !ok || e.Content != fmt.Sprint(n) {
					t.Errorf("key %d = %q, %v; want it kept", n, e.Content, ok)
				}
			}
		})
	}
}

func TestMemoryTTL(t *testing.T) {
	ctx := context.Background()
	clock := new(cachetest.Clock)
	m := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
	c := cache.New(m, cache.Options{Now: clock.Now}) // the default 24 h
	key := mustKey(t, baseScope(), baseRequest())
	if err := c.Put(ctx, key, sampleResult()); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance time.Duration
		hit     bool
	}{
		{0, true},
		{23 * time.Hour, true},
		{time.Hour - time.Nanosecond, true},
		{time.Nanosecond, false},
	} {
		clock.Advance(step.advance)
		res, _, err := c.Get(ctx, key)
		if err != nil || (res != nil) != step.hit {
			t.Fatalf("at +%v: hit = %v, %v; want %v", step.advance, res != nil, err, step.hit)
		}
	}
	if m.Len() != 0 {
		t.Errorf("the expired entry is still held (%d entries)", m.Len())
	}
}

func TestMemoryHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := cache.NewMemory(cache.MemoryOptions{})
	if err := m.Put(ctx, cachetest.TestKey("x"), cachetest.SampleEntry("x"), time.Hour); err == nil {
		t.Error("Put with a cancelled context succeeded")
	}
	if _, ok, err := m.Get(ctx, cachetest.TestKey("x")); ok || err == nil {
		t.Errorf("Get with a cancelled context = %v, %v; want a miss with an error", ok, err)
	}
}
