package openaifake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

var (
	respIDRe = regexp.MustCompile(`^resp_[0-9a-f]{50}$`)
	rsIDRe   = regexp.MustCompile(`^rs_[0-9a-f]{50}$`)
	fcIDRe   = regexp.MustCompile(`^fc_[0-9a-f]{50}$`)
	msgIDRe  = regexp.MustCompile(`^msg_[0-9a-f]{50}$`)
)

// codexParams is a turn as a stateless client (Codex) sends it: store
// false, encrypted reasoning included, a function tool.
func codexParams(input responses.ResponseInputParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        "gpt-5-mini",
		Instructions: openai.String("You are a coding agent."),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Store:        openai.Bool(false),
		Include:      []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		Reasoning:    shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name:       "shell",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
		}}},
	}
}

func userInput(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

// carry returns the answer's output items as the next turn's input, with
// the reasoning items or without them.
func carry(t *testing.T, out []responses.ResponseOutputItemUnion, reasoning bool) responses.ResponseInputParam {
	t.Helper()
	var in responses.ResponseInputParam
	for _, it := range out {
		switch it.Type {
		case "reasoning":
			if reasoning {
				p := it.AsReasoning().ToParam()
				in = append(in, responses.ResponseInputItemUnionParam{OfReasoning: &p})
			}
		case "function_call":
			p := it.AsFunctionCall().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
		case "message":
			p := it.AsMessage().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
		default:
			t.Fatalf("unexpected output item %s", it.Type)
		}
	}
	return in
}

func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
		CallID: openai.String(callID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(output)},
	}}
}

func TestResponsesSDKUnary(t *testing.T) {
	fake := start(t, WithAPIKey(testKey), WithClock(fixedClock))
	client, _ := sdk(t, fake)
	fake.EnqueueResponses(Reply{
		Reasoning: "The user wants the files listed.", WebSearches: []string{"go modules"},
		ToolCalls: []ToolCall{{ID: "call_abc", Name: "shell", Arguments: `{"command":"ls"}`}},
		Usage:     Usage{Prompt: 2000, Completion: 300, Cached: 1536, Reasoning: 256},
	})
	p := codexParams(responses.ResponseInputParam{userInput("List the files.")})
	p.ServiceTier = responses.ResponseNewParamsServiceTierPriority
	p.PromptCacheKey = openai.String("session-42")
	var raw *http.Response
	resp, err := client.Responses.New(testCtx(t), p, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if !respIDRe.MatchString(resp.ID) || resp.Status != "completed" || resp.Model != "gpt-5-mini-2025-08-07" {
		t.Errorf("id %q status %q model %q", resp.ID, resp.Status, resp.Model)
	}
	if len(resp.Output) != 3 {
		t.Fatalf("output = %s", resp.RawJSON())
	}
	rs := resp.Output[0].AsReasoning()
	if resp.Output[0].Type != "reasoning" || !rsIDRe.MatchString(rs.ID) || !strings.HasPrefix(rs.EncryptedContent, "gAAAAAB") ||
		len(rs.Summary) != 1 || rs.Summary[0].Text != "The user wants the files listed." {
		t.Errorf("reasoning item = %s", resp.Output[0].RawJSON())
	}
	if ws := resp.Output[1].AsWebSearchCall(); resp.Output[1].Type != "web_search_call" || ws.Status != "completed" || ws.Action.Query != "go modules" {
		t.Errorf("web search item = %s", resp.Output[1].RawJSON())
	}
	fc := resp.Output[2].AsFunctionCall()
	if !fcIDRe.MatchString(fc.ID) || fc.CallID != "call_abc" || fc.Name != "shell" || fc.Arguments != `{"command":"ls"}` || fc.Status != "completed" {
		t.Errorf("function call item = %s", resp.Output[2].RawJSON())
	}
	u := resp.Usage
	if u.InputTokens != 2000 || u.InputTokensDetails.CachedTokens != 1536 || u.OutputTokens != 300 || u.OutputTokensDetails.ReasoningTokens != 256 || u.TotalTokens != 2300 {
		t.Errorf("usage = %s", u.RawJSON())
	}
	if resp.ServiceTier != "priority" || resp.PromptCacheKey != "session-42" || !strings.Contains(resp.RawJSON(), `"store": false`) || resp.Instructions.OfString != "You are a coding agent." {
		t.Errorf("echo: tier %q cache key %q instructions %q", resp.ServiceTier, resp.PromptCacheKey, resp.Instructions.OfString)
	}
	if raw.Header.Get("x-request-id") == "" || raw.Header.Get("x-ratelimit-remaining-requests") == "" {
		t.Errorf("headers %v", raw.Header)
	}
	rec := fake.Requests()[0]
	if rec.Path != "/v1/responses" || len(rec.Input()) != 1 || rec.Input()[0].Text != "List the files." || rec.Include()[0] != IncludeEncryptedReasoning {
		t.Errorf("recorded %s %+v %v", rec.Path, rec.Input(), rec.Include())
	}
}

// The encrypted content comes only when asked for; a model that does not
// reason has no reasoning item; the default reply echoes.
func TestResponsesReasoningItemsAndEcho(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	p := codexParams(responses.ResponseInputParam{userInput("hello there")})
	p.Include = nil
	resp, err := client.Responses.New(testCtx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output[0].Type != "reasoning" || resp.Output[0].AsReasoning().EncryptedContent != "" || strings.Contains(resp.Output[0].RawJSON(), "encrypted_content") {
		t.Errorf("reasoning without include = %s", resp.Output[0].RawJSON())
	}
	if resp.OutputText() != "echo: hello there" || resp.Usage.OutputTokensDetails.ReasoningTokens < 1 || resp.Usage.OutputTokens <= resp.Usage.OutputTokensDetails.ReasoningTokens {
		t.Errorf("text %q usage %s", resp.OutputText(), resp.Usage.RawJSON())
	}
	if !msgIDRe.MatchString(resp.Output[1].ID) {
		t.Errorf("message id %q", resp.Output[1].ID)
	}
	p.Model = "gpt-4.1-mini"
	p.Reasoning = shared.ReasoningParam{}
	resp, err = client.Responses.New(testCtx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "message" || resp.Usage.OutputTokensDetails.ReasoningTokens != 0 {
		t.Errorf("non-reasoning model output = %s", resp.RawJSON())
	}
}

// A three-turn tool loop succeeds when the client sends the reasoning
// items back, and fails as the API fails when it drops them.
func TestResponsesToolLoopNeedsReasoningItems(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(map[bool]string{true: "carried", false: "dropped"}[keep], func(t *testing.T) {
			fake := start(t)
			client, _ := sdk(t, fake)
			fake.EnqueueResponses(
				ReasoningToolCallReply("Need to look first.", "shell", `{"command":"ls"}`),
				ReasoningToolCallReply("Now read it.", "shell", `{"command":"cat go.mod"}`),
				Reply{Reasoning: "Done.", Text: "The module is example.com/x."},
			)
			input := responses.ResponseInputParam{userInput("What is the module name?")}
			var last *responses.Response
			for turn := 1; turn <= 3; turn++ {
				resp, err := client.Responses.New(testCtx(t), codexParams(input))
				if !keep && turn == 2 {
					var apiErr *openai.Error
					if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" || apiErr.Type != TypeInvalidRequest ||
						!regexp.MustCompile(`^Item 'fc_[0-9a-f]{50}' of type 'function_call' was provided without its required 'reasoning' item: 'rs_[0-9a-f]{50}'\.$`).MatchString(apiErr.Message) {
						t.Fatalf("turn 2 without reasoning = %v", err)
					}
					if !strings.Contains(apiErr.RawJSON(), `"code": null`) {
						t.Errorf("error body %s", apiErr.RawJSON())
					}
					return
				}
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				last = resp
				input = append(input, carry(t, resp.Output, keep)...)
				for _, it := range resp.Output {
					if it.Type == "function_call" {
						input = append(input, callOutput(it.CallID, "output of "+it.AsFunctionCall().Arguments))
					}
				}
			}
			if !keep {
				t.Fatal("the loop without reasoning items succeeded")
			}
			if last.OutputText() != "The module is example.com/x." {
				t.Errorf("final text %q", last.OutputText())
			}
			items := fake.Requests()[2].Input()
			if len(items) != 7 || items[1].Type != "reasoning" || items[1].EncryptedContent == "" || items[3].Type != "function_call_output" || items[3].Text != `output of {"command":"ls"}` {
				t.Errorf("third turn input = %+v", items)
			}
		})
	}
}

// A client that sends the reasoning item without its encrypted content, or
// a call's output without the call, is refused.
func TestResponsesPairingRules(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.EnqueueResponses(ReasoningToolCallReply("", "shell", `{}`))
	first, err := client.Responses.New(testCtx(t), codexParams(responses.ResponseInputParam{userInput("go")}))
	if err != nil {
		t.Fatal(err)
	}
	fc := first.Output[1].AsFunctionCall()
	in := carry(t, first.Output, true)
	// ToParam keeps the answer's raw JSON: build the item anew.
	in[0] = responses.ResponseInputItemUnionParam{OfReasoning: &responses.ResponseReasoningItemParam{
		ID: first.Output[0].ID, Summary: []responses.ResponseReasoningItemSummaryParam{}, EncryptedContent: openai.String("gAAAAABtampered"),
	}}
	_, err = client.Responses.New(testCtx(t), codexParams(append(in, callOutput(fc.CallID, "x"))))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "without its required 'reasoning' item") {
		t.Errorf("tampered reasoning = %v", err)
	}
	_, err = client.Responses.New(testCtx(t), codexParams(responses.ResponseInputParam{userInput("go"), callOutput(fc.CallID, "x")}))
	if !errors.As(err, &apiErr) || apiErr.Message != "No tool call found for function call output with call_id "+fc.CallID+"." || apiErr.Param != "input" {
		t.Errorf("output without its call = %v", err)
	}
}

func TestResponsesValidation(t *testing.T) {
	fake := start(t, WithAPIKey(testKey))
	hdr := map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json"}
	for _, tc := range []struct {
		body, msg, param, code string
	}{
		{`{"model":"gpt-5-mini","input":"hi","x_future_field":1}`, "Unknown parameter: 'x_future_field'.", "x_future_field", "unknown_parameter"},
		{`{"input":"hi"}`, "Missing required parameter: 'model'.", "model", CodeMissingRequiredParam},
		{`{"model":"gpt-5-mini","input":"hi","previous_response_id":"resp_1"}`, "Previous response with id 'resp_1' not found.", "previous_response_id", "previous_response_not_found"},
		{`{"model":"gpt-5-mini","input":"hi","max_output_tokens":8}`, "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 8 instead.", "max_output_tokens", "integer_below_min_value"},
	} {
		resp, body := raw(t, fake, "POST", "/v1/responses", hdr, tc.body)
		want := `{"error":{"message":` + string(marshal(tc.msg, false)) + `,"type":"invalid_request_error","param":"` + tc.param + `","code":"` + tc.code + `"}}`
		if resp.StatusCode != 400 || !jsonEqual(t, string(body), want) {
			t.Errorf("%s: %d %s", tc.body, resp.StatusCode, body)
		}
	}
	// Ollama and vLLM fakes serve no Responses API.
	for _, f := range []Flavor{FlavorOllama, FlavorVLLM} {
		other := start(t, WithFlavor(f))
		if resp, _ := raw(t, other, "POST", "/v1/responses", nil, `{"model":"m","input":"hi"}`); resp.StatusCode != 404 {
			t.Errorf("%s /v1/responses = %d", f, resp.StatusCode)
		}
	}
}

// sseEvents splits a named-event SSE body into (event, data) pairs,
// failing on any other framing.
func sseEvents(t *testing.T, body []byte) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		ev := sc.Text()
		if !sc.Scan() || !strings.HasPrefix(ev, "event: ") || !strings.HasPrefix(sc.Text(), "data: ") {
			t.Fatalf("bad framing at %q", ev)
		}
		names = append(names, strings.TrimPrefix(ev, "event: "))
		data = append(data, decodeMap(t, []byte(strings.TrimPrefix(sc.Text(), "data: "))))
		if sc.Scan() && sc.Text() != "" {
			t.Fatalf("no blank line after %q", ev)
		}
	}
	return names, data
}

func TestResponsesStreamSequence(t *testing.T) {
	fake := start(t)
	fake.EnqueueResponses(Reply{Reasoning: "Think a bit.", Text: "Hi there", ToolCalls: []ToolCall{{Name: "shell", Arguments: `{"command":"ls -la"}`}}})
	resp, body := raw(t, fake, "POST", "/v1/responses", map[string]string{"Content-Type": "application/json"},
		`{"model":"gpt-5-mini","input":"hi","stream":true,"include":["reasoning.encrypted_content"],"store":false}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	names, data := sseEvents(t, body)
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added"}
	if len(names) < len(want)+3 || strings.Join(names[:len(want)], ",") != strings.Join(want, ",") {
		t.Fatalf("events = %v", names)
	}
	tail := names[len(want):]
	if tail[len(tail)-3] != "response.function_call_arguments.done" || tail[len(tail)-2] != "response.output_item.done" || tail[len(tail)-1] != "response.completed" {
		t.Errorf("tail = %v", tail)
	}
	for i, d := range data {
		if d["type"] != names[i] || d["sequence_number"] != float64(i) {
			t.Errorf("event %d = %v", i, d)
		}
	}
	if path(data[3], "item", "encrypted_content") != nil || path(data[9], "item", "encrypted_content") == nil {
		t.Error("encrypted_content must come whole in output_item.done only")
	}
	var args strings.Builder
	for i, n := range names {
		if n == "response.function_call_arguments.delta" {
			args.WriteString(data[i]["delta"].(string))
		}
	}
	final := data[len(data)-1]["response"].(map[string]any)
	if args.String() != `{"command":"ls -la"}` || final["status"] != "completed" || len(final["output"].([]any)) != 3 || path(final, "usage", "total_tokens") == nil {
		t.Errorf("args %q final %v", args.String(), final)
	}
}

// The SDK reads the fake's stream, its mid-stream error event and its
// response.failed event.
func TestResponsesSDKStreamAndFaults(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.EnqueueResponses(
		TextReply("streamed words here"),
		Reply{Text: "never finished", MidStreamError: &StreamError{Message: "boom", Code: "server_error", AfterChunks: 3}},
		Reply{Text: "never finished", MidStreamError: &StreamError{Message: "failed it", AfterChunks: 2, Failed: true}},
		Reply{Text: "cut short by the limit", FinishReason: "length"},
	)
	s := client.Responses.NewStreaming(testCtx(t), codexParams(responses.ResponseInputParam{userInput("x")}))
	var text strings.Builder
	var done *responses.Response
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			done = &r
		}
	}
	if s.Err() != nil || text.String() != "streamed words here" || done == nil || done.OutputText() != "streamed words here" {
		t.Fatalf("stream: %v %q %v", s.Err(), text.String(), done)
	}
	for i, want := range []string{"error", "response.failed"} {
		s = client.Responses.NewStreaming(testCtx(t), codexParams(responses.ResponseInputParam{userInput("x")}))
		var last responses.ResponseStreamEventUnion
		n := 0
		for s.Next() {
			last = s.Current()
			n++
		}
		if last.Type != want || n != []int{4, 3}[i] {
			t.Errorf("fault %d: %d events, last %s (err %v)", i, n, last.RawJSON(), s.Err())
		}
	}
	resp, err := client.Responses.New(testCtx(t), codexParams(responses.ResponseInputParam{userInput("x")}))
	if err != nil || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("length: %v %s", err, resp.RawJSON())
	}
}

// Chat Completions echoes the service tier asked for.
func TestChatServiceTierEcho(t *testing.T) {
	fake := start(t)
	_, body := post(t, fake, chatBody("gpt-5-mini", `"service_tier":"flex"`))
	var cc struct {
		ServiceTier string `json:"service_tier"`
	}
	if err := json.Unmarshal(body, &cc); err != nil || cc.ServiceTier != "flex" {
		t.Errorf("service_tier %q (%v)", cc.ServiceTier, err)
	}
	_, body = post(t, fake, chatBody("gpt-5-mini", `"service_tier":"auto"`))
	if err := json.Unmarshal(body, &cc); err != nil || cc.ServiceTier != "default" {
		t.Errorf("auto: service_tier %q", cc.ServiceTier)
	}
}

// Without encrypted content a reasoning item is matched by its id, sent
// as the item or as an item_reference; a custom tool's output needs its
// call too.
func TestResponsesPairingByID(t *testing.T) {
	fake := start(t)
	hdr := map[string]string{"Content-Type": "application/json"}
	fake.EnqueueResponses(ReasoningToolCallReply("", "shell", `{}`), ReasoningToolCallReply("", "shell", `{}`))
	_, body := raw(t, fake, "POST", "/v1/responses", hdr, `{"model":"gpt-5-mini","input":"go"}`)
	out := decodeMap(t, body)["output"].([]any)
	rsID := path(out[0], "id").(string)
	fc := out[1].(map[string]any)
	call := `{"type":"function_call","call_id":"` + fc["call_id"].(string) + `","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"` + fc["call_id"].(string) + `","output":"ok"}`
	for _, tc := range []struct {
		name, input string
		status      int
	}{
		{"reference", `[{"type":"item_reference","id":"` + rsID + `"},` + call + `]`, 200},
		{"item by id", `[{"type":"reasoning","id":"` + rsID + `","summary":[]},` + call + `]`, 200},
		{"missing", `[` + call + `]`, 400},
		{"custom output alone", `[{"type":"custom_tool_call_output","call_id":"call_nope","output":"x"}]`, 400},
	} {
		resp, body := raw(t, fake, "POST", "/v1/responses", hdr, `{"model":"gpt-5-mini","input":`+tc.input+`}`)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
		if tc.name == "custom output alone" && !strings.Contains(string(body), "No tool call found for custom tool call output with call_id call_nope.") {
			t.Errorf("custom: %s", body)
		}
	}
}

// A custom tool call (Codex's code-mode exec) and a namespaced function
// call come as the API sends them, read by the SDK from the stream; the
// custom call, sent back, needs the reasoning item issued before it.
func TestResponsesCustomAndNamespacedCalls(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	const script = "const r = await tools.exec_command({cmd: \"echo hi\"});\ntext(r);"
	fake.EnqueueResponses(Reply{Reasoning: "Run it.", ToolCalls: []ToolCall{
		{Name: "exec", Custom: true, Namespace: "functions", Arguments: script},
		{Name: "spawn_agent", Namespace: "multi_agent_v1", Arguments: `{"agent_type":"critic"}`},
	}})
	s := client.Responses.NewStreaming(testCtx(t), codexParams(responses.ResponseInputParam{userInput("go")}))
	var deltas, done strings.Builder
	var final *responses.Response
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.custom_tool_call_input.delta":
			deltas.WriteString(ev.Delta)
		case "response.custom_tool_call_input.done":
			done.WriteString(ev.Input)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			final = &r
		}
	}
	if s.Err() != nil || final == nil || deltas.String() != script || done.String() != script {
		t.Fatalf("stream: %v, deltas %q, done %q", s.Err(), deltas.String(), done.String())
	}
	if len(final.Output) != 3 || final.Output[1].Type != "custom_tool_call" || final.Output[2].Type != "function_call" {
		t.Fatalf("output = %s", final.RawJSON())
	}
	ctc, fc := final.Output[1].AsCustomToolCall(), final.Output[2].AsFunctionCall()
	if !regexp.MustCompile(`^ctc_[0-9a-f]{50}$`).MatchString(ctc.ID) || ctc.Input != script || ctc.Name != "exec" || ctc.Namespace != "functions" || !strings.HasPrefix(ctc.CallID, "call_") {
		t.Errorf("custom call = %s", final.Output[1].RawJSON())
	}
	if !fcIDRe.MatchString(fc.ID) || fc.Name != "spawn_agent" || fc.Namespace != "multi_agent_v1" || fc.Arguments != `{"agent_type":"critic"}` {
		t.Errorf("namespaced call = %s", final.Output[2].RawJSON())
	}
	if !strings.Contains(final.Output[1].RawJSON(), `"status":"completed"`) {
		t.Errorf("custom call without status: %s", final.Output[1].RawJSON())
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	call := `{"type":"custom_tool_call","call_id":"` + ctc.CallID + `","name":"exec","input":` + string(marshal(script, false)) + `},` +
		`{"type":"custom_tool_call_output","call_id":"` + ctc.CallID + `","output":"hi"}`
	reasoning := `{"type":"reasoning","summary":[],"encrypted_content":"` + final.Output[0].EncryptedContent + `"},`
	for _, tc := range []struct {
		name, input string
		status      int
	}{
		{"without its reasoning", `[` + call + `]`, 400},
		{"with its reasoning", `[` + reasoning + call + `]`, 200},
	} {
		resp, body := raw(t, fake, "POST", "/v1/responses", hdr, `{"model":"gpt-5-mini","input":`+tc.input+`}`)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
		if tc.status == 400 && !strings.Contains(string(body), "Item '"+ctc.ID+"' of type 'custom_tool_call' was provided without its required 'reasoning' item: '"+final.Output[0].ID+"'.") {
			t.Errorf("%s: %s", tc.name, body)
		}
	}
}
