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
