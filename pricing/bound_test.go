package pricing

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
)

// wireBytes is the length of s as a provider receives it: an invalid UTF-8
// byte is sent as U+FFFD.
func wireBytes(s string) int64 {
	n := int64(0)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += 3
		} else {
			n += int64(size)
		}
		i += size
	}
	return n
}

// The bound never falls below the scaled o200k count, never above one
// token per byte, and charges by bytes exactly where o200k's count is
// implausibly low for the length.
func TestBoundTokens(t *testing.T) {
	raw := make([]byte, 9000)
	_, _ = rand.Read(raw)
	prose := strings.Repeat("The estimate must bound what the provider bills for the request, whatever the text. ", 60)
	f := &Factor{}
	if err := f.UnmarshalText([]byte("1.35")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		text    string
		byBytes bool // every byte charged
	}{
		{"prose", prose, false},
		{"run of =", strings.Repeat("=", 40000), true},
		{"run of spaces", strings.Repeat(" ", 20000), true},
		{"run of a", strings.Repeat("a", 20000), true},
		{"prose then a run", prose + strings.Repeat("-", 12000), false},
		{"CJK", strings.Repeat("漢字仮名交じり文。", 500), true},
		{"emoji", strings.Repeat("😀🎉👍🏽", 400), true},
		{"raw bytes", string(raw), true},
		{"base64", base64.StdEncoding.EncodeToString(raw), false},
	}
	for _, c := range cases {
		for _, fac := range []*Factor{nil, f} {
			got := BoundTokens(c.text, fac)
			n := CountTokens(c.text)
			b := wireBytes(c.text)
			if got < fac.Scale(n) && got < b {
				t.Errorf("%s: bound %d below the scaled o200k count %d", c.name, got, fac.Scale(n))
			}
			if got > b {
				t.Errorf("%s: bound %d above one token per byte (%d)", c.name, got, b)
			}
			if c.byBytes && got != b {
				t.Errorf("%s: bound %d, want every byte charged (%d)", c.name, got, b)
			}
			if !c.byBytes && got >= b {
				t.Errorf("%s: bound %d charges every byte (%d) of ordinary text", c.name, got, b)
			}
		}
	}
	// A run after ordinary text is charged by its bytes all the same:
	// each 4 KiB piece is judged on its own.
	run := strings.Repeat("-", 12000)
	if got, want := BoundTokens(prose+run, f), BoundTokens(prose, f)+int64(len(run)); got < want-boundChunk/4 {
		t.Errorf("prose+run bound %d, want about %d (the run by bytes)", got, want)
	}
	// Ordinary prose is not inflated beyond the larger of f×o200k and a
	// token per 4 bytes (plus one rounding per piece and each seam's
	// charge).
	if got, n := BoundTokens(prose, f), CountTokens(prose); got > max(f.Scale(n), int64(len(prose)/4))+int64(len(prose)/boundChunk+1)*2+int64(len(prose)/boundChunk)*f.Scale(boundSeam) {
		t.Errorf("prose bound %d, o200k %d, bytes %d", got, n, len(prose))
	}
}

// The output side of an estimate is the request's max tokens clamped to
// the model's output limit, and a request asking for more is priced as
// one asking for the limit.
func TestEstimateClampsOutputToModelLimit(t *testing.T) {
	c := mustDefault(t)
	at := date("2026-11-30")
	m, _, err := c.Lookup("anthropic", "claude-sonnet-4-6")
	if err != nil {
		t.Fatal(err)
	}
	huge := &provider.Request{Prompt: "hi", MaxTokens: 2147483647}
	atLimit := &provider.Request{Prompt: "hi", MaxTokens: int(m.MaxOutputTokens)}
	eh, err := c.Estimate("anthropic", m.ID, huge, nil, at)
	if err != nil {
		t.Fatal(err)
	}
	el, _ := c.Estimate("anthropic", m.ID, atLimit, nil, at)
	if eh != el {
		t.Errorf("max_tokens 2^31-1 estimated at %s, the model's limit %d at %s", eh, m.MaxOutputTokens, el)
	}
	if got := m.OutputLimit(100); got != 100 {
		t.Errorf("OutputLimit(100) = %d", got)
	}
}

// Past BoundTokenizeBytes of a request's text, the bound charges a token
// per byte without tokenizing, across the request's texts: still an upper
// bound (never below the bound of the whole text tokenized), and a huge
// request costs a scan of its bytes, not seconds of tokenizer time.
func TestBoundRequestTokenizesAtMostALimit(t *testing.T) {
	f := &Factor{}
	if err := f.UnmarshalText([]byte("1.35")); err != nil {
		t.Fatal(err)
	}
	prose := strings.Repeat("The estimate must bound what the provider bills for the request, whatever the text. ", 40000)
	head, tail := prose[:BoundTokenizeBytes/2], prose[BoundTokenizeBytes/2:]
	split := &provider.Request{System: head, Prompt: tail}
	whole := BoundTokens(head, f) + BoundTokens(tail, f)
	got, _ := BoundRequestTokens(split, f, nil)
	if got < whole {
		t.Fatalf("bound %d below the fully tokenized bound %d", got, whole)
	}
	// The system prompt and the first half of the prompt's budget are
	// tokenized; every byte after that is charged one token.
	limited := &provider.Request{System: head, Prompt: tail[:BoundTokenizeBytes/2]}
	lim, _ := BoundRequestTokens(limited, f, nil)
	if want := lim + int64(len(tail)-BoundTokenizeBytes/2); got != want {
		t.Errorf("bound %d, want %d: the text past %d bytes charged by its bytes", got, want, BoundTokenizeBytes)
	}
	if got > whole*5 {
		t.Errorf("bound %d more than 5× the tokenized bound %d", got, whole)
	}
}
