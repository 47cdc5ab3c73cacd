package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Chat Completions parameters the gateway accepts without applying them,
// silently: they carry no meaning for the answer.
var openAIQuiet = []string{"user", "metadata", "store", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier"}

// Chat Completions parameters the gateway accepts without applying them,
// naming them in X-CortexBuild-Ignored-Params (refused with
// gateway.strict_params).
var openAIIgnored = []string{"presence_penalty", "frequency_penalty", "logit_bias", "verbosity", "prediction", "web_search_options"}

// chatRequest is a decoded Chat Completions request.
type chatRequest struct {
	decoded
	includeUsage bool
}

// decodeChat decodes and checks a Chat Completions body.
func decodeChat(body []byte) (*chatRequest, error) {
	f, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	cr := &chatRequest{}
	if err := f.take("model", &cr.model); err != nil {
		return nil, err
	}
	if err := f.take("stream", &cr.stream); err != nil {
		return nil, err
	}
	if raw := f.raw("stream_options"); raw != nil {
		so, err := object("stream_options", raw)
		if err != nil {
			return nil, err
		}
		if err := so.take("include_usage", &cr.includeUsage); err != nil {
			return nil, err
		}
		so.skip("include_obfuscation")
	}
	var maxTokens, maxCompletion *int
	if err := f.take("max_tokens", &maxTokens); err != nil {
		return nil, err
	}
	if err := f.take("max_completion_tokens", &maxCompletion); err != nil {
		return nil, err
	}
	limitField := "max_tokens"
	if maxCompletion != nil {
		maxTokens, limitField = maxCompletion, "max_completion_tokens"
	}
	if maxTokens != nil {
		if err := outputLimit(limitField, *maxTokens); err != nil {
			return nil, err
		}
		cr.req.MaxTokens = *maxTokens
	}
	cr.modelMax = cr.req.MaxTokens == 0
	if err := refuseOpenAIFeatures(f); err != nil {
		return nil, err
	}
	if err := takeFloat(f, "temperature", 2, &cr.req.Temperature); err != nil {
		return nil, err
	}
	if err := takeFloat(f, "top_p", 1, &cr.req.TopP); err != nil {
		return nil, err
	}
	if err := f.take("seed", &cr.req.Seed); err != nil {
		return nil, err
	}
	// top_k is not OpenAI's, but vLLM's and other servers' extension.
	if err := takeTopK(f, &cr.req.TopK); err != nil {
		return nil, err
	}
	if err := takeStop(f, "stop", &cr.req.Stop); err != nil {
		return nil, err
	}
	var effort *string
	if err := f.take("reasoning_effort", &effort); err != nil {
		return nil, err
	}
	if effort != nil {
		if cr.req.Reasoning, err = effortOf("reasoning_effort", *effort); err != nil {
			return nil, err
		}
	}
	if raw := f.raw("response_format"); raw != nil {
		if cr.req.ResponseFormat, err = formatOfType("response_format", raw, "json_schema"); err != nil {
			return nil, err
		}
	}
	var toolsIgnored []string
	if raw := f.raw("tools"); raw != nil {
		if cr.req.Tools, cr.tools, toolsIgnored, err = openAITools(raw); err != nil {
			return nil, err
		}
	}
	if raw := f.raw("tool_choice"); raw != nil {
		if cr.req.ToolChoice, err = openAIToolChoice(raw, cr.tools); err != nil {
			return nil, err
		}
	}
	if cr.req.DisableParallelToolCalls, err = serialToolCalls(f); err != nil {
		return nil, err
	}
	raw := f.raw("messages")
	if raw == nil {
		return nil, badField("messages", "required: send at least one message")
	}
	var named []string
	if cr.req.System, cr.req.Messages, named, err = openAIMessages(raw, cr.tools); err != nil {
		return nil, err
	}
	f.skip(openAIQuiet...)
	cr.ignored = append(append(append(f.present(openAIIgnored...), f.unknown()...), toolsIgnored...), named...)
	slices.Sort(cr.ignored)
	return cr, nil
}

// serialToolCalls reads parallel_tool_calls (both OpenAI protocols): false
// lets the model call at most one tool per turn.
func serialToolCalls(f *fields) (bool, error) {
	var parallel *bool
	if err := f.take("parallel_tool_calls", &parallel); err != nil {
		return false, err
	}
	return parallel != nil && !*parallel, nil
}

// refuseOpenAIFeatures refuses the parameters whose absence would change
// the shape of the answer the client relies on.
func refuseOpenAIFeatures(f *fields) error {
	var n *int
	if err := f.take("n", &n); err != nil {
		return err
	}
	if n != nil && *n != 1 {
		return badField("n", "only one choice per request is supported, got %d", *n)
	}
	var logprobs *bool
	if err := f.take("logprobs", &logprobs); err != nil {
		return err
	}
	var top *int
	if err := f.take("top_logprobs", &top); err != nil {
		return err
	}
	if (logprobs != nil && *logprobs) || (top != nil && *top > 0) {
		return badField("logprobs", "log probabilities are not supported by the gateway")
	}
	var modalities []string
	if err := f.take("modalities", &modalities); err != nil {
		return err
	}
	for _, m := range modalities {
		if m != "text" {
			return badField("modalities", "%q output is not supported by the gateway: only text is", m)
		}
	}
	for _, k := range []string{"functions", "function_call"} {
		f.skip(k)
		if f.has(k) {
			return badField(k, "the legacy function-calling parameters are not supported: send tools and tool_choice")
		}
	}
	f.skip("audio")
	if f.has("audio") {
		return badField("audio", "audio output is not supported by the gateway")
	}
	return nil
}

// openAITools decodes tools: [{type: function, function: {name,
// description, parameters, strict}}] and custom tools, [{type: custom,
// custom: {name, description, format}}], which are offered as functions
// (see hosttools.go). A tool of another type is dropped and named in
// ignored: the rest of the request is served.
func openAITools(raw json.RawMessage) (defs []provider.ToolDef, names *toolMap, ignored []string, err error) {
	items, err := array("tools", raw)
	if err != nil {
		return nil, nil, nil, err
	}
	type custom struct {
		name, desc string
		format     map[string]any
	}
	var declared []clientTool
	var out []provider.ToolDef
	customs := map[int]custom{} // index in out -> its custom tool
	for i, it := range items {
		path := fmt.Sprintf("tools[%d]", i)
		tf, err := object(path, it)
		if err != nil {
			return nil, nil, nil, err
		}
		var typ string
		if err := tf.take("type", &typ); err != nil {
			return nil, nil, nil, err
		}
		switch typ {
		case "", "function":
		case "custom":
			craw := tf.raw("custom")
			if craw == nil {
				return nil, nil, nil, badField(path+".custom", "required")
			}
			cf, err := object(path+".custom", craw)
			if err != nil {
				return nil, nil, nil, err
			}
			var c custom
			if err := cf.take("name", &c.name); err != nil {
				return nil, nil, nil, err
			}
			if c.name == "" {
				return nil, nil, nil, badField(path+".custom.name", "required")
			}
			if err := cf.take("description", &c.desc); err != nil {
				return nil, nil, nil, err
			}
			if err := cf.take("format", &c.format); err != nil {
				return nil, nil, nil, err
			}
			customs[len(out)] = c
			out = append(out, provider.ToolDef{})
			declared = append(declared, clientTool{name: c.name, custom: true})
			continue
		default:
			ignored = append(ignored, path+"."+typ)
			continue
		}
		fraw := tf.raw("function")
		if fraw == nil {
			return nil, nil, nil, badField(path+".function", "required")
		}
		fn, err := object(path+".function", fraw)
		if err != nil {
			return nil, nil, nil, err
		}
		var td provider.ToolDef
		if err := fn.take("name", &td.Name); err != nil {
			return nil, nil, nil, err
		}
		if td.Name == "" {
			return nil, nil, nil, badField(path+".function.name", "required")
		}
		if err := fn.take("description", &td.Description); err != nil {
			return nil, nil, nil, err
		}
		if err := fn.take("strict", &td.Strict); err != nil {
			return nil, nil, nil, err
		}
		td.InputSchema = keep(schemaOrEmpty(fn.raw("parameters")))
		if _, err := object(path+".function.parameters", td.InputSchema); err != nil {
			return nil, nil, nil, err
		}
		out = append(out, td)
		declared = append(declared, clientTool{name: td.Name})
	}
	if len(customs) > 0 {
		names = newToolMap(declared)
		for i, c := range customs {
			out[i] = customDef(names.wireName("", c.name), c.desc, c.format)
		}
	}
	return out, names, ignored, nil
}

// schemaOrEmpty returns raw, or the schema of a tool without arguments.
func schemaOrEmpty(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return raw
}

// openAIToolChoice decodes "none" | "auto" | "required" | {type:
// function, function: {name}}.
func openAIToolChoice(raw json.RawMessage, names *toolMap) (provider.ToolChoice, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
			return provider.ToolChoice(s), nil
		}
		return "", badField("tool_choice", "%q is not a tool choice: write none, auto, required or {\"type\":\"function\",\"function\":{\"name\":…}}", s)
	}
	tc, err := object("tool_choice", raw)
	if err != nil {
		return "", badField("tool_choice", "want a string or an object, got %s", jsonKind(raw))
	}
	var typ string
	if err := tc.take("type", &typ); err != nil {
		return "", err
	}
	if typ != "function" && typ != "custom" {
		return "", badField("tool_choice.type", "%q is not supported: write function or custom", typ)
	}
	fraw := tc.raw(typ)
	if fraw == nil {
		return "", badField("tool_choice."+typ, "required")
	}
	fn, err := object("tool_choice."+typ, fraw)
	if err != nil {
		return "", err
	}
	var name string
	if err := fn.take("name", &name); err != nil {
		return "", err
	}
	if name == "" {
		return "", badField("tool_choice."+typ+".name", "required")
	}
	return provider.ToolChoice(names.wireName("", name)), nil
}

// openAIMessages turns messages into the system prompt and the
// conversation: system and developer messages join the system prompt, tool
// messages become tool results in a user turn, and consecutive turns of one
// role merge. A participant's name is not carried (no provider but OpenAI
// has one): ignored lists each.
func openAIMessages(raw json.RawMessage, tools *toolMap) (string, []provider.Message, []string, error) {
	items, err := array("messages", raw)
	if err != nil {
		return "", nil, nil, err
	}
	if len(items) == 0 {
		return "", nil, nil, badField("messages", "send at least one message")
	}
	var system, ignored []string
	var out []provider.Message
	names := map[string]string{} // tool call id -> tool name
	for i, it := range items {
		path := fmt.Sprintf("messages[%d]", i)
		mf, err := object(path, it)
		if err != nil {
			return "", nil, nil, err
		}
		var role string
		if err := mf.take("role", &role); err != nil {
			return "", nil, nil, err
		}
		if mf.has("name") && role != "tool" {
			ignored = append(ignored, path+".name")
		}
		mf.skip("name")
		switch role {
		case "system", "developer":
			parts, err := openAIContent(path+".content", mf.raw("content"), false)
			if err == nil {
				err = textOnly(path+".content", parts)
			}
			if err != nil {
				return "", nil, nil, err
			}
			system = append(system, joinText(parts, "\n"))
		case "user":
			parts, err := openAIContent(path+".content", mf.raw("content"), false)
			if err != nil {
				return "", nil, nil, err
			}
			out = appendTurn(out, provider.RoleUser, parts)
		case "assistant":
			parts, err := openAIContent(path+".content", mf.raw("content"), true)
			if err != nil {
				return "", nil, nil, err
			}
			calls, err := openAIToolCalls(path+".tool_calls", mf.raw("tool_calls"), tools)
			if err != nil {
				return "", nil, nil, err
			}
			for _, c := range calls {
				names[c.ToolCall.ID] = c.ToolCall.Name
			}
			mf.skip("refusal", "audio", "annotations")
			if mf.has("function_call") {
				return "", nil, nil, badField(path+".function_call", "legacy function calls are not supported: send tool_calls")
			}
			out = appendTurn(out, provider.RoleAssistant, append(parts, calls...))
		case "tool":
			var id string
			if err := mf.take("tool_call_id", &id); err != nil {
				return "", nil, nil, err
			}
			if id == "" {
				return "", nil, nil, badField(path+".tool_call_id", "required: the id of the tool call this message answers")
			}
			parts, err := openAIContent(path+".content", mf.raw("content"), false)
			if err == nil {
				err = textOnly(path+".content", parts)
			}
			if err != nil {
				return "", nil, nil, err
			}
			res := provider.ToolResult{CallID: id, Name: names[id], Content: joinText(parts, "\n")}
			out = appendTurn(out, provider.RoleUser, []provider.Part{{Type: provider.PartToolResult, ToolResult: &res}})
		case "function":
			return "", nil, nil, badField(path+".role", "legacy function messages are not supported: send role tool with tool_call_id")
		case "":
			return "", nil, nil, badField(path+".role", "required")
		default:
			return "", nil, nil, badField(path+".role", "%q is not a role: write system, developer, user, assistant or tool", role)
		}
	}
	return strings.Join(nonEmpty(system), "\n\n"), out, ignored, nil
}

// openAIContent reads a message's content: a string, null, or text and
// image parts (and refusal parts on assistant turns, which are dropped).
func openAIContent(path string, raw json.RawMessage, assistant bool) ([]provider.Part, error) {
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
		switch {
		case typ == "text":
			if err := pf.take("text", &text); err != nil {
				return nil, err
			}
			if text != "" {
				out = append(out, provider.Part{Type: provider.PartText, Text: text})
			}
		case typ == "refusal" && assistant:
		case typ == "image_url" && !assistant:
			iraw := pf.raw("image_url")
			if iraw == nil {
				return nil, badField(p+".image_url", "required")
			}
			img, err := object(p+".image_url", iraw)
			if err != nil {
				return nil, err
			}
			var url string
			if err := img.take("url", &url); err != nil {
				return nil, err
			}
			img.skip("detail")
			part, err := imagePart(p+".image_url.url", url)
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case typ == "input_audio", typ == "file":
			return nil, badField(p+".type", "%s content is not supported by the gateway yet: send text", typ)
		default:
			return nil, badField(p+".type", "%q is not a content part type here: send text", typ)
		}
	}
	return out, nil
}

// openAIToolCalls reads an assistant turn's tool_calls: function calls,
// and custom tool calls, whose input text becomes their function's
// arguments.
func openAIToolCalls(path string, raw json.RawMessage, tools *toolMap) ([]provider.Part, error) {
	if raw == nil {
		return nil, nil
	}
	items, err := array(path, raw)
	if err != nil {
		return nil, err
	}
	var out []provider.Part
	for j, it := range items {
		p := fmt.Sprintf("%s[%d]", path, j)
		cf, err := object(p, it)
		if err != nil {
			return nil, err
		}
		var id, typ string
		if err := cf.take("id", &id); err != nil {
			return nil, err
		}
		if err := cf.take("type", &typ); err != nil {
			return nil, err
		}
		if typ == "" {
			typ = "function"
		}
		if typ != "function" && typ != "custom" {
			return nil, badField(p+".type", "%q tool calls are not supported: only function and custom calls are", typ)
		}
		if id == "" {
			return nil, badField(p+".id", "required")
		}
		fraw := cf.raw(typ)
		if fraw == nil {
			return nil, badField(p+"."+typ, "required")
		}
		fn, err := object(p+"."+typ, fraw)
		if err != nil {
			return nil, err
		}
		var name string
		if err := fn.take("name", &name); err != nil {
			return nil, err
		}
		if name == "" {
			return nil, badField(p+"."+typ+".name", "required")
		}
		var obj json.RawMessage
		if typ == "custom" {
			var input string
			if err := fn.take("input", &input); err != nil {
				return nil, err
			}
			obj = customArguments(input)
		} else {
			var args string
			if err := fn.take("arguments", &args); err != nil {
				return nil, err
			}
			if obj, err = argumentsObject(p+".function.arguments", args); err != nil {
				return nil, err
			}
		}
		out = append(out, provider.Part{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: id, Name: tools.wireName("", name), Arguments: obj}})
	}
	return out, nil
}

// argumentsObject checks that a tool call's arguments are a JSON object
// ("" means none).
func argumentsObject(path, args string) (json.RawMessage, error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`), nil
	}
	obj := json.RawMessage(args)
	if !json.Valid(obj) || obj[skipSpace(obj, 0)] != '{' {
		return nil, badField(path, "must be a JSON object encoded as a string")
	}
	return obj, nil
}

// appendTurn adds parts as a turn of role, merged into the previous turn
// when it has the same role.
func appendTurn(msgs []provider.Message, role provider.Role, parts []provider.Part) []provider.Message {
	if len(parts) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Parts = append(msgs[n-1].Parts, parts...)
		return msgs
	}
	return append(msgs, provider.Message{Role: role, Parts: parts})
}

func joinText(parts []provider.Part, sep string) string {
	var texts []string
	for _, p := range parts {
		if p.Type == provider.PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, sep)
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// Chat Completions response shapes.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   openAIUsage  `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

type chatMessage struct {
	Role        string         `json:"role"`
	Content     *string        `json:"content"`
	Refusal     *string        `json:"refusal"`
	ToolCalls   []chatToolCall `json:"tool_calls,omitempty"`
	Annotations []struct{}     `json:"annotations"`
}

type chatToolCall struct {
	Index    *int          `json:"index,omitempty"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function *chatFunction `json:"function,omitempty"`
	Custom   *chatCustom   `json:"custom,omitempty"`
}

type chatCustom struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

// chatCall renders a whole tool call: a function call, or a custom tool
// call when its function stands for a custom tool.
func chatCall(index *int, tc provider.ToolCall, tools *toolMap) chatToolCall {
	if ct := tools.client(tc.Name); ct.custom {
		return chatToolCall{Index: index, ID: tc.ID, Type: "custom", Custom: &chatCustom{Name: ct.name, Input: customText(tc.Arguments)}}
	}
	return chatToolCall{Index: index, ID: tc.ID, Type: "function", Function: &chatFunction{Name: tc.Name, Arguments: string(argsOrEmpty(tc.Arguments))}}
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the usage chunk, as OpenAI sends it.
	Usage *openAIUsage `json:"usage"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

type chunkDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

// completion renders a result as a Chat Completions response.
func completion(id string, created int64, res *provider.Result, tools *toolMap) chatCompletion {
	msg := chatMessage{Role: "assistant", Annotations: []struct{}{}}
	if res.Content != "" || len(res.ToolCalls) == 0 {
		c := res.Content
		msg.Content = &c
	}
	for _, tc := range res.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, chatCall(nil, tc, tools))
	}
	return chatCompletion{ID: "chatcmpl-" + id, Object: "chat.completion", Created: created, Model: res.Model,
		Choices: []chatChoice{{Index: 0, Message: msg, FinishReason: finishReason(res)}}, Usage: toOpenAIUsage(res.Usage)}
}

// chatCompletions serves POST /v1/chat/completions.
func (g *Gateway) chatCompletions(w http.ResponseWriter, r *http.Request) {
	p := protoOpenAI
	ctx := r.Context()
	id := requestID(r)
	idHeaders(w.Header(), id)
	cr, call, ok := admit(g, w, r, p, id, decodeChat)
	if !ok {
		return
	}
	if cr.stream {
		g.streamChat(w, r, call, id, cr)
		return
	}
	out, err := g.invoke(ctx, call, cr.key)
	if err != nil {
		writeFailure(w, r, p, err)
		return
	}
	servedHeaders(w.Header(), out.Provider, out.Model)
	if out.Native != nil {
		writeNative(w, r, out.Native, 0)
		return
	}
	g.unhonoured(w.Header(), &call.Request, out.Provider, out.Model)
	writeJSON(w, http.StatusOK, completion(id, g.opts.Now().Unix(), out.Result, cr.tools))
}

// streamChat serves a streamed Chat Completions request: chunks as the
// provider's arrive, tool-call argument fragments included, then the
// finish reason, the usage chunk when asked for, and [DONE]. A failure
// after the first byte ends the stream with an error object and no
// [DONE].
func (g *Gateway) streamChat(w http.ResponseWriter, r *http.Request, call orchestrator.Call, id string, cr *chatRequest) {
	ctx := r.Context()
	s, err := g.stream(ctx, call, cr.key)
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
	g.unhonoured(w.Header(), &call.Request, prov, model)
	out := newSSE(w)
	base := chatChunk{ID: "chatcmpl-" + id, Object: "chat.completion.chunk", Created: g.opts.Now().Unix(), Model: model}
	send := func(d chunkDelta, finish *string, usage *openAIUsage) error {
		c := base
		c.Choices = []chunkChoice{}
		if usage == nil {
			c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
		}
		c.Usage = usage
		return out.data(mustJSON(c))
	}
	empty := ""
	if send(chunkDelta{Role: "assistant", Content: &empty}, nil, nil) != nil {
		return
	}
	sentText := false
	args := map[int]*strings.Builder{} // tool index -> arguments sent
	// A custom tool's call goes out whole at the end: its input is the
	// text inside the function's JSON arguments.
	held := map[int]bool{}
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			err = &provider.Error{Kind: provider.KindNetwork, Diagnostic: provider.Diagnostic{Message: "the stream ended before its final chunk"}}
		}
		if err != nil {
			if !clientGone(ctx) {
				_ = out.data(mustJSON(openAIError(classify(ctx, err))))
			}
			return
		}
		if c.Text != "" {
			t := c.Text
			sentText = true
			if send(chunkDelta{Content: &t}, nil, nil) != nil {
				return
			}
		}
		if d := c.ToolCall; d != nil {
			if d.Name != "" && cr.tools.isCustom(d.Name) {
				held[d.Index] = true
			}
			if !held[d.Index] && send(chunkDelta{ToolCalls: []chatToolCall{toolDelta(d, args)}}, nil, nil) != nil {
				return
			}
		}
		if !c.Final {
			continue
		}
		res := c.Result
		if res == nil {
			res = &provider.Result{}
		}
		// What the provider did not stream (text, a whole tool call, the
		// arguments of a call that streamed none) goes out now.
		if !sentText && res.Content != "" {
			t := res.Content
			if send(chunkDelta{Content: &t}, nil, nil) != nil {
				return
			}
		}
		for i, tc := range res.ToolCalls {
			b, seen := args[i]
			switch {
			case cr.tools.isCustom(tc.Name):
				if send(chunkDelta{ToolCalls: []chatToolCall{chatCall(&i, tc, cr.tools)}}, nil, nil) != nil {
					return
				}
			case !seen:
				d := &provider.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
				if send(chunkDelta{ToolCalls: []chatToolCall{toolDelta(d, args)}}, nil, nil) != nil {
					return
				}
			case b.Len() == 0:
				a := string(tc.Arguments)
				if a == "" {
					a = "{}"
				}
				d := &provider.ToolCallDelta{Index: i, Arguments: a}
				if send(chunkDelta{ToolCalls: []chatToolCall{toolDelta(d, args)}}, nil, nil) != nil {
					return
				}
			}
		}
		fr := finishReason(res)
		if send(chunkDelta{}, &fr, nil) != nil {
			return
		}
		if cr.includeUsage {
			u := toOpenAIUsage(res.Usage)
			if send(chunkDelta{}, nil, &u) != nil {
				return
			}
		}
		_ = out.data([]byte("[DONE]"))
		return
	}
}

// toolDelta renders a tool-call fragment: the first fragment of a call
// carries its id, type and name.
func toolDelta(d *provider.ToolCallDelta, args map[int]*strings.Builder) chatToolCall {
	idx := d.Index
	tc := chatToolCall{Index: &idx, Function: &chatFunction{Arguments: d.Arguments}}
	b, seen := args[d.Index]
	if !seen {
		b = &strings.Builder{}
		args[d.Index] = b
		tc.ID, tc.Type, tc.Function.Name = d.ID, "function", d.Name
	}
	b.WriteString(d.Arguments)
	return tc
}

// outputLimit refuses an output limit below 1, as the OpenAI APIs do: 0
// does not mean "no limit" (leaving the field out does).
func outputLimit(field string, n int) error {
	if n < 1 {
		return badField(field, "must be at least 1, got %d: give the output token limit, or leave %s out for the model's maximum", n, field)
	}
	return nil
}
