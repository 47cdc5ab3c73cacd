package gateway

import (
	"encoding/json"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Tools that only OpenAI's APIs know are offered to every provider as
// function tools, and the model's calls go back to the client in the
// client's own shape:
//
//   - a custom (freeform) tool, which takes its input as plain text that may
//     have to follow a grammar (Copilot's and Codex's apply_patch), becomes a
//     function taking {"input": "<the text>"}, the grammar in its
//     description; its call goes back as a custom tool call with that text;
//   - a namespace (Codex's multi_agent_v1, holding spawn_agent, wait_agent…)
//     becomes its tools, each under its own name, or namespace__name when
//     another tool has the same name; its calls go back with their
//     namespace.

// clientTool is a tool as the client declared it.
type clientTool struct {
	name      string
	namespace string // "" when none
	custom    bool   // takes its input as text
}

// toolMap maps the functions the provider is offered to the client's
// tools. A nil *toolMap maps every name to itself.
type toolMap struct {
	byWire map[string]clientTool
	wire   map[toolKey]string
}

type toolKey struct{ namespace, name string }

// customInput is the argument a custom tool's function takes.
const customInput = "input"

// newToolMap names the tools: a tool keeps its name unless a tool of
// another namespace has it too; then the namespaced ones are
// namespace__name. The names depend on the set of tools only, so that the
// same tools get the same names on every turn.
func newToolMap(tools []clientTool) *toolMap {
	count := map[string]int{}
	for _, t := range tools {
		count[t.name]++
	}
	m := &toolMap{byWire: map[string]clientTool{}, wire: map[toolKey]string{}}
	for _, t := range tools {
		w := t.name
		if count[t.name] > 1 && t.namespace != "" {
			w = t.namespace + "__" + t.name
		}
		m.byWire[w] = t
		m.wire[toolKey{t.namespace, t.name}] = w
	}
	return m
}

// wireName is the function name the provider knows the client's tool
// (namespace, name) by; a tool the request does not declare keeps its
// name.
func (m *toolMap) wireName(namespace, name string) string {
	if m != nil {
		if w, ok := m.wire[toolKey{namespace, name}]; ok {
			return w
		}
	}
	return name
}

// client is the client's tool behind a function name the provider used.
func (m *toolMap) client(wire string) clientTool {
	if m != nil {
		if t, ok := m.byWire[wire]; ok {
			return t
		}
	}
	return clientTool{name: wire}
}

// isCustom reports whether the provider's function wire is a custom tool.
func (m *toolMap) isCustom(wire string) bool { return m.client(wire).custom }

// customDef is the function a custom tool is offered as. format is the
// tool's format object ({type: text} or {type: grammar, syntax,
// definition}, or in Chat Completions {type: grammar, grammar: {syntax,
// definition}}), nil for free text.
func customDef(wire, description string, format map[string]any) provider.ToolDef {
	var d strings.Builder
	d.WriteString(description)
	if d.Len() > 0 {
		d.WriteString("\n\n")
	}
	d.WriteString("Send the tool's whole input as the string " + customInput + ": plain text, not JSON.")
	if g, _ := format["grammar"].(map[string]any); g != nil {
		format = g
	}
	if def, _ := format["definition"].(string); def != "" {
		syntax, _ := format["syntax"].(string)
		if syntax == "" {
			syntax = "lark"
		}
		d.WriteString(" It must match this " + syntax + " grammar:\n\n" + def)
	}
	schema := `{"type":"object","properties":{"` + customInput + `":{"type":"string","description":"the tool's input text"}},"required":["` + customInput + `"],"additionalProperties":false}`
	return provider.ToolDef{Name: wire, Description: d.String(), InputSchema: json.RawMessage(schema)}
}

// customArguments are the function arguments of a custom tool's call
// whose input is text.
func customArguments(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{customInput: text})
	return b
}

// customText is the input text of a custom tool's call from its function
// arguments; arguments that are not {"input": "…"} go back as they are.
func customText(args json.RawMessage) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(args, &v) == nil {
		var s string
		if raw, ok := v[customInput]; ok && len(v) == 1 && json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(args)
}
