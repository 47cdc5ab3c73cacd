package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// Answers are decoded into fixed structs holding only what the adapter
// reads, by encoding/json, instead of by the SDK's reflective decoder of
// openai.ChatCompletion and openai.ChatCompletionChunk. The SDK's decoder
// is lenient where encoding/json is not (a number where a string belongs
// is read as text, a string of digits as a number, trailing data after
// the document is ignored), so a document encoding/json refuses is decoded
// again by the SDK's own types and read from them: a malformed answer fails
// or succeeds exactly as it did when the SDK decoded every answer.

// completion is the part of a Chat Completions answer the adapter reads.
type completion struct {
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	// Usage is nil when the answer has none (absent or null).
	Usage *wireUsage `json:"usage"`
}

type completionChoice struct {
	Message struct {
		Content   string     `json:"content"`
		ToolCalls []toolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// wireUsage is Chat Completions' usage object.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage is the usage to bill when the answer reports any tokens.
func (u *wireUsage) usage() (provider.Usage, bool) {
	if u == nil || u.PromptTokens <= 0 && u.CompletionTokens <= 0 {
		return provider.Usage{}, false
	}
	out := provider.UsageInclusive(u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CacheWriteTokens, u.CompletionTokens)
	out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	return out, true
}

// decodeCompletion reads a 200 answer's body: nil for a JSON null. An
// answer that is not declared JSON, or that even the SDK cannot read,
// fails with the SDK's own error, which classify reads as it always did.
func decodeCompletion(raw *http.Response, body []byte) (*completion, error) {
	if raw != nil {
		ct := raw.Header.Get("content-type")
		mt, _, _ := mime.ParseMediaType(ct)
		if !strings.Contains(mt, "application/json") && !strings.HasSuffix(mt, "+json") {
			return nil, fmt.Errorf("expected destination type of 'string' or '[]byte' for responses with content-type '%s' that is not 'application/json'", ct)
		}
	}
	var cc *completion
	if json.Unmarshal(body, &cc) == nil {
		return cc, nil
	}
	var sdk *openai.ChatCompletion
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&sdk); err != nil {
		return nil, fmt.Errorf("error parsing response json: %w", err)
	}
	return completionFromSDK(sdk), nil
}

// completionFromSDK reads what the adapter needs from the SDK's decoding.
func completionFromSDK(sdk *openai.ChatCompletion) *completion {
	if sdk == nil {
		return nil
	}
	cc := &completion{Model: sdk.Model}
	cc.Choices = make([]completionChoice, len(sdk.Choices))
	for i, ch := range sdk.Choices {
		c := &cc.Choices[i]
		c.FinishReason = ch.FinishReason
		c.Message.Content = ch.Message.Content
		for _, tc := range ch.Message.ToolCalls {
			c.Message.ToolCalls = append(c.Message.ToolCalls, toolCall{tc.ID, functionCall{tc.Function.Name, tc.Function.Arguments}})
		}
	}
	if sdk.JSON.Usage.Valid() {
		cc.Usage = usageFromSDK(sdk.Usage)
	}
	return cc
}

func usageFromSDK(u openai.CompletionUsage) *wireUsage {
	w := &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	w.PromptTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	w.PromptTokensDetails.CacheWriteTokens = u.PromptTokensDetails.CacheWriteTokens
	w.CompletionTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	return w
}

// chunk is the part of a streamed Chat Completions chunk the adapter
// reads.
type chunk struct {
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	// Usage is nil when the chunk has none (absent or null).
	Usage *wireUsage `json:"usage"`
}

type chunkChoice struct {
	Index int64 `json:"index"`
	Delta struct {
		Content   string          `json:"content"`
		ToolCalls []chunkToolCall `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type chunkToolCall struct {
	Index    int64        `json:"index"`
	ID       string       `json:"id"`
	Function functionCall `json:"function"`
}

// wireChunk decodes one event's data (see the comment at the top).
type wireChunk chunk

func (c *wireChunk) UnmarshalJSON(b []byte) error {
	var fast chunk
	if decodeTextChunk(b, &fast) {
		*c = wireChunk(fast)
		return nil
	}
	return decodeChunkSlowly(b, (*chunk)(c))
}

// decodeChunkSlowly decodes a chunk the fast path left: with
// json.Unmarshal, else with the SDK's type (whose fields it reads).
func decodeChunkSlowly(b []byte, c *chunk) error {
	var plain chunk
	if json.Unmarshal(b, &plain) == nil {
		*c = plain
		return nil
	}
	var sdk openai.ChatCompletionChunk
	if err := json.Unmarshal(b, &sdk); err != nil {
		return err
	}
	*c = chunkFromSDK(&sdk)
	return nil
}

// decodeTextChunk is the fast path of a streamed chunk of text, the
// chunk a streamed answer is made of: valid UTF-8 and JSON, the members
// the adapter reads (model, choices; each choice's index, delta and
// finish_reason; the delta's content) strings, integers or null, once
// each, no usage and no tool calls (those go to json.Unmarshal). It
// decodes b as json.Unmarshal into a chunk would and reports true, or
// reports false (c may then hold part of b) and json.Unmarshal decides.
// Members the adapter does not read are skipped, as json.Unmarshal
// skips them, unless one could be a read one spelt in another case
// (json.Unmarshal matches names without regard to case).
func decodeTextChunk(b []byte, c *chunk) bool { return decodeTextEvent(b, c, nil) }

// eventTop is what a stream reads of an event's top level beside its
// chunk: its error and its service tier, each as it is in the event (nil
// when absent).
type eventTop struct{ err, tier []byte }

var (
	chunkMembers  = []string{"model", "choices", "usage"}
	eventMembers  = []string{"model", "choices", "usage", "error", "service_tier"}
	choiceMembers = []string{"index", "delta", "finish_reason"}
	deltaMembers  = []string{"content", "tool_calls"}
)

// decodeTextEvent is decodeTextChunk that, with top, also reads the
// event's error and service_tier members in the same pass (as
// adapterkit.Top would; either spelt in another case or named twice
// leaves the event to the slow path).
func decodeTextEvent(b []byte, c *chunk, top *eventTop) bool {
	if !utf8.Valid(b) {
		return false
	}
	*c = chunk{}
	names := chunkMembers
	if top != nil {
		*top, names = eventTop{}, eventMembers
	}
	cur := adapterkit.NewJSONCursor(b)
	ok := members(&cur, names, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			return str(&cur, &c.Model)
		case 1:
			if cur.Null() {
				return true
			}
			c.Choices = []chunkChoice{}
			return cur.Array(func() bool {
				c.Choices = append(c.Choices, chunkChoice{})
				return decodeTextChoice(&cur, &c.Choices[len(c.Choices)-1])
			})
		case 2:
			return cur.Null() // usage: json.Unmarshal decides
		case 3:
			top.err, ok = cur.Raw()
		case 4:
			top.tier, ok = cur.Raw()
		}
		return ok
	})
	return ok && cur.End()
}

func decodeTextChoice(cur *adapterkit.JSONCursor, cc *chunkChoice) bool {
	return members(cur, choiceMembers, func(k int) bool {
		switch k {
		case 0:
			if cur.Null() {
				return true
			}
			var ok bool
			cc.Index, ok = cur.Int()
			return ok
		case 1:
			if cur.Null() {
				return true
			}
			return members(cur, deltaMembers, func(k int) bool {
				if k == 0 {
					return str(cur, &cc.Delta.Content)
				}
				return cur.Null() // tool calls: json.Unmarshal decides
			})
		}
		return str(cur, &cc.FinishReason)
	})
}

// members reads an object at cur, calling read(k) with cur at the value
// of each member named names[k], and skipping the others. It reports
// false when read does, when a name comes twice, when a key matches one
// of names only without regard to case (json.Unmarshal would take it),
// and when the value is not an object.
func members(cur *adapterkit.JSONCursor, names []string, read func(k int) bool) bool {
	var seen uint
	return cur.Object(func(key []byte) bool {
		for k, n := range names {
			switch {
			case string(key) == n:
				if seen&(1<<k) != 0 {
					return false
				}
				seen |= 1 << k
				return read(k)
			case foldable(key, n) && strings.EqualFold(string(key), n):
				return false
			}
		}
		return cur.Skip()
	})
}

// foldable reports whether key could equal name without regard to case:
// an ASCII key of another length cannot.
func foldable(key []byte, name string) bool {
	if len(key) == len(name) {
		return true
	}
	for _, b := range key {
		if b >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// str reads the value at cur, a string or null, into s.
func str(cur *adapterkit.JSONCursor, s *string) bool {
	if cur.Null() {
		return true
	}
	v, ok := cur.String()
	*s = v
	return ok
}

// chunkFromSDK reads what the adapter needs from the SDK's decoding.
func chunkFromSDK(sdk *openai.ChatCompletionChunk) chunk {
	c := chunk{Model: sdk.Model, Choices: make([]chunkChoice, len(sdk.Choices))}
	for i, ch := range sdk.Choices {
		cc := &c.Choices[i]
		cc.Index, cc.FinishReason, cc.Delta.Content = ch.Index, ch.FinishReason, ch.Delta.Content
		for _, tc := range ch.Delta.ToolCalls {
			cc.Delta.ToolCalls = append(cc.Delta.ToolCalls, chunkToolCall{Index: tc.Index, ID: tc.ID, Function: functionCall{tc.Function.Name, tc.Function.Arguments}})
		}
	}
	if sdk.JSON.Usage.Valid() {
		c.Usage = usageFromSDK(sdk.Usage)
	}
	return c
}
