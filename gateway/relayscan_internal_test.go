package gateway

import (
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The cache lifetime a scanned Messages body may ask for, from its bytes:
// the hour wherever "1h" could be spelt, an escape included.
func TestCacheMarksOfAScannedBody(t *testing.T) {
	cases := []struct {
		p    provider.Protocol
		body string
		want provider.PromptCache
	}{
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"hi"}]}`, provider.PromptCacheOff},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`, provider.PromptCache5m},
		{provider.ProtoMessages, `{"cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[]}`, provider.PromptCache1h},
		{provider.ProtoMessages, `{"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"\u0031h"}}]}`, provider.PromptCache1h},
		// Quoted in source code, the key is escaped and marks nothing.
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"x = {\"cache_control\": 1}"}]}`, provider.PromptCacheOff},
		{provider.ProtoChat, `{"messages":[],"cache_control":{"ttl":"1h"}}`, provider.PromptCacheOff},
	}
	for _, c := range cases {
		if got := cacheMarks(c.p, []byte(c.body)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.p, c.body, got, c.want)
		}
	}
}
