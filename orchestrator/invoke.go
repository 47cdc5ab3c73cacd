package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// defaultRateWait is waited when a rate limit names no delay.
const defaultRateWait = time.Second

// maxRateWaits bounds how often one call waits out a rate limit on one
// provider before moving on.
const maxRateWaits = 3

// try makes one attempt. It returns what the call yields on success and the
// usage billed when it fails partway.
type try func(ctx context.Context, ep *Endpoint, req *provider.Request) (any, error)

// Invoke routes c, applies the failure policy and returns the result with
// every attempt. With a ledger it first holds the estimate against the
// budgets and settles to the actual cost after; with a cache, a repeated
// identical request is answered from it. A failure is an [*Error] wrapping
// the last provider error (or the budget that refused the call).
func (o *Orchestrator) Invoke(ctx context.Context, c Call) (*Outcome, error) {
	if o.s.Observer != nil {
		return o.invokeObserved(ctx, c)
	}
	if o.cacheOn(&c) {
		return o.invokeCached(ctx, c)
	}
	return o.invoke(ctx, c)
}

func (o *Orchestrator) invoke(ctx context.Context, c Call) (*Outcome, error) {
	if err := o.loadGate(ctx, &c); err != nil {
		return nil, err
	}
	h, err := o.reserve(ctx, &c)
	if err != nil {
		return nil, err
	}
	v, attempts, trace, err := o.run(ctx, c, func(ctx context.Context, ep *Endpoint, req *provider.Request) (any, error) {
		return ep.Adapter.Invoke(ctx, req)
	})
	o.settle(ctx, h, &c, attempts, err == nil)
	if err != nil {
		return nil, err
	}
	res := v.(*provider.Result)
	chargedResult(res, attempts)
	return &Outcome{Result: res, Attempts: attempts, Trace: trace, InvocationID: h.id, Estimate: h.estimate, Review: o.recordTask(ctx, &c, h.id, res, attempts)}, nil
}

// Ledger returns the store the orchestrator records to (nil without one).
func (o *Orchestrator) Ledger() ledger.Store { return o.s.Ledger }

// State returns the project's pause state the orchestrator checks before
// every call; pausing through it is seen by the next call at once.
func (o *Orchestrator) State() State { return o.s.State }

// Paused returns the reason the project is paused, if it is.
func (o *Orchestrator) Paused(ctx context.Context) (string, bool, error) {
	return o.s.State.Paused(ctx)
}

// Resume lifts a pause (cortexbuild project resume).
func (o *Orchestrator) Resume(ctx context.Context) error { return o.s.State.Resume(ctx) }

func (o *Orchestrator) baseURL(ep *Endpoint) string {
	if e, ok := ep.Adapter.(provider.Endpointer); ok {
		return e.BaseURL()
	}
	return ""
}

func (o *Orchestrator) waitUntil(name string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.notBefore[name].until.Sub(o.s.Now())
}

// holdOff keeps calls away from provider name for d, because of err.
func (o *Orchestrator) holdOff(name string, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.s.Now().Add(d); t.After(o.notBefore[name].until) {
		var pe *provider.Error
		errors.As(err, &pe)
		o.notBefore[name] = rateHold{until: t, err: pe}
	}
}

func (o *Orchestrator) onWait(prov string, d time.Duration, why string) {
	if o.s.OnWait != nil {
		o.s.OnWait(prov, d, why)
	}
}

// notify queues a notification: it never waits for a sink (see
// NotifySettings).
func (o *Orchestrator) notify(_ context.Context, level, event, prov, msg string) {
	o.notes.add(Notification{Level: level, Event: event, Project: o.s.Project, Provider: prov, Message: msg, At: o.s.Now()})
}

// run is the one invocation loop shared by Invoke and Stream.
func (o *Orchestrator) run(ctx context.Context, c Call, attempt try) (any, []Attempt, Trace, error) {
	if reason, paused, err := o.s.State.Paused(ctx); err != nil {
		return nil, nil, Trace{}, &Error{Err: err, Summary: "cannot read the project state"}
	} else if paused {
		return nil, nil, Trace{}, &Error{Err: fmt.Errorf("%w: %s", ErrPaused, reason), Summary: "refused: run 'cortexbuild project resume' once the cause is fixed"}
	}
	if g, ok := o.s.Gate.(ImageURLGate); ok && c.Request.HasImageURL() {
		if err := g.CheckImageURLs(); err != nil {
			return nil, nil, Trace{}, &Error{Err: err}
		}
	}
	if c.Request.MaxTokens == 0 {
		c.Request.MaxTokens = o.s.Agents[c.Agent].MaxTokens
	}
	tier := o.tierFor(&c)
	needs := c.Needs.Union(c.Request.RequiredCapabilities())
	o.updateEndpoints(ctx)
	o.syncBreakers(ctx)
	trace := o.route(&c, tier, needs)
	cands := trace.Kept()
	if len(cands) == 0 {
		if c.gate != nil && slices.ContainsFunc(trace.Candidates, func(x Candidate) bool { return strings.HasPrefix(x.Reason, "authored the plan") }) {
			return nil, nil, trace, o.noIndependent(&c, trace)
		}
		return nil, nil, trace, o.noCandidate(trace)
	}
	if o.s.AllowAlternates {
		// Providers waiting out a rate limit go last.
		slices.SortStableFunc(cands, func(a, b Candidate) int {
			// A wait that is over counts as none.
			return min(max(int(max(o.waitUntil(a.Provider), 0)-max(o.waitUntil(b.Provider), 0)), -1), 1)
		})
	}
	var attempts []Attempt
	var last error
	var waiting waits
	o.circuitWaits(&waiting, trace)
	summary := ""
	tried := map[string]bool{}
	for i := 0; i < len(cands); i++ {
		cand := cands[i]
		ep := cand.endpoint
		tried[cand.Provider+"/"+cand.Model] = true
		if o.s.Gate != nil {
			if err := o.s.Gate.Check(ctx, ep.Name, o.baseURL(ep)); err != nil {
				attempts = append(attempts, Attempt{Provider: ep.Name, Model: cand.Model, Tier: cand.Tier, Outcome: "refused", Error: err.Error(), StartedAt: o.s.Now()})
				last = err
				waiting.other = true
				continue
			}
		}
		model, t := cand.Model, cand.Tier
		smallerTried, networkRetried := false, false
		serverTries, rateWaits := 0, 0
		var waited time.Duration
	attempts:
		for {
			if w := o.waitUntil(ep.Name); w > 0 {
				if w > o.s.MaxRetryAfter || (o.s.AllowAlternates && i < len(cands)-1) {
					held := o.heldError(ep.Name, w)
					if last == nil {
						last = held
					}
					waiting.add(WaitRateLimit, w, held)
					break attempts
				}
				o.onWait(ep.Name, w, "rate-limited")
				if err := o.s.Sleep(ctx, w); err != nil {
					return nil, attempts, trace, &Error{Err: err, Summary: "cancelled while waiting out a rate limit", Attempts: attempts, Trace: trace}
				}
				waited += w
			}
			probe, refused := o.admit(ep.Name, model, t)
			if refused != nil { // the breaker opened since routing
				attempts = append(attempts, *refused)
				open := fmt.Errorf("%w: %s", ErrCircuitOpen, refused.Error)
				if last == nil {
					last = open
				}
				waiting.add(WaitCircuitOpen, o.breakerWait(ep.Name), open)
				break attempts
			}
			req := c.Request
			req.Model, req.Tier = model, t
			start := o.s.Now()
			v, err := attempt(ctx, ep, &req)
			o.record(ctx, ep.Name, err, probe)
			a := Attempt{Provider: ep.Name, Model: model, Tier: t, Outcome: "ok", Latency: o.s.Now().Sub(start), Waited: waited, StartedAt: start}
			waited = 0
			if err == nil {
				if r := resultOf(v); r != nil {
					a.Latency, a.Usage, a.Cost, a.Estimated, a.Unpriced = r.Latency, r.Usage, r.Cost, r.Usage.Estimated, r.Unpriced
				}
				attempts = append(attempts, a)
				return v, attempts, trace, nil
			}
			kind := provider.KindOf(err)
			a.Outcome, a.Error, a.RetryAfter = kind.String(), err.Error(), provider.RetryAfterOf(err)
			var pe *provider.Error
			if errors.As(err, &pe) && pe.Usage != nil {
				a.Usage, a.Cost, a.Estimated, a.Unpriced = *pe.Usage, pe.Cost, pe.Usage.Estimated, pe.Unpriced
			}
			attempts = append(attempts, a)
			last = err
			fail := func(s string) (any, []Attempt, Trace, error) {
				return nil, attempts, trace, &Error{Err: err, Summary: s, Attempts: attempts, Trace: trace}
			}
			switch kind {
			case provider.KindCanceled:
				return fail("")
			case provider.KindTimeout:
				if !smallerTried && c.Request.Model == "" {
					smallerTried = true
					if st, ok := t.Smaller(); ok {
						if tm, ok := ep.Adapter.(provider.TierMapper); ok && tm.ModelFor(st) != "" {
							t, model = st, tm.ModelFor(st)
							continue
						}
					}
				}
				waiting.other = true
				break attempts
			case provider.KindRateLimit:
				ra := provider.RetryAfterOf(err)
				if ra <= 0 {
					ra = defaultRateWait
				}
				if ra > o.s.MaxRetryAfter {
					summary = fmt.Sprintf("%s asks to wait %s, longer than routing.max_retry_after (%s)", ep.Name, ra, o.s.MaxRetryAfter)
					o.holdOff(ep.Name, ra, err)
					waiting.add(WaitRateLimit, ra, err)
					break attempts
				}
				o.holdOff(ep.Name, ra, err)
				rateWaits++
				if (o.s.AllowAlternates && i < len(cands)-1) || rateWaits > maxRateWaits {
					waiting.add(WaitRateLimit, ra, err)
					break attempts
				}
				continue
			case provider.KindQuotaExhausted:
				o.notify(ctx, "warning", "quota_exhausted", ep.Name, err.Error())
				if o.s.AllowAlternates {
					waiting.other = true
					break attempts
				}
				return fail(ep.Name + "'s quota is exhausted; waiting will not help (enable routing.allow_alternates to fail over)")
			case provider.KindAuth:
				reason := fmt.Sprintf("%s refused the credentials: %v", ep.Name, err)
				if perr := o.s.State.Pause(ctx, reason); perr != nil {
					return fail("credentials refused, and the pause could not be recorded: " + perr.Error())
				}
				o.notify(ctx, "critical", "project_paused", ep.Name, reason)
				return fail("project paused: fix the credentials of " + ep.Name + ", then run 'cortexbuild project resume'")
			case provider.KindContextWindowExceeded:
				bigger, ok := largerContext(cand.caps)
				if !ok {
					return fail("no configured model has a larger context window")
				}
				retrace := o.route(&c, tier, needs.With(bigger))
				var next []Candidate
				for _, k := range retrace.Kept() {
					if !tried[k.Provider+"/"+k.Model] {
						next = append(next, k)
					}
				}
				if len(next) == 0 {
					return fail("no configured model has " + string(bigger))
				}
				trace.Candidates = append(trace.Candidates, next...)
				cands = append(cands[:i+1], next...)
				waiting.other = true
				break attempts
			case provider.KindServer, provider.KindOverloaded:
				serverTries++
				if serverTries >= o.s.ServerAttempts || o.tripped(ep.Name) {
					if kind == provider.KindOverloaded {
						waiting.add(WaitOverloaded, o.overloadWait(ep.Name, serverTries, err), err)
					} else {
						waiting.other = true
					}
					break attempts // no backoff for a provider whose breaker just opened
				}
				d := o.s.Backoff(serverTries)
				if ra := provider.RetryAfterOf(err); ra > d && ra <= o.s.MaxRetryAfter {
					d = ra
				}
				o.onWait(ep.Name, d, kind.String()+", attempt "+strconv.Itoa(serverTries)+" of "+strconv.Itoa(o.s.ServerAttempts))
				if err := o.s.Sleep(ctx, d); err != nil {
					return nil, attempts, trace, &Error{Err: err, Summary: "cancelled during backoff", Attempts: attempts, Trace: trace}
				}
				waited = d
				continue
			case provider.KindNetwork:
				if !networkRetried {
					networkRetried = true
					continue
				}
				if !o.s.Online(ctx) {
					return fail("this machine is offline")
				}
				summary = ep.Name + " is unreachable (this machine is online)"
				o.notify(ctx, "warning", "provider_unreachable", ep.Name, err.Error())
				waiting.other = true
				break attempts
			case provider.KindCapabilityMissing:
				waiting.other = true
				break attempts
			default: // bad request and anything unclassified: surface as is
				return fail("")
			}
		}
	}
	err := waiting.wrap(last)
	if we, ok := err.(*WaitError); ok && summary == "" {
		summary = fmt.Sprintf("no candidate provider can serve this call for another %s (%s)", we.RetryAfter, strings.ReplaceAll(string(we.Reason), "_", " "))
	}
	if summary == "" {
		summary = fmt.Sprintf("all %d candidate providers failed", len(cands))
	}
	return nil, attempts, trace, &Error{Err: err, Summary: summary, Attempts: attempts, Trace: trace}
}

func resultOf(v any) *provider.Result {
	switch x := v.(type) {
	case *provider.Result:
		return x
	case *openedStream:
		return nil
	}
	return nil
}

// largerContext returns the next context capability the candidate lacks.
func largerContext(have provider.CapabilitySet) (provider.Capability, bool) {
	for _, c := range []provider.Capability{provider.CapLongContext200K, provider.CapLongContext1M} {
		if !have.Has(c) {
			return c, true
		}
	}
	return "", false
}

// noCandidate explains why nothing could serve a call: a capability no
// configured provider has, or no provider at all.
func (o *Orchestrator) noCandidate(t Trace) error {
	if len(o.endpoints()) == 0 {
		return &Error{Err: ErrNoCandidate, Summary: "no providers are configured: add one under providers: in llm-config.yaml", Trace: t}
	}
	for _, c := range t.Needs.List() {
		has := false
		for _, cand := range t.Candidates {
			if cand.caps.Has(c) && cand.Model != "" {
				has = true
			}
		}
		if !has {
			return &Error{Err: provider.ErrCapabilityMissing("", "", c), Summary: "no configured provider or model has " + string(c), Trace: t}
		}
	}
	if slices.ContainsFunc(t.Candidates, func(c Candidate) bool { return c.imageURL }) {
		return &Error{Err: ErrImageURL, Summary: "an image is given by URL, and no provider that could serve the call fetches image URLs on its own side; send the image inline (base64 data), or set providers.<name>.allow_image_urls: true for a server that may fetch URLs itself:\n" + t.String(), Trace: t}
	}
	if err := o.circuitsOpen(t); err != nil {
		return err
	}
	return &Error{Err: ErrNoCandidate, Summary: "no candidate is left:\n" + t.String(), Trace: t}
}
