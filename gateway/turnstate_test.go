package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
)

// gemWorld is a world whose calls to model "gem3" go to "gem", the Gemini
// fake serving gemini-3.1-pro-preview, which refuses a tool loop whose
// function call comes back without the thought signature it issued, as
// the real API does. The gateway reads clk.
func gemWorld(t *testing.T, clk *clock) (*world, *geminifake.Server) {
	t.Helper()
	gem := geminifake.New(geminifake.WithAPIKey("gk-upstream"))
	t.Cleanup(gem.Close)
	w := newWorld(t,
		withOrch(func(s *orchestrator.Settings) {
			s.Endpoints = append(s.Endpoints, orchestrator.Endpoint{Name: "gemini", Adapter: gmAdapter(t, "gemini", gem.URL(), 0)})
		}),
		withGateway(func(o *gateway.Options) {
			o.Providers = append(o.Providers, "gemini")
			o.Models["gem3"] = gateway.Target{Model: "gemini-3.1-pro-preview", Provider: "gemini"}
			o.Now = clk.Now
		}))
	return w, gem
}

// lastCall is the function call and its response in the fake's last
// request, with the call's thought signature.
func lastCall(t *testing.T, gem *geminifake.Server) (call *geminifake.FunctionCall, sig string, resp *geminifake.FunctionResponse) {
	t.Helper()
	reqs := gem.Requests()
	g, err := reqs[len(reqs)-1].Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				call, sig = p.FunctionCall, p.ThoughtSignature
			case p.FunctionResponse != nil:
				resp = p.FunctionResponse
			}
		}
	}
	if call == nil || resp == nil {
		t.Fatalf("no function call and response upstream: %s", reqs[len(reqs)-1].Body)
	}
	return call, sig, resp
}

var skipSig = base64.StdEncoding.EncodeToString([]byte(geminifake.SkipSignatureValidator))

// toolTurn is one protocol's two-turn tool loop through the gateway with
// an official SDK: the first answer's call id, then the second turn that
// sends the call and its result back, returning the answer's text.
type toolTurn struct {
	first  func(t *testing.T, w *world, key, model string) (callID string)
	second func(t *testing.T, w *world, key, model, callID string) (string, error)
}

var toolTurns = map[string]toolTurn{
	"chat": {
		first: func(t *testing.T, w *world, key, model string) string {
			ctx := ctxT(t)
			cc, err := w.openai(key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: userMsg("weather?"), Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
			if err != nil || len(cc.Choices[0].Message.ToolCalls) != 1 {
				t.Fatalf("first turn: %v", err)
			}
			return cc.Choices[0].Message.ToolCalls[0].ID
		},
		second: func(t *testing.T, w *world, key, model, id string) (string, error) {
			ctx := ctxT(t)
			msgs := append(userMsg("weather?"), openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			}}, openai.ToolMessage("18C", id))
			cc, err := w.openai(key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
			if err != nil {
				return "", err
			}
			return cc.Choices[0].Message.Content, nil
		},
	},
	"chat stream": {
		first: func(t *testing.T, w *world, key, model string) string {
			ctx := ctxT(t)
			s := w.openai(key).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model, Messages: userMsg("weather?"), Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
			acc := openai.ChatCompletionAccumulator{}
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if s.Err() != nil || len(acc.Choices[0].Message.ToolCalls) != 1 {
				t.Fatalf("first turn: %v", s.Err())
			}
			return acc.Choices[0].Message.ToolCalls[0].ID
		},
	},
	"messages": {
		first: func(t *testing.T, w *world, key, model string) string {
			ctx := ctxT(t)
			m, err := w.anthropic(key).Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 100, Messages: userMsgA("weather?"), Tools: []anthropic.ToolUnionParam{weatherToolA}})
			if err != nil || m.Content[len(m.Content)-1].Type != "tool_use" {
				t.Fatalf("first turn: %v", err)
			}
			return m.Content[len(m.Content)-1].ID
		},
		second: func(t *testing.T, w *world, key, model, id string) (string, error) {
			ctx := ctxT(t)
			msgs := append(userMsgA("weather?"),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(id, map[string]any{"city": "Paris"}, "get_weather")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, "18C", false)))
			m, err := w.anthropic(key).Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 100, Messages: msgs, Tools: []anthropic.ToolUnionParam{weatherToolA}})
			if err != nil {
				return "", err
			}
			return m.Content[0].Text, nil
		},
	},
	"messages stream": {
		first: func(t *testing.T, w *world, key, model string) string {
			ctx := ctxT(t)
			s := w.anthropic(key).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 100, Messages: userMsgA("weather?"), Tools: []anthropic.ToolUnionParam{weatherToolA}})
			acc := anthropic.Message{}
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if s.Err() != nil || acc.Content[len(acc.Content)-1].Type != "tool_use" {
				t.Fatalf("first turn: %v", s.Err())
			}
			return acc.Content[len(acc.Content)-1].ID
		},
	},
	"responses": {
		first: func(t *testing.T, w *world, key, model string) string {
			ctx := ctxT(t)
			r, err := w.openai(key).Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")}, Tools: []responses.ToolUnionParam{weatherToolR}})
			if err != nil || r.Output[len(r.Output)-1].Type != "function_call" {
				t.Fatalf("first turn: %v", err)
			}
			return r.Output[len(r.Output)-1].AsFunctionCall().CallID
		},
		second: func(t *testing.T, w *world, key, model, id string) (string, error) {
			ctx := ctxT(t)
			out := responses.ResponseInputItemParamOfFunctionCallOutput("18C")
			out.OfFunctionCallOutput.CallID = openai.String(id)
			input := responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, id, "get_weather"),
				out,
			}
			r, err := w.openai(key).Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}, Tools: []responses.ToolUnionParam{weatherToolR}})
			if err != nil {
				return "", err
			}
			return r.OutputText(), nil
		},
	},
	"responses stream": {
		first: func(t *testing.T, w *world, key, model string) string {
			ctx := ctxT(t)
			s := w.openai(key).Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")}, Tools: []responses.ToolUnionParam{weatherToolR}})
			id := ""
			for s.Next() {
				if e := s.Current(); e.Type == "response.completed" {
					out := e.Response.Output
					id = out[len(out)-1].AsFunctionCall().CallID
				}
			}
			if s.Err() != nil || id == "" {
				t.Fatalf("first turn: %v", s.Err())
			}
			return id
		},
	},
}

// secondTurn is the second turn of protocol (the unary one of a streamed
// protocol: what matters is that the first turn streamed).
func secondTurn(protocol string) func(t *testing.T, w *world, key, model, callID string) (string, error) {
	return toolTurns[strings.TrimSuffix(protocol, " stream")].second
}

// A Gemini 3 answer's thought signature, and the mark of the call id the
// adapter made up for a call Gemini sent without one, have no place in an
// OpenAI tool call or an Anthropic tool_use block: the gateway keeps them
// and the next turn sends the real signature back, and no made-up id,
// through every protocol, streamed or not.
func TestGeminiSignaturesSurviveEveryProtocol(t *testing.T) {
	for name, tt := range toolTurns {
		t.Run(name, func(t *testing.T) {
			w, gem := gemWorld(t, &clock{t: time.Now()})
			gem.Enqueue(geminifake.Reply{FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}, OmitCallIDs: true})
			id := tt.first(t, w, w.key, "gem3")
			gem.Enqueue(geminifake.TextReply("18C in Paris."))
			answer, err := secondTurn(name)(t, w, w.key, "gem3", id)
			if err != nil || answer != "18C in Paris." {
				t.Fatalf("second turn = %q, %v", answer, err)
			}
			call, sig, resp := lastCall(t, gem)
			if sig == "" || sig == skipSig {
				t.Errorf("the call went back with signature %q, not the one Gemini issued", sig)
			}
			if call.ID != "" || resp.ID != "" {
				t.Errorf("the made-up id %q went upstream: call %q, response %q", id, call.ID, resp.ID)
			}
		})
	}
}

// The kept state belongs to the key that made the call and lasts
// gateway.DefaultTurnStateTTL: another key's request naming the same call
// id, or one after the state expired, goes upstream as the client sent it
// (the Gemini adapter then sends the documented value that skips the
// signature check, so the loop still works).
func TestTurnStateIsPerKeyAndExpires(t *testing.T) {
	clk := &clock{t: time.Now()}
	w, gem := gemWorld(t, clk)
	other, _, err := w.keys.Create(gateway.KeySpec{Name: "other", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	chat := toolTurns["chat"]
	gem.Enqueue(geminifake.Reply{FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}, OmitCallIDs: true})
	id := chat.first(t, w, w.key, "gem3")
	for _, c := range []struct {
		what    string
		key     string
		advance time.Duration
		kept    bool
	}{
		{"another key", other, 0, false},
		{"the same key", w.key, gateway.DefaultTurnStateTTL - time.Second, true},
		{"the same key, after the state's lifetime", w.key, 2 * time.Second, false},
	} {
		clk.Advance(c.advance)
		gem.Enqueue(geminifake.TextReply("18C in Paris."))
		if _, err := chat.second(t, w, c.key, "gem3", id); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		_, sig, _ := lastCall(t, gem)
		if kept := sig != skipSig; kept != c.kept {
			t.Errorf("%s: signature %q sent, want the kept one: %v", c.what, sig, c.kept)
		}
	}
}

// An Anthropic answer's thinking block and its signature, which an OpenAI
// client cannot send back, reach Anthropic again on the next turn of the
// tool loop, in front of the tool call, as the API requires.
func TestThinkingSignatureSurvivesTheOpenAIProtocols(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	for _, protocol := range []string{"chat", "responses"} {
		w.anth.Enqueue(anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: "The user wants the weather.", Signature: "sig-" + protocol},
			ToolUses: []anthropicfake.ToolUse{{ID: "toolu_" + protocol, Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}})
		id := toolTurns[protocol].first(t, w, w.key, "balanced")
		w.anth.Enqueue(anthropicfake.TextReply("18C in Paris."))
		if _, err := toolTurns[protocol].second(t, w, w.key, "balanced", id); err != nil {
			t.Fatal(err)
		}
		reqs := w.anth.Requests()
		msgs := body(t, reqs[len(reqs)-1].Body)["messages"].([]any)
		content := msgs[1].(map[string]any)["content"].([]any)
		first := content[0].(map[string]any)
		if first["type"] != "thinking" || first["signature"] != "sig-"+protocol || first["thinking"] != "The user wants the weather." {
			t.Errorf("%s: the assistant turn went back as %v", protocol, content)
		}
	}
}
