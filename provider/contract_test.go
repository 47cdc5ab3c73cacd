package provider

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Sampling settings are best effort (named when a model drops them),
// a response format is a requirement, and both are checked for range and
// shape before anything is sent.
func TestSamplingAndFormatContract(t *testing.T) {
	temp, topP, topK, seed := 0.5, 0.9, 40, int64(1)
	r := Request{Prompt: "hi", Temperature: &temp, TopP: &topP, TopK: &topK, Seed: &seed}
	if got := r.Unhonoured(0); !slices.Equal(got, []string{"temperature", "top_p", "top_k", "seed"}) {
		t.Errorf("Unhonoured(none) = %v", got)
	}
	if got := r.Unhonoured(NewCapabilitySet(CapSampling, CapSeed)); !slices.Equal(got, []string{"top_k"}) {
		t.Errorf("Unhonoured(sampling, seed) = %v", got)
	}
	if got := r.SamplingCapabilities(); got != NewCapabilitySet(CapSampling, CapTopK, CapSeed) {
		t.Errorf("SamplingCapabilities = %v", got)
	}
	if r.RequiredCapabilities().Has(CapSampling) {
		t.Error("sampling settings must never be required for routing")
	}
	r.ResponseFormat = &ResponseFormat{Schema: json.RawMessage(`{"type":"object"}`)}
	if !r.RequiredCapabilities().Has(CapStructuredOutput) {
		t.Error("a response format does not require structured_output")
	}
	if r.ResponseFormat.EffectiveName() != "response" {
		t.Errorf("default format name = %q", r.ResponseFormat.EffectiveName())
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*Request)
		want string
	}{
		{func(r *Request) { v := 2.1; r.Temperature = &v }, "temperature must be between 0 and 2, got 2.1"},
		{func(r *Request) { v := -0.5; r.TopP = &v }, "top_p must be between 0 and 1, got -0.5"},
		{func(r *Request) { v := 0; r.TopK = &v }, "top_k must be at least 1, got 0"},
		{func(r *Request) { r.Stop = []string{"a", ""} }, "stop[1] is empty"},
		{func(r *Request) { r.ResponseFormat.Name = "has space" }, `response_format.name "has space"`},
		{func(r *Request) { r.ResponseFormat.Schema = json.RawMessage(`[]`) }, "response_format.schema must be a JSON Schema object"},
	} {
		c := r
		f := *r.ResponseFormat
		c.ResponseFormat = &f
		tc.edit(&c)
		err := c.Validate()
		if KindOf(err) != KindBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want a bad request containing %q", err, tc.want)
		}
	}
}

// A reasoning setting is best effort like sampling, is checked before
// anything is sent, and an effort and a budget stand for each other at a
// provider that takes only one.
func TestReasoningContract(t *testing.T) {
	r := Request{Prompt: "hi", Reasoning: &Reasoning{Effort: EffortHigh}}
	if got := r.Unhonoured(NewCapabilitySet(CapSampling)); !slices.Equal(got, []string{"reasoning"}) {
		t.Errorf("Unhonoured(sampling) = %v", got)
	}
	if got := r.Unhonoured(NewCapabilitySet(CapReasoning)); len(got) != 0 {
		t.Errorf("Unhonoured(reasoning) = %v", got)
	}
	if !r.SamplingCapabilities().Has(CapReasoning) || r.RequiredCapabilities().Has(CapReasoning) {
		t.Error("reasoning must be best effort: in SamplingCapabilities, never required for routing")
	}
	for _, tc := range []struct {
		r      Reasoning
		effort ReasoningEffort
		budget int
	}{
		{Reasoning{Effort: EffortLow}, EffortLow, 1024},
		{Reasoning{Effort: EffortMedium}, EffortMedium, 8192},
		{Reasoning{Effort: EffortHigh}, EffortHigh, 24576},
		{Reasoning{Budget: 2000}, EffortLow, 2000},
		{Reasoning{Budget: 10000}, EffortMedium, 10000},
		{Reasoning{Budget: 20000}, EffortHigh, 20000},
		{Reasoning{}, "", 0},
	} {
		if e, b := tc.r.EffectiveEffort(), tc.r.EffectiveBudget(); e != tc.effort || b != tc.budget {
			t.Errorf("%+v: effective effort %q budget %d, want %q %d", tc.r, e, b, tc.effort, tc.budget)
		}
	}
	for _, tc := range []struct {
		r    Reasoning
		max  int
		want string
	}{
		{Reasoning{Effort: "max"}, 0, `reasoning.effort must be "low", "medium" or "high", got "max"`},
		{Reasoning{Budget: 500}, 0, "reasoning.budget_tokens must be at least 1024, got 500"},
		{Reasoning{Budget: 4096}, 0, "reasoning.budget_tokens (4096) must be below max_tokens (4096)"},
		{Reasoning{Budget: 2048}, 2000, "reasoning.budget_tokens (2048) must be below max_tokens (2000)"},
	} {
		c := Request{Prompt: "hi", MaxTokens: tc.max, Reasoning: &tc.r}
		if err := c.Validate(); KindOf(err) != KindBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want a bad request containing %q", tc.r, err, tc.want)
		}
	}
}
