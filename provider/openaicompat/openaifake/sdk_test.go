package openaifake

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

var (
	openAIIDRe   = regexp.MustCompile(`^chatcmpl-[0-9A-Za-z]{29}$`)
	ollamaIDRe   = regexp.MustCompile(`^chatcmpl-[0-9]{1,3}$`)
	vllmIDRe     = regexp.MustCompile(`^chatcmpl-[0-9a-f]{32}$`)
	openAICallRe = regexp.MustCompile(`^call_[0-9A-Za-z]{24}$`)
	ollamaCallRe = regexp.MustCompile(`^call_[0-9a-z]{8}$`)
	vllmCallRe   = regexp.MustCompile(`^chatcmpl-tool-[0-9a-f]{32}$`)
)

func idRe(f Flavor) *regexp.Regexp {
	return map[Flavor]*regexp.Regexp{FlavorOpenAI: openAIIDRe, FlavorOllama: ollamaIDRe, FlavorVLLM: vllmIDRe}[f]
}

func callRe(f Flavor) *regexp.Regexp {
	return map[Flavor]*regexp.Regexp{FlavorOpenAI: openAICallRe, FlavorOllama: ollamaCallRe, FlavorVLLM: vllmCallRe}[f]
}

func TestSDKNonStreamText(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f), WithAPIKey(testKey), WithClock(fixedClock))
			client, _ := sdk(t, fake)
			fake.Enqueue(Reply{Text: "Hello <there> & welcome.", Usage: Usage{Prompt: 120, Completion: 9, Cached: 64, Reasoning: 4}})

			var resp *http.Response
			cc, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi"), option.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "Hello <there> & welcome." || cc.Choices[0].FinishReason != "stop" {
				t.Errorf("choices = %s", cc.RawJSON())
			}
			if !idRe(f).MatchString(cc.ID) || cc.Object != "chat.completion" || cc.Created == 0 {
				t.Errorf("id/object/created = %q %q %d", cc.ID, cc.Object, cc.Created)
			}
			wantModel := modelFor(f)
			if f == FlavorOpenAI {
				wantModel = "gpt-5-mini-2025-08-07"
			}
			if cc.Model != wantModel {
				t.Errorf("model = %q, want %q", cc.Model, wantModel)
			}
			u := cc.Usage
			if u.PromptTokens != 120 || u.CompletionTokens != 9 || u.TotalTokens != 129 {
				t.Errorf("usage = %s", u.RawJSON())
			}
			switch f {
			case FlavorOpenAI:
				if u.PromptTokensDetails.CachedTokens != 64 || u.CompletionTokensDetails.ReasoningTokens != 4 {
					t.Errorf("details = %s", u.RawJSON())
				}
				if !strings.HasPrefix(cc.SystemFingerprint, "fp_") || cc.ServiceTier != "default" {
					t.Errorf("fingerprint/tier = %q %q", cc.SystemFingerprint, cc.ServiceTier)
				}
				if h := resp.Header; !strings.HasPrefix(h.Get("x-request-id"), "req_") || h.Get("openai-version") != "2020-10-01" ||
					h.Get("x-ratelimit-remaining-requests") != "4999" || h.Get("x-ratelimit-reset-requests") != "12ms" {
					t.Errorf("headers = %v", h)
				}
				if fake.Requests()[0].RequestID != resp.Header.Get("x-request-id") {
					t.Error("recorded request id differs from header")
				}
			case FlavorOllama:
				if cc.SystemFingerprint != "fp_ollama" || strings.Contains(u.RawJSON(), "details") {
					t.Errorf("ollama fingerprint/usage = %q %s", cc.SystemFingerprint, u.RawJSON())
				}
				if !strings.Contains(cc.RawJSON(), `\u003cthere\u003e \u0026`) {
					t.Errorf("ollama does not escape HTML: %s", cc.RawJSON())
				}
			case FlavorVLLM:
				if !strings.Contains(u.RawJSON(), `"prompt_tokens_details":null`) {
					t.Errorf("vllm reports cached tokens without the option: %s", u.RawJSON())
				}
			}
			if f != FlavorOpenAI {
				for _, h := range []string{"x-request-id", "x-ratelimit-limit-requests", "retry-after"} {
					if resp.Header.Get(h) != "" {
						t.Errorf("%s sends %s", f, h)
					}
				}
			}

			r := fake.Requests()[0]
			if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.APIKey() != testKey || r.Stream() || r.LastUserText() != "Hi" || r.Model() != modelFor(f) {
				t.Errorf("recorded %s %s key=%q stream=%v text=%q", r.Method, r.Path, r.APIKey(), r.Stream(), r.LastUserText())
			}
		})
	}
}

func TestSDKDefaultEchoAndDerivedUsage(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			client, _ := sdk(t, fake)
			cc, err := client.Chat.Completions.New(testCtx(t), userParams(f, "ping me"))
			if err != nil {
				t.Fatal(err)
			}
			if cc.Choices[0].Message.Content != "echo: ping me" {
				t.Errorf("content = %q", cc.Choices[0].Message.Content)
			}
			wantPrompt := int64(CountTokens(fake.Requests()[0].Body))
			if cc.Usage.PromptTokens != wantPrompt || cc.Usage.CompletionTokens != int64(completionTokens(len("echo: ping me"))) {
				t.Errorf("usage = %s, want prompt %d", cc.Usage.RawJSON(), wantPrompt)
			}
		})
	}
}

func TestSDKToolCallAndResultRoundTrip(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			client, _ := sdk(t, fake)
			fake.Enqueue(
				ToolCallReply("get_weather", `{ "city" : "Paris", "units": ["c"] }`),
				TextReply("It is 18C and sunny in Paris."),
			)
			params := userParams(f, "Weather in Paris?")
			params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}

			first, err := client.Chat.Completions.New(testCtx(t), params)
			if err != nil {
				t.Fatal(err)
			}
			ch := first.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("first = %s", first.RawJSON())
			}
			tc := ch.Message.ToolCalls[0]
			if !callRe(f).MatchString(tc.ID) || tc.Type != "function" || tc.Function.Name != "get_weather" {
				t.Errorf("tool call = %s", tc.RawJSON())
			}
			if !jsonEqual(t, tc.Function.Arguments, `{"city":"Paris","units":["c"]}`) {
				t.Errorf("arguments = %q", tc.Function.Arguments)
			}
			wantArgs := map[Flavor]string{
				FlavorOpenAI: `{ "city" : "Paris", "units": ["c"] }`, // verbatim
				FlavorOllama: `{"city":"Paris","units":["c"]}`,       // Go compact
				FlavorVLLM:   `{"city": "Paris", "units": ["c"]}`,    // Python json.dumps
			}[f]
			if tc.Function.Arguments != wantArgs {
				t.Errorf("arguments = %q, want %q", tc.Function.Arguments, wantArgs)
			}
			if f == FlavorOpenAI && !strings.Contains(ch.Message.RawJSON(), `"content": null`) {
				t.Errorf("content beside tool calls is not null: %s", ch.Message.RawJSON())
			}

			params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage("18C sunny", tc.ID))
			second, err := client.Chat.Completions.New(testCtx(t), params)
			if err != nil {
				t.Fatal(err)
			}
			if second.Choices[0].FinishReason != "stop" || second.Choices[0].Message.Content != "It is 18C and sunny in Paris." {
				t.Errorf("second = %s", second.RawJSON())
			}

			msgs := fake.Requests()[1].Messages()
			if len(msgs) != 4 {
				t.Fatalf("second request has %d messages", len(msgs))
			}
			asst, tool := msgs[2], msgs[3]
			if asst.Role != "assistant" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].ID != tc.ID ||
				asst.ToolCalls[0].Name != "get_weather" || asst.ToolCalls[0].Arguments != tc.Function.Arguments {
				t.Errorf("assistant turn = %+v", asst)
			}
			if tool.Role != "tool" || tool.ToolCallID != tc.ID || tool.Content != "18C sunny" {
				t.Errorf("tool turn = %+v", tool)
			}
		})
	}
}

// streamScript has text and two parallel tool calls with awkward
// arguments.
func streamScript() Reply {
	return Reply{
		Text: "I'll check Paris and Zürich — one moment.",
		ToolCalls: []ToolCall{
			{Name: "get_weather", Arguments: `{"city":"Paris","units":"celsius"}`},
			{Name: "get_weather", Arguments: `{"city":"Zürich","opts":{"days":[1,2],"note":"a, b: \"c\""}}`},
		},
		Usage: Usage{Prompt: 394, Completion: 79, Cached: 128, Reasoning: 20},
	}
}

func TestSDKStreamAccumulate(t *testing.T) {
	for _, f := range []Flavor{FlavorOpenAI, FlavorVLLM} {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f), WithPromptTokensDetails())
			client, _ := sdk(t, fake)
			script := streamScript()
			fake.Enqueue(script)

			params := userParams(f, "Weather?")
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			var resp *http.Response
			stream := client.Chat.Completions.NewStreaming(testCtx(t), params, option.WithResponseInto(&resp))
			defer stream.Close()
			acc := openai.ChatCompletionAccumulator{}
			var finished []openai.FinishedChatCompletionToolCall
			contentChunks, argChunks, chunks := 0, 0, 0
			for stream.Next() {
				chunk := stream.Current()
				chunks++
				if !acc.AddChunk(chunk) {
					t.Fatalf("chunk %d rejected: %s", chunks, chunk.RawJSON())
				}
				if tc, ok := acc.JustFinishedToolCall(); ok {
					finished = append(finished, tc)
				}
				if chunks == 1 && (len(chunk.Choices) != 1 || chunk.Choices[0].Delta.Role != "assistant") {
					t.Errorf("first chunk has no role: %s", chunk.RawJSON())
				}
				for _, c := range chunk.Choices {
					if c.Delta.Content != "" {
						contentChunks++
					}
					for _, d := range c.Delta.ToolCalls {
						if d.Function.Arguments != "" {
							argChunks++
						}
						if (d.ID != "") != (d.Function.Name != "") || (d.ID != "") != (d.Type != "") {
							t.Errorf("fragment carries id/type/name partially: %s", d.RawJSON())
						}
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if got := resp.Header.Get("content-type"); got != "text/event-stream; charset=utf-8" {
				t.Errorf("content-type = %q", got)
			}
			if contentChunks < 5 || argChunks < 8 {
				t.Errorf("content chunks %d, argument chunks %d: not split enough", contentChunks, argChunks)
			}
			if len(acc.Choices) != 1 {
				t.Fatalf("accumulated %s", acc.RawJSON())
			}
			msg := acc.Choices[0].Message
			if msg.Content != script.Text || acc.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("content %q finish %q", msg.Content, acc.Choices[0].FinishReason)
			}
			if len(msg.ToolCalls) != 2 {
				t.Fatalf("tool calls = %+v", msg.ToolCalls)
			}
			for i, want := range script.ToolCalls {
				got := msg.ToolCalls[i]
				if !callRe(f).MatchString(got.ID) || got.Function.Name != want.Name || !jsonEqual(t, got.Function.Arguments, want.Arguments) {
					t.Errorf("tool %d = %s %s %s", i, got.ID, got.Function.Name, got.Function.Arguments)
				}
			}
			if msg.ToolCalls[0].ID == msg.ToolCalls[1].ID {
				t.Error("parallel calls share an id")
			}
			if len(finished) < 1 || finished[0].Name != "get_weather" || finished[0].Index != 0 || finished[0].ID != msg.ToolCalls[0].ID {
				t.Errorf("JustFinishedToolCall = %+v", finished)
			}
			u := acc.Usage
			if u.PromptTokens != 394 || u.CompletionTokens != 79 || u.TotalTokens != 473 || u.PromptTokensDetails.CachedTokens != 128 {
				t.Errorf("usage = %s", u.RawJSON())
			}
			if f == FlavorOpenAI && u.CompletionTokensDetails.ReasoningTokens != 20 {
				t.Errorf("reasoning = %s", u.RawJSON())
			}
		})
	}
}

// TestSDKStreamOllamaReusedIndex shows the Ollama quirk adapters must
// survive: parallel calls arrive whole, each in its own chunk, all with
// index 0.
func TestSDKStreamOllamaReusedIndex(t *testing.T) {
	fake := start(t, WithFlavor(FlavorOllama))
	client, _ := sdk(t, fake)
	script := streamScript()
	fake.Enqueue(script)

	stream := client.Chat.Completions.NewStreaming(testCtx(t), userParams(FlavorOllama, "Weather?"))
	defer stream.Close()
	type call struct {
		index     int64
		id, args  string
		chunkNo   int
		chunkSize int
	}
	var calls []call
	var text strings.Builder
	var finish string
	n := 0
	for stream.Next() {
		chunk := stream.Current()
		n++
		if len(chunk.Choices) != 1 || chunk.Choices[0].Delta.Role != "assistant" {
			t.Errorf("chunk %d: %s", n, chunk.RawJSON())
			continue
		}
		c := chunk.Choices[0]
		text.WriteString(c.Delta.Content)
		for _, d := range c.Delta.ToolCalls {
			calls = append(calls, call{d.Index, d.ID, d.Function.Arguments, n, len(c.Delta.ToolCalls)})
		}
		if c.FinishReason != "" {
			finish = c.FinishReason
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != script.Text || finish != "tool_calls" {
		t.Errorf("text %q finish %q", text.String(), finish)
	}
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	a, b := calls[0], calls[1]
	if a.index != 0 || b.index != 0 || a.id == b.id || a.chunkNo == b.chunkNo || a.chunkSize != 1 || b.chunkSize != 1 {
		t.Errorf("want two chunks with index 0 and different ids, got %+v", calls)
	}
	for i, c := range calls {
		if !ollamaCallRe.MatchString(c.id) || !jsonEqual(t, c.args, script.ToolCalls[i].Arguments) {
			t.Errorf("call %d: id %q args %q (want the whole arguments at once)", i, c.id, c.args)
		}
	}
}

func TestSDKUsageChunkOnlyWithIncludeUsage(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			client, _ := sdk(t, fake)
			for _, include := range []bool{false, true} {
				fake.Enqueue(Reply{Text: "Some words to stream.", Usage: Usage{Prompt: 11, Completion: 5}})
				params := userParams(f, "Hi")
				if include {
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}
				stream := client.Chat.Completions.NewStreaming(testCtx(t), params)
				var chunks []openai.ChatCompletionChunk
				for stream.Next() {
					chunks = append(chunks, stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				stream.Close()
				usageChunks := 0
				for i, c := range chunks {
					m := decodeMap(t, []byte(c.RawJSON()))
					if len(c.Choices) == 0 {
						usageChunks++
						if i != len(chunks)-1 || c.Usage.PromptTokens != 11 || c.Usage.CompletionTokens != 5 || c.Usage.TotalTokens != 16 {
							t.Errorf("usage chunk %d of %d: %s", i, len(chunks), c.RawJSON())
						}
						continue
					}
					// Earlier chunks: "usage": null on OpenAI with the
					// option; never a usage value.
					wantKey := f == FlavorOpenAI && include
					if has(m, "usage") != wantKey || m["usage"] != nil {
						t.Errorf("include=%v chunk %d usage key: %s", include, i, c.RawJSON())
					}
				}
				if want := map[bool]int{false: 0, true: 1}[include]; usageChunks != want {
					t.Errorf("include=%v: %d usage chunks", include, usageChunks)
				}
			}
		})
	}
}

func TestSDKErrorConstructors(t *testing.T) {
	tests := []struct {
		name           string
		reply          Reply
		status         int
		typ, code, msg string
		param          string
		headers        map[string]string
	}{
		{"InvalidRequest", InvalidRequest("bad things"), 400, "invalid_request_error", "", "bad things", "", nil},
		{"ContextLengthExceeded", ContextLengthExceeded(128000, 130000), 400, "invalid_request_error", "context_length_exceeded",
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.", "messages", nil},
		{"MaxTokensUnsupported", MaxTokensUnsupported(), 400, "invalid_request_error", "unsupported_parameter",
			"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "max_tokens", nil},
		{"InvalidAPIKey", InvalidAPIKey("sk-abcdefghijklmnopqrstuvwxyz"), 401, "invalid_request_error", "invalid_api_key",
			"Incorrect API key provided: sk-ab***yz. You can find your API key at https://platform.openai.com/account/api-keys.", "", nil},
		{"MissingAPIKey", MissingAPIKey(), 401, "invalid_request_error", "", "", "", nil},
		{"ModelNotFound", ModelNotFound("gpt-nope"), 404, "invalid_request_error", "model_not_found",
			"The model `gpt-nope` does not exist or you do not have access to it.", "", nil},
		{"RateLimited", RateLimited(2400 * time.Millisecond), 429, "tokens", "rate_limit_exceeded",
			"Rate limit reached for gpt-5-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s.", "",
			map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2.4s", "retry-after": ""}},
		{"RateLimitedRetryAfter", RateLimited(1500 * time.Millisecond).WithRetryAfter(1500 * time.Millisecond), 429, "tokens", "rate_limit_exceeded", "", "",
			map[string]string{"retry-after": "2", "retry-after-ms": "1500", "x-ratelimit-reset-tokens": "1.5s"}},
		{"RateLimitedRequests", RateLimitedRequests(120 * time.Millisecond), 429, "requests", "rate_limit_exceeded", "", "",
			map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "120ms"}},
		{"InsufficientQuota", InsufficientQuota(), 429, "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details.", "", nil},
		{"ServerError", ServerError(), 500, "server_error", "", "The server had an error while processing your request. Sorry about that!", "", nil},
		{"Overloaded", Overloaded(), 503, "server_error", "", "The engine is currently overloaded, please try again later", "", nil},
		{"BadGateway", BadGateway(), 502, "", "", "", "", map[string]string{"content-type": "text/html"}},
		{"StatusOnly", Reply{Status: 504}, 504, "server_error", "", "The server had an error while processing your request. Sorry about that!", "", nil},
		{"ExtraHeader", ServerError().WithHeader("x-should-retry", "false"), 500, "server_error", "", "", "", map[string]string{"x-should-retry": "false"}},
	}
	fake := start(t)
	client, _ := sdk(t, fake)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake.Enqueue(tt.reply)
			_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorOpenAI, "Hi"))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *openai.Error", err, err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Type != tt.typ || apiErr.Code != tt.code || apiErr.Param != tt.param {
				t.Errorf("status %d type %q code %q param %q, want %d %q %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, tt.status, tt.typ, tt.code, tt.param)
			}
			if tt.msg != "" && apiErr.Message != tt.msg {
				t.Errorf("message = %q\nwant      %q", apiErr.Message, tt.msg)
			}
			if tt.typ != "" && apiErr.Message == "" {
				t.Error("empty message")
			}
			if tt.typ != "" && !apiErr.JSON.Param.Valid() && !strings.Contains(apiErr.RawJSON(), `"param"`) {
				t.Errorf("no param key: %s", apiErr.RawJSON())
			}
			for k, v := range tt.headers {
				if got := apiErr.Response.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if !strings.HasPrefix(apiErr.Response.Header.Get("x-request-id"), "req_") {
				t.Error("no x-request-id on the error")
			}
		})
	}
}

// TestSDKErrorsPerFlavor shows how each flavour's error body reaches the
// SDK, including the shapes the SDK cannot parse.
func TestSDKErrorsPerFlavor(t *testing.T) {
	t.Run("ollama", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorOllama), WithModelCheck())
		client, _ := sdk(t, fake)
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorOllama, "Hi"), option.WithJSONSet("model", "nope"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type != "not_found_error" || apiErr.Code != "" ||
			apiErr.Message != `model "nope" not found, try pulling it first` {
			t.Errorf("model not found = %v %+v", err, apiErr)
		}
		// The type follows the status whatever the script says.
		fake.Enqueue(RateLimited(time.Second), InvalidRequest("bad"))
		for _, want := range []struct {
			status int
			typ    string
		}{{429, "api_error"}, {400, "invalid_request_error"}} {
			_, err = client.Chat.Completions.New(testCtx(t), userParams(FlavorOllama, "Hi"))
			if !errors.As(err, &apiErr) || apiErr.StatusCode != want.status || apiErr.Type != want.typ || apiErr.Code != "" ||
				apiErr.Response.Header.Get("x-ratelimit-remaining-tokens") != "" {
				t.Errorf("want %d %s: %v %+v", want.status, want.typ, err, apiErr)
			}
		}
	})
	t.Run("vllm", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorVLLM))
		client, _ := sdk(t, fake)
		fake.Enqueue(VLLMContextLengthExceeded(4096, 4000, 1000), ServerError())
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorVLLM, "Hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "BadRequestError" ||
			apiErr.Message != "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion." {
			t.Fatalf("overflow = %v %+v", err, apiErr)
		}
		// code is the integer 400 on the wire: the SDK's string field
		// keeps its raw text.
		if !strings.Contains(apiErr.RawJSON(), `"code":400`) || apiErr.Code != "400" {
			t.Errorf("code %q in %s", apiErr.Code, apiErr.RawJSON())
		}
		_, err = client.Chat.Completions.New(testCtx(t), userParams(FlavorVLLM, "Hi"))
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Type != "InternalServerError" || apiErr.Code != "500" {
			t.Errorf("server error = %v %+v", err, apiErr)
		}
	})
	t.Run("vllm-model-not-found", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorVLLM), WithModelCheck())
		client, _ := sdk(t, fake)
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorVLLM, "Hi"), option.WithJSONSet("model", "gpt-x"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type != "NotFoundError" || apiErr.Param != "model" ||
			apiErr.Code != "404" || apiErr.Message != "The model `gpt-x` does not exist." {
			t.Errorf("err = %v %+v", err, apiErr)
		}
	})
	t.Run("vllm-string-code", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorVLLM), WithErrorStyle(ErrorStyleVLLMStringCode))
		client, _ := sdk(t, fake)
		fake.Enqueue(VLLMContextLengthExceeded(4096, 4000, 1000))
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorVLLM, "Hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.Code != "context_length_exceeded" || !strings.Contains(apiErr.RawJSON(), `"code":"context_length_exceeded"`) {
			t.Errorf("err = %v %+v", err, apiErr)
		}
	})
	t.Run("vllm-legacy", func(t *testing.T) {
		// The top-level shape has no "error" key: the SDK still returns an
		// *openai.Error with the status, but every field empty.
		fake := start(t, WithFlavor(FlavorVLLM), WithErrorStyle(ErrorStyleVLLMLegacy))
		client, _ := sdk(t, fake)
		fake.Enqueue(VLLMContextLengthExceeded(4096, 4000, 1000))
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorVLLM, "Hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "" {
			t.Fatalf("err = %v %+v", err, apiErr)
		}
		body, _ := io.ReadAll(apiErr.Response.Body)
		if m := decodeMap(t, body); m["object"] != "error" || m["type"] != "BadRequestError" || m["code"] != float64(400) {
			t.Errorf("body = %s", body)
		}
	})
	t.Run("bare-string", func(t *testing.T) {
		// {"error":"…"} is not an error object: openai-go returns a JSON
		// decoding error instead of *openai.Error, and the status is only
		// in the response.
		for _, f := range flavors {
			fake := start(t, WithFlavor(f), WithErrorStyle(ErrorStyleBareString))
			client, _ := sdk(t, fake)
			fake.Enqueue(InvalidRequest("something broke"))
			var resp *http.Response
			_, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi"), option.WithResponseInto(&resp))
			var apiErr *openai.Error
			if err == nil || errors.As(err, &apiErr) {
				t.Fatalf("%s: err = %v (%T)", f, err, err)
			}
			if resp == nil || resp.StatusCode != 400 {
				t.Fatalf("%s: response %v", f, resp)
			}
			body, _ := io.ReadAll(resp.Body)
			if string(body) != `{"error":"something broke"}` {
				t.Errorf("%s: body %s", f, body)
			}
		}
	})
}

func TestSDKAuth(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		fake := start(t, WithAPIKey(testKey))
		client, _ := sdk(t, fake, option.WithAPIKey("sk-proj-wrongwrongwrong1234"))
		fake.Enqueue(TextReply("kept"))
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorOpenAI, "Hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" || apiErr.Type != "invalid_request_error" {
			t.Fatalf("err = %v %+v", err, apiErr)
		}
		if strings.Contains(apiErr.Message, "sk-proj-wrongwrongwrong1234") || !strings.Contains(apiErr.Message, "sk-pr***34") {
			t.Errorf("key not masked: %q", apiErr.Message)
		}
		if fake.Pending(RouteChat) != 1 {
			t.Error("a rejected request took a reply")
		}
	})
	t.Run("vllm", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorVLLM), WithAPIKey(testKey))
		client, _ := sdk(t, fake, option.WithAPIKey("wrong"))
		// vLLM's 401 body is {"error":"Unauthorized"}: the SDK cannot parse
		// it as an error object (see TestSDKErrorsPerFlavor/bare-string).
		var resp *http.Response
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorVLLM, "Hi"), option.WithResponseInto(&resp))
		var apiErr *openai.Error
		if err == nil || errors.As(err, &apiErr) || resp == nil || resp.StatusCode != 401 {
			t.Fatalf("err = %v, resp %v", err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != `{"error":"Unauthorized"}` {
			t.Errorf("body %s", body)
		}
		// /health needs no key.
		if resp, _ := raw(t, fake, "GET", "/health", nil, ""); resp.StatusCode != 200 {
			t.Errorf("health = %d", resp.StatusCode)
		}
	})
	t.Run("ollama", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorOllama), WithAPIKey(testKey))
		client, _ := sdk(t, fake, option.WithAPIKey("anything"))
		if _, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorOllama, "Hi")); err != nil {
			t.Errorf("ollama checked the key: %v", err)
		}
	})
}

func TestSDKMidStreamError(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			client, _ := sdk(t, fake)
			fake.Enqueue(Reply{Text: "one two three four five", MidStreamError: &StreamError{Message: "engine died", Type: "server_error", AfterChunks: 3}})

			var resp *http.Response
			stream := client.Chat.Completions.NewStreaming(testCtx(t), userParams(f, "Hi"), option.WithResponseInto(&resp))
			defer stream.Close()
			var text strings.Builder
			n := 0
			for stream.Next() {
				n++
				for _, c := range stream.Current().Choices {
					text.WriteString(c.Delta.Content)
				}
			}
			if resp.StatusCode != 200 || n != 3 {
				t.Errorf("status %d, %d chunks before the error", resp.StatusCode, n)
			}
			if text.String() == "" || strings.Contains(text.String(), "five") {
				t.Errorf("text before the error = %q", text.String())
			}
			var se *ssestream.StreamError
			if !errors.As(stream.Err(), &se) {
				t.Fatalf("stream.Err() = %v (%T), want *ssestream.StreamError", stream.Err(), stream.Err())
			}
			if !strings.Contains(se.Message, "engine died") {
				t.Errorf("message %q", se.Message)
			}
			wantType := map[Flavor]string{FlavorOpenAI: "server_error", FlavorOllama: "api_error", FlavorVLLM: "InternalServerError"}[f]
			var ev struct {
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(se.Event.Data, &ev); err != nil || ev.Error.Type != wantType {
				t.Errorf("event %s: type %q, want %q", se.Event.Data, ev.Error.Type, wantType)
			}

			// Without streaming the same script is an HTTP 500.
			fake.Enqueue(ServerErrorMidStream(1))
			_, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi"))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
				t.Errorf("non-stream = %v", err)
			}
		})
	}
}

func TestSDKCutStream(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			client, _ := sdk(t, fake)
			fake.Enqueue(Reply{Text: "a long story about the sea and the sky", CutAfterChunks: 4})
			params := userParams(f, "Hi")
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(testCtx(t), params)
			defer stream.Close()
			acc := openai.ChatCompletionAccumulator{}
			n := 0
			for stream.Next() {
				n++
				acc.AddChunk(stream.Current())
			}
			// The chunked body ended without its terminating chunk.
			if err := stream.Err(); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("stream.Err() = %v, want io.ErrUnexpectedEOF", err)
			}
			if n != 4 || acc.Choices[0].FinishReason != "" || acc.Usage.TotalTokens != 0 {
				t.Errorf("%d chunks, finish %q, usage %d", n, acc.Choices[0].FinishReason, acc.Usage.TotalTokens)
			}

			// A cut non-streaming body fails the same way.
			fake.Enqueue(Reply{Text: "truncated", CutAfterBytes: 20})
			if _, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi")); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("cut body: err = %v", err)
			}
		})
	}
}

func TestSDKEndEarlyAndWithoutDone(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			// A clean early end: the SDK sees no error and no finish_reason.
			fake := start(t, WithFlavor(f))
			client, _ := sdk(t, fake)
			fake.Enqueue(Reply{Text: "one two three four five", EndAfterChunks: 2})
			stream := client.Chat.Completions.NewStreaming(testCtx(t), userParams(f, "Hi"))
			acc := openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			stream.Close()
			if err := stream.Err(); err != nil || acc.Choices[0].FinishReason != "" || acc.Choices[0].Message.Content == "" {
				t.Errorf("early end: err %v, %s", err, acc.RawJSON())
			}

			// Without [DONE] the stream is complete but ends at EOF.
			noDone := start(t, WithFlavor(f), WithoutDone())
			client, _ = sdk(t, noDone)
			stream = client.Chat.Completions.NewStreaming(testCtx(t), userParams(f, "Hi"))
			acc = openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			stream.Close()
			if err := stream.Err(); err != nil || acc.Choices[0].FinishReason != "stop" || acc.Choices[0].Message.Content != "echo: Hi" {
				t.Errorf("no [DONE]: err %v, %s", err, acc.RawJSON())
			}
		})
	}
}

func TestSDKHoldGate(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	gate := make(chan struct{})
	fake.Enqueue(TextReply("finally").WithHold(gate))

	type result struct {
		cc  *openai.ChatCompletion
		err error
	}
	done := make(chan result, 1)
	go func() {
		cc, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorOpenAI, "Hi"))
		done <- result{cc, err}
	}()
	if err := fake.WaitRequests(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitActiveConns(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	// The request has arrived and is parked on the gate: no byte has been
	// written, so the call cannot have returned.
	select {
	case r := <-done:
		t.Fatalf("call returned before the gate opened: %v %v", r.cc, r.err)
	default:
	}
	close(gate)
	r := <-done
	if r.err != nil || r.cc.Choices[0].Message.Content != "finally" {
		t.Fatalf("after the gate: %v %v", r.cc, r.err)
	}
}

func TestSDKStallMidStream(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	gate := make(chan struct{})
	fake.Enqueue(Reply{Text: "one two three four", StallAfterChunks: 2, Stall: gate})
	stream := client.Chat.Completions.NewStreaming(testCtx(t), userParams(FlavorOpenAI, "Hi"))
	defer stream.Close()
	// Two chunks arrive, then the server stops sending until the gate
	// opens; reading them cannot block.
	for i := range 2 {
		if !stream.Next() {
			t.Fatalf("chunk %d: %v", i, stream.Err())
		}
	}
	got := stream.Current().Choices[0].Delta.Content
	close(gate)
	var rest strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			rest.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || got != "one" || rest.String() != " two three four" {
		t.Errorf("before %q after %q err %v", got, rest.String(), err)
	}
}

func TestHoldReleasedByClientCancelAndClose(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	never := make(chan struct{})
	fake.Enqueue(TextReply("x").WithHold(never), TextReply("y").WithHold(never))

	ctx, cancel := contextWithCancel(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(ctx, userParams(FlavorOpenAI, "Hi"))
		errc <- err
	}()
	if err := fake.WaitRequests(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled call succeeded")
	}
	if err := fake.WaitActiveConns(testCtx(t), 0); err != nil {
		t.Errorf("handler not released: %d active (%v)", fake.ActiveConns(), err)
	}

	go func() {
		_, err := client.Chat.Completions.New(testCtx(t), userParams(FlavorOpenAI, "Hi"))
		errc <- err
	}()
	if err := fake.WaitRequests(testCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	fake.Close()
	if err := <-errc; err == nil {
		t.Error("held call succeeded after Close")
	}
}

func TestSDKActiveConnsBackToZero(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f))
			client, tr := sdk(t, fake)

			// A client that stops reading a stream and closes it must not
			// leave the handler busy.
			fake.Enqueue(Reply{Text: "a stream that stalls half way", StallAfterChunks: 2})
			stream := client.Chat.Completions.NewStreaming(testCtx(t), userParams(f, "Hi"))
			if !stream.Next() {
				t.Fatal(stream.Err())
			}
			if fake.ActiveConns() != 1 {
				t.Errorf("ActiveConns = %d while streaming", fake.ActiveConns())
			}
			stream.Close()
			if err := fake.WaitActiveConns(testCtx(t), 0); err != nil {
				t.Fatalf("still active: %d (%v)", fake.ActiveConns(), err)
			}

			// Finished calls leave no busy connection; the non-streamed
			// ones leave an idle keep-alive connection (a stream read up to
			// [DONE] may or may not, depending on whether the terminating
			// chunk was read), and closing idle ones leaves none.
			stream = client.Chat.Completions.NewStreaming(testCtx(t), userParams(f, "Hi"))
			for stream.Next() {
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			stream.Close()
			for range 2 {
				if _, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi")); err != nil {
					t.Fatal(err)
				}
			}
			if err := fake.WaitActiveConns(testCtx(t), 0); err != nil {
				t.Fatal(err)
			}
			if fake.OpenConns() < 1 {
				t.Errorf("OpenConns = %d with a kept-alive connection", fake.OpenConns())
			}
			tr.CloseIdleConnections()
			if err := fake.WaitOpenConns(testCtx(t), 0); err != nil {
				t.Fatalf("connections still open: %d (%v)", fake.OpenConns(), err)
			}
		})
	}
}

func TestSDKModelsList(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			fake := start(t, WithFlavor(f), WithAPIKey(testKey))
			client, _ := sdk(t, fake)
			page, err := client.Models.List(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultModels(f)
			if len(page.Data) != len(want) {
				t.Fatalf("models = %s", page.RawJSON())
			}
			for i, m := range page.Data {
				if m.ID != want[i].ID || m.Object != "model" || m.Created != want[i].Created.Unix() || m.OwnedBy != want[i].OwnedBy {
					t.Errorf("model %d = %s", i, m.RawJSON())
				}
			}
			if f == FlavorVLLM && !strings.Contains(page.Data[0].RawJSON(), `"max_model_len":32768`) {
				t.Errorf("vllm card = %s", page.Data[0].RawJSON())
			}
			if got := fake.Requests()[0]; got.Method != "GET" || got.Path != "/v1/models" {
				t.Errorf("recorded %s %s", got.Method, got.Path)
			}

			if f != FlavorVLLM {
				m, err := client.Models.Get(testCtx(t), want[0].ID)
				if err != nil || m.ID != want[0].ID {
					t.Errorf("Get = %v, %v", m, err)
				}
				_, err = client.Models.Get(testCtx(t), "nope")
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
					t.Errorf("Get unknown = %v", err)
				}
			}

			// The models route has its own fault queue (a failing health
			// check).
			fake.EnqueueRoute(RouteModels, ServerError())
			_, err = client.Models.List(testCtx(t))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
				t.Errorf("scripted models fault = %v", err)
			}
		})
	}
}

func TestSDKRequestValidation(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(TextReply("kept"))

	params := userParams(FlavorOpenAI, "Hi")
	params.MaxTokens = openai.Int(100)
	_, err := client.Chat.Completions.New(testCtx(t), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" || apiErr.Param != "max_tokens" {
		t.Errorf("max_tokens on gpt-5-mini = %v %+v", err, apiErr)
	}
	params.Model = "gpt-4o-mini"
	if _, err := client.Chat.Completions.New(testCtx(t), params); err != nil {
		t.Errorf("max_tokens on gpt-4o-mini: %v", err)
	}

	params = userParams(FlavorOpenAI, "Hi")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	_, err = client.Chat.Completions.New(testCtx(t), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "stream_options" {
		t.Errorf("stream_options without stream = %v %+v", err, apiErr)
	}

	// Ollama and vLLM accept max_tokens for any model.
	for _, f := range []Flavor{FlavorOllama, FlavorVLLM} {
		other := start(t, WithFlavor(f))
		c, _ := sdk(t, other)
		p := userParams(f, "Hi")
		p.MaxTokens = openai.Int(100)
		p.Model = "gpt-5-mini"
		if _, err := c.Chat.Completions.New(testCtx(t), p); err != nil {
			t.Errorf("%s max_tokens: %v", f, err)
		}
	}
}

func TestSDKContextOverflow(t *testing.T) {
	small := func(id string) Model { return Model{ID: id, ContextWindow: 50} }
	long := strings.Repeat("lorem ipsum ", 40) // ~480 bytes → ~125 tokens

	t.Run("openai", func(t *testing.T) {
		fake := start(t, WithModels(small("gpt-small")))
		client, _ := sdk(t, fake)
		fake.Enqueue(TextReply("kept"))
		p := userParams(FlavorOpenAI, long)
		p.Model = "gpt-small"
		_, err := client.Chat.Completions.New(testCtx(t), p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" ||
			!strings.HasPrefix(apiErr.Message, "This model's maximum context length is 50 tokens. However, your messages resulted in ") {
			t.Fatalf("err = %v %+v", err, apiErr)
		}
		if fake.Pending(RouteChat) != 1 {
			t.Error("overflow took a reply")
		}
	})
	t.Run("vllm", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorVLLM), WithModels(Model{ID: "m", ContextWindow: 200}))
		client, _ := sdk(t, fake)
		p := userParams(FlavorVLLM, long)
		p.Model = "m"
		if _, err := client.Chat.Completions.New(testCtx(t), p); err != nil {
			t.Fatalf("fits without a completion budget: %v", err)
		}
		p.MaxCompletionTokens = openai.Int(100)
		_, err := client.Chat.Completions.New(testCtx(t), p)
		var apiErr *openai.Error
		prompt := CountTokens(fake.Requests()[1].Body)
		want := VLLMContextLengthExceeded(200, prompt, 100).ErrorMessage
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "BadRequestError" || apiErr.Message != want {
			t.Errorf("err = %v %+v, want %q", err, apiErr, want)
		}
	})
	t.Run("ollama-silent", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorOllama), WithModels(small("tiny:latest")))
		client, _ := sdk(t, fake)
		p := userParams(FlavorOllama, long)
		p.Model = "tiny" // resolves to tiny:latest
		cc, err := client.Chat.Completions.New(testCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Usage.PromptTokens != 50 || cc.Model != "tiny" {
			t.Errorf("prompt_tokens %d (want capped at 50), model %q", cc.Usage.PromptTokens, cc.Model)
		}
	})
	t.Run("ollama-error", func(t *testing.T) {
		fake := start(t, WithFlavor(FlavorOllama), WithModels(small("tiny:latest")), WithOverflowError())
		client, _ := sdk(t, fake)
		p := userParams(FlavorOllama, long)
		p.Model = "tiny"
		_, err := client.Chat.Completions.New(testCtx(t), p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Message != "the input length exceeds the context length" {
			t.Errorf("err = %v %+v", err, apiErr)
		}
	})
}

func TestSDKModelCheck(t *testing.T) {
	for _, f := range flavors {
		fake := start(t, WithFlavor(f), WithModelCheck())
		client, _ := sdk(t, fake)
		_, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi"), option.WithJSONSet("model", "missing-model"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("%s: %v", f, err)
		}
		if _, err := client.Chat.Completions.New(testCtx(t), userParams(f, "Hi")); err != nil {
			t.Errorf("%s: catalogued model rejected: %v", f, err)
		}
	}
}
