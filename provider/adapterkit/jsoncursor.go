package adapterkit

import (
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONCursor reads one JSON text in a single pass, value by value, for
// the fast paths that decode a streamed event into a fixed struct. It is
// strict: what it takes is valid JSON (RFC 8259) and what it decodes, it
// decodes as encoding/json would; anything it does not take (invalid
// JSON, an object key with an escape, nesting deeper than
// maxCursorDepth) makes the method reading it report false, and the
// caller then leaves the text to encoding/json. It does not check UTF-8:
// a caller that needs valid UTF-8 checks the text first.
type JSONCursor struct {
	b     []byte
	i     int
	depth int
}

// maxCursorDepth is the deepest nesting a JSONCursor reads; a deeper
// text is left to encoding/json.
const maxCursorDepth = 64

// NewJSONCursor returns a cursor at the start of b.
func NewJSONCursor(b []byte) JSONCursor { return JSONCursor{b: b} }

func (c *JSONCursor) space() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// Next returns the first byte of the next value (after white space), 0
// at the end of the text.
func (c *JSONCursor) Next() byte {
	c.space()
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

// End reports whether nothing but white space is left.
func (c *JSONCursor) End() bool { return c.Next() == 0 && c.i == len(c.b) }

// Null reads a null and reports true, or reports false and reads nothing
// when the next value is not null.
func (c *JSONCursor) Null() bool { return c.Next() == 'n' && c.literal("null") }

func (c *JSONCursor) literal(word string) bool {
	if len(c.b)-c.i < len(word) || string(c.b[c.i:c.i+len(word)]) != word {
		return false
	}
	c.i += len(word)
	return true
}

// Object reads an object, calling member with each key (its bytes
// between the quotes) with the cursor at the member's value, which
// member must read (or Skip). It reports false when member does, when a
// key holds an escape, or when the text is not an object.
func (c *JSONCursor) Object(member func(key []byte) bool) bool {
	if c.Next() != '{' || c.depth >= maxCursorDepth {
		return false
	}
	c.depth++
	defer func() { c.depth-- }()
	c.i++
	if c.Next() == '}' {
		c.i++
		return true
	}
	for {
		if c.Next() != '"' {
			return false
		}
		start := c.i + 1
		end, escaped := c.stringEnd()
		if end < 0 || escaped {
			return false
		}
		c.i = end + 1
		if c.Next() != ':' {
			return false
		}
		c.i++
		if !member(c.b[start:end]) {
			return false
		}
		switch c.Next() {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

// Array reads an array, calling elem with the cursor at each element,
// which elem must read (or Skip). It reports false when elem does or
// when the text is not an array.
func (c *JSONCursor) Array(elem func() bool) bool {
	if c.Next() != '[' || c.depth >= maxCursorDepth {
		return false
	}
	c.depth++
	defer func() { c.depth-- }()
	c.i++
	if c.Next() == ']' {
		c.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch c.Next() {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

// String reads a string and returns it decoded as encoding/json decodes
// it (a lone surrogate escape becomes U+FFFD).
func (c *JSONCursor) String() (string, bool) {
	if c.Next() != '"' {
		return "", false
	}
	start := c.i + 1
	end, escaped := c.stringEnd()
	if end < 0 {
		return "", false
	}
	c.i = end + 1
	if !escaped {
		return string(c.b[start:end]), true
	}
	return unescape(c.b[start:end]), true
}

// Raw reads any value and returns its bytes as they are in the text.
func (c *JSONCursor) Raw() ([]byte, bool) {
	c.space()
	start := c.i
	if !c.Skip() {
		return nil, false
	}
	return c.b[start:c.i], true
}

// Int reads a number written as an integer (no fraction, no exponent)
// that fits an int64.
func (c *JSONCursor) Int() (int64, bool) {
	c.space()
	start := c.i
	if integer, ok := c.number(); !ok || !integer {
		return 0, false
	}
	n, err := strconv.ParseInt(string(c.b[start:c.i]), 10, 64)
	return n, err == nil
}

// Skip reads any value, checking it is valid JSON.
func (c *JSONCursor) Skip() bool {
	switch c.Next() {
	case '{':
		return c.Object(func([]byte) bool { return c.Skip() })
	case '[':
		return c.Array(c.Skip)
	case '"':
		end, _ := c.stringEnd()
		if end < 0 {
			return false
		}
		c.i = end + 1
		return true
	case 'n':
		return c.literal("null")
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	}
	_, ok := c.number()
	return ok
}

// number reads a number, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?,
// and reports whether it has neither fraction nor exponent.
func (c *JSONCursor) number() (integer, ok bool) {
	i := c.i
	digits := func() bool {
		s := i
		for i < len(c.b) && c.b[i] >= '0' && c.b[i] <= '9' {
			i++
		}
		return i > s
	}
	if i < len(c.b) && c.b[i] == '-' {
		i++
	}
	switch {
	case i < len(c.b) && c.b[i] == '0':
		i++
	case i < len(c.b) && c.b[i] >= '1' && c.b[i] <= '9':
		digits()
	default:
		return false, false
	}
	integer = true
	if i < len(c.b) && c.b[i] == '.' {
		i++
		if integer = false; !digits() {
			return false, false
		}
	}
	if i < len(c.b) && (c.b[i] == 'e' || c.b[i] == 'E') {
		i++
		if i < len(c.b) && (c.b[i] == '+' || c.b[i] == '-') {
			i++
		}
		if integer = false; !digits() {
			return false, false
		}
	}
	c.i = i
	return integer, true
}

// stringEnd returns the index of the quote that closes the string whose
// opening quote is at c.i, and whether the string holds an escape; -1
// when the string is not valid JSON (a control character, a bad escape,
// no closing quote).
func (c *JSONCursor) stringEnd() (int, bool) {
	escaped := false
	for i := c.i + 1; i < len(c.b); i++ {
		switch b := c.b[i]; {
		case b == '"':
			return i, escaped
		case b < 0x20:
			return -1, false
		case b == '\\':
			escaped = true
			if i+1 >= len(c.b) {
				return -1, false
			}
			i++
			switch c.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if hex4(c.b[i+1:]) < 0 {
					return -1, false
				}
				i += 4
			default:
				return -1, false
			}
		}
	}
	return -1, false
}

// hex4 is the value of the four hex digits b starts with, -1 when it
// does not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, x := range b[:4] {
		switch {
		case '0' <= x && x <= '9':
			x -= '0'
		case 'a' <= x && x <= 'f':
			x = x - 'a' + 10
		case 'A' <= x && x <= 'F':
			x = x - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(x)
	}
	return r
}

// unescape decodes s, the valid contents of a JSON string holding an
// escape, as encoding/json does.
func unescape(s []byte) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			out = append(out, s[i])
			i++
			continue
		}
		switch e := s[i+1]; e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(s[i+2:])); dec != unicode.ReplacementChar {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, e)
		}
		i += 2
	}
	return string(out)
}
