package fakekit

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// TextTokens is the fakes' token count of a text: one token per 4 ASCII
// bytes (rounded up) and one per byte outside ASCII, an invalid byte
// counted as the 3 bytes of the U+FFFD it stands for. It is not a real
// tokenizer, but it is never more lenient than one where they differ most:
// real tokenizers count CJK, emoji, other scripts and random bytes at up to
// a token per byte. On ordinary English it is close to the vendors' "about
// four characters per token".
func TextTokens(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			other += 3
		} else {
			other += size
		}
		i += size
	}
	return (ascii+3)/4 + other
}

// JSONTokens is the fakes' count of the prompt carried by JSON values: the
// text a model sees of them, every object key, string and number (decoded,
// so escapes count as the characters they stand for), one byte of
// separator each, counted with [TextTokens]. A value that is not JSON
// counts by its bytes.
func JSONTokens(values ...json.RawMessage) int { return PromptTokens(nil, values...) }

// ImageBill bills one JSON object of a request as a provider bills an
// image: ok is false when obj is not an image.
type ImageBill func(obj map[string]any) (tokens int, ok bool)

// PromptTokens is [JSONTokens] with images billed as the provider bills
// them, by their pixels: every object image recognises counts its tokens,
// and nothing of it (the base64 bytes least of all) counts as text.
func PromptTokens(image ImageBill, values ...json.RawMessage) int {
	var text bytes.Buffer
	images := 0
	for _, v := range values {
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if d.Decode(&x) != nil {
			text.Write(v)
			continue
		}
		flatten(&text, x, image, &images)
	}
	return TextTokens(text.String()) + images
}

func flatten(b *bytes.Buffer, x any, image ImageBill, images *int) {
	switch v := x.(type) {
	case map[string]any:
		if image != nil {
			if n, ok := image(v); ok {
				*images += n
				return
			}
		}
		for k, e := range v {
			b.WriteString(k)
			b.WriteByte(' ')
			flatten(b, e, image, images)
		}
	case []any:
		for _, e := range v {
			flatten(b, e, image, images)
		}
	case string:
		b.WriteString(v)
		b.WriteByte(' ')
	case json.Number:
		b.WriteString(v.String())
		b.WriteByte(' ')
	case bool, nil:
		b.WriteString("x ")
	}
}

// CapOutput bounds a derived output count by a request's output limit, as
// real APIs do (they stop generating at max_tokens): when tokens, the
// output a reply would bill, exceeds limit (> 0), it returns limit, text
// cut to at most 4 bytes per allowed token (on a rune boundary) and true.
func CapOutput(text string, tokens, limit int) (string, int, bool) {
	if limit <= 0 || tokens <= limit {
		return text, tokens, false
	}
	if n := 4 * limit; len(text) > n {
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n]
	}
	return text, limit, true
}
