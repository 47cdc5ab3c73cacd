package cache

import (
	"github.com/zeebo/blake3"

	"github.com/cortexbuild/cortexbuild/provider"
)

// KeyOfAllCopied is NewKey's key of req as it is when every byte string
// of the key material is copied into one buffer before it is hashed.
func KeyOfAllCopied(scope Scope, req *provider.Request) Key {
	w := &keyWriter{h: blake3.New(), copyAll: true}
	w.request(scope, req)
	w.h.Write(w.b)
	var k Key
	w.h.Sum(k[:0])
	return k
}

// SetJoinHook makes c call f each time a caller starts waiting for a flight,
// so tests can release a fill once every caller is waiting.
func SetJoinHook(c *Cache, f func(Key)) { c.joined = f }

// SetLeaveHook makes c call f each time a caller gives up its wait before
// the call ends.
func SetLeaveHook(c *Cache, f func(Key)) { c.left = f }
