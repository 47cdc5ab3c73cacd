package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/ledger"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Gate decides whether a provider's endpoint may be reached; the locality
// gate implements it. A refusal opens no connection.
type Gate interface {
	Check(ctx context.Context, provider, baseURL string) error
}

// ImageURLGate is a Gate that may refuse every image URL of a project, as
// the locality gate does in local-only mode: the server sent one fetches it
// from wherever it runs. A refusal is returned as the call's error.
type ImageURLGate interface {
	CheckImageURLs() error
}

// Settings configure an Orchestrator. The zero value of each field is the
// default named in its comment.
type Settings struct {
	// Project is the project's id: it names the project in notifications
	// and owns its response-cache entries.
	Project string
	// Endpoints are the configured providers; their order is the default
	// preference.
	Endpoints []Endpoint
	// Preference reorders Endpoints by name; unnamed ones follow.
	Preference []string
	// Agents override the default routing per agent.
	Agents map[string]AgentSettings
	// AllowAlternates fails over to the next provider on a rate limit or an
	// exhausted quota instead of waiting or surfacing. Default false.
	AllowAlternates bool
	// MaxRetryAfter caps a provider-requested wait; a longer one is not
	// waited for. Default 60 s.
	MaxRetryAfter time.Duration
	// ServerAttempts is how many times a server or overload failure is tried
	// on one provider before the next. Default 3.
	ServerAttempts int
	// Backoff returns the wait before retry n (1-based) of a server
	// failure. Default: 500 ms × 2ⁿ⁻¹, capped at 8 s, minus up to 25%
	// jitter.
	Backoff func(n int) time.Duration
	// Sleep waits d or until ctx ends. Default: a timer; tests inject one
	// that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnWait, when set, is told before the loop waits out a provider's
	// rate limit or backs off after its failure: which provider, for how
	// long and why, so that a person waiting can be told.
	OnWait func(provider string, d time.Duration, why string)
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Online reports whether this machine has a network at all, to tell
	// "offline" from "the provider is unreachable". Default: a non-loopback
	// interface is up with a global address (no traffic is sent).
	Online func(ctx context.Context) bool
	// Gate checks every endpoint before it is called; nil allows all (the
	// CLI always sets the locality gate).
	Gate Gate
	// Notifier hears about pauses, exhausted quotas, outages and budget
	// alerts (AnnounceAlerts); nil drops notifications and announces no
	// alert. The notifications of calls are queued and sent in the
	// background (see NotifySettings and Drain): a call never waits for a
	// sink; each sink of a Notifiers gets a queue of its own.
	Notifier Notifier
	// Notify configures the queues of the notifications of calls.
	Notify NotifySettings
	// Observer hears about every call, attempt and breaker change (structured
	// logs, traces, metrics: see package observe); nil observes nothing and
	// costs nothing.
	Observer observe.Observer
	// State persists the project's pause; nil keeps it in memory.
	State State

	// Ledger records every attempt and holds each call's estimate against
	// the month's and the task's budgets before the call (reserve, then
	// settle to the actual cost, or release); nil records nothing and
	// enforces no task or month budget.
	Ledger ledger.Store
	// AgentBudgets limit one invocation's estimate per agent.
	AgentBudgets map[string]AgentBudget
	// Location is the time zone of the monthly budget. Default UTC.
	Location *time.Location
	// ReservationTTL is how long a hold lasts if its process dies before
	// settling. Default 1 h.
	ReservationTTL time.Duration
	// FreeFailsOpen lets calls whose estimate is zero (local models) run
	// when the ledger cannot be reached; paid calls always fail closed.
	FreeFailsOpen bool
	// Cache answers repeated identical requests; nil disables it.
	Cache *cache.Cache
	// CacheAgents overrides, per agent, whether responses are cached (the
	// default: on for tester_validator, optimizer and explore).
	CacheAgents map[string]*bool
	// Critic configures the critic gate, which needs the Ledger (the task
	// records live there).
	Critic CriticSettings
	// Breaker configures the per-provider circuit breakers fed by live
	// failures (on by default; see BreakerSettings).
	Breaker BreakerSettings
	// Headroom configures proactive rate-limit routing (with
	// AllowAlternates; see Headroom).
	Headroom Headroom
	// Updates, when set, replaces endpoints while the orchestrator runs
	// (a credential saved in the web console); nil keeps Endpoints as
	// they are.
	Updates EndpointUpdater
}

// EndpointUpdater supplies new versions of configured endpoints: an
// endpoint whose credentials changed, one that became available or
// unavailable.
type EndpointUpdater interface {
	// Updates returns the endpoints to put in place of the configured
	// ones of the same names (other names are ignored), or nil when none
	// changed since the last call. It is called before every routing
	// decision, one call at a time, and must be cheap when nothing
	// changed.
	Updates(ctx context.Context) []Endpoint
}

// Orchestrator routes calls to providers and applies the failure policy.
// It is safe for concurrent use.
type Orchestrator struct {
	s     Settings
	eps   atomic.Pointer[map[string]*Endpoint] // by name; replaced whole, never changed in place
	epsMu sync.Mutex                           // serialises updates
	order []string

	notifies bool         // a notifier was given: budget alerts are announced
	notes    notifyQueues // the notifications of calls, sent in the background

	mu        sync.Mutex
	notBefore map[string]rateHold // per-provider rate-limit queue
	brk       breakers            // per-provider circuit breakers

	keyLimits sync.Map // ledger.Scope → provider.Money or noKeyLimit: the key scopes' limits this process set
}

// New validates settings and returns an orchestrator.
func New(s Settings) (*Orchestrator, error) {
	o := &Orchestrator{s: s, notBefore: map[string]rateHold{}}
	eps := map[string]*Endpoint{}
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		if !ep.valid() {
			return nil, fmt.Errorf("orchestrator: endpoint %d needs a name and either an adapter or the reason it is unavailable", i)
		}
		if _, dup := eps[ep.Name]; dup {
			return nil, fmt.Errorf("orchestrator: provider %q configured twice", ep.Name)
		}
		eps[ep.Name] = ep
	}
	o.eps.Store(&eps)
	for _, name := range s.Preference {
		if _, ok := eps[name]; !ok {
			return nil, fmt.Errorf("orchestrator: preference names unknown provider %q", name)
		}
		o.order = append(o.order, name)
	}
	for _, ep := range s.Endpoints {
		if !slices.Contains(o.order, ep.Name) {
			o.order = append(o.order, ep.Name)
		}
	}
	if o.s.MaxRetryAfter <= 0 {
		o.s.MaxRetryAfter = 60 * time.Second
	}
	if o.s.ServerAttempts <= 0 {
		o.s.ServerAttempts = 3
	}
	if o.s.Backoff == nil {
		o.s.Backoff = DefaultBackoff
	}
	if o.s.Sleep == nil {
		o.s.Sleep = sleep
	}
	if o.s.Now == nil {
		o.s.Now = time.Now
	}
	if o.s.Online == nil {
		o.s.Online = HasNetwork
	}
	if o.s.State == nil {
		o.s.State = &MemoryState{}
	}
	o.notifies = o.s.Notifier != nil
	if o.s.Notifier == nil {
		o.s.Notifier = discard{}
	}
	o.notes = newNotifyQueues(o.s.Notifier, o.s.Notify)
	if o.s.Location == nil {
		o.s.Location = time.UTC
	}
	if o.s.ReservationTTL <= 0 {
		o.s.ReservationTTL = time.Hour
	}
	o.breakerDefaults()
	o.headroomDefaults()
	return o, nil
}

// endpoints returns the current endpoints by name. Callers must not
// change the map: a replacement stores a new one.
func (o *Orchestrator) endpoints() map[string]*Endpoint { return *o.eps.Load() }

// updateEndpoints puts in place the endpoints Settings.Updates says
// changed. A call already routed keeps the endpoint it started with.
func (o *Orchestrator) updateEndpoints(ctx context.Context) {
	if o.s.Updates == nil {
		return
	}
	// Held across Updates, so that updates are put in place in the
	// order they were made, and a call waits for one being made.
	o.epsMu.Lock()
	defer o.epsMu.Unlock()
	ups := o.s.Updates.Updates(ctx)
	if len(ups) == 0 {
		return
	}
	next := maps.Clone(o.endpoints())
	for _, ep := range ups {
		if _, ok := next[ep.Name]; ok && ep.valid() {
			next[ep.Name] = &ep
		}
	}
	o.eps.Store(&next)
}

// Unavailable returns, by provider name, why the providers that cannot
// be used now are unavailable (none: an empty map).
func (o *Orchestrator) Unavailable(ctx context.Context) map[string]string {
	o.updateEndpoints(ctx)
	out := map[string]string{}
	for name, ep := range o.endpoints() {
		if ep.Unavailable != "" {
			out[name] = ep.Unavailable
		}
	}
	return out
}

// DefaultBackoff is 500 ms × 2ⁿ⁻¹ capped at 8 s, minus up to 25% jitter.
func DefaultBackoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n-1, 4)
	d = min(d, 8*time.Second)
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// HasNetwork reports whether any non-loopback interface is up with a global
// unicast address. It sends nothing.
func HasNetwork(context.Context) bool {
	ifs, err := net.Interfaces()
	if err != nil {
		return false
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
				return true
			}
		}
	}
	return false
}

// Call is one invocation by an agent.
type Call struct {
	// Agent chooses the tier and providers (see DefaultAgentRouting); ""
	// uses the request's tier and the global preference.
	Agent string
	// Task groups invocations for budgets and audit.
	Task string
	// Needs are capabilities required beyond what the request implies
	// (tools imply tool_use, prompt caching implies prompt_caching).
	Needs provider.CapabilitySet
	// Request is what to send; the router sets its model and tier.
	Request provider.Request
	// Approved lets an estimate above the agent's escalating budget run: a
	// person approved it.
	Approved bool
	// InvocationID names the call in the ledger; "" generates one.
	InvocationID string
	// Providers, when set, restricts the call to these provider instances,
	// most preferred first, in place of the agent's providers or the global
	// preference (the gateway's model mapping pins a provider this way).
	Providers []string
	// Key is the public id of the virtual key the call is made with (the
	// gateway's), recorded on its ledger rows; "" for none.
	Key string
	// Session is the host's id of the coding session the call was made in,
	// as the gateway reads it from the request: Claude Code's
	// X-Claude-Code-Session-Id header (one per session), Codex's
	// session_id header (its conversation id; older versions also send it
	// as conversation_id). "" for none. It is recorded on every ledger row
	// of the call (ledger.AttemptRow.Session), which 'spend --by session'
	// and 'spend --session' read. It is client input: the ledger keeps
	// ledger.HostID of it; the gateway refuses what ledger.CheckHostID
	// refuses.
	Session string
	// HostAgent is the host's id of the subagent that made the call (Claude
	// Code's x-claude-code-agent-id header), "" for the session's main
	// agent; ParentAgent is the id of the agent that started that subagent
	// (x-claude-code-parent-agent-id), "" when the host does not say. Both
	// are recorded on every ledger row of the call, like Session.
	HostAgent   string
	ParentAgent string
	// KeyBudget, when set, limits what the calls made with Key cost per
	// period: the key's scope is held with the month's and the task's. The
	// key's lifetime scope is held in any case (see keyScopes).
	KeyBudget *KeyBudget

	gate *taskGate // the task's critic gate, for a critic's call
}

// Attempt records one try on one provider.
type Attempt struct {
	Provider string        `json:"provider"`
	Model    string        `json:"model"`
	Tier     provider.Tier `json:"tier"`
	// Outcome is "ok" or the error kind ("rate_limit", "refused" for the
	// locality gate, ...).
	Outcome    string         `json:"outcome"`
	Error      string         `json:"error,omitempty"`
	Latency    time.Duration  `json:"latency_ns"`
	Usage      provider.Usage `json:"usage"`
	Cost       provider.Money `json:"cost_usd"`
	RetryAfter time.Duration  `json:"retry_after_ns,omitempty"`
	// Waited is how long the loop waited before this attempt (backoff or
	// a rate limit).
	Waited    time.Duration `json:"waited_ns,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	// Estimated says the usage was counted offline.
	Estimated bool `json:"estimated,omitempty"`
	// Unpriced says the catalog listed neither the model that answered
	// nor the one requested: Cost is the call's reservation, charged in
	// place of a price.
	Unpriced bool `json:"unpriced,omitempty"`
}

// Outcome is a successful call: the result, every attempt made, and the
// routing trace.
type Outcome struct {
	*provider.Result
	Attempts []Attempt `json:"attempts"`
	Trace    Trace     `json:"route"`
	// InvocationID names the call in the ledger.
	InvocationID string `json:"invocation_id,omitempty"`
	// Estimate is the upper bound reserved before the call.
	Estimate provider.Money `json:"estimate_usd"`
	// Saved is what a cache hit saved.
	Saved provider.Money `json:"saved_usd,omitempty"`
	// Review is what the critic gate made of a critic's output on a
	// started task (nil for other calls).
	Review *ReviewCheck `json:"review,omitempty"`
}

// Error is a failed call: the last provider error (its kind decides what
// the caller may do), what the orchestrator concluded, and every attempt.
type Error struct {
	// Err is the last provider error, or the reason nothing was tried.
	Err error
	// Summary says what the orchestrator concluded ("this machine is
	// offline", "the project is paused: …").
	Summary  string
	Attempts []Attempt
	Trace    Trace
}

func (e *Error) Error() string {
	if e.Summary != "" && e.Err != nil {
		return e.Summary + ": " + e.Err.Error()
	}
	if e.Summary != "" {
		return e.Summary
	}
	return e.Err.Error()
}

// Unwrap returns the last provider error, so errors.Is(err, provider.KindX)
// works on the orchestrator's error too.
func (e *Error) Unwrap() error { return e.Err }

// ErrPaused is wrapped by every refusal while the project is paused.
var ErrPaused = errors.New("the project is paused")

// ErrNoCandidate is wrapped when no configured provider can serve a call.
var ErrNoCandidate = errors.New("no provider can serve this call")

// ErrImageURL is wrapped when a call gives an image by URL and no provider
// that could serve it may be sent one (see Endpoint.AllowImageURLs).
var ErrImageURL = errors.New("no provider may be sent an image by URL")

// MarshalJSON writes the result's fields with attempts and route added
// (the embedded Result's own MarshalJSON would otherwise hide them).
func (o Outcome) MarshalJSON() ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if o.Result != nil {
		b, err := json.Marshal(o.Result)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, err
		}
	}
	for k, v := range map[string]any{"attempts": o.Attempts, "route": o.Trace, "invocation_id": o.InvocationID, "estimate_usd": o.Estimate, "saved_usd": o.Saved} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		fields[k] = b
	}
	if o.Review != nil {
		b, err := json.Marshal(o.Review)
		if err != nil {
			return nil, err
		}
		fields["review"] = b
	}
	return json.Marshal(fields)
}
