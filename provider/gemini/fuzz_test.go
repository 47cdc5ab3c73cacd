package gemini_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// fuzzTarget is the adapter as the shared fuzz targets of providertest
// call it.
var fuzzTarget = providertest.FuzzTarget{Secret: testKey,
	New: func(t testing.TB, base string, hc *http.Client) provider.Adapter {
		for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"} {
			t.Setenv(k, "")
		}
		a, err := gemini.New(provider.Settings{Name: "gem", BaseURL: base,
			Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}}

// fakeBodies returns what the fake sends for each reply, streamed or not.
func fakeBodies(t testing.TB, stream bool, replies ...geminifake.Reply) [][]byte {
	fake := geminifake.New(geminifake.WithAPIKey(testKey), geminifake.WithSeed(1))
	return providertest.FakeBodies(t, fuzzTarget, fake, stream, replies...)
}

// FuzzStreamBody is [providertest.StreamBodyFuzz], seeded with what the
// fake streams.
func FuzzStreamBody(f *testing.F) {
	providertest.StreamBodyFuzz(f, fuzzTarget, fakeBodies(f, true,
		geminifake.TextReply("Hello there, general Kenobi."),
		geminifake.FunctionCallReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		geminifake.BlockedPrompt("SAFETY"),
		geminifake.OverloadedMidStream(2),
		geminifake.CutStream(2),
	))
}

// FuzzErrorBody is [providertest.ErrorBodyFuzz], seeded with the fake's
// error answers and their statuses.
func FuzzErrorBody(f *testing.F) {
	providertest.ErrorBodyFuzz(f, fuzzTarget, []int{400, 400, 429, 429, 503, 502, 500, 404, 400, 400}, fakeBodies(f, false,
		geminifake.ContextOverflow(1100000, 1048576), geminifake.APIKeyInvalid(), geminifake.RateLimited("gemini-2.5-flash", 7*time.Second),
		geminifake.DailyQuotaExceeded("gemini-2.5-flash", time.Hour), geminifake.Unavailable(), geminifake.BadGateway(), geminifake.Internal(),
		geminifake.ModelNotFound("gemini-9"), geminifake.BillingRequired(), geminifake.InvalidArgument("bad key "+testKey),
	))
}

// FuzzToolCallArguments streams a functionCall whose args are arbitrary
// text (Gemini sends a call's arguments whole, as a JSON object, never in
// fragments): an object comes back with the same content, anything else
// is a classified error.
func FuzzToolCallArguments(f *testing.F) {
	for i, args := range []string{`{"city":"Paris","units":["c","f"]}`, `{"q":"naïve café 日本","n":[1,2.5e3,null,true],"o":{"k":{}}}`, `{}`, `null`, `[1,2]`, `{"a":`, `"x"`} {
		providertest.AddSeed(f, fmt.Sprintf("seed-%d", i), args)
	}
	z := providertest.NewFuzzer(f, fuzzTarget)
	f.Fuzz(func(t *testing.T, args string) {
		// The server sends each event on one data line, its JSON
		// compacted: args that are JSON go on the wire that way.
		wire := args
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(args)) == nil {
			wire = compact.String()
		}
		body := fmt.Sprintf(`data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":%s}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`+"\r\n\r\n", wire)
		res, err := z.Call(t, true, http.StatusOK, "text/event-stream", []byte(body))
		var want map[string]any
		if json.Unmarshal([]byte(args), &want) != nil {
			return // not an object: any classified outcome will do
		}
		if err != nil {
			t.Fatalf("args %s: %v", args, err)
		}
		if len(res.ToolCalls) != 1 {
			t.Fatalf("%d tool calls; want 1", len(res.ToolCalls))
		}
		var got map[string]any
		if err := json.Unmarshal(res.ToolCalls[0].Arguments, &got); err != nil {
			t.Fatalf("arguments %s: %v", res.ToolCalls[0].Arguments, err)
		}
		if want == nil {
			want = map[string]any{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("args %s came back as %s", args, res.ToolCalls[0].Arguments)
		}
	})
}
