package geminifake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/genai"

	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
)

func Example() {
	fake := geminifake.New(geminifake.WithAPIKey("test-key"))
	defer fake.Close()
	fake.Enqueue(
		geminifake.TextReply("Hello from the fake."),
		geminifake.RateLimited("gemini-2.5-flash", 31*time.Second),
	)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "test-key",
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{},
		HTTPOptions: genai.HTTPOptions{BaseURL: fake.URL(), APIVersion: "v1beta"},
	})
	if err != nil {
		panic(err)
	}

	resp, err := client.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("Hi"), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Text(), resp.Candidates[0].FinishReason)

	_, err = client.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("Hi"), nil)
	var apiErr genai.APIError // a value type
	if errors.As(err, &apiErr) {
		for _, d := range apiErr.Details {
			if d["@type"] == geminifake.TypeRetryInfo {
				fmt.Println(apiErr.Code, apiErr.Status, d["retryDelay"])
			}
		}
	}

	fmt.Println(len(fake.Requests()), "requests")
	// Output:
	// Hello from the fake. STOP
	// 429 RESOURCE_EXHAUSTED 31s
	// 2 requests
}
