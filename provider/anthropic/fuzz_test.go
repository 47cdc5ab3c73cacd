package anthropic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// fuzzTarget is the adapter as the shared fuzz targets of providertest
// call it.
var fuzzTarget = providertest.FuzzTarget{Secret: testKey,
	New: func(t testing.TB, base string, hc *http.Client) provider.Adapter {
		a, err := anthropic.New(provider.Settings{Name: "claude", BaseURL: base,
			Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}}

// fakeBodies returns what the fake sends for each reply, streamed or not.
func fakeBodies(t testing.TB, stream bool, replies ...anthropicfake.Reply) [][]byte {
	fake := anthropicfake.New(anthropicfake.WithAPIKey(testKey), anthropicfake.WithSeed(1))
	return providertest.FakeBodies(t, fuzzTarget, fake, stream, replies...)
}

// FuzzStreamBody is [providertest.StreamBodyFuzz], seeded with what the
// fake streams.
func FuzzStreamBody(f *testing.F) {
	providertest.StreamBodyFuzz(f, fuzzTarget, fakeBodies(f, true,
		anthropicfake.TextReply("Hello there, general Kenobi."),
		anthropicfake.ToolUseReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		anthropicfake.OverloadedMidStream(3),
		anthropicfake.CutStream(3),
	))
}

// FuzzErrorBody is [providertest.ErrorBodyFuzz], seeded with the fake's
// error answers and their statuses.
func FuzzErrorBody(f *testing.F) {
	providertest.ErrorBodyFuzz(f, fuzzTarget, []int{400, 401, 429, 400, 529, 502, 500, 404, 400}, fakeBodies(f, false,
		anthropicfake.PromptTooLong(210000, 200000), anthropicfake.AuthError(), anthropicfake.RateLimited("7"), anthropicfake.BillingError(),
		anthropicfake.Overloaded(), anthropicfake.BadGateway(), anthropicfake.APIError(), anthropicfake.ModelNotFound("claude-9"),
		anthropicfake.ErrorReply(400, "invalid_request_error", "bad key "+testKey),
	))
}

// FuzzToolCallArguments streams a tool_use block whose input arrives in
// arbitrary input_json_delta fragments.
func FuzzToolCallArguments(f *testing.F) {
	providertest.FragmentedArgumentsFuzz(f, fuzzTarget, func(fragments []string) []byte {
		var b bytes.Buffer
		event := func(typ string, v map[string]any) {
			v["type"] = typ
			c, _ := json.Marshal(v)
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, c)
		}
		event("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{}}})
		for _, frag := range fragments {
			event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
		}
		event("content_block_stop", map[string]any{"index": 0})
		event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 5}})
		event("message_stop", map[string]any{})
		return b.Bytes()
	})
}
