// Package tracing reports the orchestrator's calls as OpenTelemetry spans
// following the GenAI semantic conventions (semconv v1.41.0):
//
//	invoke_agent {agent}          one per call (kind internal)
//	├── chat {request model}      one per attempt on a provider (kind client)
//	└── chat {request model}      the failover, or the retry after a backoff
//
// A chat span carries gen_ai.operation.name=chat, gen_ai.provider.name,
// gen_ai.request.model, gen_ai.request.max_tokens, gen_ai.request.stream,
// gen_ai.response.model, gen_ai.response.finish_reasons,
// gen_ai.usage.input_tokens and gen_ai.usage.output_tokens (with the prompt
// cache and reasoning parts), error.type on failure, and cortexbuild.*
// attributes: agent, task, invocation id, provider instance, tier, cost.
// Token counts are on chat spans only, so a backend that adds them up never
// counts a call twice. No span holds a prompt, an answer, an error message
// or a credential.
//
// Chat spans are built after the fact from the start time and latency the
// orchestrator recorded for each attempt, so tracing adds nothing to the
// attempt itself and a backoff shows as the gap between two chat spans. [NewOTLP]
// builds the exporter pipeline (OTLP over HTTP); it is the only part of
// this package that sends anything, and only to the endpoint it is given.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/provider"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/cortexbuild/cortexbuild/orchestrator"

// CortexBuild's own span attributes.
const (
	AttrAgent        = attribute.Key("cortexbuild.agent")
	AttrTask         = attribute.Key("cortexbuild.task")
	AttrInvocationID = attribute.Key("cortexbuild.invocation_id")
	AttrProvider     = attribute.Key("cortexbuild.provider") // the provider instance name
	AttrTier         = attribute.Key("cortexbuild.tier")
	AttrOutcome      = attribute.Key("cortexbuild.outcome")
	AttrCostUSD      = attribute.Key("cortexbuild.cost_usd")
	AttrSavedUSD     = attribute.Key("cortexbuild.saved_usd")
	AttrAttempts     = attribute.Key("cortexbuild.attempts")
	AttrWaitedMS     = attribute.Key("cortexbuild.waited_ms")
	AttrEstimated    = attribute.Key("cortexbuild.usage_estimated")
	AttrBudgetScope  = attribute.Key("cortexbuild.budget.scope")
	AttrBudgetReason = attribute.Key("cortexbuild.budget.reason")
)

// Settings configure an Observer.
type Settings struct {
	// TracerProvider makes the spans. Required: [NewOTLP] builds one that
	// exports, tests pass one with an in-memory recorder.
	TracerProvider trace.TracerProvider
	// ProviderNames maps a provider instance name to the
	// gen_ai.provider.name value of its vendor ("anthropic", "openai",
	// "gcp.gemini", ...). An instance missing here is named as itself.
	ProviderNames map[string]string
}

// Observer turns calls into spans. It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	names  map[string]string
}

// New returns an Observer making spans with s.TracerProvider.
func New(s Settings) (*Observer, error) {
	if s.TracerProvider == nil {
		return nil, errors.New("tracing: a TracerProvider is required")
	}
	return &Observer{tracer: s.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)), names: s.ProviderNames}, nil
}

// StartInvocation starts the call's invoke_agent span.
func (o *Observer) StartInvocation(ctx context.Context, inv observe.Invocation) context.Context {
	name := semconv.GenAIOperationNameInvokeAgent.Value.AsString()
	if inv.Agent != "" {
		name += " " + inv.Agent
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		semconv.GenAIOperationNameInvokeAgent,
		AttrInvocationID.String(inv.ID),
		AttrTier.String(string(inv.Tier)),
		semconv.GenAIRequestStream(inv.Stream),
	)
	if inv.Agent != "" {
		attrs = append(attrs, semconv.GenAIAgentName(inv.Agent), AttrAgent.String(inv.Agent))
	}
	if inv.Task != "" {
		attrs = append(attrs, AttrTask.String(inv.Task))
	}
	if inv.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(inv.Model))
	}
	if inv.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(inv.MaxTokens))
	}
	ctx, _ = o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(inv.Start), trace.WithAttributes(attrs...))
	return ctx
}

// AttemptDone records the attempt as a chat span under the call's span,
// with the attempt's own start and end times.
func (o *Observer) AttemptDone(ctx context.Context, a observe.Attempt) {
	attrs := make([]attribute.KeyValue, 0, 24)
	attrs = append(attrs,
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(o.providerName(a.Provider)),
		semconv.GenAIRequestModel(a.Model),
		semconv.GenAIRequestStream(a.Stream),
		AttrProvider.String(a.Provider),
		AttrTier.String(string(a.Tier)),
		AttrInvocationID.String(a.InvocationID),
		AttrOutcome.String(a.Outcome),
	)
	if a.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(a.MaxTokens))
	}
	if a.Agent != "" {
		attrs = append(attrs, AttrAgent.String(a.Agent))
	}
	if a.Task != "" {
		attrs = append(attrs, AttrTask.String(a.Task))
	}
	if a.ResponseModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(a.ResponseModel))
	}
	if a.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(string(a.FinishReason)))
	}
	attrs = usage(attrs, a.Outcome == observe.OutcomeOK, a.Usage)
	attrs = append(attrs, AttrCostUSD.Float64(observe.USD(a.Cost)))
	if a.Waited > 0 {
		attrs = append(attrs, AttrWaitedMS.Int64(a.Waited.Milliseconds()))
	}
	failed := a.Outcome != observe.OutcomeOK
	if failed {
		attrs = append(attrs, semconv.ErrorTypeKey.String(a.Outcome))
	}
	name := "chat"
	if a.Model != "" {
		name += " " + a.Model
	}
	_, span := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(a.Start), trace.WithAttributes(attrs...))
	if failed {
		span.SetStatus(codes.Error, a.Outcome)
	}
	span.End(trace.WithTimestamp(a.Start.Add(a.Latency)))
}

// EndInvocation ends the call's span with its outcome and totals.
func (o *Observer) EndInvocation(ctx context.Context, inv observe.Invocation, end observe.End) {
	span := trace.SpanFromContext(ctx)
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		AttrOutcome.String(end.Outcome),
		AttrAttempts.Int(end.Attempts),
		AttrCostUSD.Float64(observe.USD(end.Cost)),
	)
	if end.Provider != "" {
		attrs = append(attrs, semconv.GenAIProviderNameKey.String(o.providerName(end.Provider)), AttrProvider.String(end.Provider))
	}
	if end.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(end.Model))
	}
	if end.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(string(end.FinishReason)))
	}
	if end.Saved > 0 {
		attrs = append(attrs, AttrSavedUSD.Float64(observe.USD(end.Saved)))
	}
	if b := end.Budget; b.Scope != "" {
		attrs = append(attrs, AttrBudgetScope.String(b.Scope), AttrBudgetReason.String(b.Reason))
	}
	failed := end.Outcome != observe.OutcomeOK && end.Outcome != observe.OutcomeCacheHit
	if failed {
		attrs = append(attrs, semconv.ErrorTypeKey.String(end.Outcome))
	}
	span.SetAttributes(attrs...)
	if failed {
		span.SetStatus(codes.Error, end.Outcome)
	}
	span.End(trace.WithTimestamp(inv.Start.Add(end.Duration)))
}

// BreakerChanged does nothing: breaker states are metrics and log lines.
func (*Observer) BreakerChanged(string, observe.BreakerState) {}

func (o *Observer) providerName(instance string) string {
	if n := o.names[instance]; n != "" {
		return n
	}
	return instance
}

// usage adds the token counts: always on success, on failure only when the
// attempt billed some.
func usage(attrs []attribute.KeyValue, ok bool, u provider.Usage) []attribute.KeyValue {
	if !ok && u.InputTokens == 0 && u.OutputTokens == 0 {
		return attrs
	}
	attrs = append(attrs, semconv.GenAIUsageInputTokens(int(u.InputTokens)), semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
	if u.CacheReadTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(u.CacheReadTokens)))
	}
	if u.CacheWriteTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWriteTokens)))
	}
	if u.ReasoningTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(int(u.ReasoningTokens)))
	}
	if u.Estimated {
		attrs = append(attrs, AttrEstimated.Bool(true))
	}
	return attrs
}

// ProviderName returns the gen_ai.provider.name of an adapter type and
// profile from llm-config.yaml: the semantic conventions' well-known value
// where one applies ("anthropic", "openai", "gcp.gemini"), else the
// profile or type itself ("ollama", "vllm").
func ProviderName(adapterType, profile string) string {
	switch adapterType {
	case "anthropic":
		return semconv.GenAIProviderNameAnthropic.Value.AsString()
	case "gemini":
		return semconv.GenAIProviderNameGCPGemini.Value.AsString()
	case "openai_compatible":
		if profile == "" || profile == "openai" {
			return semconv.GenAIProviderNameOpenAI.Value.AsString()
		}
		return profile
	}
	return adapterType
}

var _ observe.Observer = (*Observer)(nil)

// OTLPSettings configure [NewOTLP].
type OTLPSettings struct {
	// Endpoint is the collector's OTLP/HTTP URL, e.g.
	// http://127.0.0.1:4318; /v1/traces is appended when it has no path.
	// http:// sends in clear text, https:// over TLS.
	Endpoint string
	// Headers are sent with every export (an API key of a hosted
	// collector, for example).
	Headers map[string]string
	// SampleRatio is the fraction of calls traced, above 0 and at most 1;
	// a call's spans are kept or dropped together. Default (0) 1: every
	// call.
	SampleRatio float64
	// ServiceName is the resource's service.name. Default "cortexbuild".
	ServiceName string
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
	// Timeout bounds one export. Default 10 s.
	Timeout time.Duration
	// HTTPClient, when set, sends the exports (the locality gate's
	// ServiceClient, so that they connect only where it allows); its
	// Timeout is set to Timeout. nil: the exporter's own client, which
	// honours proxy settings.
	HTTPClient *http.Client
}

// NewOTLP returns a tracer provider that batches spans and exports them
// over OTLP/HTTP (protobuf) to s.Endpoint. Nothing is sent until a span
// ends. Shut it down (Shutdown) when the program ends: that flushes what
// is left. Never install it as the global provider: that would also switch
// on the provider SDKs' own instrumentation, which may record message
// content and send trace context to the vendor.
func NewOTLP(ctx context.Context, s OTLPSettings) (*sdktrace.TracerProvider, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: endpoint %q is not an http(s) URL", s.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	c := &http.Client{Transport: http.DefaultTransport}
	if s.HTTPClient != nil {
		*c = *s.HTTPClient
	}
	c.Timeout = timeout
	headers, gz, err := envSettings(os.Getenv)
	if err != nil {
		return nil, err
	}
	if len(s.Headers) > 0 {
		headers = make(map[string]string, len(s.Headers))
		for k, v := range s.Headers {
			headers[k] = v
		}
	}
	exp := &otlpExporter{url: u.String(), headers: headers, gzip: gz, client: c}
	name := strings.TrimSpace(s.ServiceName)
	if name == "" {
		name = "cortexbuild"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if s.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(s.ServiceVersion))
	}
	ratio := 1.0
	if s.SampleRatio > 0 {
		ratio = min(s.SampleRatio, 1)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	), nil
}
