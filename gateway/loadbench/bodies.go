package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A coding agent's big prompt: a system prompt, the host's tools with
// their schemas, and a conversation of tool calls reading source files
// and their results (code with quotes, tabs and newlines, as JSON escapes
// them), ending with the user's new message. Claude Code and Codex send
// the whole conversation on every turn, so most of a turn's body is the
// same as the last turn's: each request here differs only in its final
// message (a counter, so that a response cache never answers it).

// tool is one of the host's tools.
type tool struct {
	name, description string
	schema            map[string]any
}

func props(required []string, kv ...string) map[string]any {
	p := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = map[string]any{"type": "string", "description": kv[i+1]}
	}
	return map[string]any{"type": "object", "properties": p, "required": required, "additionalProperties": false}
}

var agentTools = []tool{
	{"Read", "Reads a file from the local filesystem. The file_path parameter must be an absolute path, not a relative path. By default, it reads up to 2000 lines starting from the beginning of the file.",
		props([]string{"file_path"}, "file_path", "The absolute path to the file to read", "offset", "The line number to start reading from", "limit", "The number of lines to read")},
	{"Write", "Writes a file to the local filesystem. This tool will overwrite the existing file if there is one at the provided path.",
		props([]string{"file_path", "content"}, "file_path", "The absolute path to the file to write", "content", "The content to write to the file")},
	{"Edit", "Performs exact string replacements in files. The edit will fail if old_string is not unique in the file.",
		props([]string{"file_path", "old_string", "new_string"}, "file_path", "The absolute path to the file to modify", "old_string", "The text to replace", "new_string", "The text to replace it with")},
	{"Bash", "Executes a given bash command in a persistent shell session with optional timeout, ensuring proper handling and security measures.",
		props([]string{"command"}, "command", "The command to execute", "description", "Clear, concise description of what this command does in 5-10 words")},
	{"Grep", "A powerful search tool built on ripgrep. Supports full regex syntax, filtering by glob or file type, and several output modes.",
		props([]string{"pattern"}, "pattern", "The regular expression pattern to search for in file contents", "path", "File or directory to search in", "glob", "Glob pattern to filter files")},
	{"Glob", "Fast file pattern matching tool that works with any codebase size. Returns matching file paths sorted by modification time.",
		props([]string{"pattern"}, "pattern", "The glob pattern to match files against", "path", "The directory to search in")},
	{"TodoWrite", "Use this tool to create and manage a structured task list for your current coding session.",
		props([]string{"todos"}, "todos", "The updated todo list, as JSON")},
	{"WebFetch", "Fetches content from a specified URL and processes it using an AI model.",
		props([]string{"url", "prompt"}, "url", "The URL to fetch content from", "prompt", "The prompt to run on the fetched content")},
	{"Task", "Launch a new agent to handle complex, multi-step tasks autonomously.",
		props([]string{"description", "prompt"}, "description", "A short (3-5 word) description of the task", "prompt", "The task for the agent to perform")},
	{"NotebookEdit", "Completely replaces the contents of a specific cell in a Jupyter notebook.",
		props([]string{"notebook_path", "new_source"}, "notebook_path", "The absolute path to the notebook", "new_source", "The new source for the cell")},
}

// systemPrompt is a host's system prompt, about 8 KB.
func systemPrompt() string {
	var b strings.Builder
	b.WriteString("You are an interactive CLI tool that helps users with software engineering tasks. Use the instructions below and the tools available to you to assist the user.\n\n")
	for i := 0; b.Len() < 8000; i++ {
		fmt.Fprintf(&b, "# Rule %d\nWhen you change code, first read the file and understand the code's conventions; mimic its style, use existing libraries and utilities, and follow existing patterns. Never assume a library is available: check the project's \"go.mod\" or \"package.json\" first.\n\n", i)
	}
	return b.String()
}

// sourceFile is the text of a source file of about n bytes.
func sourceFile(idx, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package pkg%d\n\nimport (\n\t\"context\"\n\t\"fmt\"\n)\n\n", idx)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "// step%d checks the input of stage %d and returns what went wrong, if anything.\nfunc (r *runner) step%d(ctx context.Context, in []byte) error {\n\tif len(in) == 0 {\n\t\treturn fmt.Errorf(\"stage %d: empty input: %%w\", errEmpty)\n\t}\n\tif err := r.check(ctx, \"stage-%d\", in); err != nil {\n\t\treturn fmt.Errorf(\"stage %d: %%w\", err)\n\t}\n\treturn nil\n}\n\n", i, i, i, i, i, i)
	}
	return b.String()
}

// fileBytes is the size of each file the conversation reads.
const fileBytes = 6000

// bigBodies builds the big prompt of one protocol, of at least size bytes.
type bigBodies struct {
	// head and tail surround a request's final message text (JSON string
	// contents); the model, output limit and stream flag come before head.
	head, tail []byte
}

// placeholder marks the final message's text while the body is built.
const placeholder = "\x00final\x00"

// newBigBodies builds the shared part of proto's big prompt ("messages"
// or "chat") of at least size bytes.
func newBigBodies(proto string, size int) (*bigBodies, error) {
	sys := systemPrompt()
	turns := 1 + size/(fileBytes+fileBytes/8+300) // about the size, then one more at a time
	for {
		bb, err := buildBig(proto, sys, turns)
		if err != nil || len(bb.head)+len(bb.tail)+128 >= size {
			return bb, err
		}
		turns++
	}
}

// buildBig builds proto's big prompt with turns tool calls.
func buildBig(proto, sys string, turns int) (*bigBodies, error) {
	type turn struct {
		id, path, file string
	}
	var ts []turn
	for i := range turns {
		ts = append(ts, turn{id: fmt.Sprintf("toolu_01Bench%012d", i), path: fmt.Sprintf("/src/project/pkg%d/runner.go", i), file: sourceFile(i, fileBytes)})
	}
	task := "The tests in pkg0 fail since the last change to the runner. Find out why and fix it; run the tests when you are done."
	var doc map[string]any
	switch proto {
	case "messages":
		var tools []any
		for _, t := range agentTools {
			tools = append(tools, map[string]any{"name": t.name, "description": t.description, "input_schema": t.schema})
		}
		msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": task}}}}
		for i, t := range ts {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": fmt.Sprintf("I'll read %s to see what stage %d does.", t.path, i)},
				map[string]any{"type": "tool_use", "id": t.id, "name": "Read", "input": map[string]any{"file_path": t.path}},
			}})
			content := []any{map[string]any{"type": "tool_result", "tool_use_id": t.id, "content": t.file}}
			if i == len(ts)-1 {
				content = append(content, map[string]any{"type": "text", "text": placeholder, "cache_control": map[string]any{"type": "ephemeral"}})
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": content})
		}
		doc = map[string]any{
			"system":   []any{map[string]any{"type": "text", "text": sys, "cache_control": map[string]any{"type": "ephemeral"}}},
			"tools":    tools,
			"messages": msgs,
		}
	case "chat":
		var tools []any
		for _, t := range agentTools {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": t.name, "description": t.description, "parameters": t.schema}})
		}
		msgs := []any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": task}}
		for i, t := range ts {
			args, _ := json.Marshal(map[string]any{"file_path": t.path})
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": fmt.Sprintf("I'll read %s to see what stage %d does.", t.path, i),
					"tool_calls": []any{map[string]any{"id": "call_" + t.id, "type": "function", "function": map[string]any{"name": "Read", "arguments": string(args)}}}},
				map[string]any{"role": "tool", "tool_call_id": "call_" + t.id, "content": t.file})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": placeholder})
		doc = map[string]any{"tools": tools, "messages": msgs}
	default:
		return nil, fmt.Errorf("no big prompt for protocol %q", proto)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	mark := []byte(`\u0000final\u0000`)
	i := bytes.Index(b, mark)
	if i < 0 || b[0] != '{' {
		return nil, fmt.Errorf("big prompt: no placeholder")
	}
	return &bigBodies{head: append([]byte(nil), b[1:i]...), tail: append([]byte(nil), b[i+len(mark):]...)}, nil
}

// body is one request: model, output limit and stream flag, then the
// shared conversation with final as the last message's text (plain
// ASCII, no quotes or backslashes).
func (bb *bigBodies) body(proto, model string, maxTokens int, stream bool, final string) []byte {
	out := make([]byte, 0, len(bb.head)+len(bb.tail)+len(final)+128)
	out = append(out, '{')
	out = appendPreamble(out, proto, model, maxTokens, stream)
	out = append(out, ',')
	out = append(out, bb.head...)
	out = append(out, final...)
	return append(out, bb.tail...)
}

// appendPreamble writes the model, output limit and stream members of a
// request in proto (and, on a Chat stream, stream_options.include_usage).
func appendPreamble(b []byte, proto, model string, maxTokens int, stream bool) []byte {
	limit := "max_tokens"
	if proto == "chat" {
		limit = "max_completion_tokens"
	}
	b = fmt.Appendf(b, `"model":%q,%q:%d,"stream":%v`, model, limit, maxTokens, stream)
	if stream && proto == "chat" {
		// As the SDKs' clients ask for it: the usage chunk.
		b = append(b, `,"stream_options":{"include_usage":true}`...)
	}
	return b
}

// smallBody is a one-line prompt in proto; text is plain ASCII, no quotes
// or backslashes.
func smallBody(proto, model string, maxTokens int, stream bool, text string) []byte {
	b := appendPreamble([]byte("{"), proto, model, maxTokens, stream)
	return fmt.Appendf(b, `,"messages":[{"role":"user","content":%q}]}`, text)
}
