package gateway_test

import (
	"net/http"
	"runtime"
	"testing"
)

// maxAllocPerBodyByte bounds the bytes the gateway allocates to read,
// decode, estimate and refuse a large request, per byte of its body. The
// body is read into one buffer, decoded once (values are slices of it),
// its texts copied once into the call, and at most 1 MiB of them
// tokenized for the estimate: about 4.5 bytes per body byte. Decoding
// through a copy per nesting level, or tokenizing all of a huge text, put
// it above 7.
const maxAllocPerBodyByte = 6

// A 4 MiB request the month's budget refuses costs less than 6 bytes
// allocated per byte of its body, as one huge message and as many
// ordinary turns. (BenchmarkLargeBody has every shape and size, and the
// peak RSS; docs/benchmarks.md the figures.)
func TestLargeBodyAllocationIsBounded(t *testing.T) {
	w, upstream := sinkWorld(t, "0.000001")
	for _, shape := range []string{"text", "turns"} {
		body := largeChatBody(shape, 4<<20, "gpt/gpt-5-mini")
		if got := postBody(t, w, body); got != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d, want 429 (the month's budget refuses)", shape, got)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if got := postBody(t, w, body); got != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d, want 429", shape, got)
		}
		runtime.ReadMemStats(&after)
		per := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(body))
		t.Logf("%s: %d body bytes, %.2f bytes allocated per body byte", shape, len(body), per)
		if per > maxAllocPerBodyByte {
			t.Errorf("%s: %.2f bytes allocated per body byte, want at most %d", shape, per, maxAllocPerBodyByte)
		}
	}
	if n := upstream.Load(); n != 0 {
		t.Errorf("%d bytes reached the provider for refused calls", n)
	}
}
