package anthropic_test

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
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

func fuzzAdapter(t testing.TB, base string, hc *http.Client) *anthropic.Adapter {
	a, err := anthropic.New(provider.Settings{Name: "claude", BaseURL: base,
		Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fakeBodies returns what the fake sends for each reply, streamed or not.
func fakeBodies(t testing.TB, stream bool, replies ...anthropicfake.Reply) [][]byte {
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey), anthropicfake.WithSeed(1))
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
		anthropicfake.TextReply("Hello there, general Kenobi."),
		anthropicfake.ToolUseReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		anthropicfake.OverloadedMidStream(3),
		anthropicfake.CutStream(3),
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
	replies := []anthropicfake.Reply{
		anthropicfake.PromptTooLong(210000, 200000), anthropicfake.AuthError(), anthropicfake.RateLimited("7"), anthropicfake.BillingError(),
		anthropicfake.Overloaded(), anthropicfake.BadGateway(), anthropicfake.APIError(), anthropicfake.ModelNotFound("claude-9"),
		anthropicfake.ErrorReply(400, "invalid_request_error", "bad key "+testKey),
	}
	statuses := []int{400, 401, 429, 400, 529, 502, 500, 404, 400}
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

// FuzzToolCallArguments streams a tool_use block whose input arrives in
// arbitrary input_json_delta fragments: valid JSON objects reassemble to
// the same arguments, anything else is a protocol error that says so.
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
		event := func(typ string, v map[string]any) {
			v["type"] = typ
			c, _ := json.Marshal(v)
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, c)
		}
		event("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{}}})
		for _, frag := range splitRunes(args, cuts) {
			event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
		}
		event("content_block_stop", map[string]any{"index": 0})
		event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 5}})
		event("message_stop", map[string]any{})
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
