package nativecorpus_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/gateway/internal/nativecorpus"
	"github.com/cortexbuild/cortexbuild/provider"
)

// call is one request to the capture server, as a script sees it.
type call struct {
	proto provider.Protocol
	path  string
	body  []byte
	js    gjson.Result
	flow  string
	n     int // its index among the flow's calls
}

// seed names the call in generated ids.
func (c *call) seed() string { return fmt.Sprint(c.flow, "/", c.n) }

// stream says the request asks for a streamed answer.
func (c *call) stream() bool { return c.js.Get("stream").Bool() }

// answer is a script's answer to a call.
type answer struct {
	status int
	body   []byte   // a unary answer
	events [][]byte // a stream: each event with its framing
	note   string   // what the exchange shows, for the corpus
	what   string   // a short slug for the file name
}

// script answers the calls of one flow.
type script func(c *call) answer

// captureServer plays the providers on loopback and records every
// exchange.
type captureServer struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	flow   string
	script script
	recs   []captured
	other  []string // requests to paths no provider API serves
	start  time.Time
}

func newCaptureServer(t *testing.T) *captureServer {
	s := &captureServer{t: t, start: time.Now().UTC().Truncate(time.Second)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL (no path).
func (s *captureServer) URL() string { return s.srv.URL }

// captured is a recorded exchange and the slug of its file name.
type captured struct {
	ex   nativecorpus.Exchange
	what string
}

// run sets the script for flow, runs f, and returns the exchanges the
// flow made (with unknown paths logged).
func (s *captureServer) run(flow string, sc script, f func()) []captured {
	s.mu.Lock()
	s.flow, s.script, s.recs, s.other = flow, sc, nil, nil
	s.mu.Unlock()
	f()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.other {
		s.t.Logf("%s: a request no provider API serves (answered 404, not stored): %s", flow, o)
	}
	out := s.recs
	s.script, s.recs = nil, nil
	return out
}

func protocolOf(path string) provider.Protocol {
	p, _, _ := strings.Cut(path, "?")
	switch {
	case strings.HasSuffix(p, "/messages/count_tokens"):
		return nativecorpus.ProtoCountTokens
	case strings.HasSuffix(p, "/messages"):
		return provider.ProtoMessages
	case strings.HasSuffix(p, "/chat/completions"):
		return provider.ProtoChat
	case strings.HasSuffix(p, "/responses"):
		return provider.ProtoResponses
	}
	return ""
}

func (s *captureServer) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	proto := protocolOf(r.URL.RequestURI())
	s.mu.Lock()
	sc, flow, n := s.script, s.flow, len(s.recs)
	if proto == "" || r.Method != http.MethodPost || sc == nil {
		s.other = append(s.other, fmt.Sprintf("%s %s (%d bytes)", r.Method, r.URL.RequestURI(), len(body)))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`)
		return
	}
	s.mu.Unlock()

	c := &call{proto: proto, path: r.URL.RequestURI(), body: body, js: gjson.ParseBytes(body), flow: flow, n: n}
	a := sc(c)
	if a.status == 0 {
		a.status = http.StatusOK
	}
	stream := a.events != nil
	h := w.Header()
	s.headers(h, c, stream)
	rec := nativecorpus.Exchange{
		Flow: flow, Note: a.note, Protocol: proto,
		Request: nativecorpus.Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body},
	}
	rec.Response = nativecorpus.Response{Status: a.status, Header: h.Clone(), Stream: stream}
	w.WriteHeader(a.status)
	if stream {
		var all bytes.Buffer
		fl, _ := w.(http.Flusher)
		for _, ev := range a.events {
			all.Write(ev)
			if _, err := w.Write(ev); err != nil {
				s.t.Errorf("%s: writing the answer to %s: %v", flow, c.path, err)
				break
			}
			if fl != nil {
				fl.Flush()
			}
		}
		rec.Response.Body = all.Bytes()
	} else {
		rec.Response.Body = a.body
		if _, err := w.Write(a.body); err != nil {
			s.t.Errorf("%s: writing the answer to %s: %v", flow, c.path, err)
		}
	}
	s.mu.Lock()
	s.recs = append(s.recs, captured{rec, a.what})
	s.mu.Unlock()
}

// headers sets the answer's headers as the provider sets them.
func (s *captureServer) headers(h http.Header, c *call, stream bool) {
	ct := "application/json"
	if stream {
		ct = "text/event-stream; charset=utf-8"
	}
	h.Set("Content-Type", ct)
	reset := s.start.Add(time.Minute).Format(time.RFC3339)
	switch c.proto {
	case provider.ProtoMessages, nativecorpus.ProtoCountTokens:
		h.Set("request-id", ident("req_011C", "req"+c.seed(), 20))
		h.Set("anthropic-organization-id", uuid("org"))
		if stream {
			h.Set("Cache-Control", "no-cache")
		}
		for _, b := range []struct {
			name         string
			limit, spent int
		}{{"requests", 4000, 1}, {"input-tokens", 2000000, len(c.body) / 4}, {"output-tokens", 400000, 0}, {"tokens", 2400000, len(c.body) / 4}} {
			rem := b.limit - b.spent
			if b.name != "requests" {
				rem -= rem % 1000
			}
			h.Set("anthropic-ratelimit-"+b.name+"-limit", strconv.Itoa(b.limit))
			h.Set("anthropic-ratelimit-"+b.name+"-remaining", strconv.Itoa(rem))
			h.Set("anthropic-ratelimit-"+b.name+"-reset", reset)
		}
	default:
		h.Set("x-request-id", "req_"+hexID("req"+c.seed(), 32))
		h.Set("openai-processing-ms", strconv.Itoa(180+len(c.body)%400))
		h.Set("openai-version", "2020-10-01")
		h.Set("x-ratelimit-limit-requests", "10000")
		h.Set("x-ratelimit-remaining-requests", "9999")
		h.Set("x-ratelimit-reset-requests", "6ms")
		h.Set("x-ratelimit-limit-tokens", "30000000")
		h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(30000000-len(c.body)/4))
		h.Set("x-ratelimit-reset-tokens", "0s")
	}
}

// tokens estimates a body's prompt tokens.
func tokens(body []byte) int { return len(body)/4 + 7 }

// ---- answers in each protocol, unary or streamed as the call asks ----

// anthropicAnswer answers a Messages call with content.
func anthropicAnswer(c *call, note, stop string, content ...obj) answer {
	return anthropicMessage(c, note, aMessage{stop: stop, content: content})
}

// anthropicMessage fills m's id, model and token counts from c and answers.
func anthropicMessage(c *call, note string, m aMessage) answer {
	m.id = ident("msg_01", "msg"+c.seed(), 22)
	m.model = c.js.Get("model").String()
	m.in = tokens(c.body)
	if m.out == 0 {
		m.out = 12 + len(marshal(m.content))/4
	}
	if c.stream() {
		return answer{events: m.events(), note: note}
	}
	return answer{body: m.json(), note: note}
}

// countAnswer answers count_tokens.
func countAnswer(c *call, note string, n int) answer {
	return answer{body: marshal(o("input_tokens", n)), note: note}
}

// responsesAnswer answers a Responses call with output items.
func responsesAnswer(c *call, note string, output ...obj) answer {
	var req map[string]json.RawMessage
	_ = json.Unmarshal(c.body, &req)
	r := rResponse{
		id: "resp_" + hexID("resp"+c.seed(), 48), model: c.js.Get("model").String(),
		created: 1796400000 + int64(c.n)*7, output: output, in: tokens(c.body), req: req,
	}
	r.cached = r.in / 2
	r.out = 20 + len(marshal(output))/8
	r.reasoning = r.out / 2
	if c.stream() {
		return answer{events: r.events(), note: note}
	}
	return answer{body: r.json(), note: note}
}

// chatAnswer answers a Chat Completions call with text or tool calls.
func chatAnswer(c *call, note, text string, calls ...obj) answer {
	tier := c.js.Get("service_tier").String()
	if tier == "" || tier == "auto" {
		tier = "default"
	}
	cc := cCompletion{
		id: "chatcmpl-" + ident("", "chat"+c.seed(), 29), model: c.js.Get("model").String(),
		created: 1796400000 + int64(c.n)*7, text: text, calls: calls, in: tokens(c.body), tier: tier,
	}
	cc.out = 10 + len(text)/4 + len(marshal(calls))/4
	if c.stream() {
		return answer{events: cc.events(), note: note}
	}
	return answer{body: cc.json(), note: note}
}
