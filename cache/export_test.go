package cache

// SetJoinHook makes c call f each time a caller starts waiting for a flight,
// so tests can release a fill once every caller is waiting.
func SetJoinHook(c *Cache, f func(Key)) { c.joined = f }

// SetLeaveHook makes c call f each time a caller gives up its wait before
// the call ends.
func SetLeaveHook(c *Cache, f func(Key)) { c.left = f }
