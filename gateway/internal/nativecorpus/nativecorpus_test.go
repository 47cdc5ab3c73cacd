package nativecorpus_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/gateway/internal/nativecorpus"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/tools/hostversions"
)

// The corpus in the repository loads and passes Check, holds one
// directory per client at the pinned (or required) version, and each file
// says the host and version of its directory and is numbered in order.
func TestCorpus(t *testing.T) {
	exs, err := nativecorpus.Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	pins, err := hostversions.Default()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"anthropic-sdk-go-" + moduleVersion(t, "github.com/anthropics/anthropic-sdk-go/v2"): false,
		"openai-go-" + moduleVersion(t, "github.com/openai/openai-go/v3"):                   false,
	}
	for _, p := range pins.Tools {
		switch p.Name {
		case "claude":
			want["claude-code-"+p.Version] = false
		case "codex", "copilot":
			want[p.Name+"-"+p.Version] = false
		}
	}
	next := map[string]int{}
	for _, e := range exs {
		dir, file := filepath.Split(filepath.FromSlash(e.File))
		dir = filepath.Base(dir)
		if _, ok := want[dir]; !ok {
			t.Errorf("%s: %s is not a client at its pinned or required version: capture the corpus again (see the package doc)", e.File, dir)
		}
		want[dir] = true
		if dir != e.Host+"-"+e.Version {
			t.Errorf("%s: says host %s version %s", e.File, e.Host, e.Version)
		}
		next[dir]++
		if !strings.HasPrefix(file, fmt.Sprintf("%02d-", next[dir])) {
			t.Errorf("%s: want the number %02d", e.File, next[dir])
		}
	}
	for dir, seen := range want {
		if !seen {
			t.Errorf("no exchange of %s in %s: capture the corpus again (see the package doc)", dir, corpusDir)
		}
	}
}

// feature is something the README promises a host's captured requests
// hold.
type feature struct {
	host, what string
	has        func(e nativecorpus.Exchange, req gjson.Result) bool
}

// anyOf is true when a request's array at path has an element matching.
func anyOf(req gjson.Result, path string, match func(gjson.Result) bool) bool {
	for _, v := range req.Get(path).Array() {
		if match(v) {
			return true
		}
	}
	return false
}

func typeIs(t string) func(gjson.Result) bool {
	return func(v gjson.Result) bool { return v.Get("type").String() == t }
}

// hasBlock is true when a Messages request has a content block of type t.
func hasBlock(req gjson.Result, t string) bool {
	return anyOf(req, "messages", func(m gjson.Result) bool { return anyOf(m, "content", typeIs(t)) })
}

func header(name, value string) func(nativecorpus.Exchange, gjson.Result) bool {
	return func(e nativecorpus.Exchange, _ gjson.Result) bool {
		v := e.Request.Header.Get(name)
		return v != "" && strings.Contains(v, value)
	}
}

func field(path string) func(nativecorpus.Exchange, gjson.Result) bool {
	return func(_ nativecorpus.Exchange, req gjson.Result) bool { return req.Get(path).Exists() }
}

func proto(p provider.Protocol) func(nativecorpus.Exchange, gjson.Result) bool {
	return func(e nativecorpus.Exchange, _ gjson.Result) bool { return e.Protocol == p }
}

// features are the README's table ("What the requests hold"), checked.
var features = []feature{
	{"claude-code", "a web_search_20250305 tool", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "tools", typeIs("web_search_20250305"))
	}},
	{"claude-code", "context_management", field("context_management.edits")},
	{"claude-code", "the context-management beta", header("Anthropic-Beta", "context-management-2025-06-27")},
	{"claude-code", "anthropic-version", header("Anthropic-Version", "2023-06-01")},
	{"claude-code", "adaptive thinking", field("thinking.type")},
	{"claude-code", "a thinking block with a signature sent back", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "messages", func(m gjson.Result) bool {
			return anyOf(m, "content", func(b gjson.Result) bool {
				return b.Get("type").String() == "thinking" && b.Get("signature").String() != ""
			})
		})
	}},
	{"claude-code", "a tool_result", func(_ nativecorpus.Exchange, r gjson.Result) bool { return hasBlock(r, "tool_result") }},
	{"claude-code", "a tool_reference (ToolSearch)", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "messages", func(m gjson.Result) bool {
			return anyOf(m, "content", func(b gjson.Result) bool { return anyOf(b, "content", typeIs("tool_reference")) })
		})
	}},
	{"claude-code", "a system-role message", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "messages", func(m gjson.Result) bool { return m.Get("role").String() == "system" })
	}},
	{"claude-code", "metadata.user_id", field("metadata.user_id")},
	{"claude-code", "X-Claude-Code-Session-Id", header("X-Claude-Code-Session-Id", "-")},
	{"claude-code", "X-Claude-Code-Agent-Id", header("X-Claude-Code-Agent-Id", "")},
	{"claude-code", "count_tokens", proto(nativecorpus.ProtoCountTokens)},
	{"codex", "store:false", func(_ nativecorpus.Exchange, r gjson.Result) bool { return r.Get("store").Type == gjson.False }},
	{"codex", "include reasoning.encrypted_content", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "include", func(v gjson.Result) bool { return v.String() == "reasoning.encrypted_content" })
	}},
	{"codex", "reasoning items with encrypted_content sent back", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "input", func(it gjson.Result) bool {
			return it.Get("type").String() == "reasoning" && it.Get("encrypted_content").String() != ""
		})
	}},
	{"codex", "prompt_cache_key", field("prompt_cache_key")},
	{"codex", "service_tier", field("service_tier")},
	{"codex", "a namespace tool", func(_ nativecorpus.Exchange, r gjson.Result) bool { return anyOf(r, "tools", typeIs("namespace")) }},
	{"codex", "a web_search hosted tool", func(_ nativecorpus.Exchange, r gjson.Result) bool { return anyOf(r, "tools", typeIs("web_search")) }},
	{"codex", "an additional_tools item with a custom tool", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "input", typeIs("additional_tools"))
	}},
	{"codex", "a custom_tool_call_output", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "input", typeIs("custom_tool_call_output"))
	}},
	{"copilot", "Chat Completions", proto(provider.ProtoChat)},
	{"copilot", "Responses", proto(provider.ProtoResponses)},
	{"copilot", "Messages", proto(provider.ProtoMessages)},
	{"copilot", "a custom (freeform) tool", func(_ nativecorpus.Exchange, r gjson.Result) bool { return anyOf(r, "tools", typeIs("custom")) }},
	{"anthropic-sdk-go", "a web_search_20250305 tool", func(_ nativecorpus.Exchange, r gjson.Result) bool {
		return anyOf(r, "tools", typeIs("web_search_20250305"))
	}},
	{"anthropic-sdk-go", "context_management with its beta", func(e nativecorpus.Exchange, r gjson.Result) bool {
		return r.Get("context_management").Exists() && strings.Contains(e.Request.Header.Get("Anthropic-Beta"), "context-management")
	}},
	{"anthropic-sdk-go", "a document block", func(_ nativecorpus.Exchange, r gjson.Result) bool { return hasBlock(r, "document") }},
	{"anthropic-sdk-go", "a search_result block", func(_ nativecorpus.Exchange, r gjson.Result) bool { return hasBlock(r, "search_result") }},
	{"anthropic-sdk-go", "a redacted_thinking block", func(_ nativecorpus.Exchange, r gjson.Result) bool { return hasBlock(r, "redacted_thinking") }},
	{"anthropic-sdk-go", "an unknown top-level field", field("future_option")},
	{"anthropic-sdk-go", "count_tokens", proto(nativecorpus.ProtoCountTokens)},
	{"openai-go", "hosted tools", func(_ nativecorpus.Exchange, r gjson.Result) bool { return anyOf(r, "tools", typeIs("file_search")) }},
	{"openai-go", "service_tier", field("service_tier")},
	{"openai-go", "prompt_cache_key", field("prompt_cache_key")},
	{"openai-go", "reasoning items", func(_ nativecorpus.Exchange, r gjson.Result) bool { return anyOf(r, "input", typeIs("reasoning")) }},
	{"openai-go", "an unknown top-level field", field("future_option")},
	{"openai-go", "web_search_options", field("web_search_options")},
}

// The corpus holds what its README says it holds.
func TestCorpusHoldsTheFeatures(t *testing.T) {
	exs, err := nativecorpus.Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(corpusDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range features {
		found := false
		for _, e := range exs {
			if e.Host == f.host && f.has(e, gjson.ParseBytes(e.Request.Body)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no %s request in the corpus holds %s", f.host, f.what)
		}
		if !strings.Contains(string(readme), "| "+f.host+" | "+f.what+" |") {
			t.Errorf("README.md does not list %q for %s", f.what, f.host)
		}
	}
}

// good is a well-formed exchange.
func good() nativecorpus.Exchange {
	return nativecorpus.Exchange{
		Host: "claude-code", Version: "2.1.332", Flow: "tool", Note: "turn 1", Protocol: provider.ProtoMessages,
		Request: nativecorpus.Request{Method: "POST", Path: "/v1/messages?beta=true",
			Header: http.Header{"Authorization": {"Bearer REDACTED"}, "Content-Length": {"27"}, "Anthropic-Version": {"2023-06-01"}},
			Body:   []byte(`{"model":"m","stream":true}`)},
		Response: nativecorpus.Response{Status: 200, Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}, Stream: true,
			Body: []byte("event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")},
	}
}

func TestCheck(t *testing.T) {
	g := good()
	if err := nativecorpus.Check(g); err != nil {
		t.Fatalf("a good exchange: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(e *nativecorpus.Exchange)
	}{
		{"no note", "note: missing", func(e *nativecorpus.Exchange) { e.Note = "" }},
		{"unknown protocol", "protocol:", func(e *nativecorpus.Exchange) { e.Protocol = "gemini.generate" }},
		{"path of another protocol", "request.path", func(e *nativecorpus.Exchange) { e.Request.Path = "/v1/responses" }},
		{"not POST", "request.method", func(e *nativecorpus.Exchange) { e.Request.Method = "GET" }},
		{"body not JSON", "request.body_base64: not a JSON object", func(e *nativecorpus.Exchange) {
			e.Request.Body = []byte(`{"model":"m","stream":tru}`)
		}},
		{"Content-Length off", "Content-Length: 26", func(e *nativecorpus.Exchange) { e.Request.Header.Set("Content-Length", "26") }},
		{"a key in Authorization", "request.headers.Authorization: holds a credential", func(e *nativecorpus.Exchange) {
			e.Request.Header.Set("Authorization", "Bearer cbk_0123456789abcdef")
		}},
		{"a key in x-api-key", "request.headers.X-Api-Key", func(e *nativecorpus.Exchange) { e.Request.Header.Set("X-Api-Key", "key") }},
		{"a key in the body", "request.body_base64: holds what looks like a credential", func(e *nativecorpus.Exchange) {
			e.Request.Body = []byte(`{"model":"m","stream":true,"k":"sk-ant-api03-abcdefghijklmnopqrstuv"}`)
			e.Request.Header.Del("Content-Length")
		}},
		{"a key in a response header", "response.headers.X-Echo", func(e *nativecorpus.Exchange) {
			e.Response.Header.Set("X-Echo", "ghp_abcdefghijklmnopqrstuvwxyz0123")
		}},
		{"a stream as JSON", "want text/event-stream", func(e *nativecorpus.Exchange) { e.Response.Header.Set("Content-Type", "application/json") }},
		{"a cut stream", "does not end with a blank line", func(e *nativecorpus.Exchange) {
			e.Response.Body = e.Response.Body[:len(e.Response.Body)-1]
		}},
		{"an event not JSON", "data is not JSON", func(e *nativecorpus.Exchange) {
			e.Response.Body = []byte("event: ping\ndata: {\"type\": \"ping\"\n\n")
		}},
		{"an unknown SSE field", "not a server-sent event field", func(e *nativecorpus.Exchange) {
			e.Response.Body = []byte("evnt: ping\ndata: {}\n\n")
		}},
		{"a unary answer to a streamed request", "response.stream", func(e *nativecorpus.Exchange) {
			e.Response.Stream = false
			e.Response.Header.Set("Content-Type", "application/json")
			e.Response.Body = []byte(`{"type":"message"}`)
		}},
		{"no status", "response.status", func(e *nativecorpus.Exchange) { e.Response.Status = 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := g
			e.Request.Header = g.Request.Header.Clone()
			e.Response.Header = g.Response.Header.Clone()
			c.edit(&e)
			err := nativecorpus.Check(e)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check: %v, want an error with %q", err, c.want)
			}
			if m := regexp.MustCompile(`cbk_|sk-ant|ghp_|0123456789|abcdefghij`).FindString(err.Error()); m != "" {
				t.Errorf("the error repeats the credential: %v", err)
			}
		})
	}
}

// A file keeps every body byte, reads back equal, and a file with a field
// Exchange does not have, or that breaks Check, is refused with its path.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	e := good()
	e.Request.Body = []byte("{\"model\":\"m\",\"stream\":true,\"t\":\"\\u2028<&>\"}")
	e.Request.Header.Set("Content-Length", fmt.Sprint(len(e.Request.Body)))
	e.Response.Body = append(e.Response.Body, []byte("data: {\"bytes\":\"\xff\xfe\"}\n\n")...)
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "h-1", "01-x.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	exs, err := nativecorpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 1 || string(exs[0].Request.Body) != string(e.Request.Body) || string(exs[0].Response.Body) != string(e.Response.Body) || exs[0].File != "h-1/01-x.json" {
		t.Fatalf("read back %+v", exs)
	}

	extra := strings.Replace(string(b), `"host"`, `"hots": 1, "host"`, 1)
	if err := os.WriteFile(path, []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nativecorpus.Load(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "hots") {
		t.Errorf("an unknown field: %v", err)
	}
	bad := regexp.MustCompile(`"protocol": "[^"]*"`).ReplaceAllString(string(b), `"protocol": "x"`)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nativecorpus.Load(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "protocol") {
		t.Errorf("an unknown protocol: %v", err)
	}
	if _, err := nativecorpus.Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no exchange") {
		t.Errorf("an empty corpus: %v", err)
	}
}
