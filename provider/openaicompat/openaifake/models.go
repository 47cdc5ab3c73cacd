package openaifake

import (
	"strings"
	"time"
)

// Model is one entry of the fake's catalogue.
type Model struct {
	// ID is the model id GET /v1/models lists and requests name.
	ID string
	// Created is reported as the model's "created" Unix time.
	Created time.Time
	// OwnedBy is reported as "owned_by" (default per flavour: "system",
	// "library", "vllm").
	OwnedBy string
	// ContextWindow is the model's context length in tokens; 0 means
	// unknown (no overflow check). For vLLM it is also max_model_len.
	ContextWindow int
	// Snapshot, on the OpenAI flavour, is the dated model name responses
	// report for this alias (e.g. "gpt-5-mini-2025-08-07"); "" reports the
	// requested name.
	Snapshot string
}

// DefaultOllamaContext is the context window the Ollama flavour assumes for
// a model missing from its catalogue: Ollama's default num_ctx
// (OLLAMA_CONTEXT_LENGTH) of 4096 tokens.
const DefaultOllamaContext = 4096

// DefaultOllamaVersion is what GET /api/version reports by default.
const DefaultOllamaVersion = "0.12.6"

func unix(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// DefaultModels is the catalogue a flavour serves unless [WithModels]
// replaces it. The ids are real; creation dates are illustrative.
func DefaultModels(f Flavor) []Model {
	switch f {
	case FlavorOllama:
		return []Model{
			{ID: "llama3.2:latest", Created: unix(2026, 10, 2), OwnedBy: "library", ContextWindow: DefaultOllamaContext},
			{ID: "qwen3:8b", Created: unix(2026, 9, 14), OwnedBy: "library", ContextWindow: DefaultOllamaContext},
			{ID: "gpt-oss:20b", Created: unix(2026, 8, 30), OwnedBy: "library", ContextWindow: DefaultOllamaContext},
		}
	case FlavorVLLM:
		return []Model{
			{ID: "Qwen/Qwen2.5-7B-Instruct", Created: unix(2026, 11, 1), OwnedBy: "vllm", ContextWindow: 32768},
		}
	default:
		return []Model{
			{ID: "gpt-5", Created: unix(2025, 8, 5), OwnedBy: "system", ContextWindow: 400_000, Snapshot: "gpt-5-2025-08-07"},
			{ID: "gpt-5-mini", Created: unix(2025, 8, 5), OwnedBy: "system", ContextWindow: 400_000, Snapshot: "gpt-5-mini-2025-08-07"},
			{ID: "gpt-5-nano", Created: unix(2025, 8, 5), OwnedBy: "system", ContextWindow: 400_000, Snapshot: "gpt-5-nano-2025-08-07"},
			{ID: "gpt-4.1-mini", Created: unix(2025, 4, 10), OwnedBy: "system", ContextWindow: 1_047_576, Snapshot: "gpt-4.1-mini-2025-04-14"},
			{ID: "gpt-4o-mini", Created: unix(2024, 7, 16), OwnedBy: "system", ContextWindow: 128_000, Snapshot: "gpt-4o-mini-2024-07-18"},
			{ID: "o4-mini", Created: unix(2025, 4, 9), OwnedBy: "system", ContextWindow: 200_000, Snapshot: "o4-mini-2025-04-16"},
		}
	}
}

// findModel looks id up in the catalogue. Ollama resolves a name without a
// tag to ":latest", as `ollama` does.
func (s *Server) findModel(id string) (Model, bool) {
	for _, m := range s.cfg.models {
		if m.ID == id {
			return m, true
		}
	}
	if s.cfg.flavor == FlavorOllama && !strings.Contains(id, ":") {
		return s.findModel(id + ":latest")
	}
	return Model{}, false
}

// contextWindow is the window to check a request against (0: none).
func (s *Server) contextWindow(model string) int {
	if m, ok := s.findModel(model); ok && m.ContextWindow > 0 {
		return m.ContextWindow
	}
	if s.cfg.flavor == FlavorOllama {
		return s.cfg.ollamaDefaultNC
	}
	return 0
}

// reasoningModel reports whether OpenAI rejects max_tokens for model (the
// GPT-5 family and the o-series).
func reasoningModel(model string) bool {
	if strings.HasPrefix(model, "gpt-5") {
		return true
	}
	if len(model) >= 2 && model[0] == 'o' && model[1] >= '1' && model[1] <= '9' {
		return true
	}
	return false
}

// ownedBy is the owned_by of m, with the flavour's default.
func (s *Server) ownedBy(m Model) string {
	if m.OwnedBy != "" {
		return m.OwnedBy
	}
	switch s.cfg.flavor {
	case FlavorOllama:
		return "library"
	case FlavorVLLM:
		return "vllm"
	}
	return "system"
}
