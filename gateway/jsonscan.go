package gateway

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/tidwall/gjson"
)

// maxScanDepth bounds the nesting a relayed body may have: deeper, the
// scan gives up and the full decoder says what is wrong (encoding/json
// refuses past the same depth).
const maxScanDepth = 10000

// jsonScan is one pass over a JSON document: it checks that the document
// is valid (the grammar of RFC 8259, as gjson.Valid reads it: strings are
// not checked for UTF-8), collects the members of the top-level object,
// and looks at every string, key or value, that could spell one of a few
// words (see [jsonScan.word]). The long strings of a prompt, where nearly
// all the bytes are, are crossed eight bytes at a time.
type jsonScan struct {
	b     []byte
	i     int
	top   members
	words []string // what word looks for
	found uint64   // bit k set: words[k] is a string of the document
	// escaped: the last string scanned held an escape.
	escaped bool
	// roles, when set, names the top-level array of messages (Chat's
	// "messages") whose system and developer messages' contents the scan
	// collects in system, in order: an agent's persona marker is read
	// from them without a second pass over the conversation.
	roles  string
	system []gjson.Result
	// inRoles: the top-level member being scanned is the roles array.
	inRoles bool
}

// scanJSON scans body, which must be an object, looking for words (at
// most 64) and, when roles is not "", collecting the system and developer
// messages' contents of the top-level array roles. ok is false when body
// is not a valid JSON object.
func scanJSON(body []byte, words []string, roles string) (s jsonScan, ok bool) {
	s = jsonScan{b: body, words: words, roles: roles}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return s, false
	}
	if !s.value(0) {
		return s, false
	}
	s.ws()
	return s, s.i == len(s.b)
}

// has reports whether words[k] was found.
func (s *jsonScan) has(k int) bool { return s.found&(1<<k) != 0 }

func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at s.i (whitespace skipped before it).
func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		var ok bool
		s.escaped, ok = s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *jsonScan) object(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++ // '{'
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	// A message of the roles array: its first role and first content (as
	// gjson reads a key named twice).
	message := depth == 3 && s.inRoles
	var role gjson.Result
	c0, c1, cEscaped := -1, -1, false // the content's span: read only for a system message
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		k0 := s.i
		escaped, ok := s.str()
		if !ok {
			return false
		}
		k1 := s.i
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		v0 := s.i
		if depth == 1 {
			s.inRoles = s.roles != "" && v0 < len(s.b) && s.b[v0] == '[' && s.key(k0, k1, escaped) == s.roles
		}
		if !s.value(depth) {
			return false
		}
		switch {
		case depth == 1:
			s.member(k0, k1, escaped, v0, s.i)
			s.inRoles = false
		case message:
			switch k := s.key(k0, k1, escaped); {
			case k == "role" && !role.Exists():
				role = s.result(v0, s.i, s.escaped)
			case k == "content" && c0 < 0:
				c0, c1, cEscaped = v0, s.i, s.escaped
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			if message && role.Type == gjson.String && (role.Str == "system" || role.Str == "developer") {
				var content gjson.Result
				if c0 >= 0 {
					content = s.result(c0, c1, cEscaped)
				}
				s.system = append(s.system, content)
			}
			return true
		default:
			return false
		}
	}
}

func (s *jsonScan) array(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++ // '['
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		s.ws()
		if !s.value(depth) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// member adds a top-level member: its key is b[k0:k1] (quoted), its
// value b[v0:v1]. The Results point into b, which nothing changes.
func (s *jsonScan) member(k0, k1 int, escaped bool, v0, v1 int) {
	s.top = append(s.top, member{s.key(k0, k1, escaped), s.result(v0, v1, s.escaped)})
}

// key is the key b[k0:k1] (quoted), unescaped.
func (s *jsonScan) key(k0, k1 int, escaped bool) string {
	if escaped {
		return gjson.Parse(s.text(k0, k1)).Str
	}
	return s.text(k0+1, k1-1)
}

// result is the value b[v0:v1] as gjson reads it, its Index at v0
// (escaped: the value is a string that holds an escape). It points into
// b, which nothing changes.
func (s *jsonScan) result(v0, v1 int, escaped bool) gjson.Result {
	raw := s.text(v0, v1)
	var v gjson.Result
	switch s.b[v0] {
	case '{', '[':
		v = gjson.Result{Type: gjson.JSON, Raw: raw}
	case '"':
		if escaped {
			v = gjson.Parse(raw)
		} else {
			// No escape: its text is what lies between the quotes (a
			// long system prompt is not crossed a second time).
			v = gjson.Result{Type: gjson.String, Raw: raw, Str: raw[1 : len(raw)-1]}
		}
	default:
		v = gjson.Parse(raw)
	}
	v.Index = v0
	return v
}

// text is b[i:j] as a string, without a copy.
func (s *jsonScan) text(i, j int) string {
	if i >= j {
		return ""
	}
	return unsafe.String(&s.b[i], j-i)
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special marks the bytes of w (little-endian) that are a quote, a
// backslash or a control character (below 0x20): what ends a run of plain
// string bytes. Its lowest set bit is the high bit of the first such
// byte; the bits above it may be set for bytes that are not.
func special(w uint64) uint64 {
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	ctl := (w - ones*0x20) & ^w & highs
	return zero(q) | zero(bs) | ctl
}

// str scans a string at s.i (its opening quote) and reports whether it
// holds an escape.
func (s *jsonScan) str() (escaped, ok bool) {
	start := s.i + 1
	i := start
	b := s.b
	for {
		for i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return escaped, false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			if i-start <= maxWordBytes {
				s.word(b[start:i], escaped)
			}
			return escaped, true
		case c < 0x20:
			return escaped, false
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				return escaped, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 > len(b) {
					return escaped, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return escaped, false
					}
				}
				i += 5
			default:
				return escaped, false
			}
		default:
			i++
		}
	}
}

// maxWordBytes is the longest string, as written, that word compares: a
// word of 13 characters each written as a \u escape.
const maxWordBytes = 6 * 13

// word marks the words that raw, a string's content as written, spells
// (unescaped when it holds an escape).
func (s *jsonScan) word(raw []byte, escaped bool) {
	if len(s.words) == 0 {
		return
	}
	text := unsafe.String(unsafe.SliceData(raw), len(raw))
	if escaped {
		text = gjson.Parse(`"` + text + `"`).Str
	}
	for k, w := range s.words {
		if text == w {
			s.found |= 1 << k
		}
	}
}

func (s *jsonScan) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number scans a number as RFC 8259 writes it.
func (s *jsonScan) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}
