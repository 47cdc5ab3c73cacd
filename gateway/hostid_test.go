package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/agentmark"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// served records what each call was served as: the orchestrator call the
// gateway made of it.
type served struct {
	mu    sync.Mutex
	calls []orchestrator.Call
}

func (s *served) prepare(_ context.Context, c *orchestrator.Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, *c)
	return nil
}

func (s *served) last(t *testing.T) orchestrator.Call {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		t.Fatal("no call reached the orchestrator")
	}
	return s.calls[len(s.calls)-1]
}

func hostWorld(t *testing.T, models map[string]gateway.Target) (*world, *served) {
	s := &served{}
	w := newWorld(t, withGateway(func(o *gateway.Options) {
		o.Prepare = s.prepare
		if models != nil {
			o.Models = models
		}
	}))
	return w, s
}

// post sends body to path with the world's key and returns the status, the
// response headers and the body.
func (w *world) post(t *testing.T, path, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	return w.postAs(t, w.key, path, body, hdr...)
}

// postAs is post with key, and hdr as name, value pairs.
func (w *world) postAs(t *testing.T, key, path, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := w.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The model names the pinned hosts send by default are served by family
// without a gateway.models entry; a configured pattern or exact name comes
// first, and an unknown name says how to map it.
func TestHostModelNamesServedByFamily(t *testing.T) {
	w, s := hostWorld(t, map[string]gateway.Target{
		"claude-haiku-*":    {Tier: provider.TierBalanced}, // replaces the default family
		"claude-opus-5-5":   {Agent: "planner"},            // an exact name beats every pattern
		"gpt-6.1-*-mini":    {Tier: provider.TierFastCheap},
		"GPT-5 (copilot)":   {Agent: "builder"}, // a display name, spaces and all
		"claude-sonnet-4-6": {Agent: "builder"},
	})
	for _, c := range []struct {
		model string
		agent string
		tier  provider.Tier
	}{
		{"claude-opus-5-5", "planner", ""},
		{"claude-opus-4-8", "", provider.TierReasoningHeavy},
		{"claude-sonnet-5-5", "", provider.TierBalanced},
		{"claude-sonnet-5", "", provider.TierBalanced},
		{"claude-haiku-5-5", "", provider.TierBalanced},
		{"gpt-6.1-astra", "", provider.TierReasoningHeavy},
		{"gpt-6.1-sol", "", provider.TierBalanced},
		{"gpt-6.1-luna", "", provider.TierFastCheap},
		{"gpt-5.5", "", provider.TierBalanced},
		{"gpt-5.3-codex", "", provider.TierBalanced},
		{"gpt-6.1-sol-mini", "", provider.TierFastCheap}, // the configured pattern, not gpt-5* or gpt-*-sol
		{"GPT-5 (copilot)", "builder", ""},
	} {
		st, _, body := w.post(t, "/v1/messages", `{"model":`+jsonQuote(c.model)+`,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
		if st != http.StatusOK {
			t.Errorf("%s: %d %s", c.model, st, body)
			continue
		}
		got := s.last(t)
		if got.Agent != c.agent || got.Request.Tier != c.tier {
			t.Errorf("%s served as agent %q tier %q, want %q %q", c.model, got.Agent, got.Request.Tier, c.agent, c.tier)
		}
	}
	st, _, body := w.post(t, "/v1/chat/completions", `{"model":"llama-99","messages":[{"role":"user","content":"hi"}]}`)
	if st != http.StatusBadRequest || !strings.Contains(body, `gateway.models in llm-config.yaml (e.g. \"llama-99\": {tier: balanced})`) {
		t.Errorf("unknown model: %d %s", st, body)
	}
	// A call is refused with a 400 the hosts print; asking for the model
	// itself is a 404, a resource that is not there.
	_, err := w.openai(w.key).Models.Get(ctxT(t), "llama-99")
	if e := openAIErr(t, err); e.StatusCode != http.StatusNotFound || e.Code != "model_not_found" {
		t.Errorf("GET /v1/models/llama-99 = %d %q", e.StatusCode, e.Code)
	}
}

// A rendered persona's marker line names its agent whatever model name the
// host sends (a family alias, a display name, a vendor id), through each
// protocol, and wins over the session-wide agent header; the response says
// which agent served.
func TestPersonaMarkerNamesTheAgent(t *testing.T) {
	w, s := hostWorld(t, nil)
	persona := "You are a Claude agent.\n\n" + agentmark.Line("critic") + "\nReview the plan."
	cases := []struct {
		name, path, body string
	}{
		{"claude code subagent", "/v1/messages", `{"model":"claude-sonnet-5-5","max_tokens":10,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_is_subagent=true"},{"type":"text","text":` + jsonQuote(persona) + `}],"messages":[{"role":"user","content":"review"}]}`},
		{"copilot subagent", "/v1/chat/completions", `{"model":"GPT-5 (copilot)","messages":[{"role":"system","content":` + jsonQuote(persona) + `},{"role":"user","content":"review"}]}`},
		{"codex role", "/v1/responses", `{"model":"gpt-6.1-sol","store":false,"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":` + jsonQuote(persona) + `}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"review"}]}]}`},
	}
	for _, c := range cases {
		st, h, body := w.post(t, c.path, c.body, gateway.HeaderAgent, "builder")
		if st != http.StatusOK {
			t.Errorf("%s: %d %s", c.name, st, body)
			continue
		}
		got := s.last(t)
		if got.Agent != "critic" || got.Request.Tier != "" {
			t.Errorf("%s: served as agent %q tier %q, want critic on its own tier", c.name, got.Agent, got.Request.Tier)
		}
		if h.Get(gateway.HeaderAgent) != "critic" {
			t.Errorf("%s: %s = %q", c.name, gateway.HeaderAgent, h.Get(gateway.HeaderAgent))
		}
	}
	// Without a marker the header names the agent, which runs on its own
	// tier whatever family the host's model name is of; a configured name
	// still sets the tier.
	for _, model := range []string{"claude-opus-5-5", "claude-haiku-5-5", "gpt-6.2-sol"} {
		st, h, body := w.post(t, "/v1/messages", `{"model":`+jsonQuote(model)+`,"max_tokens":10,"system":"You are Claude Code.","messages":[{"role":"user","content":"plan"}]}`, gateway.HeaderAgent, "planner")
		if got := s.last(t); st != http.StatusOK || got.Agent != "planner" || got.Request.Tier != "" || h.Get(gateway.HeaderAgent) != "planner" {
			t.Errorf("main session on %s: %d %s, served as %q %q", model, st, body, got.Agent, got.Request.Tier)
		}
	}
	st, _, body := w.post(t, "/v1/messages", `{"model":"cheap","max_tokens":10,"messages":[{"role":"user","content":"plan"}]}`, gateway.HeaderAgent, "planner")
	if got := s.last(t); st != http.StatusOK || got.Agent != "planner" || got.Request.Tier != provider.TierFastCheap {
		t.Errorf("configured tier with an agent header: %d %s, served as %q %q", st, body, got.Agent, got.Request.Tier)
	}
	// A marker in a user turn (a pasted persona) names nothing.
	st, _, _ = w.post(t, "/v1/messages", `{"model":"claude-haiku-5-5","max_tokens":10,"messages":[{"role":"user","content":`+jsonQuote(persona)+`}]}`)
	if got := s.last(t); st != http.StatusOK || got.Agent != "" {
		t.Errorf("a marker in a user message made the call agent %q", got.Agent)
	}
}

// A marker naming an agent the project lacks, or two agents, is refused
// with what to do; a key bound to an agent cannot be used by another
// agent's persona.
func TestPersonaMarkerRefusals(t *testing.T) {
	w, _ := hostWorld(t, nil)
	msg := func(system string) string {
		return `{"model":"claude-sonnet-5-5","max_tokens":10,"system":` + jsonQuote(system) + `,"messages":[{"role":"user","content":"hi"}]}`
	}
	st, _, body := w.post(t, "/v1/messages", msg(agentmark.Line("critc")+"\nReview."))
	if st != http.StatusBadRequest || !strings.Contains(body, `agent \"critc\"`) || !strings.Contains(body, "cortexbuild render") {
		t.Errorf("unknown marked agent: %d %s", st, body)
	}
	st, _, body = w.post(t, "/v1/messages", msg(agentmark.Line("critic")+"\n"+agentmark.Line("builder")))
	if st != http.StatusBadRequest || !strings.Contains(body, "critic") || !strings.Contains(body, "builder") {
		t.Errorf("two marked agents: %d %s", st, body)
	}
	bound, _, err := w.keys.Create(gateway.KeySpec{Name: "builder-only", Project: "demo", Agent: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	w.key = bound
	st, _, body = w.post(t, "/v1/messages", msg(agentmark.Line("critic")))
	if st != http.StatusBadRequest || !strings.Contains(body, "bound to agent builder; the system prompt is agent critic's persona") {
		t.Errorf("bound key, other agent's persona: %d %s", st, body)
	}
	// Its own persona, or a host's own model name, stays in scope: the
	// family's tier gives way to the agent's.
	for _, system := range []string{agentmark.Line("builder"), "You are Claude Code."} {
		st, _, body = w.post(t, "/v1/messages", msg(system))
		if st != http.StatusOK {
			t.Errorf("bound key, %q: %d %s", system, st, body)
		}
	}
}
