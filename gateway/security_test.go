package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/gateway"
)

const chatBody = `{"model":"builder","messages":[{"role":"user","content":"hi"}]}`

const messagesBody = `{"model":"builder","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`

// call sends one raw request: host overrides the Host header when set,
// hdr are header name/value pairs. It returns the status and the decoded
// error body.
func (w *world) call(t *testing.T, method, path, host, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := w.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func (w *world) port(t *testing.T) string {
	_, p, err := net.SplitHostPort(w.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// errType is error.type (both protocols) and error.code (OpenAI).
func errType(m map[string]any) (string, string) {
	e, _ := m["error"].(map[string]any)
	typ, _ := e["type"].(string)
	code, _ := e["code"].(string)
	return typ, code
}

// A DNS-rebinding page reaches the gateway under its own host name: every
// route answers only to the listen address, its loopback equivalents and
// gateway.allowed_hosts, others get a 421 in the caller's protocol.
func TestHostMustNameTheGateway(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.AllowedHosts = []string{"gw.internal"} }))
	port := w.port(t)
	auth := []string{"Authorization", "Bearer " + w.key, "Content-Type", "application/json"}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1", "localhost:1", "192.0.2.1:" + port} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", host, chatBody, auth...); st != 421 {
			t.Errorf("chat with Host %s = %d, want 421", host, st)
		} else if _, code := errType(m); code != "misdirected_request" {
			t.Errorf("chat with Host %s: error %v, want OpenAI shape with code misdirected_request", host, m)
		}
		if st, m := w.call(t, "POST", "/v1/messages", host, messagesBody, auth...); st != 421 || m["type"] != "error" {
			t.Errorf("messages with Host %s = %d %v, want 421 in Anthropic shape", host, st, m)
		}
		for _, path := range []string{"/healthz", "/v1/models", "/console/"} {
			if st, _ := w.call(t, "GET", path, host, "", auth...); st != 421 {
				t.Errorf("GET %s with Host %s = %d, want 421", path, host, st)
			}
		}
	}
	for _, host := range []string{"", "127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "127.0.0.2:" + port, "[::1]:" + port, "gw.internal", "gw.internal:" + port} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", host, chatBody, auth...); st != 200 {
			t.Errorf("chat with Host %q = %d %v, want 200", host, st, m)
		}
	}
}

// A web page can send a "simple" request (text/plain, no preflight) to the
// gateway: with authentication off, the browser's cross-site markers are
// refused with a 403 before anything is called.
func TestCrossSiteBrowserRequestsAreRefused(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.NoAuth = true }))
	own := "http://127.0.0.1:" + w.port(t)
	jsonCT := []string{"Content-Type", "application/json"}
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"the issue's request", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}},
		{"evil origin", append([]string{"Origin", "https://evil.example"}, jsonCT...)},
		{"origin of another port", append([]string{"Origin", "http://127.0.0.1:1"}, jsonCT...)},
		{"null origin", append([]string{"Origin", "null"}, jsonCT...)},
		{"cross-site", append([]string{"Sec-Fetch-Site", "cross-site"}, jsonCT...)},
		{"same-site", append([]string{"Sec-Fetch-Site", "same-site"}, jsonCT...)},
		{"own origin but cross-site", append([]string{"Origin", own, "Sec-Fetch-Site", "cross-site"}, jsonCT...)},
	} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, tc.hdr...); st != 403 {
			t.Errorf("%s: chat = %d %v, want 403", tc.name, st, m)
		} else if _, code := errType(m); code != "permission_denied" {
			t.Errorf("%s: chat error %v, want permission_denied", tc.name, m)
		}
		if st, m := w.call(t, "POST", "/v1/messages", "", messagesBody, tc.hdr...); st != 403 || m["type"] != "error" {
			t.Errorf("%s: messages = %d %v, want 403 in Anthropic shape", tc.name, st, m)
		}
		if st, _ := w.call(t, "GET", "/v1/models", "", "", tc.hdr...); st != 403 {
			t.Errorf("%s: models = %d, want 403", tc.name, st)
		}
	}
	if n := len(w.anth.Requests()) + len(w.oai.Requests()); n != 0 {
		t.Errorf("refused requests reached the providers %d times", n)
	}
	for _, hdr := range [][]string{
		append([]string{"Origin", own, "Sec-Fetch-Site", "same-origin"}, jsonCT...),
		append([]string{"Sec-Fetch-Site", "none"}, jsonCT...),
		append([]string{"Origin", "null", "Sec-Fetch-Site", "same-origin"}, jsonCT...),
	} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, hdr...); st != 200 {
			t.Errorf("%v: chat = %d %v, want 200", hdr, st, m)
		}
	}
}

// JSON routes take a JSON body only: text/plain (what a page can send
// without a preflight), form encodings and no Content-Type get a 415 in the
// caller's protocol.
func TestJSONRoutesRequireJSON(t *testing.T) {
	w := newWorld(t)
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		hdr := []string{"Authorization", "Bearer " + w.key}
		if ct != "" {
			hdr = append(hdr, "Content-Type", ct)
		}
		for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
			if st, m := w.call(t, "POST", path, "", chatBody, hdr...); st != 415 {
				t.Errorf("%s with %q = %d %v, want 415", path, ct, st, m)
			} else if _, code := errType(m); code != "unsupported_media_type" {
				t.Errorf("%s with %q: error %v", path, ct, m)
			}
		}
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			if st, m := w.call(t, "POST", path, "", messagesBody, hdr...); st != 415 || m["type"] != "error" {
				t.Errorf("%s with %q = %d %v, want 415 in Anthropic shape", path, ct, st, m)
			}
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, "Authorization", "Bearer "+w.key, "Content-Type", ct); st != 200 {
			t.Errorf("chat with %q = %d %v, want 200", ct, st, m)
		}
	}
}

// rawHeaders opens a connection and sends a request's headers announcing
// a body it never sends.
func rawHeaders(t *testing.T, w *world, key string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", w.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		w.srv.Addr(), key, len(chatBody))
	return c
}

// waitInFlight polls until the server has n requests in flight.
func waitInFlight(t *testing.T, w *world, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.srv.InFlight() != n {
		if time.Now().After(deadline) {
			t.Fatalf("in flight = %d, want %d", w.srv.InFlight(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A client that sends its headers and never its body is answered 408 once
// gateway.body_timeout passes, and its slot is freed.
func TestBodyReadDeadline(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.BodyTimeout = 50 * time.Millisecond }))
	c := rawHeaders(t, w, w.key)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang fails, not the timing
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never came: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !strings.Contains(string(b), "gateway.body_timeout") {
		t.Errorf("stalled body = %d %s, want 408 naming gateway.body_timeout", resp.StatusCode, b)
	}
	waitInFlight(t, w, 0)
	// Clients that send their body are served as before.
	if _, err := w.openai(w.key).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")}); err != nil {
		t.Errorf("after a stalled client: %v", err)
	}
}

// A client that never finishes its headers is cut after
// gateway.header_timeout.
func TestHeaderReadDeadline(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.HeaderTimeout = 50 * time.Millisecond }))
	c, err := net.Dial("tcp", w.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n", w.srv.Addr())
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("connection with unfinished headers was not closed by the server: %v", err)
	}
}

// One key cannot hold more than gateway.max_in_flight_per_key requests,
// and another key is served meanwhile.
func TestPerKeyInFlightLimit(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.MaxInFlightPerKey = 2 }))
	other, _, err := w.keys.Create(gateway.KeySpec{Name: "other", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	rawHeaders(t, w, w.key)
	rawHeaders(t, w, w.key)
	waitInFlight(t, w, 2)
	_, err = w.openai(w.key).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	e := openAIErr(t, err)
	if e.StatusCode != 503 || e.Response.Header.Get("Retry-After") != "1" || !strings.Contains(e.Message, "gateway.max_in_flight_per_key") {
		t.Errorf("third request of one key = %d %q retry-after %q", e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
	}
	if _, err := w.openai(other).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")}); err != nil {
		t.Errorf("another key while the first holds its limit: %v", err)
	}
}
