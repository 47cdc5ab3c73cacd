package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// upstreamContent returns the content of the last message the OpenAI fake
// received, as sent.
func (w *world) upstreamContent(t *testing.T) json.RawMessage {
	t.Helper()
	reqs := w.oai.Requests()
	if len(reqs) == 0 {
		t.Fatal("the OpenAI fake received nothing")
	}
	var b struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &b); err != nil || len(b.Messages) == 0 {
		t.Fatalf("upstream body %s: %v", reqs[len(reqs)-1].Body, err)
	}
	return b.Messages[len(b.Messages)-1].Content
}

// Two text parts of one message reach an OpenAI-compatible upstream as two
// text parts, from a Chat client and from an Anthropic client alike.
func TestTextPartsStaySeparate(t *testing.T) {
	w := newWorld(t, serveOn("gpt"))
	ctx := ctxT(t)
	const want = `[{"text":"hi","type":"text"},{"text":"there","type":"text"}]`

	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "pinned-gpt",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("hi"), openai.TextContentPart("there")})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.upstreamContent(t); string(got) != want {
		t.Errorf("chat: upstream content = %s, want %s", got, want)
	}

	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{
		Model: "pinned-gpt", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"), anthropic.NewTextBlock("there"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.upstreamContent(t); string(got) != want {
		t.Errorf("messages: upstream content = %s, want %s", got, want)
	}
}
