package cache

import (
	"context"
	"time"
)

// Store is a cache back end. Implementations are safe for concurrent use
// and pass the conformance suite in package cache/cachetest.
type Store interface {
	// Get returns the entry stored under key and true, or false when there
	// is none or it has expired. An error means the store could not answer;
	// it is then a miss, never a hit. The entry returned is the caller's:
	// changing it does not change the store.
	Get(ctx context.Context, key Key) (Entry, bool, error)
	// Put stores e under key for ttl (which must be positive), replacing
	// any entry there. The store keeps its own copy of e.
	Put(ctx context.Context, key Key, e Entry, ttl time.Duration) error
}
