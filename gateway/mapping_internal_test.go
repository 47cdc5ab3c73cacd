package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

func TestStopReasonMapping(t *testing.T) {
	calls := []provider.ToolCall{{ID: "c", Name: "f", Arguments: []byte(`{}`)}}
	for _, tc := range []struct {
		stop         provider.StopReason
		tools        bool
		chat, anthro string
	}{
		{provider.StopEndTurn, false, "stop", "end_turn"},
		{provider.StopEndTurn, true, "tool_calls", "tool_use"}, // a plain stop beside tool calls
		{provider.StopToolUse, true, "tool_calls", "tool_use"},
		{provider.StopMaxTokens, false, "length", "max_tokens"},
		{provider.StopSequence, false, "stop", "stop_sequence"},
		{provider.StopRefusal, false, "content_filter", "refusal"},
		{provider.StopContentFilter, false, "content_filter", "refusal"},
		{provider.StopContextWindow, false, "length", "model_context_window_exceeded"},
		{provider.StopPause, false, "stop", "pause_turn"},
		{provider.StopOther, false, "stop", "end_turn"},
	} {
		r := &provider.Result{StopReason: tc.stop}
		if tc.tools {
			r.ToolCalls = calls
		}
		if got := finishReason(r); got != tc.chat {
			t.Errorf("finishReason(%s, tools %v) = %s, want %s", tc.stop, tc.tools, got, tc.chat)
		}
		if got := stopReason(r); got != tc.anthro {
			t.Errorf("stopReason(%s, tools %v) = %s, want %s", tc.stop, tc.tools, got, tc.anthro)
		}
	}
}

func TestContextFailureReadsEitherOrder(t *testing.T) {
	for _, msg := range []string{
		"prompt is too long: 250,000 tokens > 200,000 maximum",
		"This model's maximum context length is 200000 tokens. However, your messages resulted in 250000 tokens.",
		"The input token count (250000) exceeds the maximum number of tokens allowed (200000).",
	} {
		f := contextFailure(&provider.Error{Kind: provider.KindContextWindowExceeded, Diagnostic: provider.Diagnostic{Message: msg}})
		if f.prompt != 250000 || f.limit != 200000 || f.anthropicMessage() != "prompt is too long: 250000 tokens > 200000 maximum" {
			t.Errorf("%q: prompt %d limit %d, %q", msg, f.prompt, f.limit, f.anthropicMessage())
		}
	}
	f := contextFailure(&provider.Error{Kind: provider.KindContextWindowExceeded, Diagnostic: provider.Diagnostic{Message: "too long"}})
	if !strings.HasPrefix(f.openAIMessage(), "This model's maximum context length was exceeded") || !strings.HasPrefix(f.anthropicMessage(), "prompt is too long") {
		t.Errorf("without numbers: %q / %q", f.openAIMessage(), f.anthropicMessage())
	}
}

func TestInterleavedToolFragmentsFailTheStream(t *testing.T) {
	rec := httptest.NewRecorder()
	b := &blockStream{out: newSSE(rec), open: -1, openTool: -1, tools: map[int]bool{}, args: map[int]int{}}
	steps := []provider.ToolCallDelta{{Index: 0, ID: "a", Name: "f"}, {Index: 0, Arguments: `{"x":`}, {Index: 1, ID: "b", Name: "g"}, {Index: 0, Arguments: `1}`}}
	var err error
	for i := range steps {
		if err = b.tool(&steps[i]); err != nil {
			break
		}
	}
	if !errors.Is(err, errInterleaved) {
		t.Errorf("interleaved fragments = %v", err)
	}
}

// Cache marks stay where the client put them: on message blocks (a
// tool_result's inner blocks mark the result), on tools, and on the system
// prompt as the prompt-cache hint; a top-level mark marks the last block.
// A fifth mark is refused in the API's words, and the gateway's own mark on
// the last tool, when the client's leave no room for it, is named.
func TestCacheMarksStayWhereTheClientPutThem(t *testing.T) {
	mr, err := decodeMessages([]byte(`{"model":"m","max_tokens":5,
		"system":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}},{"name":"g"}],
		"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"user","content":"again"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"42","cache_control":{"type":"ephemeral"}}]}]}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	r := mr.req
	if r.PromptCache != provider.PromptCache5m || r.System != "rules" || len(r.Messages) != 3 || len(r.Messages[0].Parts) != 2 {
		t.Fatalf("decoded = %+v", r)
	}
	if r.Tools[0].Cache != provider.PromptCache1h || r.Tools[1].Cache != "" || r.Messages[0].Parts[0].Cache != "" || r.Messages[2].Parts[0].Cache != provider.PromptCache5m {
		t.Errorf("marks: tools %q %q, first part %q, tool result %q", r.Tools[0].Cache, r.Tools[1].Cache, r.Messages[0].Parts[0].Cache, r.Messages[2].Parts[0].Cache)
	}
	if len(mr.ignored) != 0 {
		t.Errorf("ignored = %v", mr.ignored)
	}
	// Automatic caching marks the last block.
	mr, err = decodeMessages([]byte(`{"model":"m","max_tokens":5,"cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`), false)
	if err != nil || mr.req.Messages[2].Parts[0].Cache != provider.PromptCache1h || mr.req.Messages[0].Parts[0].Cache != "" || mr.req.PromptCache != "" {
		t.Errorf("top-level mark: %v %+v", err, mr)
	}
	// Three marks on messages and one on the system prompt leave no room
	// for the gateway's mark on the last tool: it is named.
	marked := `{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}`
	three := `[` + marked + `,` + marked + `,` + marked + `]`
	mr, err = decodeMessages([]byte(`{"model":"m","max_tokens":5,"system":[`+marked+`],"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":`+three+`}]}`), false)
	if err != nil || !slices.Equal(mr.ignored, []string{"tools[0].cache_control"}) {
		t.Errorf("no room for the tool mark: %v, ignored %v", err, mr.ignored)
	}
	// A fifth is refused as the API refuses it.
	_, err = decodeMessages([]byte(`{"model":"m","max_tokens":5,"system":[`+marked+`,`+marked+`],"messages":[{"role":"user","content":`+three+`}]}`), false)
	if err == nil || err.Error() != "A maximum of 4 blocks with cache_control may be provided. Found 5." {
		t.Errorf("five marks = %v", err)
	}
	if _, err := decodeMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"cache_control":{"type":"ephemeral","ttl":"2d"}}`), false); err == nil || !strings.Contains(err.Error(), "cache_control.ttl") {
		t.Errorf("bad ttl = %v", err)
	}
}

func TestEveryClassHasAShapeInBothProtocols(t *testing.T) {
	for c := classInternal; c <= classShutdown; c++ {
		o, ok1 := openAIShapes[c]
		a, ok2 := anthropicShapes[c]
		if !ok1 || !ok2 || o.status < 400 || a.status < 400 || o.typ == "" || a.typ == "" {
			t.Errorf("class %d: OpenAI %+v (%v), Anthropic %+v (%v)", c, o, ok1, a, ok2)
		}
	}
}

// CortexBuild's refusals of a call are 400s in both protocols, with the
// code that says which: the hosts show a 400's message as it is and
// answer a 403 with login advice and a 5xx with "try again".
func TestRefusalsAreBadRequests(t *testing.T) {
	for _, c := range []struct {
		err  error
		code string
	}{
		{&orchestrator.Error{Err: orchestrator.ErrNoIndependentModel, Summary: "refused: task T has risk medium"}, "critic_gate"},
		{fmt.Errorf("claude: %w", locality.ErrRefused), "locality_refused"},
		{&orchestrator.Error{Err: fmt.Errorf("%w: revoked key", orchestrator.ErrPaused)}, "project_paused"},
		{fail(classPermission, "this key is bound to agent builder"), "permission_denied"},
	} {
		f := classify(context.Background(), c.err)
		for _, p := range []protocol{protoOpenAI, protoAnthropic} {
			w := httptest.NewRecorder()
			p.writeError(w, httptest.NewRequest("POST", "/v1/messages", nil), f)
			if w.Code != 400 || w.Header().Get("X-Should-Retry") != "false" || (p == protoOpenAI && !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`)) {
				t.Errorf("%v in protocol %d = %d %s", c.err, p, w.Code, w.Body.String())
			}
		}
	}
}
