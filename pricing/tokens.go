package pricing

import (
	"sync"

	"github.com/tiktoken-go/tokenizer"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Framing overheads added to the raw text count so that estimates stay
// upper bounds: every message carries role and separator tokens, and
// providers add a hidden system prompt when tools are declared (Anthropic
// documents 346 tokens for Claude 4 models with tool_choice auto).
const (
	RequestOverhead    = 8
	MessageOverhead    = 6
	ToolOverhead       = 16
	ToolSystemOverhead = 512
)

var o200k = sync.OnceValues(func() (tokenizer.Codec, error) { return tokenizer.Get(tokenizer.O200kBase) })

// counts remembers the token counts of recent texts: an agent's system
// prompt, its tool definitions and a conversation's earlier turns are
// counted again on every call, and the tokenizer costs microseconds per
// word. Bounded: it starts afresh when full.
var counts struct {
	sync.Mutex
	m     map[string]int64
	bytes int
}

const (
	countsMaxEntries = 4096
	countsMaxBytes   = 16 << 20
	countsMaxText    = 256 << 10 // longer texts are counted every time
)

// CountTokens returns the number of o200k_base tokens in s. Invalid UTF-8 is
// counted by bytes so the count never falls short.
func CountTokens(s string) int64 {
	if s == "" {
		return 0
	}
	if len(s) > countsMaxText {
		return countTokens(s)
	}
	counts.Lock()
	n, ok := counts.m[s]
	counts.Unlock()
	if ok {
		return n
	}
	n = countTokens(s)
	counts.Lock()
	if counts.m == nil || len(counts.m) >= countsMaxEntries || counts.bytes+len(s) > countsMaxBytes {
		counts.m, counts.bytes = make(map[string]int64, 256), 0
	}
	counts.m[s] = n
	counts.bytes += len(s)
	counts.Unlock()
	return n
}

func countTokens(s string) int64 {
	enc, err := o200k()
	if err != nil {
		return int64(len(s))
	}
	n, err := enc.Count(s)
	if err != nil {
		return int64(len(s))
	}
	return int64(n)
}

// CountRequestTokens counts every prompt token of req offline: system,
// messages (text, reasoning, tool calls, tool results), tool definitions,
// plus framing overheads. It is the basis of cost estimates before a call.
func CountRequestTokens(req *provider.Request) int64 {
	n := int64(RequestOverhead) + CountTokens(req.System)
	for _, m := range req.Conversation() {
		n += MessageOverhead
		for _, p := range m.Parts {
			n += CountTokens(p.Text)
			if tc := p.ToolCall; tc != nil {
				n += CountTokens(tc.Name) + CountTokens(string(tc.Arguments)) + MessageOverhead
			}
			if tr := p.ToolResult; tr != nil {
				n += CountTokens(tr.Content) + MessageOverhead
			}
		}
	}
	if len(req.Tools) > 0 {
		n += ToolSystemOverhead
	}
	for _, t := range req.Tools {
		n += ToolOverhead + CountTokens(t.Name) + CountTokens(t.Description) + CountTokens(string(t.InputSchema))
	}
	return n
}
