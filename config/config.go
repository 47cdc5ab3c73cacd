// Package config loads and validates a project's .cortexbuild/llm-config.yaml.
//
// Decoding is strict: an unknown key, a wrong type or a bad value is an
// error naming file:line:column and what to write instead, and every
// problem in the file is reported in one run. Secrets are written as
// ${ENV_VAR} references and resolved only when an adapter is built; they are
// never printed.
//
// The zero value of every section is a working default (see each field's
// comment), so an empty file, or none, is a valid configuration.
package config

import (
	"io/fs"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Dir and FileName locate the configuration inside a project.
const (
	Dir      = ".cortexbuild"
	FileName = "llm-config.yaml"
)

// CurrentVersion is the configuration format version this build reads.
const CurrentVersion = 1

// File is the whole configuration file.
type File struct {
	Pos yamlx.Pos `yaml:"-"`
	// Path is the file the configuration was read from ("" for defaults).
	Path string `yaml:"-"`
	// Secrets, when set, supplies credentials that neither the file nor
	// the environment sets (the web console's secrets file): [File.Resolve]
	// asks it last.
	Secrets CredentialSource `yaml:"-"`
	// perm is the permission bits of Path when Load read it (permKnown).
	perm      fs.FileMode
	permKnown bool

	Version       int                  `yaml:"version" desc:"Format version of this file. Only 1 exists; 0 or absent means 1."`
	Project       string               `yaml:"project" desc:"The project's id: what its budgets, spend, tasks, cache entries and gateway keys belong to, so that projects sharing a PostgreSQL ledger or a Redis cache stay apart. 1 to 100 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit. Default: an id kept in .cortexbuild/project-id, written on first use: the project directory's name and 8 random hex digits (e.g. my-service-3f9a1c2e), or, for a project that already has a ledger, keys or a journal, the id older versions derived from its path. Required by serve with store.backend postgres or cache.backend redis."`
	Orchestration *bool                `yaml:"orchestration" desc:"Turn on CortexBuild's own orchestration engine (calls providers directly). Default false: rendered mode, where host tools run the models. CORTEXBUILD_LLM=1 also turns it on."`
	Providers     map[string]*Provider `yaml:"providers" desc:"Provider endpoints by instance name (used in routing and agent preferences)."`
	Routing       Routing              `yaml:"routing" desc:"Provider preference and failover settings."`
	Agents        map[string]*Agent    `yaml:"agents" desc:"Per-agent overrides of the default routing (planner, critic, builder, tester_validator, security_compliance, optimizer, pr_reviewer, explore, recurrence_guard, enterprise_orchestrator), or custom agents that set a tier."`
	Budgets       Budgets              `yaml:"budgets" desc:"Task and monthly project budgets in USD."`
	Locality      Locality             `yaml:"locality" desc:"Egress rules: which endpoints may be reached."`
	Cache         Cache                `yaml:"cache" desc:"Response cache (deduplicates identical requests)."`
	Store         Store                `yaml:"store" desc:"Where the ledger, budgets and consent are kept."`
	Pricing       Pricing              `yaml:"pricing" desc:"Extra price catalogs for models the built-in catalog lacks."`
	Notifications Notifications        `yaml:"notifications" desc:"Where pauses, exhausted quotas and outages are reported."`
	Critic        Critic               `yaml:"critic" desc:"The critic gate: independent review of medium-or-higher risk tasks."`
	Observability Observability        `yaml:"observability" desc:"Structured logs, OpenTelemetry traces and Prometheus metrics. All off by default: nothing is sent and no port is opened unless configured."`
	Gateway       Gateway              `yaml:"gateway" desc:"cortexbuild serve: the OpenAI- and Anthropic-compatible gateway in front of the orchestrator."`
}

// Gateway configures 'cortexbuild serve'.
type Gateway struct {
	Pos yamlx.Pos `yaml:"-"`

	Listen            string                   `yaml:"listen" desc:"Address to listen on; default 127.0.0.1:8787 (loopback). The --listen flag overrides it."`
	MaxBodyBytes      int64                    `yaml:"max_body_bytes" desc:"Largest request body accepted, in bytes; larger ones get a 413. Default 33554432 (32 MiB)."`
	MaxInFlight       int                      `yaml:"max_in_flight" desc:"Most API requests served at once; one more is answered at once with the protocol's overloaded error (OpenAI 503, Anthropic 529) and retry-after: 1, so that memory stays bounded under overload. Default: sized from memory, a quarter of what the process may use (its cgroup limit, else physical memory) at 256 KiB per request, between 256 and 16384."`
	MaxInFlightPerKey int                      `yaml:"max_in_flight_per_key" desc:"Most API requests one virtual key may have in flight at once; one more is answered with the protocol's overloaded error and retry-after: 1, so that one client cannot hold every slot of gateway.max_in_flight. Default: half of gateway.max_in_flight, at least 64."`
	HeaderTimeout     time.Duration            `yaml:"header_timeout" desc:"How long a client may take to send a request's headers before its connection is closed, e.g. 10s. Default 10s."`
	BodyTimeout       time.Duration            `yaml:"body_timeout" desc:"How long a client may take to send a request's body once its headers are in; a slower one gets a 408 and its slot is freed. Default 60s."`
	AllowedHosts      []string                 `yaml:"allowed_hosts" desc:"Host names (name or name:port) the gateway answers to besides its listen address (and, on loopback, localhost, 127.0.0.1 and [::1] with its port), e.g. a reverse proxy's name. A request with another Host header gets a 421."`
	StrictParams      bool                     `yaml:"strict_params" desc:"Refuse (400) requests carrying parameters the gateway does not apply, such as temperature or unknown fields. Default false: they are ignored and named in the X-CortexBuild-Ignored-Params response header."`
	ShutdownTimeout   time.Duration            `yaml:"shutdown_timeout" desc:"On SIGTERM or SIGINT, how long in-flight requests may run before they are cancelled, e.g. 30s. Default 30s."`
	Models            map[string]*GatewayModel `yaml:"models" desc:"Model names clients may send, each mapped to an agent, a tier or an exact model (optionally on one provider). Agent names, tier names and provider/model always resolve without an entry."`
}

// GatewayModel is what one model name sent to the gateway resolves to.
type GatewayModel struct {
	Pos yamlx.Pos `yaml:"-"`

	Agent    string        `yaml:"agent" desc:"Route as this agent (its tier, providers, budgets and critic gate)."`
	Tier     provider.Tier `yaml:"tier" desc:"Model tier: reasoning_heavy, balanced or fast_cheap (overrides the agent's)."`
	Model    string        `yaml:"model" desc:"Exact model id; write tier or model, not both."`
	Provider string        `yaml:"provider" desc:"Only this provider instance (a name under providers:) serves the name."`
}

// Critic configures the critic gate.
type Critic struct {
	Pos yamlx.Pos `yaml:"-"`

	RequireDifferentVendor bool `yaml:"require_different_vendor" desc:"On medium-or-higher risk tasks, run the critic only on a model of another vendor than the plan's author. Default false: another vendor is preferred, another model of the same vendor accepted."`
}

// Notifications configures where notifications go. The log (standard
// error) always gets them.
type Notifications struct {
	Pos yamlx.Pos `yaml:"-"`

	WebhookURL Secret `yaml:"webhook_url" desc:"Also POST each notification as JSON to this URL, e.g. ${CORTEXBUILD_WEBHOOK_URL}."`
}

// Provider is one provider endpoint.
type Provider struct {
	Pos yamlx.Pos `yaml:"-"`

	Type             string                   `yaml:"type,required" desc:"Adapter type: see 'cortexbuild providers list'."`
	Profile          string                   `yaml:"profile" desc:"Flavour of the adapter type (openai_compatible: openai, ollama, vllm, lmstudio, gateway)."`
	BaseURL          string                   `yaml:"base_url" desc:"Endpoint URL; default: the adapter type's official endpoint."`
	Credentials      map[string]Secret        `yaml:"credentials" desc:"Credentials by field name (see the type's credentials schema). Write secrets as ${ENV_VAR}; when absent, the schema's environment variables are read."`
	Models           map[provider.Tier]string `yaml:"models" desc:"Model for each tier (reasoning_heavy, balanced, fast_cheap); default: the adapter type's mapping."`
	Timeout          time.Duration            `yaml:"timeout" desc:"Per-attempt timeout, e.g. 120s. Default: the request's (300s)."`
	MaxResponseBytes int64                    `yaml:"max_response_bytes" desc:"Largest answer read from the endpoint, in bytes (a whole stream counts); a larger one fails the attempt as a server error. Default 33554432 (32 MiB); 0 means the default."`
	// Capabilities the endpoint's models have beyond what the adapter and
	// the price catalog know (a local vision or long-context model).
	Capabilities []provider.Capability `yaml:"capabilities" desc:"Extra capabilities of this endpoint's models, e.g. [vision, long_context_200k] for a local model the price catalog does not describe."`
	// AllowImageURLs lets image URLs go to a server that fetches them
	// itself (Ollama, vLLM, LM Studio, a proxy).
	AllowImageURLs bool `yaml:"allow_image_urls" desc:"Send images given by URL to this endpoint although it is not Anthropic's or OpenAI's own API: the server fetches each URL itself, from its network. Default false: such a call goes to another provider or is refused. Never under locality.mode: local-only."`
}

// Routing holds provider preference and failover settings.
type Routing struct {
	Pos yamlx.Pos `yaml:"-"`

	Preference        []string          `yaml:"preference" desc:"Provider instance names, most preferred first. Default: providers in alphabetical order."`
	AllowAlternates   bool              `yaml:"allow_alternates" desc:"On a rate limit or exhausted quota, fail over to the next preferred provider instead of waiting. Default false."`
	MaxRetryAfter     time.Duration     `yaml:"max_retry_after" desc:"Longest provider-requested wait honoured before failing over, e.g. 60s. Default 60s."`
	CircuitBreaker    CircuitBreaker    `yaml:"circuit_breaker" desc:"Per-provider circuit breakers fed by live server, overload, network and timeout failures (on by default)."`
	RateLimitHeadroom RateLimitHeadroom `yaml:"rate_limit_headroom" desc:"With allow_alternates, a provider whose last reported remaining requests or tokens fall below these thresholds goes after the other providers until its limit resets."`
}

// CircuitBreaker configures the per-provider circuit breakers.
type CircuitBreaker struct {
	Pos yamlx.Pos `yaml:"-"`

	Enabled     *bool         `yaml:"enabled" desc:"Drop a provider from routing while its breaker is open. Default true."`
	Failures    int           `yaml:"failures" desc:"Consecutive server, overload, network or timeout failures that open a provider's breaker. Default 5."`
	Cooldown    time.Duration `yaml:"cooldown" desc:"How long an open breaker keeps calls away before it lets one probe call through, e.g. 30s. Default 30s."`
	MaxCooldown time.Duration `yaml:"max_cooldown" desc:"Cap of the cool-down, which doubles after each failed probe. Default 5m."`
}

// RateLimitHeadroom configures proactive rate-limit routing.
type RateLimitHeadroom struct {
	Pos yamlx.Pos `yaml:"-"`

	Requests *int64 `yaml:"requests" desc:"Too few remaining requests: fewer than this. Default 5; 0 turns the check off."`
	Tokens   *int64 `yaml:"tokens" desc:"Too few remaining tokens: fewer than this. Default 2000; 0 turns the check off."`
}

// Settings returns the orchestrator's breaker settings (without a store).
func (c CircuitBreaker) Settings() orchestrator.BreakerSettings {
	return orchestrator.BreakerSettings{Disabled: c.Enabled != nil && !*c.Enabled, Failures: c.Failures, Cooldown: c.Cooldown, MaxCooldown: c.MaxCooldown}
}

// Settings returns the orchestrator's headroom thresholds: an unset key is
// the default, 0 turns the check off.
func (h RateLimitHeadroom) Settings() orchestrator.Headroom {
	conv := func(v *int64) int64 {
		switch {
		case v == nil:
			return 0 // the orchestrator's default
		case *v == 0:
			return -1 // off
		}
		return *v
	}
	return orchestrator.Headroom{Requests: conv(h.Requests), Tokens: conv(h.Tokens)}
}

// OverBudget says what happens when an agent's estimate exceeds its budget.
type OverBudget string

// Over-budget actions.
const (
	OverBudgetAbort    OverBudget = "abort"
	OverBudgetEscalate OverBudget = "escalate"
)

// Agent overrides one agent's routing and limits.
type Agent struct {
	Pos yamlx.Pos `yaml:"-"`

	Tier       provider.Tier   `yaml:"tier" desc:"Model tier for this agent; default: the spec's routing."`
	Model      string          `yaml:"model" desc:"Exact model id; overrides tier."`
	Providers  []string        `yaml:"providers" desc:"Provider instance names to use, most preferred first; default: routing.preference."`
	Budget     *provider.Money `yaml:"budget" desc:"Largest estimated cost of one invocation in USD, e.g. \"0.50\"."`
	OverBudget OverBudget      `yaml:"over_budget" desc:"abort (default) or escalate (ask for approval) when an estimate exceeds the budget."`
	Cache      *bool           `yaml:"cache" desc:"Cache responses; default on for read-only agents (tester_validator, optimizer, explore), off for others."`
	MaxTokens  int             `yaml:"max_tokens" desc:"Output token limit per invocation; default 4096."`
}

// Budgets are spending limits in USD.
type Budgets struct {
	Pos yamlx.Pos `yaml:"-"`

	Task           *provider.Money   `yaml:"task" desc:"Limit for the sum of all invocations of one task, e.g. \"5.00\". Default: none."`
	ProjectMonthly *provider.Money   `yaml:"project_monthly" desc:"Limit for a calendar month of the whole project, e.g. \"200\". Default: none."`
	Timezone       string            `yaml:"timezone" desc:"IANA time zone for the month boundary; default UTC."`
	ConfirmAbove   *provider.Money   `yaml:"confirm_above" desc:"On a terminal, ask before an invocation estimated above this amount. Default: never ask."`
	Alerts         *[]AlertThreshold `yaml:"alerts" desc:"Percentages of a budget's limit (1 to 100) at which a notification (budget_threshold) is sent, once per budget, when its spend crosses them. Default [50, 80, 100]; [] turns alerts off."`
}

// Locality modes.
const (
	LocalityConsent   = "consent"
	LocalityLocalOnly = "local-only"
)

// Locality holds the egress rules.
type Locality struct {
	Pos yamlx.Pos `yaml:"-"`

	Mode string `yaml:"mode" desc:"consent (default): non-loopback endpoints need recorded consent per provider; local-only: only loopback endpoints may be reached."`
}

// Cache back ends.
const (
	CacheMemory = "memory"
	CacheRedis  = "redis"
	CacheOff    = "off"
)

// Cache configures the response cache.
type Cache struct {
	Pos yamlx.Pos `yaml:"-"`

	Backend    string        `yaml:"backend" desc:"memory (default, in-process LRU), redis, or off."`
	URL        Secret        `yaml:"url" desc:"Redis URL for backend redis, e.g. redis://127.0.0.1:6379/0 or ${REDIS_URL}."`
	TTL        time.Duration `yaml:"ttl" desc:"How long a response stays cached; default 24h."`
	MaxEntries int           `yaml:"max_entries" desc:"Bound of the in-process cache; default 10000."`
}

// Store back ends.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Store configures the durable state (ledger, budgets, consent).
type Store struct {
	Pos yamlx.Pos `yaml:"-"`

	Backend           string `yaml:"backend" desc:"sqlite (default, a file under .cortexbuild/) or postgres."`
	Path              string `yaml:"path" desc:"SQLite file, relative to the project root; default .cortexbuild/state.db."`
	DSN               Secret `yaml:"dsn" desc:"PostgreSQL connection string for backend postgres, e.g. ${DATABASE_URL}."`
	LoopbackFailsOpen *bool  `yaml:"loopback_fails_open" desc:"When the store is unreachable, still allow loopback (free) endpoints. Default true; paid endpoints always fail closed."`
	FastPath          *bool  `yaml:"fast_path" desc:"Admit calls against budget leases and journal their settlements, applying them to the store in the background (microseconds per call instead of a database transaction). Default true; false reserves and settles every call in the store itself."`
	JournalSync       bool   `yaml:"journal_sync" desc:"Wait for the disk on every journal append, so that a settlement survives a power cut as soon as the call returns (it always survives the death of the process); the embedded store's background commits then wait for the disk too. Default false."`
}

// Pricing adds price catalogs.
type Pricing struct {
	Pos yamlx.Pos `yaml:"-"`

	CatalogFiles []string `yaml:"catalog_files" desc:"Price catalog files (the format of the built-in catalog) laid over it, relative to the project root."`
}
