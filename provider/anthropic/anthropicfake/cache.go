package anthropicfake

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// MaxCacheMarks is how many blocks with cache_control one request may
// carry; the API refuses a fifth.
const MaxCacheMarks = 4

// cacheLookback is how many blocks before a breakpoint the API looks for a
// cached prefix.
const cacheLookback = 20

// minCacheable lists the documented minimum cacheable prompt length by
// model id prefix, longest prefix first; a shorter prefix is not cached
// (and the API says nothing). A model not listed gets the largest minimum.
var minCacheable = []struct {
	prefix string
	tokens int
}{
	{"claude-opus-4-7", 2048},
	{"claude-opus-4-6", 4096},
	{"claude-opus-4-5", 4096},
	{"claude-opus-4-1", 1024},
	{"claude-opus-4", 1024},
	{"claude-sonnet-4-6", 1024},
	{"claude-sonnet-4-5", 1024},
	{"claude-sonnet-4", 1024},
	{"claude-3-7-sonnet", 1024},
	{"claude-haiku-4-5", 4096},
	{"claude-3-5-haiku", 2048},
	{"claude-3-haiku", 2048},
}

// MinCacheableTokens is the minimum cacheable prompt length of model.
func MinCacheableTokens(model string) int {
	for _, m := range minCacheable {
		if strings.HasPrefix(model, m.prefix) {
			return m.tokens
		}
	}
	return 4096
}

// cacheBlock is one block of a request in the order the cache sees the
// prompt: tools, system, then each message's content blocks.
type cacheBlock struct {
	raw json.RawMessage // the block without its cache_control, with its role
	ttl string          // the breakpoint's lifetime ("5m", "1h"), "" for none
}

// cacheBlocks splits a validated body into blocks. A top-level
// cache_control (automatic caching) marks the last block. It returns a
// message for a cache_control the API would refuse.
func cacheBlocks(fields map[string]json.RawMessage) ([]cacheBlock, string) {
	var out []cacheBlock
	add := func(path, role string, raw json.RawMessage) string {
		var m map[string]json.RawMessage
		b := cacheBlock{raw: raw}
		if json.Unmarshal(raw, &m) == nil {
			if cc, ok := m["cache_control"]; ok && string(cc) != "null" {
				ttl, msg := cacheTTL(path+".cache_control", cc)
				if msg != "" {
					return msg
				}
				b.ttl = ttl
				delete(m, "cache_control")
			}
			if role != "" {
				m["role"], _ = json.Marshal(role)
			}
			b.raw, _ = json.Marshal(m)
		}
		out = append(out, b)
		return ""
	}
	// A string content is the text block the API reads it as.
	textBlocks := func(raw json.RawMessage) []json.RawMessage {
		var blocks []json.RawMessage
		if json.Unmarshal(raw, &blocks) == nil {
			return blocks
		}
		b, _ := json.Marshal(map[string]json.RawMessage{"type": json.RawMessage(`"text"`), "text": raw})
		return []json.RawMessage{b}
	}
	var tools []json.RawMessage
	_ = json.Unmarshal(fields["tools"], &tools)
	for i, t := range tools {
		if msg := add(fmt.Sprintf("tools.%d", i), "", t); msg != "" {
			return nil, msg
		}
	}
	if sys, ok := fields["system"]; ok {
		for i, b := range textBlocks(sys) {
			if msg := add(fmt.Sprintf("system.%d", i), "system", b); msg != "" {
				return nil, msg
			}
		}
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(fields["messages"], &msgs)
	for i, m := range msgs {
		for j, b := range textBlocks(m.Content) {
			if msg := add(fmt.Sprintf("messages.%d.content.%d", i, j), m.Role, b); msg != "" {
				return nil, msg
			}
		}
	}
	if cc, ok := fields["cache_control"]; ok && string(cc) != "null" && len(out) > 0 {
		ttl, msg := cacheTTL("cache_control", cc)
		if msg != "" {
			return nil, msg
		}
		if last := &out[len(out)-1]; last.ttl == "" {
			last.ttl = ttl
		}
	}
	marks := 0
	for _, b := range out {
		if b.ttl != "" {
			marks++
		}
	}
	if marks > MaxCacheMarks {
		return nil, fmt.Sprintf("A maximum of %d blocks with cache_control may be provided. Found %d.", MaxCacheMarks, marks)
	}
	return out, ""
}

// cacheTTL reads a cache_control object.
func cacheTTL(path string, raw json.RawMessage) (string, string) {
	var cc struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	if json.Unmarshal(raw, &cc) != nil {
		return "", path + ": Input should be a valid dictionary"
	}
	if cc.Type != "ephemeral" {
		return "", path + ".type: Input should be 'ephemeral'"
	}
	switch cc.TTL {
	case "", "5m":
		return "5m", ""
	case "1h":
		return "1h", ""
	}
	return "", path + ".ttl: Input should be '5m' or '1h'"
}

// promptCache is the fake's prompt cache: the prefixes earlier requests
// marked, by model and content, until they expire. A hit refreshes the
// entry's lifetime, as the API does.
type promptCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cacheEntry
}

type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

func ttlDuration(ttl string) time.Duration {
	if ttl == "1h" {
		return time.Hour
	}
	return 5 * time.Minute
}

// account works out a request's cache use as the API does: the longest
// prefix cached up to a breakpoint, or up to cacheLookback blocks before
// one, is read; each breakpoint past it whose prefix reaches the model's
// minimum is written, the tokens since the previous one at its lifetime.
// total caps the counts (the prompt's whole count).
func (c *promptCache) account(model string, blocks []cacheBlock, total int, now time.Time) Usage {
	u := Usage{Input: total}
	marked := false
	for _, b := range blocks {
		marked = marked || b.ttl != ""
	}
	if !marked {
		return u
	}
	hashes := make([][sha256.Size]byte, len(blocks))
	h := sha256.New()
	h.Write([]byte(model))
	for i, b := range blocks {
		h.Write([]byte{0})
		h.Write(b.raw)
		copy(hashes[i][:], h.Sum(nil))
	}
	tokens := func(i int) int {
		if i < 0 {
			return 0
		}
		vals := make([]json.RawMessage, i+1)
		for j := range vals {
			vals[j] = blocks[j].raw
		}
		return min(total, fakekit.JSONTokens(vals...))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[[sha256.Size]byte]cacheEntry{}
	}
	hit := -1
	for i, b := range blocks {
		if b.ttl == "" {
			continue
		}
		for j := i; j >= max(0, i-cacheLookback+1) && j > hit; j-- {
			if e, ok := c.entries[hashes[j]]; ok && now.Before(e.expires) {
				hit = j
				break
			}
		}
	}
	if hit >= 0 {
		e := c.entries[hashes[hit]]
		e.expires = now.Add(e.ttl)
		c.entries[hashes[hit]] = e
	}
	u.CacheRead = tokens(hit)
	written, floor := u.CacheRead, MinCacheableTokens(model)
	for i := hit + 1; i < len(blocks); i++ {
		b := blocks[i]
		if b.ttl == "" {
			continue
		}
		n := tokens(i)
		if n < floor {
			continue
		}
		if b.ttl == "1h" {
			u.CacheCreation1h += n - written
		} else {
			u.CacheCreation5m += n - written
		}
		written = n
		d := ttlDuration(b.ttl)
		c.entries[hashes[i]] = cacheEntry{expires: now.Add(d), ttl: d}
	}
	u.Input = max(0, total-written)
	return u
}
