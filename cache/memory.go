package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxEntries is the bound of a [Memory] store when none is given.
const DefaultMaxEntries = 10_000

// MemoryOptions configure [NewMemory].
type MemoryOptions struct {
	// MaxEntries bounds the number of entries; when full, Put evicts the
	// least recently used one. Zero means DefaultMaxEntries.
	MaxEntries int
	// Now is the clock that decides expiry. Default time.Now.
	Now func() time.Time
}

// Memory is the in-process back end: a bounded LRU with a time to live per
// entry. Get, Put and eviction take constant time. Expired entries are
// dropped when they are read or when they reach the end of the LRU order.
// Each entry is held packed in one block of bytes ([packEntry]): a full
// store of relayed answers, each with the twenty-odd headers of its
// provider, would otherwise be hundreds of thousands of objects for the
// garbage collector to trace on every cycle. It is safe for concurrent use.
type Memory struct {
	max int
	now func() time.Time

	mu    sync.Mutex
	items map[Key]*list.Element
	order list.List // front: most recently used; values are *memoryItem
}

type memoryItem struct {
	key     Key
	entry   []byte // packed
	expires time.Time
}

// NewMemory returns an empty in-process store.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{max: opts.MaxEntries, now: opts.Now, items: map[Key]*list.Element{}}
	if m.max <= 0 {
		m.max = DefaultMaxEntries
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Get implements [Store]. A hit makes the entry the most recently used.
func (m *Memory) Get(ctx context.Context, key Key) (Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, false, err
	}
	now := m.now()
	m.mu.Lock()
	el, ok := m.items[key]
	if !ok {
		m.mu.Unlock()
		return Entry{}, false, nil
	}
	it := el.Value.(*memoryItem)
	if !now.Before(it.expires) {
		m.remove(el)
		m.mu.Unlock()
		return Entry{}, false, nil
	}
	m.order.MoveToFront(el)
	b := it.entry
	m.mu.Unlock()
	// The stored bytes are never changed in place (Put replaces them), so
	// they can be unpacked outside the lock, into a copy of the caller's own.
	e, err := unpackEntry(b)
	if err != nil {
		return Entry{}, false, err
	}
	return e, true, nil
}

// Put implements [Store]. When the store is full it evicts the least
// recently used entry.
func (m *Memory) Put(ctx context.Context, key Key, e Entry, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("cache: the time to live must be positive")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := packEntry(e)
	if err != nil {
		return fmt.Errorf("cache: pack entry: %w", err)
	}
	it := &memoryItem{key: key, entry: b, expires: m.now().Add(ttl)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		el.Value = it
		m.order.MoveToFront(el)
		return nil
	}
	for m.order.Len() >= m.max {
		m.remove(m.order.Back())
	}
	m.items[key] = m.order.PushFront(it)
	return nil
}

// Len returns the number of entries held, expired ones not yet dropped
// included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}

func (m *Memory) remove(el *list.Element) {
	m.order.Remove(el)
	delete(m.items, el.Value.(*memoryItem).key)
}
