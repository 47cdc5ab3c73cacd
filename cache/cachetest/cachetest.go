// Package cachetest is the conformance suite every cache back end passes,
// and a manual clock for expiry tests.
package cachetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Clock is a manual clock, safe for concurrent use. The zero value reads
// 2026-01-01 00:00 UTC.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		c.t = epoch
	}
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	now := c.Now()
	c.mu.Lock()
	c.t = now.Add(d)
	c.mu.Unlock()
}

// Instance is one empty store under test, with what the suite needs to
// check expiry.
type Instance struct {
	Store cache.Store
	// Advance moves the store's clock forward. Nil when the store's clock
	// cannot be moved (Redis); RemainingTTL is used instead.
	Advance func(d time.Duration)
	// RemainingTTL returns the time to live the store holds for key. Nil
	// when Advance is set.
	RemainingTTL func(key cache.Key) (time.Duration, error)
}

// TestKey returns a distinct key for name.
func TestKey(name string) cache.Key { return cache.Key(sha256.Sum256([]byte(name))) }

// SampleEntry returns an entry that uses every field, including tool calls
// and parts with provider metadata.
func SampleEntry(content string) cache.Entry {
	call := provider.ToolCall{
		ID: "call_1", Name: "read_file",
		Arguments: json.RawMessage(`{"path":"main.go"}`),
		Meta:      provider.Metadata{"gemini.thought_signature": json.RawMessage(`"c2ln"`)},
	}
	return cache.Entry{
		Content:   content,
		ToolCalls: []provider.ToolCall{call},
		Parts: []provider.Part{
			{Type: provider.PartReasoning, Text: "thinking", Meta: provider.Metadata{"anthropic.signature": json.RawMessage(`"sig"`)}},
			{Type: provider.PartText, Text: content},
			{Type: provider.PartToolCall, ToolCall: &call},
		},
		Usage:         provider.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 1000, ReasoningTokens: 50},
		Cost:          provider.MustMoney("0.004215"),
		Provider:      "anthropic-main",
		Model:         "claude-sonnet-4-5",
		StopReason:    provider.StopToolUse,
		RawStopReason: "tool_use",
		RequestID:     "req_123",
		StoredAt:      epoch.Add(90 * time.Minute),
	}
}

// Run runs the conformance suite. newInstance returns an empty store for
// each subtest (with its own clock, when it has one) and cleans it up with
// t.Cleanup.
func Run(t *testing.T, newInstance func(t *testing.T) Instance) {
	ctx := context.Background()
	const ttl = time.Hour

	t.Run("MissOnEmpty", func(t *testing.T) {
		in := newInstance(t)
		_, ok, err := in.Store.Get(ctx, TestKey("absent"))
		if ok || err != nil {
			t.Fatalf("Get on an empty store = %v, %v; want a miss without error", ok, err)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		in := newInstance(t)
		want := SampleEntry("hello")
		k := TestKey("round trip")
		if err := in.Store.Put(ctx, k, want, ttl); err != nil {
			t.Fatal(err)
		}
		got, ok, err := in.Store.Get(ctx, k)
		if !ok || err != nil {
			t.Fatalf("Get after Put = %v, %v; want a hit", ok, err)
		}
		assertSame(t, got, want)
	})

	t.Run("Overwrite", func(t *testing.T) {
		in := newInstance(t)
		k := TestKey("overwrite")
		for _, c := range []string{"first", "second"} {
			if err := in.Store.Put(ctx, k, SampleEntry(c), ttl); err != nil {
				t.Fatal(err)
			}
		}
		got, ok, err := in.Store.Get(ctx, k)
		if !ok || err != nil || got.Content != "second" {
			t.Fatalf("Get = %q, %v, %v; want the second value", got.Content, ok, err)
		}
	})

	t.Run("KeysAreApart", func(t *testing.T) {
		in := newInstance(t)
		for _, name := range []string{"a", "b", "c"} {
			if err := in.Store.Put(ctx, TestKey(name), SampleEntry(name), ttl); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"a", "b", "c"} {
			got, ok, err := in.Store.Get(ctx, TestKey(name))
			if !ok || err != nil || got.Content != name {
				t.Errorf("Get(%s) = %q, %v, %v", name, got.Content, ok, err)
			}
		}
		if _, ok, _ := in.Store.Get(ctx, TestKey("d")); ok {
			t.Error("Get of a key never stored is a hit")
		}
	})

	t.Run("CopiesAreIndependent", func(t *testing.T) {
		in := newInstance(t)
		k := TestKey("copies")
		e := SampleEntry("original")
		if err := in.Store.Put(ctx, k, e, ttl); err != nil {
			t.Fatal(err)
		}
		scribble(&e) // the caller changes what it stored
		got, _, err := in.Store.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		assertSame(t, got, SampleEntry("original"))
		scribble(&got) // and what it read
		again, _, err := in.Store.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		assertSame(t, again, SampleEntry("original"))
	})

	t.Run("NonPositiveTTLRefused", func(t *testing.T) {
		in := newInstance(t)
		for _, d := range []time.Duration{0, -time.Second} {
			if err := in.Store.Put(ctx, TestKey("ttl"), SampleEntry("x"), d); err == nil {
				t.Errorf("Put with ttl %v succeeded; want an error", d)
			}
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		in := newInstance(t)
		k := TestKey("expiry")
		if err := in.Store.Put(ctx, k, SampleEntry("x"), ttl); err != nil {
			t.Fatal(err)
		}
		switch {
		case in.Advance != nil:
			in.Advance(ttl - time.Nanosecond)
			if _, ok, err := in.Store.Get(ctx, k); !ok || err != nil {
				t.Fatalf("Get just before expiry = %v, %v; want a hit", ok, err)
			}
			in.Advance(time.Nanosecond)
			if _, ok, err := in.Store.Get(ctx, k); ok || err != nil {
				t.Fatalf("Get at expiry = %v, %v; want a miss", ok, err)
			}
		case in.RemainingTTL != nil:
			d, err := in.RemainingTTL(k)
			if err != nil {
				t.Fatal(err)
			}
			// The store counts down from ttl; a minute covers a slow run.
			if d <= ttl-time.Minute || d > ttl {
				t.Fatalf("remaining TTL = %v; want just under %v", d, ttl)
			}
		default:
			t.Fatal("the instance has neither Advance nor RemainingTTL")
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		in := newInstance(t)
		var wg sync.WaitGroup
		errs := make(chan error, 16*20)
		for g := range 16 {
			wg.Go(func() {
				for i := range 20 {
					name := fmt.Sprintf("k%d", (g+i)%8)
					if err := in.Store.Put(ctx, TestKey(name), SampleEntry(name), ttl); err != nil {
						errs <- err
						return
					}
					got, ok, err := in.Store.Get(ctx, TestKey(name))
					if err != nil {
						errs <- err
						return
					}
					if ok && got.Content != name {
						errs <- fmt.Errorf("Get(%s) returned %q", name, got.Content)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// scribble changes everything an entry shares by reference.
func scribble(e *cache.Entry) {
	e.Content = "changed"
	e.ToolCalls[0].Arguments[2] = 'X'
	e.ToolCalls[0].Meta["gemini.thought_signature"][1] = 'X'
	e.ToolCalls[0].Meta["new"] = json.RawMessage(`1`)
	e.Parts[0].Meta["anthropic.signature"][1] = 'X'
	e.Parts[1].Text = "changed"
	e.Parts[2].ToolCall.Name = "changed"
	e.Parts[2].ToolCall.Arguments[2] = 'X'
}

// assertSame compares entries by their JSON form (which is what a store must
// preserve) and their times by instant.
func assertSame(t *testing.T, got, want cache.Entry) {
	t.Helper()
	if !got.StoredAt.Equal(want.StoredAt) {
		t.Errorf("StoredAt = %v; want %v", got.StoredAt, want.StoredAt)
	}
	got.StoredAt, want.StoredAt = time.Time{}, time.Time{}
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("entry changed in the store:\n got %s\nwant %s", g, w)
	}
}
