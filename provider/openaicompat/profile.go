package openaicompat

import (
	"net"
	"net/url"
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Profile declares how one family of OpenAI-compatible servers differs from
// the Chat Completions baseline. Unknown servers get [Generic], which
// assumes as little as possible.
type Profile struct {
	// Name is the profile's name in llm-config.yaml.
	Name string
	// DefaultBaseURL is used when the configuration sets none ("" means
	// base_url is required).
	DefaultBaseURL string
	// StreamUsage: the server accepts stream_options.include_usage and
	// sends a final usage chunk. Without it, streamed usage is estimated.
	StreamUsage bool
	// MaxCompletionTokens: send max_completion_tokens (OpenAI's reasoning
	// models reject max_tokens); otherwise max_tokens.
	MaxCompletionTokens bool
	// CachedTokens: usage reports prompt_tokens_details.cached_tokens.
	CachedTokens bool
	// PromptCaching: the server caches prompt prefixes (OpenAI does so
	// automatically above 1,024 tokens).
	PromptCaching bool
	// DeveloperRole: send the system prompt as a developer message.
	DeveloperRole bool
	// ReasoningModels: the server's reasoning models (o1, o3, o4-mini,
	// gpt-5…) refuse temperature and top_p, so those models lack
	// [provider.CapSampling] and the adapter drops both.
	ReasoningModels bool
	// TopK: the server takes top_k as an extra sampling parameter.
	TopK bool
	// StructuredOutput: the server honours response_format json_schema.
	StructuredOutput bool
	// Responses: the server has the Responses API at /responses, so a
	// request a client sent in that protocol is relayed there as it is
	// (see [Adapter.SpeaksNative]); without it such a request takes the
	// translated route through Chat Completions.
	Responses bool
	// KeyRequired: an api_key must be configured.
	KeyRequired bool
	// Namespace is the price-catalog namespace; "" resolves per model (a
	// gateway serving several vendors).
	Namespace string
	// DefaultModels maps tiers to models when the configuration sets none.
	DefaultModels map[provider.Tier]string
	// Notes describes the server's quirks for listings and docs.
	Notes string
}

// The built-in profiles.
var (
	OpenAI = Profile{
		Name: "openai", DefaultBaseURL: "https://api.openai.com/v1/",
		StreamUsage: true, MaxCompletionTokens: true, CachedTokens: true, PromptCaching: true, DeveloperRole: true, KeyRequired: true, Responses: true,
		ReasoningModels: true, StructuredOutput: true, Namespace: "openai",
		DefaultModels: map[provider.Tier]string{
			provider.TierReasoningHeavy: "gpt-5", provider.TierBalanced: "gpt-5-mini", provider.TierFastCheap: "gpt-5-nano",
		},
		Notes: "OpenAI platform: max_completion_tokens, developer role, cached-token usage, x-ratelimit-* headers, the Responses API",
	}
	Ollama = Profile{
		Name: "ollama", DefaultBaseURL: "http://127.0.0.1:11434/v1/", StreamUsage: true, StructuredOutput: true, Namespace: "ollama",
		Notes: "Ollama: key ignored, tool calls arrive whole (and may reuse index 0), no cached tokens, no rate-limit headers, overflow may truncate silently",
	}
	VLLM = Profile{
		Name: "vllm", DefaultBaseURL: "http://127.0.0.1:8000/v1/", StreamUsage: true, TopK: true, StructuredOutput: true, Namespace: "vllm",
		Notes: "vLLM: error code is an integer, cached tokens only with --enable-prompt-tokens-details",
	}
	LMStudio = Profile{
		Name: "lmstudio", DefaultBaseURL: "http://127.0.0.1:1234/v1/", StructuredOutput: true, Namespace: "lmstudio",
		Notes: "LM Studio: usage after a stream is estimated, errors may be bare strings",
	}
	Gateway = Profile{
		Name: "gateway", StreamUsage: true,
		Notes: "a gateway (LiteLLM proxy, OpenRouter, Azure/Bedrock/Vertex behind one): base_url required; models priced by their vendor/model name",
	}
	Generic = Profile{
		Name: "", Notes: "an unknown OpenAI-compatible server: no stream_options, max_tokens, system role, estimated streamed usage",
	}
)

// Profiles lists the named profiles in display order.
var Profiles = []Profile{OpenAI, Ollama, VLLM, LMStudio, Gateway}

// ProfileNamed returns the profile called name; "" is [Generic].
func ProfileNamed(name string) (Profile, bool) {
	if name == "" {
		return Generic, true
	}
	for _, p := range Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// reasoningModel reports whether model is one of OpenAI's reasoning models
// (o1, o3, o4-mini, gpt-5 and its variants).
func reasoningModel(model string) bool {
	return strings.HasPrefix(model, "gpt-5") || len(model) >= 2 && model[0] == 'o' && model[1] >= '1' && model[1] <= '9'
}

// priceRef returns the catalog namespace and model id to price model with.
// A vendor-qualified id ("anthropic/claude-sonnet-4-6") names its
// namespace; otherwise the profile's namespace applies, or for a profile
// without one (gateway, generic) the model is looked up as OpenAI's unless
// the endpoint is on this machine, where models are free.
func (p Profile) priceRef(baseURL, model string) (ns, id string) {
	if vendor, rest, ok := strings.Cut(model, "/"); ok {
		switch vendor {
		case "anthropic", "openai":
			return vendor, rest
		case "gemini", "google", "vertex_ai":
			return "gemini", rest
		}
	}
	if p.Namespace != "" {
		return p.Namespace, model
	}
	if isLoopbackURL(baseURL) {
		return "ollama", model // every local namespace prices at zero
	}
	return "openai", model
}

// isLoopbackURL reports whether base names a loopback IP or localhost. It
// only chooses a price namespace; egress decisions are made on resolved
// addresses elsewhere.
func isLoopbackURL(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
