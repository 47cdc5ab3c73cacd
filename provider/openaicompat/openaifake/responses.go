package openaifake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// responsesParams are the request body's fields the Responses API knows
// (CreateResponse in OpenAI's OpenAPI spec, and client_metadata, which
// Codex sends); any other is a 400 unknown_parameter, as the API answers.
var responsesParams = map[string]bool{
	"background": true, "client_metadata": true, "context_management": true, "conversation": true, "include": true,
	"input": true, "instructions": true, "max_output_tokens": true, "max_tool_calls": true, "metadata": true,
	"model": true, "moderation": true, "parallel_tool_calls": true, "previous_response_id": true, "prompt": true,
	"prompt_cache_key": true, "prompt_cache_options": true, "prompt_cache_retention": true, "reasoning": true,
	"safety_identifier": true, "service_tier": true, "store": true, "stream": true, "stream_options": true,
	"temperature": true, "text": true, "tool_choice": true, "tools": true, "top_logprobs": true, "top_p": true,
	"truncation": true, "user": true,
}

// IncludeEncryptedReasoning is the include value that makes reasoning
// items carry their encrypted_content (for a stateless client, store
// false, to send back in the next turn's input).
const IncludeEncryptedReasoning = "reasoning.encrypted_content"

// issuedCall is what the fake answered around one tool call: the call
// item's id and the reasoning item that preceded it, which a later turn
// must send back before the call (by its encrypted_content when the
// fake issued one, else by id).
type issuedCall struct {
	fcID      string
	rsID      string
	encrypted string
}

// responsesRequest is what the fake reads from a Responses body.
type responsesRequest struct {
	model         string
	stream        bool
	noObfuscation bool
	include       []string
	maxOutput     int
	serviceTier   string
	fields        map[string]json.RawMessage
	items         []InputItem
}

func (q *responsesRequest) includes(v string) bool { return slices.Contains(q.include, v) }

// InputItem is one item of a Responses request's input, flattened for
// assertions (and for the fake's own checks).
type InputItem struct {
	// Type is the item's type: "message" (also for the easy form
	// {role, content}), "reasoning", "function_call",
	// "function_call_output", "custom_tool_call",
	// "custom_tool_call_output", "item_reference", "web_search_call", …
	Type string
	// ID is the item's id, when the client sent one.
	ID string
	// Role is a message's role.
	Role string
	// Text is a message's text (its string content or its text parts
	// joined by newlines), or a tool output's text.
	Text string
	// CallID, Name and Arguments are a tool call's (Arguments holds a
	// custom tool call's input); CallID is also a tool output's.
	CallID, Name, Arguments string
	// Summary and EncryptedContent are a reasoning item's.
	Summary          []string
	EncryptedContent string
}

// Input parses a Responses request's input: a string is one user
// message. Nil when the body has no input or is not JSON.
func (r Recorded) Input() []InputItem {
	var b struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return nil
	}
	items, _ := parseInput(b.Input)
	return items
}

// Include is a Responses request's include list.
func (r Recorded) Include() []string {
	var b struct {
		Include []string `json:"include"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Include
}

func parseInput(raw json.RawMessage) ([]InputItem, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []InputItem{{Type: "message", Role: "user", Text: text}}, true
	}
	var list []struct {
		Type             string          `json:"type"`
		ID               string          `json:"id"`
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		CallID           string          `json:"call_id"`
		Name             string          `json:"name"`
		Arguments        string          `json:"arguments"`
		Input            string          `json:"input"`
		Output           json.RawMessage `json:"output"`
		EncryptedContent string          `json:"encrypted_content"`
		Summary          []struct {
			Text string `json:"text"`
		} `json:"summary"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	out := make([]InputItem, 0, len(list))
	for _, it := range list {
		in := InputItem{Type: it.Type, ID: it.ID, Role: it.Role, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, EncryptedContent: it.EncryptedContent}
		if in.Type == "" && in.Role != "" {
			in.Type = "message"
		}
		switch in.Type {
		case "message":
			in.Text = inputText(it.Content)
		case "function_call_output", "custom_tool_call_output":
			in.Text = inputText(it.Output)
		case "custom_tool_call":
			in.Arguments = it.Input
		}
		for _, s := range it.Summary {
			in.Summary = append(in.Summary, s.Text)
		}
		out = append(out, in)
	}
	return out, true
}

// inputText flattens a content or output value (a string or a list of
// parts with text) to text.
func inputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// responsesText is the last user message's text of a Responses body.
func responsesText(r Recorded) string {
	items := r.Input()
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type == "message" && items[i].Role == "user" {
			return items[i].Text
		}
	}
	return ""
}

// responsesSchema is text.format's schema when it is a json_schema.
func responsesSchema(r Recorded) json.RawMessage {
	var b struct {
		Text struct {
			Format struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"text"`
	}
	if json.Unmarshal(r.Body, &b) != nil || b.Text.Format.Type != "json_schema" {
		return nil
	}
	return b.Text.Format.Schema
}

func isResponses(r Recorded) bool { return strings.HasSuffix(r.Path, "/responses") }

// parseResponses validates a Responses body as OpenAI does, for what the
// fake checks, and returns its fields or the error the API would send.
func (s *Server) parseResponses(body []byte) (*responsesRequest, *apiError) {
	bad := func(msg, param, code string) (*responsesRequest, *apiError) {
		return nil, &apiError{status: 400, typ: TypeInvalidRequest, message: msg, param: param, code: code}
	}
	q := &responsesRequest{}
	if err := json.Unmarshal(body, &q.fields); err != nil || q.fields == nil {
		return bad("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)", "", "")
	}
	keys := make([]string, 0, len(q.fields))
	for k := range q.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !responsesParams[k] && !s.cfg.accepted[k] {
			return bad(fmt.Sprintf("Unknown parameter: '%s'.", k), k, "unknown_parameter")
		}
	}
	present := func(k string) bool {
		v, ok := q.fields[k]
		return ok && string(v) != "null"
	}
	if present("model") {
		_ = json.Unmarshal(q.fields["model"], &q.model)
	}
	if q.model == "" {
		return bad("Missing required parameter: 'model'.", "model", CodeMissingRequiredParam)
	}
	if present("previous_response_id") {
		var id string
		_ = json.Unmarshal(q.fields["previous_response_id"], &id)
		// The fake stores no response: every one is unknown.
		return bad(fmt.Sprintf("Previous response with id '%s' not found.", id), "previous_response_id", "previous_response_not_found")
	}
	if present("stream") {
		_ = json.Unmarshal(q.fields["stream"], &q.stream)
	}
	if present("stream_options") {
		var so struct {
			IncludeObfuscation *bool `json:"include_obfuscation"`
		}
		_ = json.Unmarshal(q.fields["stream_options"], &so)
		q.noObfuscation = so.IncludeObfuscation != nil && !*so.IncludeObfuscation
	}
	if present("include") {
		_ = json.Unmarshal(q.fields["include"], &q.include)
	}
	if present("service_tier") {
		_ = json.Unmarshal(q.fields["service_tier"], &q.serviceTier)
	}
	if present("max_output_tokens") {
		_ = json.Unmarshal(q.fields["max_output_tokens"], &q.maxOutput)
		if q.maxOutput < 16 {
			return bad(fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", q.maxOutput), "max_output_tokens", "integer_below_min_value")
		}
	}
	var ok bool
	if q.items, ok = parseInput(q.fields["input"]); !ok {
		return bad("Invalid type for 'input': expected one of a string or an array of input items, but got a value instead.", "input", "invalid_type")
	}
	return q, nil
}

// checkInput holds a turn's input to the pairing rules of the API: every
// function (or custom tool) call output follows its call, and a call the
// fake made right after a reasoning item follows that reasoning item,
// sent back with its encrypted_content (or, when the fake issued none,
// its id). A client or gateway that drops reasoning items gets the 400
// the API sends.
func (s *Server) checkInput(items []InputItem) *apiError {
	bad := func(msg string) *apiError {
		return &apiError{status: 400, typ: TypeInvalidRequest, message: msg, param: "input"}
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	encSeen, idSeen, calls := map[string]bool{}, map[string]bool{}, map[string]bool{}
	call := func(callID, kind string) *apiError {
		if iss, ok := s.issued[callID]; ok && iss.rsID != "" {
			found := idSeen[iss.rsID]
			if iss.encrypted != "" {
				found = encSeen[iss.encrypted]
			}
			if !found {
				return bad(fmt.Sprintf("Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'.", iss.fcID, kind, iss.rsID))
			}
		}
		calls[callID] = true
		return nil
	}
	for _, it := range items {
		switch it.Type {
		case "reasoning":
			if it.EncryptedContent != "" {
				encSeen[it.EncryptedContent] = true
			} else if it.ID != "" {
				idSeen[it.ID] = true
			}
		case "item_reference":
			if callID, ok := s.fcCall[it.ID]; ok {
				if e := call(callID, "function_call"); e != nil {
					return e
				}
			} else {
				idSeen[it.ID] = true
			}
		case "function_call", "custom_tool_call":
			if e := call(it.CallID, it.Type); e != nil {
				return e
			}
		case "function_call_output":
			if !calls[it.CallID] {
				return bad(fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID))
			}
		case "custom_tool_call_output":
			if !calls[it.CallID] {
				return bad(fmt.Sprintf("No tool call found for custom tool call output with call_id %s.", it.CallID))
			}
		}
	}
	return nil
}

// ResponsesContextLengthExceeded is the Responses API's 400 for an input
// over the model's context window (code context_length_exceeded, param
// input): "Your input exceeds the context window of this model. Please
// adjust your input and try again."
func ResponsesContextLengthExceeded() Reply {
	r := ErrorReply(400, TypeInvalidRequest, CodeContextLengthExceeded, "Your input exceeds the context window of this model. Please adjust your input and try again.")
	r.ErrorParam = "input"
	return r
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, rec Recorded) {
	req, perr := s.parseResponses(rec.Body)
	if perr != nil {
		s.writeError(w, rec, *perr)
		return
	}
	if s.cfg.modelCheck {
		if _, ok := s.findModel(req.model); !ok {
			s.writeFault(w, rec, ModelNotFound(req.model))
			return
		}
	}
	if e := s.checkInput(req.items); e != nil {
		s.writeError(w, rec, *e)
		return
	}
	if window := s.contextWindow(req.model); window > 0 && CountTokens(rec.Body) > window {
		s.writeFault(w, rec, ResponsesContextLengthExceeded())
		return
	}
	s.admit()
	reply, ok := s.kit.Next(RouteResponses)
	if !ok {
		reply = s.cfg.defaultReply(rec)
	}
	if err := reply.validate(); err != nil {
		s.writeError(w, rec, apiError{status: 500, typ: TypeServer, message: "openaifake: invalid scripted reply: " + err.Error()})
		return
	}
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if reply.isFault() {
		s.writeFault(w, rec, reply)
		return
	}
	if me := reply.MidStreamError; me != nil && !req.stream {
		s.writeFault(w, rec, Reply{
			Status: cmpOr(me.Status, 500), ErrorType: cmpOr(me.Type, TypeServer), ErrorMessage: me.Message,
			ErrorCode: me.Code, Headers: reply.Headers,
		})
		return
	}
	if !reply.hasContent() {
		reply.Text = Echo(rec).Text
	}
	res := s.resolveResponse(reply, req, rec.Body)
	s.consume(res.usage.Prompt + res.usage.Completion)
	s.remember(res)
	if req.stream {
		s.writeResponsesStream(w, r, rec, reply, res)
		return
	}
	cut := reply.CutAfterBytes
	body := marshalIndent(res.object(res.status, true), "  ")
	if cut == 0 && reply.CutAfterChunks > 0 {
		cut = len(body) / 2
	}
	s.writeBody(w, rec, 200, "application/json", body, cut, &reply)
}

// remember records the calls of an answer and the reasoning item before
// them, for checkInput on the next turns.
func (s *Server) remember(res *respResolved) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	var rs *respItem
	for i := range res.items {
		it := &res.items[i]
		switch it.typ {
		case "reasoning":
			rs = it
		case "function_call", "custom_tool_call":
			iss := issuedCall{fcID: it.id}
			if rs != nil {
				iss.rsID, iss.encrypted = rs.id, rs.encrypted
			}
			s.issued[it.callID] = iss
			s.fcCall[it.id] = it.callID
		}
	}
}

// respItem is one output item of a resolved Responses answer.
type respItem struct {
	typ       string // reasoning, web_search_call, message, function_call, custom_tool_call
	id        string
	text      string // message text, reasoning summary, web search query
	encrypted string // reasoning
	callID    string
	name      string
	namespace string
	arguments string // a function call's arguments, a custom tool call's input
}

// respResolved is a success Reply with every default filled in.
type respResolved struct {
	id, model   string
	created     int64
	status      string // completed or incomplete
	incomplete  string // incomplete_details.reason
	items       []respItem
	usage       Usage
	serviceTier string
	obfuscate   bool
	fields      map[string]json.RawMessage // the request's, echoed
	model0      string                     // the model asked for
}

func (s *Server) itemID(prefix string) string { return prefix + s.rnd.String(hexChars, 50) }

// resolveResponse fills in every default of a success reply for a
// Responses request.
func (s *Server) resolveResponse(reply Reply, req *responsesRequest, body []byte) *respResolved {
	res := &respResolved{
		id: cmpOr(reply.ID, s.itemID("resp_")), model: reply.Model, created: s.cfg.now().Unix(),
		status: "completed", usage: reply.Usage, serviceTier: servedTier(req.serviceTier),
		obfuscate: !req.noObfuscation, fields: req.fields, model0: req.model,
	}
	if res.model == "" {
		res.model = req.model
		if m, ok := s.findModel(req.model); ok && m.Snapshot != "" {
			res.model = m.Snapshot
		}
	}
	outBytes, reasoningBytes := len(reply.Text), 0
	if reasoningModel(req.model) || reply.Reasoning != "" {
		it := respItem{typ: "reasoning", id: s.itemID("rs_"), text: reply.Reasoning}
		if req.includes(IncludeEncryptedReasoning) {
			it.encrypted = "gAAAAAB" + base64.URLEncoding.EncodeToString(s.rnd.Bytes(240))
		}
		res.items = append(res.items, it)
		reasoningBytes = max(1, len(reply.Reasoning))
	}
	for _, q := range reply.WebSearches {
		res.items = append(res.items, respItem{typ: "web_search_call", id: s.itemID("ws_"), text: q})
	}
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		res.items = append(res.items, respItem{typ: "message", id: s.itemID("msg_"), text: reply.Text})
	}
	for _, tc := range reply.ToolCalls {
		it := respItem{typ: "function_call", id: s.itemID("fc_"), callID: cmpOr(tc.ID, "call_"+s.rnd.String(base62, 24)), name: tc.Name,
			namespace: tc.Namespace, arguments: cmpOr(tc.Arguments, "{}")}
		if tc.Custom {
			it.typ, it.id, it.arguments = "custom_tool_call", "ctc_"+it.id[len("fc_"):], tc.Arguments
		}
		res.items = append(res.items, it)
		outBytes += len(tc.Name) + len(it.arguments)
	}
	switch reply.FinishReason {
	case "length":
		res.status, res.incomplete = "incomplete", "max_output_tokens"
	case "content_filter":
		res.status, res.incomplete = "incomplete", "content_filter"
	}
	if res.usage == (Usage{}) {
		res.usage.Prompt = CountTokens(body)
		if reasoningBytes > 0 {
			res.usage.Reasoning = completionTokens(reasoningBytes)
		}
		res.usage.Completion = completionTokens(outBytes) + res.usage.Reasoning
		// The server stops at the output limit: a derived answer never
		// bills more.
		for i := range res.items {
			it := &res.items[i]
			if it.typ != "message" {
				continue
			}
			var capped bool
			if it.text, res.usage.Completion, capped = fakekit.CapOutput(it.text, res.usage.Completion, req.maxOutput); capped {
				res.status, res.incomplete = "incomplete", "max_output_tokens"
			}
		}
	}
	return res
}

// ---- wire ----

// kv is one member of an ordered JSON object.
type kv struct {
	k string
	v any
}

// object is a JSON object whose members keep their order, as the API
// writes them.
type object []kv

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, marshal(m.k, false)...)
		b = append(b, ':')
		b = append(b, marshal(m.v, false)...)
	}
	return append(b, '}'), nil
}

// echo is the request's value of field k, or def when it set none.
func (r *respResolved) echo(k string, def any) any {
	if v, ok := r.fields[k]; ok && string(v) != "null" {
		return v
	}
	return def
}

var (
	floatOne  = json.RawMessage("1.0")
	emptyList = []any{}
)

// reasoningEcho is the response's reasoning: the request's, with the
// model's default effort ("medium" for a reasoning model).
func (r *respResolved) reasoningEcho() object {
	var rq struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	}
	_ = json.Unmarshal(r.fields["reasoning"], &rq)
	var effort, summary any
	if rq.Effort != nil {
		effort = *rq.Effort
	} else if reasoningModel(r.model0) {
		effort = "medium"
	}
	if rq.Summary != nil {
		summary = *rq.Summary
	}
	return object{{"effort", effort}, {"summary", summary}}
}

func (r *respResolved) usageObject() object {
	u := r.usage
	return object{
		{"input_tokens", u.Prompt},
		{"input_tokens_details", object{{"cached_tokens", u.Cached}, {"cache_write_tokens", 0}}},
		{"output_tokens", u.Completion},
		{"output_tokens_details", object{{"reasoning_tokens", u.Reasoning}}},
		{"total_tokens", u.Prompt + u.Completion},
	}
}

// itemObject is an output item as it is when done (done) or as it is
// announced (response.output_item.added).
func (it *respItem) itemObject(done bool) object {
	status := "in_progress"
	if done {
		status = "completed"
	}
	switch it.typ {
	case "reasoning":
		o := object{{"id", it.id}, {"type", "reasoning"}}
		if done && it.encrypted != "" {
			o = append(o, kv{"encrypted_content", it.encrypted})
		}
		summary := []any{}
		if done && it.text != "" {
			summary = append(summary, object{{"type", "summary_text"}, {"text", it.text}})
		}
		return append(o, kv{"summary", summary})
	case "web_search_call":
		o := object{{"id", it.id}, {"type", "web_search_call"}, {"status", status}}
		if done {
			o = append(o, kv{"action", object{{"type", "search"}, {"query", it.text}}})
		}
		return o
	case "message":
		content := []any{}
		if done {
			content = append(content, it.textPart(it.text))
		}
		return object{{"id", it.id}, {"type", "message"}, {"status", status}, {"content", content}, {"role", "assistant"}}
	case "custom_tool_call":
		input := ""
		if done {
			input = it.arguments
		}
		return it.withNamespace(object{{"id", it.id}, {"type", "custom_tool_call"}, {"status", status}, {"call_id", it.callID}, {"input", input}, {"name", it.name}})
	default:
		args := ""
		if done {
			args = it.arguments
		}
		return it.withNamespace(object{{"id", it.id}, {"type", "function_call"}, {"status", status}, {"arguments", args}, {"call_id", it.callID}, {"name", it.name}})
	}
}

// withNamespace adds the call's namespace, when it has one.
func (it *respItem) withNamespace(o object) object {
	if it.namespace != "" {
		o = append(o, kv{"namespace", it.namespace})
	}
	return o
}

func (it *respItem) textPart(text string) object {
	return object{{"type", "output_text"}, {"annotations", emptyList}, {"logprobs", emptyList}, {"text", text}}
}

// object is the response object with the given status; done adds the
// output, usage and completion time.
func (r *respResolved) object(status string, done bool) object {
	output := []any{}
	var usage, completedAt, incomplete any
	if done {
		for i := range r.items {
			output = append(output, r.items[i].itemObject(true))
		}
		usage = r.usageObject()
		if status == "completed" {
			completedAt = r.created + 1
		}
		if r.incomplete != "" {
			incomplete = object{{"reason", r.incomplete}}
		}
	}
	return r.objectWith(status, output, usage, completedAt, incomplete, nil)
}

func (r *respResolved) objectWith(status string, output []any, usage, completedAt, incomplete, errObj any) object {
	return object{
		{"id", r.id}, {"object", "response"}, {"created_at", r.created}, {"status", status},
		{"background", false}, {"billing", object{{"payer", "developer"}}}, {"completed_at", completedAt},
		{"error", errObj}, {"incomplete_details", incomplete},
		{"instructions", r.echo("instructions", nil)}, {"max_output_tokens", r.echo("max_output_tokens", nil)},
		{"max_tool_calls", r.echo("max_tool_calls", nil)}, {"model", r.model}, {"output", output},
		{"parallel_tool_calls", r.echo("parallel_tool_calls", true)}, {"previous_response_id", nil},
		{"prompt_cache_key", r.echo("prompt_cache_key", nil)}, {"prompt_cache_retention", r.echo("prompt_cache_retention", nil)},
		{"reasoning", r.reasoningEcho()}, {"safety_identifier", r.echo("safety_identifier", nil)},
		{"service_tier", r.serviceTier}, {"store", r.echo("store", true)}, {"temperature", r.echo("temperature", floatOne)},
		{"text", r.echo("text", object{{"format", object{{"type", "text"}}}, {"verbosity", "medium"}})},
		{"tool_choice", r.echo("tool_choice", "auto")}, {"tools", r.echo("tools", emptyList)},
		{"top_logprobs", r.echo("top_logprobs", 0)}, {"top_p", r.echo("top_p", floatOne)},
		{"truncation", r.echo("truncation", "disabled")}, {"usage", usage}, {"user", r.echo("user", nil)},
		{"metadata", r.echo("metadata", object{})},
	}
}

// respEvent is one stream event before its sequence number.
type respEvent struct {
	typ    string
	fields object
}

// events is the answer as the API streams it: response.created and
// response.in_progress, each item added, its deltas and done events,
// then response.completed (or response.incomplete).
func (s *Server) responsesEvents(r *respResolved) []respEvent {
	var evs []respEvent
	add := func(typ string, fields ...kv) { evs = append(evs, respEvent{typ, fields}) }
	obf := func() []kv {
		if !r.obfuscate {
			return nil
		}
		return []kv{{"obfuscation", s.rnd.String(base62, 1+s.rnd.IntN(12))}}
	}
	add("response.created", kv{"response", r.object("in_progress", false)})
	add("response.in_progress", kv{"response", r.object("in_progress", false)})
	for i := range r.items {
		it := &r.items[i]
		idx := kv{"output_index", i}
		add("response.output_item.added", idx, kv{"item", it.itemObject(false)})
		itemID := kv{"item_id", it.id}
		switch it.typ {
		case "reasoning":
			if it.text != "" {
				si := kv{"summary_index", 0}
				add("response.reasoning_summary_part.added", itemID, idx, si, kv{"part", object{{"type", "summary_text"}, {"text", ""}}})
				for _, piece := range splitText(it.text) {
					add("response.reasoning_summary_text.delta", append([]kv{itemID, idx, si, {"delta", piece}}, obf()...)...)
				}
				add("response.reasoning_summary_text.done", itemID, idx, si, kv{"text", it.text})
				add("response.reasoning_summary_part.done", itemID, idx, si, kv{"part", object{{"type", "summary_text"}, {"text", it.text}}})
			}
		case "web_search_call":
			add("response.web_search_call.in_progress", idx, itemID)
			add("response.web_search_call.searching", idx, itemID)
			add("response.web_search_call.completed", idx, itemID)
		case "message":
			ci := kv{"content_index", 0}
			add("response.content_part.added", itemID, idx, ci, kv{"part", it.textPart("")})
			for _, piece := range splitText(it.text) {
				add("response.output_text.delta", append([]kv{itemID, idx, ci, {"delta", piece}, {"logprobs", emptyList}}, obf()...)...)
			}
			add("response.output_text.done", itemID, idx, ci, kv{"text", it.text}, kv{"logprobs", emptyList})
			add("response.content_part.done", itemID, idx, ci, kv{"part", it.textPart(it.text)})
		case "function_call":
			for _, frag := range splitArgs(it.arguments) {
				add("response.function_call_arguments.delta", append([]kv{itemID, idx, {"delta", frag}}, obf()...)...)
			}
			add("response.function_call_arguments.done", itemID, idx, kv{"name", it.name}, kv{"arguments", it.arguments})
		case "custom_tool_call":
			for _, piece := range splitText(it.arguments) {
				add("response.custom_tool_call_input.delta", append([]kv{idx, itemID, {"delta", piece}}, obf()...)...)
			}
			add("response.custom_tool_call_input.done", idx, itemID, kv{"input", it.arguments})
		}
		add("response.output_item.done", idx, kv{"item", it.itemObject(true)})
	}
	if r.status == "incomplete" {
		add("response.incomplete", kv{"response", r.object("incomplete", true)})
	} else {
		add("response.completed", kv{"response", r.object("completed", true)})
	}
	return evs
}

// writeResponsesStream writes the answer's events, applying the reply's
// stream faults.
func (s *Server) writeResponsesStream(w http.ResponseWriter, r *http.Request, rec Recorded, reply Reply, res *respResolved) {
	h := w.Header()
	s.setStandardHeaders(h, rec)
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	s.setReplyHeaders(h, &reply)
	sw, err := fakekit.StartStream(w, http.StatusOK)
	if err != nil {
		return
	}
	evs := s.responsesEvents(res)
	seq := 0
	write := func(typ string, fields object) error {
		ev := append(object{{"type", typ}, {"sequence_number", seq}}, fields...)
		seq++
		return sw.Printf("event: %s\ndata: %s\n\n", typ, marshal(ev, false))
	}
	at := func(n int) int {
		if n <= 0 {
			return -1
		}
		return min(n, len(evs))
	}
	errAt, cutAt, endAt, stallAt := -1, at(reply.CutAfterChunks), at(reply.EndAfterChunks), at(reply.StallAfterChunks)
	if me := reply.MidStreamError; me != nil {
		errAt = min(me.AfterChunks, len(evs))
	}
	for i := 0; ; i++ {
		if i == stallAt && !s.kit.Stall(r, reply.Stall) {
			return
		}
		if i == errAt {
			me := reply.MidStreamError
			msg := cmpOr(me.Message, messageServerError)
			if me.Failed {
				errObj := object{{"code", cmpOr(me.Code, "server_error")}, {"message", msg}}
				_ = write("response.failed", object{{"response", res.objectWith("failed", emptyList, nil, nil, nil, errObj)}})
				return
			}
			_ = write("error", object{{"code", nullable(me.Code)}, {"message", msg}, {"param", nil}})
			return
		}
		if i == cutAt {
			panic(http.ErrAbortHandler)
		}
		if i == endAt || i == len(evs) || r.Context().Err() != nil {
			return
		}
		if write(evs[i].typ, evs[i].fields) != nil {
			return
		}
	}
}
