package fakekit

import (
	"bytes"
	"unicode/utf8"
)

// CutRunes cuts s into pieces of about the given byte sizes (cycled),
// never splitting a UTF-8 sequence: a piece is shortened to the start of
// the rune that would be split, or, when the first rune is longer than the
// size, holds that one rune. An empty s gives no pieces. sizes must hold
// at least one positive size.
func CutRunes(s string, sizes []int) []string {
	var out []string
	for k := 0; len(s) > 0; k++ {
		n := sizes[k%len(sizes)]
		if n >= len(s) {
			out = append(out, s)
			break
		}
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// WordPieces cuts s into words, each carrying the whitespace before it (a
// word starts at a space byte that follows a non-space one, as isSpace
// tells them), and cuts words longer than maxBytes with [CutRunes]. The
// pieces concatenate to s; an empty s gives none.
func WordPieces(s string, isSpace func(byte) bool, maxBytes int) []string {
	var words []string
	start := 0
	for i := 1; i < len(s); i++ {
		if isSpace(s[i]) && !isSpace(s[i-1]) {
			words = append(words, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		words = append(words, s[start:])
	}
	var pieces []string
	for _, w := range words {
		pieces = append(pieces, CutRunes(w, []int{maxBytes})...)
	}
	return pieces
}

// SpacedJSON reformats compact JSON with ": " and ", " separators outside
// strings, as Python's json.dumps writes it (and as some APIs stream tool
// arguments).
func SpacedJSON(compact []byte) string { return string(spaceJSON(compact, true)) }

// ColonSpacedJSON reformats compact JSON with a space after every colon
// outside strings and none after commas.
func ColonSpacedJSON(compact []byte) []byte { return spaceJSON(compact, false) }

// spaceJSON inserts a space after every colon outside strings, and after
// every comma too when commas is set.
func spaceJSON(compact []byte, commas bool) []byte {
	var b bytes.Buffer
	inString, escaped := false, false
	for _, c := range compact {
		b.WriteByte(c)
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ':' || (commas && c == ',')):
			b.WriteByte(' ')
		}
	}
	return b.Bytes()
}
