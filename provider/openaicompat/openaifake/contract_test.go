package openaifake

import (
	"encoding/json"
	"strings"
	"testing"
)

// The platform refuses what the real API refuses for sampling and
// response formats, with its error fields.
func TestSamplingAndFormatValidation(t *testing.T) {
	const closed = `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	tests := []struct {
		name, model, extra string
		param, code, msg   string
	}{
		{"temperature range", "gpt-4.1", `"temperature":2.5`, "temperature", "decimal_above_max_value", "Expected a value <= 2"},
		{"top_p range", "gpt-4.1", `"top_p":-0.1`, "top_p", "decimal_below_min_value", "Expected a value >= 0"},
		{"reasoning temperature", "gpt-5-mini", `"temperature":0.2`, "temperature", CodeUnsupportedValue, "Only the default (1) value is supported"},
		{"five stops", "gpt-4.1", `"stop":["a","b","c","d","e"]`, "stop", "array_above_max_length", "maximum length 4"},
		{"top_k", "gpt-4.1", `"top_k":5`, "", "", "Unrecognized request argument supplied: top_k"},
		{"reasoning effort on a chat model", "gpt-4.1", `"reasoning_effort":"low"`, "reasoning_effort", CodeUnsupportedParameter, "'reasoning_effort' is not supported with this model"},
		{"unknown reasoning effort", "gpt-5-mini", `"reasoning_effort":"max"`, "reasoning_effort", "invalid_value", "Invalid value: 'max'"},
		{"json_schema without name", "gpt-4.1", `"response_format":{"type":"json_schema","json_schema":{"schema":` + closed + `}}`, "response_format.json_schema.name", CodeMissingRequiredParam, ""},
		{"strict open object", "gpt-4.1", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}`,
			"response_format", "invalid_json_schema", "Invalid schema for response_format 'x': In context=(), 'additionalProperties' is required to be supplied and to be false."},
		{"strict optional property", "gpt-4.1", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}}`,
			"response_format", "invalid_json_schema", "Missing 'a'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := start(t)
			resp, body := post(t, fake, chatBody(tt.model, tt.extra))
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if resp.StatusCode != 400 || json.Unmarshal(body, &e) != nil {
				t.Fatalf("status %d body %s, want a 400 error", resp.StatusCode, body)
			}
			if p := e.Error.Param; tt.param != "" && (p == nil || *p != tt.param) {
				t.Errorf("param = %v, want %q", p, tt.param)
			}
			if c := e.Error.Code; tt.code != "" && (c == nil || *c != tt.code) {
				t.Errorf("code = %v, want %q", c, tt.code)
			}
			if !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("message %q lacks %q", e.Error.Message, tt.msg)
			}
		})
	}
	// A strict closed schema is accepted and answered with matching JSON.
	fake := start(t)
	resp, body := post(t, fake, chatBody("gpt-4.1", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":`+closed+`}}`))
	var ok struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &ok) != nil || len(ok.Choices) != 1 || ok.Choices[0].Message.Content != `{"a":"text"}` {
		t.Errorf("closed schema: %d %s", resp.StatusCode, body)
	}
}
