package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// streamModels returns every model a streamed answer names, by where.
func streamModels(t *testing.T, p gmProto, a gmAnswer) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ev := range a.events {
		if ev.data == "[DONE]" {
			continue
		}
		var keys []string
		switch p.name {
		case "chat":
			keys = []string{"model"}
		case "responses":
			keys = []string{"response", "model"}
		case "messages":
			keys = []string{"message", "model"}
		}
		if m, ok := jsonPath([]byte(ev.data), keys...); ok {
			out[p.name+" "+ev.name] = m
		}
	}
	if len(out) == 0 {
		t.Errorf("the %s stream names no model: %+v", p.name, a.events)
	}
	return out
}

// A stream names the model that served, as the unary answer does: in the
// X-CortexBuild-Model header and in every event that carries a model,
// whichever vendor served (the OpenAI fake answers a dated snapshot of the
// model asked for). A Messages stream's message_start carries the input
// count the provider reported before the answer.
func TestStreamsNameTheServedModel(t *testing.T) {
	for _, up := range []string{"claude", "gpt"} {
		for _, p := range gmProtos {
			t.Run(up+"/"+p.name, func(t *testing.T) {
				w := newWorld(t, serveOn(up), translating)
				text := "Four words, no more."
				for range 2 {
					w.anth.Enqueue(anthropicfake.Reply{Text: text, Usage: anthropicfake.Usage{Input: 1234, Output: 5}})
					w.oai.Enqueue(openaifake.Reply{Text: text, Usage: openaifake.Usage{Prompt: 1234, Completion: 5}})
				}
				unary := p.call(t, w, "T1", false)
				p.answered(t, unary)
				served := unary.header.Get(gateway.HeaderModel)
				body := "model"
				if m, _ := jsonPath(unary.body, "model"); m != served || served == "" {
					t.Fatalf("unary: header %q, body model %q", served, m)
				}
				if up == "gpt" && served != "gpt-5-mini-2025-08-07" {
					t.Errorf("unary answer names %q; the fake served the snapshot gpt-5-mini-2025-08-07", served)
				}
				stream := p.call(t, w, "T1", true)
				p.answered(t, stream)
				if h := stream.header.Get(gateway.HeaderModel); h != served {
					t.Errorf("stream header %s %q; the unary answer's %q", gateway.HeaderModel, h, served)
				}
				for where, m := range streamModels(t, p, stream) {
					if m != served {
						t.Errorf("%s names %s %q; the unary answer %q", where, body, m, served)
					}
				}
				if p.name != "messages" || up != "claude" {
					return
				}
				var start struct {
					Message struct {
						Usage struct {
							InputTokens int64 `json:"input_tokens"`
						} `json:"usage"`
					} `json:"message"`
				}
				if err := json.Unmarshal([]byte(stream.events[0].data), &start); err != nil || stream.events[0].name != "message_start" {
					t.Fatalf("first event %+v (%v)", stream.events[0], err)
				}
				if got := start.Message.Usage.InputTokens; got != 1234 {
					t.Errorf("message_start usage.input_tokens = %d; the provider reported 1234", got)
				}
			})
		}
	}
}
