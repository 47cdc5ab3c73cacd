package openaifake

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// ServeHTTP serves the fake API. Order of checks: route (404), API key
// (401), body (400), model (404, with [WithModelCheck]), context window
// (400, or a silent truncation on Ollama), then the scripted reply.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(r.Body)
	rec := Recorded{
		RecordedBase: fakekit.NewRecordedBase(r, body),
	}
	if s.cfg.flavor == FlavorOpenAI {
		rec.RequestID = "req_" + s.rnd.String(hexChars, 32)
	}
	s.kit.Record(rec)

	route, modelID, status := s.routeOf(r)
	if route == "" {
		s.writeNoRoute(w, r, rec, status)
		return
	}
	if s.cfg.apiKey != "" && route != RouteHealth {
		key := bearer(r.Header)
		switch s.cfg.flavor {
		case FlavorOpenAI:
			if key == "" {
				s.writeFault(w, rec, MissingAPIKey())
				return
			}
			if key != s.cfg.apiKey {
				s.writeFault(w, rec, InvalidAPIKey(key))
				return
			}
		case FlavorVLLM:
			if key != s.cfg.apiKey {
				s.writeBody(w, rec, 401, "application/json", []byte(`{"error":"Unauthorized"}`), 0, nil)
				return
			}
		}
	}
	if readErr != nil {
		s.writeError(w, rec, apiError{status: 400, typ: TypeInvalidRequest, message: "There was an error reading the body of your request."})
		return
	}
	switch route {
	case RouteChat:
		s.serveChat(w, r, rec)
	case RouteResponses:
		s.serveResponses(w, r, rec)
	case RouteModels:
		s.serveModels(w, r, rec, modelID)
	case RouteHealth:
		s.serveHealth(w, r, rec)
	}
}

// routeOf maps a request to its route. An unknown one gives route "" and
// the status to answer (404, or 405 for vLLM's known paths).
func (s *Server) routeOf(r *http.Request) (route Route, modelID string, status int) {
	p, m := r.URL.Path, r.Method
	f := s.cfg.flavor
	type entry struct {
		method, path string
		route        Route
	}
	table := []entry{
		{http.MethodPost, "/v1/chat/completions", RouteChat},
		{http.MethodGet, "/v1/models", RouteModels},
	}
	switch f {
	case FlavorOpenAI:
		table = append(table, entry{http.MethodPost, "/v1/responses", RouteResponses})
	case FlavorVLLM:
		table = append(table, entry{http.MethodGet, "/health", RouteHealth})
	case FlavorOllama:
		table = append(table,
			entry{http.MethodGet, "/", RouteHealth},
			entry{http.MethodHead, "/", RouteHealth},
			entry{http.MethodGet, "/api/version", RouteHealth})
	}
	pathKnown := false
	for _, e := range table {
		if e.path == p {
			pathKnown = true
			if e.method == m {
				return e.route, "", 0
			}
		}
	}
	if f != FlavorVLLM && m == http.MethodGet && strings.HasPrefix(p, "/v1/models/") {
		if id := strings.TrimPrefix(p, "/v1/models/"); id != "" {
			return RouteModels, id, 0
		}
	}
	if pathKnown && f == FlavorVLLM {
		return "", "", http.StatusMethodNotAllowed
	}
	return "", "", http.StatusNotFound
}

// writeNoRoute answers an unknown route as the flavour's server does:
// OpenAI with an "Invalid URL" error, Ollama (gin) with "404 page not
// found", vLLM (FastAPI) with {"detail":"Not Found"}.
func (s *Server) writeNoRoute(w http.ResponseWriter, r *http.Request, rec Recorded, status int) {
	switch s.cfg.flavor {
	case FlavorOllama:
		s.writeBody(w, rec, status, "text/plain", []byte("404 page not found"), 0, nil)
	case FlavorVLLM:
		detail := "Not Found"
		if status == http.StatusMethodNotAllowed {
			detail = "Method Not Allowed"
		}
		s.writeBody(w, rec, status, "application/json", marshal(struct {
			Detail string `json:"detail"`
		}{detail}, false), 0, nil)
	default:
		s.writeError(w, rec, apiError{status: status, typ: TypeInvalidRequest, message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
	}
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, rec Recorded) {
	req, perr := s.parseChat(rec.Body)
	if perr != nil {
		s.writeError(w, rec, *perr)
		return
	}
	if s.cfg.modelCheck {
		if _, ok := s.findModel(req.model); !ok {
			s.writeFault(w, rec, s.modelNotFound(req.model))
			return
		}
	}
	promptCap := 0
	if window := s.contextWindow(req.model); window > 0 {
		prompt := CountTokens(rec.Body)
		switch s.cfg.flavor {
		case FlavorOllama:
			if prompt > window {
				if s.cfg.overflowError {
					s.writeFault(w, rec, OllamaContextLengthExceeded())
					return
				}
				promptCap = window
			}
		case FlavorVLLM:
			completion := cmpOr(req.maxCompletionTokens, req.maxTokens)
			if prompt+completion > window {
				s.writeFault(w, rec, VLLMContextLengthExceeded(window, prompt, completion))
				return
			}
		default:
			if prompt > window {
				s.writeFault(w, rec, ContextLengthExceeded(window, prompt))
				return
			}
		}
	}
	if s.cfg.flavor == FlavorOpenAI {
		s.admit()
	}

	reply, ok := s.kit.Next(RouteChat)
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
	res := s.resolve(reply, req, rec.Body, promptCap)
	if s.cfg.flavor == FlavorOpenAI {
		s.consume(res.usage.Prompt + res.usage.Completion)
	}
	if req.stream {
		s.writeStream(w, r, rec, reply, res)
		return
	}
	var body []byte
	switch s.cfg.flavor {
	case FlavorOllama:
		body = s.ollamaCompletion(res)
	case FlavorVLLM:
		body = s.vllmCompletion(res)
	default:
		body = s.openAICompletion(res)
	}
	cut := reply.CutAfterBytes
	if cut == 0 && reply.CutAfterChunks > 0 {
		cut = len(body) / 2
	}
	s.writeBody(w, rec, 200, "application/json", body, cut, &reply)
}

// modelNotFound is the flavour's 404 for an unknown model.
func (s *Server) modelNotFound(model string) Reply {
	switch s.cfg.flavor {
	case FlavorOllama:
		return OllamaModelNotFound(model)
	case FlavorVLLM:
		return VLLMModelNotFound(model)
	}
	return ModelNotFound(model)
}

type wireModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type vllmModel struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      any               `json:"parent"`
	MaxModelLen int               `json:"max_model_len"`
	Permission  []vllmPermissions `json:"permission"`
}

type vllmPermissions struct {
	ID                 string `json:"id"`
	Object             string `json:"object"`
	Created            int64  `json:"created"`
	AllowCreateEngine  bool   `json:"allow_create_engine"`
	AllowSampling      bool   `json:"allow_sampling"`
	AllowLogprobs      bool   `json:"allow_logprobs"`
	AllowSearchIndices bool   `json:"allow_search_indices"`
	AllowView          bool   `json:"allow_view"`
	AllowFineTuning    bool   `json:"allow_fine_tuning"`
	Organization       string `json:"organization"`
	Group              any    `json:"group"`
	IsBlocking         bool   `json:"is_blocking"`
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request, rec Recorded, modelID string) {
	reply, ok := s.kit.Next(RouteModels)
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if ok && reply.isFault() {
		s.writeFault(w, rec, reply)
		return
	}
	wm := func(m Model) wireModel { return wireModel{m.ID, "model", m.Created.Unix(), s.ownedBy(m)} }
	var body []byte
	if modelID != "" {
		i := slices.IndexFunc(s.cfg.models, func(m Model) bool { return m.ID == modelID })
		if i < 0 {
			if s.cfg.flavor == FlavorOllama {
				s.writeFault(w, rec, ErrorReply(404, "", "", fmt.Sprintf("model '%s' not found", modelID)))
				return
			}
			nf := ErrorReply(404, TypeInvalidRequest, CodeModelNotFound, fmt.Sprintf("The model '%s' does not exist", modelID))
			nf.ErrorParam = "model"
			s.writeFault(w, rec, nf)
			return
		}
		if s.cfg.flavor == FlavorOllama {
			body = append(marshal(wm(s.cfg.models[i]), true), '\n')
		} else {
			body = marshalIndent(wm(s.cfg.models[i]), "  ")
		}
	} else {
		switch s.cfg.flavor {
		case FlavorVLLM:
			data := []vllmModel{}
			for _, m := range s.cfg.models {
				data = append(data, vllmModel{
					ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: s.ownedBy(m), Root: m.ID,
					MaxModelLen: m.ContextWindow,
					Permission: []vllmPermissions{{
						ID: "modelperm-" + s.rnd.String(hexChars, 32), Object: "model_permission", Created: m.Created.Unix(),
						AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
					}},
				})
			}
			body = marshal(struct {
				Object string      `json:"object"`
				Data   []vllmModel `json:"data"`
			}{"list", data}, false)
		default:
			data := []wireModel{}
			for _, m := range s.cfg.models {
				data = append(data, wm(m))
			}
			list := struct {
				Object string      `json:"object"`
				Data   []wireModel `json:"data"`
			}{"list", data}
			if s.cfg.flavor == FlavorOllama {
				body = append(marshal(list, true), '\n')
			} else {
				body = marshalIndent(list, "  ")
			}
		}
	}
	s.writeBody(w, rec, 200, "application/json", body, reply.CutAfterBytes, &reply)
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request, rec Recorded) {
	reply, ok := s.kit.Next(RouteHealth)
	if !s.kit.Hold(r, reply.Hold) {
		return
	}
	if ok && reply.isFault() {
		s.writeFault(w, rec, reply)
		return
	}
	switch {
	case s.cfg.flavor == FlavorVLLM:
		s.writeBody(w, rec, 200, "", nil, 0, &reply)
	case r.URL.Path == "/api/version":
		s.writeBody(w, rec, 200, "application/json; charset=utf-8", marshal(struct {
			Version string `json:"version"`
		}{s.cfg.ollamaVersion}, true), reply.CutAfterBytes, &reply)
	default:
		s.writeBody(w, rec, 200, "text/plain; charset=utf-8", []byte("Ollama is running"), reply.CutAfterBytes, &reply)
	}
}

// writeFault writes a scripted error (or raw body).
func (s *Server) writeFault(w http.ResponseWriter, rec Recorded, reply Reply) {
	if reply.RawBody != "" {
		ct := cmpOr(reply.RawContentType, "application/json")
		s.writeBody(w, rec, reply.faultStatus(), ct, []byte(reply.RawBody), reply.CutAfterBytes, &reply)
		return
	}
	e := reply.apiError()
	s.writeBody(w, rec, e.status, "application/json", s.errorBody(e), reply.CutAfterBytes, &reply)
}

// writeError writes an error the fake itself detected.
func (s *Server) writeError(w http.ResponseWriter, rec Recorded, e apiError) {
	s.writeBody(w, rec, e.status, "application/json", s.errorBody(e), 0, nil)
}

// writeBody writes a complete response; cut > 0 sends only that many bytes
// of it and then drops the connection. reply, when not nil, adds its
// headers.
func (s *Server) writeBody(w http.ResponseWriter, rec Recorded, status int, contentType string, body []byte, cut int, reply *Reply) {
	h := w.Header()
	s.setStandardHeaders(h, rec)
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	s.setReplyHeaders(h, reply)
	fakekit.WriteBody(w, status, body, cut)
}

// writeStream writes the SSE chunks of res, applying the reply's stream
// faults, and flushes after each chunk.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, rec Recorded, reply Reply, res *resolved) {
	h := w.Header()
	s.setStandardHeaders(h, rec)
	ct := "text/event-stream; charset=utf-8"
	if s.cfg.flavor == FlavorOllama {
		ct = "text/event-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	s.setReplyHeaders(h, &reply)
	sw, err := fakekit.StartStream(w, http.StatusOK)
	if err != nil {
		return
	}
	var chunks [][]byte
	switch s.cfg.flavor {
	case FlavorOllama:
		chunks = s.ollamaChunks(res)
	case FlavorVLLM:
		chunks = s.vllmChunks(res)
	default:
		chunks = s.openAIChunks(res)
	}
	at := func(n int) int {
		if n <= 0 {
			return -1
		}
		return min(n, len(chunks))
	}
	errAt, cutAt, endAt, stallAt := -1, at(reply.CutAfterChunks), at(reply.EndAfterChunks), at(reply.StallAfterChunks)
	if me := reply.MidStreamError; me != nil {
		errAt = min(me.AfterChunks, len(chunks))
	}
	for i := 0; ; i++ {
		if i == stallAt && !s.kit.Stall(r, reply.Stall) {
			return
		}
		if i == errAt {
			if writeData(sw, s.streamErrorData(reply.MidStreamError)) != nil {
				return
			}
			if s.cfg.flavor == FlavorVLLM && !s.cfg.noDone {
				_ = writeData(sw, []byte("[DONE]"))
			}
			return
		}
		if i == cutAt {
			panic(http.ErrAbortHandler)
		}
		if i == endAt || r.Context().Err() != nil {
			return
		}
		if i == len(chunks) {
			break
		}
		if writeData(sw, chunks[i]) != nil {
			return
		}
	}
	if !s.cfg.noDone {
		_ = writeData(sw, []byte("[DONE]"))
	}
}

// writeData writes one `data: …` event and flushes it.
func writeData(sw *fakekit.StreamWriter, data []byte) error {
	return sw.Printf("data: %s\n\n", data)
}

// setStandardHeaders sets the headers the flavour's server sends on every
// response: on OpenAI x-request-id, openai-version, openai-processing-ms
// and the x-ratelimit-* set; nothing on Ollama and vLLM.
func (s *Server) setStandardHeaders(h http.Header, rec Recorded) {
	if s.cfg.flavor != FlavorOpenAI {
		return
	}
	h.Set("x-request-id", rec.RequestID)
	h.Set("openai-version", "2020-10-01")
	h.Set("openai-processing-ms", strconv.Itoa(80+s.rnd.IntN(900)))
	s.setRateLimitHeaders(h)
}

// setReplyHeaders adds a reply's own headers: retry-after, the exhausted
// bucket of a scripted 429 (OpenAI only), then Reply.Headers.
func (s *Server) setReplyHeaders(h http.Header, reply *Reply) {
	if reply == nil {
		return
	}
	if reply.RetryAfter > 0 {
		retryAfterHeaders(h, reply.RetryAfter)
	}
	if reply.RateLimitReset > 0 && s.cfg.flavor == FlavorOpenAI {
		bucket := "tokens"
		if reply.ErrorType == TypeRequests {
			bucket = "requests"
		}
		h.Set("x-ratelimit-remaining-"+bucket, "0")
		h.Set("x-ratelimit-reset-"+bucket, FormatDuration(reply.RateLimitReset))
	}
	for k, v := range reply.Headers {
		h.Set(k, v)
	}
}
