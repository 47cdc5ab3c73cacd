package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway"
)

// The tool settings each protocol has reach the provider that serves the
// call in its own terms: OpenAI's parallel_tool_calls: false and strict
// functions (Chat Completions and Responses) and Anthropic's
// tool_choice.disable_parallel_tool_use and strict tools, to either
// vendor's fake; a message's name, which only OpenAI has, is named as
// ignored.
func TestToolSettingsReachEitherProvider(t *testing.T) {
	const schema = `{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`
	requests := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"claude-sonnet-4-6","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":` + schema + `}}],"messages":[{"role":"user","content":"hi","name":"alice"}]}`},
		{"/v1/responses", `{"model":"claude-sonnet-4-6","parallel_tool_calls":false,"tools":[{"type":"function","name":"f","strict":true,"parameters":` + schema + `}],"input":"hi"}`},
		{"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":50,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"tools":[{"name":"f","strict":true,"input_schema":` + schema + `}],"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, upstream := range []string{"claude", "gpt"} {
		w := newWorld(t, serveOn(upstream), translating)
		for _, c := range requests {
			resp, m := rawPost(t, w, w.key, c.path, c.body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s via %s: %d %v", c.path, upstream, resp.StatusCode, m)
			}
			ignored := resp.Header.Get(gateway.HeaderIgnored)
			if strings.Contains(ignored, "parallel") || strings.Contains(ignored, "strict") {
				t.Errorf("%s: %s = %q", c.path, gateway.HeaderIgnored, ignored)
			}
			if c.path == "/v1/chat/completions" && ignored != "messages[0].name" {
				t.Errorf("chat: %s = %q, want messages[0].name", gateway.HeaderIgnored, ignored)
			}
			if c.path == "/v1/responses" && m["parallel_tool_calls"] != false {
				t.Errorf("responses: parallel_tool_calls echoed as %v", m["parallel_tool_calls"])
			}
			if upstream == "claude" {
				reqs := w.anth.Requests()
				var sent struct {
					ToolChoice struct {
						Type                   string
						DisableParallelToolUse bool `json:"disable_parallel_tool_use"`
					} `json:"tool_choice"`
					Tools []struct{ Strict bool }
				}
				if err := reqs[len(reqs)-1].Decode(&sent); err != nil {
					t.Fatal(err)
				}
				if !sent.ToolChoice.DisableParallelToolUse || len(sent.Tools) != 1 || !sent.Tools[0].Strict {
					t.Errorf("%s to Anthropic: %s", c.path, reqs[len(reqs)-1].Body)
				}
				continue
			}
			reqs := w.oai.Requests()
			var sent struct {
				ParallelToolCalls *bool `json:"parallel_tool_calls"`
				Tools             []struct {
					Function struct{ Strict bool }
				}
			}
			if err := json.Unmarshal(reqs[len(reqs)-1].Body, &sent); err != nil {
				t.Fatal(err)
			}
			if sent.ParallelToolCalls == nil || *sent.ParallelToolCalls || len(sent.Tools) != 1 || !sent.Tools[0].Function.Strict {
				t.Errorf("%s to OpenAI: %s", c.path, reqs[len(reqs)-1].Body)
			}
		}
	}
}

// The client's anthropic-beta values go to an Anthropic provider as it
// sent them, every one (an open list: a beta the gateway has never heard
// of included), and nothing is named as ignored; on a route to another
// vendor, the values not on the gateway's allow-list are named in
// X-CortexBuild-Ignored-Params. Never refused, strict_params or not
// (hosts send them on every request).
func TestAnthropicBetaHeader(t *testing.T) {
	for _, vendor := range []string{"claude", "gpt"} {
		w := newWorld(t, serveOn(vendor), withGateway(func(o *gateway.Options) { o.StrictParams = true }))
		req, _ := http.NewRequestWithContext(ctxT(t), "POST", w.url+"/v1/messages",
			strings.NewReader(`{"model":"claude-sonnet-4-6","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+w.key)
		req.Header.Add("Anthropic-Beta", "claude-code-20250219,context-1m-2025-08-07")
		req.Header.Add("Anthropic-Beta", "fine-grained-tool-streaming-2025-05-14, interleaved-thinking-2025-05-14")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d with strict_params", vendor, resp.StatusCode)
		}
		ignored := resp.Header.Get(gateway.HeaderIgnored)
		if vendor == "gpt" {
			if ignored != "anthropic-beta=claude-code-20250219, anthropic-beta=interleaved-thinking-2025-05-14" {
				t.Errorf("%s: %s = %q", vendor, gateway.HeaderIgnored, ignored)
			}
			continue
		}
		if ignored != "" {
			t.Errorf("%s: %s = %q on a relayed request", vendor, gateway.HeaderIgnored, ignored)
		}
		if got := w.anth.Requests()[0].Header.Values("Anthropic-Beta"); strings.Join(got, ",") != "claude-code-20250219,context-1m-2025-08-07,fine-grained-tool-streaming-2025-05-14, interleaved-thinking-2025-05-14" {
			t.Errorf("upstream anthropic-beta = %q; want every value as sent", got)
		}
	}
}
