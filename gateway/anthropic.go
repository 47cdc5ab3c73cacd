package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Messages parameters the gateway accepts without applying them, silently:
// they carry no meaning for the answer.
var anthropicQuiet = []string{"metadata", "service_tier", "inference_geo", "speed"}

// Messages parameters the gateway accepts without applying them, naming
// them in X-CortexBuild-Ignored-Params (refused with
// gateway.strict_params).
var anthropicIgnored = []string{"context_management", "container", "diagnostics", "mcp_servers"}

// messagesRequest is a decoded Messages (or count_tokens) request.
type messagesRequest struct {
	decoded
}

// forwardedBetas are the anthropic-beta values the gateway passes on to
// an Anthropic provider: each changes only what the provider does with a
// request the gateway can serve and relay (its answers keep their shape).
// Any other value is named in X-CortexBuild-Ignored-Params.
var forwardedBetas = []string{
	"context-1m-2025-08-07",
	"extended-cache-ttl-2025-04-11",
	"fine-grained-tool-streaming-2025-05-14",
	"prompt-caching-2024-07-31",
	"token-efficient-tools-2025-02-19",
}

// metaBeta is the request metadata the Anthropic adapter sends as
// anthropic-beta headers.
const metaBeta = "anthropic.beta"

// The Anthropic adapter's metadata keys of a reasoning part: a thinking
// block's signature, a redacted thinking block's data (JSON strings).
const (
	metaSignature = "anthropic.signature"
	metaRedacted  = "anthropic.redacted_thinking"
)

// betas takes the client's anthropic-beta header (values separated by
// commas, in one header or several): the values on forwardedBetas go to
// the call's metadata, the others are named as ignored.
func (mr *messagesRequest) betas(h http.Header) {
	var keep []string
	for _, v := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(v, ",") {
			b = strings.TrimSpace(b)
			switch {
			case b == "" || slices.Contains(keep, b):
			case slices.Contains(forwardedBetas, b):
				keep = append(keep, b)
			default:
				mr.ignoredHeaders = append(mr.ignoredHeaders, "anthropic-beta="+b)
			}
		}
	}
	if len(keep) > 0 {
		mr.req.Meta = provider.Metadata{metaBeta: mustJSON(keep)}
	}
}

// maxCacheMarks is how many blocks with cache_control the Messages API
// takes in one request.
const maxCacheMarks = 4

// cacheHint collects the cache_control marks of a request. A mark on a
// message block or a tool stays where the client put it (Part.Cache,
// ToolDef.Cache); a mark on a system block asks for the system prompt to
// be cached (PromptCache, with the longest lifetime marked there), since
// the system blocks reach the provider as one. marks counts them all.
type cacheHint struct {
	ttl   provider.PromptCache
	marks int
}

// take reads and counts the cache_control of the object at path and
// returns its lifetime, "" when there is none.
func (c *cacheHint) take(path string, f *fields) (provider.PromptCache, error) {
	raw := f.raw("cache_control")
	if raw == nil {
		return provider.PromptCacheOff, nil
	}
	cf, err := object(path+".cache_control", raw)
	if err != nil {
		return "", err
	}
	var typ, ttl string
	if err := cf.take("type", &typ); err != nil {
		return "", err
	}
	if err := cf.take("ttl", &ttl); err != nil {
		return "", err
	}
	c.marks++
	switch ttl {
	case "1h":
		return provider.PromptCache1h, nil
	case "", "5m":
		return provider.PromptCache5m, nil
	}
	return "", badField(strings.TrimPrefix(path+".cache_control.ttl", "."), "%q is not a cache lifetime: write 5m or 1h", ttl)
}

// system notes a mark on the system prompt.
func (c *cacheHint) system(ttl provider.PromptCache) { c.ttl = longerCache(c.ttl, ttl) }

// longerCache returns the longer of two cache lifetimes.
func longerCache(a, b provider.PromptCache) provider.PromptCache {
	if a == provider.PromptCache1h || b == provider.PromptCacheOff {
		return a
	}
	return b
}

// decodeMessages decodes and checks a Messages body; for count_tokens,
// max_tokens and stream are not expected.
func decodeMessages(body []byte, count bool) (*messagesRequest, error) {
	f, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	mr := &messagesRequest{}
	if err := f.take("model", &mr.model); err != nil {
		return nil, err
	}
	if f.has("thread") {
		// The SDKs' thread helpers (the TypeScript SDK's toolRunner
		// among them) send the whole conversation again, without thread,
		// on this error code.
		return nil, &failure{class: classBadRequest, param: "thread", errorCode: "thread_unsupported_request",
			msg: "thread: message threads are not supported by this gateway, which keeps no conversation: send the whole conversation in messages, without thread"}
	}
	if !count {
		if err := f.take("stream", &mr.stream); err != nil {
			return nil, err
		}
		var maxTokens *int
		if err := f.take("max_tokens", &maxTokens); err != nil {
			return nil, err
		}
		// The Messages API has no default output limit: it answers 400.
		switch {
		case maxTokens == nil:
			return nil, badField("max_tokens", "Field required: the Messages API takes the output limit from the caller")
		case *maxTokens < 0:
			return nil, badField("max_tokens", "must not be negative, got %d", *maxTokens)
		case *maxTokens == 0:
			return nil, badField("max_tokens", "Input should be greater than or equal to 1")
		}
		mr.req.MaxTokens = *maxTokens
	}
	var cache cacheHint
	// A top-level mark (automatic caching) marks the last block.
	auto, err := cache.take("", f)
	if err != nil {
		return nil, err
	}
	var system []string
	if raw := f.raw("system"); raw != nil {
		s, ttl, err := anthropicText("system", raw, &cache)
		if err != nil {
			return nil, err
		}
		cache.system(ttl)
		system = append(system, s)
	}
	if raw := f.raw("tools"); raw != nil {
		var dropped []string
		if mr.req.Tools, dropped, err = anthropicTools(raw, &cache); err != nil {
			return nil, err
		}
		mr.ignored = append(mr.ignored, dropped...)
	}
	if raw := f.raw("tool_choice"); raw != nil {
		if mr.req.ToolChoice, mr.req.DisableParallelToolCalls, err = anthropicToolChoice(raw); err != nil {
			return nil, err
		}
	}
	raw := f.raw("messages")
	if raw == nil {
		return nil, badField("messages", "required: send at least one message")
	}
	more, msgs, err := anthropicMessages(raw, &cache)
	if err != nil {
		return nil, err
	}
	if auto != provider.PromptCacheOff && len(msgs) > 0 {
		last := &msgs[len(msgs)-1]
		if n := len(last.Parts); n > 0 && last.Parts[n-1].Cache == provider.PromptCacheOff {
			last.Parts[n-1].Cache = auto
		} else {
			cache.marks-- // it falls on a block marked already
		}
	}
	if cache.marks > maxCacheMarks {
		return nil, badField("", "A maximum of %d blocks with cache_control may be provided. Found %d.", maxCacheMarks, cache.marks)
	}
	mr.req.System = strings.Join(nonEmpty(append(system, more...)), "\n\n")
	mr.req.Messages = msgs
	mr.req.PromptCache = cache.ttl
	// The gateway's own mark on the last tool goes when the client's marks
	// leave no room for it: say so.
	for _, d := range mr.req.CacheMarks(maxCacheMarks).Dropped {
		if d == "tools" {
			d = fmt.Sprintf("tools[%d]", len(mr.req.Tools)-1)
		}
		mr.ignored = append(mr.ignored, d+".cache_control")
	}
	if err := messagesSampling(f, &mr.req); err != nil {
		return nil, err
	}
	if raw := f.raw("output_format"); raw != nil {
		if mr.req.ResponseFormat, err = formatOfType("output_format", raw, ""); err != nil {
			return nil, err
		}
	}
	if raw := f.raw("output_config"); raw != nil {
		oc, err := object("output_config", raw)
		if err != nil {
			return nil, err
		}
		if fraw := oc.raw("format"); fraw != nil {
			if mr.req.ResponseFormat, err = formatOfType("output_config.format", fraw, ""); err != nil {
				return nil, err
			}
		}
		var effort *string
		if err := oc.take("effort", &effort); err != nil {
			return nil, err
		}
		if effort != nil {
			if mr.req.Reasoning, err = effortOf("output_config.effort", *effort); err != nil {
				return nil, err
			}
		}
		for _, k := range oc.unknown() {
			mr.ignored = append(mr.ignored, "output_config."+k)
		}
	}
	if raw := f.raw("thinking"); raw != nil {
		if err := messagesThinking(raw, &mr.req); err != nil {
			return nil, err
		}
	}
	f.skip(anthropicQuiet...)
	if count {
		f.skip("max_tokens", "stream")
	}
	mr.ignored = append(mr.ignored, f.present(anthropicIgnored...)...)
	mr.ignored = append(mr.ignored, f.unknown()...)
	slices.Sort(mr.ignored)
	return mr, nil
}

// messagesThinking reads thinking: {type: enabled, budget_tokens} (a
// budget of at least 1024, below max_tokens, as the API demands),
// {type: adaptive} (the depth left to output_config.effort or the
// provider) or {type: disabled}. It runs after output_config, whose effort
// it keeps.
func messagesThinking(raw json.RawMessage, req *provider.Request) error {
	tf, err := object("thinking", raw)
	if err != nil {
		return err
	}
	tf.skip("display")
	var typ string
	var budget *int
	if err := tf.take("type", &typ); err != nil {
		return err
	}
	if err := tf.take("budget_tokens", &budget); err != nil {
		return err
	}
	switch typ {
	case "disabled":
		req.Reasoning = nil
		return nil
	case "adaptive":
		if req.Reasoning == nil {
			req.Reasoning = &provider.Reasoning{}
		}
		return nil
	case "enabled":
	default:
		return badField("thinking.type", "%q is not a thinking type: send enabled, adaptive or disabled", typ)
	}
	switch {
	case budget == nil:
		return badField("thinking.budget_tokens", "Field required with type enabled")
	case *budget < provider.MinReasoningBudget:
		return badField("thinking.budget_tokens", "Input should be greater than or equal to %d, got %d", provider.MinReasoningBudget, *budget)
	case req.MaxTokens > 0 && *budget >= req.MaxTokens:
		return badField("thinking.budget_tokens", "must be less than max_tokens (%d), got %d", req.MaxTokens, *budget)
	}
	if req.Reasoning == nil {
		req.Reasoning = &provider.Reasoning{}
	}
	req.Reasoning.Budget = *budget
	return nil
}

// messagesSampling decodes temperature and top_p (0 to 1 in this
// protocol), top_k and stop_sequences.
func messagesSampling(f *fields, req *provider.Request) error {
	if err := takeFloat(f, "temperature", 1, &req.Temperature); err != nil {
		return err
	}
	if err := takeFloat(f, "top_p", 1, &req.TopP); err != nil {
		return err
	}
	if err := takeTopK(f, &req.TopK); err != nil {
		return err
	}
	return f.take("stop_sequences", &req.Stop)
}

// anthropicText reads a system prompt or a tool result's content: a
// string, or text blocks joined by blank lines. ttl is the longest
// lifetime of the blocks' cache marks.
func anthropicText(path string, raw json.RawMessage, cache *cacheHint) (text string, ttl provider.PromptCache, err error) {
	s, items, err := stringOrParts(path, raw)
	if err != nil || items == nil {
		return s, "", err
	}
	var texts []string
	for j, it := range items {
		p := fmt.Sprintf("%s[%d]", path, j)
		bf, err := object(p, it)
		if err != nil {
			return "", "", err
		}
		var typ, text string
		if err := bf.take("type", &typ); err != nil {
			return "", "", err
		}
		if typ != "text" {
			return "", "", badField(p+".type", "%q blocks are not supported here by the gateway: send text", typ)
		}
		if err := bf.take("text", &text); err != nil {
			return "", "", err
		}
		mark, err := cache.take(p, bf)
		if err != nil {
			return "", "", err
		}
		ttl = longerCache(ttl, mark)
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n\n"), ttl, nil
}

// anthropicTools decodes tools: [{name, description, input_schema,
// cache_control}]. Server tools (web search, code execution, …), which the
// provider itself would run, are dropped and returned as ignored: the
// gateway cannot promise them on every provider.
func anthropicTools(raw json.RawMessage, cache *cacheHint) ([]provider.ToolDef, []string, error) {
	items, err := array("tools", raw)
	if err != nil {
		return nil, nil, err
	}
	var out []provider.ToolDef
	var dropped []string
	for i, it := range items {
		path := fmt.Sprintf("tools[%d]", i)
		tf, err := object(path, it)
		if err != nil {
			return nil, nil, err
		}
		var typ string
		if err := tf.take("type", &typ); err != nil {
			return nil, nil, err
		}
		if typ != "" && typ != "custom" {
			dropped = append(dropped, path+"("+typ+")")
			continue
		}
		var td provider.ToolDef
		if err := tf.take("name", &td.Name); err != nil {
			return nil, nil, err
		}
		if td.Name == "" {
			return nil, nil, badField(path+".name", "required")
		}
		if err := tf.take("description", &td.Description); err != nil {
			return nil, nil, err
		}
		if err := tf.take("strict", &td.Strict); err != nil {
			return nil, nil, err
		}
		td.InputSchema = keep(schemaOrEmpty(tf.raw("input_schema")))
		if _, err := object(path+".input_schema", td.InputSchema); err != nil {
			return nil, nil, err
		}
		if td.Cache, err = cache.take(path, tf); err != nil {
			return nil, nil, err
		}
		out = append(out, td)
	}
	return out, dropped, nil
}

// anthropicToolChoice decodes {type: auto|any|tool|none, name,
// disable_parallel_tool_use}.
func anthropicToolChoice(raw json.RawMessage) (choice provider.ToolChoice, serial bool, err error) {
	tc, err := object("tool_choice", raw)
	if err != nil {
		return "", false, err
	}
	var typ, name string
	if err := tc.take("type", &typ); err != nil {
		return "", false, err
	}
	if err := tc.take("name", &name); err != nil {
		return "", false, err
	}
	if err := tc.take("disable_parallel_tool_use", &serial); err != nil {
		return "", false, err
	}
	switch typ {
	case "auto":
		return provider.ToolChoiceAuto, serial, nil
	case "any":
		return provider.ToolChoiceRequired, serial, nil
	case "none":
		return provider.ToolChoiceNone, serial, nil
	case "tool":
		if name == "" {
			return "", false, badField("tool_choice.name", "required with type tool")
		}
		return provider.ToolChoice(name), serial, nil
	}
	return "", false, badField("tool_choice.type", "%q is not a tool choice: write auto, any, tool or none", typ)
}

// anthropicMessages turns messages into the conversation (and system text
// from system turns).
func anthropicMessages(raw json.RawMessage, cache *cacheHint) ([]string, []provider.Message, error) {
	items, err := array("messages", raw)
	if err != nil {
		return nil, nil, err
	}
	if len(items) == 0 {
		return nil, nil, badField("messages", "send at least one message")
	}
	var system []string
	var out []provider.Message
	names := map[string]string{}
	for i, it := range items {
		path := fmt.Sprintf("messages[%d]", i)
		mf, err := object(path, it)
		if err != nil {
			return nil, nil, err
		}
		var role string
		if err := mf.take("role", &role); err != nil {
			return nil, nil, err
		}
		content := mf.raw("content")
		switch role {
		case "system":
			s, ttl, err := anthropicText(path+".content", content, cache)
			if err != nil {
				return nil, nil, err
			}
			cache.system(ttl)
			system = append(system, s)
		case "user", "assistant":
			parts, err := anthropicBlocks(path+".content", content, role == "assistant", names, cache)
			if err != nil {
				return nil, nil, err
			}
			out = appendTurn(out, provider.Role(role), parts)
		case "":
			return nil, nil, badField(path+".role", "required")
		default:
			return nil, nil, badField(path+".role", "%q is not a role: write user or assistant", role)
		}
	}
	return system, out, nil
}

// anthropicBlocks reads a turn's content: a string or content blocks.
func anthropicBlocks(path string, raw json.RawMessage, assistant bool, names map[string]string, cache *cacheHint) ([]provider.Part, error) {
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
		bf, err := object(p, it)
		if err != nil {
			return nil, err
		}
		var typ string
		if err := bf.take("type", &typ); err != nil {
			return nil, err
		}
		mark, err := cache.take(p, bf)
		if err != nil {
			return nil, err
		}
		switch {
		case typ == "text":
			var text string
			if err := bf.take("text", &text); err != nil {
				return nil, err
			}
			if text != "" {
				out = append(out, provider.Part{Type: provider.PartText, Text: text, Cache: mark})
			}
		case typ == "tool_use" && assistant:
			var id, name string
			if err := bf.take("id", &id); err != nil {
				return nil, err
			}
			if err := bf.take("name", &name); err != nil {
				return nil, err
			}
			if id == "" || name == "" {
				return nil, badField(p, "a tool_use block needs an id and a name")
			}
			input := keep(bf.raw("input"))
			if input == nil {
				input = json.RawMessage(`{}`)
			}
			if _, err := object(p+".input", input); err != nil {
				return nil, err
			}
			names[id] = name
			out = append(out, provider.Part{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: id, Name: name, Arguments: input}, Cache: mark})
		case typ == "tool_result" && !assistant:
			var id string
			var isErr bool
			if err := bf.take("tool_use_id", &id); err != nil {
				return nil, err
			}
			if id == "" {
				return nil, badField(p+".tool_use_id", "required: the id of the tool_use block this result answers")
			}
			if err := bf.take("is_error", &isErr); err != nil {
				return nil, err
			}
			text, inner, err := anthropicText(p+".content", bf.raw("content"), cache)
			if err != nil {
				return nil, err
			}
			res := provider.ToolResult{CallID: id, Name: names[id], Content: text, IsError: isErr}
			out = append(out, provider.Part{Type: provider.PartToolResult, ToolResult: &res, Cache: longerCache(mark, inner)})
		case (typ == "thinking" || typ == "redacted_thinking") && assistant:
			// Earlier reasoning goes back with its signature (or redacted
			// data) as the Anthropic adapter's metadata; an adapter for
			// another provider, which cannot check it, leaves it out.
			var text, sig, data string
			for _, kv := range []struct {
				key string
				dst *string
			}{{"thinking", &text}, {"signature", &sig}, {"data", &data}} {
				if err := bf.take(kv.key, kv.dst); err != nil {
					return nil, err
				}
			}
			part := provider.Part{Type: provider.PartReasoning, Text: text}
			switch {
			case typ == "redacted_thinking" && data == "":
				return nil, badField(p+".data", "required: the redacted thinking as the API gave it")
			case typ == "redacted_thinking":
				part.Meta = provider.Metadata{metaRedacted: mustJSON(data)}
			case sig != "":
				part.Meta = provider.Metadata{metaSignature: mustJSON(sig)}
			}
			out = append(out, part)
		case typ == "image" && !assistant:
			sraw := bf.raw("source")
			if sraw == nil {
				return nil, badField(p+".source", "required")
			}
			sf, err := object(p+".source", sraw)
			if err != nil {
				return nil, err
			}
			var styp, mediaType, data, url string
			for _, kv := range []struct {
				key string
				dst *string
			}{{"type", &styp}, {"media_type", &mediaType}, {"data", &data}, {"url", &url}} {
				if err := sf.take(kv.key, kv.dst); err != nil {
					return nil, err
				}
			}
			im := &provider.Image{URL: url}
			switch styp {
			case "url":
			case "base64":
				b, err := base64.StdEncoding.DecodeString(data)
				if err != nil {
					return nil, badField(p+".source.data", "does not decode as base64: %v", err)
				}
				im = &provider.Image{Data: b, MediaType: mediaType}
			default:
				return nil, badField(p+".source.type", "%q image sources are not supported by the gateway: send base64 or url", styp)
			}
			part, err := imageOf(p+".source", im)
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case typ == "document", typ == "search_result":
			return nil, badField(p+".type", "%s blocks are not supported by the gateway yet: send text", typ)
		default:
			return nil, badField(p+".type", "%q blocks are not supported in %s turns by the gateway", typ, map[bool]string{true: "assistant", false: "user"}[assistant])
		}
	}
	return out, nil
}

// Messages response shapes.
type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type string  `json:"type"`
	Text *string `json:"text,omitempty"`
	// thinking and redacted_thinking
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

func textBlock(s string) anthropicBlock { return anthropicBlock{Type: "text", Text: &s} }

// thinkingBlock renders a reasoning part: a thinking block with the
// Anthropic signature it carries ("" for another provider's reasoning,
// which a client sends back to no effect), or a redacted_thinking block.
func thinkingBlock(p provider.Part) anthropicBlock {
	var data, sig string
	if raw, ok := p.Meta[metaRedacted]; ok && json.Unmarshal(raw, &data) == nil {
		return anthropicBlock{Type: "redacted_thinking", Data: data}
	}
	if raw, ok := p.Meta[metaSignature]; ok {
		_ = json.Unmarshal(raw, &sig)
	}
	text := p.Text
	return anthropicBlock{Type: "thinking", Thinking: &text, Signature: &sig}
}

func toolUseBlock(tc provider.ToolCall, input json.RawMessage) anthropicBlock {
	return anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input}
}

func argsOrEmpty(a json.RawMessage) json.RawMessage {
	if len(a) == 0 {
		return json.RawMessage(`{}`)
	}
	return a
}

// message renders a result as a Messages response, its blocks in the
// order the provider gave them.
func message(id string, res *provider.Result) anthropicMessage {
	m := anthropicMessage{ID: "msg_" + id, Type: "message", Role: "assistant", Model: res.Model, Content: []anthropicBlock{}, Usage: toAnthropicUsage(res.Usage)}
	sr := stopReason(res)
	m.StopReason = &sr
	done := map[string]bool{}
	text := false
	for _, p := range res.Parts {
		switch {
		case p.Type == provider.PartText && p.Text != "":
			m.Content = append(m.Content, textBlock(p.Text))
			text = true
		case p.Type == provider.PartReasoning:
			m.Content = append(m.Content, thinkingBlock(p))
		case p.Type == provider.PartToolCall && p.ToolCall != nil:
			m.Content = append(m.Content, toolUseBlock(*p.ToolCall, argsOrEmpty(p.ToolCall.Arguments)))
			done[p.ToolCall.ID] = true
		}
	}
	if !text && res.Content != "" {
		m.Content = append([]anthropicBlock{textBlock(res.Content)}, m.Content...)
	}
	for _, tc := range res.ToolCalls {
		if !done[tc.ID] {
			m.Content = append(m.Content, toolUseBlock(tc, argsOrEmpty(tc.Arguments)))
		}
	}
	return m
}

// messages serves POST /v1/messages.
func (g *Gateway) messages(w http.ResponseWriter, r *http.Request) {
	p := protoAnthropic
	ctx := r.Context()
	id := requestID(r)
	idHeaders(w.Header(), id)
	mr, call, ok := admit(g, w, r, p, id, func(b []byte) (*messagesRequest, error) {
		mr, err := decodeMessages(b, false)
		if err == nil {
			mr.betas(r.Header)
		}
		return mr, err
	})
	if !ok {
		return
	}
	if mr.stream {
		g.streamMessages(w, r, call, id, mr.key)
		return
	}
	out, err := g.invoke(ctx, call, mr.key)
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
	writeJSON(w, http.StatusOK, message(id, out.Result))
}

// countTokens serves POST /v1/messages/count_tokens: the prompt counted
// offline for the provider the call would be routed to. Nothing is sent
// to a provider.
func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request) {
	p := protoAnthropic
	ctx := r.Context()
	_, call, ok := decodeCall(g, w, r, p, func(b []byte) (*messagesRequest, error) { return decodeMessages(b, true) })
	if !ok {
		return
	}
	if err := call.Request.Validate(); err != nil {
		p.writeError(w, r, classify(ctx, err))
		return
	}
	// An Anthropic provider counts itself, for free: relayed as sent.
	if c, ok := g.opts.Orchestrator.(interface {
		CountTokens(context.Context, orchestrator.Call) (*provider.NativeReply, bool, error)
	}); ok && call.Request.Native != nil {
		rep, relayed, err := c.CountTokens(ctx, call)
		switch {
		case relayed && err != nil:
			writeFailure(w, r, p, err)
			return
		case relayed:
			servedHeaders(w.Header(), "", call.Request.Model)
			writeNative(w, r, rep, 0)
			return
		}
	}
	prov := ""
	tr := g.opts.Orchestrator.Route(ctx, call)
	if kept := tr.Kept(); len(kept) > 0 {
		prov = kept[0].Provider
		call.Request.Model, call.Request.Tier = kept[0].Model, kept[0].Tier
	}
	writeJSON(w, http.StatusOK, map[string]int64{"input_tokens": g.opts.CountTokens(prov, &call.Request)})
}

// streamMessages serves a streamed Messages request with the Messages
// event sequence: message_start, one block at a time (text deltas,
// tool_use with input_json_delta fragments), message_delta with the stop
// reason and the usage, message_stop. A failure after the first byte ends
// the stream with an error event, never a message_stop.
func (g *Gateway) streamMessages(w http.ResponseWriter, r *http.Request, call orchestrator.Call, id, key string) {
	ctx := r.Context()
	s, err := g.stream(ctx, call, key)
	if err != nil {
		writeFailure(w, r, protoAnthropic, err)
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
	st := &blockStream{out: newSSE(w), open: -1, openTool: -1, tools: map[int]bool{}, args: map[int]int{}}
	start := anthropicMessage{ID: "msg_" + id, Type: "message", Role: "assistant", Model: model, Content: []anthropicBlock{}}
	if u := s.StartUsage(); u != nil {
		// What the provider reported before the answer: the input and
		// cache counts (message_delta carries the final output count).
		start.Usage = toAnthropicUsage(*u)
	}
	if st.out.event("message_start", mustJSON(map[string]any{"type": "message_start", "message": start})) != nil {
		return
	}
	if st.out.event("ping", []byte(`{"type": "ping"}`)) != nil {
		return
	}
	failWith := func(err error) {
		if !clientGone(ctx) {
			_ = st.out.event("error", mustJSON(anthropicError(nil, classify(ctx, err))))
		}
	}
	relay(s, st, failWith)
}

// errInterleaved: a provider sent a fragment of a tool call after another
// call had started, which the Messages event sequence cannot express once
// the earlier block is closed.
var errInterleaved = &provider.Error{Kind: provider.KindServer, Diagnostic: provider.Diagnostic{Message: "the provider interleaved the fragments of two tool calls, which a Messages stream cannot carry; retry without streaming"}}

// blockStream writes the content blocks of a Messages stream, one open at
// a time.
type blockStream struct {
	out      *sse
	next     int          // index of the next block
	open     int          // the open block, -1 when none
	openTool int          // the provider's index of the open tool call, -1 for text
	tools    map[int]bool // tool calls that got a block
	args     map[int]int  // bytes of arguments sent per tool call
	sentText bool
	thinking bool // the open block is a thinking block
}

func (b *blockStream) closeOpen() error {
	if b.open < 0 {
		return nil
	}
	err := b.out.event("content_block_stop", mustJSON(map[string]any{"type": "content_block_stop", "index": b.open}))
	b.open, b.openTool, b.thinking = -1, -1, false
	return err
}

func (b *blockStream) startBlock(block anthropicBlock) error {
	if err := b.closeOpen(); err != nil {
		return err
	}
	b.open = b.next
	b.next++
	return b.out.event("content_block_start", mustJSON(map[string]any{"type": "content_block_start", "index": b.open, "content_block": block}))
}

func (b *blockStream) delta(d map[string]any) error {
	return b.out.event("content_block_delta", mustJSON(map[string]any{"type": "content_block_delta", "index": b.open, "delta": d}))
}

// reasoning streams thinking as the API does: a thinking block, its text
// in thinking_delta events, then its signature in a signature_delta.
// Metadata of another provider's reasoning has no place here.
func (b *blockStream) reasoning(t string, meta provider.Metadata) error {
	var sig string
	if raw, ok := meta[metaSignature]; ok {
		_ = json.Unmarshal(raw, &sig)
	}
	if t == "" && sig == "" {
		return nil
	}
	if !b.thinking {
		empty := provider.Part{Type: provider.PartReasoning}
		if err := b.startBlock(thinkingBlock(empty)); err != nil {
			return err
		}
		b.thinking = true
	}
	if t != "" {
		if err := b.delta(map[string]any{"type": "thinking_delta", "thinking": t}); err != nil {
			return err
		}
	}
	if sig != "" {
		return b.delta(map[string]any{"type": "signature_delta", "signature": sig})
	}
	return nil
}

func (b *blockStream) text(t string) error {
	if b.open < 0 || b.openTool >= 0 || b.thinking {
		if err := b.startBlock(textBlock("")); err != nil {
			return err
		}
	}
	b.sentText = true
	return b.delta(map[string]any{"type": "text_delta", "text": t})
}

func (b *blockStream) tool(d *provider.ToolCallDelta) error {
	if !b.tools[d.Index] {
		b.tools[d.Index] = true
		if err := b.startBlock(toolUseBlock(provider.ToolCall{ID: d.ID, Name: d.Name}, json.RawMessage(`{}`))); err != nil {
			return err
		}
		b.openTool = d.Index
	} else if b.openTool != d.Index {
		return errInterleaved
	}
	if d.Arguments == "" {
		return nil
	}
	b.args[d.Index] += len(d.Arguments)
	return b.delta(map[string]any{"type": "input_json_delta", "partial_json": d.Arguments})
}

// finish sends what the provider did not stream, closes the last block
// and ends the message with its stop reason and usage.
func (b *blockStream) finish(res *provider.Result) error {
	if !b.sentText && res.Content != "" {
		if err := b.text(res.Content); err != nil {
			return err
		}
	}
	for i, tc := range res.ToolCalls {
		switch {
		case !b.tools[i]:
			if err := b.tool(&provider.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(argsOrEmpty(tc.Arguments))}); err != nil {
				return err
			}
		case b.args[i] == 0 && b.openTool == i && len(tc.Arguments) > 0 && string(tc.Arguments) != "{}":
			if err := b.tool(&provider.ToolCallDelta{Index: i, Arguments: string(tc.Arguments)}); err != nil {
				return err
			}
		}
	}
	if err := b.closeOpen(); err != nil {
		return err
	}
	sr := stopReason(res)
	md := map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": sr, "stop_sequence": nil}, "usage": toAnthropicUsage(res.Usage)}
	if err := b.out.event("message_delta", mustJSON(md)); err != nil {
		return err
	}
	return b.out.event("message_stop", []byte(`{"type":"message_stop"}`))
}
