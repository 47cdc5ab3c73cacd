package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

var weatherToolR = responses.ToolParamOfFunction("get_weather",
	map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}, false)

// A Responses client served by the Anthropic fake: instructions and
// input items, the output message, usage, then a function call and its
// output sent back as input items (the stateless round trip Codex CLI
// makes).
func TestResponsesServedByAnthropic(t *testing.T) {
	w := newWorld(t)
	ctx := ctxT(t)
	c := w.openai(w.key)
	w.anth.Enqueue(anthropicfake.Reply{Text: "Hello from Claude.", Usage: anthropicfake.Usage{Input: 20, Output: 5, CacheRead: 10}})
	var raw *http.Response
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "builder",
		Instructions: openai.String("Be terse."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Store:        openai.Bool(false),
	}, ooption.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "Hello from Claude." || r.Status != "completed" || r.Object != "response" || !strings.HasPrefix(r.ID, "resp_") {
		t.Errorf("response = %+v", r)
	}
	if u := r.Usage; u.InputTokens != 30 || u.OutputTokens != 5 || u.TotalTokens != 35 || u.InputTokensDetails.CachedTokens != 10 {
		t.Errorf("usage = %+v", u)
	}
	if raw.Header.Get(gateway.HeaderProvider) != "claude" || r.Model != "claude-sonnet-4-6" {
		t.Errorf("served by %q, model %q", raw.Header.Get(gateway.HeaderProvider), r.Model)
	}
	if !strings.Contains(string(w.anth.Requests()[0].Body), "Be terse.") {
		t.Errorf("the instructions did not reach the provider: %s", w.anth.Requests()[0].Body)
	}

	// A function call, then its output.
	w.anth.Enqueue(anthropicfake.Reply{Text: "Checking.", ToolUses: []anthropicfake.ToolUse{{ID: "toolu_01abc", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}})
	input := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("You are a weather bot.", responses.EasyInputMessageRoleDeveloper),
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
	}
	params := responses.ResponseNewParams{Model: "claude-sonnet-4-6", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: []responses.ToolUnionParam{weatherToolR}}
	r, err = c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 2 || r.Output[0].Type != "message" || r.Output[1].Type != "function_call" {
		t.Fatalf("output = %+v", r.Output)
	}
	fc := r.Output[1].AsFunctionCall()
	if fc.CallID != "toolu_01abc" || fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` || r.OutputText() != "Checking." {
		t.Fatalf("function call = %+v", fc)
	}
	tools := body(t, w.anth.Requests()[1].Body)["tools"].([]any)
	if tools[0].(map[string]any)["name"] != "get_weather" || tools[0].(map[string]any)["input_schema"] == nil {
		t.Errorf("tools upstream = %v", tools)
	}
	if !strings.Contains(string(w.anth.Requests()[1].Body), "You are a weather bot.") {
		t.Errorf("the developer message did not reach the system prompt: %s", w.anth.Requests()[1].Body)
	}
	w.anth.Enqueue(anthropicfake.TextReply("18C and sunny."))
	input = append(input,
		responses.ResponseInputItemParamOfMessage("Checking.", responses.EasyInputMessageRoleAssistant),
		responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
		responses.ResponseInputItemParamOfFunctionCallOutput("18C sunny"))
	input[len(input)-1].OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	r, err = c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "18C and sunny." {
		t.Errorf("after the function output: %q", r.OutputText())
	}
	msgs := body(t, w.anth.Requests()[2].Body)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("upstream messages = %v", msgs)
	}
	asst, _ := json.Marshal(msgs[1])
	res, _ := json.Marshal(msgs[2])
	if !strings.Contains(string(asst), `"tool_use"`) || !strings.Contains(string(asst), `"toolu_01abc"`) || !strings.Contains(string(asst), "Checking.") ||
		!strings.Contains(string(res), `"tool_use_id":"toolu_01abc"`) || !strings.Contains(string(res), "18C sunny") {
		t.Errorf("the function round trip upstream:\n%s\n%s", asst, res)
	}
}

// A streamed Responses request served by the OpenAI fake with text and
// two function calls: the event sequence, argument deltas, and the final
// response in response.completed, checked with the SDK's accumulator.
func TestResponsesStream(t *testing.T) {
	w := newWorld(t, serveOn("gpt"), translating)
	ctx := ctxT(t)
	c := w.openai(w.key)
	w.oai.Enqueue(openaifake.Reply{Text: "Two cities.", ToolCalls: []openaifake.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: `{"city":"San Francisco","unit":"celsius"}`},
		{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Paris"}`},
	}, Usage: openaifake.Usage{Prompt: 64, Completion: 21}})
	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "balanced",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")}, Tools: []responses.ToolUnionParam{weatherToolR}})
	var events []string
	var text strings.Builder
	argDeltas := map[int64]string{}
	var done responses.Response
	seq := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq+1 {
			t.Errorf("%s: sequence_number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		if len(events) == 0 || events[len(events)-1] != ev.Type {
			events = append(events, ev.Type)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			argDeltas[ev.OutputIndex] += ev.Delta
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if strings.Join(events, " ") != strings.Join(want, " ") {
		t.Errorf("events =\n%v\nwant\n%v", events, want)
	}
	if text.String() != "Two cities." || argDeltas[1] != `{"city":"San Francisco","unit":"celsius"}` || argDeltas[2] != `{"city":"Paris"}` {
		t.Errorf("text %q, arguments %v", text.String(), argDeltas)
	}
	if done.Status != "completed" || len(done.Output) != 3 || done.OutputText() != "Two cities." || done.Usage.InputTokens != 64 || done.Usage.OutputTokens != 21 {
		t.Fatalf("completed = %+v", done)
	}
	if fc := done.Output[2].AsFunctionCall(); fc.CallID != "call_2" || fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` {
		t.Errorf("second call = %+v", fc)
	}
}

// A stream that fails after its first byte ends with response.failed
// carrying the error; stateful requests are refused with a 400 naming the
// field.
func TestResponsesFailuresAndStatefulRefused(t *testing.T) {
	w := newWorld(t, serveOn("gpt"), translating)
	ctx := ctxT(t)
	c := w.openai(w.key)
	w.oai.Enqueue(openaifake.Reply{Text: "partial answer", MidStreamError: &openaifake.StreamError{Message: "The server had an error while processing your request.", AfterChunks: 2}})
	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt/gpt-5-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		last = stream.Current()
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error.Code == "" || last.Response.Error.Message == "" {
		t.Errorf("last event = %s %+v", last.Type, last.Response)
	}

	for name, p := range map[string]responses.ResponseNewParams{
		"previous_response_id": {Model: "builder", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, PreviousResponseID: openai.String("resp_1")},
		"store":                {Model: "builder", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, Store: openai.Bool(true)},
	} {
		_, err := c.Responses.New(ctx, p)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != name || !strings.Contains(oe.Message, "stateless") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(w.oai.Requests()) != 1 {
		t.Errorf("a refused request reached the provider: %d requests", len(w.oai.Requests()))
	}
}

// An answer cut at the output limit is an incomplete response whose
// message item is incomplete too, unary and streamed; its usage says the
// cache writes, and the response carries temperature and top_p (null: the
// provider's defaults), as the spec requires. Every answer here also
// passes the schema check of the harness's client.
func TestResponsesCutAnswerIsIncomplete(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	p := gmProtos[1]
	type item struct{ Type, Status string }
	type response struct {
		Status            string
		IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
		Output            []item
		Usage             struct {
			InputTokensDetails struct {
				CacheWriteTokens *int64 `json:"cache_write_tokens"`
			} `json:"input_tokens_details"`
		}
		Temperature json.RawMessage
		TopP        json.RawMessage `json:"top_p"`
	}
	check := func(mode string, r response) {
		t.Helper()
		if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" ||
			len(r.Output) != 1 || r.Output[0].Status != "incomplete" {
			t.Errorf("%s: response %+v; want it and its message incomplete at max_output_tokens", mode, r)
		}
		if c := r.Usage.InputTokensDetails.CacheWriteTokens; c == nil || *c != 7 {
			t.Errorf("%s: cache_write_tokens %v; want 7", mode, c)
		}
		if string(r.Temperature) != "null" || string(r.TopP) != "null" {
			t.Errorf("%s: temperature %s, top_p %s; want both null", mode, r.Temperature, r.TopP)
		}
	}
	for range 2 {
		w.anth.Enqueue(anthropicfake.Reply{Text: "The answer was cut here", StopReason: "max_tokens", Usage: anthropicfake.Usage{Input: 20, Output: 1000, CacheCreation5m: 7}})
	}
	var r response
	if a := p.call(t, w, "T1", false); json.Unmarshal(a.body, &r) != nil {
		t.Fatalf("unary: %d %s", a.status, a.body)
	}
	check("unary", r)

	a := p.call(t, w, "T1", true)
	last := a.events[len(a.events)-1]
	var end struct{ Response response }
	if last.name != "response.incomplete" || json.Unmarshal([]byte(last.data), &end) != nil {
		t.Fatalf("the stream ended with %+v", last)
	}
	check("stream", end.Response)
	for _, ev := range a.events {
		var done struct{ Item item }
		if ev.name == "response.output_item.done" && (json.Unmarshal([]byte(ev.data), &done) != nil || done.Item.Status != "incomplete") {
			t.Errorf("%s: %s; want the item incomplete", ev.name, ev.data)
		}
	}
}
