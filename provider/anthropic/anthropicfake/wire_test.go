package anthropicfake

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const msgBody = `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`

func TestMissingAnthropicVersion(t *testing.T) {
	fake := start(t)
	h := goodHeaders()
	delete(h, "anthropic-version")
	resp, body := raw(t, fake, "POST", "/v1/messages", h, msgBody)
	if resp.StatusCode != 400 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"},"request_id":%q}`, resp.Header.Get("request-id"))
	if string(body) != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	if resp.Header.Get("content-type") != "application/json" {
		t.Errorf("content-type %q", resp.Header.Get("content-type"))
	}

	h["anthropic-version"] = "2024-01-01"
	resp, body = raw(t, fake, "POST", "/v1/messages", h, msgBody)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `is not a valid version`) {
		t.Errorf("unknown version: %d %s", resp.StatusCode, body)
	}
}

func TestBodyValidation(t *testing.T) {
	fake := start(t)
	tests := []struct {
		path, body, message string
	}{
		{"/v1/messages", `not json`, "There was an error parsing the body of your request. Please ensure the body is valid JSON."},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "model: Field required"},
		{"/v1/messages", `{"model":7,"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "model: Input should be a valid string"},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens: Field required"},
		{"/v1/messages", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens: Input should be greater than or equal to 1"},
		{"/v1/messages", `{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, "max_tokens: Input should be a valid integer"},
		{"/v1/messages", `{"model":"m","max_tokens":5}`, "messages: Field required"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[]}`, "messages: at least one message is required"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":{}}`, "messages: Input should be a valid list"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{}],"stream":"yes"}`, "stream: Input should be a valid boolean"},
		{"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":4096,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":512}}`, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":2048,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":2048}}`, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"},
		{"/v1/messages", `{"model":"claude-sonnet-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":2048}}`, "thinking.type.enabled: manual thinking budgets are not supported on this model; use thinking.type.adaptive with output_config.effort"},
		{"/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"adaptive"}}`, "thinking.type.adaptive: adaptive thinking is not supported on this model"},
		{"/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":4096,"messages":[{"role":"user","content":"x"}],"output_config":{"effort":"low"}}`, "output_config.effort: This model does not support the effort parameter."},
		{"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":4096,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"adaptive"},"tool_choice":{"type":"any"},"tools":[{"name":"f","input_schema":{"type":"object"}}]}`, "Thinking may not be enabled when tool_choice forces tool use."},
		{"/v1/messages/count_tokens", `{"model":"m"}`, "messages: Field required"},
		{"/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"x"}]}`, "model: Field required"},
	}
	for _, tt := range tests {
		resp, body := raw(t, fake, "POST", tt.path, goodHeaders(), tt.body)
		if resp.StatusCode != 400 {
			t.Errorf("%s %s: status %d", tt.path, tt.body, resp.StatusCode)
			continue
		}
		e := decodeMap(t, body)["error"].(map[string]any)
		if e["type"] != "invalid_request_error" || e["message"] != tt.message {
			t.Errorf("%s %s: error %v, want %q", tt.path, tt.body, e, tt.message)
		}
	}
	// count_tokens needs no max_tokens.
	if resp, body := raw(t, fake, "POST", "/v1/messages/count_tokens", goodHeaders(), `{"model":"m","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 200 {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, body)
	}
	if fake.Pending(RouteMessages) != 0 {
		t.Error("queue touched")
	}
}

func TestValidationDoesNotConsumeReplies(t *testing.T) {
	fake := start(t)
	fake.Enqueue(TextReply("kept"))
	raw(t, fake, "POST", "/v1/messages", goodHeaders(), `{"model":"m"}`)
	h := goodHeaders()
	h["x-api-key"] = "bad"
	raw(t, fake, "POST", "/v1/messages", h, msgBody)
	if n := fake.Pending(RouteMessages); n != 1 {
		t.Fatalf("pending = %d", n)
	}
	_, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), msgBody)
	if !strings.Contains(string(body), `"text":"kept"`) {
		t.Errorf("body %s", body)
	}
}

func TestUnknownRoute(t *testing.T) {
	fake := start(t)
	for _, r := range [][2]string{{"GET", "/v1/nope"}, {"GET", "/v1/messages"}, {"POST", "/v1/models"}, {"GET", "/"}, {"GET", "/v1/models/a/b"}} {
		resp, body := raw(t, fake, r[0], r[1], nil, "")
		if resp.StatusCode != 404 {
			t.Errorf("%s %s: %d", r[0], r[1], resp.StatusCode)
			continue
		}
		want := fmt.Sprintf(`{"type":"error","error":{"type":"not_found_error","message":"Not Found"},"request_id":%q}`, resp.Header.Get("request-id"))
		if string(body) != want {
			t.Errorf("%s %s: %s", r[0], r[1], body)
		}
	}
}

func TestRequestTooLarge(t *testing.T) {
	fake := start(t, WithMaxBodyBytes(100))
	resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"`+strings.Repeat("x", 200)+`"}]}`)
	if resp.StatusCode != 413 || decodeMap(t, body)["error"].(map[string]any)["type"] != "request_too_large" {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestRawBodyFault(t *testing.T) {
	fake := start(t)
	fake.Enqueue(Reply{RawBody: `{"not":"a message"`}, BadGateway())
	resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), msgBody)
	if resp.StatusCode != 200 || string(body) != `{"not":"a message"` || resp.Header.Get("content-type") != "application/json" {
		t.Errorf("raw 200: %d %q %q", resp.StatusCode, resp.Header.Get("content-type"), body)
	}
	resp, body = raw(t, fake, "POST", "/v1/messages", goodHeaders(), msgBody)
	if resp.StatusCode != 502 || string(body) != BadGatewayHTML || resp.Header.Get("content-type") != "text/html" || resp.Header.Get("request-id") == "" {
		t.Errorf("502: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}

func TestEnqueuePanicsOnInvalidReply(t *testing.T) {
	fake := start(t)
	for _, r := range []Reply{
		{ToolUses: []ToolUse{{Name: "t", Input: json.RawMessage(`[1]`)}}},
		{ToolUses: []ToolUse{{Name: "t", Input: json.RawMessage(`{`)}}},
		{ToolUses: []ToolUse{{Input: json.RawMessage(`{}`)}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic for %+v", r)
				}
			}()
			fake.Enqueue(r)
		}()
	}
	// From a default-reply function the same mistake is a 500.
	bad := start(t, WithDefaultReply(func(Recorded) Reply { return ToolUseReply("t", "nope") }))
	resp, body := raw(t, bad, "POST", "/v1/messages", goodHeaders(), msgBody)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "invalid scripted reply") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestConcurrentCallsTakeEachReplyOnce(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	const n = 24
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("reply-%02d", i)
		fake.Enqueue(TextReply(want[i]))
	}
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			var text string
			if i%2 == 0 {
				msg, err := client.Messages.New(testCtx(t), userParams("Hi"))
				if err != nil {
					t.Error(err)
					return
				}
				text = msg.Content[0].Text
			} else {
				stream := client.Messages.NewStreaming(testCtx(t), userParams("Hi"))
				defer stream.Close()
				var acc anthropic.Message
				for stream.Next() {
					_ = acc.Accumulate(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Error(err)
					return
				}
				text = acc.Content[0].Text
			}
			mu.Lock()
			got = append(got, text)
			mu.Unlock()
			_ = fake.Requests()
			_ = fake.OpenConns()
		})
	}
	wg.Wait()
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("got %v", got)
	}
	if len(fake.Requests()) != n {
		t.Errorf("recorded %d", len(fake.Requests()))
	}
}

func TestSplitters(t *testing.T) {
	text := "I'd be happy to check the weather in Zürich — naïve café. Supercalifragilisticexpialidocious-and-then-some!"
	chunks := splitText(text)
	if strings.Join(chunks, "") != text || len(chunks) < 5 {
		t.Errorf("splitText = %q", chunks)
	}
	for _, c := range chunks {
		if !utf8.ValidString(c) || c == "" {
			t.Errorf("bad chunk %q", c)
		}
	}
	if got := splitText("Hi"); !slices.Equal(got, []string{"Hi"}) {
		t.Errorf("splitText(Hi) = %q", got)
	}

	in := fakekit.SpacedJSON([]byte(`{"city":"San Francisco","q":"a:b, \"c\"","n":[1,2],"u":"Zürich"}`))
	if want := `{"city": "San Francisco", "q": "a:b, \"c\"", "n": [1, 2], "u": "Zürich"}`; in != want {
		t.Fatalf("spacedJSON = %s", in)
	}
	frags := splitJSON(in)
	if frags[0] != "" || strings.Join(frags, "") != in || len(frags) < 4 {
		t.Errorf("splitJSON = %q", frags)
	}
	midToken := false
	for _, f := range frags[1:] {
		if !utf8.ValidString(f) {
			t.Errorf("fragment %q splits a rune", f)
		}
		if !json.Valid([]byte(f)) {
			midToken = true
		}
	}
	if !midToken {
		t.Error("no fragment is split mid-token")
	}
	if got := splitJSON("{}"); !slices.Equal(got, []string{""}) {
		t.Errorf("splitJSON({}) = %q", got)
	}
}

// goldenScript is the reply whose stream testdata/golden/stream.sse holds.
func goldenScript() Reply {
	return Reply{
		ID:       "msg_01GoldenGoldenGoldenGold",
		Model:    "claude-sonnet-4-6",
		Text:     "I'll check the weather in San Francisco for you.",
		ToolUses: []ToolUse{{ID: "toolu_01GoldenGoldenGoldenGo", Name: "get_weather", Input: json.RawMessage(`{"city":"San Francisco","units":"fahrenheit"}`)}},
		Usage:    Usage{Input: 394, Output: 79, CacheRead: 12, CacheCreation1h: 3},
	}
}

func TestGoldenStream(t *testing.T) {
	fake := start(t, WithSeed(42))
	fake.Enqueue(goldenScript())
	resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(),
		`{"model":"claude-sonnet-4-6","max_tokens":512,"stream":true,"messages":[{"role":"user","content":"Weather in SF?"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("content-type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	path := filepath.Join("testdata", "golden", "stream.sse")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(body) != string(want) {
		t.Errorf("stream differs from %s (run with -update if intended)\ngot:\n%s", path, body)
	}
}

// TestStreamShapeMatchesRecording replays the recorded tool-use stream's
// content through the fake and compares the two streams event by event.
func TestStreamShapeMatchesRecording(t *testing.T) {
	realBody, err := os.ReadFile(filepath.Join("testdata", "real", "stream_tool_use.sse"))
	if err != nil {
		t.Fatal(err)
	}
	real := parseSSE(t, realBody)
	// Script the fake with what the recording says.
	var script Reply
	var toolJSON strings.Builder
	for _, ev := range real {
		m := decodeMap(t, []byte(ev.Data))
		switch ev.Name {
		case "message_start":
			msg := m["message"].(map[string]any)
			script.ID, script.Model = msg["id"].(string), msg["model"].(string)
		case "content_block_start":
			if cb := m["content_block"].(map[string]any); cb["type"] == "tool_use" {
				script.ToolUses = append(script.ToolUses, ToolUse{ID: cb["id"].(string), Name: cb["name"].(string)})
			}
		case "content_block_delta":
			d := m["delta"].(map[string]any)
			script.Text += strOr(d["text"])
			toolJSON.WriteString(strOr(d["partial_json"]))
		case "message_delta":
			u := m["usage"].(map[string]any)
			script.Usage = Usage{Input: int(u["input_tokens"].(float64)), Output: int(u["output_tokens"].(float64))}
		}
	}
	script.ToolUses[0].Input = json.RawMessage(toolJSON.String())

	fake := start(t)
	fake.Enqueue(script)
	resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(),
		`{"model":"claude-3-7-sonnet-latest","max_tokens":512,"stream":true,"messages":[{"role":"user","content":"Weather in SF?"}]}`)
	fakeEvs := parseSSE(t, body)

	// Same skeleton once runs of deltas are collapsed and pings dropped.
	if r, f := skeleton(real), skeleton(fakeEvs); !slices.Equal(r, f) {
		t.Errorf("skeleton\nreal %v\nfake %v", r, f)
	}
	// Both ping, after message_start; the ping data is byte-identical.
	if i := slices.IndexFunc(fakeEvs, func(e event) bool { return e.Name == "ping" }); i < 1 || fakeEvs[i].Data != `{"type": "ping"}` {
		t.Errorf("fake ping at %d", i)
	}
	// Every event carries at least the recorded fields (the fake adds the
	// newer stop_details and inference_geo), and "type" repeats the name.
	realByKind, fakeByKind := byKind(t, real), byKind(t, fakeEvs)
	for kind, r := range realByKind {
		f, ok := fakeByKind[kind]
		if !ok {
			t.Errorf("fake never sends %s", kind)
			continue
		}
		for _, p := range r {
			if !slices.Contains(f, p) {
				t.Errorf("%s: fake lacks %s (fake has %v)", kind, p, f)
			}
		}
	}
	for _, ev := range fakeEvs {
		if typ := decodeMap(t, []byte(ev.Data))["type"]; typ != ev.Name {
			t.Errorf("event %s has type %v", ev.Name, typ)
		}
	}
	// Reassembled content is byte-identical, spacing of the tool JSON included.
	if r, f := reassemble(t, real), reassemble(t, fakeEvs); r != f {
		t.Errorf("reassembled\nreal %s\nfake %s", r, f)
	}
	// The usage numbers travel the same way: initial in message_start,
	// cumulative in message_delta.
	for _, kind := range []string{"message_start", "message_delta"} {
		if r, f := usageOf(t, real, kind), usageOf(t, fakeEvs, kind); r != f {
			t.Errorf("%s usage: real %s fake %s", kind, r, f)
		}
	}
	// Response headers: everything the API itself sends (not the CDN's).
	checkHeaders(t, "sse", resp.Header)
}

func strOr(v any) string {
	s, _ := v.(string)
	return s
}

func skeleton(evs []event) []string {
	var out []string
	for _, e := range evs {
		if e.Name == "ping" || (e.Name == "content_block_delta" && len(out) > 0 && out[len(out)-1] == e.Name) {
			continue
		}
		out = append(out, e.Name)
	}
	return out
}

// byKind maps each event kind (name, plus block or delta type) to the
// sorted JSON key paths seen in it.
func byKind(t *testing.T, evs []event) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		m := decodeMap(t, []byte(e.Data))
		kind := e.Name
		if cb, ok := m["content_block"].(map[string]any); ok {
			kind += "/" + cb["type"].(string)
		}
		if d, ok := m["delta"].(map[string]any); ok && e.Name == "content_block_delta" {
			kind += "/" + d["type"].(string)
		}
		for _, p := range keyPaths("", m) {
			if !slices.Contains(out[kind], p) {
				out[kind] = append(out[kind], p)
			}
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

func keyPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for k, child := range m {
		p := prefix + k
		out = append(out, p)
		out = append(out, keyPaths(p+".", child)...)
	}
	return out
}

func reassemble(t *testing.T, evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Name != "content_block_delta" {
			continue
		}
		d := decodeMap(t, []byte(e.Data))["delta"].(map[string]any)
		b.WriteString(strOr(d["text"]) + strOr(d["partial_json"]))
	}
	return b.String()
}

func usageOf(t *testing.T, evs []event, kind string) string {
	for _, e := range evs {
		if e.Name != kind {
			continue
		}
		m := decodeMap(t, []byte(e.Data))
		u, ok := m["usage"].(map[string]any)
		if !ok {
			u = m["message"].(map[string]any)["usage"].(map[string]any)
		}
		return fmt.Sprint(u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"], u["cache_creation_input_tokens"])
	}
	return "missing"
}

// cdnHeaders are set by the API's CDN and proxies or by any HTTP server,
// not by the API; the fake does not reproduce them (Go adds date).
var cdnHeaders = []string{"cf-cache-status", "cf-ray", "date", "server", "strict-transport-security", "x-envoy-upstream-service-time", "x-robots-tag"}

func checkHeaders(t *testing.T, kind string, got map[string][]string) {
	t.Helper()
	names, err := os.ReadFile(filepath.Join("testdata", "real", "response_headers_"+kind+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for k := range got {
		have[strings.ToLower(k)] = true
	}
	for _, name := range strings.Fields(string(names)) {
		if !slices.Contains(cdnHeaders, name) && !have[name] {
			t.Errorf("%s response lacks header %s", kind, name)
		}
	}
}

// TestMessageShapeMatchesRecording compares a non-streamed tool-use message
// with the recorded one: same fields in the same order, same values for the
// same script.
func TestMessageShapeMatchesRecording(t *testing.T) {
	realBody, err := os.ReadFile(filepath.Join("testdata", "real", "message_tool_use.json"))
	if err != nil {
		t.Fatal(err)
	}
	var real struct {
		Model   string `json:"model"`
		ID      string `json:"id"`
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage struct {
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(realBody, &real); err != nil {
		t.Fatal(err)
	}
	fake := start(t)
	fake.Enqueue(Reply{
		ID: real.ID, Model: real.Model, Text: real.Content[0].Text,
		ToolUses: []ToolUse{{ID: real.Content[1].ID, Name: real.Content[1].Name, Input: real.Content[1].Input}},
		Usage:    Usage{Input: real.Usage.Input, Output: real.Usage.Output},
	})
	resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), msgBody)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// Same value, apart from the fields the fake adds.
	var r, f map[string]any
	_ = json.Unmarshal(realBody, &r)
	_ = json.Unmarshal(body, &f)
	if f["stop_details"] != nil || f["usage"].(map[string]any)["inference_geo"] != "global" {
		t.Errorf("new fields: %s", body)
	}
	delete(f, "stop_details")
	delete(f["usage"].(map[string]any), "inference_geo")
	if fmt.Sprint(r) != fmt.Sprint(f) {
		t.Errorf("message differs\nreal %v\nfake %v", r, f)
	}
	// Same top-level field order.
	if ro, fo := topKeys(t, realBody), topKeys(t, body); !isSubsequence(ro, fo) {
		t.Errorf("field order: real %v fake %v", ro, fo)
	}
	checkHeaders(t, "json", resp.Header)
}

func topKeys(t *testing.T, data []byte) []string {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 && !slices.Contains(keys, v) {
				keys = append(keys, v)
				// Skip the value.
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

func TestStandaloneHandler(t *testing.T) {
	fake := NewUnstarted(WithAPIKey(testKey))
	defer fake.Close()
	if fake.URL() != "" || fake.Client() != nil {
		t.Error("unstarted fake has a URL or client")
	}
	ts := httptest.NewUnstartedServer(fake.Handler())
	ts.Config.ConnState = fake.ConnState
	ts.Start()
	defer ts.Close()

	fake.Enqueue(TextReply("standalone"))
	tr := &http.Transport{}
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(ts.URL),
		option.WithAPIKey(testKey), option.WithMaxRetries(0), option.WithHTTPClient(&http.Client{Transport: tr}))
	msg, err := client.Messages.New(testCtx(t), userParams("Hi"))
	if err != nil || msg.Content[0].Text != "standalone" {
		t.Fatalf("%v %v", msg, err)
	}
	if fake.OpenConns() != 1 {
		t.Errorf("OpenConns = %d", fake.OpenConns())
	}
	tr.CloseIdleConnections()
	if err := fake.WaitOpenConns(testCtx(t), 0); err != nil {
		t.Error(err)
	}
}

// TestRecordedRequestsAccepted replays the recorded request bodies (SDK v1
// style: x-api-key, anthropic-version 2023-06-01) against the fake.
func TestRecordedRequestsAccepted(t *testing.T) {
	fake := start(t)
	for _, name := range []string{"request_tool_use.json", "request_tool_result.json"} {
		body, err := os.ReadFile(filepath.Join("testdata", "real", name))
		if err != nil {
			t.Fatal(err)
		}
		resp, out := raw(t, fake, "POST", "/v1/messages", goodHeaders(), string(body))
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", name, resp.StatusCode, out)
		}
		if resp, out := raw(t, fake, "POST", "/v1/messages/count_tokens", goodHeaders(), string(body)); resp.StatusCode != 200 ||
			string(out) != fmt.Sprintf(`{"input_tokens":%d}`, CountTokens(body)) {
			t.Errorf("%s count_tokens: %d %s", name, resp.StatusCode, out)
		}
	}
	if got := fake.Requests()[2].LastUserText(); got != "The weather in San Francisco is 68 degrees fahrenheit." {
		t.Errorf("tool_result text = %q", got)
	}
}
