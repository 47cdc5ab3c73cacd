// Package metrics counts the orchestrator's calls as Prometheus metrics on
// a private registry (never the global one) and serves them at /metrics.
//
//	cortexbuild_requests_total{provider,model,agent,outcome}       calls, by how they ended
//	cortexbuild_request_duration_seconds{agent,outcome}            call wall time, waits included
//	cortexbuild_attempts_total{provider,model,outcome}             attempts, by outcome kind
//	cortexbuild_attempt_duration_seconds{provider,model,outcome}   attempt latency
//	cortexbuild_tokens_total{provider,model,agent,direction}       input / output tokens billed
//	cortexbuild_prompt_cache_tokens_total{provider,model,agent,op} read / write parts of the input
//	cortexbuild_cost_usd_total{provider,model,agent}               USD billed
//	cortexbuild_cache_hits_total{provider,model,agent}             calls answered by the response cache
//	cortexbuild_cache_saved_usd_total{provider,model,agent}        USD those hits saved
//	cortexbuild_budget_rejections_total{agent,scope,reason}        calls a budget refused
//	cortexbuild_breaker_state{provider}                            0 closed, 1 half-open, 2 open
//
// Labels are bounded by the configuration (provider instances, their
// models, agents) and by the outcome kinds; task ids and invocation ids
// are never labels. With [Settings.Names] set, a provider, model or agent
// name that is not among the configured ones (a model a gateway client
// chose) is counted under [Other], so clients cannot grow the registry. Tokens and cost count every attempt, a failed one's
// partial usage included, so they add up to what the ledger records.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cortexbuild/cortexbuild/observe"
)

// DurationBuckets are the latency histogram's bounds in seconds: the
// GenAI semantic conventions' advice for gen_ai.client.operation.duration.
var DurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// Observer counts calls. It is safe for concurrent use.
type Observer struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	tokens          *prometheus.CounterVec
	promptCache     *prometheus.CounterVec
	cost            *prometheus.CounterVec
	cacheHits       *prometheus.CounterVec
	cacheSaved      *prometheus.CounterVec
	rejections      *prometheus.CounterVec
	breaker         *prometheus.GaugeVec

	names *labelSets
}

// Other is the label value every name outside [Settings.Names] is counted
// under.
const Other = "other"

// Names are the label values an Observer keeps as they are: the
// configured provider instances, the models configured for them, for the
// agents and in the price catalog, and the agents. An empty name (no
// provider was tried) is kept too.
type Names struct {
	Providers, Models, Agents []string
}

// bound returns the label value for name in set: name itself when it is
// configured or empty, Other otherwise.
func bound(set map[string]bool, name string) string {
	if name == "" || set[name] {
		return name
	}
	return Other
}

// Settings configure an Observer.
type Settings struct {
	// Runtime adds the Go runtime and process collectors (goroutines,
	// memory, open files, CPU) to the registry. Default false.
	Runtime bool
	// Names bounds the provider, model and agent labels to the configured
	// names; nil keeps every name as it comes (for callers whose names are
	// all fixed in code).
	Names *Names
}

// labelSets is Names as sets.
type labelSets struct{ providers, models, agents map[string]bool }

func sets(n *Names) *labelSets {
	set := func(names []string) map[string]bool {
		m := make(map[string]bool, len(names))
		for _, v := range names {
			m[v] = true
		}
		return m
	}
	return &labelSets{providers: set(n.Providers), models: set(n.Models), agents: set(n.Agents)}
}

// New returns an Observer with its own registry.
func New(s Settings) *Observer {
	o := &Observer{reg: prometheus.NewRegistry()}
	if s.Names != nil {
		o.names = sets(s.Names)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cortexbuild", Name: name, Help: help}, labels)
		o.reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "cortexbuild", Name: name, Help: help, Buckets: DurationBuckets}, labels)
		o.reg.MustRegister(h)
		return h
	}
	o.requests = counter("requests_total", "Calls through the orchestrator, by the provider and model that answered (or were tried last), agent and outcome (ok, cache_hit, budget, or the last error kind).", "provider", "model", "agent", "outcome")
	o.requestDuration = histogram("request_duration_seconds", "Wall time of a call, retries and waits included.", "agent", "outcome")
	o.attempts = counter("attempts_total", "Attempts on providers, by outcome (ok or the error kind).", "provider", "model", "outcome")
	o.attemptDuration = histogram("attempt_duration_seconds", "Latency of one attempt on a provider.", "provider", "model", "outcome")
	o.tokens = counter("tokens_total", "Tokens billed, by direction (input, output); failed attempts' partial usage included.", "provider", "model", "agent", "direction")
	o.promptCache = counter("prompt_cache_tokens_total", "Input tokens read from (op=read) or written to (op=write) the provider's prompt cache; part of the input tokens.", "provider", "model", "agent", "op")
	o.cost = counter("cost_usd_total", "US dollars billed, at the price catalog's rates.", "provider", "model", "agent")
	o.cacheHits = counter("cache_hits_total", "Calls answered from CortexBuild's response cache.", "provider", "model", "agent")
	o.cacheSaved = counter("cache_saved_usd_total", "US dollars the response cache saved.", "provider", "model", "agent")
	o.rejections = counter("budget_rejections_total", "Calls refused by a budget before any provider was called, by scope (agent, task, month) and reason (over_budget, needs_approval, paused).", "agent", "scope", "reason")
	o.breaker = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "cortexbuild", Name: "breaker_state", Help: "Circuit breaker of each provider: 0 closed, 1 half-open, 2 open."}, []string{"provider"})
	o.reg.MustRegister(o.breaker)
	if s.Runtime {
		o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return o
}

// Registry returns the private registry, to gather or serve it elsewhere.
func (o *Observer) Registry() *prometheus.Registry { return o.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format.
func (o *Observer) Handler() http.Handler {
	return promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{Registry: o.reg})
}

// StartInvocation returns ctx: a call is counted when it ends.
func (*Observer) StartInvocation(ctx context.Context, _ observe.Invocation) context.Context {
	return ctx
}

// label bounds a provider, model and agent to the configured names.
func (o *Observer) label(prov, model, agent string) (string, string, string) {
	if o.names == nil {
		return prov, model, agent
	}
	return bound(o.names.providers, prov), bound(o.names.models, model), bound(o.names.agents, agent)
}

// AttemptDone counts the attempt, its latency, tokens and cost.
func (o *Observer) AttemptDone(_ context.Context, a observe.Attempt) {
	a.Provider, a.Model, a.Agent = o.label(a.Provider, a.Model, a.Agent)
	o.attempts.WithLabelValues(a.Provider, a.Model, a.Outcome).Inc()
	o.attemptDuration.WithLabelValues(a.Provider, a.Model, a.Outcome).Observe(a.Latency.Seconds())
	u := a.Usage
	if u.InputTokens > 0 {
		o.tokens.WithLabelValues(a.Provider, a.Model, a.Agent, "input").Add(float64(u.InputTokens))
	}
	if u.OutputTokens > 0 {
		o.tokens.WithLabelValues(a.Provider, a.Model, a.Agent, "output").Add(float64(u.OutputTokens))
	}
	if u.CacheReadTokens > 0 {
		o.promptCache.WithLabelValues(a.Provider, a.Model, a.Agent, "read").Add(float64(u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		o.promptCache.WithLabelValues(a.Provider, a.Model, a.Agent, "write").Add(float64(u.CacheWriteTokens))
	}
	if a.Cost > 0 {
		o.cost.WithLabelValues(a.Provider, a.Model, a.Agent).Add(observe.USD(a.Cost))
	}
}

// EndInvocation counts the call, and a cache hit or a budget refusal.
func (o *Observer) EndInvocation(_ context.Context, inv observe.Invocation, end observe.End) {
	end.Provider, end.Model, inv.Agent = o.label(end.Provider, end.Model, inv.Agent)
	o.requests.WithLabelValues(end.Provider, end.Model, inv.Agent, end.Outcome).Inc()
	o.requestDuration.WithLabelValues(inv.Agent, end.Outcome).Observe(end.Duration.Seconds())
	if end.Outcome == observe.OutcomeCacheHit {
		o.cacheHits.WithLabelValues(end.Provider, end.Model, inv.Agent).Inc()
		if end.Saved > 0 {
			o.cacheSaved.WithLabelValues(end.Provider, end.Model, inv.Agent).Add(observe.USD(end.Saved))
		}
	}
	if b := end.Budget; b.Scope != "" {
		o.rejections.WithLabelValues(inv.Agent, b.Scope, b.Reason).Inc()
	}
}

// BreakerChanged sets the provider's breaker gauge.
func (o *Observer) BreakerChanged(prov string, state observe.BreakerState) {
	prov, _, _ = o.label(prov, "", "")
	o.breaker.WithLabelValues(prov).Set(float64(state))
}

var _ observe.Observer = (*Observer)(nil)

// Server serves /metrics on one address.
type Server struct {
	ln  net.Listener
	srv *http.Server
	err chan error
}

// Serve listens on addr (host:port; an empty host means 127.0.0.1) and
// serves h at /metrics until Shutdown. It returns once the listener is
// open, so Addr is the real address (useful with port 0).
func Serve(addr string, h http.Handler) (*Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, err: make(chan error, 1)}
	go func() { s.err <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops the server, letting scrapes in flight finish until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.err; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return errors.Join(err, serr)
	}
	return err
}
