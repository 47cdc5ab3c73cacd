package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// Environment variables of the smoke test. Per target, the prefix is
// CORTEXBUILD_SMOKE_<TYPE> or CORTEXBUILD_SMOKE_<TYPE>_<PROFILE>, upper
// case, every other character than a letter or digit written as _.
const (
	smokeEnvPrefix = "CORTEXBUILD_SMOKE_"
	// smokeBaseURLSuffix overrides a target's endpoint (and opts a
	// non-default profile in).
	smokeBaseURLSuffix = "_BASE_URL"
	// smokeModelSuffix overrides the model of the --live call.
	smokeModelSuffix = "_MODEL"
	// pagerDutyURLEnv overrides the PagerDuty Events API v2 endpoint.
	pagerDutyURLEnv = "CORTEXBUILD_PAGERDUTY_EVENTS_URL"
	// defaultPagerDutyURL is the PagerDuty Events API v2 endpoint.
	defaultPagerDutyURL = "https://events.pagerduty.com/v2/enqueue"
	// smokePrompt is the prompt of the --live call.
	smokePrompt = "Reply with the single word: ok"
)

// Target statuses.
const (
	smokeHealthy   = "healthy"
	smokeUnhealthy = "unhealthy"
	smokeSkipped   = "skipped"
)

// smokeTarget is one adapter type, with a profile where the type has
// profiles: each profile talks to a different kind of server.
type smokeTarget struct {
	name     string // "anthropic", "openai_compatible/openai"
	profile  string
	optional bool   // a non-default profile: run only when its base URL is set
	prefix   string // environment variable prefix
	reg      provider.Registration
}

// envToken turns s into an environment variable name part.
func envToken(s string) string {
	b := []byte(strings.ToUpper(s))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// smokeTargets lists what the smoke test covers: every registered adapter
// type; for a type with profiles, each profile, the first (the type's
// default endpoint) always and the others when their base URL is set.
func smokeTargets(reg *provider.Registry) []smokeTarget {
	var out []smokeTarget
	for _, r := range reg.All() {
		if len(r.Profiles) == 0 {
			out = append(out, smokeTarget{name: r.Type, prefix: smokeEnvPrefix + envToken(r.Type), reg: r})
			continue
		}
		for i, p := range r.Profiles {
			out = append(out, smokeTarget{name: r.Type + "/" + p, profile: p, optional: i > 0,
				prefix: smokeEnvPrefix + envToken(r.Type) + "_" + envToken(p), reg: r})
		}
	}
	return out
}

// smokeCheck is the outcome of one probe (the health check or the live
// call).
type smokeCheck struct {
	OK        bool          `json:"ok"`
	Error     string        `json:"error,omitempty"`
	Kind      provider.Kind `json:"kind,omitempty"`
	LatencyMS int64         `json:"latency_ms"`
	// The live call's model, stop reason, usage and price.
	Model      string              `json:"model,omitempty"`
	StopReason provider.StopReason `json:"stop_reason,omitempty"`
	Usage      *provider.Usage     `json:"usage,omitempty"`
	Cost       *provider.Money     `json:"cost_usd,omitempty"`
}

type smokeResult struct {
	Target   string      `json:"target"`
	Type     string      `json:"type"`
	Profile  string      `json:"profile,omitempty"`
	BaseURL  string      `json:"base_url,omitempty"`
	Status   string      `json:"status"`
	Optional bool        `json:"optional,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	Failed   bool        `json:"failed"`
	Health   *smokeCheck `json:"health,omitempty"`
	Live     *smokeCheck `json:"live,omitempty"`

	severity string // PagerDuty severity of a failure
}

type alertOutcome struct {
	Sink     string `json:"sink"`
	Sent     int    `json:"sent"`
	Resolved int    `json:"resolved,omitempty"`
	Error    string `json:"error,omitempty"`
}

type smokeReport struct {
	OK         bool           `json:"ok"`
	Live       bool           `json:"live"`
	RequireAll bool           `json:"require_all"`
	CheckedAt  time.Time      `json:"checked_at"`
	Results    []smokeResult  `json:"results"`
	Problems   []string       `json:"problems,omitempty"`
	Alerts     []alertOutcome `json:"alerts"`
}

// smokeRun holds what one run of the smoke test shares.
type smokeRun struct {
	e       *env
	live    bool
	timeout time.Duration
	pricer  provider.Pricer
	gate    *locality.Gate // set when the project is local-only
	// alerts is the gate of the alert sinks (webhook, PagerDuty): loopback
	// always, anywhere else only when the project is not local-only.
	alerts *locality.Gate
	// webhook is the webhook sink as the gate names it, and webhookPos
	// where its URL is configured (zero: from the environment).
	webhook    locality.Service
	webhookPos yamlx.Pos

	mu      sync.Mutex
	secrets []string // every credential seen, for redaction
}

func (r *smokeRun) secret(s string) {
	if s == "" {
		return
	}
	r.mu.Lock()
	r.secrets = append(r.secrets, s)
	r.mu.Unlock()
}

// redact removes every secret the run has seen from s.
func (r *smokeRun) redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return provider.Redact(s, r.secrets...)
}

// displayURL shows an endpoint without user information, query or
// fragment, which may hold credentials.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
	return u.String()
}

func (e *env) providersSmokeCmd() *cobra.Command {
	var (
		live, asJSON, requireAll bool
		webhookEnv, pdEnv        string
		timeout                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Health-check every registered adapter type with credentials from the environment (the nightly smoke test)",
		Long: `smoke runs the health check of every registered adapter type, reading credentials
from the environment variables its credentials schema names (see 'cortexbuild providers
list'); no llm-config.yaml is needed. For a type with profiles, the first profile (the
type's default endpoint) is always covered and the others only when their base URL is set.

A type whose credentials are absent is reported "skipped: set VAR"; it counts as a
failure only with --require-all. --live also makes one call with max_tokens 1 to the
type's fast_cheap model (a fraction of a cent on a paid provider).

Environment, per target (prefix CORTEXBUILD_SMOKE_<TYPE>[_<PROFILE>], e.g.
CORTEXBUILD_SMOKE_ANTHROPIC, CORTEXBUILD_SMOKE_OPENAI_COMPATIBLE_OLLAMA):
  <prefix>_BASE_URL   endpoint to use instead of the default (opts a profile in)
  <prefix>_MODEL      model of the --live call instead of the fast_cheap default
  <prefix>_API_KEY    a credential the profile does not require (gateways, local servers)

On failure smoke alerts through the notifier sinks: the log (standard error), the
webhook of notifications.webhook_url in the project's configuration or the URL in the
variable named by --webhook-url-env, and, with --pagerduty-routing-key-env, a
PagerDuty Events API v2 event per failed target (deduplicated per target, and resolved
by the next run that finds the target healthy). CORTEXBUILD_PAGERDUTY_EVENTS_URL
overrides the PagerDuty endpoint. Keys are never printed or sent anywhere but to
their provider. It exits 1 when any target fails.`,
		Example: `  ANTHROPIC_API_KEY=... cortexbuild providers smoke
  cortexbuild providers smoke --live --require-all --pagerduty-routing-key-env PAGERDUTY_ROUTING_KEY
  CORTEXBUILD_SMOKE_OPENAI_COMPATIBLE_OLLAMA_BASE_URL=http://127.0.0.1:11434/v1 \
    CORTEXBUILD_SMOKE_OPENAI_COMPATIBLE_OLLAMA_MODEL=llama3.2 cortexbuild providers smoke --live`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return withCode(ExitUsage, errors.New("--timeout must be positive"))
			}
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			cat, err := e.catalog(f)
			if err != nil {
				return err
			}
			run := &smokeRun{e: e, live: live, timeout: timeout, pricer: cat,
				alerts: &locality.Gate{Mode: locality.ModeConsent, Resolver: e.resolver, Dial: e.dial}}
			if f.Locality.Mode == config.LocalityLocalOnly {
				run.gate = &locality.Gate{Mode: locality.ModeLocalOnly, Resolver: e.resolver, Dial: e.dial}
				run.alerts.Mode = locality.ModeLocalOnly
			}
			rep := smokeReport{Live: live, RequireAll: requireAll, CheckedAt: time.Now().UTC(), Alerts: []alertOutcome{}}

			// Alert sinks, read first so that their secrets are redacted
			// from everything the targets report.
			webhook, pdKey, pdURL := "", "", ""
			run.webhook = svcWebhook
			if webhookEnv != "" {
				run.webhook.Key = "$" + webhookEnv
				if webhook = e.getenv(webhookEnv); webhook == "" {
					rep.Problems = append(rep.Problems, fmt.Sprintf("--webhook-url-env: $%s is empty; webhook alerts are off", webhookEnv))
				}
			} else if u := f.Notifications.WebhookURL; !u.IsZero() {
				run.webhookPos = u.Pos()
				if webhook, err = u.Resolve(e.lookupEnv); err != nil {
					rep.Problems = append(rep.Problems, "notifications.webhook_url: "+err.Error()+"; webhook alerts are off")
				}
			}
			run.secret(webhook)
			if pu, perr := url.Parse(webhook); webhook != "" && (perr != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "") {
				rep.Problems = append(rep.Problems, "the webhook URL is not an http(s) URL; webhook alerts are off")
				webhook = ""
			}
			if webhook != "" {
				if err := checkServiceURL(run.alerts, run.webhook, run.webhookPos, webhook); err != nil {
					rep.Problems = append(rep.Problems, run.redact(err.Error())+"; webhook alerts are off")
					webhook = ""
				}
			}
			if pdEnv != "" {
				if pdKey = e.getenv(pdEnv); pdKey == "" {
					rep.Problems = append(rep.Problems, fmt.Sprintf("--pagerduty-routing-key-env: $%s is empty; PagerDuty alerts are off", pdEnv))
				}
			}
			run.secret(pdKey)
			if pdKey != "" {
				if pdURL = e.getenv(pagerDutyURLEnv); pdURL == "" {
					pdURL = defaultPagerDutyURL
				}
				if err := checkServiceURL(run.alerts, svcPagerDuty, yamlx.Pos{}, pdURL); err != nil {
					rep.Problems = append(rep.Problems, run.redact(err.Error())+"; PagerDuty alerts are off")
					pdKey = ""
				}
			}

			targets := smokeTargets(e.registry)
			rep.Results = make([]smokeResult, len(targets))
			var wg sync.WaitGroup
			for i, t := range targets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rep.Results[i] = run.one(cmd.Context(), t)
				}()
			}
			wg.Wait()

			failed := 0
			for i := range rep.Results {
				r := &rep.Results[i]
				switch {
				case r.Status == smokeUnhealthy:
					r.Failed, r.severity = true, "critical"
				case r.Status == smokeSkipped && requireAll && !r.Optional:
					r.Failed, r.severity = true, "warning"
				}
				if r.Failed {
					failed++
				}
			}
			if requireAll && len(rep.Problems) > 0 {
				failed++
			}
			rep.OK = failed == 0

			project := ""
			if f.Path != "" {
				project = e.project(f)
			}
			rep.Alerts = run.alert(cmd.Context(), rep.Results, project, webhook, pdKey, pdURL)
			for _, a := range rep.Alerts {
				if a.Error != "" {
					rep.Problems = append(rep.Problems, a.Sink+" alert failed: "+a.Error)
				}
			}

			w := cmd.OutOrStdout()
			if asJSON {
				var ferr error
				if !rep.OK {
					ferr = withCode(ExitFailure, withKind("check_failed", fmt.Errorf("provider smoke test failed: %d failure(s)", failed)))
				}
				return writeReport(w, rep, ferr)
			}
			printSmoke(w, rep)
			for _, p := range rep.Problems {
				fmt.Fprintln(e.stderr, "cortexbuild: warning:", p)
			}
			if !rep.OK {
				return withCode(ExitFailure, fmt.Errorf("provider smoke test failed: %d failure(s)", failed))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&live, "live", false, "also make one call with max_tokens 1 per provider (costs a fraction of a cent on paid providers)")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	fl.BoolVar(&requireAll, "require-all", false, "count a target skipped for missing credentials, and an alert sink whose variable is empty, as failures")
	fl.StringVar(&webhookEnv, "webhook-url-env", "", "environment variable holding a webhook URL to alert (default: notifications.webhook_url of the project's configuration)")
	fl.StringVar(&pdEnv, "pagerduty-routing-key-env", "", "environment variable holding a PagerDuty Events API v2 routing key: trigger an event per failed target")
	fl.DurationVar(&timeout, "timeout", 60*time.Second, "time allowed per target (health check and live call)")
	return cmd
}

// one runs the smoke test of one target.
func (r *smokeRun) one(ctx context.Context, t smokeTarget) smokeResult {
	e := r.e
	res := smokeResult{Target: t.name, Type: t.reg.Type, Profile: t.profile, Optional: t.optional, Status: smokeSkipped}
	base := e.getenv(t.prefix + smokeBaseURLSuffix)
	if t.optional && base == "" {
		res.Reason = "opt-in: set " + t.prefix + smokeBaseURLSuffix + " to smoke this kind of server"
		return res
	}
	creds := map[string]string{}
	var missing []string
	for _, field := range t.reg.Credentials {
		if !field.RequiredFor(t.profile) {
			// A key the profile does not need is never taken from the
			// vendor's variable: it would be sent to another server.
			if v := e.getenv(t.prefix + "_" + envToken(field.Name)); v != "" {
				creds[field.Name] = v
				r.secret(v)
			}
			continue
		}
		vars := field.EnvVars
		if len(vars) == 0 {
			vars = []string{t.prefix + "_" + envToken(field.Name)}
		}
		v := ""
		for _, name := range vars {
			if v = e.getenv(name); v != "" {
				break
			}
		}
		if v == "" {
			missing = append(missing, strings.Join(vars, " or "))
			continue
		}
		creds[field.Name] = v
		if field.Secret {
			r.secret(v)
		}
	}
	if len(missing) > 0 {
		res.Reason = "set " + strings.Join(missing, " and ")
		return res
	}

	s := provider.Settings{Name: t.name, Profile: t.profile, BaseURL: base, Credentials: creds, Pricer: r.pricer, Timeout: r.timeout}
	if m := e.getenv(t.prefix + smokeModelSuffix); m != "" {
		s.Models = map[provider.Tier]string{provider.TierFastCheap: m}
	}
	if r.gate != nil {
		s.HTTPClient = r.gate.Client(t.name, nil)
	}
	fail := func(c *smokeCheck, msg string, kind provider.Kind) smokeResult {
		c.Error, c.Kind = r.redact(msg), kind
		res.Status, res.Reason = smokeUnhealthy, c.Error
		return res
	}
	a, err := e.registry.New(t.reg.Type, s)
	if err != nil {
		res.Health = &smokeCheck{}
		return fail(res.Health, err.Error(), provider.KindUnknown)
	}
	endpoint := base
	if ep, ok := a.(provider.Endpointer); ok {
		endpoint = ep.BaseURL()
	}
	res.BaseURL = displayURL(endpoint)
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if r.gate != nil {
		if _, err := r.gate.Check(ctx, t.name, endpoint); err != nil {
			res.Reason = "the project's locality mode is local-only and this endpoint is not on this machine"
			return res
		}
	}

	hs := a.HealthCheck(ctx)
	res.Health = &smokeCheck{OK: hs.Healthy, LatencyMS: hs.Latency.Milliseconds()}
	if !hs.Healthy {
		return fail(res.Health, "health check: "+hs.Error, hs.Kind)
	}
	res.Status = smokeHealthy
	if !r.live {
		return res
	}

	res.Live = &smokeCheck{}
	model := ""
	if tm, ok := a.(provider.TierMapper); ok {
		model = tm.ModelFor(provider.TierFastCheap)
	}
	if model == "" {
		return fail(res.Live, "live call: no fast_cheap model: set "+t.prefix+smokeModelSuffix, provider.KindBadRequest)
	}
	res.Live.Model = model
	start := time.Now()
	out, err := a.Invoke(ctx, &provider.Request{Prompt: smokePrompt, Tier: provider.TierFastCheap, Model: model, MaxTokens: 1, Timeout: r.timeout})
	res.Live.LatencyMS = time.Since(start).Milliseconds()
	if err != nil {
		var pe *provider.Error
		kind := provider.KindUnknown
		if errors.As(err, &pe) {
			kind = pe.Kind
		}
		return fail(res.Live, "live call: "+err.Error(), kind)
	}
	res.Live.OK, res.Live.StopReason = true, out.StopReason
	u, c := out.Usage, out.Cost
	res.Live.Usage, res.Live.Cost = &u, &c
	if out.Model != "" {
		res.Live.Model = out.Model
	}
	return res
}

// pdEvent is a PagerDuty Events API v2 event.
type pdEvent struct {
	RoutingKey  string     `json:"routing_key"`
	EventAction string     `json:"event_action"`
	DedupKey    string     `json:"dedup_key"`
	Payload     *pdPayload `json:"payload,omitempty"`
	Client      string     `json:"client,omitempty"`
	ClientURL   string     `json:"client_url,omitempty"`
	Links       []pdLink   `json:"links,omitempty"`
}

type pdPayload struct {
	Summary       string         `json:"summary"`
	Source        string         `json:"source"`
	Severity      string         `json:"severity"`
	Timestamp     string         `json:"timestamp"`
	Component     string         `json:"component,omitempty"`
	Group         string         `json:"group,omitempty"`
	Class         string         `json:"class,omitempty"`
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

type pdLink struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// pdDedupKey identifies a target's incident, so that a failure night after
// night is one incident and a healthy run resolves it.
func pdDedupKey(target string) string { return "cortexbuild/provider-smoke/" + target }

// runURL is the CI run the smoke test runs in, when GitHub Actions says so.
func (e *env) runURL() string {
	srv, repo, id := e.getenv("GITHUB_SERVER_URL"), e.getenv("GITHUB_REPOSITORY"), e.getenv("GITHUB_RUN_ID")
	if srv == "" || repo == "" || id == "" {
		return ""
	}
	return strings.TrimSuffix(srv, "/") + "/" + repo + "/actions/runs/" + id
}

func (e *env) smokeSource() string {
	if repo := e.getenv("GITHUB_REPOSITORY"); repo != "" {
		return repo + " (GitHub Actions)"
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "cortexbuild"
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// alert tells the sinks about every failed target: the log and the
// webhook get one notification each, PagerDuty (at pdURL) one event;
// PagerDuty also gets a resolve event for every healthy target. The
// webhook and PagerDuty connect only where the locality gate allows.
func (r *smokeRun) alert(ctx context.Context, results []smokeResult, project, webhook, pdKey, pdURL string) []alertOutcome {
	e := r.e
	var failed []smokeResult
	for _, res := range results {
		if res.Failed {
			failed = append(failed, res)
		}
	}
	out := []alertOutcome{}
	now := time.Now().UTC()
	message := func(res smokeResult) string {
		if res.Status == smokeSkipped {
			return fmt.Sprintf("provider %s not smoke-tested: %s", res.Target, res.Reason)
		}
		return fmt.Sprintf("provider %s unhealthy: %s", res.Target, res.Reason)
	}
	if len(failed) > 0 {
		sinks := []struct {
			name string
			n    orchestrator.Notifier
		}{{"log", orchestrator.LogNotifier{Logger: slog.New(slog.NewTextHandler(e.stderr, nil))}}}
		if webhook != "" {
			sinks = append(sinks, struct {
				name string
				n    orchestrator.Notifier
			}{"webhook", orchestrator.WebhookNotifier{URL: webhook, Client: r.alerts.ServiceClient(r.webhook, &http.Client{Timeout: 10 * time.Second})}})
		}
		for _, s := range sinks {
			o := alertOutcome{Sink: s.name}
			for _, res := range failed {
				n := orchestrator.Notification{Level: "critical", Event: "provider_smoke_failed", Project: project,
					Provider: res.Target, Message: r.redact(message(res)), At: now}
				if res.severity == "warning" {
					n.Level = "warning"
				}
				if err := s.n.Notify(ctx, n); err != nil {
					if o.Error == "" {
						o.Error = r.redact(err.Error())
					}
					continue
				}
				o.Sent++
			}
			out = append(out, o)
		}
	}
	if pdKey == "" {
		return out
	}
	o := alertOutcome{Sink: "pagerduty"}
	client := r.alerts.ServiceClient(svcPagerDuty, &http.Client{Timeout: 10 * time.Second})
	run := e.runURL()
	for _, res := range results {
		ev := pdEvent{RoutingKey: pdKey, DedupKey: pdDedupKey(res.Target), Client: "CortexBuild provider smoke test", ClientURL: run}
		switch {
		case res.Failed:
			ev.EventAction = "trigger"
			details := map[string]any{"adapter_type": res.Type, "status": res.Status, "reason": r.redact(res.Reason)}
			if res.Profile != "" {
				details["profile"] = res.Profile
			}
			if res.BaseURL != "" {
				details["base_url"] = res.BaseURL
			}
			class := "missing_credentials"
			for _, c := range []*smokeCheck{res.Health, res.Live} {
				if c != nil && !c.OK {
					class = c.Kind.String()
					details["kind"] = class
					details["latency_ms"] = c.LatencyMS
				}
			}
			if res.Live != nil && !res.Live.OK {
				details["check"] = "live"
			} else if res.Health != nil {
				details["check"] = "health"
			}
			if run != "" {
				details["run_url"] = run
				ev.Links = []pdLink{{Href: run, Text: "smoke test run"}}
			}
			ev.Payload = &pdPayload{Summary: clipText(r.redact("CortexBuild "+message(res)), 1024), Source: e.smokeSource(),
				Severity: res.severity, Timestamp: now.Format(time.RFC3339), Component: res.Target, Group: "llm-providers",
				Class: class, CustomDetails: details}
		case res.Status == smokeHealthy:
			ev.EventAction = "resolve"
		default:
			continue // skipped and not required: nothing is known
		}
		if err := r.sendPagerDuty(ctx, client, pdURL, ev); err != nil {
			if o.Error == "" {
				o.Error = r.redact(err.Error())
			}
			continue
		}
		if ev.EventAction == "trigger" {
			o.Sent++
		} else {
			o.Resolved++
		}
	}
	return append(out, o)
}

// sendPagerDuty posts one event; anything but a 2xx is an error.
func (r *smokeRun) sendPagerDuty(ctx context.Context, c *http.Client, endpoint string, ev pdEvent) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return errors.New("invalid PagerDuty events URL")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return fmt.Errorf("PagerDuty events API at %s: %v", displayURL(endpoint), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PagerDuty events API at %s answered %s: %s", displayURL(endpoint), resp.Status, strings.TrimSpace(string(snippet)))
	}
	return nil
}

func printSmoke(w io.Writer, rep smokeReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tSTATUS\tLATENCY\tDETAIL")
	healthy, unhealthy, skipped := 0, 0, 0
	for _, r := range rep.Results {
		latency, detail := "-", r.Reason
		switch r.Status {
		case smokeHealthy:
			healthy++
			detail = "health check ok"
		case smokeUnhealthy:
			unhealthy++
		case smokeSkipped:
			skipped++
			detail = "skipped: " + r.Reason
			if r.Failed {
				detail += " (required by --require-all)"
			}
		}
		if r.Health != nil {
			latency = fmt.Sprintf("%dms", r.Health.LatencyMS)
		}
		if l := r.Live; l != nil && l.OK {
			detail += fmt.Sprintf("; live call ok (%s, %s", l.Model, l.StopReason)
			if l.Usage != nil {
				detail += fmt.Sprintf(", %d in / %d out tokens", l.Usage.InputTokens, l.Usage.OutputTokens)
			}
			if l.Cost != nil {
				detail += ", $" + l.Cost.String()
			}
			detail += ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Target, r.Status, latency, detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d healthy, %d unhealthy, %d skipped", healthy, unhealthy, skipped)
	for _, a := range rep.Alerts {
		switch {
		case a.Error != "":
			fmt.Fprintf(w, "; %s alert failed", a.Sink)
		case a.Sent > 0 || a.Resolved > 0:
			fmt.Fprintf(w, "; %s: %d alert(s)", a.Sink, a.Sent)
			if a.Resolved > 0 {
				fmt.Fprintf(w, ", %d resolved", a.Resolved)
			}
		}
	}
	fmt.Fprintln(w)
}
