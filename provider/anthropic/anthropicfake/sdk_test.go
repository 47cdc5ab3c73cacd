package anthropicfake

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func TestSDKNonStreamText(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{
		Text:  "Hello <there> & welcome.",
		Usage: Usage{Input: 12, Output: 5, CacheRead: 30, CacheCreation5m: 20, CacheCreation1h: 10},
	})

	var resp *http.Response
	msg, err := client.Messages.New(testCtx(t), userParams("Hi"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "Hello <there> & welcome." {
		t.Errorf("content = %+v", msg.Content)
	}
	if !strings.HasPrefix(msg.ID, "msg_01") || len(msg.ID) != len("msg_01P7nF1bmxyzFZjF8zwbUDBM") {
		t.Errorf("id = %q", msg.ID)
	}
	if msg.Model != "claude-sonnet-4-6" || msg.Role != "assistant" || msg.Type != "message" {
		t.Errorf("model/role/type = %q/%q/%q", msg.Model, msg.Role, msg.Type)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("stop_reason = %q", msg.StopReason)
	}
	u := msg.Usage
	if u.InputTokens != 12 || u.OutputTokens != 5 || u.CacheReadInputTokens != 30 || u.CacheCreationInputTokens != 30 ||
		u.CacheCreation.Ephemeral5mInputTokens != 20 || u.CacheCreation.Ephemeral1hInputTokens != 10 || u.ServiceTier != "standard" {
		t.Errorf("usage = %s", u.RawJSON())
	}
	for _, field := range []string{"stop_sequence", "stop_details"} {
		if !strings.Contains(msg.RawJSON(), `"`+field+`":null`) {
			t.Errorf("%s not null in %s", field, msg.RawJSON())
		}
	}
	if !strings.Contains(msg.RawJSON(), "<there> &") {
		t.Errorf("HTML characters escaped: %s", msg.RawJSON())
	}

	h := resp.Header
	if got := h.Get("content-type"); got != "application/json" {
		t.Errorf("content-type = %q", got)
	}
	if !strings.HasPrefix(h.Get("request-id"), "req_011C") || h.Get("anthropic-organization-id") == "" {
		t.Errorf("request-id/org = %q/%q", h.Get("request-id"), h.Get("anthropic-organization-id"))
	}

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/messages" || r.RequestID != h.Get("request-id") {
		t.Errorf("recorded %s %s %s", r.Method, r.Path, r.RequestID)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("anthropic-version"); got != "2026-10-21" {
		t.Errorf("anthropic-version = %q", got)
	}
	if r.APIKey() != testKey || r.Stream() || r.LastUserText() != "Hi" {
		t.Errorf("APIKey/Stream/LastUserText = %q/%v/%q", r.APIKey(), r.Stream(), r.LastUserText())
	}
}

func TestSDKDefaultEchoReply(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	msg, err := client.Messages.New(testCtx(t), userParams("ping me"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "echo: ping me" {
		t.Errorf("text = %q", msg.Content[0].Text)
	}
	if msg.Usage.InputTokens != int64(CountTokens(fake.Requests()[0].Body)) || msg.Usage.OutputTokens < 1 {
		t.Errorf("usage = %s", msg.Usage.RawJSON())
	}
}

var weatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name:        "get_weather",
	Description: anthropic.String("Get weather"),
	InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}},
		Required:   []string{"city"},
	},
}}

func TestSDKToolUseRoundTrip(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(
		Reply{Text: "Checking.", ToolUses: []ToolUse{{ID: "toolu_01TestTestTestTestTestTe", Name: "get_weather", Input: json.RawMessage(`{ "city" : "Paris" }`)}}},
		TextReply("It is 18C and sunny in Paris."),
	)
	params := userParams("Weather in Paris?")
	params.Tools = []anthropic.ToolUnionParam{weatherTool}

	first, err := client.Messages.New(testCtx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if first.StopReason != anthropic.StopReasonToolUse || len(first.Content) != 2 {
		t.Fatalf("stop_reason %q, content %s", first.StopReason, first.RawJSON())
	}
	tu, ok := first.Content[1].AsAny().(anthropic.ToolUseBlock)
	if !ok {
		t.Fatalf("block 1 is %T", first.Content[1].AsAny())
	}
	if tu.ID != "toolu_01TestTestTestTestTestTe" || tu.Name != "get_weather" || string(tu.Input) != `{"city":"Paris"}` {
		t.Errorf("tool_use = %s %s %s", tu.ID, tu.Name, tu.Input)
	}

	params.Messages = append(params.Messages,
		first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(tu.ID, "18C sunny", false)),
	)
	second, err := client.Messages.New(testCtx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if second.StopReason != anthropic.StopReasonEndTurn || second.Content[0].Text != "It is 18C and sunny in Paris." {
		t.Errorf("second = %s", second.RawJSON())
	}

	// The second request carries the assistant tool_use and the user tool_result.
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	rec := fake.Requests()[1]
	if err := rec.Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Messages) != 3 {
		t.Fatalf("second request has %d messages", len(body.Messages))
	}
	asst, user := body.Messages[1], body.Messages[2]
	if asst.Role != "assistant" || asst.Content[1].Type != "tool_use" || asst.Content[1].ID != tu.ID || !jsonEqual(t, asst.Content[1].Input, []byte(`{"city":"Paris"}`)) {
		t.Errorf("assistant turn = %+v", asst)
	}
	if user.Role != "user" || user.Content[0].Type != "tool_result" || user.Content[0].ToolUseID != tu.ID {
		t.Errorf("user turn = %+v", user)
	}
	if rec.LastUserText() != "18C sunny" {
		t.Errorf("LastUserText = %q", rec.LastUserText())
	}
}

// streamScript is a reply with every block kind, used by the streaming
// tests.
func streamScript() Reply {
	return Reply{
		ID:       "msg_01StreamStreamStreamStr",
		Thinking: &Thinking{Text: "The user wants weather for two cities. I will call the tool twice.", Signature: "EqQBsig"},
		Text:     "I'll check the weather in Paris and in Zürich for you — one moment.",
		ToolUses: []ToolUse{
			{ID: "toolu_01AAAAAAAAAAAAAAAAAAAAAA", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris","units":"celsius"}`)},
			{ID: "toolu_01BBBBBBBBBBBBBBBBBBBBBB", Name: "get_weather", Input: json.RawMessage(`{"city":"Zürich","opts":{"days":[1,2],"note":"a, b: \"c\""}}`)},
		},
		Usage: Usage{Input: 394, Output: 79, CacheRead: 100, CacheCreation5m: 7},
	}
}

func TestSDKStreamAccumulate(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	script := streamScript()
	fake.Enqueue(script, script)

	var resp *http.Response
	stream := client.Messages.NewStreaming(testCtx(t), userParams("Weather?"), option.WithResponseInto(&resp))
	defer stream.Close()
	var acc anthropic.Message
	counts := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		counts[ev.Type]++
		if ev.Type == "content_block_delta" {
			counts[string(ev.Delta.Type)]++
		}
		if ev.Type == "message_start" && ev.Message.Usage.OutputTokens != 1 {
			t.Errorf("message_start output_tokens = %d, want 1", ev.Message.Usage.OutputTokens)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("content-type"); got != "text/event-stream; charset=utf-8" {
		t.Errorf("content-type = %q", got)
	}
	if counts["message_start"] != 1 || counts["message_stop"] != 1 || counts["message_delta"] != 1 ||
		counts["content_block_start"] != 4 || counts["content_block_stop"] != 4 {
		t.Errorf("event counts = %v", counts)
	}
	if counts["text_delta"] < 3 || counts["thinking_delta"] < 2 || counts["signature_delta"] != 1 || counts["input_json_delta"] < 6 {
		t.Errorf("delta counts = %v", counts)
	}

	// The accumulated message is the script.
	if acc.ID != script.ID || acc.StopReason != anthropic.StopReasonToolUse || len(acc.Content) != 4 {
		t.Fatalf("accumulated %s", acc.RawJSON())
	}
	if th := acc.Content[0]; th.Type != "thinking" || th.Thinking != script.Thinking.Text || th.Signature != script.Thinking.Signature {
		t.Errorf("thinking = %+v", th)
	}
	if acc.Content[1].Type != "text" || acc.Content[1].Text != script.Text {
		t.Errorf("text = %q", acc.Content[1].Text)
	}
	for i, want := range script.ToolUses {
		got := acc.Content[2+i]
		if got.Type != "tool_use" || got.ID != want.ID || got.Name != want.Name || !jsonEqual(t, got.Input, want.Input) {
			t.Errorf("tool %d = %s %s %s", i, got.ID, got.Name, got.Input)
		}
	}
	u := acc.Usage
	if u.InputTokens != 394 || u.OutputTokens != 79 || u.CacheReadInputTokens != 100 || u.CacheCreationInputTokens != 7 ||
		u.CacheCreation.Ephemeral5mInputTokens != 7 {
		t.Errorf("usage = %+v", u)
	}

	// The same script without streaming gives the same message.
	msg, err := client.Messages.New(testCtx(t), userParams("Weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.ID != acc.ID || msg.StopReason != acc.StopReason || msg.Usage.OutputTokens != acc.Usage.OutputTokens || len(msg.Content) != len(acc.Content) {
		t.Fatalf("non-stream %s\nstream %s", msg.RawJSON(), acc.RawJSON())
	}
	for i := range msg.Content {
		a, b := msg.Content[i], acc.Content[i]
		if a.Type != b.Type || a.Text != b.Text || a.Thinking != b.Thinking || a.Signature != b.Signature || a.ID != b.ID ||
			(a.Type == "tool_use" && !jsonEqual(t, a.Input, b.Input)) {
			t.Errorf("block %d differs: %s vs %s", i, a.RawJSON(), b.RawJSON())
		}
	}
}

func TestSDKMidStreamOverloaded(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(OverloadedMidStream(4))

	stream := client.Messages.NewStreaming(testCtx(t), userParams("Hi there, how are you today?"))
	defer stream.Close()
	var got []string
	for stream.Next() {
		got = append(got, stream.Current().Type)
	}
	// 4 events were sent (message_start, content_block_start, ping,
	// content_block_delta); the SDK skips the ping.
	if want := []string{"message_start", "content_block_start", "content_block_delta"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events before the error = %v, want %v", got, want)
	}
	var apiErr *anthropic.Error
	if !errors.As(stream.Err(), &apiErr) {
		t.Fatalf("stream.Err() = %v (%T), want *anthropic.Error", stream.Err(), stream.Err())
	}
	if apiErr.Type() != "overloaded_error" || apiErr.StatusCode != 200 || apiErr.Message != "Overloaded" || !strings.HasPrefix(apiErr.RequestID, "req_") {
		t.Errorf("error = type %q status %d message %q request %q", apiErr.Type(), apiErr.StatusCode, apiErr.Message, apiErr.RequestID)
	}

	// Without streaming the same script is an HTTP 529.
	fake.Enqueue(OverloadedMidStream(4))
	_, err := client.Messages.New(testCtx(t), userParams("Hi"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" {
		t.Errorf("non-stream err = %v", err)
	}
}

func TestSDKErrorConstructors(t *testing.T) {
	tests := []struct {
		name    string
		reply   Reply
		status  int
		errType string
		code    string
		message string
		headers map[string]string
	}{
		{"InvalidRequest", InvalidRequest("messages: bad"), 400, "invalid_request_error", "", "messages: bad", nil},
		{"PromptTooLong", PromptTooLong(250123, 200000), 400, "invalid_request_error", "", "prompt is too long: 250123 tokens > 200000 maximum", nil},
		{"AuthError", AuthError(), 401, "authentication_error", "", "invalid x-api-key", nil},
		{"BillingError", BillingError(), 402, "billing_error", "", "", nil},
		{"PermissionError", PermissionError(), 403, "permission_error", "", "", nil},
		{"NotFound", NotFound(), 404, "not_found_error", "", "Not Found", nil},
		{"ModelNotFound", ModelNotFound("claude-nope"), 404, "not_found_error", "", "model: claude-nope", nil},
		{"Conflict", Conflict(), 409, "conflict_error", "", "", nil},
		{"RequestTooLarge", RequestTooLarge(), 413, "request_too_large", "", "", nil},
		{"RateLimited", RateLimited("2"), 429, "rate_limit_error", "", "", map[string]string{"retry-after": "2"}},
		{"RateLimitedMs", RateLimitedMs(1500), 429, "rate_limit_error", "", "", map[string]string{"retry-after": "2", "retry-after-ms": "1500"}},
		{"SpendLimitReached", SpendLimitReached(), 429, "rate_limit_error", "enforced_spend_limit_reached", "", map[string]string{"retry-after": ""}},
		{"APIError", APIError(), 500, "api_error", "", "Internal server error", nil},
		{"BadGateway", BadGateway(), 502, "", "", "", map[string]string{"content-type": "text/html"}},
		{"TimeoutError", TimeoutError(), 504, "timeout_error", "", "", nil},
		{"Overloaded", Overloaded(), 529, "overloaded_error", "", "Overloaded", nil},
		{"ShouldRetryHeader", Overloaded().WithHeader("x-should-retry", "false"), 529, "overloaded_error", "", "", map[string]string{"x-should-retry": "false"}},
		{"TypeOnly", Reply{ErrorType: TypeTimeout}, 504, "timeout_error", "", "Request timed out", nil},
		{"StatusOnly", Reply{Status: 503}, 503, "api_error", "", "", nil},
	}
	fake := start(t)
	client, _ := sdk(t, fake)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake.Enqueue(tt.reply)
			_, err := client.Messages.New(testCtx(t), userParams("Hi"))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *anthropic.Error", err, err)
			}
			if apiErr.StatusCode != tt.status || string(apiErr.Type()) != tt.errType || string(apiErr.ErrorCode()) != tt.code {
				t.Errorf("status %d type %q code %q, want %d %q %q", apiErr.StatusCode, apiErr.Type(), apiErr.ErrorCode(), tt.status, tt.errType, tt.code)
			}
			if tt.message != "" && apiErr.Message != tt.message {
				t.Errorf("message = %q, want %q", apiErr.Message, tt.message)
			}
			if tt.errType != "" && apiErr.Message == "" {
				t.Errorf("empty message")
			}
			if !strings.HasPrefix(apiErr.RequestID, "req_011C") {
				t.Errorf("request id = %q", apiErr.RequestID)
			}
			for k, v := range tt.headers {
				if got := apiErr.Response.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if tt.errType != "" && !strings.Contains(apiErr.RawJSON(), `"request_id":"`+apiErr.RequestID+`"`) {
				t.Errorf("body lacks request_id: %s", apiErr.RawJSON())
			}
			if tt.name == "BadGateway" && !strings.Contains(apiErr.Error(), "502 Bad Gateway") {
				t.Errorf("error text = %s", apiErr.Error())
			}
		})
	}
}

func TestSDKModelsListAndGet(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	all := DefaultModels()

	page, err := client.Models.List(testCtx(t), anthropic.ModelListParams{Limit: anthropic.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || !page.HasMore || page.FirstID != all[0].ID || page.LastID != all[0].ID {
		t.Errorf("page = %s", page.RawJSON())
	}
	m := page.Data[0]
	if m.ID != all[0].ID || m.DisplayName != all[0].DisplayName || !m.CreatedAt.Equal(all[0].CreatedAt) || m.Type != "model" {
		t.Errorf("model = %s", m.RawJSON())
	}
	if got := fake.Requests()[0]; got.Method != "GET" || got.Path != "/v1/models" || got.Query().Get("limit") != "1" {
		t.Errorf("recorded %s %s?%s", got.Method, got.Path, got.RawQuery)
	}

	var ids []string
	iter := client.Models.ListAutoPaging(testCtx(t), anthropic.ModelListParams{Limit: anthropic.Int(3)})
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(all) {
		t.Errorf("auto-paging got %v", ids)
	}
	for i := range ids {
		if ids[i] != all[i].ID {
			t.Errorf("auto-paging order %v", ids)
			break
		}
	}

	info, err := client.Models.Get(testCtx(t), "claude-sonnet-4-6", anthropic.ModelGetParams{})
	if err != nil || info.ID != "claude-sonnet-4-6" {
		t.Errorf("Get = %v, %v", info, err)
	}
	_, err = client.Models.Get(testCtx(t), "claude-nope", anthropic.ModelGetParams{})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != "not_found_error" {
		t.Errorf("Get unknown = %v", err)
	}

	// Models has its own queue of faults (a failing health check).
	fake.EnqueueRoute(RouteModels, Overloaded())
	_, err = client.Models.List(testCtx(t), anthropic.ModelListParams{Limit: anthropic.Int(1)})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 {
		t.Errorf("scripted models fault = %v", err)
	}
}

func TestSDKCountTokens(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	res, err := client.Messages.CountTokens(testCtx(t), anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-6",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?"))},
		Tools:    []anthropic.MessageCountTokensToolUnionParam{{OfTool: weatherTool.OfTool}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := fake.Requests()[0]
	if rec.Path != "/v1/messages/count_tokens" {
		t.Fatalf("path %s", rec.Path)
	}
	if res.InputTokens != int64(CountTokens(rec.Body)) || res.InputTokens < 10 {
		t.Errorf("input_tokens = %d, CountTokens = %d", res.InputTokens, CountTokens(rec.Body))
	}

	// A scripted count.
	fake.EnqueueRoute(RouteCountTokens, Reply{Usage: Usage{Input: 4242}})
	res, err = client.Messages.CountTokens(testCtx(t), anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-6",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
	})
	if err != nil || res.InputTokens != 4242 {
		t.Errorf("scripted count = %v, %v", res, err)
	}
}

func TestCountTokensFormula(t *testing.T) {
	// The keys and strings of system and messages, a separator after
	// each: "terse role user content abcd " is 29 ASCII bytes, ceil(29/4)
	// = 8. Other fields and whitespace do not count.
	body := `{"model":"m", "max_tokens": 5, "system": "terse",
	  "messages": [ {"role": "user", "content": "abcd"} ]}`
	if got := CountTokens([]byte(body)); got != 8 {
		t.Errorf("CountTokens = %d, want 8", got)
	}
	// Bytes outside ASCII count one each, however they are escaped: the
	// 10 bytes of "漢字" and "😀" and 20 ASCII bytes: ceil(20/4) + 10 = 15.
	body = `{"messages": [ {"role": "user", "content": "\u6f22\u5b57 😀"} ]}`
	if got := CountTokens([]byte(body)); got != 15 {
		t.Errorf("CountTokens of CJK and emoji = %d, want 15", got)
	}
	if got := CountTokens([]byte(`{"model":"m"}`)); got != 1 {
		t.Errorf("CountTokens of nothing = %d, want 1", got)
	}
}

func TestSDKBadAuth(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake, option.WithAPIKey("wrong-key"))
	_, err := client.Messages.New(testCtx(t), userParams("Hi"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" || apiErr.Message != "invalid x-api-key" {
		t.Fatalf("err = %v", err)
	}
	if fake.Pending(RouteMessages) != 0 {
		t.Error("queue changed")
	}

	// The v1 header style is accepted too; no key at all is a 401.
	h := goodHeaders()
	resp, _ := raw(t, fake, "POST", "/v1/messages", h, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Errorf("x-api-key: status %d", resp.StatusCode)
	}
	delete(h, "x-api-key")
	resp, body := raw(t, fake, "POST", "/v1/messages", h, `{}`)
	if resp.StatusCode != 401 || decodeMap(t, body)["error"].(map[string]any)["message"] != "x-api-key header is required" {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
	h["x-api-key"] = "wrong"
	h["authorization"] = "Bearer " + testKey
	if resp, _ := raw(t, fake, "POST", "/v1/messages", h, `{}`); resp.StatusCode != 401 {
		t.Errorf("x-api-key takes precedence over Bearer: status %d", resp.StatusCode)
	}
}

func TestSDKTemperatureRejectedOn2026Version(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	_, err := client.Messages.New(testCtx(t), userParams("Hi"), option.WithJSONSet("temperature", 1.0))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" || apiErr.Message != "temperature: Extra inputs are not permitted" {
		t.Fatalf("err = %v", err)
	}
	// Pinned to the old version it is accepted.
	_, err = client.Messages.New(testCtx(t), userParams("Hi"),
		option.WithHeader("anthropic-version", "2023-06-01"), option.WithJSONSet("top_k", 5))
	if err != nil {
		t.Errorf("2023-06-01 with top_k: %v", err)
	}
}

func TestSDKCutStream(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(CutStream(5))
	stream := client.Messages.NewStreaming(testCtx(t), userParams("Tell me a long story about the sea"))
	defer stream.Close()
	var acc anthropic.Message
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	// The SDK reports the cut as io.ErrUnexpectedEOF: the chunked body ended
	// without its terminating chunk. Without message_stop or message_delta
	// the accumulated message has no stop_reason.
	if err := stream.Err(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("stream.Err() = %v, want io.ErrUnexpectedEOF", err)
	}
	if len(types) != 4 || types[len(types)-1] == "message_stop" {
		t.Errorf("events = %v (5 sent, one of them a ping)", types)
	}
	if acc.StopReason != "" {
		t.Errorf("stop_reason = %q", acc.StopReason)
	}

	// A cut non-streaming body fails the same way.
	fake.Enqueue(Reply{Text: "truncated", CutAfterBytes: 20})
	if _, err := client.Messages.New(testCtx(t), userParams("Hi")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut body: err = %v", err)
	}
}

func TestSDKHoldGate(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	gate := make(chan struct{})
	fake.Enqueue(TextReply("finally").WithHold(gate))

	type result struct {
		msg *anthropic.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := client.Messages.New(testCtx(t), userParams("Hi"))
		done <- result{msg, err}
	}()
	if err := fake.WaitRequests(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	// The request has arrived and is parked on the gate: no byte has been
	// written, so the call cannot have returned.
	select {
	case r := <-done:
		t.Fatalf("call returned before the gate opened: %v %v", r.msg, r.err)
	default:
	}
	close(gate)
	r := <-done
	if r.err != nil || r.msg.Content[0].Text != "finally" {
		t.Fatalf("after the gate: %v %v", r.msg, r.err)
	}
}

func TestHoldReleasedByClientCancelAndClose(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	never := make(chan struct{})
	fake.Enqueue(TextReply("x").WithHold(never), TextReply("y").WithHold(never))

	// A client that gives up releases the handler.
	ctx, cancel := contextWithCancel(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Messages.New(ctx, userParams("Hi"))
		errc <- err
	}()
	if err := fake.WaitRequests(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled call succeeded")
	}

	// Closing the server releases a held request: the client sees a
	// connection error, and Close does not hang.
	go func() {
		_, err := client.Messages.New(testCtx(t), userParams("Hi"))
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

func TestSDKOpenConnsReturnToZero(t *testing.T) {
	fake := start(t)
	client, tr := sdk(t, fake)
	for range 3 {
		if _, err := client.Messages.New(testCtx(t), userParams("Hi")); err != nil {
			t.Fatal(err)
		}
	}
	stream := client.Messages.NewStreaming(testCtx(t), userParams("Hi"))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if n := fake.OpenConns(); n < 1 {
		t.Errorf("OpenConns = %d with a kept-alive connection", n)
	}
	tr.CloseIdleConnections()
	if err := fake.WaitOpenConns(testCtx(t), 0); err != nil {
		t.Fatalf("connections still open: %d (%v)", fake.OpenConns(), err)
	}
	if n := fake.OpenConns(); n != 0 {
		t.Errorf("OpenConns = %d", n)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fake := start(t, WithClock(func() time.Time { return now }))
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{Text: "a", Usage: Usage{Input: 394, Output: 79, CacheRead: 5000}}, Reply{Text: "b", Usage: Usage{Input: 1000, Output: 1000}})

	var resp *http.Response
	if _, err := client.Messages.New(testCtx(t), userParams("Hi"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	// The cassette's numbers after one 394-in/79-out call.
	want := map[string]string{
		"requests-limit": "4000", "requests-remaining": "3999",
		"tokens-limit": "280000", "tokens-remaining": "279000",
		"input-tokens-limit": "200000", "input-tokens-remaining": "199000",
		"output-tokens-limit": "80000", "output-tokens-remaining": "80000",
	}
	for k, v := range want {
		if got := resp.Header.Get("anthropic-ratelimit-" + k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for _, b := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		reset, err := time.Parse(time.RFC3339, resp.Header.Get("anthropic-ratelimit-"+b+"-reset"))
		if err != nil || !reset.Equal(now.Add(time.Minute)) {
			t.Errorf("%s reset = %v, %v", b, reset, err)
		}
	}
	if _, err := client.Messages.New(testCtx(t), userParams("Hi"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"requests-remaining": "3998", "input-tokens-remaining": "198000", "output-tokens-remaining": "79000", "tokens-remaining": "278000"}
	for k, v := range want {
		if got := resp.Header.Get("anthropic-ratelimit-" + k); got != v {
			t.Errorf("second call %s = %q, want %q", k, got, v)
		}
	}
	// Configurable, and reported exactly when small; errors carry them too.
	small := start(t, WithRateLimits(RateLimits{Requests: 5, Tokens: 100}))
	resp, _ = raw(t, small, "GET", "/v1/models", goodHeaders(), "")
	if resp.Header.Get("anthropic-ratelimit-requests-remaining") != "4" || resp.Header.Get("anthropic-ratelimit-tokens-remaining") != "100" {
		t.Errorf("small limits: %v", resp.Header)
	}
	resp, _ = raw(t, small, "GET", "/v1/nope", nil, "")
	if resp.Header.Get("anthropic-ratelimit-requests-remaining") != "3" || resp.Header.Get("request-id") == "" {
		t.Errorf("404 headers: %v", resp.Header)
	}
}
