package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// benchRequests are a one-line prompt and an agent's turn: system prompt,
// two tools, a tool call and its result.
func benchRequests() map[string]*provider.Request {
	weather := provider.ToolDef{Name: "get_weather", Description: "Weather for a city.", InputSchema: codecSchema}
	search := provider.ToolDef{Name: "search", Description: "Search the web.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q"]}`)}
	return map[string]*provider.Request{
		"prompt": {Prompt: "hello there"},
		"agent": {System: "You are a helpful assistant. Answer briefly and use the tools when they help.", Tools: []provider.ToolDef{weather, search},
			Messages: []provider.Message{
				provider.UserText("What's the weather in Paris, and is it warmer than in Oslo?"),
				{Role: provider.RoleAssistant, Parts: []provider.Part{{Type: provider.PartText, Text: "Let me look both up."},
					{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
					{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "call_2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}}},
				provider.ToolResults(provider.ToolResult{CallID: "call_1", Content: `{"temp_c":18,"sky":"clear"}`}, provider.ToolResult{CallID: "call_2", Content: `{"temp_c":4,"sky":"rain"}`}),
			}},
	}
}

// BenchmarkInvokeCodec makes the same call through the adapter against
// the OpenAI fake on loopback, with the fixed codec (fixed) and with the
// SDK's parameters and decoding (sdk), invoked and streamed.
func BenchmarkInvokeCodec(b *testing.B) {
	srv := openaifake.New(openaifake.WithAPIKey(codecKey), openaifake.WithPromptTokensDetails())
	b.Cleanup(srv.Close)
	a, err := New(provider.Settings{Name: "oai", Profile: "openai", BaseURL: srv.URL() + "/v1",
		Credentials: map[string]string{"api_key": codecKey}, Pricer: testCatalog(b), HTTPClient: &http.Client{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	stream := func(s provider.Stream, err error) error {
		if err != nil {
			return err
		}
		_, err = provider.Collect(s)
		return err
	}
	for _, name := range []string{"prompt", "agent"} {
		req := benchRequests()[name]
		calls := []struct {
			name string
			call func() error
		}{
			{"invoke/fixed", func() error { _, err := a.Invoke(ctx, req); return err }},
			{"invoke/sdk", func() error { _, err := a.legacyInvoke(ctx, req); return err }},
			{"stream/fixed", func() error { return stream(a.Stream(ctx, req)) }},
			{"stream/sdk", func() error { return stream(a.legacyStream(ctx, req)) }},
		}
		for _, c := range calls {
			b.Run(name+"/"+c.name, func(b *testing.B) {
				for range 20 { // warm the connection pool
					if err := c.call(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := c.call(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchAnswer is a real-looking answer with usage details.
var benchAnswer = []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-5-mini-2025-08-07","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is at 18°C and clear; Oslo is at 4°C with rain, so Paris is 14 degrees warmer.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1900,"completion_tokens":30,"total_tokens":1930,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":6,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_6d91266242"}`)

var benchChunk = []byte(`{"id":"chatcmpl-s3EP7I9GpXfzOND13TGFjQs16PFFH","object":"chat.completion.chunk","created":1796020409,"model":"gpt-5-mini-2025-08-07","service_tier":"default","system_fingerprint":"fp_6d91266242","choices":[{"index":0,"delta":{"content":" warmer"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"6taWUJ"}`)

// BenchmarkCodec isolates the codec: encoding the agent request, decoding
// an answer and a stream chunk, fixed and by the SDK.
func BenchmarkCodec(b *testing.B) {
	a := codecAdapter(b, OpenAI.Name, &memTransport{})
	req := benchRequests()["agent"]
	model := a.base.Model(req)
	hdr := &http.Response{Header: http.Header{"Content-Type": {"application/json"}}}
	b.Run("encode/fixed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := a.body(req, model, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/sdk", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p, err := a.legacyParams(req, model, false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/fixed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := decodeCompletion(hdr, benchAnswer); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/sdk", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var cc *openai.ChatCompletion
			if err := json.NewDecoder(bytes.NewReader(benchAnswer)).Decode(&cc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk/fixed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var c wireChunk
			if err := json.Unmarshal(benchChunk, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk/sdk", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var c openai.ChatCompletionChunk
			if err := json.Unmarshal(benchChunk, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
