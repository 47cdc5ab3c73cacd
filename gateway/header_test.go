package gateway

import (
	"strings"
	"testing"
)

// Ignored parameter names come from the caller's JSON keys: the header that
// lists them stays printable ASCII and bounded whatever they hold.
func TestIgnoredHeaderIsSafe(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = "p"
	}
	for _, params := range [][]string{
		{"temperature"}, {"\x7f"}, {"a\r\nSet-Cookie: x=1"}, {"ünï", "top_k"}, {strings.Repeat("k", 500)}, many,
	} {
		h := ignoredHeader(params)
		for i := 0; i < len(h); i++ {
			if h[i] < ' ' || h[i] >= 0x7f {
				t.Errorf("ignoredHeader(%q) = %q: byte %#x", params, h, h[i])
				break
			}
		}
		if len(h) > 2000 {
			t.Errorf("ignoredHeader of %d names is %d bytes", len(params), len(h))
		}
	}
	if got := ignoredHeader([]string{"temperature", "top_k"}); got != "temperature, top_k" {
		t.Errorf("plain names = %q", got)
	}
}
