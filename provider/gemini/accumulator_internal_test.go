package gemini

import (
	"time"

	"encoding/json"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The Developer API often sends function calls without ids: the adapter
// makes ids up so tool results can refer to them, and never sends the
// made-up ids back.
func TestSyntheticCallIDsAreNotSentBack(t *testing.T) {
	var acc accumulator
	err := acc.add(&generateResponse{Candidates: []*candidate{{FinishReason: finishStop, Content: &content{Role: "model", Parts: []*part{
		{FunctionCall: &functionCall{Name: "get_weather", Args: map[string]any{"city": "Paris"}}, ThoughtSignature: []byte{1, 2, 3}},
		{FunctionCall: &functionCall{Name: "get_time"}},
	}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(acc.calls) != 2 || acc.calls[0].ID == "" || acc.calls[0].ID == acc.calls[1].ID || string(acc.calls[1].Arguments) != "{}" {
		t.Fatalf("calls = %+v", acc.calls)
	}
	a := &Adapter{base: adapterkit.Base{Name: "g", Now: time.Now}}
	res, _ := a.result(&acc, "gemini-2.5-flash")
	req := &provider.Request{Messages: []provider.Message{provider.UserText("q"), res.Message(),
		provider.ToolResults(provider.ToolResult{CallID: acc.calls[0].ID, Content: "18C"}, provider.ToolResult{CallID: acc.calls[1].ID, Content: "noon"})}}
	contents, err := a.contents(req, "m")
	if err != nil {
		t.Fatal(err)
	}
	model, results := contents[1], contents[2]
	if fc := model.Parts[0].FunctionCall; fc.ID != "" || fc.Name != "get_weather" || string(model.Parts[0].ThoughtSignature) != "\x01\x02\x03" {
		t.Errorf("call sent back as %+v sig %v", fc, model.Parts[0].ThoughtSignature)
	}
	for i, name := range []string{"get_weather", "get_time"} {
		fr := results.Parts[i].FunctionResponse
		if fr.ID != "" || fr.Name != name {
			t.Errorf("result %d sent as %+v", i, fr)
		}
	}
	b, _ := json.Marshal(results.Parts[0].FunctionResponse.Response)
	if string(b) != `{"result":"18C"}` {
		t.Errorf("response = %s", b)
	}
	// The next turn's call to the same tool gets another id: a client
	// keys its tool results by id across the whole conversation.
	var again accumulator
	if err := again.add(&generateResponse{Candidates: []*candidate{{Content: &content{Role: "model", Parts: []*part{
		{FunctionCall: &functionCall{Name: "get_weather"}},
	}}}}}); err != nil {
		t.Fatal(err)
	}
	if id := again.calls[0].ID; id == acc.calls[0].ID || id == acc.calls[1].ID {
		t.Errorf("a later turn's call reuses id %q", id)
	}
}

// Gemini 3 refuses a turn's first function call without a thought
// signature; one that has none goes with the documented value that skips
// the check. Earlier models get no signature made up.
func TestMissingSignatureSkipsTheCheckOnGemini3(t *testing.T) {
	a := &Adapter{base: adapterkit.Base{Name: "g", Now: time.Now}}
	req := &provider.Request{Messages: []provider.Message{provider.UserText("q"),
		{Role: provider.RoleAssistant, Parts: []provider.Part{
			{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{}`)}},
			{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "c2", Name: "f", Arguments: json.RawMessage(`{}`)}},
		}},
		provider.ToolResults(provider.ToolResult{CallID: "c1", Content: "a"}, provider.ToolResult{CallID: "c2", Content: "b"})}}
	for model, want := range map[string]string{"gemini-3.1-pro-preview": "skip_thought_signature_validator", "gemini-2.5-flash": ""} {
		contents, err := a.contents(req, model)
		if err != nil {
			t.Fatal(err)
		}
		parts := contents[1].Parts
		if string(parts[0].ThoughtSignature) != want || len(parts[1].ThoughtSignature) != 0 {
			t.Errorf("%s: signatures %q, %q; want %q on the first call only", model, parts[0].ThoughtSignature, parts[1].ThoughtSignature, want)
		}
	}
}
