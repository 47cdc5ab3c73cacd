package nativecorpus_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/gateway/internal/nativecorpus"
	"github.com/cortexbuild/cortexbuild/provider"
)

// The flows each CLI is driven through, and the scripts that answer them.

// convo is what a script reads of a request, whichever API it is in.
type convo struct {
	tools     map[string]bool // function tools by name, hosted tools by type
	results   []result        // the tool results the request ends with
	firstUser string
}

type result struct{ tool, content string }

// last is the result of tool among the ones the request ends with.
func (c convo) last(tool string) *result {
	for i := range c.results {
		if c.results[i].tool == tool {
			return &c.results[i]
		}
	}
	return nil
}

// textOf is the text of a string or of an array of parts.
func textOf(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.String()
	}
	var b strings.Builder
	for _, p := range v.Array() {
		b.WriteString(p.Get("text").String())
		if c := p.Get("content"); c.Exists() {
			b.WriteString(textOf(c))
		}
	}
	return b.String()
}

// messagesConvo reads a Messages request.
func messagesConvo(js gjson.Result) convo {
	c := convo{tools: map[string]bool{}}
	for _, t := range js.Get("tools").Array() {
		if n := t.Get("name").String(); n != "" && !strings.HasPrefix(t.Get("type").String(), "web_search") {
			c.tools[n] = true
		}
		if typ := t.Get("type").String(); typ != "" && typ != "custom" {
			c.tools[typ] = true
		}
	}
	names := map[string]string{}
	msgs := js.Get("messages").Array()
	for i, m := range msgs {
		content := m.Get("content")
		if m.Get("role").String() == "user" && c.firstUser == "" {
			c.firstUser = textOf(content)
		}
		var results []result
		for _, b := range content.Array() {
			switch b.Get("type").String() {
			case "tool_use":
				names[b.Get("id").String()] = b.Get("name").String()
			case "tool_result":
				results = append(results, result{names[b.Get("tool_use_id").String()], textOf(b.Get("content"))})
			}
		}
		if i == len(msgs)-1 && m.Get("role").String() == "user" {
			c.results = results
		}
	}
	return c
}

// chatConvo reads a Chat Completions request.
func chatConvo(js gjson.Result) convo {
	c := convo{tools: map[string]bool{}}
	for _, t := range js.Get("tools").Array() {
		if n := t.Get("function.name").String(); n != "" {
			c.tools[n] = true
		} else {
			c.tools[t.Get("type").String()] = true
		}
	}
	names := map[string]string{}
	for _, m := range js.Get("messages").Array() {
		switch m.Get("role").String() {
		case "user":
			if c.firstUser == "" {
				c.firstUser = textOf(m.Get("content"))
			}
			c.results = nil
		case "assistant":
			for _, tc := range m.Get("tool_calls").Array() {
				names[tc.Get("id").String()] = tc.Get("function.name").String()
			}
			c.results = nil
		case "tool":
			c.results = append(c.results, result{names[m.Get("tool_call_id").String()], textOf(m.Get("content"))})
		}
	}
	return c
}

// responsesConvo reads a Responses request: its tools (in tools, or in
// an additional_tools input item as Codex's code mode sends them, with the
// tools of namespaces) and its conversation.
func responsesConvo(js gjson.Result) convo {
	c := convo{tools: map[string]bool{}}
	var add func(tools []gjson.Result)
	add = func(tools []gjson.Result) {
		for _, t := range tools {
			if n := t.Get("name").String(); n != "" {
				c.tools[n] = true
			} else {
				c.tools[t.Get("type").String()] = true
			}
			add(t.Get("tools").Array())
		}
	}
	add(js.Get("tools").Array())
	names := map[string]string{}
	for _, it := range js.Get("input").Array() {
		switch it.Get("type").String() {
		case "additional_tools":
			add(it.Get("tools").Array())
		case "message":
			if it.Get("role").String() == "user" {
				if c.firstUser == "" {
					c.firstUser = textOf(it.Get("content"))
				}
				c.results = nil
			}
		case "function_call", "custom_tool_call":
			names[it.Get("call_id").String()] = it.Get("name").String()
		case "function_call_output", "custom_tool_call_output":
			out := it.Get("output")
			c.results = append(c.results, result{names[it.Get("call_id").String()], textOf(out)})
		}
	}
	return c
}

// outputs counts the tool outputs a Responses request carries.
func outputs(js gjson.Result) int {
	n := 0
	for _, it := range js.Get("input").Array() {
		if t := it.Get("type").String(); t == "function_call_output" || t == "custom_tool_call_output" {
			n++
		}
	}
	return n
}

// ---- Claude Code ----

const (
	claudeToolCommand = "echo corpus-tool-ok"
	searchQuery       = "Go 1.26 release notes"
)

func captureClaude(t *testing.T, c *capture) {
	bin, version := hostCLI(t, "claude")
	env := []string{
		"ANTHROPIC_BASE_URL=" + c.srv.URL(),
		"ANTHROPIC_AUTH_TOKEN=" + c.key("cbk_"),
		"ANTHROPIC_CUSTOM_HEADERS=X-CortexBuild-Agent: builder\nX-CortexBuild-Task: T-42",
		"IS_SANDBOX=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	run := func(prompt string) func() {
		return func() {
			out := c.cli(t, bin, env, "-p", prompt, "--permission-mode", "bypassPermissions")
			t.Logf("claude -p %.40q:\n%s", prompt, out)
		}
	}
	var recs []captured
	recs = append(recs, c.srv.run("tool", claudeTool, run("Run `"+claudeToolCommand+"` with Bash and tell me what it printed."))...)
	recs = append(recs, c.srv.run("websearch", claudeSearch, run("Search the web for the "+searchQuery+" and summarise them in one sentence."))...)
	var b strings.Builder
	for i := 1; b.Len() < 30000; i++ {
		fmt.Fprintf(&b, "%04d  The gateway relays the request as the client sent it, and the answer as the provider sent it.\n", i)
	}
	notes := b.String()
	if err := os.WriteFile(filepath.Join(c.project, "notes.txt"), []byte(notes), 0o644); err != nil {
		t.Fatal(err)
	}
	recs = append(recs, c.srv.run("read", claudeRead(filepath.Join(c.project, "notes.txt"), len(notes)), run("Read notes.txt and tell me how many lines it has."))...)
	recs = append(recs, c.srv.run("subagent", claudeAgent, run("Have a general-purpose agent check that all is well, and tell me what it said."))...)
	c.store(t, "claude-code", version, recs)
}

const subagentPrompt = "Check that all is well and say so in one sentence."

func claudeAgent(c *call) answer {
	if c.proto != provider.ProtoMessages {
		return sideAnswer(c)
	}
	cv := messagesConvo(c.js)
	var a answer
	switch {
	case cv.last("Agent") != nil:
		a = anthropicAnswer(c, "turn 2: the Agent tool_result (the sub-agent's report) comes back", "end_turn",
			aThinking(c.seed(), ""), aText("The agent said all is well."))
		a.what = "turn2-agent-result"
	case strings.Contains(cv.firstUser, subagentPrompt):
		a = anthropicAnswer(c, "the sub-agent's request: its own system prompt and tools, with the agent id headers", "end_turn",
			aThinking(c.seed(), ""), aText("All is well."))
		a.what = "subagent-request"
	case cv.tools["Agent"]:
		a = anthropicAnswer(c, "turn 1: the answer spawns a sub-agent with the Agent tool", "tool_use",
			aThinking(c.seed(), ""),
			aToolUse(ident("toolu_01", "tu"+c.seed(), 22), "Agent", o("description", "Check all is well", "prompt", subagentPrompt,
				"subagent_type", "general-purpose", "run_in_background", false)))
		a.what = "turn1-agent-call"
	default:
		a = sideAnswer(c)
	}
	return a
}

// sideAnswer answers a request a flow's script does not expect (one a
// CLI makes on its own, a token count): a short text, or the count.
func sideAnswer(c *call) answer {
	var a answer
	switch c.proto {
	case nativecorpus.ProtoCountTokens:
		a = countAnswer(c, "a token count the CLI asked for", tokens(c.body))
		a.what = "count-tokens"
		return a
	case provider.ProtoMessages:
		a = anthropicAnswer(c, "a request the CLI made on its own", "end_turn", aText("OK."))
	case provider.ProtoChat:
		a = chatAnswer(c, "a request the CLI made on its own", "OK.")
	default:
		a = responsesAnswer(c, "a request the CLI made on its own", rMessage(c.seed(), "OK."))
	}
	a.what = "side"
	return a
}

func claudeTool(c *call) answer {
	if c.proto != provider.ProtoMessages {
		return sideAnswer(c)
	}
	cv := messagesConvo(c.js)
	if r := cv.last("Bash"); r != nil {
		a := anthropicAnswer(c, "turn 2: the thinking block (with its signature) and the Bash tool_use of turn 1 come back with the tool_result", "end_turn",
			aThinking(c.seed(), ""), aText("The command printed `"+strings.TrimSpace(r.content)+"`."))
		a.what = "turn2-tool-result"
		return a
	}
	if cv.tools["Bash"] {
		a := anthropicAnswer(c, "turn 1: Claude Code's tools, adaptive thinking, context_management; the answer has a thinking block with a signature and a Bash tool_use", "tool_use",
			aThinking(c.seed(), ""), aText("I'll run it."),
			aToolUse(ident("toolu_01", "tu"+c.seed(), 22), "Bash", o("command", claudeToolCommand, "description", "Print a word")))
		a.what = "turn1-tool-use"
		return a
	}
	return sideAnswer(c)
}

func claudeSearch(c *call) answer {
	if c.proto != provider.ProtoMessages {
		return sideAnswer(c)
	}
	cv := messagesConvo(c.js)
	var a answer
	switch {
	case cv.tools["web_search_20250305"] || cv.tools["web_search_20260209"]:
		q := searchQuery
		if _, asked, ok := strings.Cut(cv.firstUser, "search for the query: "); ok {
			q = asked
		}
		id := ident("srvtoolu_01", "srv"+c.seed(), 22)
		results := []obj{
			o("type", "web_search_result", "title", "Go 1.26 Release Notes - The Go Programming Language", "url", "https://go.dev/doc/go1.26",
				"encrypted_content", blob("wsr1"+c.seed(), 480), "page_age", "February 10, 2026"),
			o("type", "web_search_result", "title", "Go 1.26 is released - The Go Blog", "url", "https://go.dev/blog/go1.26",
				"encrypted_content", blob("wsr2"+c.seed(), 480), "page_age", "February 10, 2026"),
		}
		cite := o("type", "web_search_result_location", "cited_text", "Go 1.26 makes the Green Tea garbage collector the default. ",
			"url", "https://go.dev/doc/go1.26", "title", "Go 1.26 Release Notes - The Go Programming Language", "encrypted_index", blob("idx"+c.seed(), 64))
		m := aMessage{stop: "end_turn", searches: 1, content: []obj{
			aText("I'll search for that."),
			o("type", "server_tool_use", "id", id, "name", "web_search", "input", o("query", q)),
			o("type", "web_search_tool_result", "tool_use_id", id, "content", results),
			aText("Here is what the release notes say: "),
			o("type", "text", "text", "Go 1.26 makes the Green Tea garbage collector the default", "citations", []obj{cite}),
			aText("."),
		}}
		a = anthropicMessage(c, "the WebSearch tool's own request: a web_search server tool; the answer has server_tool_use, web_search_tool_result, cited text and usage.server_tool_use.web_search_requests", m)
		a.what = "web-search-request"
	case cv.last("WebSearch") != nil:
		a = anthropicAnswer(c, "turn 3: the WebSearch tool_result (the search's findings) comes back", "end_turn",
			aThinking(c.seed(), ""), aText("Go 1.26 makes the Green Tea garbage collector the default."))
		a.what = "turn3-search-result"
	case cv.tools["WebSearch"] || cv.last("ToolSearch") != nil:
		a = anthropicAnswer(c, "turn 2: the ToolSearch result (a tool_reference) comes back; WebSearch is now loaded; the answer calls it", "tool_use",
			aThinking(c.seed(), ""),
			aToolUse(ident("toolu_01", "tu"+c.seed(), 22), "WebSearch", o("query", searchQuery)))
		a.what = "turn2-websearch-call"
	case cv.tools["ToolSearch"]:
		a = anthropicAnswer(c, "turn 1: WebSearch is a deferred tool; the answer loads it with ToolSearch", "tool_use",
			aThinking(c.seed(), ""),
			aToolUse(ident("toolu_01", "tu"+c.seed(), 22), "ToolSearch", o("query", "select:WebSearch", "max_results", 1)))
		a.what = "turn1-toolsearch-call"
	default:
		a = sideAnswer(c)
	}
	return a
}

func claudeRead(path string, size int) script {
	return func(c *call) answer {
		if c.proto == nativecorpus.ProtoCountTokens {
			a := countAnswer(c, "count_tokens: the Read tool counts a large file's tokens before returning it", size/4)
			a.what = "count-tokens"
			return a
		}
		if c.proto != provider.ProtoMessages {
			return sideAnswer(c)
		}
		cv := messagesConvo(c.js)
		var a answer
		switch {
		case cv.last("Read") != nil:
			lines := strings.Count(cv.last("Read").content, "\n")
			a = anthropicAnswer(c, "turn 2: the Read tool_result with the file comes back", "end_turn",
				aThinking(c.seed(), ""), aText(fmt.Sprintf("notes.txt has %d lines.", lines)))
			a.what = "turn2-read-result"
		case cv.tools["Read"]:
			a = anthropicAnswer(c, "turn 1: the answer reads a large file", "tool_use",
				aThinking(c.seed(), ""), aToolUse(ident("toolu_01", "tu"+c.seed(), 22), "Read", o("file_path", path)))
			a.what = "turn1-read-call"
		default:
			a = sideAnswer(c)
		}
		return a
	}
}

// ---- Codex CLI ----

func captureCodex(t *testing.T, c *capture) {
	bin, version := hostCLI(t, "codex")
	codexHome := filepath.Join(c.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`model = "planner"
model_provider = "cortexbuild"
model_reasoning_effort = "high"
service_tier = "flex"

[model_providers.cortexbuild]
name = "CortexBuild gateway"
base_url = "%s/v1"
env_key = "CORTEXBUILD_GATEWAY_KEY"
wire_api = "responses"
http_headers = { "X-CortexBuild-Agent" = "planner", "X-CortexBuild-Task" = "T-42" }

[analytics]
enabled = false

[projects.%q]
trust_level = "trusted"
`, c.srv.URL(), c.project)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CODEX_HOME=" + codexHome, "CORTEXBUILD_GATEWAY_KEY=" + c.key("cbk_")}
	run := func(prompt string, flags ...string) func() {
		return func() {
			out := c.cli(t, bin, env, append(append([]string{"exec", "--skip-git-repo-check"}, flags...), prompt)...)
			t.Logf("codex exec %.40q:\n%s", prompt, out)
		}
	}
	var recs []captured
	recs = append(recs, c.srv.run("tool-loop", codexLoop, run("Run `echo corpus-step-1`, then `echo corpus-step-2`, and tell me what they printed."))...)
	recs = append(recs, c.srv.run("code-mode", codexCodeMode, run("Run `echo corpus-code-mode` and tell me what it printed.", "-m", "gpt-6.2-sol"))...)
	c.store(t, "codex", version, recs)
}

func codexLoop(c *call) answer {
	if c.proto != provider.ProtoResponses || !responsesConvo(c.js).tools["exec_command"] {
		return sideAnswer(c)
	}
	var a answer
	switch n := outputs(c.js); n {
	case 0, 1:
		step := n + 1
		a = responsesAnswer(c, fmt.Sprintf("turn %d: %sthe answer has a reasoning item with encrypted_content and an exec_command function_call", step,
			map[int]string{0: "store:false, include reasoning.encrypted_content, prompt_cache_key, service_tier, the namespace tool; ", 1: "the reasoning item and function_call of turn 1 come back with its output; "}[n]),
			rReasoning(c.seed(), fmt.Sprintf("**Running step %d**\n\nI'll run the command for step %d.", step, step)),
			rFunctionCall(c.seed(), "exec_command", fmt.Sprintf(`{"cmd":"echo corpus-step-%d"}`, step)))
		a.what = fmt.Sprintf("turn%d-function-call", step)
	default:
		a = responsesAnswer(c, "turn 3: both turns' reasoning items and function calls come back with their outputs; the answer is text",
			rReasoning(c.seed(), "**Reporting**\n\nBoth commands ran."),
			rMessage(c.seed(), "They printed corpus-step-1 and corpus-step-2."))
		a.what = "turn3-text"
	}
	return a
}

func codexCodeMode(c *call) answer {
	if c.proto != provider.ProtoResponses {
		return sideAnswer(c)
	}
	cv := responsesConvo(c.js)
	var a answer
	switch {
	case outputs(c.js) > 0:
		a = responsesAnswer(c, "turn 2: the custom_tool_call and its custom_tool_call_output come back",
			rReasoning(c.seed(), ""), rMessage(c.seed(), "It printed corpus-code-mode."))
		a.what = "turn2-text"
	case cv.tools["exec"]:
		a = responsesAnswer(c, "turn 1: code mode (one of Codex's own models): the tools in an additional_tools item and a freeform exec tool; the answer has a custom_tool_call",
			rReasoning(c.seed(), "**Running the command**"),
			rCustomCall(c.seed(), "exec", "const r = await tools.exec_command({cmd: \"echo corpus-code-mode\"});\ntext(r);"))
		a.what = "turn1-custom-tool-call"
	default:
		a = sideAnswer(c)
	}
	return a
}

// ---- Copilot CLI ----

func captureCopilot(t *testing.T, c *capture) {
	bin, version := hostCLI(t, "copilot")
	key := c.key("cbk_")
	base := []string{"COPILOT_PROVIDER_API_KEY=" + key, "COPILOT_OFFLINE=true", "XDG_CONFIG_HOME=" + filepath.Join(c.home, ".config")}
	prompt := "Run `echo corpus-copilot-ok` with bash and tell me what it printed."
	run := func(env ...string) func() {
		return func() {
			out := c.cli(t, bin, append(base, env...), "-p", prompt, "--allow-all-tools")
			t.Logf("copilot %v:\n%s", env, out)
		}
	}
	var recs []captured
	recs = append(recs, c.srv.run("openai-completions", copilotScript, run("COPILOT_PROVIDER_BASE_URL="+c.srv.URL()+"/v1",
		"COPILOT_PROVIDER_TYPE=openai", "COPILOT_PROVIDER_WIRE_API=completions", "COPILOT_MODEL=gpt-6.2-sol"))...)
	recs = append(recs, c.srv.run("openai-responses", copilotScript, run("COPILOT_PROVIDER_BASE_URL="+c.srv.URL()+"/v1",
		"COPILOT_PROVIDER_TYPE=openai", "COPILOT_PROVIDER_WIRE_API=responses", "COPILOT_MODEL=gpt-6.2-sol"))...)
	recs = append(recs, c.srv.run("anthropic", copilotScript, run("COPILOT_PROVIDER_BASE_URL="+c.srv.URL(),
		"COPILOT_PROVIDER_TYPE=anthropic", "COPILOT_MODEL=claude-sonnet-5-5"))...)
	c.store(t, "copilot", version, recs)
}

const copilotCommand = "echo corpus-copilot-ok"

func copilotScript(c *call) answer {
	var cv convo
	switch c.proto {
	case provider.ProtoChat:
		cv = chatConvo(c.js)
	case provider.ProtoResponses:
		cv = responsesConvo(c.js)
	case provider.ProtoMessages:
		cv = messagesConvo(c.js)
	default:
		return sideAnswer(c)
	}
	args := string(marshal(o("command", copilotCommand, "description", "Print a word")))
	var a answer
	switch {
	case cv.last("bash") != nil:
		text := "It printed `" + strings.TrimSpace(cv.last("bash").content) + "`."
		switch c.proto {
		case provider.ProtoChat:
			a = chatAnswer(c, "turn 2: the assistant's tool call comes back with the tool message", text)
		case provider.ProtoResponses:
			a = responsesAnswer(c, "turn 2: the reasoning item (encrypted_content) and the function_call of turn 1 come back with the function_call_output",
				rReasoning(c.seed(), "**Reporting the output**"), rMessage(c.seed(), text))
		default:
			a = anthropicAnswer(c, "turn 2: the thinking block (summarized, with its signature) and the tool_use of turn 1 come back with the tool_result", "end_turn",
				aThinking(c.seed(), "The command ran; I'll report its output."), aText(text))
		}
		a.what = "turn2-tool-result"
	case cv.tools["bash"]:
		switch c.proto {
		case provider.ProtoChat:
			a = chatAnswer(c, "turn 1: Copilot's function tools and its freeform apply_patch (a custom tool), reasoning_effort, stream_options.include_usage; the answer calls bash", "",
				cCall(c.seed(), "bash", args))
		case provider.ProtoResponses:
			a = responsesAnswer(c, "turn 1: instructions, Copilot's function tools and its freeform apply_patch (a custom tool), store:false, include reasoning.encrypted_content, prompt_cache_key; the answer has a reasoning item and calls bash",
				rReasoning(c.seed(), "**Running the command**\n\nI'll run it with bash."), rFunctionCall(c.seed(), "bash", args))
		default:
			a = anthropicAnswer(c, "turn 1: Copilot's tools, adaptive thinking with block_binding under its beta; the answer has a summarized thinking block with a signature and calls bash", "tool_use",
				aThinking(c.seed(), "The user wants a command run; bash does that."), aText("I'll run it."),
				aToolUse(ident("toolu_01", "tu"+c.seed(), 22), "bash", o("command", copilotCommand, "description", "Print a word")))
		}
		a.what = "turn1-tool-call"
	default:
		a = sideAnswer(c)
	}
	return a
}
