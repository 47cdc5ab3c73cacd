package critic

import (
	"regexp"
	"strings"
)

// dated matches the snapshot suffixes vendors put on model ids
// (claude-sonnet-4-5-20250929, gpt-4o-2024-08-06, gemini-…@001) and the
// "latest" aliases.
var dated = regexp.MustCompile(`([-@](\d{8}|\d{4}-\d{2}-\d{2}|\d{3})|[-:]latest)$`)

// CanonicalModel reduces a model id to what identifies the model: lower
// case, without a routing prefix ("anthropic/", "models/"), a snapshot date
// or a "latest" tag. Two ids with the same canonical form name the same
// model.
func CanonicalModel(id string) string {
	s := strings.ToLower(strings.TrimSpace(id))
	if i := strings.LastIndex(s, "/"); i >= 0 {
		s = s[i+1:]
	}
	for {
		t := dated.ReplaceAllString(s, "")
		if t == s {
			return s
		}
		s = t
	}
}

// SameModel reports whether a and b name the same model (see
// [CanonicalModel]). Empty ids name nothing.
func SameModel(a, b string) bool {
	ca, cb := CanonicalModel(a), CanonicalModel(b)
	return ca != "" && ca == cb
}

// families maps the leading word of a model id to the vendor that trained
// it. Serving a model through another endpoint (OpenRouter, Ollama, vLLM)
// does not change its vendor: an independent review needs other weights,
// not another URL.
var families = []struct{ prefix, vendor string }{
	{"claude", "anthropic"},
	{"gpt-", "openai"}, {"gpt4", "openai"}, {"chatgpt", "openai"}, {"o1", "openai"}, {"o3", "openai"}, {"o4", "openai"}, {"codex", "openai"},
	{"gemini", "google"}, {"gemma", "google"},
	{"llama", "meta"}, {"codellama", "meta"},
	{"mistral", "mistral"}, {"mixtral", "mistral"}, {"codestral", "mistral"}, {"devstral", "mistral"}, {"magistral", "mistral"}, {"ministral", "mistral"},
	{"qwen", "alibaba"}, {"qwq", "alibaba"},
	{"deepseek", "deepseek"},
	{"grok", "xai"},
	{"phi", "microsoft"},
	{"command", "cohere"},
	{"kimi", "moonshot"},
	{"glm", "zhipu"},
}

// VendorOf names the vendor whose model id is, from the model's family
// ("claude-…" is anthropic, "gpt-…" openai, "llama…" meta), or "" when
// the family is unknown.
func VendorOf(model string) string {
	s := CanonicalModel(model)
	for _, f := range families {
		if strings.HasPrefix(s, f.prefix) {
			return f.vendor
		}
	}
	return ""
}
