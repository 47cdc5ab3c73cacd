package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// The apply_patch grammar a host declares, shortened.
const patchGrammar = `start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?`

const patchText = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"

// upstreamTools are the tools the provider was offered in its i-th
// request, by name.
func upstreamTools(t *testing.T, w *world, i int) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	tools, _ := body(t, w.anth.Requests()[i].Body)["tools"].([]any)
	for _, x := range tools {
		m := x.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// upstreamBlocks are the content blocks of the provider's i-th request of
// the given type, in order.
func upstreamBlocks(t *testing.T, w *world, i int, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range body(t, w.anth.Requests()[i].Body)["messages"].([]any) {
		content, _ := m.(map[string]any)["content"].([]any)
		for _, b := range content {
			if bm := b.(map[string]any); bm["type"] == typ {
				out = append(out, bm)
			}
		}
	}
	return out
}

// checkCustomOffered checks that apply_patch reached the provider as a
// function taking its text as input, with the grammar to follow.
func checkCustomOffered(t *testing.T, tool map[string]any) {
	t.Helper()
	if tool == nil {
		t.Fatal("apply_patch was not offered to the model")
	}
	desc, _ := tool["description"].(string)
	schema, _ := json.Marshal(tool["input_schema"])
	if !strings.Contains(desc, "Edit files.") || !strings.Contains(desc, "lark grammar") || !strings.Contains(desc, `"*** Begin Patch"`) ||
		!strings.Contains(string(schema), `"required":["input"]`) {
		t.Errorf("apply_patch offered as %s / %s", desc, schema)
	}
}

// Copilot over Chat Completions declares apply_patch as a custom
// (freeform, grammar) tool: it is offered to any provider as a function,
// the model's call comes back as a custom tool call with the patch text,
// the next turn's custom call and its result go upstream, and a tool type
// the gateway cannot offer is dropped alone and named.
func TestCustomToolThroughChatCompletions(t *testing.T) {
	w := newWorld(t)
	tools := `[{"type":"function","function":{"name":"view","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},
		{"type":"custom","custom":{"name":"apply_patch","description":"Edit files.","format":{"type":"grammar","grammar":{"syntax":"lark","definition":` + jsonQuote(patchGrammar) + `}}}},
		{"type":"file_search"}]`
	w.anth.Enqueue(anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_patch", Name: "apply_patch", Input: json.RawMessage(`{"input":` + jsonQuote(patchText) + `}`)}}})
	st, h, raw := w.post(t, "/v1/chat/completions", `{"model":"builder","tools":`+tools+`,"messages":[{"role":"user","content":"add hello.txt"}]}`)
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	if got := h.Get("X-CortexBuild-Ignored-Params"); got != "tools[2].file_search" {
		t.Errorf("ignored = %q", got)
	}
	up := upstreamTools(t, w, 0)
	checkCustomOffered(t, up["apply_patch"])
	if up["view"] == nil || len(up) != 2 {
		t.Errorf("offered %v", up)
	}
	var cc openai.ChatCompletion // the official SDK reads the answer
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		t.Fatal(err)
	}
	calls := cc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Type != "custom" || calls[0].Custom.Name != "apply_patch" || calls[0].Custom.Input != patchText || calls[0].ID != "toolu_patch" {
		t.Fatalf("tool calls = %s", raw)
	}

	// The next turn carries the custom call and its result.
	w.anth.Enqueue(anthropicfake.TextReply("Done."))
	next := `{"model":"builder","tools":` + tools + `,"messages":[{"role":"user","content":"add hello.txt"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_patch","type":"custom","custom":{"name":"apply_patch","input":` + jsonQuote(patchText) + `}}]},
		{"role":"tool","tool_call_id":"toolu_patch","content":"Success. Updated: A hello.txt"}]}`
	if st, _, raw := w.post(t, "/v1/chat/completions", next); st != http.StatusOK {
		t.Fatalf("next turn: %d %s", st, raw)
	}
	uses, results := upstreamBlocks(t, w, 1, "tool_use"), upstreamBlocks(t, w, 1, "tool_result")
	if len(uses) != 1 || uses[0]["name"] != "apply_patch" || uses[0]["input"].(map[string]any)["input"] != patchText || len(results) != 1 || results[0]["tool_use_id"] != "toolu_patch" {
		t.Errorf("upstream history: uses %v results %v", uses, results)
	}

	// Streamed, the custom call arrives whole, as a custom call.
	w.anth.Enqueue(anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_2", Name: "apply_patch", Input: json.RawMessage(`{"input":` + jsonQuote(patchText) + `}`)}}})
	st, _, raw = w.post(t, "/v1/chat/completions", `{"model":"builder","stream":true,"tools":`+tools+`,"messages":[{"role":"user","content":"add hello.txt"}]}`)
	if st != http.StatusOK {
		t.Fatalf("stream: %d %s", st, raw)
	}
	var got []map[string]any
	for _, line := range strings.Split(raw, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					ToolCalls []map[string]any `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			got = append(got, c.Delta.ToolCalls...)
		}
	}
	if len(got) != 1 || got[0]["type"] != "custom" || got[0]["function"] != nil {
		t.Fatalf("streamed tool calls = %v", got)
	}
	if c := got[0]["custom"].(map[string]any); c["name"] != "apply_patch" || c["input"] != patchText || got[0]["id"] != "toolu_2" {
		t.Errorf("streamed custom call = %v", got[0])
	}
}

// Codex over Responses declares a namespace (multi_agent_v1: spawn_agent,
// wait_agent), a custom apply_patch and a hosted web_search: the
// namespace's tools and apply_patch are offered, web_search alone is
// dropped and named, the model's spawn_agent call comes back in its
// namespace, and both kinds of call and their outputs go upstream on the
// next turn.
func TestNamespaceAndCustomToolsThroughResponses(t *testing.T) {
	w := newWorld(t)
	tools := `[{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
			{"type":"function","name":"spawn_agent","description":"Spawn an agent.","parameters":{"type":"object","properties":{"agent_type":{"type":"string"},"message":{"type":"string"}},"required":["message"]}},
			{"type":"function","name":"wait_agent","parameters":{"type":"object","properties":{"targets":{"type":"array","items":{"type":"string"}}}}}]},
		{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":` + jsonQuote(patchGrammar) + `}},
		{"type":"web_search"},
		{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}]`
	spawn := `{"agent_type":"critic","message":"Review the plan."}`
	w.anth.Enqueue(anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_spawn", Name: "spawn_agent", Input: json.RawMessage(spawn)}}})
	req := func(stream bool, input string) string {
		s := "false"
		if stream {
			s = "true"
		}
		return `{"model":"builder","store":false,"stream":` + s + `,"tools":` + tools + `,"input":` + input + `}`
	}
	first := `[{"type":"message","role":"user","content":[{"type":"input_text","text":"plan, then get it reviewed"}]}]`
	st, h, raw := w.post(t, "/v1/responses", req(false, first))
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	if got := h.Get("X-CortexBuild-Ignored-Params"); got != "tools[2].web_search" {
		t.Errorf("ignored = %q", got)
	}
	up := upstreamTools(t, w, 0)
	checkCustomOffered(t, up["apply_patch"])
	for _, name := range []string{"spawn_agent", "wait_agent", "exec_command"} {
		if up[name] == nil {
			t.Errorf("%s was not offered: %v", name, up)
		}
	}
	if len(up) != 4 {
		t.Errorf("offered %d tools: %v", len(up), up)
	}
	var r responses.Response // the official SDK reads the answer
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	var call map[string]any
	for _, it := range body(t, []byte(raw))["output"].([]any) {
		if m := it.(map[string]any); m["type"] == "function_call" {
			call = m
		}
	}
	if call == nil || call["name"] != "spawn_agent" || call["namespace"] != "multi_agent_v1" || call["call_id"] != "toolu_spawn" || call["arguments"] != spawn {
		t.Fatalf("output = %s", raw)
	}

	// A custom call comes back as custom_tool_call with the patch text.
	w.anth.Enqueue(anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_patch", Name: "apply_patch", Input: json.RawMessage(`{"input":` + jsonQuote(patchText) + `}`)}}})
	st, _, raw = w.post(t, "/v1/responses", req(false, first))
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 1 || r.Output[0].Type != "custom_tool_call" || r.Output[0].Name != "apply_patch" || r.Output[0].Input != patchText || r.Output[0].CallID != "toolu_patch" {
		t.Fatalf("output = %s", raw)
	}

	// The next turn carries both calls and their outputs.
	w.anth.Enqueue(anthropicfake.TextReply("Reviewed and patched."))
	history := `[{"type":"message","role":"user","content":[{"type":"input_text","text":"plan, then get it reviewed"}]},
		{"type":"function_call","call_id":"toolu_spawn","name":"spawn_agent","namespace":"multi_agent_v1","arguments":` + jsonQuote(spawn) + `},
		{"type":"function_call_output","call_id":"toolu_spawn","output":"agent started"},
		{"type":"custom_tool_call","call_id":"toolu_patch","name":"apply_patch","input":` + jsonQuote(patchText) + `},
		{"type":"custom_tool_call_output","call_id":"toolu_patch","output":"Success."}]`
	if st, _, raw := w.post(t, "/v1/responses", req(false, history)); st != http.StatusOK {
		t.Fatalf("next turn: %d %s", st, raw)
	}
	uses, results := upstreamBlocks(t, w, 2, "tool_use"), upstreamBlocks(t, w, 2, "tool_result")
	if len(uses) != 2 || uses[0]["name"] != "spawn_agent" || uses[1]["name"] != "apply_patch" || uses[1]["input"].(map[string]any)["input"] != patchText ||
		len(results) != 2 || results[1]["tool_use_id"] != "toolu_patch" {
		t.Errorf("upstream history: uses %v results %v", uses, results)
	}

	// Streamed: the namespaced call's item carries its namespace, the
	// custom call's input arrives in the custom_tool_call_input events.
	w.anth.Enqueue(anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_s", Name: "spawn_agent", Input: json.RawMessage(spawn)},
		{ID: "toolu_p", Name: "apply_patch", Input: json.RawMessage(`{"input":` + jsonQuote(patchText) + `}`)}}})
	st, _, raw = w.post(t, "/v1/responses", req(true, first))
	if st != http.StatusOK {
		t.Fatalf("stream: %d %s", st, raw)
	}
	var done []map[string]any
	var input string
	customIDs := map[string]bool{}
	for _, line := range strings.Split(raw, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		ev := body(t, []byte(data))
		switch ev["type"] {
		case "response.output_item.done":
			done = append(done, ev["item"].(map[string]any))
		case "response.custom_tool_call_input.done":
			input, _ = ev["input"].(string)
		case "response.output_item.added":
			if it := ev["item"].(map[string]any); it["type"] == "custom_tool_call" {
				customIDs[it["id"].(string)] = true
			}
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			if customIDs[ev["item_id"].(string)] {
				t.Errorf("the custom call's input streamed as function arguments: %s", data)
			}
		}
	}
	if len(done) != 2 || done[0]["type"] != "function_call" || done[0]["namespace"] != "multi_agent_v1" || done[0]["name"] != "spawn_agent" ||
		done[1]["type"] != "custom_tool_call" || done[1]["input"] != patchText || input != patchText {
		t.Errorf("streamed items %v, custom input %q", done, input)
	}
}

// A namespaced tool whose name another tool has too is offered as
// namespace__name, and the call comes back under its own name and
// namespace.
func TestNamespacedToolNameClash(t *testing.T) {
	w := newWorld(t)
	w.anth.Enqueue(anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_1", Name: "tasks__run", Input: json.RawMessage(`{}`)}}})
	st, _, raw := w.post(t, "/v1/responses", `{"model":"builder","store":false,"input":"go","tools":[
		{"type":"function","name":"run","parameters":{"type":"object"}},
		{"type":"namespace","name":"tasks","description":"Tasks.","tools":[{"type":"function","name":"run","parameters":{"type":"object"}}]}]}`)
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	up := upstreamTools(t, w, 0)
	if up["run"] == nil || up["tasks__run"] == nil || len(up) != 2 {
		t.Errorf("offered %v", up)
	}
	out := body(t, []byte(raw))["output"].([]any)
	if c := out[0].(map[string]any); c["name"] != "run" || c["namespace"] != "tasks" {
		t.Errorf("call = %v", c)
	}
}
