package geminifake

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Model is one entry of the model catalogue (GET /v1beta/models).
type Model struct {
	// Name is the bare model name, e.g. "gemini-2.5-flash" (served as
	// "models/gemini-2.5-flash").
	Name             string
	Version          string
	DisplayName      string
	Description      string
	InputTokenLimit  int
	OutputTokenLimit int
	// SupportedGenerationMethods default to generateContent, countTokens,
	// createCachedContent and batchGenerateContent.
	SupportedGenerationMethods []string
	Temperature                float64
	TopP                       float64
	TopK                       int
	MaxTemperature             float64
	// Thinking marks a thinking model: its first function call of each
	// reply carries a generated thought signature.
	Thinking bool
}

// wireModel fixes the field order of the real Model resource.
type wireModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version,omitempty"`
	DisplayName                string   `json:"displayName,omitempty"`
	Description                string   `json:"description,omitempty"`
	InputTokenLimit            int      `json:"inputTokenLimit,omitempty"`
	OutputTokenLimit           int      `json:"outputTokenLimit,omitempty"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods,omitempty"`
	Temperature                float64  `json:"temperature,omitempty"`
	TopP                       float64  `json:"topP,omitempty"`
	TopK                       int      `json:"topK,omitempty"`
	MaxTemperature             float64  `json:"maxTemperature,omitempty"`
	Thinking                   bool     `json:"thinking,omitempty"`
}

var defaultMethods = []string{"generateContent", "countTokens", "createCachedContent", "batchGenerateContent"}

func (m Model) wire() wireModel {
	return wireModel{
		Name: "models/" + m.Name, Version: m.Version, DisplayName: m.DisplayName, Description: m.Description,
		InputTokenLimit: m.InputTokenLimit, OutputTokenLimit: m.OutputTokenLimit,
		SupportedGenerationMethods: cmpOrSlice(m.SupportedGenerationMethods, defaultMethods),
		Temperature:                m.Temperature, TopP: m.TopP, TopK: m.TopK, MaxTemperature: m.MaxTemperature,
		Thinking: m.Thinking,
	}
}

func cmpOrSlice(v, def []string) []string {
	if len(v) == 0 {
		return def
	}
	return v
}

// supports reports whether the model supports a generation method
// (streamGenerateContent counts as generateContent).
func (m Model) supports(method string) bool {
	if method == "streamGenerateContent" {
		method = "generateContent"
	}
	return slices.Contains(cmpOrSlice(m.SupportedGenerationMethods, defaultMethods), method)
}

func textModel(name, display, desc string, thinking bool) Model {
	return Model{
		Name: name, Version: "001", DisplayName: display, Description: desc,
		InputTokenLimit: 1_048_576, OutputTokenLimit: 65_536,
		Temperature: 1, TopP: 0.95, TopK: 64, MaxTemperature: 2, Thinking: thinking,
	}
}

// DefaultModels is the catalogue served unless [WithModels] replaces it.
// The names are real model ids; versions, descriptions and sampling
// defaults are illustrative.
func DefaultModels() []Model {
	flash2 := textModel("gemini-2.0-flash", "Gemini 2.0 Flash", "Gemini 2.0 Flash", false)
	flash2.OutputTokenLimit, flash2.TopK, flash2.TopP = 8192, 40, 0.95
	return []Model{
		flash2,
		textModel("gemini-2.5-flash", "Gemini 2.5 Flash", "Stable version of Gemini 2.5 Flash, our mid-size multimodal model that supports up to 1 million tokens.", true),
		textModel("gemini-2.5-pro", "Gemini 2.5 Pro", "Stable release of Gemini 2.5 Pro.", true),
		textModel("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", "Stable version of Gemini 2.5 Flash-Lite.", true),
		textModel("gemini-3-flash-preview", "Gemini 3 Flash Preview", "Gemini 3 Flash Preview.", true),
		textModel("gemini-3.1-pro-preview", "Gemini 3.1 Pro Preview", "Gemini 3.1 Pro Preview.", true),
		textModel("gemini-3.1-flash-lite", "Gemini 3.1 Flash-Lite", "Gemini 3.1 Flash-Lite.", true),
		textModel("gemini-3.5-flash", "Gemini 3.5 Flash", "Gemini 3.5 Flash.", true),
		textModel("gemini-3.5-flash-lite", "Gemini 3.5 Flash-Lite", "Gemini 3.5 Flash-Lite.", true),
		textModel("gemini-3.6-flash", "Gemini 3.6 Flash", "Gemini 3.6 Flash.", true),
	}
}

// bareModel strips a leading "models/" from a model name.
func bareModel(name string) string { return strings.TrimPrefix(name, "models/") }

// requiresSignatures reports whether model is Gemini 3 or later, for which
// the API enforces function-call thought signatures.
func requiresSignatures(model string) bool {
	rest, ok := strings.CutPrefix(bareModel(model), "gemini-")
	if !ok {
		return false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	major, err := strconv.Atoi(rest[:end])
	return err == nil && major >= 3
}

func (s *Server) findModel(name string) (Model, bool) {
	name = bareModel(name)
	i := slices.IndexFunc(s.cfg.models, func(m Model) bool { return m.Name == name })
	if i < 0 {
		return Model{}, false
	}
	return s.cfg.models[i], true
}

type wireModelPage struct {
	Models        []wireModel `json:"models"`
	NextPageToken string      `json:"nextPageToken,omitempty"`
}

// modelPage pages models like the real API: pageSize (default 50, at most
// 1000) and an opaque pageToken. It returns an error message for a bad
// query.
func modelPage(models []Model, q url.Values) (wireModelPage, string) {
	size := 50
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return wireModelPage{}, "Invalid value at 'page_size' (TYPE_INT32), \"" + s + "\""
		case n < 0:
			return wireModelPage{}, "page_size must be non-negative."
		case n > 0:
			size = min(n, 1000)
		}
	}
	start := 0
	if tok := q.Get("pageToken"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		after, ok := strings.CutPrefix(string(raw), "after:")
		i := slices.IndexFunc(models, func(m Model) bool { return m.Name == after })
		if err != nil || !ok || i < 0 {
			return wireModelPage{}, "Invalid page token."
		}
		start = i + 1
	}
	end := min(start+size, len(models))
	out := wireModelPage{Models: []wireModel{}}
	for _, m := range models[start:end] {
		out.Models = append(out.Models, m.wire())
	}
	if end < len(models) && end > start {
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte("after:" + models[end-1].Name))
	}
	return out, ""
}
