//go:build linux

package fleet_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
)

// signature makes a thought signature shaped like Gemini's (standard
// base64 of an opaque blob, starting "E").
func signature() string {
	b := make([]byte, 66)
	b[0], b[1] = 0x12, 64
	rand.Read(b[2:])
	return base64.StdEncoding.EncodeToString(b)
}

func sameSignature(a, b string) bool {
	x, err1 := base64.StdEncoding.DecodeString(a)
	y, err2 := base64.StdEncoding.DecodeString(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func tool(name string) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       name,
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})
}

// TestFleetGeminiToolLoopAcrossReplicas: a Gemini 3 tool loop of four
// turns (three tool calls, then the answer) with the official OpenAI SDK
// on Chat Completions through HAProxy, each turn on another replica than
// the one before (HAProxy names it in every answer). Gemini 3 requires
// every function call of the loop to come back with the thought signature
// it was issued with; an OpenAI client cannot carry it, so the replica
// that served a turn keeps it in Redis and the replica serving the next
// turn puts it back. The Gemini fake issues a signature of the test's
// own on each call and refuses a wrong one ("Corrupted thought
// signature."); the test checks that every later turn sent each earlier
// call upstream with exactly its signature, not a dummy, and without the
// call id the gateway made up for the client.
func TestFleetGeminiToolLoopAcrossReplicas(t *testing.T) {
	gem := geminifake.New(geminifake.WithAPIKey(upstreamKey))
	t.Cleanup(gem.Close)
	f := newFleet(t, 3, withGemini(gem))
	token, _ := f.createKey(0, "gemini")
	ctx := context.Background()
	client := openai.NewClient(ooption.WithBaseURL(f.lb+"/v1"), ooption.WithAPIKey(token), ooption.WithMaxRetries(0))
	tools := []openai.ChatCompletionToolUnionParam{tool("get_weather"), tool("get_time"), tool("get_forecast")}

	calls := []string{"get_weather", "get_time", "get_forecast"}
	sigs := make([]string, len(calls))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather, time and forecast in Paris?")}
	var servers []string
	for turn := range len(calls) + 1 {
		if turn < len(calls) {
			sigs[turn] = signature()
			gem.Enqueue(geminifake.Reply{OmitCallIDs: true, FunctionCalls: []geminifake.FunctionCall{
				{Name: calls[turn], Args: json.RawMessage(`{"city":"Paris"}`), ThoughtSignature: sigs[turn]}}})
		} else {
			gem.Enqueue(geminifake.TextReply("18C, 14:00, rain tomorrow."))
		}
		var res *http.Response
		cc, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gem/gemini-3.1-pro-preview", Messages: msgs, Tools: tools},
			ooption.WithResponseInto(&res))
		if err != nil {
			t.Fatalf("turn %d: %v", turn+1, err)
		}
		servers = append(servers, res.Header.Get(headerServer))
		if d := res.Header.Get("X-CortexBuild-Degraded"); d != "" {
			t.Errorf("turn %d: X-CortexBuild-Degraded: %s", turn+1, d)
		}
		m := cc.Choices[0].Message
		if turn == len(calls) {
			if m.Content != "18C, 14:00, rain tomorrow." {
				t.Errorf("last turn: %q", m.Content)
			}
			break
		}
		if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != calls[turn] {
			t.Fatalf("turn %d: tool calls %+v; want %s", turn+1, m.ToolCalls, calls[turn])
		}
		id := m.ToolCalls[0].ID
		msgs = append(msgs, m.ToParam(), openai.ToolMessage(fmt.Sprintf("result of %s", calls[turn]), id))
	}
	t.Logf("turns served by %v", servers)
	seen := map[string]bool{}
	for i, s := range servers {
		seen[s] = true
		if s == "" || (i > 0 && s == servers[i-1]) {
			t.Errorf("turn %d served by %q after %q; want another replica", i+1, s, servers[max(i-1, 0)])
		}
	}
	if len(seen) != 3 {
		t.Errorf("the loop went through %d replicas; want all 3", len(seen))
	}

	// Upstream: turn k (k ≥ 2) sent the calls of turns 1..k-1, each with
	// its own signature.
	reqs := gem.Requests()
	var generate []geminifake.GenerateRequest
	for _, r := range reqs {
		if r.Action == "generateContent" || r.Action == "streamGenerateContent" {
			g, err := r.Generate()
			if err != nil {
				t.Fatal(err)
			}
			generate = append(generate, g)
		}
	}
	if len(generate) != len(calls)+1 {
		t.Fatalf("%d generate requests upstream; want %d", len(generate), len(calls)+1)
	}
	checked := 0
	for turn, g := range generate {
		var sent []geminifake.FunctionCall
		var sentSigs []string
		for _, c := range g.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					sent = append(sent, *p.FunctionCall)
					sentSigs = append(sentSigs, p.ThoughtSignature)
				}
			}
		}
		if len(sent) != turn {
			t.Errorf("turn %d sent %d function calls upstream; want %d", turn+1, len(sent), turn)
			continue
		}
		for j := range sent {
			switch {
			case sent[j].Name != calls[j]:
				t.Errorf("turn %d: call %d is %s; want %s", turn+1, j+1, sent[j].Name, calls[j])
			case !sameSignature(sentSigs[j], sigs[j]):
				t.Errorf("turn %d (replica %s): call %d (%s, issued through replica %s) went back with signature %.16q…; want the one Gemini issued, %.16q…",
					turn+1, servers[turn], j+1, calls[j], servers[j], sentSigs[j], sigs[j])
			case sent[j].ID != "":
				t.Errorf("turn %d: call %d went upstream with the id %q, which Gemini never sent", turn+1, j+1, sent[j].ID)
			default:
				checked++
			}
		}
	}
	t.Logf("%d function calls sent back upstream over %d turns, each with the signature Gemini issued", checked, len(generate))
}
