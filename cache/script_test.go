package cache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/cortexbuild/cortexbuild/cache"
)

// A script the server has never seen is loaded by its first Eval and run
// by its SHA-1 afterwards; arrays come back with nil elements for nil
// replies; an error reply wraps ErrRedisReply and leaves Redis in use.
func TestRedisEval(t *testing.T) {
	ctx := context.Background()
	store, inspect, prefix := testRedis(t)
	b := make([]byte, 8)
	rand.Read(b)
	// A comment of its own: a script no earlier run loaded.
	s := cache.NewScript("-- " + hex.EncodeToString(b) + "\nredis.call('SET', KEYS[1], ARGV[1]) return {1, redis.call('GET', KEYS[1]), false, {2}}")
	key := prefix + "eval"
	for i := range 2 {
		got, err := store.Eval(ctx, s, []string{key}, "v")
		if want := []any{int64(1), "v", nil, []any{int64(2)}}; err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Eval %d = %#v, %v; want %#v", i, got, err, want)
		}
	}
	if n, err := inspect.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Errorf("the script's key: %d, %v", n, err)
	}
	bad := cache.NewScript("return redis.call('INCR', KEYS[1])")
	if _, err := store.Eval(ctx, bad, []string{key}); !errors.Is(err, cache.ErrRedisReply) {
		t.Errorf("a failing script: %v; want ErrRedisReply", err)
	}
	if got, err := store.Eval(ctx, s, []string{key}, "w"); err != nil || got.([]any)[1] != "w" {
		t.Errorf("after an error reply Redis is still used: %#v, %v", got, err)
	}
}
