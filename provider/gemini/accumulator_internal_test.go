package gemini

import (
	"time"

	"encoding/json"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"

	"google.golang.org/genai"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The Developer API often sends function calls without ids: the adapter
// makes ids up so tool results can refer to them, and never sends the
// made-up ids back.
func TestSyntheticCallIDsAreNotSentBack(t *testing.T) {
	var acc accumulator
	err := acc.add(&genai.GenerateContentResponse{Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonStop, Content: &genai.Content{Role: "model", Parts: []*genai.Part{
		{FunctionCall: &genai.FunctionCall{Name: "get_weather", Args: map[string]any{"city": "Paris"}}, ThoughtSignature: []byte{1, 2, 3}},
		{FunctionCall: &genai.FunctionCall{Name: "get_time"}},
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
}
