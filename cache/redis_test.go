package cache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/cache/cachetest"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider"
)

// testRedis opens the test Redis (skipping outside CI when there is none)
// with a random key prefix under the default one, and deletes every key
// under that prefix when the test ends. It returns a second client for
// inspecting and tampering.
func testRedis(t testing.TB) (*cache.Redis, *redis.Client, string) {
	t.Helper()
	url := testenv.Redis(t)
	ctx := context.Background()
	b := make([]byte, 8)
	rand.Read(b)
	prefix := cache.DefaultRedisPrefix + "test-" + hex.EncodeToString(b) + ":"
	store, err := cache.OpenRedis(ctx, url, cache.RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	inspect := redis.NewClient(opt)
	t.Cleanup(func() {
		iter := inspect.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			inspect.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleaning up %s*: %v", prefix, err)
		}
		inspect.Close()
		store.Close()
	})
	return store, inspect, prefix
}

func TestRedisConformance(t *testing.T) {
	cachetest.Run(t, func(t *testing.T) cachetest.Instance {
		store, inspect, _ := testRedis(t)
		return cachetest.Instance{
			Store: store,
			RemainingTTL: func(k cache.Key) (time.Duration, error) {
				return inspect.PTTL(context.Background(), store.RedisKey(k)).Result()
			},
		}
	})
}

func TestRedisLayout(t *testing.T) {
	ctx := context.Background()
	store, inspect, prefix := testRedis(t)
	c := cache.New(store, cache.Options{})
	key := mustKey(t, baseScope(), baseRequest())
	if err := c.Put(ctx, key, sampleResult()); err != nil {
		t.Fatal(err)
	}
	rk := store.RedisKey(key)
	if rk != prefix+key.String() || !strings.HasPrefix(rk, "cortexbuild:cache:v1:") {
		t.Fatalf("Redis key %q; want %s<hex>", rk, prefix)
	}
	// SET … PX: Redis holds the entry for 24 hours.
	d, err := inspect.PTTL(ctx, rk).Result()
	if err != nil || d <= cache.DefaultTTL-time.Minute || d > cache.DefaultTTL {
		t.Fatalf("PTTL = %v, %v; want just under 24h", d, err)
	}
	raw, err := inspect.Get(ctx, rk).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"v":1`, `"key":"` + key.String() + `"`, `"content":`, `"tool_calls":`, `"parts":`, `"usage":`, `"cost_usd":"0.0123"`, `"model_used":`, `"stop_reason":"tool_use"`, `"provider":"anthropic-main"`} {
		if !strings.Contains(raw, field) {
			t.Errorf("stored value lacks %s: %s", field, raw)
		}
	}
	// And it rebuilds the result.
	got, out, err := c.Get(ctx, key)
	if err != nil || got == nil || !out.Hit {
		t.Fatalf("Get = %v, %+v, %v", got, out, err)
	}
	want := *sampleResult()
	want.CacheHit, want.Cost, want.Usage, want.Latency = true, 0, provider.Usage{}, got.Latency
	assertResult(t, got, &want)
}

func TestRedisBadValuesAreMisses(t *testing.T) {
	ctx := context.Background()
	store, inspect, _ := testRedis(t)
	c := cache.New(store, cache.Options{})
	key := mustKey(t, baseScope(), baseRequest())
	other := cachetest.TestKey("other")
	for _, tc := range []struct{ name, value string }{
		{"not JSON", "garbage"},
		{"another format", `{"v":2,"key":"` + key.String() + `","content":"x","stop_reason":"end_turn"}`},
		{"another key", `{"v":1,"key":"` + other.String() + `","content":"x","stop_reason":"end_turn"}`},
		{"no format", `{"content":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := inspect.Set(ctx, store.RedisKey(key), tc.value, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			res, _, err := c.Get(ctx, key)
			if res != nil || err == nil {
				t.Fatalf("Get of a bad value = %v, %v; want a miss with an error", res, err)
			}
		})
	}
}

func TestRedisFailureDuringGetIsAMiss(t *testing.T) {
	ctx := context.Background()
	store, _, _ := testRedis(t)
	c := cache.New(store, cache.Options{})
	key := mustKey(t, baseScope(), baseRequest())
	if err := c.Put(ctx, key, sampleResult()); err != nil {
		t.Fatal(err)
	}
	store.Close() // the connection is gone
	res, out, err := c.Get(ctx, key)
	if res != nil || err == nil || out.StoreErr == nil {
		t.Fatalf("Get with Redis gone = %v, %+v, %v; want a miss with an error", res, out, err)
	}
	res, out, err = c.Do(ctx, key, func(context.Context) (*provider.Result, error) { return sampleResult(), nil })
	if err != nil || res == nil || res.CacheHit || out.StoreErr == nil || out.Stored {
		t.Fatalf("Do with Redis gone = %+v, %+v, %v; want the fresh answer and the error to log", res, out, err)
	}
}

func TestOpenRedisErrors(t *testing.T) {
	// An address where nothing listens: bind a port, then free it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		name, url string
		says      []string
	}{
		{"not a URL", "redis://user:s3cret@host:port:x/", []string{"bad Redis URL"}},
		{"wrong scheme", "http://user:s3cret@127.0.0.1:6379/0", []string{"bad Redis URL", "scheme"}},
		{"bad database", "redis://user:s3cret@127.0.0.1:6379/zero", []string{"bad Redis URL", "database"}},
		{"unknown option", "redis://127.0.0.1:6379/0?colour=blue", []string{"bad Redis URL"}},
		{"unreachable", "redis://user:s3cret@" + closed + "/0?max_retries=-1", []string{"unreachable", closed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			store, err := cache.OpenRedis(ctx, tc.url, cache.RedisOptions{})
			if err == nil {
				store.Close()
				t.Fatal("OpenRedis succeeded")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q repeats the password", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cache.OpenRedis(ctx, "redis://"+closed+"/0", cache.RedisOptions{}); !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("OpenRedis with a cancelled context = %v", err)
	}
}

func TestRedisDoAcrossCaches(t *testing.T) {
	// Two caches (two processes) over one Redis share entries, and projects
	// stay apart.
	ctx := context.Background()
	store, _, _ := testRedis(t)
	a, b := cache.New(store, cache.Options{}), cache.New(store, cache.Options{})
	key := mustKey(t, baseScope(), baseRequest())
	if _, _, err := a.Do(ctx, key, func(context.Context) (*provider.Result, error) { return sampleResult(), nil }); err != nil {
		t.Fatal(err)
	}
	res, out, err := b.Do(ctx, key, func(context.Context) (*provider.Result, error) {
		t.Error("the second process called the provider")
		return nil, errors.New("unexpected")
	})
	if err != nil || !res.CacheHit || !out.Hit {
		t.Fatalf("second process = %+v, %+v, %v; want a hit", res, out, err)
	}
	s := baseScope()
	s.Project = "proj-b"
	res, _, err = b.Get(ctx, mustKey(t, s, baseRequest()))
	if err != nil || res != nil {
		t.Fatalf("another project got %v, %v; want a miss", res, err)
	}
}
