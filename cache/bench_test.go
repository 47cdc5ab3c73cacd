package cache_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/provider"
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

// BenchmarkGCWithAFullMemoryStore is the cost of a garbage collection
// with a full memory store (DefaultMaxEntries relayed answers, each with
// its provider's twenty headers), reported as a ratio to one with the
// store empty (x-empty): the store holds each entry as one block of bytes,
// which the collector does not trace.
func BenchmarkGCWithAFullMemoryStore(b *testing.B) {
	gc := func(n int) time.Duration {
		start := time.Now()
		for range n {
			runtime.GC()
		}
		return time.Since(start) / time.Duration(n)
	}
	gc(3)
	empty := gc(20)
	m := cache.NewMemory(cache.MemoryOptions{})
	ctx := context.Background()
	h := http.Header{}
	for i := range 20 {
		h.Set(fmt.Sprintf("X-Provider-Header-%d", i), fmt.Sprintf("value %d of the provider's header", i))
	}
	for i := range cache.DefaultMaxEntries {
		s := baseScope()
		s.Project = fmt.Sprint("p", i)
		e := cache.Entry{Content: "Here is the summary.", Provider: "anthropic-main", Model: "claude-haiku-4-5",
			Native: &provider.NativeReply{Status: 200, Header: h, Body: []byte(`{"id":"msg_1","content":[{"type":"text","text":"Here is the summary."}]}`), Edits: []string{"model=claude-haiku-4-5"}}}
		if err := m.Put(ctx, mustKey(b, s, baseRequest()), e, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(empty), "x-empty")
	if m.Len() != cache.DefaultMaxEntries { // and the store stays live until here
		b.Fatalf("%d entries held", m.Len())
	}
}

// BenchmarkKeyOfALongBody computes the key of a relayed 200 KB prompt
// (MB/s: of body).
func BenchmarkKeyOfALongBody(b *testing.B) {
	req := baseRequest()
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("func main() {}\\n", 200<<10/16) + `"}]}`)
	req.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: body}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cache.NewKey(baseScope(), req); err != nil {
			b.Fatal(err)
		}
	}
}
