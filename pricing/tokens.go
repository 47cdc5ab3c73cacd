package pricing

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Framing overheads added to the raw text count so that estimates stay
// upper bounds: every message carries role and separator tokens, and
// providers add a hidden system prompt when tools are declared (Anthropic
// documents 346 tokens for Claude 4 models with tool_choice auto).
const (
	RequestOverhead    = 8
	MessageOverhead    = 6
	ToolOverhead       = 16
	ToolSystemOverhead = 512
)

// o200k is the one encoding the estimates use. It is built by its own
// constructor, not looked up by name (tokenizer.Get), so that the other
// encodings' vocabularies are not linked into the binary.
var o200k = sync.OnceValue(codec.NewO200kBase)

// counts remembers the token counts of recent texts: an agent's system
// prompt, its tool definitions and a conversation's earlier turns are
// counted again on every call, and the tokenizer costs microseconds per
// word. Bounded: it starts afresh when full.
var counts struct {
	sync.Mutex
	m     map[string]int64
	bytes int
}

const (
	countsMaxEntries = 4096
	countsMaxBytes   = 16 << 20
	countsMaxText    = 256 << 10 // longer texts are counted every time
)

// CountTokens returns the number of o200k_base tokens in s. Invalid UTF-8 is
// counted by bytes so the count never falls short.
func CountTokens(s string) int64 {
	if s == "" {
		return 0
	}
	if len(s) > countsMaxText {
		return countTokens(s)
	}
	counts.Lock()
	n, ok := counts.m[s]
	counts.Unlock()
	if ok {
		return n
	}
	n = countTokens(s)
	counts.Lock()
	if counts.m == nil || len(counts.m) >= countsMaxEntries || counts.bytes+len(s) > countsMaxBytes {
		counts.m, counts.bytes = make(map[string]int64, 256), 0
	}
	// A copy: s is often a piece of a much longer text (BoundTokens
	// judges 4 KiB at a time), which the key would otherwise keep alive.
	counts.m[strings.Clone(s)] = n
	counts.bytes += len(s)
	counts.Unlock()
	return n
}

func countTokens(s string) int64 {
	n, err := o200k().Count(s)
	if err != nil {
		return int64(len(s))
	}
	return int64(n)
}

// ImageTokens is what one image input is counted as by
// [CountRequestTokens], which knows no provider: about what the providers
// bill for an image of ordinary size. Estimates bound each image with its
// provider's own formula instead ([BoundRequestTokens]).
const ImageTokens = 2500

// CountRequestTokens counts every prompt token of req offline: system,
// messages (text, reasoning, tool calls, tool results, images at
// [ImageTokens] each), tool definitions, plus framing overheads. It is a
// count, not a bound: estimates use [BoundRequestTokens].
func CountRequestTokens(req *provider.Request) int64 {
	var img int64
	n, over := walkRequest(req, CountTokens, false, func(*provider.Image) { img += ImageTokens })
	return over + n + img
}

// walkRequest adds up count over every text of req that a provider
// tokenizes (with withIDs, the ids and names of tool calls and results
// too), and apart the framing overheads of its messages and tools; it
// hands every image to image.
func walkRequest(req *provider.Request, count func(string) int64, withIDs bool, image func(*provider.Image)) (n, over int64) {
	over = RequestOverhead
	n = count(req.System)
	for _, m := range req.Conversation() {
		over += MessageOverhead
		for _, p := range m.Parts {
			n += count(p.Text)
			if tc := p.ToolCall; tc != nil {
				over += MessageOverhead
				n += count(tc.Name) + count(string(tc.Arguments))
				if withIDs {
					n += count(tc.ID)
				}
			}
			if p.Image != nil {
				image(p.Image)
			}
			if tr := p.ToolResult; tr != nil {
				over += MessageOverhead
				n += count(tr.Content)
				if withIDs {
					n += count(tr.CallID) + count(tr.Name)
				}
			}
		}
	}
	if len(req.Tools) > 0 {
		over += ToolSystemOverhead
	}
	for _, t := range req.Tools {
		over += ToolOverhead
		n += count(t.Name) + count(t.Description) + count(string(t.InputSchema))
	}
	return n, over
}

// The bound on a text's tokens (see [BoundRequestTokens]).
const (
	// boundChunk is the size of the pieces a text is judged in, so that
	// an unusual stretch (a long run of one character) is charged by its
	// bytes without the ordinary text around it hiding it.
	boundChunk = 4 << 10
	// boundMaxRatio is the most bytes per o200k token that ordinary
	// ASCII text reaches (prose about 4.3, code 3.5, deeply indented code
	// under 6). A piece that o200k compresses further is one whose count
	// says nothing about another vendor's tokenizer.
	boundMaxRatio = 6
	// boundBytesPerToken is the vendors' own rule of thumb (about four
	// characters of English per token): ordinary ASCII text is never
	// bounded below a token per 4 bytes, whatever o200k counts.
	boundBytesPerToken = 4
	// boundSeam is what a seam between two pieces is charged: the
	// provider tokenizes the text whole, and BPE merges across the seam
	// can count up to a few tokens more than the two pieces apart (two,
	// in 3,000 random base64 texts of three pieces; TestBoundTokens).
	boundSeam = 4
	// BoundTokenizeBytes is how much of one request's text
	// [BoundRequestTokens] runs through the tokenizer (about a million
	// bytes, some 250,000 tokens of prose: the prompt of most models'
	// whole context window). Past it, text is charged by its bytes, the
	// hard ceiling, without tokenizing: the bound stays a bound, and a
	// huge request costs a scan of its bytes instead of seconds of CPU.
	BoundTokenizeBytes = 1 << 20
)

// BoundTokens returns an upper bound of the tokens any provider's
// tokenizer counts for s, given f, the catalog's ratio of that provider's
// counts to o200k's on ordinary text. s is judged in pieces of 4 KiB; for
// each piece of B bytes as the provider receives them (an invalid UTF-8
// byte arrives as U+FFFD, 3 bytes), X of them outside ASCII and A in it,
// with N o200k tokens:
//
//   - when A > 6·N (o200k averages more than 6 bytes per token, as on long
//     runs of one character): B, one token per byte;
//   - otherwise min(B, X + max(ceil(f·N), ceil(A/4))).
//
// One token per byte is the hard ceiling: every byte-level BPE tokenizer
// (and SentencePiece with byte fallback) emits at most one token per byte
// of UTF-8 text. Bytes outside ASCII (CJK, emoji, other scripts) are
// charged one token each because vendor vocabularies differ most there.
func BoundTokens(s string, f *Factor) int64 {
	tokenize := int64(len(s))
	return boundTokens(s, f, &tokenize)
}

// boundTokens is [BoundTokens] tokenizing at most *tokenize bytes of s
// (less what it tokenized): every other piece is charged its bytes.
// A seam between two pieces both charged below their bytes adds
// [boundSeam] tokens; the whole is never charged more than its bytes.
func boundTokens(s string, f *Factor, tokenize *int64) int64 {
	var total, bytes int64
	counted := false // the piece before was charged below its bytes
	for len(s) > 0 {
		n := min(len(s), boundChunk)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = min(len(s), boundChunk)
		}
		t, b := boundPiece(s[:n], f, tokenize)
		if counted && t < b {
			t += f.Scale(boundSeam)
		}
		counted = t < b
		total, bytes = total+t, bytes+b
		s = s[n:]
	}
	return min(total, bytes)
}

// boundPiece returns the bound of one piece and its bytes as sent.
func boundPiece(s string, f *Factor, tokenize *int64) (bound, bytes int64) {
	var ascii, other int64
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			other += 3 // sent as U+FFFD
		} else {
			other += int64(size)
		}
		i += size
	}
	b := ascii + other
	if *tokenize < int64(len(s)) {
		return b, b
	}
	*tokenize -= int64(len(s))
	n := CountTokens(s)
	if ascii > boundMaxRatio*n {
		return b, b
	}
	return min(b, other+max(f.Scale(n), (ascii+boundBytesPerToken-1)/boundBytesPerToken)), b
}

// BoundRequestTokens is an upper bound of the prompt tokens any provider
// whose tokenizer counts at most f times o200k on ordinary text, and which
// bills images at most as images says, bills for req: every text of
// [CountRequestTokens] (and the ids of tool calls and results) bounded by
// [BoundTokens], plus the framing overheads scaled by f, plus each image
// bounded by images from its size read from the header of its bytes
// (never decoding the pixels), or by images' maximum for an image given by
// URL or whose header cannot be read (an error when images has none). It
// is the prompt side of every estimate. At most [BoundTokenizeBytes] of
// the request's text are tokenized (none when req.CeilingEstimate is set);
// the rest is charged one token per byte.
func BoundRequestTokens(req *provider.Request, f *Factor, images provider.ImageTokens) (int64, error) {
	tokenize := int64(BoundTokenizeBytes)
	if req.CeilingEstimate {
		tokenize = 0
	}
	var img int64
	var bad error
	n, over := walkRequest(req, func(s string) int64 { return boundTokens(s, f, &tokenize) }, true, func(im *provider.Image) {
		t, ok := imageTokens(im, images)
		if !ok && bad == nil {
			_, _, err := im.Size()
			bad = fmt.Errorf("an image cannot be priced: %v, and the model bills images by size with no maximum (send a PNG, JPEG, GIF or WebP image)", err)
		}
		img += t
	})
	return f.Scale(over) + n + img, bad
}
