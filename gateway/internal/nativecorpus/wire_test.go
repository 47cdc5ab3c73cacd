package nativecorpus_test

// The capture server's answers, in each API's own JSON (field order as the
// APIs send it) and SSE framing.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// obj is a JSON object that keeps its keys in the order given.
type obj []kv

type kv struct {
	k string
	v any
}

// o builds an obj from key, value pairs.
func o(pairs ...any) obj {
	if len(pairs)%2 != 0 {
		panic("o: odd number of arguments")
	}
	m := make(obj, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		m = append(m, kv{pairs[i].(string), pairs[i+1]})
	}
	return m
}

func (m obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(marshal(p.k))
		b.WriteByte(':')
		b.Write(marshal(p.v))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// get returns the value of key k, nil when absent.
func (m obj) get(k string) any {
	for _, p := range m {
		if p.k == k {
			return p.v
		}
	}
	return nil
}

// with returns a copy of m with k set to v (replaced in place, or added).
func (m obj) with(k string, v any) obj {
	out := append(obj(nil), m...)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, kv{k, v})
}

// marshal encodes v compactly with <, > and & left literal, as the APIs do.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("marshal: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// blob is n bytes of deterministic pseudo-random base64 derived from seed:
// the shape of a thinking signature or an encrypted reasoning item.
func blob(seed string, n int) string {
	var raw []byte
	h := sha256.Sum256([]byte(seed))
	for len(raw) < n*3/4+3 {
		raw = append(raw, h[:]...)
		h = sha256.Sum256(h[:])
	}
	return base64.StdEncoding.EncodeToString(raw)[:n]
}

// urlBlob is blob in the URL-safe alphabet (a Fernet token's).
func urlBlob(seed string, n int) string {
	return strings.NewReplacer("+", "-", "/", "_").Replace(blob(seed, n))
}

// ident is a deterministic identifier: prefix and base62-ish characters.
func ident(prefix, seed string, n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	h := sha256.Sum256([]byte(seed))
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		if i > 0 && i%32 == 0 {
			h = sha256.Sum256(h[:])
		}
		b.WriteByte(alphabet[int(h[i%32])%len(alphabet)])
	}
	return b.String()
}

// hexID is a deterministic lowercase hex identifier of n digits.
func hexID(seed string, n int) string {
	h := sha256.Sum256([]byte(seed))
	return fmt.Sprintf("%x", h[:])[:n]
}

// uuid is a deterministic UUID-shaped string.
func uuid(seed string) string {
	h := hexID(seed, 32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// chunks cuts s into pieces of about n bytes on rune boundaries, the first
// one shorter, as streamed deltas look.
func chunks(s string, n int) []string {
	var out []string
	first := true
	for len(s) > 0 {
		k := n
		if first {
			k = max(1, n/3)
			first = false
		}
		if k >= len(s) {
			out = append(out, s)
			break
		}
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// padding is how many spaces the Anthropic API puts before the closing
// brace of a stream event (it varies per event; never on ping).
func padding(seed string, i int) int {
	h := sha256.Sum256([]byte(fmt.Sprint(seed, i)))
	return int(binary.BigEndian.Uint16(h[:2]) % 16)
}

// pad inserts n spaces before the closing brace of a JSON object.
func pad(data []byte, n int) []byte {
	if n == 0 || len(data) == 0 || data[len(data)-1] != '}' {
		return data
	}
	out := append([]byte(nil), data[:len(data)-1]...)
	out = append(out, bytes.Repeat([]byte{' '}, n)...)
	return append(out, '}')
}

// ---- Anthropic Messages ----

// aMessage is an assistant message of the Messages API.
type aMessage struct {
	id, model string
	content   []obj
	stop      string
	in, out   int // input and output tokens
	cacheRead int
	searches  int // usage.server_tool_use.web_search_requests
	extra     obj // more top-level fields (context_management, …)
}

func (m aMessage) usage(output int, final bool) obj {
	u := o("input_tokens", m.in, "cache_creation_input_tokens", 0, "cache_read_input_tokens", m.cacheRead,
		"cache_creation", o("ephemeral_5m_input_tokens", 0, "ephemeral_1h_input_tokens", 0),
		"output_tokens", output)
	if final && m.searches > 0 {
		u = append(u, kv{"server_tool_use", o("web_search_requests", m.searches, "web_fetch_requests", 0)})
	}
	return append(u, kv{"service_tier", "standard"}, kv{"inference_geo", "global"})
}

// json is the unary answer.
func (m aMessage) json() []byte {
	content := m.content
	if content == nil {
		content = []obj{}
	}
	msg := o("model", m.model, "id", m.id, "type", "message", "role", "assistant", "content", content,
		"stop_reason", m.stop, "stop_sequence", nil, "stop_details", nil, "usage", m.usage(m.out, true))
	return marshal(append(msg, m.extra...))
}

// events is the streamed answer: message_start, a ping, per block its
// start, deltas and stop, message_delta with the cumulative usage,
// message_stop; each event padded as the API pads them.
func (m aMessage) events() [][]byte {
	var evs [][]byte
	add := func(name string, v any) {
		data := pad(marshal(v), padding(m.id, len(evs)))
		evs = append(evs, []byte("event: "+name+"\ndata: "+string(data)+"\n\n"))
	}
	add("message_start", o("type", "message_start", "message", o("model", m.model, "id", m.id, "type", "message",
		"role", "assistant", "content", []obj{}, "stop_reason", nil, "stop_sequence", nil, "stop_details", nil,
		"usage", m.usage(1, false))))
	evs = append(evs, []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
	for i, b := range m.content {
		start, deltas := streamBlock(b)
		add("content_block_start", o("type", "content_block_start", "index", i, "content_block", start))
		for _, d := range deltas {
			add("content_block_delta", o("type", "content_block_delta", "index", i, "delta", d))
		}
		add("content_block_stop", o("type", "content_block_stop", "index", i))
	}
	u := o("input_tokens", m.in, "cache_creation_input_tokens", 0, "cache_read_input_tokens", m.cacheRead, "output_tokens", m.out)
	if m.searches > 0 {
		u = append(u, kv{"server_tool_use", o("web_search_requests", m.searches, "web_fetch_requests", 0)})
	}
	delta := o("type", "message_delta", "delta", o("stop_reason", m.stop, "stop_sequence", nil, "stop_details", nil), "usage", u)
	if cm := m.extra.get("context_management"); cm != nil {
		delta = append(delta, kv{"context_management", cm})
	}
	add("message_delta", delta)
	add("message_stop", o("type", "message_stop"))
	return evs
}

// streamBlock splits a content block into its content_block_start and its
// deltas.
func streamBlock(b obj) (start obj, deltas []obj) {
	switch b.get("type") {
	case "text":
		start = o("type", "text", "text", "")
		cites, _ := b.get("citations").([]obj)
		if cites != nil {
			start = append(start, kv{"citations", []obj{}})
		}
		for _, c := range cites {
			deltas = append(deltas, o("type", "citations_delta", "citation", c))
		}
		for _, c := range chunks(b.get("text").(string), 18) {
			deltas = append(deltas, o("type", "text_delta", "text", c))
		}
	case "thinking":
		start = o("type", "thinking", "thinking", "", "signature", "")
		if t := b.get("thinking").(string); t != "" {
			for _, c := range chunks(t, 24) {
				deltas = append(deltas, o("type", "thinking_delta", "thinking", c))
			}
		}
		deltas = append(deltas, o("type", "signature_delta", "signature", b.get("signature")))
	case "tool_use", "server_tool_use":
		start = b.with("input", o())
		deltas = append(deltas, o("type", "input_json_delta", "partial_json", ""))
		for _, c := range chunks(string(marshal(b.get("input"))), 14) {
			deltas = append(deltas, o("type", "input_json_delta", "partial_json", c))
		}
	default: // web_search_tool_result, redacted_thinking, …: whole in the start
		start = b
	}
	return start, deltas
}

func aText(text string) obj { return o("type", "text", "text", text) }

func aThinking(seed, text string) obj {
	return o("type", "thinking", "thinking", text, "signature", blob("sig"+seed, 344))
}

func aToolUse(id, name string, input obj) obj {
	return o("type", "tool_use", "id", id, "name", name, "input", input)
}

// ---- OpenAI Responses ----

// rResponse is a Responses API answer to req (whose settings it echoes).
type rResponse struct {
	id, model string
	created   int64
	output    []obj
	in, out   int
	cached    int
	reasoning int // output tokens spent reasoning
	req       map[string]json.RawMessage
}

// echo is the request's field k, or def when absent.
func (r rResponse) echo(k string, def any) any {
	if v, ok := r.req[k]; ok {
		return v
	}
	return def
}

func (r rResponse) object(status string, output []obj, usage any) obj {
	tier := "default"
	if v, ok := r.req["service_tier"]; ok {
		var s string
		_ = json.Unmarshal(v, &s)
		if s == "priority" || s == "flex" {
			tier = s
		}
	}
	var completedAt any
	if status == "completed" {
		completedAt = r.created + 3
	}
	if output == nil {
		output = []obj{}
	}
	return o("id", r.id, "object", "response", "created_at", r.created, "status", status, "background", false,
		"completed_at", completedAt, "error", nil, "incomplete_details", nil, "instructions", r.echo("instructions", nil),
		"max_output_tokens", r.echo("max_output_tokens", nil), "max_tool_calls", nil, "model", r.model,
		"output", output, "parallel_tool_calls", r.echo("parallel_tool_calls", true),
		"previous_response_id", r.echo("previous_response_id", nil), "prompt_cache_key", r.echo("prompt_cache_key", nil),
		"prompt_cache_retention", nil, "reasoning", r.echo("reasoning", o("effort", "medium", "summary", nil)),
		"safety_identifier", nil, "service_tier", tier, "store", r.echo("store", true), "temperature", 1.0,
		"text", o("format", o("type", "text"), "verbosity", "medium"), "tool_choice", r.echo("tool_choice", "auto"),
		"tools", r.echo("tools", []obj{}), "top_logprobs", 0, "top_p", 1.0, "truncation", "disabled",
		"usage", usage, "user", nil, "metadata", o())
}

func (r rResponse) usage() obj {
	return o("input_tokens", r.in, "input_tokens_details", o("cached_tokens", r.cached), "output_tokens", r.out,
		"output_tokens_details", o("reasoning_tokens", r.reasoning), "total_tokens", r.in+r.out)
}

func (r rResponse) json() []byte { return marshal(r.object("completed", r.output, r.usage())) }

// events is the streamed answer, with named events and sequence numbers.
func (r rResponse) events() [][]byte {
	var evs [][]byte
	add := func(ev obj) {
		ev = append(ev, kv{"sequence_number", len(evs)})
		evs = append(evs, []byte("event: "+ev[0].v.(string)+"\ndata: "+string(marshal(ev))+"\n\n"))
	}
	add(o("type", "response.created", "response", r.object("in_progress", nil, nil)))
	add(o("type", "response.in_progress", "response", r.object("in_progress", nil, nil)))
	for i, item := range r.output {
		id := item.get("id")
		switch item.get("type") {
		case "reasoning":
			add(o("type", "response.output_item.added", "output_index", i, "item", o("id", id, "type", "reasoning", "summary", []obj{})))
			sums, _ := item.get("summary").([]obj)
			for j, s := range sums {
				text := s.get("text").(string)
				add(o("type", "response.reasoning_summary_part.added", "item_id", id, "output_index", i, "part", o("type", "summary_text", "text", ""), "summary_index", j))
				for _, c := range chunks(text, 20) {
					add(o("type", "response.reasoning_summary_text.delta", "delta", c, "item_id", id, "output_index", i, "summary_index", j, "obfuscation", hexID(c, 6)))
				}
				add(o("type", "response.reasoning_summary_text.done", "item_id", id, "output_index", i, "summary_index", j, "text", text))
				add(o("type", "response.reasoning_summary_part.done", "item_id", id, "output_index", i, "part", s, "summary_index", j))
			}
		case "message":
			add(o("type", "response.output_item.added", "output_index", i, "item", item.with("status", "in_progress").with("content", []obj{})))
			for j, part := range item.get("content").([]obj) {
				text := part.get("text").(string)
				add(o("type", "response.content_part.added", "content_index", j, "item_id", id, "output_index", i, "part", o("type", "output_text", "annotations", []obj{}, "logprobs", []obj{}, "text", "")))
				for _, c := range chunks(text, 16) {
					add(o("type", "response.output_text.delta", "content_index", j, "delta", c, "item_id", id, "logprobs", []obj{}, "obfuscation", hexID(c, 8), "output_index", i))
				}
				anns, _ := part.get("annotations").([]obj)
				for k, a := range anns {
					add(o("type", "response.output_text.annotation.added", "annotation", a, "annotation_index", k, "content_index", j, "item_id", id, "output_index", i))
				}
				add(o("type", "response.output_text.done", "content_index", j, "item_id", id, "logprobs", []obj{}, "output_index", i, "text", text))
				add(o("type", "response.content_part.done", "content_index", j, "item_id", id, "output_index", i, "part", part))
			}
		case "function_call":
			args := item.get("arguments").(string)
			add(o("type", "response.output_item.added", "output_index", i, "item", item.with("status", "in_progress").with("arguments", "")))
			for _, c := range chunks(args, 12) {
				add(o("type", "response.function_call_arguments.delta", "delta", c, "item_id", id, "obfuscation", hexID(c, 8), "output_index", i))
			}
			add(o("type", "response.function_call_arguments.done", "arguments", args, "item_id", id, "output_index", i))
		case "custom_tool_call":
			input := item.get("input").(string)
			add(o("type", "response.output_item.added", "output_index", i, "item", item.with("status", "in_progress").with("input", "")))
			for _, c := range chunks(input, 12) {
				add(o("type", "response.custom_tool_call_input.delta", "delta", c, "item_id", id, "obfuscation", hexID(c, 8), "output_index", i))
			}
			add(o("type", "response.custom_tool_call_input.done", "input", input, "item_id", id, "output_index", i))
		case "web_search_call":
			add(o("type", "response.output_item.added", "output_index", i, "item", o("id", id, "type", "web_search_call", "status", "in_progress")))
			add(o("type", "response.web_search_call.in_progress", "item_id", id, "output_index", i))
			add(o("type", "response.web_search_call.searching", "item_id", id, "output_index", i))
			add(o("type", "response.web_search_call.completed", "item_id", id, "output_index", i))
		default:
			add(o("type", "response.output_item.added", "output_index", i, "item", item))
		}
		add(o("type", "response.output_item.done", "output_index", i, "item", item))
	}
	add(o("type", "response.completed", "response", r.object("completed", r.output, r.usage())))
	return evs
}

func rReasoning(seed, summary string) obj {
	var sums []obj
	if summary != "" {
		sums = []obj{o("type", "summary_text", "text", summary)}
	} else {
		sums = []obj{}
	}
	return o("id", "rs_"+hexID("rs"+seed, 48), "type", "reasoning", "encrypted_content", "gAAAAAB"+urlBlob("enc"+seed, 1200), "summary", sums)
}

func rMessage(seed, text string, annotations ...obj) obj {
	if annotations == nil {
		annotations = []obj{}
	}
	return o("id", "msg_"+hexID("msg"+seed, 48), "type", "message", "status", "completed",
		"content", []obj{o("type", "output_text", "annotations", annotations, "logprobs", []obj{}, "text", text)}, "role", "assistant")
}

func rFunctionCall(seed, name, args string) obj {
	return o("id", "fc_"+hexID("fc"+seed, 48), "type", "function_call", "status", "completed", "arguments", args,
		"call_id", "call_"+ident("", "call"+seed, 24), "name", name)
}

func rCustomCall(seed, name, input string) obj {
	return o("id", "ctc_"+hexID("ctc"+seed, 48), "type", "custom_tool_call", "status", "completed",
		"call_id", "call_"+ident("", "call"+seed, 24), "input", input, "name", name)
}

// ---- OpenAI Chat Completions ----

// cCompletion is a Chat Completions answer: text, or tool calls.
type cCompletion struct {
	id, model string
	created   int64
	text      string
	calls     []obj // {"id","type":"function","function":{"name","arguments"}}
	in, out   int
	reasoning int
	tier      string
}

func (c cCompletion) finish() string {
	if len(c.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (c cCompletion) usage() obj {
	return o("prompt_tokens", c.in, "completion_tokens", c.out, "total_tokens", c.in+c.out,
		"prompt_tokens_details", o("cached_tokens", 0, "audio_tokens", 0),
		"completion_tokens_details", o("reasoning_tokens", c.reasoning, "audio_tokens", 0, "accepted_prediction_tokens", 0, "rejected_prediction_tokens", 0))
}

func (c cCompletion) json() []byte {
	var content any
	if c.text != "" {
		content = c.text
	}
	msg := o("role", "assistant", "content", content, "refusal", nil, "annotations", []obj{})
	if len(c.calls) > 0 {
		msg = append(msg, kv{"tool_calls", c.calls})
	}
	return marshal(o("id", c.id, "object", "chat.completion", "created", c.created, "model", c.model,
		"choices", []obj{o("index", 0, "message", msg, "logprobs", nil, "finish_reason", c.finish())},
		"usage", c.usage(), "service_tier", c.tier, "system_fingerprint", nil))
}

// events is the streamed answer: data-only events, the usage chunk (the
// request asks for it) and data: [DONE].
func (c cCompletion) events() [][]byte {
	var evs [][]byte
	chunk := func(choices []obj, usage any) {
		ch := o("id", c.id, "object", "chat.completion.chunk", "created", c.created, "model", c.model,
			"service_tier", c.tier, "system_fingerprint", nil, "choices", choices, "usage", usage)
		ch = append(ch, kv{"obfuscation", hexID(fmt.Sprint(c.id, len(evs)), 4+len(evs)%7)})
		evs = append(evs, []byte("data: "+string(marshal(ch))+"\n\n"))
	}
	choice := func(delta obj, finish any) []obj {
		return []obj{o("index", 0, "delta", delta, "logprobs", nil, "finish_reason", finish)}
	}
	chunk(choice(o("role", "assistant", "content", "", "refusal", nil), nil), nil)
	for _, t := range chunks(c.text, 16) {
		chunk(choice(o("content", t), nil), nil)
	}
	for i, call := range c.calls {
		fn := call.get("function").(obj)
		args := fn.get("arguments").(string)
		chunk(choice(o("tool_calls", []obj{o("index", i, "id", call.get("id"), "type", "function",
			"function", o("name", fn.get("name"), "arguments", ""))}), nil), nil)
		for _, a := range chunks(args, 12) {
			chunk(choice(o("tool_calls", []obj{o("index", i, "function", o("arguments", a))}), nil), nil)
		}
	}
	chunk(choice(o(), c.finish()), nil)
	chunk([]obj{}, c.usage())
	return append(evs, []byte("data: [DONE]\n\n"))
}

func cCall(seed, name, args string) obj {
	return o("id", "call_"+ident("", "call"+seed, 24), "type", "function", "function", o("name", name, "arguments", args))
}
