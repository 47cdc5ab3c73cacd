package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// FuzzDecode posts arbitrary bodies to /v1/chat/completions (openai) and
// /v1/messages (anthropic): the gateway answers 200 or a 4xx error in the
// protocol's own shape, never a 5xx, never a panic.
func FuzzDecode(f *testing.F) {
	seeds := []struct {
		anthropic bool
		body      string
	}{
		{false, `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"}]}`},
		{false, `{"model":"cheap","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":50}`},
		{false, `{"model":"pinned-gpt","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto"}`},
		{false, `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`},
		{false, `{"model":"nope","messages":[]}`},
		{false, `{"messages":"hi","temperature":"hot"}`},
		{false, `[]`},
		{false, ``},
		{true, `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
		{true, `{"model":"cheap","max_tokens":64,"stream":true,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{true, `{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"sunny"}]}]}`},
		{true, `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"no max_tokens"}]}`},
		{true, `{"max_tokens":-1,"messages":[{"role":"robot"}]}`},
		{true, `null`},
	}
	for i, s := range seeds {
		f.Add(s.anthropic, []byte(s.body))
		providertest.WriteSeeds(f, fmt.Sprintf("seed-%d", i), s.anthropic, []byte(s.body))
	}
	w := newWorld(f)
	client := &http.Client{}
	f.Fuzz(func(t *testing.T, anthropic bool, body []byte) {
		path := "/v1/chat/completions"
		if anthropic {
			path = "/v1/messages"
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, w.url+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.key)
		req.Header.Set("Content-Type", "application/json")
		if anthropic {
			req.Header.Set("anthropic-version", "2023-06-01")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			return
		case resp.StatusCode < 400 || resp.StatusCode >= 500:
			t.Fatalf("%s answered %d to %q:\n%s", path, resp.StatusCode, body, out)
		}
		var shape struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &shape); err != nil {
			t.Fatalf("%s %d: error body is not JSON: %v\n%s", path, resp.StatusCode, err, out)
		}
		if shape.Error.Message == "" || shape.Error.Type == "" || (anthropic && shape.Type != "error") {
			t.Errorf("%s %d: error body not in the protocol's shape:\n%s", path, resp.StatusCode, out)
		}
		if strings.Contains(string(out), w.key) {
			t.Errorf("error body echoes the client key:\n%s", out)
		}
	})
}
