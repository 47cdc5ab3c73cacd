package geminifake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// route is a parsed request URL.
type route struct {
	route   Route
	version string // "v1beta", "v1" or "v1alpha"
	model   string // bare model name
	action  string // generateContent, streamGenerateContent, countTokens; "" for GET
}

var apiVersions = []string{"v1beta", "v1", "v1alpha"}

// routeOf maps a request to its route; route "" means unknown (404).
func routeOf(r *http.Request) route {
	p := r.URL.Path
	for _, v := range apiVersions {
		rest, ok := strings.CutPrefix(p, "/"+v+"/")
		if !ok {
			continue
		}
		if r.Method == http.MethodGet && rest == "models" {
			return route{route: RouteModels, version: v}
		}
		name, ok := strings.CutPrefix(rest, "models/")
		if !ok || name == "" || strings.Contains(name, "/") {
			return route{}
		}
		model, action, hasAction := strings.Cut(name, ":")
		switch {
		case model == "":
			return route{}
		case !hasAction && r.Method == http.MethodGet:
			return route{route: RouteModels, version: v, model: model}
		case hasAction && r.Method == http.MethodPost && (action == "generateContent" || action == "streamGenerateContent"):
			return route{route: RouteGenerate, version: v, model: model, action: action}
		case hasAction && r.Method == http.MethodPost && action == "countTokens":
			return route{route: RouteCountTokens, version: v, model: model, action: action}
		}
		return route{}
	}
	return route{}
}

// ServeHTTP serves the fake API. Order of checks: route (404), API key
// (403 when missing, 400 when wrong), body size (400), model (404), body
// validation (400), thought signatures (400), context window (400), then
// the scripted reply.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, tooLarge, readErr := fakekit.ReadBody(r, s.cfg.maxBody)
	rt := routeOf(r)
	rec := Recorded{
		RecordedBase: fakekit.NewRecordedBase(r, body), Model: rt.model, Action: rt.action,
	}
	s.kit.Record(rec)

	if rt.route == "" {
		s.writeError(w, 404, StatusNotFound, "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	if s.cfg.apiKey != "" {
		switch key := apiKey(r.Header, r.URL.Query()); {
		case key == "":
			s.writeError(w, 403, StatusPermissionDenied, MessageUnregisteredCaller)
			return
		case key != s.cfg.apiKey:
			s.writeError(w, 400, StatusInvalidArgument, MessageAPIKeyInvalid, apiKeyInvalidDetails()...)
			return
		}
	}
	switch {
	case tooLarge:
		s.writeError(w, 400, StatusInvalidArgument, fmt.Sprintf("Request payload size exceeds the limit: %d bytes.", s.cfg.maxBody))
		return
	case readErr != nil:
		s.writeError(w, 400, StatusInvalidArgument, "There was an error reading the body of your request.")
		return
	}

	switch rt.route {
	case RouteGenerate:
		s.serveGenerate(w, r, rec, rt)
	case RouteCountTokens:
		s.serveCountTokens(w, r, rec, rt)
	case RouteModels:
		s.serveModels(w, r, rec, rt)
	}
}

func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request, rec Recorded, rt route) {
	model, ok := s.findModel(rt.model)
	if !ok || !model.supports(rt.action) {
		s.writeError(w, 404, StatusNotFound, modelNotFoundMessage(rt.model, rt.version, "generateContent"))
		return
	}
	req, rerr := parseGenerate(rec.Body, false)
	if rerr == nil && s.signaturesRequired(model.Name) {
		rerr = s.checkSignatures(req)
	}
	if rerr == nil && req.GenerationConfig != nil {
		rerr = checkThinking(req.GenerationConfig.ThinkingConfig, model.Name)
	}
	if rerr != nil {
		s.writeError(w, 400, StatusInvalidArgument, rerr.message, rerr.details...)
		return
	}
	if n := CountTokens(model.Name, rec.Body); model.InputTokenLimit > 0 && n > model.InputTokenLimit {
		s.writeError(w, 400, StatusInvalidArgument, contextOverflowMessage(n, model.InputTokenLimit))
		return
	}

	reply, ok := s.kit.Next(RouteGenerate)
	if !ok {
		reply = s.cfg.defaultReply(rec)
	}
	if err := reply.validate(); err != nil {
		s.writeError(w, 500, StatusInternal, "geminifake: invalid scripted reply: "+err.Error())
		return
	}
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if reply.isFault() {
		s.writeFault(w, reply)
		return
	}
	stream := rt.action == "streamGenerateContent"
	if me := reply.MidStreamError; me != nil && !stream {
		code, status, msg := me.resolve()
		s.writeFault(w, Reply{Code: code, Status: status, Message: msg, Headers: reply.Headers})
		return
	}
	if !reply.hasContent() && reply.BlockReason == "" && reply.FinishReason == "" {
		reply.Text = Echo(rec).Text
	}
	res := s.resolve(reply, model, rec.Body)
	switch {
	case stream && r.URL.Query().Get("alt") == "sse":
		s.writeSSE(w, r, reply, res.chunks())
	case stream:
		s.writeJSONArray(w, reply, res.chunks())
	default:
		body := pretty(res.unary())
		cut := reply.CutAfterBytes
		if cut == 0 && reply.CutAfterChunks > 0 {
			cut = len(body) / 2
		}
		s.writeBody(w, 200, jsonContentType, body, cut, reply.Headers, true)
	}
}

func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request, rec Recorded, rt route) {
	model, ok := s.findModel(rt.model)
	if !ok || !model.supports("countTokens") {
		s.writeError(w, 404, StatusNotFound, modelNotFoundMessage(rt.model, rt.version, "countTokens"))
		return
	}
	if _, rerr := parseGenerate(rec.Body, true); rerr != nil {
		s.writeError(w, 400, StatusInvalidArgument, rerr.message, rerr.details...)
		return
	}
	reply, ok := s.kit.Next(RouteCountTokens)
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if ok && reply.isFault() {
		s.writeFault(w, reply)
		return
	}
	n := CountTokens(model.Name, rec.Body)
	if ok && reply.Usage.Prompt > 0 {
		n = reply.Usage.Prompt
	}
	body := pretty(struct {
		TotalTokens             int             `json:"totalTokens"`
		CachedContentTokenCount int             `json:"cachedContentTokenCount,omitempty"`
		PromptTokensDetails     []modalityCount `json:"promptTokensDetails"`
	}{n, reply.Usage.Cached, textTokens(n)})
	s.writeBody(w, 200, jsonContentType, body, reply.CutAfterBytes, reply.Headers, false)
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request, rec Recorded, rt route) {
	reply, ok := s.kit.Next(RouteModels)
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if ok && reply.isFault() {
		s.writeFault(w, reply)
		return
	}
	var body []byte
	if rt.model != "" {
		m, found := s.findModel(rt.model)
		if !found {
			s.writeError(w, 404, StatusNotFound, fmt.Sprintf("models/%s is not found for API version %s.", rt.model, rt.version))
			return
		}
		body = pretty(m.wire())
	} else {
		page, msg := modelPage(s.cfg.models, rec.Query())
		if msg != "" {
			s.writeError(w, 400, StatusInvalidArgument, msg)
			return
		}
		body = pretty(page)
	}
	s.writeBody(w, 200, jsonContentType, body, reply.CutAfterBytes, reply.Headers, false)
}

// resolve fills in the defaults of a stream error.
func (me *StreamError) resolve() (int, string, string) {
	code, status := me.Code, me.Status
	if code == 0 {
		code = CodeForStatus(cmpOr(status, StatusUnavailable))
	}
	if status == "" {
		status = StatusForCode(code)
	}
	return code, status, cmpOr(me.Message, defaultMessage(status))
}

const jsonContentType = "application/json; charset=UTF-8"

// writeFault writes a scripted error (or raw body).
func (s *Server) writeFault(w http.ResponseWriter, reply Reply) {
	code, status := reply.faultCodeAndStatus()
	if reply.RawBody != "" {
		ct := cmpOr(reply.RawContentType, jsonContentType)
		s.writeBody(w, code, ct, []byte(reply.RawBody), reply.CutAfterBytes, reply.Headers, false)
		return
	}
	msg := cmpOr(reply.Message, defaultMessage(status))
	body := pretty(errorBody{errorStatus{Code: code, Message: msg, Status: status, Details: reply.Details}})
	s.writeBody(w, code, jsonContentType, body, reply.CutAfterBytes, reply.Headers, false)
}

// writeError writes an error the fake itself detected.
func (s *Server) writeError(w http.ResponseWriter, code int, status, msg string, details ...json.RawMessage) {
	body := pretty(errorBody{errorStatus{Code: code, Message: msg, Status: status, Details: details}})
	s.writeBody(w, code, jsonContentType, body, 0, nil, false)
}

// writeBody writes a complete response; cut > 0 sends only that many bytes
// of it and then drops the connection.
func (s *Server) writeBody(w http.ResponseWriter, code int, contentType string, body []byte, cut int, extra map[string]string, tier bool) {
	h := w.Header()
	s.setStandardHeaders(h, tier)
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	for k, v := range extra {
		h.Set(k, v)
	}
	fakekit.WriteBody(w, code, body, cut)
}

// writeSSE streams chunks as data-only server-sent events (no event names,
// no [DONE]), applying the reply's stream faults, and flushes after each.
// The stream ends when the response does.
func (s *Server) writeSSE(w http.ResponseWriter, r *http.Request, reply Reply, chunks []wireResponse) {
	h := w.Header()
	s.setStandardHeaders(h, true)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Content-Disposition", "attachment")
	for k, v := range reply.Headers {
		h.Set(k, v)
	}
	sw, err := fakekit.StartStream(w, http.StatusOK)
	if err != nil {
		return
	}
	errAt, cutAt := s.faultPoints(reply, len(chunks))
	sep := s.cfg.separator
	for i := 0; ; i++ {
		if i == errAt {
			code, status, msg := reply.MidStreamError.resolve()
			data := streamJSON(errorBody{errorStatus{Code: code, Message: msg, Status: status}})
			_ = writeEvent(sw, data, sep)
			return
		}
		if i == cutAt {
			panic(http.ErrAbortHandler)
		}
		if i == len(chunks) || r.Context().Err() != nil {
			return
		}
		if writeEvent(sw, streamJSON(chunks[i]), sep) != nil {
			return
		}
	}
}

// faultPoints is the chunk index of the mid-stream error and of the cut
// (-1 for none).
func (s *Server) faultPoints(reply Reply, n int) (errAt, cutAt int) {
	errAt, cutAt = -1, -1
	if me := reply.MidStreamError; me != nil {
		errAt = min(me.AfterChunks, n)
	}
	if reply.CutAfterChunks > 0 {
		cutAt = min(reply.CutAfterChunks, n)
	}
	return errAt, cutAt
}

// writeEvent writes one `data:` event and flushes it.
func writeEvent(sw *fakekit.StreamWriter, data []byte, sep string) error {
	return sw.Printf("data: %s%s", data, sep)
}

// writeJSONArray answers streamGenerateContent without alt=sse the way the
// API does: one JSON array of the chunks, written element by element.
func (s *Server) writeJSONArray(w http.ResponseWriter, reply Reply, chunks []wireResponse) {
	h := w.Header()
	s.setStandardHeaders(h, true)
	h.Set("Content-Type", jsonContentType)
	for k, v := range reply.Headers {
		h.Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	sw := fakekit.NewStreamWriter(w)
	errAt, cutAt := s.faultPoints(reply, len(chunks))
	for i := 0; ; i++ {
		sep := ",\r\n"
		if i == 0 {
			sep = "["
		}
		if i == errAt {
			code, status, msg := reply.MidStreamError.resolve()
			el := pretty(errorBody{errorStatus{Code: code, Message: msg, Status: status}})
			_, _ = fmt.Fprintf(w, "%s%s]", sep, bytes.TrimSuffix(el, []byte("\n")))
			return
		}
		if i == cutAt {
			sw.Cut()
		}
		if i == len(chunks) {
			if i == 0 {
				_, _ = io.WriteString(w, "[")
			}
			_, _ = io.WriteString(w, "]")
			return
		}
		_ = sw.Printf("%s%s", sep, bytes.TrimSuffix(pretty(chunks[i]), []byte("\n")))
	}
}

// setStandardHeaders sets the headers Google's front end sends on every
// response. There are no rate-limit headers: the API has none.
func (s *Server) setStandardHeaders(h http.Header, tier bool) {
	h.Set("Date", s.cfg.now().UTC().Format(http.TimeFormat))
	h["Vary"] = []string{"Origin", "X-Origin", "Referer"}
	h.Set("Server", "scaffolding on HTTPServer2")
	h.Set("X-Xss-Protection", "0")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Server-Timing", fmt.Sprintf("gfet4t7; dur=%d", 150+s.rnd.IntN(1850)))
	h.Set("Alt-Svc", `h3=":443"; ma=2592000,h3-29=":443"; ma=2592000`)
	if tier && s.cfg.serviceTier != "" {
		h.Set("X-Gemini-Service-Tier", s.cfg.serviceTier)
	}
}
