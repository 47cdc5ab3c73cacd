package openaifake

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// resolved is a success Reply with every default filled in, ready to be
// written in the flavour's wire format.
type resolved struct {
	id, model    string
	created      int64
	fingerprint  string
	text         string
	tools        []ToolCall // IDs set, Arguments formatted for the flavour
	finish       string
	usage        Usage
	includeUsage bool
	obfuscate    bool
	serviceTier  string
}

// resolve fills in every default of a success reply. promptCap > 0 caps
// the derived prompt count (Ollama's silent truncation).
func (s *Server) resolve(reply Reply, req chatRequest, body []byte, promptCap int) *resolved {
	f := s.cfg.flavor
	res := &resolved{
		id:           reply.ID,
		model:        reply.Model,
		created:      s.cfg.now().Unix(),
		text:         reply.Text,
		finish:       reply.FinishReason,
		usage:        reply.Usage,
		includeUsage: req.stream && req.includeUsage,
		obfuscate:    f == FlavorOpenAI && !req.noObfuscation,
		serviceTier:  servedTier(req.serviceTier),
	}
	if res.model == "" {
		res.model = req.model
		if m, ok := s.findModel(req.model); ok && f == FlavorOpenAI && m.Snapshot != "" {
			res.model = m.Snapshot
		}
	}
	switch f {
	case FlavorOllama:
		res.fingerprint = "fp_ollama"
		if res.id == "" {
			res.id = "chatcmpl-" + strconv.Itoa(s.rnd.IntN(999))
		}
	case FlavorVLLM:
		if res.id == "" {
			res.id = "chatcmpl-" + s.rnd.String(hexChars, 32)
		}
	default:
		res.fingerprint = "fp_" + s.rnd.String(hexChars, 10)
		if res.id == "" {
			res.id = "chatcmpl-" + s.rnd.String(base62, 29)
		}
	}
	outBytes := len(reply.Text)
	for _, tc := range reply.ToolCalls {
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		switch f {
		case FlavorOllama:
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(args)) == nil {
				args = buf.String()
			}
		case FlavorVLLM:
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(args)) == nil {
				args = fakekit.SpacedJSON(buf.Bytes())
			}
		}
		id := tc.ID
		if id == "" {
			switch f {
			case FlavorOllama:
				id = "call_" + s.rnd.String(lowerAN, 8)
			case FlavorVLLM:
				id = "chatcmpl-tool-" + s.rnd.String(hexChars, 32)
			default:
				id = "call_" + s.rnd.String(base62, 24)
			}
		}
		res.tools = append(res.tools, ToolCall{ID: id, Name: tc.Name, Arguments: args})
		outBytes += len(tc.Name) + len(args)
	}
	if res.finish == "" {
		res.finish = "stop"
		if len(res.tools) > 0 {
			res.finish = "tool_calls"
		}
	}
	if res.usage == (Usage{}) {
		prompt := CountTokens(body)
		if promptCap > 0 {
			prompt = min(prompt, promptCap)
		}
		res.usage = Usage{Prompt: prompt, Completion: completionTokens(outBytes)}
		// The server stops at the output limit: a derived answer never
		// bills more.
		var capped bool
		if res.text, res.usage.Completion, capped = fakekit.CapOutput(res.text, res.usage.Completion, cmpOr(req.maxCompletionTokens, req.maxTokens)); capped {
			res.finish = "length"
		}
	}
	return res
}

// ---- OpenAI ----

type oaCompletion struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	Choices           []oaChoice `json:"choices"`
	Usage             oaUsage    `json:"usage"`
	ServiceTier       string     `json:"service_tier"`
	SystemFingerprint string     `json:"system_fingerprint"`
}

type oaChoice struct {
	Index        int       `json:"index"`
	Message      oaMessage `json:"message"`
	Logprobs     any       `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type oaMessage struct {
	Role        string       `json:"role"`
	Content     *string      `json:"content"`
	Refusal     any          `json:"refusal"`
	Annotations []any        `json:"annotations"`
	ToolCalls   []oaToolCall `json:"tool_calls,omitempty"`
}

type oaToolCall struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaUsage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	PromptTokensDetails     oaPromptTokensDetails   `json:"prompt_tokens_details"`
	CompletionTokensDetails oaCompletionTokenDetail `json:"completion_tokens_details"`
}

type oaPromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
	AudioTokens  int `json:"audio_tokens"`
}

type oaCompletionTokenDetail struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AudioTokens              int `json:"audio_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

func (m *resolved) oaUsage() oaUsage {
	u := m.usage
	return oaUsage{
		PromptTokens: u.Prompt, CompletionTokens: u.Completion, TotalTokens: u.Prompt + u.Completion,
		PromptTokensDetails:     oaPromptTokensDetails{CachedTokens: u.Cached},
		CompletionTokensDetails: oaCompletionTokenDetail{ReasoningTokens: u.Reasoning},
	}
}

type oaChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	ServiceTier       string          `json:"service_tier"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []oaChunkChoice `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
	Obfuscation       string          `json:"obfuscation,omitempty"`
}

type oaChunkChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type oaDelta struct {
	Role      string            `json:"role,omitempty"`
	Content   json.RawMessage   `json:"content,omitempty"`
	ToolCalls []oaToolCallDelta `json:"tool_calls,omitempty"`
	Refusal   json.RawMessage   `json:"refusal,omitempty"`
}

type oaToolCallDelta struct {
	Index    int             `json:"index"`
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function oaFunctionDelta `json:"function"`
}

type oaFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

var jsonNull = json.RawMessage("null")

func jsonString(s string) json.RawMessage { return marshal(s, false) }

func (s *Server) openAICompletion(m *resolved) []byte {
	msg := oaMessage{Role: "assistant", Annotations: []any{}}
	if m.text != "" || len(m.tools) == 0 {
		t := m.text
		msg.Content = &t
	}
	for _, tc := range m.tools {
		msg.ToolCalls = append(msg.ToolCalls, oaToolCall{tc.ID, "function", oaFunction{tc.Name, tc.Arguments}})
	}
	return marshalIndent(oaCompletion{
		ID: m.id, Object: "chat.completion", Created: m.created, Model: m.model,
		Choices:     []oaChoice{{Index: 0, Message: msg, FinishReason: m.finish}},
		Usage:       m.oaUsage(),
		ServiceTier: m.serviceTier, SystemFingerprint: m.fingerprint,
	}, "  ")
}

func (s *Server) openAIChunks(m *resolved) [][]byte {
	var out [][]byte
	add := func(choices []oaChunkChoice, usage json.RawMessage) {
		c := oaChunk{
			ID: m.id, Object: "chat.completion.chunk", Created: m.created, Model: m.model,
			ServiceTier: m.serviceTier, SystemFingerprint: m.fingerprint, Choices: choices,
		}
		if m.includeUsage {
			c.Usage = usage
			if c.Usage == nil {
				c.Usage = jsonNull
			}
		}
		if m.obfuscate {
			c.Obfuscation = s.rnd.String(base62, 1+s.rnd.IntN(12))
		}
		out = append(out, marshal(c, false))
	}
	delta := func(d oaDelta) { add([]oaChunkChoice{{Delta: d}}, nil) }

	first := oaDelta{Role: "assistant", Refusal: jsonNull}
	if m.text != "" || len(m.tools) == 0 {
		first.Content = jsonString("")
		delta(first)
		for _, piece := range splitText(m.text) {
			delta(oaDelta{Content: jsonString(piece)})
		}
		first = oaDelta{}
	} else {
		first.Content = jsonNull
	}
	for i, tc := range m.tools {
		d := first
		first = oaDelta{}
		d.ToolCalls = []oaToolCallDelta{{Index: i, ID: tc.ID, Type: "function", Function: oaFunctionDelta{Name: tc.Name}}}
		delta(d)
		for _, frag := range splitArgs(tc.Arguments) {
			delta(oaDelta{ToolCalls: []oaToolCallDelta{{Index: i, Function: oaFunctionDelta{Arguments: frag}}}})
		}
	}
	finish := m.finish
	add([]oaChunkChoice{{Delta: oaDelta{}, FinishReason: &finish}}, nil)
	if m.includeUsage {
		add([]oaChunkChoice{}, marshal(m.oaUsage(), false))
	}
	return out
}

// ---- Ollama ----

type olCompletion struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Choices           []olChoice `json:"choices"`
	Usage             olUsage    `json:"usage"`
}

type olChoice struct {
	Index        int       `json:"index"`
	Message      olMessage `json:"message"`
	FinishReason *string   `json:"finish_reason"`
}

type olChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []olChunkChoice `json:"choices"`
	Usage             *olUsage        `json:"usage,omitempty"`
}

type olChunkChoice struct {
	Index        int       `json:"index"`
	Delta        olMessage `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

type olMessage struct {
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	ToolCalls []olToolCall `json:"tool_calls,omitempty"`
}

type olToolCall struct {
	ID       string     `json:"id"`
	Index    int        `json:"index"`
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type olUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (m *resolved) olUsage() olUsage {
	return olUsage{m.usage.Prompt, m.usage.Completion, m.usage.Prompt + m.usage.Completion}
}

// olCall converts a call. Ollama numbers every call index 0: each call
// is parsed on its own, and the index is that of the call within its own
// parse (see the package doc).
func olCall(tc ToolCall) olToolCall {
	return olToolCall{ID: tc.ID, Index: 0, Type: "function", Function: oaFunction{tc.Name, tc.Arguments}}
}

func (s *Server) ollamaCompletion(m *resolved) []byte {
	msg := olMessage{Role: "assistant", Content: m.text}
	for _, tc := range m.tools {
		msg.ToolCalls = append(msg.ToolCalls, olCall(tc))
	}
	finish := m.finish
	return append(marshal(olCompletion{
		ID: m.id, Object: "chat.completion", Created: m.created, Model: m.model, SystemFingerprint: m.fingerprint,
		Choices: []olChoice{{Index: 0, Message: msg, FinishReason: &finish}},
		Usage:   m.olUsage(),
	}, true), '\n')
}

func (s *Server) ollamaChunks(m *resolved) [][]byte {
	var out [][]byte
	add := func(choices []olChunkChoice, usage *olUsage) {
		out = append(out, marshal(olChunk{
			ID: m.id, Object: "chat.completion.chunk", Created: m.created, Model: m.model,
			SystemFingerprint: m.fingerprint, Choices: choices, Usage: usage,
		}, true))
	}
	for _, piece := range splitText(m.text) {
		add([]olChunkChoice{{Delta: olMessage{Role: "assistant", Content: piece}}}, nil)
	}
	for _, tc := range m.tools {
		add([]olChunkChoice{{Delta: olMessage{Role: "assistant", ToolCalls: []olToolCall{olCall(tc)}}}}, nil)
	}
	finish := m.finish
	add([]olChunkChoice{{Delta: olMessage{Role: "assistant"}, FinishReason: &finish}}, nil)
	if m.includeUsage {
		u := m.olUsage()
		add([]olChunkChoice{}, &u)
	}
	return out
}

// ---- vLLM ----

type vlCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	Choices           []vlChoice  `json:"choices"`
	ServiceTier       any         `json:"service_tier"`
	SystemFingerprint any         `json:"system_fingerprint"`
	Usage             vlUsageFull `json:"usage"`
	PromptLogprobs    any         `json:"prompt_logprobs"`
	KVTransferParams  any         `json:"kv_transfer_params"`
}

type vlChoice struct {
	Index        int       `json:"index"`
	Message      vlMessage `json:"message"`
	Logprobs     any       `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   any       `json:"stop_reason"`
}

type vlMessage struct {
	Role             string       `json:"role"`
	Content          *string      `json:"content"`
	Refusal          any          `json:"refusal"`
	Annotations      any          `json:"annotations"`
	Audio            any          `json:"audio"`
	FunctionCall     any          `json:"function_call"`
	ToolCalls        []oaToolCall `json:"tool_calls"`
	ReasoningContent any          `json:"reasoning_content"`
}

type vlDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// vlUsageFull is the usage of a non-streamed completion (all fields).
type vlUsageFull struct {
	PromptTokens        int        `json:"prompt_tokens"`
	TotalTokens         int        `json:"total_tokens"`
	CompletionTokens    int        `json:"completion_tokens"`
	PromptTokensDetails *vlDetails `json:"prompt_tokens_details"`
}

// vlUsageChunk is the usage of the final stream chunk (None fields
// excluded).
type vlUsageChunk struct {
	PromptTokens        int        `json:"prompt_tokens"`
	TotalTokens         int        `json:"total_tokens"`
	CompletionTokens    int        `json:"completion_tokens"`
	PromptTokensDetails *vlDetails `json:"prompt_tokens_details,omitempty"`
}

type vlChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []vlChunkChoice `json:"choices"`
	Usage   *vlUsageChunk   `json:"usage,omitempty"`
}

type vlChunkChoice struct {
	Index        int             `json:"index"`
	Delta        vlDelta         `json:"delta"`
	Logprobs     any             `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"`
}

type vlDelta struct {
	Role      string            `json:"role,omitempty"`
	Content   *string           `json:"content,omitempty"`
	ToolCalls []vlToolCallDelta `json:"tool_calls,omitempty"`
}

type vlToolCallDelta struct {
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Index    int             `json:"index"`
	Function vlFunctionDelta `json:"function"`
}

type vlFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

func (s *Server) vllmDetails(m *resolved) *vlDetails {
	if s.cfg.promptDetails && m.usage.Cached > 0 {
		return &vlDetails{CachedTokens: m.usage.Cached}
	}
	return nil
}

func (s *Server) vllmCompletion(m *resolved) []byte {
	msg := vlMessage{Role: "assistant", ToolCalls: []oaToolCall{}}
	if m.text != "" || len(m.tools) == 0 {
		t := m.text
		msg.Content = &t
	}
	for _, tc := range m.tools {
		msg.ToolCalls = append(msg.ToolCalls, oaToolCall{tc.ID, "function", oaFunction{tc.Name, tc.Arguments}})
	}
	u := m.usage
	return marshal(vlCompletion{
		ID: m.id, Object: "chat.completion", Created: m.created, Model: m.model,
		Choices: []vlChoice{{Index: 0, Message: msg, FinishReason: m.finish}},
		Usage:   vlUsageFull{u.Prompt, u.Prompt + u.Completion, u.Completion, s.vllmDetails(m)},
	}, false)
}

func (s *Server) vllmChunks(m *resolved) [][]byte {
	var out [][]byte
	add := func(choices []vlChunkChoice, usage *vlUsageChunk) {
		out = append(out, marshal(vlChunk{
			ID: m.id, Object: "chat.completion.chunk", Created: m.created, Model: m.model,
			Choices: choices, Usage: usage,
		}, false))
	}
	delta := func(d vlDelta) { add([]vlChunkChoice{{Delta: d}}, nil) }
	str := func(s string) *string { return &s }

	delta(vlDelta{Role: "assistant", Content: str("")})
	for _, piece := range splitText(m.text) {
		delta(vlDelta{Content: str(piece)})
	}
	for i, tc := range m.tools {
		delta(vlDelta{ToolCalls: []vlToolCallDelta{{ID: tc.ID, Type: "function", Index: i, Function: vlFunctionDelta{Name: tc.Name}}}})
		for _, frag := range splitArgs(tc.Arguments) {
			delta(vlDelta{ToolCalls: []vlToolCallDelta{{Index: i, Function: vlFunctionDelta{Arguments: frag}}}})
		}
	}
	finish := m.finish
	last := vlDelta{}
	if len(m.tools) == 0 {
		last.Content = str("")
	}
	add([]vlChunkChoice{{Delta: last, FinishReason: &finish, StopReason: jsonNull}}, nil)
	if m.includeUsage {
		u := m.usage
		add([]vlChunkChoice{}, &vlUsageChunk{u.Prompt, u.Prompt + u.Completion, u.Completion, s.vllmDetails(m)})
	}
	return out
}

// ---- splitting ----

// splitText cuts text into stream pieces the way token streams look: one
// word per piece, each carrying its leading space, with long words cut at
// 10 bytes on rune boundaries.
func splitText(s string) []string {
	return fakekit.WordPieces(s, isBlank, 10)
}

// argFragmentSizes are the byte sizes argument fragments cycle through;
// none lines up with JSON tokens, so fragments split mid-token.
var argFragmentSizes = []int{7, 5, 9, 4}

// splitArgs cuts a tool call's arguments into fragments.
func splitArgs(s string) []string {
	return fakekit.CutRunes(s, argFragmentSizes)
}

// isBlank reports whether c is a space, the only separator splitText
// breaks words at.
func isBlank(c byte) bool { return c == ' ' }
