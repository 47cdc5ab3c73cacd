package openaifake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

func Example() {
	fake := openaifake.New(openaifake.WithAPIKey("test-key"))
	defer fake.Close()
	fake.Enqueue(
		openaifake.TextReply("Hello from the fake."),
		openaifake.RateLimited(2400*time.Millisecond).WithRetryAfter(2400*time.Millisecond),
	)
	client := openai.NewClient(
		option.WithBaseURL(fake.URL()+"/v1/"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
	)
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-5-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
	}

	cc, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		panic(err)
	}
	fmt.Println(cc.Choices[0].Message.Content, cc.Choices[0].FinishReason, cc.Model)

	_, err = client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Response.Header.Get("retry-after-ms"))
	}

	fmt.Println(len(fake.Requests()), "requests")
	// Output:
	// Hello from the fake. stop gpt-5-mini-2025-08-07
	// 429 tokens rate_limit_exceeded 2400
	// 2 requests
}

// Ollama sends parallel tool calls whole, one chunk each, all with index 0.
func Example_ollamaToolCalls() {
	fake := openaifake.New(openaifake.WithFlavor(openaifake.FlavorOllama))
	defer fake.Close()
	fake.Enqueue(openaifake.ToolCallsReply(
		openaifake.ToolCall{ID: "call_aaaa1111", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		openaifake.ToolCall{ID: "call_bbbb2222", Name: "get_weather", Arguments: `{"city":"Rome"}`},
	))
	client := openai.NewClient(option.WithBaseURL(fake.URL()+"/v1/"), option.WithAPIKey("ollama"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris and Rome?")},
	})
	defer stream.Close()
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			for _, tc := range c.Delta.ToolCalls {
				fmt.Println(tc.Index, tc.ID, tc.Function.Arguments)
			}
			if c.FinishReason != "" {
				fmt.Println(c.FinishReason)
			}
		}
	}
	// Output:
	// 0 call_aaaa1111 {"city":"Paris"}
	// 0 call_bbbb2222 {"city":"Rome"}
	// tool_calls
}
