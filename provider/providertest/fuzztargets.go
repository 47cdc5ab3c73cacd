package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The fuzz targets every adapter shares. An adapter's fuzz_test.go names
// them (FuzzStreamBody, FuzzErrorBody, FuzzToolCallArguments: the names
// pick testdata/fuzz/<name>/) and gives what its protocol adds: the bodies
// its fake sends, its error statuses, how it fragments a tool call.

// StreamBodyFuzz feeds arbitrary bytes as the body of a 200 streaming
// response, then of a 200 unary one: the adapter returns a result or a
// classified error, never panics, never leaks the key and closes the body.
// seeds are bodies the adapter's fake sends ([FakeBodies]), named fake-<i>.
func StreamBodyFuzz(f *testing.F, target FuzzTarget, seeds [][]byte) {
	for i, b := range seeds {
		AddSeed(f, fmt.Sprintf("fake-%d", i), b)
	}
	z := NewFuzzer(f, target)
	f.Fuzz(func(t *testing.T, body []byte) {
		z.Call(t, true, http.StatusOK, "text/event-stream", body)
		// The same bytes as the body of a 200 answer to a call that did
		// not stream.
		z.Call(t, false, http.StatusOK, "application/json", body)
	})
}

// ErrorBodyFuzz feeds an arbitrary error status (400 to 599) and body: the
// classifier gives every one a kind, never panics and never echoes the
// key. The seeds are bodies[i] (what the fake sends, [FakeBodies]) with
// statuses[i], named fake-<i>.
func ErrorBodyFuzz(f *testing.F, target FuzzTarget, statuses []int, bodies [][]byte) {
	if len(statuses) != len(bodies) {
		f.Fatalf("%d statuses for %d bodies", len(statuses), len(bodies))
	}
	for i, b := range bodies {
		AddSeed(f, fmt.Sprintf("fake-%d", i), statuses[i], b)
	}
	z := NewFuzzer(f, target)
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 400 + abs(status)%200
		if _, err := z.Call(t, false, status, "application/json", body); err == nil {
			t.Fatalf("status %d gave no error", status)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n = -n; n < 0 {
			return 0
		}
	}
	return n
}

// argumentSeeds are tool-call arguments and the cuts that fragment them.
var argumentSeeds = []struct {
	args string
	cuts []byte
}{
	{`{"city":"Paris","units":["c","f"]}`, []byte{3, 1, 7}},
	{`{"q":"naïve café 日本","n":[1,2.5e3,null,true],"o":{"k":{}}}`, []byte{0, 5, 200, 9, 9}},
	{``, nil},
	{`  {"a":1}  `, []byte{1}},
	{`{"a":`, []byte{2}},
	{`[1,2]`, []byte{0}},
	{`{"a":1}{"b":2}`, []byte{6}},
}

// FragmentedArgumentsFuzz streams a get_weather tool call whose arguments
// arrive in arbitrary fragments, for a protocol that sends them so: body
// returns the stream (ending as a tool-call turn) carrying fragments in
// order. Valid JSON objects reassemble to the same arguments, anything
// else is a protocol error that says so. The seeds are named seed-<i>.
func FragmentedArgumentsFuzz(f *testing.F, target FuzzTarget, body func(fragments []string) []byte) {
	for i, sd := range argumentSeeds {
		AddSeed(f, fmt.Sprintf("seed-%d", i), sd.args, sd.cuts)
	}
	z := NewFuzzer(f, target)
	f.Fuzz(func(t *testing.T, args string, cuts []byte) {
		if !utf8.ValidString(args) {
			return // a server's JSON strings are UTF-8
		}
		res, err := z.Call(t, true, http.StatusOK, "text/event-stream", body(splitRunes(args, cuts)))
		checkArguments(t, args, res, err)
	})
}

// splitRunes cuts s into fragments at the rune boundaries cuts selects.
func splitRunes(s string, cuts []byte) []string {
	var out []string
	for _, c := range cuts {
		if s == "" {
			break
		}
		n := int(c)%(len(s)) + 1
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}

// checkArguments checks a reassembled tool call against the arguments
// sent: a JSON object comes back as sent (blank is {}), anything else is a
// protocol error naming the arguments.
func checkArguments(t *testing.T, args string, res *provider.Result, err error) {
	t.Helper()
	trimmed := strings.TrimSpace(args)
	var obj map[string]json.RawMessage
	valid := trimmed == "" || json.Unmarshal([]byte(trimmed), &obj) == nil
	switch {
	case valid && err != nil:
		t.Fatalf("valid arguments %q: %v", args, err)
	case valid:
		if len(res.ToolCalls) != 1 {
			t.Fatalf("%d tool calls; want 1", len(res.ToolCalls))
		}
		want := trimmed
		if want == "" {
			want = "{}"
		}
		if got := string(res.ToolCalls[0].Arguments); got != want {
			t.Errorf("arguments %q reassembled as %q", want, got)
		}
	case err == nil:
		t.Fatalf("invalid arguments %q accepted as %s", args, res.ToolCalls[0].Arguments)
	default:
		if provider.KindOf(err) != provider.KindServer || !strings.Contains(err.Error(), "arguments") {
			t.Errorf("invalid arguments %q: %v (kind %s); want a server-kind protocol error about the arguments", args, err, provider.KindOf(err))
		}
	}
}
