package gateway

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

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

func TestCacheControlBecomesAPromptCacheHint(t *testing.T) {
	mr, err := decodeMessages([]byte(`{"model":"m","max_tokens":5,
		"system":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}],
		"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"user","content":"again"}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if mr.req.PromptCache != provider.PromptCache1h || mr.req.System != "rules" || len(mr.req.Messages) != 1 || len(mr.req.Messages[0].Parts) != 2 {
		t.Errorf("decoded = %+v", mr.req)
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
