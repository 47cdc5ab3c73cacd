package gemini_test

import (
	"context"
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

func fuzzAdapter(t testing.TB, base string, hc *http.Client) *gemini.Adapter {
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"} {
		t.Setenv(k, "")
	}
	a, err := gemini.New(provider.Settings{Name: "gem", BaseURL: base,
		Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fakeBodies returns what the fake sends for each reply, streamed or not.
func fakeBodies(t testing.TB, stream bool, replies ...geminifake.Reply) [][]byte {
	srv := geminifake.New(geminifake.WithAPIKey(testKey), geminifake.WithSeed(1))
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
		geminifake.TextReply("Hello there, general Kenobi."),
		geminifake.FunctionCallReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		geminifake.BlockedPrompt("SAFETY"),
		geminifake.OverloadedMidStream(2),
		geminifake.CutStream(2),
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
	replies := []geminifake.Reply{
		geminifake.ContextOverflow(1100000, 1048576), geminifake.APIKeyInvalid(), geminifake.RateLimited("gemini-2.5-flash", 7*time.Second),
		geminifake.DailyQuotaExceeded("gemini-2.5-flash", time.Hour), geminifake.Unavailable(), geminifake.BadGateway(), geminifake.Internal(),
		geminifake.ModelNotFound("gemini-9"), geminifake.BillingRequired(), geminifake.InvalidArgument("bad key " + testKey),
	}
	statuses := []int{400, 400, 429, 429, 503, 502, 500, 404, 400, 400}
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

// FuzzToolCallArguments streams a functionCall whose args are arbitrary
// text (Gemini sends a call's arguments whole, as a JSON object, never in
// fragments): an object comes back with the same content, anything else
// is a classified error.
func FuzzToolCallArguments(f *testing.F) {
	for i, args := range []string{`{"city":"Paris","units":["c","f"]}`, `{"q":"naïve café 日本","n":[1,2.5e3,null,true],"o":{"k":{}}}`, `{}`, `null`, `[1,2]`, `{"a":`, `"x"`} {
		f.Add(args)
		providertest.WriteSeeds(f, fmt.Sprintf("seed-%d", i), args)
	}
	srv := providertest.NewRawServer(f)
	a := fuzzAdapter(f, srv.URL(), nil)
	f.Fuzz(func(t *testing.T, args string) {
		body := fmt.Sprintf(`data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":%s}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`+"\r\n\r\n", args)
		res, err := providertest.FuzzCall(t, srv, a, true, http.StatusOK, "text/event-stream", []byte(body), testKey)
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
