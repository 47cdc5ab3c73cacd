package cache_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/provider"
)

// keyCovered lists every field of provider.Request, of the types it holds,
// and of cache.Scope that NewKey hashes, and how.
var keyCovered = map[string]string{
	"Request.Prompt":         "as the final user turn it stands for (Request.Conversation)",
	"Request.System":         "as is",
	"Request.Messages":       "every message, in order",
	"Request.Tools":          "every tool, in order (the order reaches the model)",
	"Request.ToolChoice":     `"" as "auto"`,
	"Request.Tier":           `effective: "" as balanced (the adapter maps it to a model)`,
	"Request.Model":          "as is",
	"Request.MaxTokens":      "effective: 0 as 4096",
	"Request.CacheKey":       "the caller's namespace",
	"Request.PromptCache":    "as is (it changes usage and the provider's behaviour)",
	"Request.Meta":           "keys sorted, values as canonical JSON; nil and empty alike",
	"Request.Temperature":    "presence, then the value",
	"Request.TopP":           "presence, then the value",
	"Request.TopK":           "presence, then the value",
	"Request.Seed":           "presence, then the value",
	"Request.Stop":           "every sequence, in order",
	"Request.ResponseFormat": "presence, then every field",
	"Request.Reasoning":      "presence, then every field",

	"Reasoning.Effort": "as is",
	"Reasoning.Budget": "as is",

	"ResponseFormat.Name":        `"" as "response"`,
	"ResponseFormat.Description": "as is",
	"ResponseFormat.Schema":      "canonical JSON",
	"ResponseFormat.Strict":      "as is",

	"Request.DisableParallelToolCalls": "as is (it changes how many calls an answer holds)",

	"Message.Role":  "as is",
	"Message.Parts": "every part, in order",

	"Part.Type":       "as is",
	"Part.Text":       "as is (text and reasoning)",
	"Part.ToolCall":   "presence, then every field",
	"Part.ToolResult": "presence, then every field",
	"Part.Image":      "presence, then every field",

	"Image.URL":       "as is",
	"Image.Data":      "byte for byte",
	"Image.MediaType": "as is",
	"Part.Meta":       "keys sorted, values as canonical JSON (reasoning signatures)",
	"Part.Cache":      "as is (it changes usage, as PromptCache does)",

	"ToolCall.ID":        "as is (the model sees it)",
	"ToolCall.Name":      "as is",
	"ToolCall.Arguments": "canonical JSON",
	"ToolCall.Meta":      "keys sorted, values as canonical JSON",

	"ToolResult.CallID":  "as is",
	"ToolResult.Name":    "as is",
	"ToolResult.Content": "as is",
	"ToolResult.IsError": "as is",

	"ToolDef.Name":        "as is",
	"ToolDef.Description": "as is",
	"ToolDef.InputSchema": "canonical JSON",
	"ToolDef.Strict":      "as is (it constrains the arguments)",
	"ToolDef.Cache":       "as is (it changes usage, as PromptCache does)",

	"Request.Native":  "presence, then the protocol, the body and the headers (what a relayed request holds beyond the decoded fields)",
	"Native.Protocol": "as is",
	"Native.Body":     "as is: the bytes the provider gets",
	"Native.Header":   "names sorted, values in order (betas change the answer)",
	"Native.Query":    "encoded, names sorted (a query parameter may change the answer)",

	"Scope.Project":  "entries never cross projects",
	"Scope.Provider": "the adapter instance that answers",
	"Scope.Model":    "the resolved model, when the caller knows it",
}

// keyExcluded lists the fields NewKey deliberately leaves out, with the
// reason.
var keyExcluded = map[string]string{
	// The timeout bounds how long one attempt may wait, not what the model
	// answers; a call that timed out is an error and is never stored.
	"Request.Timeout": "bounds the wait, not the answer",
	// Set only on the copy the estimate prices; never sent.
	"Request.CeilingEstimate": "chooses how the estimate bounds the prompt, not the answer",
	// Derived from the body, which the key covers.
	"Native.Stream":         "read from the body",
	"Native.UnmodeledBytes": "bounds the estimate; derived from the body",
	"Native.WebSearches":    "bounds the estimate; derived from the body",
	"Native.ServiceTier":    "read from the body",
	"Native.Required":       "restricts the route; derived from the body",
	"Native.Scanned":        "says how the decoded fields were read; the body is in the key",
	"Native.Full":           "decodes the body, which the key covers",
	"Native.Members":        "where the body's members lie; the body is in the key",
	"Member.Key":            "part of Native.Members",
	"Member.Start":          "part of Native.Members",
	"Member.End":            "part of Native.Members",
}

// TestKeyCoversEveryField fails when a field is added to provider.Request
// (or to a type it holds) that the lists above do not mention: decide
// whether the key must cover it, cover it in NewKey, add a mutation to
// keyMutations, and list it here.
func TestKeyCoversEveryField(t *testing.T) {
	seen := map[string]bool{}
	var walk func(reflect.Type)
	visited := map[reflect.Type]bool{}
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || visited[typ] || typ.PkgPath() == "time" {
			return
		}
		visited[typ] = true
		for f := range typ.Fields() {
			name := typ.Name() + "." + f.Name
			seen[name] = true
			_, in := keyCovered[name]
			_, out := keyExcluded[name]
			switch {
			case in && out:
				t.Errorf("%s is listed both as covered and as excluded", name)
			case !in && !out:
				t.Errorf("%s is not in the cache key and not excluded with a reason: a parameter that is not in the key is a bug", name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[provider.Request]())
	walk(reflect.TypeFor[cache.Scope]())
	for name := range keyCovered {
		if !seen[name] {
			t.Errorf("keyCovered lists %s, which no longer exists", name)
		}
	}
	for name := range keyExcluded {
		if !seen[name] {
			t.Errorf("keyExcluded lists %s, which no longer exists", name)
		}
	}
	// Every covered field has a mutation that proves it reaches the key.
	mutated := map[string]bool{}
	for _, m := range keyMutations {
		mutated[m.field] = true
	}
	for name := range keyCovered {
		if !mutated[name] {
			t.Errorf("no entry of keyMutations changes %s", name)
		}
	}
}

func baseScope() cache.Scope {
	return cache.Scope{Project: "proj-a", Provider: "anthropic-main"}
}

// baseRequest is a request that uses every field, built afresh each time.
func baseRequest() *provider.Request {
	call := provider.ToolCall{
		ID: "toolu_01", Name: "read_file",
		Arguments: json.RawMessage(`{"path":"main.go","limit":200}`),
		Meta:      provider.Metadata{"gemini.thought_signature": json.RawMessage(`"dGhvdWdodA=="`)},
	}
	return &provider.Request{
		System: "You are the explore agent.",
		Messages: []provider.Message{
			{Role: provider.RoleUser, Parts: []provider.Part{{Type: provider.PartText, Text: "Summarise main.go"},
				{Type: provider.PartImage, Image: &provider.Image{Data: []byte("\x89PNG"), MediaType: "image/png"}}}},
			{Role: provider.RoleAssistant, Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: "I should read it.", Meta: provider.Metadata{"anthropic.signature": json.RawMessage(`"sig-1"`)}},
				{Type: provider.PartText, Text: "Reading the file."},
				{Type: provider.PartToolCall, ToolCall: &call},
			}},
			provider.ToolResults(provider.ToolResult{CallID: "toolu_01", Name: "read_file", Content: "package main"}),
		},
		Prompt: "Now the tests, please.",
		Tools: []provider.ToolDef{
			{Name: "read_file", Description: "Read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)},
			{Name: "list_dir", Description: "List a directory", InputSchema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)},
		},
		ToolChoice:  provider.ToolChoiceAuto,
		Tier:        provider.TierFastCheap,
		Model:       "claude-haiku-4-5",
		MaxTokens:   1024,
		Timeout:     30 * time.Second,
		CacheKey:    "explore",
		PromptCache: provider.PromptCache5m,
		Meta:        provider.Metadata{"anthropic.effort": json.RawMessage(`{"level":"low","budget":1}`)},
		Temperature: new(0.2),
		TopP:        new(0.9),
		TopK:        new(40),
		Seed:        new(int64(7)),
		Stop:        []string{"END", "STOP"},
		Reasoning:   &provider.Reasoning{Effort: provider.EffortMedium, Budget: 2048},
		ResponseFormat: &provider.ResponseFormat{Name: "plan", Description: "a plan", Strict: true,
			Schema: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array"}},"required":["steps"],"additionalProperties":false}`)},
	}
}

func mustKey(t testing.TB, s cache.Scope, r *provider.Request) cache.Key {
	t.Helper()
	k, err := cache.NewKey(s, r)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type keyMutation struct {
	field  string // the field it proves is in the key
	name   string
	scope  func(*cache.Scope)
	mutate func(*provider.Request)
}

func assistant(r *provider.Request) *provider.Message { return &r.Messages[1] }
func toolCall(r *provider.Request) *provider.ToolCall { return r.Messages[1].Parts[2].ToolCall }
func toolResult(r *provider.Request) *provider.ToolResult {
	return r.Messages[2].Parts[0].ToolResult
}

// keyMutations change the request (or scope) in ways that must change the
// key.
var keyMutations = []keyMutation{
	{field: "Request.Native", name: "relayed as sent", mutate: func(r *provider.Request) {
		r.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(`{"model":"m"}`)}
	}},
	{field: "Native.Protocol", name: "another protocol", mutate: func(r *provider.Request) {
		r.Native = &provider.Native{Protocol: provider.ProtoChat, Body: []byte(`{"model":"m"}`)}
	}},
	{field: "Native.Body", name: "body with a server tool", mutate: func(r *provider.Request) {
		r.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(`{"model":"m","tools":[{"type":"web_search_20250305"}]}`)}
	}},
	{field: "Native.Header", name: "a beta", mutate: func(r *provider.Request) {
		r.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(`{"model":"m"}`), Header: map[string][]string{"Anthropic-Beta": {"context-management-2025-06-27"}}}
	}},
	{field: "Native.Query", name: "a query parameter", mutate: func(r *provider.Request) {
		r.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(`{"model":"m"}`), Query: map[string][]string{"beta": {"true"}}}
	}},
	{field: "Request.Prompt", name: "prompt text", mutate: func(r *provider.Request) { r.Prompt += "!" }},
	{field: "Request.Prompt", name: "prompt removed", mutate: func(r *provider.Request) { r.Prompt = "" }},
	{field: "Request.System", name: "system text", mutate: func(r *provider.Request) { r.System = "You are the builder agent." }},
	{field: "Request.System", name: "system removed", mutate: func(r *provider.Request) { r.System = "" }},
	{field: "Request.Messages", name: "first message dropped", mutate: func(r *provider.Request) { r.Messages = r.Messages[1:] }},
	{field: "Request.Messages", name: "message appended", mutate: func(r *provider.Request) { r.Messages = append(r.Messages, provider.UserText("more")) }},
	{field: "Request.Messages", name: "prompt moved into messages before the last one", mutate: func(r *provider.Request) {
		r.Messages = append([]provider.Message{provider.UserText(r.Prompt)}, r.Messages...)
		r.Prompt = ""
	}},
	{field: "Message.Role", name: "role flipped", mutate: func(r *provider.Request) { r.Messages[0].Role = provider.RoleAssistant }},
	{field: "Message.Parts", name: "part dropped", mutate: func(r *provider.Request) { assistant(r).Parts = assistant(r).Parts[1:] }},
	{field: "Message.Parts", name: "parts reordered", mutate: func(r *provider.Request) {
		p := assistant(r).Parts
		p[0], p[1] = p[1], p[0]
	}},
	{field: "Message.Parts", name: "text split into two parts", mutate: func(r *provider.Request) {
		r.Messages[0].Parts = []provider.Part{{Type: provider.PartText, Text: "Summarise "}, {Type: provider.PartText, Text: "main.go"}}
	}},
	{field: "Part.Type", name: "reasoning as text", mutate: func(r *provider.Request) { assistant(r).Parts[0].Type = provider.PartText }},
	{field: "Part.Text", name: "reasoning text", mutate: func(r *provider.Request) { assistant(r).Parts[0].Text = "I should not read it." }},
	{field: "Part.Text", name: "text case", mutate: func(r *provider.Request) { r.Messages[0].Parts[0].Text = "summarise main.go" }},
	{field: "Part.Text", name: "trailing space", mutate: func(r *provider.Request) { r.Messages[0].Parts[0].Text += " " }},
	{field: "Part.ToolCall", name: "tool call removed from its part", mutate: func(r *provider.Request) { assistant(r).Parts[2].ToolCall = nil }},
	{field: "Part.ToolCall", name: "empty tool call added to a text part", mutate: func(r *provider.Request) {
		assistant(r).Parts[1].ToolCall = &provider.ToolCall{}
	}},
	{field: "Part.Image", name: "image removed from its part", mutate: func(r *provider.Request) { r.Messages[0].Parts[1].Image = nil }},
	{field: "Image.URL", name: "image URL", mutate: func(r *provider.Request) { r.Messages[0].Parts[1].Image.URL = "https://example.com/a.png" }},
	{field: "Image.Data", name: "image bytes", mutate: func(r *provider.Request) { r.Messages[0].Parts[1].Image.Data = []byte("GIF8") }},
	{field: "Image.MediaType", name: "image media type", mutate: func(r *provider.Request) { r.Messages[0].Parts[1].Image.MediaType = "image/gif" }},
	{field: "Part.ToolResult", name: "tool result removed from its part", mutate: func(r *provider.Request) { r.Messages[2].Parts[0].ToolResult = nil }},
	{field: "Part.ToolResult", name: "empty tool result added to a text part", mutate: func(r *provider.Request) {
		r.Messages[0].Parts[0].ToolResult = &provider.ToolResult{}
	}},
	{field: "Part.Meta", name: "reasoning signature", mutate: func(r *provider.Request) {
		assistant(r).Parts[0].Meta["anthropic.signature"] = json.RawMessage(`"sig-2"`)
	}},
	{field: "Part.Meta", name: "reasoning metadata dropped", mutate: func(r *provider.Request) { assistant(r).Parts[0].Meta = nil }},
	{field: "Part.Meta", name: "metadata key renamed", mutate: func(r *provider.Request) {
		assistant(r).Parts[0].Meta = provider.Metadata{"anthropic.signature2": json.RawMessage(`"sig-1"`)}
	}},
	{field: "ToolCall.ID", name: "tool call id", mutate: func(r *provider.Request) { toolCall(r).ID = "toolu_02" }},
	{field: "ToolCall.Name", name: "tool call name", mutate: func(r *provider.Request) { toolCall(r).Name = "list_dir" }},
	{field: "ToolCall.ID", name: "text moved from tool call id to name", mutate: func(r *provider.Request) {
		toolCall(r).ID, toolCall(r).Name = "toolu_01r", "ead_file"
	}},
	{field: "ToolCall.Arguments", name: "argument string value", mutate: func(r *provider.Request) {
		toolCall(r).Arguments = json.RawMessage(`{"path":"main_test.go","limit":200}`)
	}},
	{field: "ToolCall.Arguments", name: "argument number value", mutate: func(r *provider.Request) {
		toolCall(r).Arguments = json.RawMessage(`{"path":"main.go","limit":201}`)
	}},
	{field: "ToolCall.Arguments", name: "argument number as string", mutate: func(r *provider.Request) {
		toolCall(r).Arguments = json.RawMessage(`{"path":"main.go","limit":"200"}`)
	}},
	{field: "ToolCall.Arguments", name: "argument dropped", mutate: func(r *provider.Request) {
		toolCall(r).Arguments = json.RawMessage(`{"path":"main.go"}`)
	}},
	{field: "ToolCall.Arguments", name: "arguments empty", mutate: func(r *provider.Request) { toolCall(r).Arguments = nil }},
	{field: "ToolCall.Arguments", name: "arguments not JSON", mutate: func(r *provider.Request) {
		toolCall(r).Arguments = json.RawMessage(`{"path":"main.go","limit":200`)
	}},
	{field: "ToolCall.Meta", name: "thought signature", mutate: func(r *provider.Request) {
		toolCall(r).Meta["gemini.thought_signature"] = json.RawMessage(`"b3RoZXI="`)
	}},
	{field: "ToolResult.CallID", name: "tool result call id", mutate: func(r *provider.Request) { toolResult(r).CallID = "toolu_02" }},
	{field: "ToolResult.Name", name: "tool result name", mutate: func(r *provider.Request) { toolResult(r).Name = "" }},
	{field: "ToolResult.Content", name: "tool result content", mutate: func(r *provider.Request) { toolResult(r).Content = "package main\n" }},
	{field: "ToolResult.IsError", name: "tool result is an error", mutate: func(r *provider.Request) { toolResult(r).IsError = true }},
	{field: "ToolDef.Strict", name: "strict tool", mutate: func(r *provider.Request) { r.Tools[0].Strict = true }},
	{field: "ToolDef.Cache", name: "cache mark on a tool", mutate: func(r *provider.Request) { r.Tools[0].Cache = provider.PromptCache1h }},
	{field: "Part.Cache", name: "cache mark on a part", mutate: func(r *provider.Request) { r.Messages[0].Parts[0].Cache = provider.PromptCache5m }},
	{field: "Request.DisableParallelToolCalls", name: "parallel tool calls off", mutate: func(r *provider.Request) { r.DisableParallelToolCalls = true }},
	{field: "Request.Tools", name: "tool dropped", mutate: func(r *provider.Request) { r.Tools = r.Tools[:1] }},
	{field: "Request.Tools", name: "tools reordered", mutate: func(r *provider.Request) { r.Tools[0], r.Tools[1] = r.Tools[1], r.Tools[0] }},
	{field: "Request.Tools", name: "tools removed", mutate: func(r *provider.Request) { r.Tools = nil }},
	{field: "ToolDef.Name", name: "tool name", mutate: func(r *provider.Request) { r.Tools[1].Name = "list_directory" }},
	{field: "ToolDef.Description", name: "tool description", mutate: func(r *provider.Request) { r.Tools[1].Description = "List a folder" }},
	{field: "ToolDef.InputSchema", name: "schema property type", mutate: func(r *provider.Request) {
		r.Tools[1].InputSchema = json.RawMessage(`{"type":"object","properties":{"dir":{"type":"integer"}}}`)
	}},
	{field: "ToolDef.InputSchema", name: "schema required order", mutate: func(r *provider.Request) {
		r.Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path","limit"]}`)
	}},
	{field: "Request.ToolChoice", name: "tool choice none", mutate: func(r *provider.Request) { r.ToolChoice = provider.ToolChoiceNone }},
	{field: "Request.ToolChoice", name: "tool choice required", mutate: func(r *provider.Request) { r.ToolChoice = provider.ToolChoiceRequired }},
	{field: "Request.ToolChoice", name: "tool choice names a tool", mutate: func(r *provider.Request) { r.ToolChoice = "read_file" }},
	{field: "Request.Tier", name: "tier", mutate: func(r *provider.Request) { r.Tier = provider.TierReasoningHeavy }},
	{field: "Request.Model", name: "model", mutate: func(r *provider.Request) { r.Model = "claude-sonnet-4-5" }},
	{field: "Request.Model", name: "model left to the tier", mutate: func(r *provider.Request) { r.Model = "" }},
	{field: "Request.MaxTokens", name: "max tokens", mutate: func(r *provider.Request) { r.MaxTokens = 1025 }},
	{field: "Request.MaxTokens", name: "max tokens default", mutate: func(r *provider.Request) { r.MaxTokens = 0 }},
	{field: "Request.CacheKey", name: "namespace", mutate: func(r *provider.Request) { r.CacheKey = "tester_validator" }},
	{field: "Request.PromptCache", name: "prompt cache 1h", mutate: func(r *provider.Request) { r.PromptCache = provider.PromptCache1h }},
	{field: "Request.PromptCache", name: "prompt cache off", mutate: func(r *provider.Request) { r.PromptCache = provider.PromptCacheOff }},
	{field: "Request.Temperature", name: "temperature", mutate: func(r *provider.Request) { *r.Temperature = 0.3 }},
	{field: "Request.Temperature", name: "temperature unset", mutate: func(r *provider.Request) { r.Temperature = nil }},
	{field: "Request.TopP", name: "top_p", mutate: func(r *provider.Request) { *r.TopP = 0.5 }},
	{field: "Request.TopP", name: "top_p unset", mutate: func(r *provider.Request) { r.TopP = nil }},
	{field: "Request.TopK", name: "top_k", mutate: func(r *provider.Request) { *r.TopK = 41 }},
	{field: "Request.TopK", name: "top_k unset", mutate: func(r *provider.Request) { r.TopK = nil }},
	{field: "Request.Seed", name: "seed", mutate: func(r *provider.Request) { *r.Seed = 8 }},
	{field: "Request.Seed", name: "seed unset", mutate: func(r *provider.Request) { r.Seed = nil }},
	{field: "Request.Stop", name: "stop order", mutate: func(r *provider.Request) { r.Stop[0], r.Stop[1] = r.Stop[1], r.Stop[0] }},
	{field: "Request.Stop", name: "stop unset", mutate: func(r *provider.Request) { r.Stop = nil }},
	{field: "Request.ResponseFormat", name: "response format unset", mutate: func(r *provider.Request) { r.ResponseFormat = nil }},
	{field: "ResponseFormat.Name", name: "response format name", mutate: func(r *provider.Request) { r.ResponseFormat.Name = "other" }},
	{field: "ResponseFormat.Description", name: "response format description", mutate: func(r *provider.Request) { r.ResponseFormat.Description = "other" }},
	{field: "ResponseFormat.Schema", name: "response format schema", mutate: func(r *provider.Request) { r.ResponseFormat.Schema = json.RawMessage(`{"type":"object"}`) }},
	{field: "ResponseFormat.Strict", name: "response format strict", mutate: func(r *provider.Request) { r.ResponseFormat.Strict = false }},
	{field: "Request.Reasoning", name: "reasoning unset", mutate: func(r *provider.Request) { r.Reasoning = nil }},
	{field: "Reasoning.Effort", name: "reasoning effort", mutate: func(r *provider.Request) { r.Reasoning.Effort = provider.EffortHigh }},
	{field: "Reasoning.Budget", name: "reasoning budget", mutate: func(r *provider.Request) { r.Reasoning.Budget = 4000 }},
	{field: "Request.Meta", name: "request option value", mutate: func(r *provider.Request) {
		r.Meta["anthropic.effort"] = json.RawMessage(`{"level":"high","budget":1}`)
	}},
	{field: "Request.Meta", name: "request option added", mutate: func(r *provider.Request) { r.Meta["openai.seed"] = json.RawMessage(`7`) }},
	{field: "Request.Meta", name: "request options removed", mutate: func(r *provider.Request) { r.Meta = nil }},
	{field: "Scope.Project", name: "project", scope: func(s *cache.Scope) { s.Project = "proj-b" }},
	{field: "Scope.Project", name: "text moved from project to namespace", scope: func(s *cache.Scope) { s.Project = "proj-ae" },
		mutate: func(r *provider.Request) { r.CacheKey = "xplore" }},
	{field: "Scope.Provider", name: "provider instance", scope: func(s *cache.Scope) { s.Provider = "anthropic-backup" }},
	{field: "Scope.Model", name: "resolved model", scope: func(s *cache.Scope) { s.Model = "claude-haiku-4-5-20251001" }},
}

func TestKeyChangesWithEveryParameter(t *testing.T) {
	base := mustKey(t, baseScope(), baseRequest())
	byKey := map[cache.Key]string{base: "base"}
	for _, m := range keyMutations {
		t.Run(m.name, func(t *testing.T) {
			s, r := baseScope(), baseRequest()
			if m.scope != nil {
				m.scope(&s)
			}
			if m.mutate != nil {
				m.mutate(r)
			}
			k := mustKey(t, s, r)
			if other, dup := byKey[k]; dup {
				t.Fatalf("%s: the key equals that of %q; %s must reach the key", m.name, other, m.field)
			}
			byKey[k] = m.name
		})
	}
}

// TestKeyIgnoresRepresentation lists changes that cannot reach the model and
// must not change the key. both, when set, is applied to the base request
// and to the variant alike.
func TestKeyIgnoresRepresentation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		both   func(*provider.Request)
		mutate func(*provider.Request)
	}{
		{name: "timeout", mutate: func(r *provider.Request) { r.Timeout = 5 * time.Minute }},
		{name: "argument key order and whitespace", mutate: func(r *provider.Request) {
			toolCall(r).Arguments = json.RawMessage("{ \"limit\" : 200,\n\t\"path\": \"main.go\" }")
		}},
		{name: "schema key order and whitespace", mutate: func(r *provider.Request) {
			r.Tools[0].InputSchema = json.RawMessage(`{
				"required": [ "path" ],
				"properties": { "limit": {"type":"integer"}, "path": {"type": "string"} },
				"type": "object"
			}`)
		}},
		{name: "string escapes", mutate: func(r *provider.Request) {
			toolCall(r).Arguments = json.RawMessage(`{"p\u0061th":"main\u002ego","limit":200}`)
		}},
		{name: "metadata whitespace", mutate: func(r *provider.Request) {
			r.Meta["anthropic.effort"] = json.RawMessage(` { "budget" : 1 , "level" : "low" } `)
		}},
		{name: "metadata map built in another order",
			both: func(r *provider.Request) { r.Meta["z.last"] = json.RawMessage(`true`) },
			mutate: func(r *provider.Request) {
				m := provider.Metadata{}
				m["z.last"] = json.RawMessage(`true`)
				m["anthropic.effort"] = json.RawMessage(`{"level":"low","budget":1}`)
				r.Meta = m
			}},
		{name: "prompt as the final user message", mutate: func(r *provider.Request) {
			r.Messages = append(r.Messages, provider.UserText(r.Prompt))
			r.Prompt = ""
		}},
		{name: "tool choice auto as empty", mutate: func(r *provider.Request) { r.ToolChoice = "" }},
		{name: "empty part metadata as nil", mutate: func(r *provider.Request) { assistant(r).Parts[1].Meta = provider.Metadata{} }},
		{name: "empty request metadata as nil",
			both:   func(r *provider.Request) { r.Meta = nil },
			mutate: func(r *provider.Request) { r.Meta = provider.Metadata{} }},
		{name: "empty tools as nil",
			both:   func(r *provider.Request) { r.Tools, r.ToolChoice = nil, "" },
			mutate: func(r *provider.Request) { r.Tools = []provider.ToolDef{} }},
		{name: "explicit defaults",
			both:   func(r *provider.Request) { r.Tier, r.MaxTokens = "", 0 },
			mutate: func(r *provider.Request) { r.Tier, r.MaxTokens = provider.TierBalanced, provider.DefaultMaxTokens }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, r := baseRequest(), baseRequest()
			if tc.both != nil {
				tc.both(base)
				tc.both(r)
			}
			tc.mutate(r)
			if got, want := mustKey(t, baseScope(), r), mustKey(t, baseScope(), base); got != want {
				t.Errorf("%s changed the key", tc.name)
			}
		})
	}
}

func TestKeyIsStable(t *testing.T) {
	// The key of a fixed request must not change between builds or runs
	// (map order, pooling): entries in Redis outlive the process. Update
	// this value only together with KeyVersion.
	const want = "9bd888dd23de77e1afd2f0ad32f5d134b43ea05614a165a971fb7c21187e1fc6"
	got := mustKey(t, baseScope(), baseRequest()).String()
	for range 20 {
		if again := mustKey(t, baseScope(), baseRequest()).String(); again != got {
			t.Fatalf("key changed between calls: %s then %s", got, again)
		}
	}
	if got != want {
		t.Fatalf("key of the fixed request = %s; want %s (a change of format needs a new KeyVersion)", got, want)
	}
	if len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not 64 lower-case hex digits", got)
	}
}

func TestNewKeyErrors(t *testing.T) {
	noNamespace := baseRequest()
	noNamespace.CacheKey = ""
	for _, tc := range []struct {
		name  string
		scope cache.Scope
		req   *provider.Request
		is    error
	}{
		{"no request", baseScope(), nil, nil},
		{"no cache_key", baseScope(), noNamespace, cache.ErrNoNamespace},
		{"no project", cache.Scope{Provider: "p"}, baseRequest(), nil},
		{"no provider", cache.Scope{Project: "p"}, baseRequest(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := cache.NewKey(tc.scope, tc.req)
			if err == nil || !k.IsZero() {
				t.Fatalf("NewKey = %v, %v; want an error and the zero key", k, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
		})
	}
	if cache.Cacheable(noNamespace) || !cache.Cacheable(baseRequest()) || cache.Cacheable(nil) {
		t.Error("Cacheable does not follow cache_key")
	}
}

func TestKeyIsolatesProjects(t *testing.T) {
	a, b := baseScope(), baseScope()
	b.Project = "proj-b"
	if mustKey(t, a, baseRequest()) == mustKey(t, b, baseRequest()) {
		t.Fatal("two projects with the same request share a key")
	}
}

// conversation returns a realistic request: a system prompt, six tools with
// schemas, an opening user message, then turns messages alternating between
// assistant turns (reasoning with a signature, text, a tool call) and tool
// results, and a final prompt.
func conversation(turns int) *provider.Request {
	r := &provider.Request{
		System:      strings.Repeat("You are the tester_validator agent of CortexBuild. ", 20),
		Model:       "claude-sonnet-4-5",
		MaxTokens:   8192,
		CacheKey:    "tester_validator",
		PromptCache: provider.PromptCache5m,
	}
	for i := range 6 {
		r.Tools = append(r.Tools, provider.ToolDef{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: "Runs one of the project's checks and returns its output.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"file or directory"},"args":{"type":"array","items":{"type":"string"}},"timeout_s":{"type":"integer","minimum":1}},"required":["path"]}`),
		})
	}
	r.Messages = append(r.Messages, provider.UserText("Run the tests of pkg/x and tell me which fail."))
	for i := range turns / 2 {
		id := fmt.Sprintf("toolu_%02d", i)
		r.Messages = append(r.Messages,
			provider.Message{Role: provider.RoleAssistant, Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: strings.Repeat("Consider the failing test. ", 8), Meta: provider.Metadata{"anthropic.signature": json.RawMessage(`"` + strings.Repeat("c2ln", 40) + `"`)}},
				{Type: provider.PartText, Text: "Running the next check."},
				{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: id, Name: "tool_1", Arguments: json.RawMessage(`{"path": "pkg/x", "args": ["-run", "TestX"], "timeout_s": 60}`)}},
			}},
			provider.ToolResults(provider.ToolResult{CallID: id, Name: "tool_1", Content: strings.Repeat("ok  \tpkg/x\t0.012s\n", 10)}),
		)
	}
	r.Prompt = "Which tests still fail?"
	return r
}

// TestKeyOfRelayedRequestCoversBodyAndHeaders: two relayed requests with
// the same decoded fields differ in what only their bodies or headers say
// (a server tool, a beta): they must not share an entry.
func TestKeyOfRelayedRequestCoversBodyAndHeaders(t *testing.T) {
	with := func(body string, h map[string][]string) string {
		r := baseRequest()
		r.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(body), Header: h}
		return mustKey(t, baseScope(), r).String()
	}
	plain := with(`{"model":"m"}`, nil)
	if with(`{"model":"m","tools":[{"type":"web_search_20250305","name":"web_search"}]}`, nil) == plain {
		t.Error("a server tool in the body did not change the key")
	}
	if with(`{"model":"m"}`, map[string][]string{"Anthropic-Beta": {"context-management-2025-06-27"}}) == plain {
		t.Error("a beta header did not change the key")
	}
	if with(`{"model":"m"}`, map[string][]string{"Anthropic-Beta": {"a", "b"}}) == with(`{"model":"m"}`, map[string][]string{"Anthropic-Beta": {"ab"}}) {
		t.Error("header values are not delimited in the key")
	}
	if with(`{"model":"m"}`, nil) != plain {
		t.Error("the same relayed request gave two keys")
	}
}

// A relayed body long enough to be hashed where it lies gives the key it
// gives when it is copied into the key material first.
func TestKeyOfALongBodyHashedWhereItLies(t *testing.T) {
	r := baseRequest()
	r.Native = &provider.Native{Protocol: provider.ProtoMessages, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("long prompt ", 2000) + `"}]}`),
		Header: http.Header{"Anthropic-Beta": {"a", "b"}}}
	if got, want := mustKey(t, baseScope(), r), cache.KeyOfAllCopied(baseScope(), r); got != want {
		t.Fatalf("key %s, copied %s", got, want)
	}
	r.Native.Body = r.Native.Body[:len(r.Native.Body)-1]
	if got, want := mustKey(t, baseScope(), r), cache.KeyOfAllCopied(baseScope(), r); got != want {
		t.Fatalf("key %s, copied %s", got, want)
	}
}
