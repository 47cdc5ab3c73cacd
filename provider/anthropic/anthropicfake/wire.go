package anthropicfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// The wire structs below fix the field order of the real API's JSON, as
// recorded in the SDK's cassettes (see testdata/real).

type wireMessage struct {
	Model        string    `json:"model"`
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Role         string    `json:"role"`
	Content      []any     `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	StopDetails  any       `json:"stop_details"`
	Usage        wireUsage `json:"usage"`
	// ContextManagement answers a request with context_management.
	ContextManagement *wireContextManagement `json:"context_management,omitempty"`
}

type wireUsage struct {
	InputTokens              int               `json:"input_tokens"`
	CacheCreationInputTokens int               `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int               `json:"cache_read_input_tokens"`
	CacheCreation            wireCacheCreation `json:"cache_creation"`
	OutputTokens             int               `json:"output_tokens"`
	// ServerToolUse is reported to a request offering a server tool.
	ServerToolUse *wireServerToolUse `json:"server_tool_use,omitempty"`
	ServiceTier   string             `json:"service_tier"`
	InferenceGeo  string             `json:"inference_geo"`
}

type wireCacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

// wireDeltaUsage is the cumulative usage of message_delta.
type wireDeltaUsage struct {
	InputTokens              int                `json:"input_tokens"`
	CacheCreationInputTokens int                `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                `json:"cache_read_input_tokens"`
	OutputTokens             int                `json:"output_tokens"`
	ServerToolUse            *wireServerToolUse `json:"server_tool_use,omitempty"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// resolved is a Reply with every default filled in, ready to be written.
type resolved struct {
	id, model    string
	thinking     *Thinking
	text         string
	tools        []ToolUse // IDs set, Input compact and non-empty
	stopReason   string
	stopSequence string
	usage        Usage

	searches  []resolvedSearch
	citations []citation
	// searchTool says the request offers the web search tool (usage
	// reports server_tool_use); searched is the searches billed.
	searchTool bool
	searched   int
	// edits, when the request has context_management, are the edits
	// applied (never nil then).
	edits []AppliedEdit
}

// contextManagement is the answer's context_management, nil when the
// request has none.
func (m *resolved) contextManagement() *wireContextManagement {
	if m.edits == nil {
		return nil
	}
	return &wireContextManagement{AppliedEdits: m.edits}
}

// serverToolUse is usage.server_tool_use, nil when the request offers no
// server tool.
func (m *resolved) serverToolUse() *wireServerToolUse {
	if !m.searchTool {
		return nil
	}
	return &wireServerToolUse{WebSearchRequests: m.searched}
}

// textBlock is the answer's text block, with its citations when there
// are some.
func (m *resolved) textBlock(text string) any {
	if len(m.citations) > 0 {
		return citedTextBlock{Citations: m.citations, Type: "text", Text: text}
	}
	return textBlock{"text", text}
}

func (m *resolved) message() wireMessage {
	var content []any
	if m.thinking != nil {
		content = append(content, thinkingBlock{"thinking", m.thinking.Text, m.thinking.Signature})
	}
	for i := range m.searches {
		rs := &m.searches[i]
		content = append(content, serverToolUseBlock{"server_tool_use", rs.id, rs.name, rs.input}, rs.resultBlock())
	}
	if m.text != "" {
		content = append(content, m.textBlock(m.text))
	}
	for _, tu := range m.tools {
		content = append(content, toolUseBlock{"tool_use", tu.ID, tu.Name, tu.Input})
	}
	if content == nil {
		content = []any{}
	}
	stop := m.stopReason
	var seq *string
	if m.stopSequence != "" {
		seq = &m.stopSequence
	}
	return wireMessage{
		Model: m.model, ID: m.id, Type: "message", Role: "assistant",
		Content: content, StopReason: &stop, StopSequence: seq,
		Usage: m.wireUsage(m.usage.Output), ContextManagement: m.contextManagement(),
	}
}

func (m *resolved) wireUsage(output int) wireUsage {
	u := m.usage
	return wireUsage{
		InputTokens:              u.Input,
		CacheCreationInputTokens: u.CacheCreation5m + u.CacheCreation1h,
		CacheReadInputTokens:     u.CacheRead,
		CacheCreation:            wireCacheCreation{u.CacheCreation5m, u.CacheCreation1h},
		OutputTokens:             output,
		ServerToolUse:            m.serverToolUse(),
		ServiceTier:              "standard",
		InferenceGeo:             "global",
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data []byte
}

// pingData is the ping payload, byte for byte as the real API sends it
// (with a space after the colon, unlike every other event).
const pingData = `{"type": "ping"}`

// streamEvents builds the full event sequence of a streamed reply:
// message_start, a ping after the first content_block_start, per block
// start/deltas/stop, message_delta with cumulative usage, message_stop.
func (m *resolved) streamEvents() []sseEvent {
	var evs []sseEvent
	add := func(name string, v any) {
		evs = append(evs, sseEvent{name, marshal(v)})
	}
	ping := func() { evs = append(evs, sseEvent{"ping", []byte(pingData)}) }

	start := m.message()
	start.Content = []any{}
	start.StopReason = nil
	start.StopSequence = nil
	start.Usage = m.wireUsage(min(1, m.usage.Output))
	start.Usage.ServerToolUse = nil // reported in message_delta
	start.ContextManagement = nil
	add("message_start", struct {
		Type    string      `json:"type"`
		Message wireMessage `json:"message"`
	}{"message_start", start})

	index := 0
	block := func(cb any, deltas []any) {
		add("content_block_start", struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock any    `json:"content_block"`
		}{"content_block_start", index, cb})
		if index == 0 {
			ping()
		}
		for _, d := range deltas {
			add("content_block_delta", struct {
				Type  string `json:"type"`
				Index int    `json:"index"`
				Delta any    `json:"delta"`
			}{"content_block_delta", index, d})
		}
		add("content_block_stop", struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		}{"content_block_stop", index})
		index++
	}

	if t := m.thinking; t != nil {
		var ds []any
		for _, c := range splitText(t.Text) {
			ds = append(ds, struct {
				Type     string `json:"type"`
				Thinking string `json:"thinking"`
			}{"thinking_delta", c})
		}
		ds = append(ds, struct {
			Type      string `json:"type"`
			Signature string `json:"signature"`
		}{"signature_delta", t.Signature})
		block(thinkingBlock{"thinking", "", ""}, ds)
	}
	for i := range m.searches {
		rs := &m.searches[i]
		var ds []any
		for _, c := range splitJSON(fakekit.SpacedJSON(rs.input)) {
			ds = append(ds, struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
			}{"input_json_delta", c})
		}
		block(serverToolUseBlock{"server_tool_use", rs.id, rs.name, json.RawMessage("{}")}, ds)
		block(rs.resultBlock(), nil)
	}
	if m.text != "" {
		var ds []any
		for _, c := range m.citations {
			ds = append(ds, struct {
				Type     string   `json:"type"`
				Citation citation `json:"citation"`
			}{"citations_delta", c})
		}
		for _, c := range splitText(m.text) {
			ds = append(ds, struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{"text_delta", c})
		}
		var start any = textBlock{"text", ""}
		if len(m.citations) > 0 {
			start = citedTextBlock{Citations: []citation{}, Type: "text"}
		}
		block(start, ds)
	}
	for _, tu := range m.tools {
		var ds []any
		for _, c := range splitJSON(fakekit.SpacedJSON(tu.Input)) {
			ds = append(ds, struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
			}{"input_json_delta", c})
		}
		block(toolUseBlock{"tool_use", tu.ID, tu.Name, json.RawMessage("{}")}, ds)
	}
	if index == 0 {
		ping()
	}

	var seq *string
	if m.stopSequence != "" {
		seq = &m.stopSequence
	}
	u := m.usage
	add("message_delta", struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
			StopDetails  any     `json:"stop_details"`
		} `json:"delta"`
		Usage             wireDeltaUsage         `json:"usage"`
		ContextManagement *wireContextManagement `json:"context_management,omitempty"`
	}{
		Type: "message_delta",
		Delta: struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
			StopDetails  any     `json:"stop_details"`
		}{m.stopReason, seq, nil},
		Usage:             wireDeltaUsage{u.Input, u.CacheCreation5m + u.CacheCreation1h, u.CacheRead, u.Output, m.serverToolUse()},
		ContextManagement: m.contextManagement(),
	})
	add("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})
	return evs
}

// marshal encodes v as the real API does: compact, with <, > and & left
// literal.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("anthropicfake: marshal: " + err.Error()) // only fixed wire types are encoded
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// splitText cuts text into text_delta chunks the way the real stream looks:
// the first word alone, then two words per chunk (each word carrying its
// leading space), with very long words cut at 24 bytes on rune boundaries.
func splitText(s string) []string {
	pieces := fakekit.WordPieces(s, isBlank, 24)
	var chunks []string
	for i := 0; i < len(pieces); {
		n := 2
		if i == 0 {
			n = 1
		}
		end := min(i+n, len(pieces))
		c := ""
		for _, p := range pieces[i:end] {
			c += p
		}
		chunks = append(chunks, c)
		i = end
	}
	return chunks
}

// jsonFragmentSizes are the byte sizes input_json_delta fragments cycle
// through; none lines up with JSON tokens, so fragments split mid-token.
var jsonFragmentSizes = []int{13, 9, 11, 7}

// splitJSON cuts a tool input into input_json_delta fragments. Like the
// real API, the first fragment is empty; an empty object sends only that.
func splitJSON(s string) []string {
	if s == "{}" {
		return []string{""}
	}
	return append([]string{""}, fakekit.CutRunes(s, jsonFragmentSizes)...)
}

// defaultSignature derives a stable thinking signature from its text.
func defaultSignature(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "Eo" + base64.StdEncoding.EncodeToString(sum[:])
}

// isBlank reports whether c is a space, the only separator splitText
// breaks words at.
func isBlank(c byte) bool { return c == ' ' }
