package cache

import "testing"

func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1, "b":2}`, `{"a":1,"b":2}`},
		{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{" {\n\t\"b\" : [ 1 , 2 ] ,\r\n \"a\" : { \"d\" : null , \"c\" : true } } ", `{"a":{"c":true,"d":null},"b":[1,2]}`},
		{`[3,1,2]`, `[3,1,2]`},
		{`{}`, `{}`},
		{`[ ]`, `[]`},
		{`"x"`, `"x"`},
		{` 12.50e3 `, `12.50e3`},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{`"\u00e9\/\t\u0001"`, "\"é/\\t\\u0001\""},
		{`"a\"b\\c"`, `"a\"b\\c"`},
		{`{"k":"v","k":"w"}`, `{"k":"v","k":"w"}`},
		{`[{"z":[{"y":1,"x":2}],"a":0}]`, `[{"a":0,"z":[{"x":2,"y":1}]}]`},
		{`{"é":1,"e":2,"E":3}`, `{"E":3,"e":2,"é":1}`},
	} {
		var c canonicalizer
		got, err := c.appendCanonical(nil, []byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		// Canonical form is a fixed point.
		again, err := c.appendCanonical(nil, got)
		if err != nil || string(again) != string(got) {
			t.Errorf("canonical(canonical(%s)) = %s, %v; want %s", tc.in, again, err, got)
		}
	}
}

func TestCanonicalJSONKeepsDifferences(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`{"a":1,"b":2}`, `{"a":1,"b":3}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":1}`, `{"a":1.0}`}, // numbers are kept as written: a miss, never a wrong hit
		{`[1,2]`, `[2,1]`},
		{`{"a":null}`, `{}`},
		{`"a b"`, `"ab"`},
		{`{"a":[]}`, `{"a":{}}`},
		{`{"a":true}`, `{"A":true}`},
	} {
		var c canonicalizer
		x, errA := c.appendCanonical(nil, []byte(tc.a))
		y, errB := c.appendCanonical(nil, []byte(tc.b))
		if errA != nil || errB != nil || string(x) == string(y) {
			t.Errorf("%s and %s both canonicalise to %s (%v, %v)", tc.a, tc.b, x, errA, errB)
		}
	}
}

func TestCanonicalJSONRejectsInvalid(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":}`, `[1,]`, `{"a":1}{}`, `nul`, `"\x"`} {
		var c canonicalizer
		if got, err := c.appendCanonical(nil, []byte(in)); err == nil {
			t.Errorf("canonical(%q) = %s; want an error", in, got)
		}
	}
}
