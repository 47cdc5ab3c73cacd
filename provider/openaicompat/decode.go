package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
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
// chunk: its error and its service tier.
type eventTop struct{ err, tier gjson.Result }

var (
	chunkMembers = []string{"model", "choices", "usage"}
	eventMembers = []string{"model", "choices", "usage", "error", "service_tier"}
)

// decodeTextEvent is decodeTextChunk that, with top, also reads the
// event's error and service_tier members in the same pass (as
// adapterkit.Top would; either spelt in another case or named twice
// leaves the event to the slow path).
func decodeTextEvent(b []byte, c *chunk, top *eventTop) bool {
	if !utf8.Valid(b) || !gjson.ValidBytes(b) {
		return false
	}
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return false
	}
	*c = chunk{}
	names := chunkMembers
	if top != nil {
		*top, names = eventTop{}, eventMembers
	}
	return members(root, names, func(k int, v gjson.Result) bool {
		switch k {
		case 3:
			top.err = v
			return true
		case 4:
			top.tier = v
			return true
		case 0:
			return str(v, &c.Model)
		case 1:
			if v.Type == gjson.Null {
				return true
			}
			if !v.IsArray() {
				return false
			}
			ok := true
			v.ForEach(func(_, ch gjson.Result) bool {
				var cc chunkChoice
				ok = ch.IsObject() && decodeTextChoice(ch, &cc)
				c.Choices = append(c.Choices, cc)
				return ok
			})
			if ok && c.Choices == nil {
				c.Choices = []chunkChoice{}
			}
			return ok
		}
		return v.Type == gjson.Null // usage: json.Unmarshal decides
	})
}

func decodeTextChoice(v gjson.Result, cc *chunkChoice) bool {
	return members(v, []string{"index", "delta", "finish_reason"}, func(k int, v gjson.Result) bool {
		switch k {
		case 0:
			if v.Type == gjson.Null {
				return true
			}
			if v.Type != gjson.Number || strings.ContainsAny(v.Raw, ".eE") {
				return false
			}
			n, err := strconv.ParseInt(v.Raw, 10, 64)
			cc.Index = n
			return err == nil
		case 1:
			if v.Type == gjson.Null {
				return true
			}
			return v.IsObject() && members(v, []string{"content", "tool_calls"}, func(k int, v gjson.Result) bool {
				if k == 0 {
					return str(v, &cc.Delta.Content)
				}
				return v.Type == gjson.Null // tool calls: json.Unmarshal decides
			})
		}
		return str(v, &cc.FinishReason)
	})
}

// members calls read(k, v) for each member of obj named names[k], and
// reports false when read does, when a name comes twice, or when a key
// matches one of names only without regard to case.
func members(obj gjson.Result, names []string, read func(k int, v gjson.Result) bool) bool {
	var seen uint
	ok := true
	obj.ForEach(func(key, v gjson.Result) bool {
		for k, n := range names {
			switch {
			case key.Str == n && key.Raw == `"`+n+`"`:
				if seen&(1<<k) != 0 {
					ok = false
					return false
				}
				seen |= 1 << k
				ok = read(k, v)
				return ok
			case strings.EqualFold(key.Str, n):
				ok = false
				return false
			}
		}
		return true
	})
	return ok
}

// str reads v, a string or null, into s.
func str(v gjson.Result, s *string) bool {
	switch v.Type {
	case gjson.String:
		*s = v.Str
	case gjson.Null:
	default:
		return false
	}
	return true
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
