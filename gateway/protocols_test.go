package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name: "get_weather", Description: openai.String("Get the weather"),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
})

var weatherToolA = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Get the weather"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}

// body decodes a recorded upstream request body.
func body(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("upstream body %s: %v", raw, err)
	}
	return m
}

// An OpenAI client served by the Anthropic fake: text, usage, finish
// reason, the headers naming who served, then a tool call and its result
// sent back as a role=tool message.
func TestOpenAIClientServedByAnthropic(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	c := w.openai(w.key)
	w.anth.Enqueue(anthropicfake.Reply{Text: "Hello from Claude.", Usage: anthropicfake.Usage{Input: 20, Output: 5, CacheRead: 10}})
	var raw *http.Response
	cc, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "builder",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be terse."), openai.UserMessage("hi")},
	}, ooption.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Choices[0].Message.Content; got != "Hello from Claude." || cc.Choices[0].FinishReason != "stop" {
		t.Errorf("answer = %q, finish %q", got, cc.Choices[0].FinishReason)
	}
	if u := cc.Usage; u.PromptTokens != 30 || u.CompletionTokens != 5 || u.TotalTokens != 35 || u.PromptTokensDetails.CachedTokens != 10 {
		t.Errorf("usage = %+v", u)
	}
	if raw.Header.Get(gateway.HeaderProvider) != "claude" || raw.Header.Get(gateway.HeaderModel) != "claude-sonnet-4-6" || !strings.HasPrefix(raw.Header.Get(gateway.HeaderInvocation), "inv_") {
		t.Errorf("headers = %v", raw.Header)
	}
	up := body(t, w.anth.Requests()[0].Body)
	if up["system"] == nil || !strings.Contains(string(w.anth.Requests()[0].Body), "Be terse.") {
		t.Errorf("the system prompt did not reach the provider: %s", w.anth.Requests()[0].Body)
	}

	// A tool call, then its result.
	w.anth.Enqueue(anthropicfake.Reply{Text: "Checking.", ToolUses: []anthropicfake.ToolUse{{ID: "toolu_01abc", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}})
	params := openai.ChatCompletionNewParams{
		Model:    "claude-sonnet-4-6",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
	}
	cc, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := cc.Choices[0].Message
	if cc.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "toolu_01abc" ||
		msg.ToolCalls[0].Function.Name != "get_weather" || msg.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || msg.Content != "Checking." {
		t.Fatalf("tool call = %+v finish %q", msg, cc.Choices[0].FinishReason)
	}
	tools := body(t, w.anth.Requests()[1].Body)["tools"].([]any)
	if tools[0].(map[string]any)["name"] != "get_weather" || tools[0].(map[string]any)["input_schema"] == nil {
		t.Errorf("tools upstream = %v", tools)
	}
	w.anth.Enqueue(anthropicfake.TextReply("18C and sunny."))
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("18C sunny", "toolu_01abc"))
	cc, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Choices[0].Message.Content != "18C and sunny." {
		t.Errorf("after the tool result: %q", cc.Choices[0].Message.Content)
	}
	msgs := body(t, w.anth.Requests()[2].Body)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("upstream messages = %v", msgs)
	}
	asst, _ := json.Marshal(msgs[1])
	res, _ := json.Marshal(msgs[2])
	if !strings.Contains(string(asst), `"tool_use"`) || !strings.Contains(string(asst), `"toolu_01abc"`) ||
		!strings.Contains(string(res), `"tool_result"`) || !strings.Contains(string(res), `"tool_use_id":"toolu_01abc"`) || !strings.Contains(string(res), "18C sunny") {
		t.Errorf("the tool round trip upstream:\n%s\n%s", asst, res)
	}
}

// A streamed OpenAI request served by the Anthropic fake: text deltas,
// tool-call argument fragments keyed by index, finish reason, the usage
// chunk, [DONE].
func TestOpenAIStreamServedByAnthropic(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	c := w.openai(w.key)
	w.anth.Enqueue(anthropicfake.Reply{Text: "Let me check the weather for you.", ToolUses: []anthropicfake.ToolUse{
		{ID: "toolu_1", Name: "get_weather", Input: json.RawMessage(`{"city":"San Francisco","unit":"celsius"}`)},
		{ID: "toolu_2", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
	}, Usage: anthropicfake.Usage{Input: 40, Output: 12}})
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "balanced", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")},
		Tools:         []openai.ChatCompletionToolUnionParam{weatherTool},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks, argFragments := 0, 0
	var finished []string
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		chunks++
		for _, choice := range ch.Choices {
			for _, tc := range choice.Delta.ToolCalls {
				if tc.ID == "" && tc.Function.Arguments != "" {
					argFragments++
				}
			}
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc.Arguments)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0]
	if got.Message.Content != "Let me check the weather for you." || got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 2 {
		t.Fatalf("accumulated = %+v", got)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(got.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args["city"] != "San Francisco" || got.Message.ToolCalls[1].ID != "toolu_2" {
		t.Errorf("tool calls = %+v (%v)", got.Message.ToolCalls, err)
	}
	if argFragments < 3 {
		t.Errorf("the arguments arrived in %d fragments; want them streamed as the provider sent them", argFragments)
	}
	if acc.Usage.PromptTokens != 40 || acc.Usage.CompletionTokens != 12 {
		t.Errorf("usage = %+v", acc.Usage)
	}
	if chunks < 8 {
		t.Errorf("only %d chunks: the answer was not streamed", chunks)
	}
}

// An Anthropic client served by the OpenAI fake, non-streamed, with a
// tool call and its result.
func TestAnthropicClientServedByOpenAI(t *testing.T) {
	w := newWorld(t, serveOn("gpt", "claude"))
	ctx := ctxT(t)
	c := w.anthropic(w.key)
	w.oai.Enqueue(openaifake.Reply{Text: "Checking.", ToolCalls: []openaifake.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		Usage: openaifake.Usage{Prompt: 50, Completion: 9, Cached: 20}})
	params := anthropic.MessageNewParams{
		Model: "builder", MaxTokens: 512,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
		Tools:    []anthropic.ToolUnionParam{weatherToolA},
	}
	var raw *http.Response
	msg, err := c.Messages.New(ctx, params, aoption.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 2 || msg.Content[0].Text != "Checking." {
		t.Fatalf("message = %+v", msg)
	}
	tu, ok := msg.Content[1].AsAny().(anthropic.ToolUseBlock)
	if !ok || tu.ID != "call_abc" || tu.Name != "get_weather" || string(tu.Input) != `{"city":"Paris"}` {
		t.Fatalf("tool_use = %+v", msg.Content[1])
	}
	if u := msg.Usage; u.InputTokens != 30 || u.CacheReadInputTokens != 20 || u.OutputTokens != 9 {
		t.Errorf("usage = %+v (Messages input_tokens excludes cached tokens)", u)
	}
	if raw.Header.Get(gateway.HeaderProvider) != "gpt" || msg.Model != "gpt-5-mini-2025-08-07" {
		t.Errorf("served by %q, model %q", raw.Header.Get(gateway.HeaderProvider), msg.Model)
	}
	up := body(t, w.oai.Requests()[0].Body)
	if !strings.Contains(string(w.oai.Requests()[0].Body), "You are terse.") || up["tools"] == nil {
		t.Errorf("upstream = %s", w.oai.Requests()[0].Body)
	}

	w.oai.Enqueue(openaifake.TextReply("18C and sunny."))
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("call_abc", "18C sunny", false)))
	msg, err = c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "18C and sunny." || msg.StopReason != "end_turn" {
		t.Errorf("after the result: %+v", msg)
	}
	msgs := body(t, w.oai.Requests()[1].Body)["messages"].([]any)
	last, _ := json.Marshal(msgs[len(msgs)-1])
	prev, _ := json.Marshal(msgs[len(msgs)-2])
	if !strings.Contains(string(last), `"role":"tool"`) || !strings.Contains(string(last), `"tool_call_id":"call_abc"`) || !strings.Contains(string(prev), `"tool_calls"`) {
		t.Errorf("the tool round trip upstream:\n%s\n%s", prev, last)
	}
}

// A streamed Anthropic request served by the OpenAI fake with two
// parallel tool calls: the Messages event sequence, input_json_delta
// fragments, stop reason and usage in message_delta.
func TestAnthropicStreamServedByOpenAI(t *testing.T) {
	w := newWorld(t, serveOn("gpt"))
	ctx := ctxT(t)
	c := w.anthropic(w.key)
	w.oai.Enqueue(openaifake.Reply{Text: "Two cities.", ToolCalls: []openaifake.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: `{"city":"San Francisco","unit":"celsius"}`},
		{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Paris"}`},
	}, Usage: openaifake.Usage{Prompt: 64, Completion: 21}})
	stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "balanced", MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather?"))},
		Tools:    []anthropic.ToolUnionParam{weatherToolA},
	})
	defer stream.Close()
	acc := anthropic.Message{}
	var events []string
	jsonDeltas := 0
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
		events = append(events, ev.Type)
		if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok && d.Delta.Type == "input_json_delta" {
			jsonDeltas++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if events[0] != "message_start" || events[len(events)-1] != "message_stop" || events[len(events)-2] != "message_delta" {
		t.Errorf("events = %v", events)
	}
	if acc.StopReason != "tool_use" || len(acc.Content) != 3 || acc.Content[0].Text != "Two cities." {
		t.Fatalf("message = %+v", acc)
	}
	for i, want := range []string{`{"city":"San Francisco","unit":"celsius"}`, `{"city":"Paris"}`} {
		b := acc.Content[i+1]
		var got, exp any
		_ = json.Unmarshal(b.Input, &got)
		_ = json.Unmarshal([]byte(want), &exp)
		gb, _ := json.Marshal(got)
		eb, _ := json.Marshal(exp)
		if b.Type != "tool_use" || string(gb) != string(eb) {
			t.Errorf("block %d = %s %s, want %s", i+1, b.Type, b.Input, want)
		}
	}
	if jsonDeltas < 3 {
		t.Errorf("%d input_json_delta events; want the fragments streamed", jsonDeltas)
	}
	if acc.Usage.InputTokens != 64 || acc.Usage.OutputTokens != 21 {
		t.Errorf("usage = %+v", acc.Usage)
	}
}

// Both SDKs list the models the mapping exposes, and count_tokens on a
// translating route counts offline without calling a provider
// (TestCountTokensRelayed: an Anthropic route relays it).
func TestModelsAndCountTokens(t *testing.T) {
	w := newWorld(t, translating, withGateway(func(o *gateway.Options) {
		o.CountTokens = func(prov string, _ *provider.Request) int64 {
			if prov == "claude" {
				return 1234
			}
			return 1
		}
	}))
	ctx := ctxT(t)
	oc := w.openai(w.key)
	page, err := oc.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	for _, want := range []string{"claude-sonnet-4-6", "cheap", "pinned-gpt", "balanced", "fast_cheap", "builder", "critic"} {
		if !slices.Contains(ids, want) {
			t.Errorf("OpenAI listing lacks %s: %v", want, ids)
		}
	}
	ac := w.anthropic(w.key)
	apage, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(apage.Data) != len(ids) || apage.Data[0].ID != ids[0] || apage.Data[0].DisplayName == "" || apage.Data[0].CreatedAt.IsZero() {
		t.Errorf("Anthropic listing = %+v", apage.Data)
	}
	if m, err := oc.Models.Get(ctx, "planner"); err != nil || m.ID != "planner" {
		t.Errorf("get planner = %+v, %v", m, err)
	}
	n, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    "builder",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?"))},
	})
	if err != nil || n.InputTokens != 1234 {
		t.Errorf("count_tokens = %+v, %v", n, err)
	}
	if len(w.anth.Requests())+len(w.oai.Requests()) != 0 {
		t.Error("listing or counting called a provider")
	}
}

// Same-vendor paths and tool_choice both ways: an Anthropic client streamed
// by the Anthropic fake, an OpenAI client streamed by the OpenAI fake, a
// named tool choice translated to the other protocol's form.
func TestSameVendorStreamsAndToolChoice(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	w.anth.Enqueue(anthropicfake.Reply{Text: "Sure.", ToolUses: []anthropicfake.ToolUse{{ID: "toolu_9", Name: "get_weather", Input: json.RawMessage(`{"city":"Oslo"}`)}}})
	stream := w.anthropic(w.key).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-6", MaxTokens: 300,
		Messages: userMsgA("weather?"), Tools: []anthropic.ToolUnionParam{weatherToolA},
		ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather")})
	acc := anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 2 || acc.Content[1].ID != "toolu_9" || !strings.Contains(string(acc.Content[1].Input), "Oslo") || acc.StopReason != "tool_use" {
		t.Errorf("message = %+v", acc)
	}
	up, _ := json.Marshal(body(t, w.anth.Requests()[0].Body)["tool_choice"])
	if !strings.Contains(string(up), `"type":"tool"`) || !strings.Contains(string(up), `"name":"get_weather"`) {
		t.Errorf("tool_choice upstream = %s", up)
	}

	w2 := newWorld(t, serveOn("gpt"))
	w2.oai.Enqueue(openaifake.ToolCallReply("get_weather", `{"city":"Lima"}`))
	os := w2.openai(w2.key).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("weather?"),
		Tools:      []openai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})})
	oacc := openai.ChatCompletionAccumulator{}
	for os.Next() {
		oacc.AddChunk(os.Current())
	}
	if err := os.Err(); err != nil {
		t.Fatal(err)
	}
	if tc := oacc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"city":"Lima"}` || oacc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("accumulated = %+v", oacc.Choices[0])
	}
	up, _ = json.Marshal(body(t, w2.oai.Requests()[0].Body)["tool_choice"])
	if !strings.Contains(string(up), `"name":"get_weather"`) {
		t.Errorf("tool_choice upstream = %s", up)
	}
}
