package hostcli_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/cortexbuild/cortexbuild/internal/agentmark"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The scripted model behind the gateway plays a model the way a host's
// session needs it to: the prompt of the host's session says what to do.
const (
	// askTool: run a shell command through the host's shell tool, then
	// answer with its output.
	askTool = "HOSTTEST-TOOL"
	// askSpawn: spawn the rendered critic through the host's sub-agent
	// tool, then answer with what it said.
	askSpawn = "HOSTTEST-SPAWN"

	plainAnswer  = "Hello from the scripted model."
	toolCommand  = "echo hostcli-tool-ok"
	toolOutput   = "hostcli-tool-ok"
	criticAnswer = "The plan is sound: hello.txt is the right place."
	spawnPrompt  = "Review this plan: add hello.txt with one line."
)

// convo is what the script reads of a request, whichever API it came in.
type convo struct {
	system    string
	tools     map[string]bool
	firstUser string
	// last is the tool result that ends the conversation, if it does.
	last *toolResult
	// spawned: the model already called a sub-agent tool; heard: the
	// critic's answer reached the conversation (a tool result or a
	// host's notification).
	spawned, heard bool
	// kinds are the Responses tools that a call must name in their own
	// way: a custom tool's, or one in a namespace.
	kinds map[string]toolKind
}

// toolKind is how a Responses tool is called: a custom (freeform) tool
// takes text, a namespace's tool is called with its namespace.
type toolKind struct {
	custom    bool
	namespace string
}

type toolResult struct{ tool, content string }

// move is the script's answer: text, or one tool call.
type move struct {
	text string
	tool string
	args map[string]any
}

// shellTools are the hosts' shell tools, each with the arguments that run
// a command.
var shellTools = map[string]func(cmd string) map[string]any{
	"Bash":         func(cmd string) map[string]any { return map[string]any{"command": cmd, "description": "Run a command"} },
	"exec_command": func(cmd string) map[string]any { return map[string]any{"cmd": cmd} },
	"bash":         func(cmd string) map[string]any { return map[string]any{"command": cmd, "description": "Run a command"} },
	"shell":        func(cmd string) map[string]any { return map[string]any{"command": []string{"bash", "-lc", cmd}} },
	// Codex's code mode: a custom tool taking JavaScript that calls the
	// nested tools.
	"exec": func(cmd string) map[string]any {
		return map[string]any{"input": "const r = await tools.exec_command({cmd: " + strconv.Quote(cmd) + "});\ntext(r);"}
	},
}

// criticWrites is what the critic tries with any shell tool it is given:
// a read-only persona must not be able to.
const (
	criticFile   = "critic-wrote.txt"
	criticWrites = "echo review > " + criticFile
)

// spawnTools are the hosts' sub-agent tools, with the arguments that
// spawn the rendered critic.
var spawnTools = map[string]map[string]any{
	"Agent":       {"description": "Review the plan", "prompt": spawnPrompt, "subagent_type": "critic", "run_in_background": false},
	"Task":        {"description": "Review the plan", "prompt": spawnPrompt, "subagent_type": "critic", "run_in_background": false},
	"spawn_agent": {"agent_type": "critic", "message": spawnPrompt},
	"task":        {"description": "Review the plan", "prompt": spawnPrompt, "agent_type": "critic", "name": "critic"},
}

var agentID = regexp.MustCompile(`"(?:agent_id|id)"\s*:\s*"([^"]+)"`)

// play decides the script's move.
func play(c convo) move {
	if agent, _ := agentmark.Find(c.system); agent == "critic" {
		if c.last == nil {
			for name, args := range shellTools {
				if c.tools[name] {
					return move{tool: name, args: args(criticWrites)}
				}
			}
		}
		return move{text: criticAnswer}
	}
	if c.heard {
		return move{text: "DONE: the critic said: " + criticAnswer}
	}
	if r := c.last; r != nil {
		if _, ok := spawnTools[r.tool]; ok {
			if m := agentID.FindStringSubmatch(r.content); m != nil && c.tools["wait_agent"] {
				return move{tool: "wait_agent", args: map[string]any{"targets": []string{m[1]}, "timeout_ms": 120000}}
			}
		}
		return move{text: "DONE: " + r.tool + " said: " + r.content}
	}
	switch {
	case c.spawned:
		return move{text: "Waiting for the critic."}
	case strings.Contains(c.firstUser, askSpawn):
		for name, args := range spawnTools {
			if c.tools[name] {
				return move{tool: name, args: args}
			}
		}
	case strings.Contains(c.firstUser, askTool):
		for name, args := range shellTools {
			if c.tools[name] {
				return move{tool: name, args: args(toolCommand)}
			}
		}
	default:
		return move{text: plainAnswer}
	}
	return move{text: "no tool for this: offered " + strings.Join(keys(c.tools), ", ")}
}

// criticShell names the shell tools offered to the critic's requests.
func criticShell(bodies [][]byte, read func([]byte) convo) []string {
	var out []string
	for _, b := range bodies {
		c := read(b)
		if agent, _ := agentmark.Find(c.system); agent != "critic" {
			continue
		}
		for name := range shellTools {
			if c.tools[name] {
				out = append(out, name)
			}
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// textOf is the text of a string or of an array of text parts.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		if p.Content != nil {
			b.WriteString(textOf(p.Content))
		}
	}
	return b.String()
}

// anthropicConvo reads a Messages request.
func anthropicConvo(body []byte) convo {
	var req struct {
		System   json.RawMessage `json:"system"`
		Tools    []struct{ Name string }
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
	}
	_ = json.Unmarshal(body, &req)
	c := convo{system: textOf(req.System), tools: map[string]bool{}}
	for _, t := range req.Tools {
		c.tools[t.Name] = true
	}
	names := map[string]string{} // tool_use id -> name
	for i, m := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			if m.Role == "user" && c.firstUser == "" {
				c.firstUser = textOf(m.Content)
			}
			continue
		}
		var text strings.Builder
		var result *toolResult
		for _, b := range blocks {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				names[b.ID] = b.Name
				if _, ok := spawnTools[b.Name]; ok {
					c.spawned = true
				}
			case "tool_result":
				result = &toolResult{tool: names[b.ToolUseID], content: textOf(b.Content)}
				c.heard = c.heard || strings.Contains(result.content, criticAnswer)
			}
		}
		if i > 0 && strings.Contains(text.String(), criticAnswer) {
			c.heard = true
		}
		if m.Role == "user" && c.firstUser == "" {
			c.firstUser = text.String()
		}
		if i == len(req.Messages)-1 && m.Role == "user" {
			c.last = result
		}
	}
	return c
}

// chatConvo reads a Chat Completions request.
func chatConvo(body []byte) convo {
	var req struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		}
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct{ Name string }
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		}
	}
	_ = json.Unmarshal(body, &req)
	c := convo{tools: map[string]bool{}}
	for _, t := range req.Tools {
		c.tools[t.Function.Name] = true
	}
	names := map[string]string{}
	var system []string
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			system = append(system, textOf(m.Content))
		case "user":
			if c.firstUser == "" {
				c.firstUser = textOf(m.Content)
			} else if strings.Contains(textOf(m.Content), criticAnswer) {
				c.heard = true
			}
		case "assistant":
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
				if _, ok := spawnTools[tc.Function.Name]; ok {
					c.spawned = true
				}
			}
		case "tool":
			r := &toolResult{tool: names[m.ToolCallID], content: textOf(m.Content)}
			c.heard = c.heard || strings.Contains(r.content, criticAnswer)
			if i == len(req.Messages)-1 {
				c.last = r
			}
		}
	}
	c.system = strings.Join(system, "\n\n")
	return c
}

func anthropicReply(r anthropicfake.Recorded) anthropicfake.Reply {
	if rep, ok := nativeReply(r); ok {
		return rep
	}
	m := play(anthropicConvo(r.Body))
	if m.tool == "" {
		return anthropicfake.TextReply(m.text)
	}
	args, _ := json.Marshal(m.args)
	return anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{Name: m.tool, Input: args}}}
}

// responsesTool is a tool of a Responses request: a function or custom
// tool, or a namespace of them.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// responsesConvo reads a Responses request: the system prompt is its
// instructions and developer (or system) messages, the first user text
// every user message before the first item of another kind (Codex sends
// its context and the prompt as separate messages), the tools those of
// the request and of its additional_tools items (Codex's code mode).
func responsesConvo(body []byte) convo {
	var req struct {
		Instructions string          `json:"instructions"`
		Tools        []responsesTool `json:"tools"`
		Input        json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	c := convo{tools: map[string]bool{}, kinds: map[string]toolKind{}}
	var declare func(tools []responsesTool, namespace string)
	declare = func(tools []responsesTool, namespace string) {
		for _, t := range tools {
			if t.Type == "namespace" {
				declare(t.Tools, t.Name)
				continue
			}
			if t.Name != "" {
				c.tools[t.Name] = true
				c.kinds[t.Name] = toolKind{custom: t.Type == "custom", namespace: namespace}
			}
		}
	}
	declare(req.Tools, "")
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		CallID  string          `json:"call_id"`
		Name    string          `json:"name"`
		Output  json.RawMessage `json:"output"`
		Tools   []responsesTool `json:"tools"`
	}
	if json.Unmarshal(req.Input, &items) != nil {
		c.firstUser = textOf(req.Input)
	}
	system := []string{req.Instructions}
	names := map[string]string{}
	leading := true // still in the user messages that open the conversation
	for i, it := range items {
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch {
		case it.Type == "additional_tools":
			declare(it.Tools, "")
		case it.Type == "message" && (it.Role == "system" || it.Role == "developer"):
			system = append(system, textOf(it.Content))
		case it.Type == "message" && it.Role == "user":
			if leading {
				c.firstUser += textOf(it.Content) + "\n"
			} else if strings.Contains(textOf(it.Content), criticAnswer) {
				c.heard = true
			}
		case it.Type == "function_call" || it.Type == "custom_tool_call":
			leading = false
			names[it.CallID] = it.Name
			if _, ok := spawnTools[it.Name]; ok {
				c.spawned = true
			}
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			leading = false
			r := &toolResult{tool: names[it.CallID], content: textOf(it.Output)}
			c.heard = c.heard || strings.Contains(r.content, criticAnswer)
			if i == len(items)-1 {
				c.last = r
			}
		default:
			leading = false
		}
	}
	c.system = strings.Join(system, "\n\n")
	return c
}

// openaiConvo reads a request to the OpenAI provider, in Chat Completions
// or the Responses API: the gateway relays a Responses request as it came.
func openaiConvo(r openaifake.Recorded) convo {
	if strings.HasSuffix(r.Path, "/responses") {
		return responsesConvo(r.Body)
	}
	return chatConvo(r.Body)
}

// openaiBodyConvo is openaiConvo for a body alone, told by its shape.
func openaiBodyConvo(body []byte) convo {
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Messages == nil {
		return responsesConvo(body)
	}
	return chatConvo(body)
}

// openaiReply plays the OpenAI provider, on either route.
func openaiReply(r openaifake.Recorded) openaifake.Reply {
	c := openaiConvo(r)
	if rep, ok := codexLoopReply(r, c); ok {
		return rep
	}
	m := play(c)
	if m.tool == "" {
		return openaifake.TextReply(m.text)
	}
	args, _ := json.Marshal(m.args)
	call := openaifake.ToolCall{Name: m.tool, Arguments: string(args)}
	if k, ok := c.kinds[m.tool]; ok { // a relayed Responses request
		call.Namespace = k.namespace
		if input, _ := m.args["input"].(string); k.custom {
			call.Custom, call.Arguments = true, input
		}
	}
	return openaifake.Reply{ToolCalls: []openaifake.ToolCall{call}}
}
