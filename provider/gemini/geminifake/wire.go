package geminifake

import (
	"bytes"
	"encoding/json"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// The wire structs below fix the field order of the real API's JSON, which
// follows proto field numbers (see testdata/real).

type wireResponse struct {
	Candidates     []wireCandidate     `json:"candidates,omitempty"`
	PromptFeedback *wirePromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *wireUsage          `json:"usageMetadata,omitempty"`
	ModelVersion   string              `json:"modelVersion,omitempty"`
	ResponseID     string              `json:"responseId,omitempty"`
}

type wireCandidate struct {
	Content       wireContent    `json:"content"`
	FinishReason  string         `json:"finishReason,omitempty"`
	Index         int            `json:"index"`
	FinishMessage string         `json:"finishMessage,omitempty"`
	SafetyRatings []SafetyRating `json:"safetyRatings,omitempty"`
}

type wireContent struct {
	Parts []wirePart `json:"parts,omitempty"`
	Role  string     `json:"role"`
}

type wirePart struct {
	Text             string            `json:"text,omitempty"`
	FunctionCall     *wireFunctionCall `json:"functionCall,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

type wireFunctionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	ID   string          `json:"id,omitempty"`
}

type wirePromptFeedback struct {
	BlockReason   string         `json:"blockReason"`
	SafetyRatings []SafetyRating `json:"safetyRatings,omitempty"`
}

type wireUsage struct {
	PromptTokenCount           int             `json:"promptTokenCount,omitempty"`
	CandidatesTokenCount       int             `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount            int             `json:"totalTokenCount,omitempty"`
	CachedContentTokenCount    int             `json:"cachedContentTokenCount,omitempty"`
	PromptTokensDetails        []modalityCount `json:"promptTokensDetails,omitempty"`
	CacheTokensDetails         []modalityCount `json:"cacheTokensDetails,omitempty"`
	ToolUsePromptTokenCount    int             `json:"toolUsePromptTokenCount,omitempty"`
	ToolUsePromptTokensDetails []modalityCount `json:"toolUsePromptTokensDetails,omitempty"`
	ThoughtsTokenCount         int             `json:"thoughtsTokenCount,omitempty"`
	ServiceTier                string          `json:"serviceTier,omitempty"`
}

type modalityCount struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

func textTokens(n int) []modalityCount {
	if n <= 0 {
		return nil
	}
	return []modalityCount{{"TEXT", n}}
}

// resolved is a Reply with every default filled in, ready to be written.
type resolved struct {
	modelVersion  string
	responseID    string
	thought       *Thought
	text          string
	textSignature string
	calls         []FunctionCall // IDs set, Args compact and non-empty
	finishReason  string
	finishMessage string
	usage         Usage
	blockReason   string
	safety        []SafetyRating
	serviceTier   string
}

// resolve fills in every default of a success (or blocked) reply and
// remembers the thought signatures it issues.
func (s *Server) resolve(reply Reply, model Model, body []byte) *resolved {
	res := &resolved{
		modelVersion:  cmpOr(reply.ModelVersion, model.Name),
		responseID:    cmpOr(reply.ResponseID, s.newResponseID()),
		text:          reply.Text,
		finishReason:  cmpOr(reply.FinishReason, "STOP"),
		finishMessage: reply.FinishMessage,
		usage:         reply.Usage,
		blockReason:   reply.BlockReason,
		safety:        reply.SafetyRatings,
		serviceTier:   s.cfg.serviceTier,
	}
	if res.blockReason != "" {
		if res.safety == nil && res.blockReason == "SAFETY" {
			res.safety = DefaultSafetyRatings()
		}
		if res.usage == (Usage{}) {
			res.usage = Usage{Prompt: CountTokens(model.Name, body)}
		}
		return res
	}
	outBytes := len(reply.Text)
	if t := reply.Thought; t != nil {
		res.thought = &Thought{Text: t.Text, Signature: t.Signature}
	}
	for i, fc := range reply.FunctionCalls {
		args := []byte("{}")
		if len(fc.Args) > 0 {
			args = compactJSON(fc.Args) // validated as an object already
		}
		c := FunctionCall{ID: fc.ID, Name: fc.Name, Args: args, ThoughtSignature: fc.ThoughtSignature}
		if c.ID == "" && !reply.OmitCallIDs {
			c.ID = s.newCallID()
		}
		if c.ThoughtSignature == "" && i == 0 && model.Thinking && !reply.OmitSignatures {
			c.ThoughtSignature = s.newSignature()
		}
		if c.ThoughtSignature != "" {
			s.remember(c.ThoughtSignature, c.ID, c.Name)
		}
		res.calls = append(res.calls, c)
		outBytes += len(c.Name) + len(c.Args)
	}
	if len(res.calls) > 0 && res.finishMessage == "" {
		res.finishMessage = "Model generated function call(s)."
	}
	res.textSignature = reply.TextSignature
	if res.textSignature == "" && res.text != "" && len(res.calls) == 0 && requiresSignatures(model.Name) && !reply.OmitSignatures {
		res.textSignature = s.newSignature()
	}
	if res.usage == (Usage{}) {
		res.usage = Usage{Prompt: CountTokens(model.Name, body), Candidates: max(1, (outBytes+3)/4)}
		if res.thought != nil {
			res.usage.Thoughts = max(1, (len(res.thought.Text)+3)/4)
		}
		// Generation stops at maxOutputTokens, thoughts included: a
		// derived answer never bills more.
		if limit := maxOutputTokens(body); limit > 0 && res.usage.Candidates+res.usage.Thoughts > limit {
			res.usage.Thoughts = min(res.usage.Thoughts, limit)
			if rest := limit - res.usage.Thoughts; rest > 0 {
				res.text, res.usage.Candidates, _ = fakekit.CapOutput(res.text, res.usage.Candidates, rest)
			} else {
				res.text, res.usage.Candidates = "", 0
			}
			res.finishReason = "MAX_TOKENS"
		}
	}
	return res
}

// usageWith reports the usage with candidates tokens so far.
func (m *resolved) usageWith(candidates int) *wireUsage {
	u := m.usage
	return &wireUsage{
		PromptTokenCount:           u.Prompt,
		CandidatesTokenCount:       candidates,
		TotalTokenCount:            u.Prompt + candidates + u.Thoughts + u.ToolUsePrompt,
		CachedContentTokenCount:    u.Cached,
		PromptTokensDetails:        textTokens(u.Prompt),
		CacheTokensDetails:         textTokens(u.Cached),
		ToolUsePromptTokenCount:    u.ToolUsePrompt,
		ToolUsePromptTokensDetails: textTokens(u.ToolUsePrompt),
		ThoughtsTokenCount:         u.Thoughts,
		ServiceTier:                m.serviceTier,
	}
}

func (m *resolved) thoughtPart() wirePart {
	return wirePart{Text: m.thought.Text, Thought: true, ThoughtSignature: m.thought.Signature}
}

func callPart(c FunctionCall) wirePart {
	return wirePart{FunctionCall: &wireFunctionCall{Name: c.Name, Args: c.Args, ID: c.ID}, ThoughtSignature: c.ThoughtSignature}
}

// unary is the non-streamed GenerateContentResponse.
func (m *resolved) unary() wireResponse {
	if m.blockReason != "" {
		return m.blocked()
	}
	var parts []wirePart
	if m.thought != nil {
		parts = append(parts, m.thoughtPart())
	}
	if m.text != "" {
		parts = append(parts, wirePart{Text: m.text, ThoughtSignature: m.textSignature})
	}
	for _, c := range m.calls {
		parts = append(parts, callPart(c))
	}
	return wireResponse{
		Candidates:    []wireCandidate{m.candidate(parts, true)},
		UsageMetadata: m.usageWith(m.usage.Candidates),
		ModelVersion:  m.modelVersion,
		ResponseID:    m.responseID,
	}
}

func (m *resolved) candidate(parts []wirePart, final bool) wireCandidate {
	c := wireCandidate{Content: wireContent{Parts: parts, Role: "model"}}
	if final {
		c.FinishReason = m.finishReason
		c.FinishMessage = m.finishMessage
		c.SafetyRatings = m.safety
	}
	return c
}

func (m *resolved) blocked() wireResponse {
	return wireResponse{
		PromptFeedback: &wirePromptFeedback{BlockReason: m.blockReason, SafetyRatings: m.safety},
		UsageMetadata:  m.usageWith(0),
		ModelVersion:   m.modelVersion,
		ResponseID:     m.responseID,
	}
}

// chunks is the sequence of streamed GenerateContentResponses: a thought
// chunk, the text cut into several chunks (each with only new text), then
// one chunk per function call (each whole). usageMetadata rides on every
// chunk with the running candidates count; the last chunk has the final
// counts, finishReason and finishMessage.
func (m *resolved) chunks() []wireResponse {
	if m.blockReason != "" {
		return []wireResponse{m.blocked()}
	}
	type item struct {
		part   wirePart
		weight int
	}
	var items []item
	if m.thought != nil {
		items = append(items, item{m.thoughtPart(), 0})
	}
	texts := splitText(m.text)
	for i, t := range texts {
		p := wirePart{Text: t}
		if i == len(texts)-1 {
			p.ThoughtSignature = m.textSignature
		}
		items = append(items, item{p, len(t)})
	}
	for _, c := range m.calls {
		items = append(items, item{callPart(c), len(c.Name) + len(c.Args)})
	}
	if len(items) == 0 {
		return []wireResponse{{
			Candidates:    []wireCandidate{m.candidate(nil, true)},
			UsageMetadata: m.usageWith(m.usage.Candidates),
			ModelVersion:  m.modelVersion,
			ResponseID:    m.responseID,
		}}
	}
	total := 0
	for _, it := range items {
		total += it.weight
	}
	var out []wireResponse
	cum := 0
	for i, it := range items {
		cum += it.weight
		last := i == len(items)-1
		cand := m.usage.Candidates
		if !last {
			if total > 0 {
				cand = (m.usage.Candidates*cum + total - 1) / total
			} else {
				cand = 0
			}
		}
		out = append(out, wireResponse{
			Candidates:    []wireCandidate{m.candidate([]wirePart{it.part}, last)},
			UsageMetadata: m.usageWith(cand),
			ModelVersion:  m.modelVersion,
			ResponseID:    m.responseID,
		})
	}
	return out
}

// marshal encodes v compactly, with <, > and & left literal like the API.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("geminifake: marshal: " + err.Error()) // only fixed wire types are encoded
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// pretty encodes v the way the API writes unary bodies: two-space indent,
// ": " after keys, a final newline.
func pretty(v any) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, marshal(v), "", "  "); err != nil {
		panic("geminifake: indent: " + err.Error())
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// streamJSON encodes v the way the API writes each streamed chunk: on one
// line, with a space after every colon and none after commas
// (`{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},…`).
func streamJSON(v any) []byte { return fakekit.ColonSpacedJSON(marshal(v)) }

// splitText cuts text into streamed chunks: three words per chunk (each
// word carrying its leading whitespace), very long words cut at 24 bytes on
// rune boundaries. The chunks concatenate to text.
func splitText(s string) []string {
	pieces := fakekit.WordPieces(s, isSpace, 24)
	var chunks []string
	for i := 0; i < len(pieces); i += 3 {
		end := min(i+3, len(pieces))
		c := ""
		for _, p := range pieces[i:end] {
			c += p
		}
		chunks = append(chunks, c)
	}
	return chunks
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
