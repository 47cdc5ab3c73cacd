package anthropicfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// defaultMessages are the error messages used when a fault names a type but
// no message.
var defaultMessages = map[string]string{
	TypeInvalidRequest:  "Invalid request",
	TypeAuthentication:  "invalid x-api-key",
	TypeBilling:         "Your credit balance is too low to access the Anthropic API.",
	TypePermission:      "Your API key does not have permission to use the specified resource.",
	TypeNotFound:        "Not Found",
	TypeConflict:        "Conflict",
	TypeRequestTooLarge: "Request exceeds the maximum allowed number of bytes.",
	TypeRateLimit:       "Rate limited",
	TypeAPI:             "Internal server error",
	TypeTimeout:         "Request timed out",
	TypeOverloaded:      "Overloaded",
}

// ServeHTTP serves the fake API. Order of checks: route (404), API key
// (401), anthropic-version (400), body size (413), body validation (400),
// then the scripted reply.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := s.newID("req_011C", 20)
	w = &teeWriter{ResponseWriter: w, s: s, id: reqID}
	body, tooLarge, readErr := fakekit.ReadBody(r, s.cfg.maxBody)
	rec := Recorded{
		RecordedBase: fakekit.NewRecordedBase(r, body), RequestID: reqID,
	}
	s.record(rec)

	route, modelID := routeOf(r)
	switch {
	case route == "":
		s.writeError(w, reqID, 404, TypeNotFound, "Not Found")
		return
	case s.cfg.apiKey != "" && apiKey(r.Header) == "":
		s.writeError(w, reqID, 401, TypeAuthentication, "x-api-key header is required")
		return
	case s.cfg.apiKey != "" && apiKey(r.Header) != s.cfg.apiKey:
		s.writeError(w, reqID, 401, TypeAuthentication, "invalid x-api-key")
		return
	}
	version := r.Header.Get("anthropic-version")
	switch {
	case version == "":
		s.writeError(w, reqID, 400, TypeInvalidRequest, "anthropic-version: header is required")
		return
	case !validAPIVersions[version]:
		s.writeError(w, reqID, 400, TypeInvalidRequest, fmt.Sprintf("anthropic-version: %q is not a valid version", version))
		return
	case tooLarge:
		s.writeError(w, reqID, 413, TypeRequestTooLarge, fmt.Sprintf("Request exceeds the maximum allowed number of bytes. The maximum request size is %d bytes.", s.cfg.maxBody))
		return
	case readErr != nil:
		s.writeError(w, reqID, 400, TypeInvalidRequest, "There was an error reading the body of your request.")
		return
	}

	switch route {
	case RouteMessages:
		s.serveMessages(w, r, rec, version)
	case RouteCountTokens:
		s.serveCountTokens(w, r, rec, version)
	case RouteModels:
		s.serveModels(w, r, rec, modelID)
	}
}

// routeOf maps a request to its route; "" means unknown (404).
func routeOf(r *http.Request) (route Route, modelID string) {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/messages":
		return RouteMessages, ""
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		return RouteCountTokens, ""
	case r.Method == http.MethodGet && p == "/v1/models":
		return RouteModels, ""
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/models/"):
		id := strings.TrimPrefix(p, "/v1/models/")
		if id != "" && !strings.Contains(id, "/") {
			return RouteModels, id
		}
	}
	return "", ""
}

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request, rec Recorded, version string) {
	fields, msg := validateBody(rec.Body, true, version, rec.Betas(), s.cfg.fields)
	var blocks []cacheBlock
	if msg == "" {
		blocks, msg = cacheBlocks(fields)
	}
	if msg != "" {
		s.writeError(w, rec.RequestID, 400, TypeInvalidRequest, msg)
		return
	}
	var stream bool
	_ = json.Unmarshal(fields["stream"], &stream)
	var model string
	_ = json.Unmarshal(fields["model"], &model)

	reply, ok := s.kit.Next(RouteMessages)
	if !ok {
		reply = s.cfg.defaultReply(rec)
	}
	tool := rec.WebSearchTool()
	cm := rec.ContextManagement() != nil
	err := reply.validate()
	switch {
	case err != nil:
	case len(reply.WebSearches) > 0 && tool == nil:
		err = fmt.Errorf("WebSearches scripted for a request that offers no web_search tool")
	case len(reply.AppliedEdits) > 0 && !cm:
		err = fmt.Errorf("AppliedEdits scripted for a request without context_management")
	}
	if err != nil {
		s.writeError(w, rec.RequestID, 500, TypeAPI, "anthropicfake: invalid scripted reply: "+err.Error())
		return
	}
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if reply.isFault() {
		s.writeFault(w, rec.RequestID, reply)
		return
	}
	if me := reply.MidStreamError; me != nil && !stream {
		s.writeFault(w, rec.RequestID, Reply{
			ErrorType: me.Type, ErrorMessage: me.Message, Headers: reply.Headers,
		})
		return
	}
	if !reply.hasContent() {
		reply.Text = Echo(rec).Text
	}
	res := s.resolve(reply, model, rec.Body, blocks, tool, cm)
	s.consume(Usage{Input: res.usage.Input, CacheCreation5m: res.usage.CacheCreation5m, CacheCreation1h: res.usage.CacheCreation1h})
	defer s.consume(Usage{Output: res.usage.Output})
	if stream {
		s.writeStream(w, r, rec.RequestID, reply, res)
		return
	}
	cut := reply.CutAfterBytes
	body := marshal(res.message())
	if cut == 0 && reply.CutAfterEvents > 0 {
		cut = len(body) / 2
	}
	s.writeBody(w, rec.RequestID, 200, "application/json", body, cut, reply.Headers)
}

// resolve fills in every default of a success reply; derived usage
// follows the fake's prompt cache over the request's blocks.
func (s *Server) resolve(reply Reply, model string, body []byte, blocks []cacheBlock, tool *WebSearchTool, cm bool) *resolved {
	res := &resolved{
		id:           reply.ID,
		model:        cmpOr(reply.Model, model),
		text:         reply.Text,
		stopReason:   reply.StopReason,
		stopSequence: reply.StopSequence,
		usage:        reply.Usage,
	}
	if res.id == "" {
		res.id = s.newID("msg_01", 22)
	}
	outBytes := len(reply.Text)
	if tool != nil {
		res.searchTool = true
		res.searches, res.citations, res.searched = s.resolveSearches(reply.WebSearches, tool)
		for _, rs := range res.searches {
			outBytes += len(rs.input)
		}
	}
	cleared := 0
	if cm {
		res.edits = append([]AppliedEdit{}, reply.AppliedEdits...)
		for _, e := range res.edits {
			cleared += e.ClearedInputTokens
		}
	}
	if t := reply.Thinking; t != nil {
		res.thinking = &Thinking{Text: t.Text, Signature: cmpOr(t.Signature, defaultSignature(t.Text))}
		outBytes += len(t.Text)
	}
	for _, tu := range reply.ToolUses {
		in := []byte("{}")
		if len(tu.Input) > 0 {
			var buf bytes.Buffer
			_ = json.Compact(&buf, tu.Input) // validated as an object already
			in = buf.Bytes()
		}
		res.tools = append(res.tools, ToolUse{ID: cmpOr(tu.ID, s.newID("toolu_01", 22)), Name: tu.Name, Input: in})
		outBytes += len(tu.Name) + len(in)
	}
	if res.stopReason == "" {
		res.stopReason = "end_turn"
		if len(res.tools) > 0 {
			res.stopReason = "tool_use"
		}
	}
	if res.usage == (Usage{}) {
		res.usage = s.cache.account(model, blocks, CountTokens(body), s.cfg.now())
		// What context editing cleared never reaches the model.
		res.usage.Input = max(0, res.usage.Input-cleared)
		res.usage.Output = max(1, (outBytes+3)/4)
		// The API stops at max_tokens: a derived answer never bills more.
		var capped bool
		if res.text, res.usage.Output, capped = fakekit.CapOutput(res.text, res.usage.Output, maxTokens(body)); capped {
			res.stopReason, res.stopSequence = "max_tokens", ""
		}
	}
	return res
}

func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request, rec Recorded, version string) {
	if _, msg := validateBody(rec.Body, false, version, rec.Betas(), s.cfg.fields); msg != "" {
		s.writeError(w, rec.RequestID, 400, TypeInvalidRequest, msg)
		return
	}
	reply, ok := s.kit.Next(RouteCountTokens)
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if ok && reply.isFault() {
		s.writeFault(w, rec.RequestID, reply)
		return
	}
	n := CountTokens(rec.Body)
	if ok && reply.Usage.Input > 0 {
		n = reply.Usage.Input
	}
	body := marshal(struct {
		InputTokens int `json:"input_tokens"`
	}{n})
	s.writeBody(w, rec.RequestID, 200, "application/json", body, reply.CutAfterBytes, reply.Headers)
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request, rec Recorded, modelID string) {
	reply, ok := s.kit.Next(RouteModels)
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if ok && reply.isFault() {
		s.writeFault(w, rec.RequestID, reply)
		return
	}
	var body []byte
	if modelID != "" {
		i := slices.IndexFunc(s.cfg.models, func(m Model) bool { return m.ID == modelID })
		if i < 0 {
			s.writeError(w, rec.RequestID, 404, TypeNotFound, "model: "+modelID)
			return
		}
		body = marshal(s.cfg.models[i].wire())
	} else {
		page, msg := modelPage(s.cfg.models, rec.Query())
		if msg != "" {
			s.writeError(w, rec.RequestID, 400, TypeInvalidRequest, msg)
			return
		}
		body = marshal(page)
	}
	s.writeBody(w, rec.RequestID, 200, "application/json", body, reply.CutAfterBytes, reply.Headers)
}

// writeFault writes a scripted error (or raw body).
func (s *Server) writeFault(w http.ResponseWriter, reqID string, reply Reply) {
	status, typ := reply.faultStatusAndType()
	if reply.RawBody != "" {
		ct := cmpOr(reply.RawContentType, "application/json")
		s.writeBody(w, reqID, status, ct, []byte(reply.RawBody), reply.CutAfterBytes, reply.Headers)
		return
	}
	msg := cmpOr(reply.ErrorMessage, defaultMessages[typ])
	body := marshal(newErrorBody(typ, msg, reply.ErrorCode, reqID))
	s.writeBody(w, reqID, status, "application/json", body, reply.CutAfterBytes, reply.Headers)
}

// writeError writes an error the fake itself detected.
func (s *Server) writeError(w http.ResponseWriter, reqID string, status int, typ, msg string) {
	s.writeBody(w, reqID, status, "application/json", marshal(newErrorBody(typ, msg, "", reqID)), 0, nil)
}

// setExtra applies a reply's headers after the standard ones; an empty
// value removes the header (as a proxy that strips it).
func setExtra(h http.Header, extra map[string]string) {
	for k, v := range extra {
		if v == "" {
			h.Del(k)
			continue
		}
		h.Set(k, v)
	}
}

// writeBody writes a complete response; cut > 0 sends only that many bytes
// of it and then drops the connection.
func (s *Server) writeBody(w http.ResponseWriter, reqID string, status int, contentType string, body []byte, cut int, extra map[string]string) {
	h := w.Header()
	s.setStandardHeaders(h, reqID)
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	setExtra(h, extra)
	fakekit.WriteBody(w, status, body, cut)
}

// writeStream writes the SSE events of res, applying the reply's stream
// faults, and flushes after each event.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, reqID string, reply Reply, res *resolved) {
	h := w.Header()
	s.setStandardHeaders(h, reqID)
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	setExtra(h, reply.Headers)
	sw, err := fakekit.StartStream(w, http.StatusOK)
	if err != nil {
		return
	}
	evs := res.streamEvents()
	errAt, cutAt, stallAt := -1, -1, -1
	if me := reply.MidStreamError; me != nil {
		errAt = min(me.AfterEvents, len(evs))
	}
	if reply.CutAfterEvents > 0 {
		cutAt = min(reply.CutAfterEvents, len(evs))
	}
	if reply.StallAfterEvents > 0 {
		stallAt = min(reply.StallAfterEvents, len(evs))
	}
	written := 0
	write := func(ev sseEvent) error {
		frame := fmt.Appendf(nil, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		if c := reply.CutAfterBytes; c > 0 && written+len(frame) > c {
			_ = sw.Printf("%s", frame[:c-written])
			sw.Cut()
		}
		written += len(frame)
		return sw.Printf("%s", frame)
	}
	for i := 0; ; i++ {
		if i == stallAt && !s.kit.Stall(r, reply.Stall) {
			return
		}
		if i == errAt {
			me := reply.MidStreamError
			data := marshal(errorBody{Type: "error", Error: errorDetail{Type: me.Type, Message: cmpOr(me.Message, defaultMessages[me.Type])}})
			_ = write(sseEvent{"error", data})
			return
		}
		if i == cutAt {
			panic(http.ErrAbortHandler)
		}
		if i == len(evs) || r.Context().Err() != nil {
			return
		}
		ev := evs[i]
		if ev.name != "ping" {
			ev.data = pad(ev.data, s.padding())
		}
		if write(ev) != nil {
			return
		}
	}
}

// pad inserts n spaces before the closing brace of a JSON object, as the
// real API does to most stream events.
func pad(data []byte, n int) []byte {
	if n == 0 || len(data) == 0 || data[len(data)-1] != '}' {
		return data
	}
	out := make([]byte, 0, len(data)+n)
	out = append(out, data[:len(data)-1]...)
	out = append(out, bytes.Repeat([]byte{' '}, n)...)
	return append(out, '}')
}

// setStandardHeaders sets request-id, anthropic-organization-id and the
// anthropic-ratelimit-* set. Token "remaining" values are rounded down to
// the thousand when the limit is at least 10,000, as the real API reports
// them; smaller (test-sized) limits are reported exactly.
func (s *Server) setStandardHeaders(h http.Header, reqID string) {
	s.mu.Lock()
	used := s.used
	s.mu.Unlock()
	l := s.cfg.limits
	reset := s.cfg.now().Add(l.ResetAfter).UTC().Truncate(time.Second).Format(time.RFC3339)
	h.Set("request-id", reqID)
	h.Set("anthropic-organization-id", s.cfg.orgID)
	set := func(bucket string, limit, remaining int, round bool) {
		remaining = max(0, remaining)
		if round && limit >= 10_000 {
			remaining -= remaining % 1000
		}
		h.Set("anthropic-ratelimit-"+bucket+"-limit", strconv.Itoa(limit))
		h.Set("anthropic-ratelimit-"+bucket+"-remaining", strconv.Itoa(remaining))
		h.Set("anthropic-ratelimit-"+bucket+"-reset", reset)
	}
	set("requests", l.Requests, l.Requests-used.requests, false)
	set("tokens", l.Tokens, l.Tokens-used.input-used.output, true)
	set("input-tokens", l.InputTokens, l.InputTokens-used.input, true)
	set("output-tokens", l.OutputTokens, l.OutputTokens-used.output, true)
}

// teeWriter keeps a copy of every response byte written, for
// [Server.Sent], before it goes to the client.
type teeWriter struct {
	http.ResponseWriter
	s  *Server
	id string
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.s.mu.Lock()
	t.s.sent[t.id] = append(t.s.sent[t.id], p...)
	t.s.mu.Unlock()
	return t.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
