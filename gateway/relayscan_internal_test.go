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
		s, ok := scanJSON([]byte(b), nil)
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
		if _, ok := scanJSON([]byte(b), nil); ok {
			t.Errorf("scanJSON took invalid %.80q", b)
		}
	}
}

// FuzzScanJSON checks the scan against encoding/json on any input: valid
// objects pass, nothing else does.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"c\u00e9"}],"d":-1.5e3}`, `{"a":"` + strings.Repeat("x", 40) + `\"y"}`, `{"a":[}`, `{"a":01}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, ok := scanJSON(b, scanWords[provider.ProtoMessages])
		want := json.Valid(b) && bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{"))
		if ok != want {
			t.Fatalf("scanJSON %v, encoding/json %v, on %q", ok, want, b)
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
