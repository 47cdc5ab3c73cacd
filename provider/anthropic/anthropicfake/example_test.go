package anthropicfake_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func Example() {
	fake := anthropicfake.New(anthropicfake.WithAPIKey("test-key"))
	defer fake.Close()
	fake.Enqueue(
		anthropicfake.TextReply("Hello from the fake."),
		anthropicfake.RateLimited("2"),
	)
	client := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(fake.URL()),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
	)
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-6",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	}

	msg, err := client.Messages.New(context.Background(), params)
	if err != nil {
		panic(err)
	}
	fmt.Println(msg.Content[0].Text, msg.StopReason)

	_, err = client.Messages.New(context.Background(), params)
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Type(), apiErr.Response.Header.Get("retry-after"))
	}

	fmt.Println(len(fake.Requests()), "requests")
	// Output:
	// Hello from the fake. end_turn
	// 429 rate_limit_error 2
	// 2 requests
}
