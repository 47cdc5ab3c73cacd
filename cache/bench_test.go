package cache_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cortexbuild/cortexbuild/cache"
)

// benchStores runs f on a memory store and on the test Redis.
func benchStores(b *testing.B, f func(b *testing.B, c *cache.Cache)) {
	b.Run("memory", func(b *testing.B) {
		f(b, cache.New(cache.NewMemory(cache.MemoryOptions{}), cache.Options{}))
	})
	b.Run("redis", func(b *testing.B) {
		store, _, _ := testRedis(b)
		f(b, cache.New(store, cache.Options{}))
	})
}

func BenchmarkGet(b *testing.B) {
	benchStores(b, func(b *testing.B, c *cache.Cache) {
		ctx := context.Background()
		key := mustKey(b, baseScope(), baseRequest())
		if err := c.Put(ctx, key, sampleResult()); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if res, _, err := c.Get(ctx, key); err != nil || res == nil {
				b.Fatal("miss", err)
			}
		}
	})
}

func BenchmarkPut(b *testing.B) {
	benchStores(b, func(b *testing.B, c *cache.Cache) {
		ctx := context.Background()
		keys := make([]cache.Key, 1024)
		for i := range keys {
			s := baseScope()
			s.Project = fmt.Sprint("p", i)
			keys[i] = mustKey(b, s, baseRequest())
		}
		res := sampleResult()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := c.Put(ctx, keys[i%len(keys)], res); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkKey computes the key of a 20-turn conversation with six tools.
func BenchmarkKey(b *testing.B) {
	req, scope := conversation(20), baseScope()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cache.NewKey(scope, req); err != nil {
			b.Fatal(err)
		}
	}
}
