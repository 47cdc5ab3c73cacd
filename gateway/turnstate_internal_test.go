package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// signed is an answer with one tool call, id, carrying a signature of n
// bytes.
func signed(id string, n int) *provider.Result {
	sig, _ := json.Marshal(strings.Repeat("s", n))
	return &provider.Result{ToolCalls: []provider.ToolCall{{ID: id, Name: "f", Meta: provider.Metadata{"gemini.thought_signature": sig}}}}
}

// sentBack is the request of the next turn, the call sent back bare.
func sentBack(id string) *provider.Request {
	return &provider.Request{Messages: []provider.Message{provider.UserText("q"),
		{Role: provider.RoleAssistant, Parts: []provider.Part{{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: id, Name: "f"}}}}}}
}

func restored(s *turnState, key, id string) bool {
	req := sentBack(id)
	s.restore(key, req, math.MaxInt64)
	return len(req.Messages[1].Parts[0].ToolCall.Meta) > 0
}

// The kept state stays within its byte bound, the least recently used
// answer going first; an answer larger than the whole bound is not kept.
func TestTurnStateIsBounded(t *testing.T) {
	now := time.Now()
	s := newTurnState(time.Hour, 10_000, func() time.Time { return now })
	for i := range 9 { // 9 answers of about 1,030 bytes fit
		s.keep("k", signed(fmt.Sprintf("c%d", i), 1000))
	}
	if !restored(s, "k", "c0") { // c0 used: now the most recent
		t.Fatal("c0 not kept")
	}
	for i := 9; i < 12; i++ {
		s.keep("k", signed(fmt.Sprintf("c%d", i), 1000))
		if s.bytes > 10_000 {
			t.Fatalf("%d bytes kept after %d answers, over the bound", s.bytes, i+1)
		}
	}
	if !restored(s, "k", "c11") || !restored(s, "k", "c0") || restored(s, "k", "c1") {
		t.Error("want the newest and the recently used answers kept and the least recently used one dropped")
	}
	s.keep("k", signed("huge", 20_000))
	if restored(s, "k", "huge") {
		t.Error("an answer over the bound was kept")
	}
	if n := len(s.ids); n != s.lru.Len() {
		t.Errorf("%d ids for %d answers of one call each", n, s.lru.Len())
	}
}
