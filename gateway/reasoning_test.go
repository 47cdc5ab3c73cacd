package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// upstreamReasoning is the reasoning settings of an upstream body:
// OpenAI's reasoning_effort, Anthropic's thinking and output_config.effort.
type upstreamReasoning struct {
	ReasoningEffort string `json:"reasoning_effort"`
	Thinking        *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
}

func lastReasoning(t *testing.T, bodies [][]byte) upstreamReasoning {
	t.Helper()
	var r upstreamReasoning
	if len(bodies) == 0 {
		t.Fatal("the upstream received nothing")
	}
	if err := json.Unmarshal(bodies[len(bodies)-1], &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (w *world) oaiBodies() [][]byte {
	var out [][]byte
	for _, r := range w.oai.Requests() {
		out = append(out, r.Body)
	}
	return out
}

func (w *world) anthBodies() [][]byte {
	var out [][]byte
	for _, r := range w.anth.Requests() {
		if r.Path == "/v1/messages" {
			out = append(out, r.Body)
		}
	}
	return out
}

// A reasoning setting reaches the provider from each protocol in the
// provider's own shape: Chat's reasoning_effort, Responses' reasoning.effort
// and Messages' thinking and output_config.effort; a model without the
// reasoning capability drops it and the answer names it.
func TestReasoningSettingsThroughEachProtocol(t *testing.T) {
	var vllm *openaifake.Server
	w := newWorld(t, withVLLM(&vllm), translating)
	t.Cleanup(func() { vllm.Close() })
	ctx := ctxT(t)
	oc, ac := w.openai(w.key), w.anthropic(w.key)
	var raw *http.Response

	// Chat to an OpenAI reasoning model, streamed and not.
	chat := openai.ChatCompletionNewParams{Model: "pinned-gpt", Messages: userMsg("hi"), ReasoningEffort: shared.ReasoningEffortHigh}
	for _, stream := range []bool{false, true} {
		if stream {
			s := oc.Chat.Completions.NewStreaming(ctx, chat, ooption.WithResponseInto(&raw))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else if _, err := oc.Chat.Completions.New(ctx, chat, ooption.WithResponseInto(&raw)); err != nil {
			t.Fatal(err)
		}
		if got := lastReasoning(t, w.oaiBodies()); got.ReasoningEffort != "high" {
			t.Errorf("stream %v: chat → gpt-5-mini sent reasoning_effort %q, want high", stream, got.ReasoningEffort)
		}
		if h := raw.Header.Get(gateway.HeaderIgnored); h != "" {
			t.Errorf("stream %v: chat → gpt-5-mini: ignored = %q, want none", stream, h)
		}
	}
	// Chat to a model that does not reason: dropped and named.
	chat.Model = "qwen"
	if _, err := oc.Chat.Completions.New(ctx, chat, ooption.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	}
	if got := lastReasoning(t, [][]byte{vllm.Requests()[len(vllm.Requests())-1].Body}); got.ReasoningEffort != "" {
		t.Errorf("chat → vllm sent reasoning_effort %q", got.ReasoningEffort)
	}
	if h := raw.Header.Get(gateway.HeaderIgnored); h != "reasoning" {
		t.Errorf("chat → vllm: ignored = %q, want reasoning", h)
	}

	// Responses.
	if _, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "pinned-gpt", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortMedium}}, ooption.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	}
	if got := lastReasoning(t, w.oaiBodies()); got.ReasoningEffort != "medium" {
		t.Errorf("responses → gpt-5-mini sent reasoning_effort %q, want medium", got.ReasoningEffort)
	}
	if h := raw.Header.Get(gateway.HeaderIgnored); h != "" {
		t.Errorf("responses: ignored = %q, want none", h)
	}

	// Messages to Claude: a budget as thinking, an effort as
	// output_config.effort.
	msg := anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 4096, Messages: userMsgA("hi"),
		Thinking:     anthropic.ThinkingConfigParamOfEnabled(2048),
		OutputConfig: anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffortLow}}
	for _, stream := range []bool{false, true} {
		if stream {
			s := ac.Messages.NewStreaming(ctx, msg, aoption.WithResponseInto(&raw))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else if _, err := ac.Messages.New(ctx, msg, aoption.WithResponseInto(&raw)); err != nil {
			t.Fatal(err)
		}
		got := lastReasoning(t, w.anthBodies())
		if got.Thinking == nil || got.Thinking.Type != "enabled" || got.Thinking.BudgetTokens != 2048 || got.OutputConfig.Effort != "low" {
			t.Errorf("stream %v: messages → claude sent thinking %+v effort %q", stream, got.Thinking, got.OutputConfig.Effort)
		}
		if h := raw.Header.Get(gateway.HeaderIgnored); h != "" {
			t.Errorf("stream %v: messages → claude: ignored = %q, want none", stream, h)
		}
	}
	// Messages to an OpenAI reasoning model: the budget stands for an
	// effort.
	msg = anthropic.MessageNewParams{Model: "pinned-gpt", MaxTokens: 4096, Messages: userMsgA("hi"), Thinking: anthropic.ThinkingConfigParamOfEnabled(2048)}
	if _, err := ac.Messages.New(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if got := lastReasoning(t, w.oaiBodies()); got.ReasoningEffort != "low" {
		t.Errorf("messages → gpt-5-mini sent reasoning_effort %q, want low", got.ReasoningEffort)
	}

	// With gateway.strict_params, a model that cannot reason is no
	// candidate: a call only it can serve is refused, naming the setting.
	var vllm2 *openaifake.Server
	strict := newWorld(t, func(s *setup) {
		withVLLM(&vllm2)(s)
		gw := s.gw
		s.gw = func(o *gateway.Options) { gw(o); o.StrictParams = true }
	})
	t.Cleanup(func() { vllm2.Close() })
	_, err := strict.openai(strict.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "qwen", Messages: userMsg("hi"), ReasoningEffort: shared.ReasoningEffortLow})
	if e := openAIErr(t, err); e.StatusCode != 400 || e.Param != "reasoning" || !strings.Contains(e.Message, "strict_params") {
		t.Errorf("strict reasoning on vllm = %d %q %q", e.StatusCode, e.Param, e.Message)
	}
	if len(vllm2.Requests()) != 0 {
		t.Error("the refused call reached vLLM")
	}
}

// Claude's thinking reaches a Messages client as a thinking block with its
// signature, unary and streamed (thinking_delta, then signature_delta);
// sent back, the block reaches Anthropic with the signature as it was.
func TestMessagesThinkingRoundTrip(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	ac := w.anthropic(w.key)
	const thought, sig = "The user says hi; answer briefly.", "EqQBCkYIBxgCKkA-signature"
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 4096, Messages: userMsgA("hi"),
		Thinking: anthropic.ThinkingConfigParamOfEnabled(2048)}
	for _, stream := range []bool{false, true} {
		w.anth.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: thought, Signature: sig}, Text: "Hello!"})
		var msg anthropic.Message
		if stream {
			s := ac.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			m, err := ac.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			msg = *m
		}
		if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != thought || msg.Content[0].Signature != sig ||
			msg.Content[1].Type != "text" || msg.Content[1].Text != "Hello!" {
			t.Fatalf("stream %v: content %+v, want the thinking block with its signature, then the text", stream, msg.Content)
		}

		// The client sends the turn back as it got it.
		w.anth.Enqueue(anthropicfake.Reply{Text: "Fine."})
		next := params
		next.Messages = append(userMsgA("hi"), msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("and now?")))
		if _, err := ac.Messages.New(ctx, next); err != nil {
			t.Fatal(err)
		}
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type      string `json:"type"`
					Thinking  string `json:"thinking"`
					Signature string `json:"signature"`
				} `json:"content"`
			} `json:"messages"`
		}
		bodies := w.anthBodies()
		if err := json.Unmarshal(bodies[len(bodies)-1], &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Messages) != 3 || len(body.Messages[1].Content) == 0 {
			t.Fatalf("stream %v: upstream messages %+v", stream, body.Messages)
		}
		if b := body.Messages[1].Content[0]; b.Type != "thinking" || b.Thinking != thought || b.Signature != sig {
			t.Errorf("stream %v: the assistant turn reached Anthropic starting with %+v, want the thinking block with its signature", stream, b)
		}
	}
}

// The model's reasoning reaches a Responses client as a reasoning output
// item whose summary is the reasoning text, before the message, unary and
// streamed (response.reasoning_summary_text.delta events); every answer
// and event is checked against OpenAI's published schemas.
func TestResponsesReasoningItem(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	oc := w.openai(w.key)
	const thought = "The user says hi; answer briefly."
	params := responses.ResponseNewParams{Model: "claude-sonnet-4-6", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow}}
	check := func(how string, out []responses.ResponseOutputItemUnion) {
		t.Helper()
		if len(out) != 2 || out[0].Type != "reasoning" || len(out[0].Summary) != 1 || out[0].Summary[0].Text != thought ||
			out[1].Type != "message" || len(out[1].Content) != 1 || out[1].Content[0].Text != "Hello!" {
			t.Errorf("%s: output %s, want a reasoning item summarising %q, then the message", how, mustMarshal(t, out), thought)
		}
	}

	w.anth.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: thought}, Text: "Hello!"})
	res, err := oc.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("unary", res.Output)

	w.anth.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: thought}, Text: "Hello!"})
	s := oc.Responses.NewStreaming(ctx, params)
	var deltas string
	var done responses.Response
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.reasoning_summary_text.delta":
			deltas += ev.Delta
		case "response.completed":
			done = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas != thought {
		t.Errorf("streamed summary %q, want %q", deltas, thought)
	}
	check("streamed", done.Output)
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
