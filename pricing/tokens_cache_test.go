package pricing

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
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

// Remembering the count of a piece of a long text does not keep the long
// text alive: the cache holds a copy of the piece.
func TestCountTokensDoesNotPinTheText(t *testing.T) {
	long := strings.Repeat("a long pasted file ", 1<<16)
	freed := make(chan struct{})
	runtime.AddCleanup(unsafe.StringData(long), func(struct{}) { close(freed) }, struct{}{})
	CountTokens(long[:4096])
	long = ""
	for range 50 {
		runtime.GC()
		select {
		case <-freed:
			return
		default:
			runtime.Gosched()
		}
	}
	t.Fatal("a long text stayed alive after the count of one of its pieces was remembered")
}
