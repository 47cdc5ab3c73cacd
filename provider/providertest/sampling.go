package providertest

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Sampling is the sampling part of a [Captured] request, as the provider
// received it: nil (or empty) when the request did not carry the field.
type Sampling struct {
	Temperature *float64
	TopP        *float64
	TopK        *int
	Seed        *int64
	Stop        []string
}

// modelCapabilities returns what the adapter says model can do.
func modelCapabilities(a provider.Adapter, model string) provider.CapabilitySet {
	if mc, ok := a.(provider.ModelCapabler); ok {
		return mc.ModelCapabilities(model)
	}
	return a.Capabilities()
}

// samplingSent: every sampling setting reaches the provider under its own
// name when the model's capabilities say it honours it, and is not sent at
// all when they say it does not (the call still succeeds); stop sequences
// always reach it. Streamed and unary calls send the same.
func samplingSent(t *testing.T, e *Env) {
	temp, topP, topK, seed := 0.5, 0.875, 40, int64(1234)
	stop := []string{"END", "\n\nHuman:"}
	for _, stream := range []bool{false, true} {
		e.Fake.Script(Reply{Text: "ok", Usage: provider.Usage{InputTokens: 10, OutputTokens: 1}})
		req := &provider.Request{Prompt: "hi", Temperature: &temp, TopP: &topP, TopK: &topK, Seed: &seed, Stop: stop}
		answer(t, e.Adapter, stream, req)
		got := e.Fake.Last().Sampling
		dropped := req.Unhonoured(modelCapabilities(e.Adapter, e.Model))
		checkFloat(t, "temperature", got.Temperature, temp, !slices.Contains(dropped, "temperature"))
		checkFloat(t, "top_p", got.TopP, topP, !slices.Contains(dropped, "top_p"))
		switch honoured := !slices.Contains(dropped, "top_k"); {
		case honoured && (got.TopK == nil || *got.TopK != topK):
			t.Errorf("stream %v: top_k sent as %v, want %d", stream, got.TopK, topK)
		case !honoured && got.TopK != nil:
			t.Errorf("stream %v: top_k sent (%d) to a model without the top_k capability", stream, *got.TopK)
		}
		switch honoured := !slices.Contains(dropped, "seed"); {
		case honoured && (got.Seed == nil || *got.Seed != seed):
			t.Errorf("stream %v: seed sent as %v, want %d", stream, got.Seed, seed)
		case !honoured && got.Seed != nil:
			t.Errorf("stream %v: seed sent (%d) to a model without the seed capability", stream, *got.Seed)
		}
		if !slices.Equal(got.Stop, stop) {
			t.Errorf("stream %v: stop sequences sent as %q, want %q", stream, got.Stop, stop)
		}
	}
	// An out-of-range setting never leaves.
	hot := 2.5
	if _, err := e.Adapter.Invoke(ctx(t), &provider.Request{Prompt: "hi", Temperature: &hot, MaxTokens: 77}); provider.KindOf(err) != provider.KindBadRequest {
		t.Errorf("temperature 2.5: error %v, want bad request", err)
	}
	if e.Fake.Last().MaxTokens == 77 {
		t.Error("a request with temperature 2.5 reached the provider")
	}
}

func checkFloat(t *testing.T, name string, got *float64, want float64, honoured bool) {
	t.Helper()
	switch {
	case honoured && (got == nil || *got != want):
		t.Errorf("%s sent as %v, want %v", name, got, want)
	case !honoured && got != nil:
		t.Errorf("%s sent (%v) to a model without the sampling capability", name, *got)
	}
}

// reasoningSent: a reasoning setting reaches the provider under its own
// name when the model has the reasoning capability, and is not sent at all
// when it has not (the call still succeeds). What arrives is the effort or
// the budget asked for, or where the provider takes only the other, the
// one [provider.Reasoning.EffectiveEffort] or EffectiveBudget derives;
// streamed and unary calls send the same. A budget out of range never
// leaves.
func reasoningSent(t *testing.T, e *Env) {
	honoured := modelCapabilities(e.Adapter, e.Model).Has(provider.CapReasoning)
	for _, r := range []provider.Reasoning{
		{Effort: provider.EffortHigh},
		{Budget: 2048},
		{Effort: provider.EffortLow, Budget: 1500},
	} {
		for _, stream := range []bool{false, true} {
			e.Fake.Script(Reply{Text: "ok", Usage: provider.Usage{InputTokens: 10, OutputTokens: 1}})
			answer(t, e.Adapter, stream, &provider.Request{Prompt: "hi", MaxTokens: 4096, Reasoning: &r})
			got := e.Fake.Last().Reasoning
			switch {
			case !honoured && got != nil:
				t.Errorf("%+v stream %v: reasoning sent (%+v) to a model without the reasoning capability", r, stream, *got)
			case !honoured:
			case got == nil || got.Effort == "" && got.Budget == 0:
				t.Errorf("%+v stream %v: no reasoning setting reached the provider (got %+v)", r, stream, got)
			case got.Effort != "" && got.Effort != r.EffectiveEffort():
				t.Errorf("%+v stream %v: effort sent as %q, want %q", r, stream, got.Effort, r.EffectiveEffort())
			case got.Budget != 0 && got.Budget != r.EffectiveBudget():
				t.Errorf("%+v stream %v: budget sent as %d, want %d", r, stream, got.Budget, r.EffectiveBudget())
			}
		}
	}
	small := provider.Reasoning{Budget: 512}
	if _, err := e.Adapter.Invoke(ctx(t), &provider.Request{Prompt: "hi", Reasoning: &small, MaxTokens: 77}); provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "budget_tokens") {
		t.Errorf("budget 512: error %v, want a bad request naming budget_tokens", err)
	}
	if e.Fake.Last().MaxTokens == 77 {
		t.Error("a request with a 512-token budget reached the provider")
	}
}

// streamReasoning: reasoning the provider returns reaches the caller as a
// reasoning part of the answer, unary and streamed; a stream carries it
// as Reasoning deltas before the answer's text, and the provider data it
// streams with it (a signature) is the reasoning part's Meta.
func streamReasoning(t *testing.T, e *Env) {
	if rf, ok := e.Fake.(ReasoningFake); !ok || !rf.ReturnsReasoning() {
		t.Skip("the provider returns no reasoning text")
	}
	const thought = "The user greets me; a short answer will do."
	reply := Reply{Reasoning: thought, Text: "Hello!", Usage: provider.Usage{InputTokens: 10, OutputTokens: 20, ReasoningTokens: 12}}
	req := &provider.Request{Prompt: "hi", Reasoning: &provider.Reasoning{Effort: provider.EffortLow}}
	e.Fake.Script(reply)
	res, err := e.Adapter.Invoke(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	want := reasoningOf(res)
	if want == nil || want.Text != thought {
		t.Fatalf("unary: reasoning part %+v, want %q", want, thought)
	}
	e.Fake.Script(reply)
	s, err := e.Adapter.Stream(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var streamed strings.Builder
	var meta provider.Metadata
	for {
		c, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c.Text != "" && streamed.Len() == 0 {
			t.Error("answer text arrived before the reasoning")
		}
		streamed.WriteString(c.Reasoning)
		if c.ReasoningMeta != nil {
			meta = c.ReasoningMeta
		}
		if !c.Final {
			continue
		}
		got := reasoningOf(c.Result)
		if streamed.String() != thought || got == nil || got.Text != thought {
			t.Errorf("streamed reasoning %q, final part %+v; want %q", streamed.String(), got, thought)
		}
		if got != nil && len(got.Meta) > 0 && !reflect.DeepEqual(meta, got.Meta) {
			t.Errorf("streamed reasoning metadata %s, final part's %s", meta, got.Meta)
		}
		return
	}
}

// reasoningOf returns the first reasoning part of res, nil when none.
func reasoningOf(res *provider.Result) *provider.Part {
	if res == nil {
		return nil
	}
	for i := range res.Parts {
		if res.Parts[i].Type == provider.PartReasoning {
			return &res.Parts[i]
		}
	}
	return nil
}

// structuredOutput: a response format reaches the provider as its own
// schema field and the answer is JSON matching it, streamed or not; a model
// without structured_output refuses the request before sending it.
func structuredOutput(t *testing.T, e *Env) {
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","enum":["sun","rain"]}}},"required":["city","days","tags"],"additionalProperties":false}`)
	req := &provider.Request{Prompt: "Plan a trip", ResponseFormat: &provider.ResponseFormat{Name: "trip_plan", Schema: schema, Strict: true}}
	if !modelCapabilities(e.Adapter, e.Model).Has(provider.CapStructuredOutput) {
		before := len(e.Fake.Last().ResponseSchema)
		if _, err := e.Adapter.Invoke(ctx(t), req); provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), string(provider.CapStructuredOutput)) {
			t.Errorf("a model without structured_output: error %v, want a bad request naming the capability", err)
		}
		if len(e.Fake.Last().ResponseSchema) != before {
			t.Error("a request the model cannot honour reached the provider")
		}
		return
	}
	for _, stream := range []bool{false, true} {
		res := answer(t, e.Adapter, stream, req)
		var got struct {
			City *string  `json:"city"`
			Days *int     `json:"days"`
			Tags []string `json:"tags"`
		}
		dec := json.NewDecoder(strings.NewReader(res.Content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil || got.City == nil || got.Days == nil || len(got.Tags) == 0 || got.Tags[0] != "sun" {
			t.Errorf("stream %v: answer %q does not match the schema (%v)", stream, res.Content, err)
		}
		if sent := e.Fake.Last().ResponseSchema; !sameJSON(sent, schema) {
			t.Errorf("stream %v: schema sent as %s, want %s", stream, sent, schema)
		}
	}
}

// tinyPNG is a 1×1 PNG.
var tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// imageInput: an image part, inline and (where the provider fetches them)
// by URL, reaches the provider in its place among the turn's text, in the
// provider's own shape.
func imageInput(t *testing.T, e *Env) {
	if !modelCapabilities(e.Adapter, e.Model).Has(provider.CapVision) {
		t.Skipf("%s has no vision capability: routing never sends it images", e.Model)
	}
	inline := provider.Image{Data: tinyPNG, MediaType: "image/png"}
	msg := provider.Message{Role: provider.RoleUser, Parts: []provider.Part{
		{Type: provider.PartText, Text: "What is in this image?"},
		{Type: provider.PartImage, Image: &inline},
	}}
	for _, stream := range []bool{false, true} {
		answer(t, e.Adapter, stream, &provider.Request{Messages: []provider.Message{msg}})
		got := e.Fake.Last().Images
		if len(got) != 1 || string(got[0].Data) != string(tinyPNG) || got[0].MediaType != "image/png" || got[0].URL != "" {
			t.Errorf("stream %v: images sent as %+v, want the PNG inline", stream, got)
		}
	}
	byURL := provider.Image{URL: "https://example.com/cat.png"}
	msg.Parts[1].Image = &byURL
	res, err := e.Adapter.Invoke(ctx(t), &provider.Request{Messages: []provider.Message{msg}})
	if err != nil {
		// A provider that takes images only inline says so before sending.
		if provider.KindOf(err) != provider.KindBadRequest || !strings.Contains(err.Error(), "URL") {
			t.Errorf("image by URL: %v, want success or a bad request about the URL", err)
		}
		return
	}
	if got := e.Fake.Last().Images; res == nil || len(got) != 1 || got[0].URL != byURL.URL {
		t.Errorf("image by URL sent as %+v", got)
	}
}
