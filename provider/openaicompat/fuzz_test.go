package openaicompat_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// fuzzTarget is the OpenAI profile of the adapter, as the shared fuzz
// targets of providertest call it.
var fuzzTarget = providertest.FuzzTarget{Secret: testKey,
	New: func(t testing.TB, base string, hc *http.Client) provider.Adapter {
		a, err := openaicompat.New(provider.Settings{Name: "oai", Profile: "openai", BaseURL: base + "/v1",
			Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}}

// fakeBodies returns what the fake sends for each reply, streamed or not.
func fakeBodies(t testing.TB, stream bool, replies ...openaifake.Reply) [][]byte {
	fake := openaifake.New(openaifake.WithAPIKey(testKey), openaifake.WithSeed(1))
	return providertest.FakeBodies(t, fuzzTarget, fake, stream, replies...)
}

// FuzzStreamBody is [providertest.StreamBodyFuzz], seeded with what the
// fake streams.
func FuzzStreamBody(f *testing.F) {
	providertest.StreamBodyFuzz(f, fuzzTarget, fakeBodies(f, true,
		openaifake.TextReply("Hello there, general Kenobi."),
		openaifake.ToolCallReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		openaifake.ToolCallsReply(openaifake.ToolCall{Name: "a", Arguments: `{}`}, openaifake.ToolCall{Name: "b", Arguments: `{"x":1}`}),
		openaifake.ServerErrorMidStream(2),
		openaifake.CutStream(2),
	))
}

// FuzzErrorBody is [providertest.ErrorBodyFuzz], seeded with the fake's
// error answers and their statuses.
func FuzzErrorBody(f *testing.F) {
	providertest.ErrorBodyFuzz(f, fuzzTarget, []int{400, 401, 429, 429, 503, 502, 500, 404}, fakeBodies(f, false,
		openaifake.ContextLengthExceeded(128000, 130000), openaifake.InvalidAPIKey(testKey), openaifake.RateLimited(2400*time.Millisecond),
		openaifake.InsufficientQuota(), openaifake.Overloaded(), openaifake.BadGateway(), openaifake.ServerError(), openaifake.ModelNotFound("gpt-9"),
	))
}

// FuzzToolCallArguments streams a tool call whose arguments arrive in
// arbitrary fragments, each in a chunk of its own.
func FuzzToolCallArguments(f *testing.F) {
	providertest.FragmentedArgumentsFuzz(f, fuzzTarget, func(fragments []string) []byte {
		var b bytes.Buffer
		chunk := func(delta any, finish any) {
			c, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(&b, "data: %s\n\n", c)
		}
		for i, frag := range fragments {
			call := map[string]any{"index": 0, "function": map[string]any{"arguments": frag}}
			if i == 0 {
				call["id"], call["type"] = "call_1", "function"
				call["function"].(map[string]any)["name"] = "get_weather"
			}
			chunk(map[string]any{"tool_calls": []any{call}}, nil)
		}
		chunk(map[string]any{}, "tool_calls")
		b.WriteString("data: [DONE]\n\n")
		return b.Bytes()
	})
}
