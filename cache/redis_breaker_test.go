package cache_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider"
)

// A Redis that accepts connections and never answers costs one timeout,
// with one warning: the next cached calls skip it (a miss, the provider
// answers, nothing stored, no command sent) until the cool-down is over,
// when one command probes it again.
func TestHungRedisIsSkippedAfterOneTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &respServer{l: l, hang: make(chan struct{})}
	go srv.serve()
	t.Cleanup(func() { close(srv.hang); l.Close() })
	sent := func() []string {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		var out []string
		for _, c := range srv.cmds {
			if c != "PING" {
				out = append(out, strings.Fields(c)[0])
			}
		}
		return out
	}
	// waitSent waits until the server has read n commands besides PING.
	waitSent := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(sent()) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("the server read %q; want %d commands", sent(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	now := time.Unix(1_000_000, 0)
	var clock sync.Mutex
	logs := &testenv.Buffer{}
	r, err := cache.OpenRedis(context.Background(), "redis://"+l.Addr().String()+"/0?read_timeout=100ms", cache.RedisOptions{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Now: func() time.Time {
			clock.Lock()
			defer clock.Unlock()
			return now
		},
	})
	if err != nil {
		t.Fatalf("OpenRedis: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	c := cache.New(r, cache.Options{})
	key := mustKey(t, baseScope(), baseRequest())
	fills := 0
	fill := func(context.Context) (*provider.Result, error) { fills++; return sampleResult(), nil }
	do := func(i int) cache.Outcome {
		t.Helper()
		res, out, err := c.Do(context.Background(), key, fill)
		if err != nil || res == nil || res.CacheHit || fills != i {
			t.Fatalf("call %d: %v, %v, %d provider calls; want the provider's answer", i, res, err, fills)
		}
		return out
	}

	// The first call waits out one lookup timeout, then is answered by
	// the provider; its answer is not written to the hung server.
	out := do(1)
	if out.StoreErr == nil || out.Stored {
		t.Errorf("call 1: %+v; want the lookup's timeout and nothing stored", out)
	}
	waitSent(1)
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || strings.Count(logs.String(), "Redis did not answer") != 1 {
		t.Errorf("%d warnings after the timeout; want one saying Redis did not answer:\n%s", n, logs.String())
	}

	// The next calls do not go to Redis at all: no second timeout.
	for i := 2; i <= 3; i++ {
		if out := do(i); !errors.Is(out.StoreErr, cache.ErrRedisSkipped) || out.Stored {
			t.Errorf("call %d: %+v; want Redis skipped", i, out)
		}
	}

	// After the cool-down one call probes Redis again; it still hangs,
	// so Redis is skipped again, without another warning.
	clock.Lock()
	now = now.Add(cache.DefaultRedisCooldown)
	clock.Unlock()
	do(4)
	waitSent(2)
	do(5)
	if got := sent(); len(got) != 2 || got[0] != "GET" || got[1] != "GET" {
		t.Errorf("the server was sent %q; want one GET for the first call and one probe after the cool-down", got)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings; want one per time Redis starts being skipped:\n%s", n, logs.String())
	}
}
