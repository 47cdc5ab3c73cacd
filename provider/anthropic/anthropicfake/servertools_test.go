package anthropicfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// searchParams is a beta Messages request offering the web search tool
// (max_uses when > 0) and one function tool.
func searchParams(maxUses int64) anthropic.BetaMessageNewParams {
	ws := &anthropic.BetaWebSearchTool20250305Param{}
	if maxUses > 0 {
		ws.MaxUses = anthropic.Int(maxUses)
	}
	return anthropic.BetaMessageNewParams{
		Model:     "claude-sonnet-4-6",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Who won the 2026 Tour de France?"))},
		Tools: []anthropic.BetaToolUnionParam{
			{OfWebSearchTool20250305: ws},
			{OfTool: &anthropic.BetaToolParam{Name: "get_time", InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}}},
		},
	}
}

var tourSearch = WebSearch{Query: "2026 Tour de France winner", Results: []SearchResult{
	{URL: "https://www.letour.fr/en/history", Title: "Tour de France history", PageAge: "July 27, 2026", CitedText: "won the 2026 Tour de France"},
	{URL: "https://en.wikipedia.org/wiki/2026_Tour_de_France", Title: "2026 Tour de France - Wikipedia"},
}}

// The web search server tool answers as the API does: server_tool_use,
// web_search_tool_result, text citing what was found, and the searches in
// usage; the SDK decodes every block.
func TestWebSearchAnswer(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{WebSearches: []WebSearch{tourSearch}, Text: "A rider won it.", Usage: Usage{Input: 10, Output: 5}})
	msg, err := client.Beta.Messages.New(testCtx(t), searchParams(0))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, b := range msg.Content {
		types = append(types, b.Type)
	}
	if got := strings.Join(types, ","); got != "server_tool_use,web_search_tool_result,text" {
		t.Fatalf("blocks %s\n%s", got, msg.RawJSON())
	}
	use := msg.Content[0].AsServerToolUse()
	if !strings.HasPrefix(use.ID, "srvtoolu_01") || use.Name != "web_search" || !jsonEqual(t, msg.Content[0].Input, []byte(`{"query":"2026 Tour de France winner"}`)) {
		t.Errorf("server_tool_use %s", msg.Content[0].RawJSON())
	}
	res := msg.Content[1].AsWebSearchToolResult()
	list := res.Content.OfBetaWebSearchResultBlockArray
	if res.ToolUseID != use.ID || len(list) != 2 || list[0].URL != "https://www.letour.fr/en/history" || list[0].PageAge != "July 27, 2026" ||
		list[0].EncryptedContent == "" || list[1].JSON.PageAge.Raw() != "null" {
		t.Errorf("web_search_tool_result %s", msg.Content[1].RawJSON())
	}
	text := msg.Content[2].AsText()
	if text.Text != "A rider won it." || len(text.Citations) != 1 {
		t.Fatalf("text %s", msg.Content[2].RawJSON())
	}
	c := text.Citations[0].AsWebSearchResultLocation()
	if c.URL != list[0].URL || c.Title != list[0].Title || c.CitedText != "won the 2026 Tour de France" || c.EncryptedIndex == "" {
		t.Errorf("citation %s", text.Citations[0].RawJSON())
	}
	if u := msg.Usage; u.ServerToolUse.WebSearchRequests != 1 || u.ServiceTier != "standard" || u.InputTokens != 10 {
		t.Errorf("usage %s", u.RawJSON())
	}
}

// Streamed, the same answer arrives in the API's event shapes (the
// server_tool_use input as input_json_delta, the result whole in its
// content_block_start, citations_delta before the text) and accumulates
// into the message a unary call gets.
func TestWebSearchStream(t *testing.T) {
	fake := start(t, WithSeed(7))
	client, _ := sdk(t, fake)
	reply := Reply{WebSearches: []WebSearch{tourSearch}, Text: "A rider won it.", Usage: Usage{Input: 10, Output: 5}}
	fake.Enqueue(reply, reply)
	unary, err := client.Beta.Messages.New(testCtx(t), searchParams(0))
	if err != nil {
		t.Fatal(err)
	}
	st := client.Beta.Messages.NewStreaming(testCtx(t), searchParams(0))
	var acc anthropic.BetaMessage
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	// Ids differ between the calls; everything else is the same.
	norm := func(m *anthropic.BetaMessage) []byte {
		b, _ := json.Marshal(m)
		s := strings.NewReplacer(m.ID, "MSG", m.Content[0].ID, "SRV").Replace(string(b))
		return []byte(s)
	}
	if !jsonEqual(t, norm(unary), norm(&acc)) {
		t.Errorf("streamed message differs from the unary one:\n%s\n%s", norm(unary), norm(&acc))
	}

	reqs := fake.Requests()
	evs := parseSSE(t, fake.Sent(reqs[1].RequestID))
	var shape []string
	for _, ev := range evs {
		m := decodeMap(t, []byte(ev.Data))
		s := ev.Name
		if cb, ok := m["content_block"].(map[string]any); ok {
			s += ":" + cb["type"].(string)
		}
		if d, ok := m["delta"].(map[string]any); ok && ev.Name == "content_block_delta" {
			s += ":" + d["type"].(string)
		}
		shape = append(shape, s)
	}
	want := []string{"message_start", "content_block_start:server_tool_use", "ping", "content_block_delta:input_json_delta"}
	if len(shape) < 12 || !reflect.DeepEqual(shape[:4], want) {
		t.Fatalf("events %v", shape)
	}
	got := strings.Join(shape, " ")
	for _, frag := range []string{
		"content_block_stop content_block_start:web_search_tool_result content_block_stop content_block_start:text content_block_delta:citations_delta content_block_delta:text_delta",
		"content_block_stop message_delta message_stop",
	} {
		if !strings.Contains(got, frag) {
			t.Errorf("events %s\nlack %s", got, frag)
		}
	}
	if first := decodeMap(t, []byte(evs[3].Data))["delta"].(map[string]any)["partial_json"]; first != "" {
		t.Errorf("first input_json_delta %q, want empty as the API sends it", first)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Data, `"content_block":{"citations":[],"type":"text","text":""}`) {
			return
		}
	}
	t.Errorf("no cited text block start in %s", fake.Sent(reqs[1].RequestID))
}

// Past the tool's max_uses a search fails with max_uses_exceeded and is
// not billed; a scripted failure is not billed either.
func TestWebSearchMaxUses(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{WebSearches: []WebSearch{{Query: "one"}, {Query: "two", ErrorCode: SearchErrorUnavailable}, {Query: "three"}}, Text: "Done."})
	msg, err := client.Beta.Messages.New(testCtx(t), searchParams(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 7 {
		t.Fatalf("blocks %s", msg.RawJSON())
	}
	for i, code := range []string{"", "unavailable", "max_uses_exceeded"} {
		r := msg.Content[2*i+1].AsWebSearchToolResult()
		if got := string(r.Content.ErrorCode); got != code {
			t.Errorf("search %d: error_code %q, want %q (%s)", i, got, code, msg.Content[2*i+1].RawJSON())
		}
	}
	if !strings.Contains(msg.Content[5].RawJSON(), `"content":{"type":"web_search_tool_result_error","error_code":"max_uses_exceeded"}`) {
		t.Errorf("error block %s", msg.Content[5].RawJSON())
	}
	if n := msg.Usage.ServerToolUse.WebSearchRequests; n != 1 {
		t.Errorf("web_search_requests %d, want 1", n)
	}
}

// The default reply to a request offering web search searches for what it
// was asked; a search scripted for a request that offers no such tool is
// a scripting mistake, told as such.
func TestWebSearchDefaultAndMisuse(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	msg, err := client.Beta.Messages.New(testCtx(t), searchParams(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 3 || !strings.Contains(string(msg.Content[0].Input), "Tour de France") || msg.Usage.ServerToolUse.WebSearchRequests != 1 ||
		len(msg.Content[2].Citations) != 1 {
		t.Errorf("default reply %s", msg.RawJSON())
	}

	fake.Enqueue(Reply{WebSearches: []WebSearch{{Query: "q"}}})
	_, err = client.Messages.New(testCtx(t), userParams("hi"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 500 || !strings.Contains(ae.Message, "offers no web_search tool") {
		t.Errorf("scripted search without the tool: %v", err)
	}
	// A plain request's usage has no server_tool_use.
	msg2, err := client.Messages.New(testCtx(t), userParams("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(msg2.RawJSON(), "server_tool_use") {
		t.Errorf("plain answer reports server tools: %s", msg2.RawJSON())
	}
}

const cmBody = `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}],` +
	`"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000}}]}}`

// context_management needs its beta, as the API says; with it, the answer
// reports the edits applied, unary and streamed.
func TestContextManagement(t *testing.T) {
	fake := start(t)
	resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), cmBody)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"message":"context_management: Extra inputs are not permitted"`) {
		t.Fatalf("without the beta: %d %s", resp.StatusCode, body)
	}
	h := goodHeaders()
	h["anthropic-beta"] = "interleaved-thinking-2025-05-14, " + BetaContextManagement + ",some-future-beta-2099-01-01"
	resp, body = raw(t, fake, "POST", "/v1/messages", h, cmBody)
	if resp.StatusCode != 200 || !strings.HasSuffix(string(body), `,"context_management":{"applied_edits":[]}}`) {
		t.Fatalf("with the beta: %d %s", resp.StatusCode, body)
	}
	if got := fake.Requests()[1].Betas(); !reflect.DeepEqual(got, []string{"interleaved-thinking-2025-05-14", BetaContextManagement, "some-future-beta-2099-01-01"}) {
		t.Errorf("betas %q", got)
	}

	edits := []AppliedEdit{{Type: EditClearThinking, ClearedThinkingTurns: 3, ClearedInputTokens: 15000}, {Type: EditClearToolUses, ClearedToolUses: 8, ClearedInputTokens: 50000}}
	client, _ := sdk(t, fake)
	params := anthropic.BetaMessageNewParams{
		Model: "claude-sonnet-4-6", MaxTokens: 64, Betas: []anthropic.AnthropicBeta{anthropic.AnthropicBetaContextManagement2025_06_27},
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hi"))},
		ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{
			{OfClearToolUses20250919: &anthropic.BetaClearToolUses20250919EditParam{}}}},
	}
	want := `{"applied_edits":[{"type":"clear_thinking_20251015","cleared_thinking_turns":3,"cleared_input_tokens":15000},{"type":"clear_tool_uses_20250919","cleared_tool_uses":8,"cleared_input_tokens":50000}]}`
	fake.Enqueue(Reply{Text: "ok", AppliedEdits: edits}, Reply{Text: "ok", AppliedEdits: edits})
	msg, err := client.Beta.Messages.New(testCtx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.ContextManagement.RawJSON(); got != want {
		t.Errorf("unary context_management %s", got)
	}
	st := client.Beta.Messages.NewStreaming(testCtx(t), params)
	var acc anthropic.BetaMessage
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.ContextManagement.AppliedEdits) != 2 || acc.ContextManagement.AppliedEdits[1].ClearedToolUses != 8 {
		t.Errorf("streamed context_management %s", acc.ContextManagement.RawJSON())
	}
	// Edits scripted for a request without context_management are a
	// scripting mistake.
	fake.Enqueue(Reply{AppliedEdits: edits})
	if _, err := client.Messages.New(testCtx(t), userParams("hi")); err == nil || !strings.Contains(err.Error(), "without context_management") {
		t.Errorf("edits without context_management: %v", err)
	}
}

// A top-level field the API does not define is refused with its words,
// unless the fake is told the API has it.
func TestUnknownFieldRefused(t *testing.T) {
	body := `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"future_knob":{"on":true}}`
	fake := start(t)
	resp, out := raw(t, fake, "POST", "/v1/messages", goodHeaders(), body)
	if resp.StatusCode != 400 || !strings.Contains(string(out), `"message":"future_knob: Extra inputs are not permitted"`) {
		t.Errorf("unknown field: %d %s", resp.StatusCode, out)
	}
	fake = start(t, WithAcceptedFields("future_knob"))
	if resp, out := raw(t, fake, "POST", "/v1/messages", goodHeaders(), body); resp.StatusCode != 200 {
		t.Errorf("accepted field: %d %s", resp.StatusCode, out)
	}
	// Every field the API defines passes this check.
	for _, f := range KnownFields {
		if !knownFields[f] {
			t.Errorf("%s not known", f)
		}
	}
}

// Sent holds the response bytes exactly as the client read them, for a
// JSON answer, a stream and an error.
func TestSentIsWhatTheClientRead(t *testing.T) {
	fake := start(t)
	fake.Enqueue(TextReply("one two three"), TextReply("four five six"), RateLimited("3"))
	for i, body := range []string{msgBody, strings.Replace(msgBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1), msgBody} {
		req, _ := http.NewRequestWithContext(testCtx(t), "POST", fake.URL()+"/v1/messages", strings.NewReader(body))
		for k, v := range goodHeaders() {
			req.Header.Set(k, v)
		}
		resp, err := fake.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		sent := fake.Sent(resp.Header.Get("request-id"))
		if len(got) == 0 || !bytes.Equal(got, sent) {
			t.Errorf("call %d: read %q, Sent %q", i, got, sent)
		}
	}
	if fake.Sent("req_unknown") != nil {
		t.Error("Sent of an unknown id")
	}
	id := fake.Requests()[0].RequestID
	fake.ForgetRequests()
	if len(fake.Requests()) != 0 || fake.Sent(id) != nil {
		t.Error("ForgetRequests kept something")
	}
}

// CutAfterBytes cuts a stream inside an event: the client reads that many
// bytes and then an unexpected end.
func TestStreamCutAfterBytes(t *testing.T) {
	fake := start(t, WithoutPadding(), WithSeed(1))
	fake.Enqueue(Reply{Text: "one two three four five", CutAfterBytes: 700})
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", fake.URL()+"/v1/messages", strings.NewReader(strings.Replace(msgBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)))
	for k, v := range goodHeaders() {
		req.Header.Set(k, v)
	}
	resp, err := fake.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Error("a cut stream read to its end without error")
	}
	if len(got) != 700 || !bytes.Equal(got, fake.Sent(resp.Header.Get("request-id"))) || bytes.HasSuffix(got, []byte("\n\n")) {
		t.Errorf("read %d bytes %q", len(got), got)
	}
}
