package gemini

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Metadata keys this adapter reads and writes.
const (
	// MetaThoughtSignature is a part's or tool call's thought signature,
	// base64 as a JSON string, echoed back unchanged (Gemini 3 rejects a
	// function call without it).
	MetaThoughtSignature = "gemini.thought_signature"
	// MetaSyntheticID marks a tool call id the adapter made up because
	// Gemini sent none; it is not sent back.
	MetaSyntheticID = "gemini.synthetic_id"
)

// skipSignature is the thoughtSignature the API documents for a function
// call that has no real one (a history from another model or provider, or
// one whose signatures were lost): Gemini 3 then skips its validation
// instead of refusing the request.
var skipSignature = []byte("skip_thought_signature_validator")

// needsSignatures reports whether model refuses a function call without a
// thought signature in the current turn: Gemini 3 and later.
func needsSignatures(model string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(model, "models/"), "gemini-")
	if !ok {
		return false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	major, err := strconv.Atoi(rest[:end])
	return err == nil && major >= 3
}

// syntheticID makes up a tool call id for a call Gemini sent without one,
// unique across the conversation's turns (a client keys its tool results,
// and the gateway the call's kept state, by it).
func syntheticID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
}

func signature(m provider.Metadata) []byte {
	raw, ok := m[MetaThoughtSignature]
	if !ok {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

func signatureMeta(sig []byte) provider.Metadata {
	if len(sig) == 0 {
		return nil
	}
	v, _ := json.Marshal(base64.StdEncoding.EncodeToString(sig))
	return provider.Metadata{MetaThoughtSignature: v}
}

// config builds the generation config: system instruction, function
// declarations with their full JSON Schema, tool choice, output limit.
func (a *Adapter) config(req *provider.Request, model string) (*generateRequest, error) {
	cfg := &generationConfig{MaxOutputTokens: int32(min(a.base.MaxTokens(Namespace, model, req), 1<<30))}
	body := &generateRequest{GenerationConfig: cfg}
	if req.System != "" {
		body.SystemInstruction = &content{Parts: []*part{{Text: req.System}}}
	}
	if err := a.sampling(cfg, req, model); err != nil {
		return nil, err
	}
	schema, err := a.base.ResponseSchema(req, model, a.ModelCapabilities(model))
	if err != nil {
		return nil, err
	}
	if schema != nil {
		cfg.ResponseMIMEType, cfg.ResponseJSONSchema = "application/json", schema
	}
	if len(req.Tools) > 0 {
		tl := &tool{}
		for i, t := range req.Tools {
			fd := &functionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.InputSchema) > 0 {
				var schema map[string]any
				if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
					return nil, a.base.BadRequest(model, fmt.Sprintf("tools[%d] %q: input_schema: %v", i, t.Name, err))
				}
				fd.ParametersJSONSchema = schema
			}
			tl.FunctionDeclarations = append(tl.FunctionDeclarations, fd)
		}
		body.Tools = []*tool{tl}
		fc := &functionCallingConfig{Mode: modeAuto}
		switch req.ToolChoice {
		case "", provider.ToolChoiceAuto:
		case provider.ToolChoiceNone:
			fc.Mode = modeNone
		case provider.ToolChoiceRequired:
			fc.Mode = modeAny
		default:
			fc.Mode, fc.AllowedFunctionNames = modeAny, []string{string(req.ToolChoice)}
		}
		body.ToolConfig = &toolConfig{FunctionCallingConfig: fc}
	}
	return body, nil
}

// maxStopSequences is how many stopSequences Gemini takes.
const maxStopSequences = 5

// sampling sets temperature, topP, topK, seed, stopSequences and
// thinkingConfig, each only when the request sets it and the model honours
// it.
func (a *Adapter) sampling(cfg *generationConfig, req *provider.Request, model string) error {
	caps := a.ModelCapabilities(model)
	if caps.Has(provider.CapSampling) {
		if req.Temperature != nil {
			cfg.Temperature = ptr(float32(*req.Temperature))
		}
		if req.TopP != nil {
			cfg.TopP = ptr(float32(*req.TopP))
		}
	}
	if req.TopK != nil && caps.Has(provider.CapTopK) {
		cfg.TopK = ptr(float32(*req.TopK))
	}
	if req.Seed != nil && caps.Has(provider.CapSeed) {
		if *req.Seed < math.MinInt32 || *req.Seed > math.MaxInt32 {
			return a.base.BadRequest(model, fmt.Sprintf("seed %d does not fit Gemini's 32-bit seed", *req.Seed))
		}
		cfg.Seed = ptr(int32(*req.Seed))
	}
	if len(req.Stop) > maxStopSequences {
		return a.base.BadRequest(model, fmt.Sprintf("Gemini takes at most %d stop sequences, got %d", maxStopSequences, len(req.Stop)))
	}
	cfg.StopSequences = req.Stop
	if r := req.Reasoning; r != nil && caps.Has(provider.CapReasoning) {
		cfg.ThinkingConfig = thinking(r, model)
	}
	return nil
}

// thinkingConfig maps a reasoning setting: on Gemini 3 and later an effort
// is a thinkingLevel (the two cannot be sent together), and a budget alone
// a thinkingBudget; earlier models take only a thinkingBudget, which an
// effort alone stands for. Thought summaries are asked for.
func thinking(r *provider.Reasoning, model string) *thinkingConfig {
	tc := &thinkingConfig{IncludeThoughts: true}
	if needsSignatures(model) && r.Effort != "" {
		tc.ThinkingLevel = strings.ToUpper(string(r.Effort))
	} else if b := r.EffectiveBudget(); b > 0 {
		tc.ThinkingBudget = ptr(int32(b))
	}
	return tc
}

// contents maps the conversation. Tool results become functionResponse
// parts named after the call they answer; assistant turns keep their
// thought signatures byte for byte.
func (a *Adapter) contents(req *provider.Request, model string) ([]*content, error) {
	conv := req.Conversation()
	calls := map[string]*provider.ToolCall{}
	for _, m := range conv {
		for _, p := range m.Parts {
			if p.ToolCall != nil {
				calls[p.ToolCall.ID] = p.ToolCall
			}
		}
	}
	out := make([]*content, 0, len(conv))
	for i, m := range conv {
		c := &content{Role: roleUser}
		if m.Role == provider.RoleAssistant {
			c.Role = roleModel
		}
		firstCall := true // of this turn: the one whose signature Gemini 3 checks
		for j, p := range m.Parts {
			switch p.Type {
			case provider.PartText:
				if p.Text != "" || len(signature(p.Meta)) > 0 {
					c.Parts = append(c.Parts, &part{Text: p.Text, ThoughtSignature: signature(p.Meta)})
				}
			case provider.PartReasoning:
				if sig := signature(p.Meta); len(sig) > 0 {
					c.Parts = append(c.Parts, &part{Text: p.Text, Thought: true, ThoughtSignature: sig})
				}
			case provider.PartImage:
				if p.Image.URL != "" {
					return nil, a.base.BadRequest(model, fmt.Sprintf("messages[%d].parts[%d]: Gemini takes images inline: send the image's bytes, not a URL", i, j))
				}
				c.Parts = append(c.Parts, &part{InlineData: &blob{MIMEType: p.Image.MediaType, Data: p.Image.Data}})
			case provider.PartToolCall:
				args := map[string]any{}
				if len(p.ToolCall.Arguments) > 0 {
					if err := json.Unmarshal(p.ToolCall.Arguments, &args); err != nil {
						return nil, a.base.BadRequest(model, fmt.Sprintf("messages[%d].parts[%d]: tool call arguments: %v", i, j, err))
					}
				}
				fc := &functionCall{Name: p.ToolCall.Name, Args: args}
				if _, synthetic := p.ToolCall.Meta[MetaSyntheticID]; !synthetic {
					fc.ID = p.ToolCall.ID
				}
				sig := signature(p.ToolCall.Meta)
				if len(sig) == 0 && firstCall && needsSignatures(model) {
					sig = skipSignature
				}
				firstCall = false
				c.Parts = append(c.Parts, &part{FunctionCall: fc, ThoughtSignature: sig})
			case provider.PartToolResult:
				tr := p.ToolResult
				name := tr.Name
				fr := &functionResponse{}
				if call, ok := calls[tr.CallID]; ok {
					if name == "" {
						name = call.Name
					}
					if _, synthetic := call.Meta[MetaSyntheticID]; !synthetic {
						fr.ID = tr.CallID
					}
				}
				if name == "" {
					return nil, a.base.BadRequest(model, fmt.Sprintf("messages[%d].parts[%d]: Gemini needs the tool name of result %q: set ToolResult.Name or include the call", i, j, tr.CallID))
				}
				fr.Name = name
				if tr.IsError {
					fr.Response = map[string]any{"error": tr.Content}
				} else {
					fr.Response = map[string]any{"result": tr.Content}
				}
				c.Parts = append(c.Parts, &part{FunctionResponse: fr})
			}
		}
		if len(c.Parts) == 0 {
			return nil, a.base.BadRequest(model, fmt.Sprintf("messages[%d] has no content Gemini can take", i))
		}
		out = append(out, c)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
