package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/agentmark"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// Every answer carries the request id the protocol's SDKs read
// (request-id for Anthropic's, x-request-id for OpenAI's), refusals
// before any call included: the official SDKs' errors name it.
func TestEveryAnswerCarriesARequestID(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.MaxBodyBytes = 1 << 10 }))
	ctx := ctxT(t)

	_, err := w.anthropic("cbk_wrong").Messages.New(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 10, Messages: userMsgA("hi")})
	if ae := anthropicErr(t, err); ae.StatusCode != 401 || !strings.HasPrefix(ae.RequestID, "inv_") {
		t.Errorf("Anthropic SDK, wrong key: %d, RequestID %q; want 401 with the request id", ae.StatusCode, ae.RequestID)
	}
	_, err = w.openai("cbk_wrong").Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 401 || !strings.HasPrefix(e.Response.Header.Get("x-request-id"), "inv_") {
		t.Errorf("OpenAI SDK, wrong key: %d, x-request-id %q; want 401 with the request id", e.StatusCode, e.Response.Header.Get("x-request-id"))
	}
	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "builder", MaxTokens: 10, Messages: userMsgA(strings.Repeat("x", 2<<10))})
	if ae := anthropicErr(t, err); ae.StatusCode != 413 || !strings.HasPrefix(ae.RequestID, "inv_") {
		t.Errorf("Anthropic SDK, body over the limit: %d, RequestID %q; want 413 with the request id", ae.StatusCode, ae.RequestID)
	}

	for _, c := range []struct {
		method, path, host string
		hdr                []string
		status             int
	}{
		{"POST", "/v1/messages", "", []string{"Content-Type", "application/json"}, 401},
		{"GET", "/v1/messages", "", bearer(w.key), 405},
		{"POST", "/v1/chat/completions", "", bearer(w.key), 413},
		{"POST", "/v1/nowhere", "", bearer(w.key), 404},
		{"POST", "/v1/messages", "evil.example:80", bearer(w.key), 421},
	} {
		req, err := http.NewRequestWithContext(ctx, c.method, w.url+c.path, strings.NewReader(strings.Repeat("x", 2<<10)))
		if err != nil {
			t.Fatal(err)
		}
		if c.host != "" {
			req.Host = c.host
		}
		for i := 0; i+1 < len(c.hdr); i += 2 {
			req.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rid, xrid := resp.Header.Get("request-id"), resp.Header.Get("x-request-id")
		if resp.StatusCode != c.status || !strings.HasPrefix(rid, "inv_") || xrid != rid {
			t.Errorf("%s %s = %d, request-id %q, x-request-id %q; want %d carrying both", c.method, c.path, resp.StatusCode, rid, xrid, c.status)
		}
		if strings.HasPrefix(c.path, "/v1/messages") && !strings.Contains(string(b), `"request_id":"`+rid+`"`) {
			t.Errorf("%s %s: the Anthropic error body does not name the request id: %s", c.method, c.path, b)
		}
	}
}

// A body over gateway.max_body_bytes (32 MiB by default) gets the 413 in
// its protocol's shape, rather than a connection reset, from a client that
// sends its whole 33 MiB body before reading the answer (as curl and
// Python's http.client do), with and without a Content-Length.
func TestOversizedBodyGets413(t *testing.T) {
	w := newWorld(t)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for _, c := range []struct {
		path    string
		chunked bool
		want    string
	}{
		{"/v1/chat/completions", false, `"code":"request_too_large"`},
		{"/v1/messages", true, `"type":"request_too_large"`},
	} {
		conn, err := net.Dial("tcp", w.srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(60 * time.Second)) // a hang fails, not the timing
		length := "Content-Length: " + strconv.Itoa(33*len(chunk))
		if c.chunked {
			length = "Transfer-Encoding: chunked"
		}
		bw := bufio.NewWriter(conn)
		fmt.Fprintf(bw, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n\r\n", c.path, w.srv.Addr(), w.key, length)
		for range 33 {
			if c.chunked {
				fmt.Fprintf(bw, "%x\r\n", len(chunk))
			}
			_, _ = bw.Write(chunk)
			if c.chunked {
				_, _ = bw.WriteString("\r\n")
			}
		}
		if c.chunked {
			_, _ = bw.WriteString("0\r\n\r\n")
		}
		if err := bw.Flush(); err != nil {
			t.Errorf("%s, 33 MiB (chunked %v): sending the body: %v; want it read and answered 413", c.path, c.chunked, err)
			conn.Close()
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s, 33 MiB (chunked %v): reading the answer: %v; want the 413", c.path, c.chunked, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), "gateway.max_body_bytes") {
			t.Errorf("%s, 33 MiB (chunked %v) = %d %s; want 413 with %s", c.path, c.chunked, resp.StatusCode, b, c.want)
		}
	}
}

// Requests whose bodies have not arrived hold none of the
// gateway.max_in_flight slots: keys stalling their bodies cannot keep
// another key from being served. Each key's stalled bodies still count
// against its own gateway.max_in_flight_per_key.
func TestStalledBodiesHoldNoServingSlot(t *testing.T) {
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.MaxInFlight, o.MaxInFlightPerKey = 2, 1 }))
	for i := range 4 {
		k, _, err := w.keys.Create(gateway.KeySpec{Name: fmt.Sprintf("staller-%d", i), Project: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		rawHeaders(t, w, k) // headers in, body never sent
	}
	waitInFlight(t, w, 4)
	if _, err := w.openai(w.key).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")}); err != nil {
		t.Errorf("a key sending its body while four keys stall theirs: %v", err)
	}
	// The per-key bound still holds a stalling key to its own share.
	staller, _, err := w.keys.Create(gateway.KeySpec{Name: "staller", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	rawHeaders(t, w, staller)
	waitInFlight(t, w, 5)
	_, err = w.openai(staller).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 503 || !strings.Contains(e.Message, "gateway.max_in_flight_per_key") {
		t.Errorf("a stalling key's second request = %d %q; want 503 naming max_in_flight_per_key", e.StatusCode, e.Message)
	}

	// Without keys, bodies being read and requests served are bounded
	// together by gateway.max_in_flight.
	open := newWorld(t, withGateway(func(o *gateway.Options) { o.NoAuth, o.Keys, o.MaxInFlight = true, nil, 1 }))
	rawHeaders(t, open, "")
	waitInFlight(t, open, 1)
	_, err = open.openai("").Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "builder", Messages: userMsg("hi")})
	if e := openAIErr(t, err); e.StatusCode != 503 || !strings.Contains(e.Message, "gateway.max_in_flight)") {
		t.Errorf("without auth, a request while a body stalls at max_in_flight 1 = %d %q; want 503 naming max_in_flight", e.StatusCode, e.Message)
	}
}

// A key's --tpm counts the calls it has in flight: each reserves its
// estimate (its prompt's bound and its output limit) when admitted, so
// concurrent calls are admitted only while the minute's tokens and the
// reservations are under the limit, and a reservation is replaced by the
// tokens the answer reports.
func TestTPMCountsCallsInFlight(t *testing.T) {
	w := newWorld(t, serveOn("gpt"))
	token, _, err := w.keys.Create(gateway.KeySpec{Name: "tpm", Project: "demo", KeyLimits: gateway.KeyLimits{TPM: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	chat := func() error {
		_, err := w.openai(token).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi"), MaxCompletionTokens: openai.Int(600)})
		return err
	}
	release := make(chan struct{})
	held := make(chan error, 2)
	for range 2 { // ~610 reserved: the second is admitted under 1000, and takes the key to ~1220
		w.oai.Enqueue(openaifake.TextReply("held").WithHold(release))
		go func() { held <- chat() }()
		n := len(w.oai.Requests()) + 1
		deadline := time.Now().Add(10 * time.Second)
		for len(w.oai.Requests()) < n {
			if time.Now().After(deadline) {
				t.Fatal("a held call never reached the provider")
			}
			time.Sleep(time.Millisecond)
		}
	}
	e := openAIErr(t, chat())
	if e.StatusCode != 429 || e.Type != "tokens" || !strings.Contains(e.Message, "reserved by its calls in flight") || e.Response.Header.Get("Retry-After") != "1" {
		t.Errorf("a third call while two hold ~1220 of 1000 tokens = %d %q retry-after %q: %s; want 429 tokens naming the calls in flight", e.StatusCode, e.Type, e.Response.Header.Get("Retry-After"), e.Message)
	}
	close(release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("a held call: %v", err)
		}
	}
	// Settled to what the answers reported (a few tokens each): the minute has room.
	if err := chat(); err != nil {
		t.Errorf("after the held calls settled: %v", err)
	}
}

// A conversation that names one answer's call id in many assistant turns
// gets the answer's kept state (its thinking block) once, not once per
// turn: 200 turns naming one 40 KB thinking block's call send one copy
// upstream. And the restored request stays within gateway.max_body_bytes:
// past it, a 400 says why.
func TestRepeatedCallIDRestoresStateOnce(t *testing.T) {
	thinking := strings.Repeat("think ", 40<<10/6)
	w := newWorld(t, serveOn("claude"), withGateway(func(o *gateway.Options) { o.MaxBodyBytes = 160 << 10 }))
	ctx := ctxT(t)
	first := func(id string) {
		w.anth.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: thinking, Signature: "sig-" + id},
			ToolUses: []anthropicfake.ToolUse{{ID: id, Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}})
		if got := toolTurns["chat"].first(t, w, w.key, "balanced"); got != id {
			t.Fatalf("call id %q, want %q", got, id)
		}
	}
	turns := func(ids ...string) []openai.ChatCompletionMessageParamUnion {
		msgs := userMsg("weather?")
		for _, id := range ids {
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			}}, openai.ToolMessage("18C", id))
		}
		return msgs
	}
	first("toolu_a")
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = "toolu_a"
	}
	w.anth.Enqueue(anthropicfake.TextReply("18C in Paris."))
	if _, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "balanced", Messages: turns(ids...), Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}); err != nil {
		t.Fatal(err)
	}
	reqs := w.anth.Requests()
	up := reqs[len(reqs)-1].Body
	t.Logf("200 turns naming one call: %d bytes from the client, %d upstream", len(mustJSONBody(t, turns(ids...))), len(up))
	if n := bytes.Count(up, []byte(`"type":"thinking"`)); n != 1 || len(up) > 100<<10 {
		t.Errorf("200 turns naming one answer's call: %d thinking blocks, %d bytes upstream; want 1 block, under 100 KiB", n, len(up))
	}

	// Two answers' state (80 KB) on a 100 KB request is over the 160 KiB limit.
	first("toolu_b")
	pad := openai.UserMessage(strings.Repeat("p", 100<<10))
	msgs := append([]openai.ChatCompletionMessageParamUnion{pad}, turns("toolu_a", "toolu_b")...)
	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "balanced", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
	if e := openAIErr(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "gateway.max_body_bytes") {
		t.Errorf("a request whose restored state exceeds the body limit = %d %q; want 400 naming gateway.max_body_bytes", e.StatusCode, e.Message)
	}
	if n := len(w.anth.Requests()); n != len(reqs)+1 {
		t.Errorf("%d requests upstream, want %d: the refused one reached the provider", n, len(reqs)+1)
	}
}

// A key's allowed models are checked against what the request is served
// as: a persona's line or X-CortexBuild-Agent that makes an allowed name
// serve another agent (or that agent's own tier) is refused, in every
// protocol; the allowed name served as itself still is served.
func TestKeyModelsCheckWhatIsServed(t *testing.T) {
	w := newWorld(t)
	builderOnly, _, err := w.keys.Create(gateway.KeySpec{Name: "builder-only", Project: "demo", Models: []string{"builder"}})
	if err != nil {
		t.Fatal(err)
	}
	haikuOnly, _, err := w.keys.Create(gateway.KeySpec{Name: "haiku-only", Project: "demo", Models: []string{"claude-haiku-4-5"}})
	if err != nil {
		t.Fatal(err)
	}
	cheapOnly, _, err := w.keys.Create(gateway.KeySpec{Name: "cheap-only", Project: "demo", Models: []string{"cheap"}})
	if err != nil {
		t.Fatal(err)
	}
	agentsOnly, _, err := w.keys.Create(gateway.KeySpec{Name: "agents-only", Project: "demo", Agents: []string{"builder"}})
	if err != nil {
		t.Fatal(err)
	}
	system := func(agent string) string { return agentmark.Line(agent) + "\nYou plan." }
	bodies := map[string]func(model, system string) string{
		"/v1/chat/completions": func(model, sys string) string {
			return fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":%q},{"role":"user","content":"hi"}]}`, model, sys)
		},
		"/v1/responses": func(model, sys string) string {
			return fmt.Sprintf(`{"model":%q,"instructions":%q,"input":"hi"}`, model, sys)
		},
		"/v1/messages": func(model, sys string) string {
			return fmt.Sprintf(`{"model":%q,"max_tokens":10,"system":%q,"messages":[{"role":"user","content":"hi"}]}`, model, sys)
		},
		"/v1/messages/count_tokens": func(model, sys string) string {
			return fmt.Sprintf(`{"model":%q,"system":%q,"messages":[{"role":"user","content":"hi"}]}`, model, sys)
		},
	}
	for path, body := range bodies {
		for _, c := range []struct {
			what, key, model, system, agent string
			want                            string // "" served
		}{
			{"persona of another agent", builderOnly, "builder", system("planner"), "", "served as agent planner"},
			{"persona of the allowed agent", builderOnly, "builder", system("builder"), "", ""},
			{"agent header re-tiering a family name", haikuOnly, "claude-haiku-4-5", "Be brief.", "planner", "served as agent planner"},
			{"the family name as itself", haikuOnly, "claude-haiku-4-5", "Be brief.", "", ""},
			{"agent header on an allowed tier name", cheapOnly, "cheap", "Be brief.", "planner", "served as agent planner, tier fast_cheap"},
			{"the tier name as itself", cheapOnly, "cheap", "Be brief.", "", ""},
			{"allowed agents, persona of another", agentsOnly, "builder", system("planner"), "", "calls as agent planner"},
		} {
			hdr := bearer(c.key)
			if c.agent != "" {
				hdr = append(hdr, gateway.HeaderAgent, c.agent)
			}
			st, m := w.call(t, "POST", path, "", body(c.model, c.system), hdr...)
			msg := errMessage(m)
			switch {
			case c.want == "" && st != 200:
				t.Errorf("%s, %s = %d %q; want it served", path, c.what, st, msg)
			case c.want != "" && (st != 400 || !strings.Contains(msg, c.want)):
				t.Errorf("%s, %s = %d %q; want 400 %q", path, c.what, st, msg, c.want)
			}
		}
	}
}

func mustJSONBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
