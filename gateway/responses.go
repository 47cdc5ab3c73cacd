package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Responses parameters the gateway accepts without applying them,
// silently: they carry no meaning for a stateless answer.
var responsesQuiet = []string{"user", "metadata", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier", "include", "stream_options", "store"}

// Responses parameters the gateway accepts without applying them, naming
// them in X-CortexBuild-Ignored-Params (refused with
// gateway.strict_params).
var responsesIgnored = []string{"top_logprobs", "truncation", "max_tool_calls"}

// responsesRequest is a decoded Responses request.
type responsesRequest struct {
	decoded
	// echo is what the response object repeats of the request.
	instructions *string
	echoTools    []any // responsesTool, or a tool as the client sent it
	toolChoice   json.RawMessage
}

// decodeResponses decodes and checks a Responses body. Only stateless
// requests are served: previous_response_id, conversation, store: true,
// background and prompt templates are refused.
func decodeResponses(body []byte) (*responsesRequest, error) {
	f, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	rr := &responsesRequest{}
	if err := f.take("model", &rr.model); err != nil {
		return nil, err
	}
	if err := f.take("stream", &rr.stream); err != nil {
		return nil, err
	}
	if f.has("previous_response_id") {
		return nil, badField("previous_response_id", "the gateway is stateless and keeps no responses: send the whole conversation in input (and store: false)")
	}
	if f.has("conversation") {
		return nil, badField("conversation", "the gateway is stateless and keeps no conversations: send the whole conversation in input")
	}
	var store, background *bool
	if err := f.take("store", &store); err != nil {
		return nil, err
	}
	if store != nil && *store {
		return nil, badField("store", "the gateway is stateless and stores no responses: send store: false (or leave it out)")
	}
	if err := f.take("background", &background); err != nil {
		return nil, err
	}
	if background != nil && *background {
		return nil, badField("background", "background responses are not supported by the gateway")
	}
	if f.has("prompt") {
		return nil, badField("prompt", "prompt templates are stored server-side and not supported by the gateway: send instructions and input")
	}
	var maxTokens *int
	if err := f.take("max_output_tokens", &maxTokens); err != nil {
		return nil, err
	}
	if maxTokens != nil {
		if err := outputLimit("max_output_tokens", *maxTokens); err != nil {
			return nil, err
		}
		rr.req.MaxTokens = *maxTokens
	}
	rr.modelMax = rr.req.MaxTokens == 0
	if err := takeFloat(f, "temperature", 2, &rr.req.Temperature); err != nil {
		return nil, err
	}
	if err := takeFloat(f, "top_p", 1, &rr.req.TopP); err != nil {
		return nil, err
	}
	var textIgnored []string
	if raw := f.raw("text"); raw != nil {
		tf, err := object("text", raw)
		if err != nil {
			return nil, err
		}
		if fraw := tf.raw("format"); fraw != nil {
			if rr.req.ResponseFormat, err = formatOfType("text.format", fraw, ""); err != nil {
				return nil, err
			}
		}
		for _, k := range tf.unknown() {
			textIgnored = append(textIgnored, "text."+k)
		}
	}
	var toolsIgnored []string
	groups, err := toolGroups(f.raw("tools"), f.raw("input"))
	if err != nil {
		return nil, err
	}
	if len(groups) > 0 {
		if rr.req.Tools, rr.decoded.tools, rr.echoTools, toolsIgnored, err = responsesTools(groups); err != nil {
			return nil, err
		}
	}
	if raw := f.raw("tool_choice"); raw != nil {
		if rr.req.ToolChoice, err = responsesToolChoice(raw, rr.decoded.tools); err != nil {
			return nil, err
		}
		rr.toolChoice = keep(raw)
	}
	if rr.req.DisableParallelToolCalls, err = serialToolCalls(f); err != nil {
		return nil, err
	}
	if raw := f.raw("reasoning"); raw != nil && string(raw) != "null" {
		if rr.req.Reasoning, err = responsesReasoning(raw); err != nil {
			return nil, err
		}
	}
	var instructions string
	if err := f.take("instructions", &instructions); err != nil {
		return nil, err
	}
	if f.has("instructions") {
		rr.instructions = &instructions
	}
	raw := f.raw("input")
	if raw == nil {
		return nil, badField("input", "required: send a string or an array of input items")
	}
	var system string
	if system, rr.req.Messages, err = responsesInput(raw, rr.decoded.tools); err != nil {
		return nil, err
	}
	rr.req.System = strings.Join(nonEmpty([]string{instructions, system}), "\n\n")
	if len(rr.req.Messages) == 0 {
		return nil, badField("input", "send at least one user message")
	}
	f.skip(responsesQuiet...)
	rr.ignored = append(f.present(responsesIgnored...), f.unknown()...)
	rr.ignored = append(append(rr.ignored, textIgnored...), toolsIgnored...)
	slices.Sort(rr.ignored)
	return rr, nil
}

// responsesReasoning reads reasoning: {effort, summary}. An effort of
// "none" sends no reasoning setting; no effort leaves the depth to the
// provider. Summaries are returned whenever the provider gives them, so
// summary is taken as it comes.
func responsesReasoning(raw json.RawMessage) (*provider.Reasoning, error) {
	rf, err := object("reasoning", raw)
	if err != nil {
		return nil, err
	}
	rf.skip("summary", "generate_summary", "context", "mode")
	var effort *string
	if err := rf.take("effort", &effort); err != nil {
		return nil, err
	}
	if effort == nil {
		return &provider.Reasoning{}, nil
	}
	return effortOf("reasoning.effort", *effort)
}

// responsesTool is a function tool as the response object repeats it.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// toolGroup is a list of tools at path: the request's tools, or an
// additional_tools input item's.
type toolGroup struct {
	path string
	raw  json.RawMessage
}

// toolGroups are the request's tools and those of its additional_tools
// input items (Codex declares its tools that way for some models): the
// gateway is stateless, so every tool declared anywhere in the
// conversation is offered.
func toolGroups(tools, input json.RawMessage) ([]toolGroup, error) {
	var groups []toolGroup
	if tools != nil {
		groups = append(groups, toolGroup{"tools", tools})
	}
	if input == nil || input[skipSpace(input, 0)] != '[' {
		return groups, nil
	}
	items, err := array("input", input)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		path := fmt.Sprintf("input[%d]", i)
		mf, err := object(path, it)
		if err != nil {
			return nil, err
		}
		var typ string
		if err := mf.take("type", &typ); err != nil {
			return nil, err
		}
		if typ != "additional_tools" {
			continue
		}
		raw := mf.raw("tools")
		if raw == nil {
			return nil, badField(path+".tools", "required")
		}
		groups = append(groups, toolGroup{path + ".tools", raw})
	}
	return groups, nil
}

// responsesTools decodes tools: function tools, [{type: function, name,
// description, parameters, strict}] (flat, unlike Chat Completions);
// custom tools, [{type: custom, name, description, format}]; and
// namespaces of them, [{type: namespace, name, description, tools}]. Custom
// and namespaced tools are offered as functions (see hosttools.go). Other
// tool types (hosted tools such as web_search) are dropped and named as
// ignored: the model simply does not see them. echo is what the response
// object repeats of the tools it took.
func responsesTools(groups []toolGroup) (defs []provider.ToolDef, names *toolMap, echo []any, ignored []string, err error) {
	var declared []clientTool
	type custom struct {
		at        int // index in defs
		namespace string
		name      string
		desc      string
		format    map[string]any
	}
	var customs []custom
	// tool decodes one function or custom tool of namespace ns at path;
	// it reports false for another type.
	tool := func(path, ns string, tf *fields, typ string) (bool, error) {
		var name string
		if err := tf.take("name", &name); err != nil {
			return false, err
		}
		if typ != "function" && typ != "custom" {
			return false, nil
		}
		if name == "" {
			return false, badField(path+".name", "required")
		}
		var desc *string
		if err := tf.take("description", &desc); err != nil {
			return false, err
		}
		if typ == "custom" {
			c := custom{at: len(defs), namespace: ns, name: name}
			if desc != nil {
				c.desc = *desc
			}
			if err := tf.take("format", &c.format); err != nil {
				return false, err
			}
			customs = append(customs, c)
			defs = append(defs, provider.ToolDef{})
			declared = append(declared, clientTool{name: name, namespace: ns, custom: true})
			return true, nil
		}
		td := provider.ToolDef{Name: name}
		if desc != nil {
			td.Description = *desc
		}
		var strict *bool
		if err := tf.take("strict", &strict); err != nil {
			return false, err
		}
		td.InputSchema = keep(schemaOrEmpty(tf.raw("parameters")))
		if _, err := object(path+".parameters", td.InputSchema); err != nil {
			return false, err
		}
		td.Strict = strict != nil && *strict
		defs = append(defs, td)
		declared = append(declared, clientTool{name: name, namespace: ns})
		if ns == "" {
			echo = append(echo, responsesTool{Type: "function", Name: name, Description: desc, Parameters: td.InputSchema, Strict: strict})
		}
		return true, nil
	}
	var items []json.RawMessage
	var paths []string
	for _, g := range groups {
		list, err := array(g.path, g.raw)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		for i, it := range list {
			items = append(items, it)
			paths = append(paths, fmt.Sprintf("%s[%d]", g.path, i))
		}
	}
	for i, it := range items {
		path := paths[i]
		tf, err := object(path, it)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		var typ string
		if err := tf.take("type", &typ); err != nil {
			return nil, nil, nil, nil, err
		}
		switch typ {
		case "":
			return nil, nil, nil, nil, badField(path+".type", "required")
		case "namespace":
			var ns string
			if err := tf.take("name", &ns); err != nil {
				return nil, nil, nil, nil, err
			}
			if ns == "" {
				return nil, nil, nil, nil, badField(path+".name", "required")
			}
			members, err := array(path+".tools", tf.raw("tools"))
			if err != nil {
				return nil, nil, nil, nil, err
			}
			for j, m := range members {
				mpath := fmt.Sprintf("%s.tools[%d]", path, j)
				mf, err := object(mpath, m)
				if err != nil {
					return nil, nil, nil, nil, err
				}
				var mtyp string
				if err := mf.take("type", &mtyp); err != nil {
					return nil, nil, nil, nil, err
				}
				if ok, err := tool(mpath, ns, mf, mtyp); err != nil {
					return nil, nil, nil, nil, err
				} else if !ok {
					ignored = append(ignored, mpath+"."+mtyp)
				}
			}
			echo = append(echo, json.RawMessage(keep(it)))
		default:
			ok, err := tool(path, "", tf, typ)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			if !ok {
				ignored = append(ignored, path+"."+typ)
			} else if typ == "custom" {
				echo = append(echo, json.RawMessage(keep(it)))
			}
		}
	}
	names = newToolMap(declared)
	for _, c := range customs {
		defs[c.at] = customDef(names.wireName(c.namespace, c.name), c.desc, c.format)
	}
	for i := range defs {
		if t := declared[i]; !t.custom {
			defs[i].Name = names.wireName(t.namespace, t.name)
		}
	}
	return defs, names, echo, ignored, nil
}

// responsesToolChoice decodes "none" | "auto" | "required" | {type:
// function, name}.
func responsesToolChoice(raw json.RawMessage, names *toolMap) (provider.ToolChoice, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
			return provider.ToolChoice(s), nil
		}
		return "", badField("tool_choice", "%q is not a tool choice: write none, auto, required or {\"type\":\"function\",\"name\":…}", s)
	}
	tc, err := object("tool_choice", raw)
	if err != nil {
		return "", badField("tool_choice", "want a string or an object, got %s", jsonKind(raw))
	}
	var typ, name, ns string
	if err := tc.take("type", &typ); err != nil {
		return "", err
	}
	if typ != "function" && typ != "custom" {
		return "", badField("tool_choice.type", "%q is not supported: write function or custom", typ)
	}
	if err := tc.take("name", &name); err != nil {
		return "", err
	}
	if err := tc.take("namespace", &ns); err != nil {
		return "", err
	}
	if name == "" {
		return "", badField("tool_choice.name", "required")
	}
	return provider.ToolChoice(names.wireName(ns, name)), nil
}

// responsesInput turns input (a string, or input items) into the system
// prompt and the conversation: system and developer messages join the
// system prompt, function_call items become tool calls in an assistant
// turn, function_call_output items tool results in a user turn, and
// consecutive turns of one role merge. Reasoning items are dropped: they
// belong to the provider that made them.
func responsesInput(raw json.RawMessage, tools *toolMap) (string, []provider.Message, error) {
	s, items, err := stringOrParts("input", raw)
	if err != nil {
		return "", nil, err
	}
	if items == nil {
		if s == "" {
			return "", nil, badField("input", "send a non-empty string or at least one input item")
		}
		return "", []provider.Message{provider.UserText(s)}, nil
	}
	var system []string
	var out []provider.Message
	names := map[string]string{} // call id -> function name
	for i, it := range items {
		path := fmt.Sprintf("input[%d]", i)
		mf, err := object(path, it)
		if err != nil {
			return "", nil, err
		}
		var typ, role string
		if err := mf.take("type", &typ); err != nil {
			return "", nil, err
		}
		if err := mf.take("role", &role); err != nil {
			return "", nil, err
		}
		if typ == "" && role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			parts, err := responsesContent(path+".content", mf.raw("content"))
			if err != nil {
				return "", nil, err
			}
			if role != "user" {
				if err := textOnly(path+".content", parts); err != nil {
					return "", nil, err
				}
			}
			switch role {
			case "system", "developer":
				system = append(system, joinText(parts, "\n"))
			case "user":
				out = appendTurn(out, provider.RoleUser, parts)
			case "assistant":
				out = appendTurn(out, provider.RoleAssistant, parts)
			case "":
				return "", nil, badField(path+".role", "required")
			default:
				return "", nil, badField(path+".role", "%q is not a role: write user, assistant, system or developer", role)
			}
		case "function_call", "custom_tool_call":
			var callID, name, ns, args string
			if err := mf.take("call_id", &callID); err != nil {
				return "", nil, err
			}
			if err := mf.take("name", &name); err != nil {
				return "", nil, err
			}
			if err := mf.take("namespace", &ns); err != nil {
				return "", nil, err
			}
			if callID == "" {
				return "", nil, badField(path+".call_id", "required")
			}
			if name == "" {
				return "", nil, badField(path+".name", "required")
			}
			var obj json.RawMessage
			if typ == "custom_tool_call" {
				var input string
				if err := mf.take("input", &input); err != nil {
					return "", nil, err
				}
				obj = customArguments(input)
			} else {
				if err := mf.take("arguments", &args); err != nil {
					return "", nil, err
				}
				if obj, err = argumentsObject(path+".arguments", args); err != nil {
					return "", nil, err
				}
			}
			wire := tools.wireName(ns, name)
			names[callID] = wire
			out = appendTurn(out, provider.RoleAssistant, []provider.Part{{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: callID, Name: wire, Arguments: obj}}})
		case "function_call_output", "custom_tool_call_output":
			var callID string
			if err := mf.take("call_id", &callID); err != nil {
				return "", nil, err
			}
			if callID == "" {
				return "", nil, badField(path+".call_id", "required: the call_id of the call this output answers")
			}
			parts, err := responsesContent(path+".output", mf.raw("output"))
			if err == nil {
				err = textOnly(path+".output", parts)
			}
			if err != nil {
				return "", nil, err
			}
			res := provider.ToolResult{CallID: callID, Name: names[callID], Content: joinText(parts, "\n")}
			out = appendTurn(out, provider.RoleUser, []provider.Part{{Type: provider.PartToolResult, ToolResult: &res}})
		case "reasoning", "additional_tools": // the tools are read with the request's (toolGroups)
		case "item_reference":
			return "", nil, badField(path+".type", "item references point at stored items, which the stateless gateway does not keep: send the items themselves")
		default:
			return "", nil, badField(path+".type", "%q input items are not supported by the gateway: send message, function_call, custom_tool_call and their output items", typ)
		}
	}
	return strings.Join(nonEmpty(system), "\n\n"), out, nil
}

// responsesContent reads a message's content or a function output: a
// string, or input_text / output_text parts (refusals dropped).
func responsesContent(path string, raw json.RawMessage) ([]provider.Part, error) {
	s, items, err := stringOrParts(path, raw)
	if err != nil {
		return nil, err
	}
	if items == nil {
		if s == "" {
			return nil, nil
		}
		return []provider.Part{{Type: provider.PartText, Text: s}}, nil
	}
	var out []provider.Part
	for j, it := range items {
		p := fmt.Sprintf("%s[%d]", path, j)
		pf, err := object(p, it)
		if err != nil {
			return nil, err
		}
		var typ, text string
		if err := pf.take("type", &typ); err != nil {
			return nil, err
		}
		switch typ {
		case "input_text", "output_text", "text":
			if err := pf.take("text", &text); err != nil {
				return nil, err
			}
			if text != "" {
				out = append(out, provider.Part{Type: provider.PartText, Text: text})
			}
		case "refusal":
		case "input_image":
			var url string
			if err := pf.take("image_url", &url); err != nil {
				return nil, err
			}
			pf.skip("detail")
			if pf.has("file_id") || url == "" {
				return nil, badField(p+".image_url", "required: file ids point at stored files, which the stateless gateway does not keep")
			}
			part, err := imagePart(p+".image_url", url)
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case "input_file", "input_audio":
			return nil, badField(p+".type", "%s content is not supported by the gateway yet: send text", typ)
		default:
			return nil, badField(p+".type", "%q is not a content part type here: send input_text", typ)
		}
	}
	return out, nil
}

// Response object shapes.
type responseObject struct {
	ID                 string              `json:"id"`
	Object             string              `json:"object"`
	CreatedAt          int64               `json:"created_at"`
	Status             string              `json:"status"`
	Error              *responseError      `json:"error"`
	IncompleteDetails  *responseIncomplete `json:"incomplete_details"`
	Instructions       *string             `json:"instructions"`
	MaxOutputTokens    *int                `json:"max_output_tokens"`
	Model              string              `json:"model"`
	Output             []responseItem      `json:"output"`
	ParallelToolCalls  bool                `json:"parallel_tool_calls"`
	PreviousResponseID *string             `json:"previous_response_id"`
	Store              bool                `json:"store"`
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	Tools              []any               `json:"tools"`
	// Temperature and TopP are what the call was sent with; null when it
	// was sent without one (the provider's default, which the gateway
	// does not know) or the serving model dropped it.
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	// Usage is absent until the response ends.
	Usage    *responsesUsage `json:"usage,omitempty"`
	Metadata struct{}        `json:"metadata"`
}

// sampling sets the temperature and top_p the call was sent with, less
// those the serving model dropped.
func (o *responseObject) sampling(req *provider.Request, dropped []string) {
	if !slices.Contains(dropped, "temperature") {
		o.Temperature = req.Temperature
	}
	if !slices.Contains(dropped, "top_p") {
		o.TopP = req.TopP
	}
}

type responseError struct {
	// Code is one of the spec's ResponseErrorCode values.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// responseErrorCode is the ResponseErrorCode of a failure that ends a
// Responses stream: the enum has a code for a rate limit and for a
// prompt the model refused, and server_error for everything else.
func responseErrorCode(f *failure) string {
	switch f.class {
	case classRateLimit:
		return "rate_limit_exceeded"
	case classBadRequest, classContext:
		return "invalid_prompt"
	}
	return "server_error"
}

type responseIncomplete struct {
	Reason string `json:"reason"`
}

// responseItem is an output item: a message or a function call.
type responseItem struct {
	Type    string            `json:"type"`
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Role    string            `json:"role,omitempty"`
	Content *[]responseOutput `json:"content,omitempty"`
	// function_call, custom_tool_call
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Namespace string  `json:"namespace,omitempty"`
	Arguments *string `json:"arguments,omitempty"` // function_call
	Input     *string `json:"input,omitempty"`     // custom_tool_call
	// reasoning
	Summary *[]summaryText `json:"summary,omitempty"`
}

// summaryText is a reasoning item's summary part.
type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// reasoningItem is a reasoning output item: the provider's reasoning text
// (Anthropic's thinking, Gemini's thought summaries) as its summary. The
// provider's signatures stay with the gateway (see turnstate.go).
func reasoningItem(id, text, status string) responseItem {
	summary := []summaryText{}
	if text != "" {
		summary = append(summary, summaryText{Type: "summary_text", Text: text})
	}
	return responseItem{Type: "reasoning", ID: id, Status: status, Summary: &summary}
}

type responseOutput struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

type responsesUsage struct {
	InputTokens         int64                 `json:"input_tokens"`
	InputTokensDetails  responsesInputDetails `json:"input_tokens_details"`
	OutputTokens        int64                 `json:"output_tokens"`
	OutputTokensDetails openAICompletion      `json:"output_tokens_details"`
	TotalTokens         int64                 `json:"total_tokens"`
}

type responsesInputDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

func toResponsesUsage(u provider.Usage) *responsesUsage {
	return &responsesUsage{InputTokens: u.InputTokens, InputTokensDetails: responsesInputDetails{CachedTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens},
		OutputTokens: u.OutputTokens, OutputTokensDetails: openAICompletion{ReasoningTokens: u.ReasoningTokens}, TotalTokens: u.TotalTokens()}
}

func messageItem(id, text, status string) responseItem {
	content := []responseOutput{}
	if status != "in_progress" {
		content = append(content, outputText(text))
	}
	return responseItem{Type: "message", ID: id, Status: status, Role: "assistant", Content: &content}
}

func outputText(text string) responseOutput {
	return responseOutput{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

// callItem renders the provider's call tc, its function arguments args,
// as the client's tool call: a function call (in its namespace) or a
// custom tool call with its input text.
func callItem(id string, tc provider.ToolCall, args, status string, tools *toolMap) responseItem {
	ct := tools.client(tc.Name)
	it := responseItem{ID: id, Status: status, CallID: tc.ID, Name: ct.name, Namespace: ct.namespace}
	if ct.custom {
		input := ""
		if args != "" {
			input = customText(json.RawMessage(args))
		}
		it.Type, it.Input = "custom_tool_call", &input
		return it
	}
	it.Type, it.Arguments = "function_call", &args
	return it
}

// responseShell is the response object before its output: the request's
// echo, in progress.
func (rr *responsesRequest) responseShell(id string, created int64, model string) responseObject {
	tc := rr.toolChoice
	if tc == nil {
		tc = json.RawMessage(`"auto"`)
	}
	tools := rr.echoTools
	if tools == nil {
		tools = []any{}
	}
	var mt *int
	if rr.req.MaxTokens > 0 {
		mt = &rr.req.MaxTokens
	}
	return responseObject{ID: "resp_" + id, Object: "response", CreatedAt: created, Status: "in_progress", Instructions: rr.instructions,
		MaxOutputTokens: mt, Model: model, Output: []responseItem{}, ParallelToolCalls: !rr.req.DisableParallelToolCalls, ToolChoice: tc, Tools: tools}
}

// responseStatus is the status of a finished response, from its stop
// reason: "incomplete", with the reason, when the answer was cut.
func responseStatus(res *provider.Result) (string, *responseIncomplete) {
	switch res.StopReason {
	case provider.StopMaxTokens:
		return "incomplete", &responseIncomplete{Reason: "max_output_tokens"}
	case provider.StopContentFilter, provider.StopRefusal:
		return "incomplete", &responseIncomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

// finishResponse sets the status of a finished response from its stop
// reason, and its usage.
func finishResponse(o *responseObject, res *provider.Result) {
	o.Status, o.IncompleteDetails = responseStatus(res)
	o.Usage = toResponsesUsage(res.Usage)
	if res.Model != "" {
		o.Model = res.Model
	}
}

// responseOf renders a result as a Responses object.
func (rr *responsesRequest) responseOf(id string, created int64, res *provider.Result) responseObject {
	o := rr.responseShell(id, created, res.Model)
	// The item the answer was cut in, the last, is as incomplete as the
	// response.
	status, _ := responseStatus(res)
	last := len(res.ToolCalls) - 1
	itemStatus := func(i int) string {
		if i == last {
			return status
		}
		return "completed"
	}
	for i, p := range res.Parts {
		if p.Type == provider.PartReasoning && p.Text != "" {
			o.Output = append(o.Output, reasoningItem(fmt.Sprintf("rs_%s_%d", id, i), p.Text, "completed"))
		}
	}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		o.Output = append(o.Output, messageItem("msg_"+id, res.Content, itemStatus(-1)))
	}
	for i, tc := range res.ToolCalls {
		o.Output = append(o.Output, callItem(fmt.Sprintf("fc_%s_%d", id, i), tc, string(argsOrEmpty(tc.Arguments)), itemStatus(i), rr.decoded.tools))
	}
	finishResponse(&o, res)
	return o
}

// responses serves POST /v1/responses.
func (g *Gateway) responses(w http.ResponseWriter, r *http.Request) {
	p := protoOpenAI
	ctx := r.Context()
	id := requestID(r)
	idHeaders(w.Header(), id)
	rr, call, ok := admit(g, w, r, p, id, decodeResponses)
	if !ok {
		return
	}
	if rr.stream {
		g.streamResponses(w, r, call, id, rr)
		return
	}
	out, err := g.invoke(ctx, call, rr.key)
	if err != nil {
		writeFailure(w, r, p, err)
		return
	}
	servedHeaders(w.Header(), out.Provider, out.Model)
	if out.Native != nil {
		writeNative(w, r, out.Native, 0)
		return
	}
	dropped := g.unhonoured(w.Header(), &call.Request, out.Provider, out.Model)
	resp := rr.responseOf(id, g.opts.Now().Unix(), out.Result)
	resp.sampling(&call.Request, dropped)
	writeJSON(w, http.StatusOK, resp)
}

// streamResponses serves a streamed Responses request: response.created
// and response.in_progress, then one output item at a time (a message
// with its output_text deltas, or a function call with its argument
// deltas), each opened with response.output_item.added and closed with
// response.output_item.done, then response.completed (or
// response.incomplete) with the whole response and its usage. A failure
// after the first byte ends the stream with response.failed carrying the
// error.
func (g *Gateway) streamResponses(w http.ResponseWriter, r *http.Request, call orchestrator.Call, id string, rr *responsesRequest) {
	ctx := r.Context()
	s, err := g.stream(ctx, call, rr.key)
	if err != nil {
		writeFailure(w, r, protoOpenAI, err)
		return
	}
	defer s.Close()
	prov, model := s.Served()
	servedHeaders(w.Header(), prov, model)
	if s.Reply() != nil {
		relayNative(w, r, s)
		return
	}
	dropped := g.unhonoured(w.Header(), &call.Request, prov, model)
	st := &itemStream{out: newSSE(w), id: id, resp: rr.responseShell(id, g.opts.Now().Unix(), model), open: -1, openTool: -1, tools: map[int]int{}, names: rr.decoded.tools}
	st.resp.sampling(&call.Request, dropped)
	if st.send("response.created", map[string]any{"response": st.resp}) != nil {
		return
	}
	if st.send("response.in_progress", map[string]any{"response": st.resp}) != nil {
		return
	}
	failWith := func(err error) {
		if clientGone(ctx) {
			return
		}
		f := classify(ctx, err)
		// The output keeps what was streamed: the item the failure cut
		// is incomplete.
		st.cut()
		st.resp.Status, st.resp.Error = "failed", &responseError{Code: responseErrorCode(f), Message: openAIError(f).Error.Message}
		_ = st.send("response.failed", map[string]any{"response": st.resp})
	}
	relay(s, st, failWith)
}

// itemStream writes the output items of a Responses stream, one open at a
// time, and keeps the response object that response.completed carries.
type itemStream struct {
	out      *sse
	id       string
	seq      int
	resp     responseObject
	open     int // output index of the open item, -1 when none
	openTool int // the provider's index of the open function call, -1 for a message
	buf      strings.Builder
	args     strings.Builder
	openCall provider.ToolCall
	tools    map[int]int // provider tool index -> output index
	names    *toolMap
	sentText bool
	// thinking: the open item is a reasoning item.
	thinking bool
	// cutStatus, when set, is the status of the item closed last: the
	// answer was cut in it.
	cutStatus string
}

// closing is the status of the item being closed.
func (b *itemStream) closing() string {
	if b.cutStatus != "" {
		return b.cutStatus
	}
	return "completed"
}

// send writes one named event; payload gets its type and sequence number.
func (b *itemStream) send(name string, payload map[string]any) error {
	payload["type"] = name
	payload["sequence_number"] = b.seq
	b.seq++
	return b.out.event(name, mustJSON(payload))
}

func (b *itemStream) itemID() string {
	if b.thinking {
		return fmt.Sprintf("rs_%s_%d", b.id, b.open)
	}
	if b.openTool >= 0 {
		return fmt.Sprintf("fc_%s_%d", b.id, b.open)
	}
	return fmt.Sprintf("msg_%s_%d", b.id, b.open)
}

// cut puts the open item, as far as it was streamed, in the response's
// output as incomplete, without its done events: the stream failed.
func (b *itemStream) cut() {
	if b.open < 0 {
		return
	}
	switch {
	case b.thinking:
		b.resp.Output = append(b.resp.Output, reasoningItem(b.itemID(), b.buf.String(), "incomplete"))
	case b.openTool >= 0:
		b.resp.Output = append(b.resp.Output, callItem(b.itemID(), b.openCall, b.args.String(), "incomplete", b.names))
	default:
		b.resp.Output = append(b.resp.Output, messageItem(b.itemID(), b.buf.String(), "incomplete"))
	}
	b.open, b.openTool, b.thinking = -1, -1, false
}

// closeOpen finishes the open item: its done events, and the item in the
// response's output.
func (b *itemStream) closeOpen() error {
	if b.open < 0 {
		return nil
	}
	idx, itemID := b.open, b.itemID()
	var item responseItem
	if b.thinking {
		text := b.buf.String()
		if err := b.send("response.reasoning_summary_text.done", map[string]any{"item_id": itemID, "output_index": idx, "summary_index": 0, "text": text}); err != nil {
			return err
		}
		if err := b.send("response.reasoning_summary_part.done", map[string]any{"item_id": itemID, "output_index": idx, "summary_index": 0, "part": summaryText{Type: "summary_text", Text: text}}); err != nil {
			return err
		}
		item = reasoningItem(itemID, text, b.closing())
	} else if b.openTool >= 0 {
		args := b.args.String()
		if args == "" {
			args = "{}"
		}
		item = callItem(itemID, b.openCall, args, b.closing(), b.names)
		if item.Input != nil {
			// A custom tool's input goes out whole: it is the text inside
			// the function's JSON arguments.
			if err := b.send("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": idx, "delta": *item.Input}); err != nil {
				return err
			}
			if err := b.send("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": idx, "input": *item.Input}); err != nil {
				return err
			}
		} else if err := b.send("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": idx, "name": item.Name, "arguments": args}); err != nil {
			return err
		}
	} else {
		text := b.buf.String()
		if err := b.send("response.output_text.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "text": text, "logprobs": []struct{}{}}); err != nil {
			return err
		}
		if err := b.send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "part": outputText(text)}); err != nil {
			return err
		}
		item = messageItem(itemID, text, b.closing())
	}
	b.resp.Output = append(b.resp.Output, item)
	b.open, b.openTool, b.thinking = -1, -1, false
	b.buf.Reset()
	b.args.Reset()
	return b.send("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// textDelta sends text in the open message item.
func (b *itemStream) textDelta(t string) error {
	itemID := b.itemID()
	b.buf.WriteString(t)
	b.sentText = true
	return b.send("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": b.open, "content_index": 0, "delta": t, "logprobs": []struct{}{}})
}

// textOpen opens a message item unless one is open.
func (b *itemStream) textOpen() error {
	if b.open >= 0 && b.openTool < 0 && !b.thinking {
		return nil
	}
	if err := b.closeOpen(); err != nil {
		return err
	}
	b.open = len(b.resp.Output)
	itemID := b.itemID()
	if err := b.send("response.output_item.added", map[string]any{"output_index": b.open, "item": messageItem(itemID, "", "in_progress")}); err != nil {
		return err
	}
	return b.send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": b.open, "content_index": 0, "part": outputText("")})
}

// reasoning streams reasoning text as a reasoning item's summary:
// response.output_item.added, response.reasoning_summary_part.added, then
// response.reasoning_summary_text.delta events. The provider's metadata
// stays with the gateway.
func (b *itemStream) reasoning(t string, _ provider.Metadata) error {
	if t == "" {
		return nil
	}
	if !b.thinking {
		if err := b.closeOpen(); err != nil {
			return err
		}
		b.open, b.thinking = len(b.resp.Output), true
		itemID := b.itemID()
		if err := b.send("response.output_item.added", map[string]any{"output_index": b.open, "item": reasoningItem(itemID, "", "in_progress")}); err != nil {
			return err
		}
		if err := b.send("response.reasoning_summary_part.added", map[string]any{"item_id": itemID, "output_index": b.open, "summary_index": 0, "part": summaryText{Type: "summary_text", Text: ""}}); err != nil {
			return err
		}
	}
	b.buf.WriteString(t)
	return b.send("response.reasoning_summary_text.delta", map[string]any{"item_id": b.itemID(), "output_index": b.open, "summary_index": 0, "delta": t})
}

// text adds answer text, opening a message item when none is open.
func (b *itemStream) text(t string) error {
	if err := b.textOpen(); err != nil {
		return err
	}
	return b.textDelta(t)
}

// tool adds a fragment of a function call, opening its item on the first.
func (b *itemStream) tool(d *provider.ToolCallDelta) error {
	if _, seen := b.tools[d.Index]; !seen {
		if err := b.closeOpen(); err != nil {
			return err
		}
		b.open, b.openTool = len(b.resp.Output), d.Index
		b.tools[d.Index] = b.open
		b.openCall = provider.ToolCall{ID: d.ID, Name: d.Name}
		if err := b.send("response.output_item.added", map[string]any{"output_index": b.open, "item": callItem(b.itemID(), b.openCall, "", "in_progress", b.names)}); err != nil {
			return err
		}
	} else if b.openTool != d.Index {
		return errInterleaved
	}
	if d.Arguments == "" {
		return nil
	}
	b.args.WriteString(d.Arguments)
	if b.names.isCustom(b.openCall.Name) {
		return nil
	}
	return b.send("response.function_call_arguments.delta", map[string]any{"item_id": b.itemID(), "output_index": b.open, "delta": d.Arguments})
}

// finish sends what the provider did not stream, closes the last item
// and ends the response with its status and usage.
func (b *itemStream) finish(res *provider.Result) error {
	if !b.sentText && res.Content != "" {
		if err := b.text(res.Content); err != nil {
			return err
		}
	}
	for i, tc := range res.ToolCalls {
		_, seen := b.tools[i]
		switch {
		case !seen:
			if err := b.tool(&provider.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(argsOrEmpty(tc.Arguments))}); err != nil {
				return err
			}
		case b.openTool == i && b.args.Len() == 0 && len(tc.Arguments) > 0:
			if err := b.tool(&provider.ToolCallDelta{Index: i, Arguments: string(tc.Arguments)}); err != nil {
				return err
			}
		}
	}
	if len(b.resp.Output) == 0 && b.open < 0 {
		// An empty answer is still one (empty) message.
		if err := b.textOpen(); err != nil {
			return err
		}
	}
	if status, _ := responseStatus(res); status != "completed" {
		b.cutStatus = status
	}
	if err := b.closeOpen(); err != nil {
		return err
	}
	finishResponse(&b.resp, res)
	name := "response.completed"
	if b.resp.Status == "incomplete" {
		name = "response.incomplete"
	}
	return b.send(name, map[string]any{"response": b.resp})
}
