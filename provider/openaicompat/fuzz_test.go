package openaicompat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// fuzzAdapter is an adapter for the OpenAI profile at base.
func fuzzAdapter(t testing.TB, base string, hc *http.Client) *openaicompat.Adapter {
	a, err := openaicompat.New(provider.Settings{Name: "oai", Profile: "openai", BaseURL: base + "/v1",
		Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fakeBodies returns what the fake sends for each reply, streamed or not.
func fakeBodies(t testing.TB, stream bool, replies ...openaifake.Reply) [][]byte {
	srv := openaifake.New(openaifake.WithAPIKey(testKey), openaifake.WithSeed(1))
	defer srv.Close()
	hc, bodies := providertest.Recording()
	a := fuzzAdapter(t, srv.URL(), hc)
	for _, r := range replies {
		srv.Enqueue(r)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if stream {
			if s, err := a.Stream(ctx, &provider.Request{Prompt: "hi"}); err == nil {
				provider.Collect(s)
				s.Close()
			}
		} else {
			a.Invoke(ctx, &provider.Request{Prompt: "hi"})
		}
		cancel()
	}
	return bodies()
}

// FuzzStreamBody feeds arbitrary bytes as the body of a 200 streaming
// response, then of a 200 unary one: the adapter returns a result or a classified error, never
// panics, never leaks the key and closes the connection.
func FuzzStreamBody(f *testing.F) {
	for i, b := range fakeBodies(f, true,
		openaifake.TextReply("Hello there, general Kenobi."),
		openaifake.ToolCallReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		openaifake.ToolCallsReply(openaifake.ToolCall{Name: "a", Arguments: `{}`}, openaifake.ToolCall{Name: "b", Arguments: `{"x":1}`}),
		openaifake.ServerErrorMidStream(2),
		openaifake.CutStream(2),
	) {
		f.Add(b)
		providertest.WriteSeeds(f, fmt.Sprintf("fake-%d", i), b)
	}
	srv := providertest.NewRawServer(f)
	a := fuzzAdapter(f, srv.URL(), nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		providertest.FuzzCall(t, srv, a, true, http.StatusOK, "text/event-stream", body, testKey)
		// The same bytes as the body of a 200 answer to a call that did
		// not stream.
		providertest.FuzzCall(t, srv, a, false, http.StatusOK, "application/json", body, testKey)
	})
}

// FuzzErrorBody feeds an arbitrary error status and body: the classifier
// gives every one a kind, never panics and never echoes the key.
func FuzzErrorBody(f *testing.F) {
	replies := []openaifake.Reply{
		openaifake.ContextLengthExceeded(128000, 130000), openaifake.InvalidAPIKey(testKey), openaifake.RateLimited(2400 * time.Millisecond),
		openaifake.InsufficientQuota(), openaifake.Overloaded(), openaifake.BadGateway(), openaifake.ServerError(), openaifake.ModelNotFound("gpt-9"),
	}
	statuses := []int{400, 401, 429, 429, 503, 502, 500, 404}
	for i, b := range fakeBodies(f, false, replies...) {
		f.Add(statuses[i], b)
		providertest.WriteSeeds(f, fmt.Sprintf("fake-%d", i), statuses[i], b)
	}
	srv := providertest.NewRawServer(f)
	a := fuzzAdapter(f, srv.URL(), nil)
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 400 + abs(status)%200
		_, err := providertest.FuzzCall(t, srv, a, false, status, "application/json", body, testKey)
		if err == nil {
			t.Fatalf("status %d gave no error", status)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n = -n; n < 0 {
			return 0
		}
	}
	return n
}

// argumentSeeds are tool-call arguments and the cuts that fragment them.
var argumentSeeds = []struct {
	args string
	cuts []byte
}{
	{`{"city":"Paris","units":["c","f"]}`, []byte{3, 1, 7}},
	{`{"q":"naïve café 日本","n":[1,2.5e3,null,true],"o":{"k":{}}}`, []byte{0, 5, 200, 9, 9}},
	{``, nil},
	{`  {"a":1}  `, []byte{1}},
	{`{"a":`, []byte{2}},
	{`[1,2]`, []byte{0}},
	{`{"a":1}{"b":2}`, []byte{6}},
}

// splitRunes cuts s into fragments at the rune boundaries cuts selects.
func splitRunes(s string, cuts []byte) []string {
	var out []string
	for _, c := range cuts {
		if s == "" {
			break
		}
		n := int(c)%(len(s)) + 1
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}

// FuzzToolCallArguments streams a tool call whose arguments arrive in
// arbitrary fragments: valid JSON objects reassemble to the same
// arguments, anything else is a protocol error that says so.
func FuzzToolCallArguments(f *testing.F) {
	for i, sd := range argumentSeeds {
		f.Add(sd.args, sd.cuts)
		providertest.WriteSeeds(f, fmt.Sprintf("seed-%d", i), sd.args, sd.cuts)
	}
	srv := providertest.NewRawServer(f)
	a := fuzzAdapter(f, srv.URL(), nil)
	f.Fuzz(func(t *testing.T, args string, cuts []byte) {
		if !utf8.ValidString(args) {
			return // a server's JSON strings are UTF-8
		}
		var b bytes.Buffer
		chunk := func(delta any, finish any) {
			c, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(&b, "data: %s\n\n", c)
		}
		for i, frag := range splitRunes(args, cuts) {
			call := map[string]any{"index": 0, "function": map[string]any{"arguments": frag}}
			if i == 0 {
				call["id"], call["type"] = "call_1", "function"
				call["function"].(map[string]any)["name"] = "get_weather"
			}
			chunk(map[string]any{"tool_calls": []any{call}}, nil)
		}
		chunk(map[string]any{}, "tool_calls")
		b.WriteString("data: [DONE]\n\n")
		res, err := providertest.FuzzCall(t, srv, a, true, http.StatusOK, "text/event-stream", b.Bytes(), testKey)
		checkArguments(t, args, res, err)
	})
}

// checkArguments checks a reassembled tool call against the arguments
// sent: a JSON object comes back as sent (blank is {}), anything else is a
// protocol error naming the arguments.
func checkArguments(t *testing.T, args string, res *provider.Result, err error) {
	t.Helper()
	trimmed := strings.TrimSpace(args)
	var obj map[string]json.RawMessage
	valid := trimmed == "" || json.Unmarshal([]byte(trimmed), &obj) == nil
	switch {
	case valid && err != nil:
		t.Fatalf("valid arguments %q: %v", args, err)
	case valid:
		if len(res.ToolCalls) != 1 {
			t.Fatalf("%d tool calls; want 1", len(res.ToolCalls))
		}
		want := trimmed
		if want == "" {
			want = "{}"
		}
		if got := string(res.ToolCalls[0].Arguments); got != want {
			t.Errorf("arguments %q reassembled as %q", want, got)
		}
	case err == nil:
		t.Fatalf("invalid arguments %q accepted as %s", args, res.ToolCalls[0].Arguments)
	default:
		if provider.KindOf(err) != provider.KindServer || !strings.Contains(err.Error(), "arguments") {
			t.Errorf("invalid arguments %q: %v (kind %s); want a server-kind protocol error about the arguments", args, err, provider.KindOf(err))
		}
	}
}
