package adapterkit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// cursorTexts are JSON texts, valid and not: the cursor takes a text
// exactly when encoding/json does, but for an escaped key and nesting
// past its depth, which it leaves to encoding/json.
var cursorTexts = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12`, `-1.5e+10`, `2E-3`, `0.25`, `"a"`,
	` { "a" : [ 1 , { "b" : null } , "c\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800" ] } `,
	`{"a":1,"a":2}`, `[1,[2,[3,[4]]]]`, "\"\u2028\"",
	`"\ud800x\udc00 \ud83d\ude00 \ud83d\u0041 \u0000\/"`,
	// Refused, by both:
	`{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `1 2`, `nul`, `truex`,
	`"a`, "\"a\tb\"", `"\x"`, `"\u12"`, `"\u12G4"`, `{a:1}`, `{"a":1}}`, `[1]]`, `'a'`, ``, ` `,
}

// skipAll reads one value and the end of the text.
func skipAll(b []byte) bool {
	c := adapterkit.NewJSONCursor(b)
	return c.Skip() && c.End()
}

func TestJSONCursorTakesWhatEncodingJSONTakes(t *testing.T) {
	for _, s := range cursorTexts {
		if got, want := skipAll([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%q: the cursor says %v, encoding/json %v", s, got, want)
		}
		checkCursor(t, []byte(s))
	}
	// Left to encoding/json though valid:
	for _, s := range []string{`{"\u0061":1}`, strings.Repeat("[", 65) + strings.Repeat("]", 65)} {
		if skipAll([]byte(s)) {
			t.Errorf("%q: taken", s)
		}
	}
	if !skipAll([]byte(strings.Repeat("[", 64) + strings.Repeat("]", 64))) {
		t.Error("64 levels of nesting: refused")
	}
}

// checkCursor checks what the cursor takes of b against encoding/json:
// a text it takes is valid, a string it decodes is the string
// encoding/json decodes, an integer it reads is the int64 encoding/json
// reads.
func checkCursor(t *testing.T, b []byte) {
	t.Helper()
	if !utf8.Valid(b) {
		return // the cursor's callers check UTF-8 first
	}
	if skipAll(b) && !json.Valid(b) {
		t.Fatalf("%q: taken, but encoding/json refuses it", b)
	}
	c := adapterkit.NewJSONCursor(b)
	if s, ok := c.String(); ok && c.End() {
		var want string
		if err := json.Unmarshal(b, &want); err != nil || s != want {
			t.Fatalf("%q: the cursor reads %q, encoding/json %q (%v)", b, s, want, err)
		}
	}
	c = adapterkit.NewJSONCursor(b)
	if n, ok := c.Int(); ok && c.End() {
		var want int64
		if err := json.Unmarshal(b, &want); err != nil || n != want {
			t.Fatalf("%q: the cursor reads %d, encoding/json %d (%v)", b, n, want, err)
		}
	}
	c = adapterkit.NewJSONCursor(b)
	if raw, ok := c.Raw(); ok && c.End() && strings.TrimSpace(string(b)) != string(raw) {
		t.Fatalf("%q: Raw is %q", b, raw)
	}
}

func FuzzJSONCursor(f *testing.F) {
	for _, s := range cursorTexts {
		f.Add([]byte(s))
	}
	f.Fuzz(checkCursor)
}
