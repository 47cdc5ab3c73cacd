package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// errNotJSON is returned by appendCanonical for input that is not one valid
// JSON value.
var errNotJSON = errors.New("not a valid JSON value")

// canonicalizer rewrites a JSON value in canonical form: object members
// sorted by their decoded key (byte order of the UTF-8 string; duplicates
// keep their order), no whitespace outside strings, strings with the
// minimal escapes (only the quote, the backslash and control characters) and
// numbers and literals byte for byte as written. Two values that differ only
// in member order, whitespace or string escaping come out the same; any
// other difference survives.
//
// Its buffers are reused from one call to the next; it is not safe for
// concurrent use.
type canonicalizer struct {
	src   []byte
	pos   int
	spans []member // a stack: each object level uses spans[base:]
	tmp   []byte
}

// member is one object member written into dst at [from, to), keyed by its
// decoded name.
type member struct {
	key      []byte
	from, to int
}

// appendCanonical appends the canonical form of src to dst.
func (c *canonicalizer) appendCanonical(dst, src []byte) ([]byte, error) {
	if !json.Valid(src) {
		return dst, errNotJSON
	}
	c.src, c.pos = src, 0
	dst = c.value(dst)
	c.src = nil
	return dst, nil
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the value at c.pos; the input is known to be valid JSON.
func (c *canonicalizer) value(dst []byte) []byte {
	c.skipSpace()
	switch c.src[c.pos] {
	case '{':
		return c.object(dst)
	case '[':
		return c.array(dst)
	case '"':
		raw := c.rawString()
		s, escaped := unquote(raw)
		if !escaped {
			return append(dst, raw...)
		}
		return appendQuoted(dst, s)
	default: // number, true, false, null
		start := c.pos
		for c.pos < len(c.src) {
			switch c.src[c.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return append(dst, c.src[start:c.pos]...)
			}
			c.pos++
		}
		return append(dst, c.src[start:]...)
	}
}

func (c *canonicalizer) array(dst []byte) []byte {
	c.pos++ // [
	dst = append(dst, '[')
	for n := 0; ; n++ {
		c.skipSpace()
		if c.src[c.pos] == ']' {
			c.pos++
			return append(dst, ']')
		}
		if n > 0 {
			c.pos++ // ,
			dst = append(dst, ',')
		}
		dst = c.value(dst)
	}
}

func (c *canonicalizer) object(dst []byte) []byte {
	c.pos++ // {
	base := len(c.spans)
	start := len(dst)
	for {
		c.skipSpace()
		if c.src[c.pos] == '}' {
			c.pos++
			break
		}
		if c.src[c.pos] == ',' {
			c.pos++
			c.skipSpace()
		}
		raw := c.rawString()
		key, escaped := unquote(raw)
		from := len(dst)
		if escaped {
			dst = appendQuoted(dst, key)
		} else {
			dst = append(dst, raw...)
		}
		c.skipSpace()
		c.pos++ // :
		dst = append(dst, ':')
		dst = c.value(dst)
		c.spans = append(c.spans, member{key: key, from: from, to: len(dst)})
	}
	ms := c.spans[base:]
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.tmp = append(c.tmp[:0], dst[start:]...)
	dst = append(dst[:start], '{')
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.tmp[m.from-start:m.to-start]...)
	}
	c.spans = c.spans[:base]
	return append(dst, '}')
}

// rawString returns the string at c.pos, quotes included, and moves past it.
func (c *canonicalizer) rawString() []byte {
	start := c.pos
	c.pos++ // opening quote
	for {
		switch c.src[c.pos] {
		case '\\':
			c.pos += 2
		case '"':
			c.pos++
			return c.src[start:c.pos]
		default:
			c.pos++
		}
	}
}

// unquote returns the decoded content of a quoted JSON string and whether it
// held escapes. Without escapes the content is a sub-slice of raw, and raw
// is already canonical (valid JSON has no raw quote, backslash or control
// character inside a string).
func unquote(raw []byte) ([]byte, bool) {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return inner, false // unreachable for valid JSON; keep the bytes as written
	}
	return []byte(s), true
}

// appendQuoted appends s as a JSON string with the minimal escapes.
func appendQuoted(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, b := range s {
		switch {
		case b == '"' || b == '\\':
			dst = append(dst, '\\', b)
		case b == '\n':
			dst = append(dst, '\\', 'n')
		case b == '\r':
			dst = append(dst, '\\', 'r')
		case b == '\t':
			dst = append(dst, '\\', 't')
		case b == '\b':
			dst = append(dst, '\\', 'b')
		case b == '\f':
			dst = append(dst, '\\', 'f')
		case b < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		default:
			dst = append(dst, b)
		}
	}
	return append(dst, '"')
}
