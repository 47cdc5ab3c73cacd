package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider"
)

// An answer's state is written to Redis up to MaxSharedTurnEntry bytes; a
// larger one is kept by the replica that served it, which restores it,
// while another replica does not find it.
func TestSharedTurnEntryIsBounded(t *testing.T) {
	ctx := context.Background()
	url := testenv.Redis(t)
	b := make([]byte, 8)
	rand.Read(b)
	prefix := DefaultSharedPrefix + "test-" + hex.EncodeToString(b) + ":"
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	inspect := redis.NewClient(opt)
	count := func() int {
		keys, err := inspect.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	t.Cleanup(func() {
		if keys, _ := inspect.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
			inspect.Del(ctx, keys...)
		}
		inspect.Close()
	})
	replica := func() *sharedTurns {
		r, err := cache.OpenRedis(ctx, url, cache.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return newSharedTurns(r, prefix, time.Hour, newTurnState(time.Hour, 64<<20, time.Now), slog.New(slog.DiscardHandler))
	}
	a, other := replica(), replica()
	found := func(s *sharedTurns, id string) (bool, bool) {
		req := sentBack(id)
		_, ok, local := s.restore(ctx, "k", req, math.MaxInt64)
		if !ok {
			t.Fatal("over the room")
		}
		return len(req.Messages[1].Parts[0].ToolCall.Meta) > 0, local
	}
	a.keep(ctx, "k", signed("small", MaxSharedTurnEntry-1000))
	if n := count(); n != 2 {
		t.Errorf("%d keys in Redis for an answer within the bound; want the entry and its call", n)
	}
	if got, local := found(other, "small"); !got || local {
		t.Errorf("another replica found the answer within the bound: %v (local %v)", got, local)
	}
	a.keep(ctx, "k", signed("huge", MaxSharedTurnEntry))
	if n := count(); n != 2 {
		t.Errorf("%d keys in Redis after an answer over the bound; want it not written", n)
	}
	if got, _ := found(a, "huge"); !got {
		t.Error("the replica that served the answer over the bound did not restore it")
	}
	if got, _ := found(other, "huge"); got {
		t.Error("another replica found the answer over the bound")
	}
}

// BenchmarkSharedRates is one admission and its settlement of a key with
// rpm and tpm in Redis: the two scripts a limited key's call adds.
func BenchmarkSharedRates(b *testing.B) {
	ctx := context.Background()
	url := testenv.Redis(b)
	r, err := cache.OpenRedis(ctx, url, cache.RedisOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	rb := make([]byte, 8)
	rand.Read(rb)
	prefix := DefaultSharedPrefix + "bench-" + hex.EncodeToString(rb) + ":"
	rates := newSharedRates(r, prefix, newKeyRates(time.Now), time.Now, slog.New(slog.DiscardHandler))
	k := &Key{ID: "bench", KeyLimits: KeyLimits{RPM: math.MaxInt32, TPM: math.MaxInt64 / 4}}
	b.Cleanup(func() {
		opt, _ := redis.ParseURL(url)
		c := redis.NewClient(opt)
		if keys, _ := c.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		c.Close()
	})
	i := 0
	for b.Loop() {
		inv := "inv" + strconv.Itoa(i)
		i++
		if f, local := rates.admit(ctx, k, inv, func() int64 { return 1000 }); f != nil || local {
			b.Fatalf("refused: %v, local %v", f, local)
		}
		rates.settle(ctx, k.ID, inv, provider.Usage{InputTokens: 10, OutputTokens: 5}, true)
	}
}
