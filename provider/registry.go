package provider

import (
	"fmt"
	"net/http"
	"time"
)

// CredentialField describes one credential an adapter type needs: the
// spec's credentials schema. Secret fields are never printed, logged or
// stored in plain text by CortexBuild.
type CredentialField struct {
	// Name is the key under credentials: in the config ("api_key").
	Name string `json:"name"`
	// EnvVars are the environment variables consulted, in order, when the
	// config does not set the field and the provider talks to the vendor's
	// own endpoint (see [Registration.EnvVarsFor]).
	EnvVars []string `json:"env_vars,omitempty"`
	// EnvProfiles, when set, limits EnvVars to these profiles (the
	// OpenAI-compatible adapter's OPENAI_API_KEY, to "openai").
	EnvProfiles []string `json:"env_profiles,omitempty"`
	// Secret marks values to redact wherever they are shown.
	Secret bool `json:"secret"`
	// Required fields must be set for the adapter to start; an optional
	// field may be empty (a local server that ignores keys).
	Required bool `json:"required"`
	// RequiredProfiles makes an optional field required for these
	// profiles (the OpenAI-compatible adapter's key, for "openai").
	RequiredProfiles []string `json:"required_profiles,omitempty"`
	// Description tells the user what to put there.
	Description string `json:"description"`
}

// RequiredFor reports whether the field must be set for profile.
func (f CredentialField) RequiredFor(profile string) bool {
	if f.Required {
		return true
	}
	for _, p := range f.RequiredProfiles {
		if p == profile {
			return true
		}
	}
	return false
}

// Mask returns how a credential value may be shown: secrets as a fixed
// marker that reveals neither content nor length, other fields as is.
func (f CredentialField) Mask(value string) string {
	if value == "" {
		return "(not set)"
	}
	if f.Secret {
		return "[redacted]"
	}
	return value
}

// Settings is what a factory receives to build one adapter instance.
type Settings struct {
	// Name is the instance name from the configuration.
	Name string
	// Profile selects a flavour of the adapter type (for the
	// OpenAI-compatible adapter: openai, ollama, vllm, lmstudio, gateway).
	Profile string
	// BaseURL overrides the adapter type's default endpoint.
	BaseURL string
	// Credentials maps credential field names to resolved values.
	Credentials map[string]string
	// Models overrides the adapter type's default tier-to-model mapping.
	Models map[Tier]string
	// Capabilities are extra capabilities the configuration declares for
	// this endpoint's models (a local vision model, a long-context one).
	Capabilities CapabilitySet
	// Timeout is the per-attempt timeout used when a request sets none; zero
	// means the request default (300 s).
	Timeout time.Duration
	// MaxResponseBytes bounds the bytes of one response body (a unary
	// answer, or a whole stream); zero or less means the adapters' default
	// (32 MiB).
	MaxResponseBytes int64
	// HTTPClient carries every request; nil means a plain client. The
	// locality gate supplies one whose dialer refuses unapproved addresses.
	HTTPClient *http.Client
	// Pricer prices usage; nil means results carry zero cost and estimates
	// fail, which the orchestrator refuses for paid endpoints.
	Pricer Pricer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Factory builds an adapter instance from settings.
type Factory func(Settings) (Adapter, error)

// Registration describes one adapter type: what it needs, what it can do,
// and how to build it.
type Registration struct {
	// Type is the name used as type: in the config ("anthropic").
	Type string `json:"type"`
	// Description is one line for listings.
	Description string `json:"description"`
	// DefaultBaseURL is the endpoint used when the config sets none.
	DefaultBaseURL string `json:"default_base_url,omitempty"`
	// Profiles are the valid profile names; empty when the type has none.
	Profiles []string `json:"profiles,omitempty"`
	// Credentials is the credentials schema.
	Credentials []CredentialField `json:"credentials"`
	// DefaultModels is the tier mapping used when the config sets none.
	DefaultModels map[Tier]string `json:"default_models,omitempty"`
	// Capabilities is what the type can do with at least one model.
	Capabilities CapabilitySet `json:"capabilities"`
	// New builds an instance.
	New Factory `json:"-"`
}

// Credential returns the schema field called name.
func (r Registration) Credential(name string) (CredentialField, bool) {
	for _, f := range r.Credentials {
		if f.Name == name {
			return f, true
		}
	}
	return CredentialField{}, false
}

// Registry is the set of adapter types CortexBuild can build. It is a plain
// value built from an explicit list (see [NewRegistry]); nothing registers
// itself behind the caller's back.
type Registry struct {
	byType map[string]Registration
	order  []string
}

// NewRegistry returns a registry of regs, in order. A registration without
// a type or factory, or a type listed twice, is an error.
func NewRegistry(regs ...Registration) (*Registry, error) {
	r := &Registry{byType: make(map[string]Registration, len(regs))}
	for i, reg := range regs {
		if reg.Type == "" {
			return nil, fmt.Errorf("provider: registration %d has no type", i)
		}
		if reg.New == nil {
			return nil, fmt.Errorf("provider: registration %q has no factory", reg.Type)
		}
		if _, dup := r.byType[reg.Type]; dup {
			return nil, fmt.Errorf("provider: type %q registered twice", reg.Type)
		}
		for t := range reg.DefaultModels {
			if !t.Valid() {
				return nil, fmt.Errorf("provider: registration %q maps invalid tier %q", reg.Type, string(t))
			}
		}
		r.byType[reg.Type] = reg
		r.order = append(r.order, reg.Type)
	}
	return r, nil
}

// Types returns the registered type names in registration order.
func (r *Registry) Types() []string { return append([]string(nil), r.order...) }

// All returns the registrations in registration order.
func (r *Registry) All() []Registration {
	out := make([]Registration, len(r.order))
	for i, t := range r.order {
		out[i] = r.byType[t]
	}
	return out
}

// Lookup returns the registration of typ. An unknown type is an error that
// lists the known ones and suggests the nearest.
func (r *Registry) Lookup(typ string) (Registration, error) {
	if reg, ok := r.byType[typ]; ok {
		return reg, nil
	}
	if len(r.order) == 0 {
		return Registration{}, fmt.Errorf("unknown provider type %q: no provider types are registered", typ)
	}
	return Registration{}, fmt.Errorf("unknown provider type %q%s; known types: %s", typ, didYouMean(typ, r.order), joinQuoted(r.order))
}

// New builds an adapter of type typ.
func (r *Registry) New(typ string, s Settings) (Adapter, error) {
	reg, err := r.Lookup(typ)
	if err != nil {
		return nil, err
	}
	return reg.New(s)
}
