package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The cache lifetime a scanned Messages body may ask for, from its bytes:
// the hour wherever "1h" could be spelt, an escape included.
func TestCacheMarksOfAScannedBody(t *testing.T) {
	cases := []struct {
		p    provider.Protocol
		body string
		want provider.PromptCache
	}{
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"hi"}]}`, provider.PromptCacheOff},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`, provider.PromptCache5m},
		{provider.ProtoMessages, `{"cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[]}`, provider.PromptCache1h},
		{provider.ProtoMessages, `{"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"\u0031h"}}]}`, provider.PromptCache1h},
		// Quoted in source code, the key is escaped and marks nothing.
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"x = {\"cache_control\": 1}"}]}`, provider.PromptCacheOff},
		{provider.ProtoChat, `{"messages":[],"cache_control":{"ttl":"1h"}}`, provider.PromptCacheOff},
		// An escaped key is the key a JSON parser reads.
		{provider.ProtoMessages, `{"system":[{"type":"text","text":"x","cache\u005fcontrol":{"type":"ephemeral"}}]}`, provider.PromptCache5m},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"1h"}]}`, provider.PromptCacheOff},
	}
	for _, c := range cases {
		rb, ok, f := scanRelayBody(c.p, []byte(c.body))
		if !ok || f != nil {
			t.Fatalf("%s: not scanned (%v)", c.body, f)
		}
		if got := rb.cache; got != c.want {
			t.Errorf("%s %s: %v, want %v", c.p, c.body, got, c.want)
		}
	}
}

// Rich content is found as a string of its own, key or value, escaped or
// not, at any depth; quoted inside a longer string it is not.
func TestRichContentOfAScannedBody(t *testing.T) {
	cases := []struct {
		p    provider.Protocol
		body string
		want bool
	}{
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"hi"}]}`, false},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, true},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":[{"type":"\u0069mage","source":{}}]}]}`, true},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":[{"type":"document"}]}]}`, true},
		{provider.ProtoMessages, `{"messages":[{"role":"user","content":"say \"image\" twice: image"}]}`, false},
		{provider.ProtoChat, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, true},
		{provider.ProtoChat, `{"messages":[{"role":"user","content":"image"}]}`, false},
		{provider.ProtoResponses, `{"input":[{"role":"user","content":[{"type":"input_file"}]}]}`, true},
	}
	for _, c := range cases {
		rb, ok, f := scanRelayBody(c.p, []byte(c.body))
		if !ok || f != nil {
			t.Fatalf("%s: not scanned (%v)", c.body, f)
		}
		if rb.rich != c.want {
			t.Errorf("%s %s: rich %v, want %v", c.p, c.body, rb.rich, c.want)
		}
	}
}

// The scan agrees with encoding/json on what is valid JSON, and reads the
// top level as gjson does.
func TestScanJSONAgreesWithEncodingJSON(t *testing.T) {
	valid := []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+10,"b":[true,false,null,{"c":"d"}],"e":"\u00e9\n\"x\""}`,
		`{"a":"` + strings.Repeat("plain text of a prompt, ", 400) + `"}`,
		`{"a":"` + strings.Repeat("é ünïcode\\t", 50) + `","b":[[],[[]],{}]}`,
		"{\"a\":\"\x80\xff not UTF-8\"}",
		`{"k":0,"k2":-1,"k3":1E3,"k4":1.0e-3}`,
		`{"plain":"a prompt","escaped":"line\nnext \u00e9","empty":"","t":true,"n":null}`,
	}
	invalid := []string{
		``, `[]`, `"x"`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`, `{"a":[1,]}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
		`{"a":"x}`, "{\"a\":\"tab\tinside\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`,
		`{"a":1}x`, `{"a":1}{}`, `{'a':1}`, `{a:1}`, `{"a":NaN}`,
		`{"a":` + strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1) + `}`,
	}
	for _, b := range valid {
		if !json.Valid([]byte(b)) {
			t.Fatalf("test case not valid JSON: %.80s", b)
		}
		s, ok := scanJSON([]byte(b), nil, "")
		if !ok {
			t.Errorf("scanJSON refused valid %.80q", b)
			continue
		}
		var want []string
		gjson.Parse(b).ForEach(func(k, v gjson.Result) bool {
			want = append(want, fmt.Sprintf("%s=%s %v %q", k.Str, v.Raw, v.Type, v.String()))
			return true
		})
		var got []string
		for _, m := range s.top {
			got = append(got, fmt.Sprintf("%s=%s %v %q", m.key, m.val.Raw, m.val.Type, m.val.String()))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%.80q: members %q, want %q", b, got, want)
		}
	}
	for _, b := range invalid {
		if _, ok := scanJSON([]byte(b), nil, ""); ok {
			t.Errorf("scanJSON took invalid %.80q", b)
		}
	}
}

// FuzzScanJSON checks the scan against encoding/json on any input: valid
// objects pass, nothing else does.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{"messages":[{"content":"a","role":"system"},{"role":"user","content":"b"},{"role":"developer","role":"user","content":[{"type":"text","text":"c"}],"content":"d"},[{"role":"system"}],{"role":"system"}],"x":{"messages":[{"role":"system","content":"e"}]}}`, `{"a":[1,{"b":"c\u00e9"}],"d":-1.5e3}`, `{"a":"` + strings.Repeat("x", 40) + `\"y"}`, `{"a":[}`, `{"a":01}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := scanJSON(b, scanWords[provider.ProtoMessages], "")
		want := json.Valid(b) && bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{"))
		if ok != want {
			t.Fatalf("scanJSON %v, encoding/json %v, on %q", ok, want, b)
		}
		if ok {
			checkMembers(t, b, s.top)
		}
		if s, ok := scanJSON(b, nil, "messages"); ok {
			checkSystem(t, b, s)
		}
	})
}

// BenchmarkScanRelayBody reads a 200 KB Messages body at its top level, as
// a relayed request is read (MB/s: of body).
func BenchmarkScanRelayBody(b *testing.B) {
	body := benchBody()
	if !json.Valid(body) {
		b.Fatal("the benchmark's body is not valid JSON")
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, ok, f := scanRelayBody(provider.ProtoMessages, body); !ok || f != nil {
			b.Fatal("not scanned")
		}
	}
}

// benchBody is a 200 KB Messages body: a coding agent's conversation,
// mostly source code read by a tool.
func benchBody() []byte {
	code := strings.Repeat(`func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif err := s.check(r); err != nil {\n\t\thttp.Error(w, err.Error(), 400)\n\t}\n}\n`, 40)
	var msgs []string
	for len(strings.Join(msgs, ",")) < 200<<10 {
		msgs = append(msgs, `{"role":"user","content":[{"type":"text","text":"Read the file."}]}`,
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/src/server.go"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"`+code+`"}]}`)
	}
	body := []byte(`{"model":"claude-sonnet-4-6","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"Read","description":"Reads a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}],"messages":[` + strings.Join(msgs, ",") + `]}`)
	return body
}

// checkMembers fails unless top is body's top level as gjson reads it:
// each key unescaped, each value's text at its Index.
func checkMembers(t *testing.T, body []byte, top members) {
	t.Helper()
	var want []member
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		want = append(want, member{k.Str, v})
		return true
	})
	if len(top) != len(want) {
		t.Fatalf("%d members, gjson reads %d, in %q", len(top), len(want), body)
	}
	for i, m := range top {
		at := body[m.val.Index:min(m.val.Index+len(m.val.Raw), len(body))]
		if m.key != want[i].key || m.val.Raw != want[i].val.Raw || string(at) != m.val.Raw {
			t.Fatalf("member %d: %q = %q at %d (%q there), gjson reads %q = %q, in %q", i, m.key, m.val.Raw, m.val.Index, at, want[i].key, want[i].val.Raw, body)
		}
	}
}

// TestScanMembersAt: each top-level member's value is found where it lies
// in the body, so that an adapter edits it in place from the gateway's
// scan alone ([provider.Native.Members]).
func TestScanMembersAt(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","max_tokens":5}`,
		` { "a" : [1, {"b":"c"}] ,"d\u0065":"x\"y", "e":null,"f":true,"g":-1.5e3, "h":{"i":{}} } `,
		string(benchBody()),
	} {
		s, ok := scanJSON([]byte(body), nil, "")
		if !ok {
			t.Fatalf("not scanned: %q", body)
		}
		checkMembers(t, []byte(body), s.top)
	}
}

// checkSystem fails unless the scan collected the contents of the system
// and developer messages as a walk of the messages array with gjson
// finds them (each message's first role and first content).
func checkSystem(t *testing.T, body []byte, s jsonScan) {
	t.Helper()
	top, dup := uniqueMembers(s.top)
	if dup != "" {
		return // refused before anything reads it
	}
	var want []gjson.Result
	if m := top.get("messages"); m.IsArray() {
		m.ForEach(func(_, msg gjson.Result) bool {
			if !msg.IsObject() {
				return true
			}
			if role := msg.Get("role"); role.Type == gjson.String && (role.Str == "system" || role.Str == "developer") {
				want = append(want, msg.Get("content"))
			}
			return true
		})
	}
	if len(s.system) != len(want) {
		t.Fatalf("%d system contents, gjson finds %d, in %q", len(s.system), len(want), body)
	}
	for i, c := range s.system {
		if c.Raw != want[i].Raw || c.Type != want[i].Type || c.Str != want[i].Str || (c.Exists() && string(body[c.Index:c.Index+len(c.Raw)]) != c.Raw) {
			t.Fatalf("system content %d: %q (%v), gjson reads %q (%v), in %q", i, c.Raw, c.Type, want[i].Raw, want[i].Type, body)
		}
	}
}

// The system and developer messages of a Chat body are read in the scan,
// in order, and only from the top-level messages array.
func TestScanChatSystemMessages(t *testing.T) {
	body := []byte(`{"messages":[{"content":"You are the critic.","role":"system"},{"role":"user","content":"b"},{"role":"developer","role":"user","content":[{"type":"text","text":"Be brief."}],"content":"d"},[{"role":"system","content":"nested"}],{"role":"system"},{"role":"user","content":"{\"role\":\"system\"}"}],"x":{"messages":[{"role":"system","content":"elsewhere"}]}}`)
	s, ok := scanJSON(body, nil, "messages")
	if !ok {
		t.Fatal("not scanned")
	}
	checkSystem(t, body, s)
	var got []string
	for _, c := range s.system {
		got = append(got, c.Raw)
	}
	if want := []string{`"You are the critic."`, `[{"type":"text","text":"Be brief."}]`, ``}; !slices.Equal(got, want) {
		t.Errorf("system contents %q, want %q", got, want)
	}
	d, err := minimalDecode(provider.ProtoChat, mustScan(t, provider.ProtoChat, []byte(`{"model":"m","messages":[{"role":"system","content":"You are the critic."},{"role":"user","content":"x"},{"role":"developer","content":[{"type":"text","text":"Be brief."}]}]}`)))
	if err != nil || d.req.System != "You are the critic.\n\nBe brief." {
		t.Errorf("system %q, %v", d.req.System, err)
	}
}

func mustScan(t *testing.T, p provider.Protocol, body []byte) relayBody {
	t.Helper()
	rb, ok, f := scanRelayBody(p, body)
	if !ok || f != nil {
		t.Fatalf("not scanned: %q", body)
	}
	return rb
}
