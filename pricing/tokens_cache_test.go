package pricing

import (
	"fmt"
	"strings"
	"testing"
)

// Remembered counts are the tokenizer's, and the memory stays bounded.
func TestCountTokensRemembersWithinBounds(t *testing.T) {
	text := "Plan how to add a /healthz endpoint to the web service, with its tests."
	want := countTokens(text)
	if got, again := CountTokens(text), CountTokens(text); got != want || again != want {
		t.Fatalf("counts %d, %d; tokenizer %d", got, again, want)
	}
	for i := range countsMaxEntries + 10 {
		CountTokens(fmt.Sprintf("entry %d", i))
	}
	long := strings.Repeat("word ", countsMaxText/5+1)
	if CountTokens(long) != countTokens(long) {
		t.Error("long text miscounted")
	}
	counts.Lock()
	defer counts.Unlock()
	if len(counts.m) > countsMaxEntries || counts.bytes > countsMaxBytes {
		t.Errorf("cache holds %d entries, %d bytes", len(counts.m), counts.bytes)
	}
	if _, ok := counts.m[long]; ok {
		t.Error("a text above countsMaxText was kept")
	}
}
