package anthropicfake

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// What the real API refuses, the fake refuses, in the API's words.
func TestStructureRefusedAsTheAPIDoes(t *testing.T) {
	fake := start(t)
	mark := `"cache_control":{"type":"ephemeral"}`
	marked := func(n int) string {
		var blocks []string
		for i := range n {
			blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":"part %d",%s}`, i, mark))
		}
		return `[` + strings.Join(blocks, ",") + `]`
	}
	for _, c := range []struct{ name, body, want string }{
		{"tool_result without a tool_use before it",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01X","content":"42"}]}]}`,
			"messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01X. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"tool_result answering another call",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01B","content":"42"}]}]}`,
			"messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01B."},
		{"tool_use without its result next",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"f","input":{}}]},{"role":"user","content":"and?"}]}`,
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A."},
		{"tool without input_schema",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`,
			"tools.0.custom.input_schema: Field required"},
		{"input_schema without a type",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"f","input_schema":{"properties":{}}}],"messages":[{"role":"user","content":"hi"}]}`,
			"tools.0.custom.input_schema.type: Field required"},
		{"a fifth cache_control",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"system":[{"type":"text","text":"s",` + mark + `}],"messages":[{"role":"user","content":` + marked(4) + `}]}`,
			"A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"a fifth with the top-level mark",
			`{"model":"claude-sonnet-4-6","max_tokens":64,` + mark + `,"messages":[{"role":"user","content":` + marked(4) + `},{"role":"assistant","content":"ok"}]}`,
			"A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"a lifetime the API does not know",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}`,
			"messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"},
	} {
		resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), c.body)
		var e struct {
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != 400 || e.Error.Type != TypeInvalidRequest || !strings.HasPrefix(e.Error.Message, c.want) {
			t.Errorf("%s: %d %s, want 400 %q", c.name, resp.StatusCode, body, c.want)
		}
	}
	// A paired conversation, four marks and server tools are served.
	ok := `{"model":"claude-sonnet-4-6","max_tokens":64,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}],
		"messages":[{"role":"user","content":` + marked(3) + `},{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"toolu_01A","name":"f","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"42",` + mark + `}]}]}`
	if resp, body := raw(t, fake, "POST", "/v1/messages", goodHeaders(), ok); resp.StatusCode != 200 {
		t.Errorf("valid request: %d %s", resp.StatusCode, body)
	}
}

// The fake's prompt cache: the first request with a breakpoint writes the
// prefix up to it, the next one reads it; a conversation that grows reads
// its previous breakpoint (within 20 blocks) and writes the new turns; a
// prefix under the model's minimum is not cached; another model does not
// share the entry; entries expire with their lifetime.
func TestPromptCacheAccounting(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	fake := start(t, WithClock(func() time.Time { return now }))
	long := strings.Repeat("stable instructions ", 300) // 6000 bytes: about 1500 tokens
	body := func(model string, turns ...string) string {
		var msgs []string
		for i, t := range turns {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			content := fmt.Sprintf("%q", t)
			if i == len(turns)-1 {
				content = fmt.Sprintf(`[{"type":"text","text":%q,"cache_control":{"type":"ephemeral"}}]`, t)
			}
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":%s}`, role, content))
		}
		return fmt.Sprintf(`{"model":%q,"max_tokens":64,"system":[{"type":"text","text":%q,"cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[%s]}`,
			model, long, strings.Join(msgs, ","))
	}
	usage := func(b string) Usage {
		t.Helper()
		resp, out := raw(t, fake, "POST", "/v1/messages", goodHeaders(), b)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		var m struct {
			Usage struct {
				Input         int `json:"input_tokens"`
				CacheCreation int `json:"cache_creation_input_tokens"`
				CacheRead     int `json:"cache_read_input_tokens"`
				Split         struct {
					M5 int `json:"ephemeral_5m_input_tokens"`
					H1 int `json:"ephemeral_1h_input_tokens"`
				} `json:"cache_creation"`
			}
		}
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		u := m.Usage
		if u.CacheCreation != u.Split.M5+u.Split.H1 {
			t.Errorf("cache_creation_input_tokens %d != %d + %d", u.CacheCreation, u.Split.M5, u.Split.H1)
		}
		return Usage{Input: u.Input, CacheRead: u.CacheRead, CacheCreation5m: u.Split.M5, CacheCreation1h: u.Split.H1}
	}
	total := func(b string) int { return CountTokens([]byte(b)) }

	b1 := body("claude-sonnet-4-6", "first question")
	u1 := usage(b1)
	if u1.CacheRead != 0 || u1.CacheCreation1h < 1024 || u1.CacheCreation5m == 0 || u1.Input+u1.CacheCreation1h+u1.CacheCreation5m != total(b1) {
		t.Errorf("first call = %+v of %d: want the system prompt written at 1h and the turn at 5m", u1, total(b1))
	}
	u2 := usage(b1)
	if u2.CacheRead != u1.CacheCreation1h+u1.CacheCreation5m || u2.CacheCreation1h+u2.CacheCreation5m != 0 {
		t.Errorf("same request again = %+v, want a read of %d", u2, u1.CacheCreation1h+u1.CacheCreation5m)
	}
	b3 := body("claude-sonnet-4-6", "first question", "an answer", "second question")
	u3 := usage(b3)
	if u3.CacheRead != u2.CacheRead || u3.CacheCreation5m == 0 || u3.CacheCreation1h != 0 || u3.Input+u3.CacheRead+u3.CacheCreation5m != total(b3) {
		t.Errorf("grown conversation = %+v, want the earlier prefix read (%d) and the new turns written", u3, u2.CacheRead)
	}
	// Another model has a cache of its own, and a larger minimum.
	if u := usage(body("claude-haiku-4-5", "first question")); u.CacheRead != 0 || u.CacheCreation1h+u.CacheCreation5m != 0 {
		t.Errorf("Haiku 4.5 under its 4096-token minimum = %+v, want nothing cached", u)
	}
	// A short prefix is not cached.
	short := `{"model":"claude-sonnet-4-6","max_tokens":64,"system":[{"type":"text","text":"short","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	if u := usage(short); u.CacheCreation5m+u.CacheCreation1h+u.CacheRead != 0 {
		t.Errorf("short prefix = %+v", u)
	}
	// The 5-minute entries expire; the 1-hour one is still read.
	now = now.Add(10 * time.Minute)
	if u := usage(b3); u.CacheRead != u1.CacheCreation1h || u.CacheCreation5m == 0 {
		t.Errorf("after 10 minutes = %+v, want only the 1h prefix (%d) read", u, u1.CacheCreation1h)
	}
	// Without any mark nothing is read or written.
	if u := usage(msgBody); u.CacheRead+u.CacheCreation5m+u.CacheCreation1h != 0 || u.Input != total(msgBody) {
		t.Errorf("unmarked = %+v", u)
	}
}
