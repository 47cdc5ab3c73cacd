package tracing_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/observe/tracing"
	"github.com/cortexbuild/cortexbuild/provider"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	o, err := tracing.New(tracing.Settings{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), ProviderNames: map[string]string{"work": "anthropic"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	inv := observe.Invocation{ID: "inv_1", Agent: "planner", Task: "T1", Tier: provider.TierReasoningHeavy, MaxTokens: 8000, Start: start}
	ctx := o.StartInvocation(context.Background(), inv)
	o.AttemptDone(ctx, observe.Attempt{InvocationID: "inv_1", Agent: "planner", Task: "T1", Provider: "work", Model: "claude-opus-4-7", Tier: provider.TierReasoningHeavy, Outcome: "overloaded", MaxTokens: 8000,
		Start: start, Latency: 800 * time.Millisecond})
	o.AttemptDone(ctx, observe.Attempt{InvocationID: "inv_1", Agent: "planner", Task: "T1", Provider: "local", Model: "qwen3", Outcome: "ok", MaxTokens: 8000, ResponseModel: "qwen3:32b", FinishReason: provider.StopMaxTokens,
		Usage: provider.Usage{InputTokens: 900, OutputTokens: 8000, CacheWriteTokens: 100, ReasoningTokens: 500, Estimated: true}, Cost: 0, Start: start.Add(time.Second), Latency: 4 * time.Second, Waited: 200 * time.Millisecond})
	o.EndInvocation(ctx, inv, observe.End{Outcome: "ok", Provider: "local", Model: "qwen3:32b", Attempts: 2, FinishReason: provider.StopMaxTokens, Duration: 5 * time.Second})

	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans", len(ended))
	}
	failed, ok, call := ended[0], ended[1], ended[2]
	if call.Name() != "invoke_agent planner" || failed.Name() != "chat claude-opus-4-7" || ok.Name() != "chat qwen3" {
		t.Errorf("names %q %q %q", call.Name(), failed.Name(), ok.Name())
	}
	if !call.StartTime().Equal(start) || !call.EndTime().Equal(start.Add(5*time.Second)) ||
		!failed.StartTime().Equal(start) || !failed.EndTime().Equal(start.Add(800*time.Millisecond)) ||
		!ok.StartTime().Equal(start.Add(time.Second)) || !ok.EndTime().Equal(start.Add(5*time.Second)) {
		t.Errorf("times: call %v..%v failed %v..%v ok %v..%v", call.StartTime(), call.EndTime(), failed.StartTime(), failed.EndTime(), ok.StartTime(), ok.EndTime())
	}
	if call.SpanKind() != trace.SpanKindInternal || failed.SpanKind() != trace.SpanKindClient {
		t.Errorf("kinds %v %v", call.SpanKind(), failed.SpanKind())
	}
	if failed.Status().Code != codes.Error || ok.Status().Code != codes.Unset || call.Status().Code != codes.Unset {
		t.Errorf("statuses %v %v %v", failed.Status(), ok.Status(), call.Status())
	}
	for _, c := range []struct {
		span sdktrace.ReadOnlySpan
		want map[attribute.Key]string
	}{
		{failed, map[attribute.Key]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "cortexbuild.provider": "work", "gen_ai.request.model": "claude-opus-4-7",
			"gen_ai.request.max_tokens": "8000", "error.type": "overloaded", "cortexbuild.tier": "reasoning_heavy", "cortexbuild.task": "T1"}},
		{ok, map[attribute.Key]string{"gen_ai.provider.name": "local", "gen_ai.response.model": "qwen3:32b", "gen_ai.response.finish_reasons": `["max_tokens"]`,
			"gen_ai.usage.input_tokens": "900", "gen_ai.usage.output_tokens": "8000", "gen_ai.usage.cache_creation.input_tokens": "100",
			"gen_ai.usage.reasoning.output_tokens": "500", "cortexbuild.usage_estimated": "true", "cortexbuild.waited_ms": "200", "cortexbuild.cost_usd": "0"}},
		{call, map[attribute.Key]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "gen_ai.request.max_tokens": "8000", "cortexbuild.invocation_id": "inv_1",
			"cortexbuild.attempts": "2", "gen_ai.provider.name": "local", "gen_ai.response.model": "qwen3:32b"}},
	} {
		got := attrs(c.span)
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", c.span.Name(), k, got[k], v)
			}
		}
	}
	if _, has := attrs(failed)["gen_ai.usage.input_tokens"]; has {
		t.Error("a failed attempt that billed nothing carries token counts")
	}
	if _, has := attrs(ok)["error.type"]; has {
		t.Error("a successful attempt carries error.type")
	}
}

func TestProviderName(t *testing.T) {
	for _, c := range []struct{ typ, profile, want string }{
		{"anthropic", "", "anthropic"},
		{"gemini", "", "gcp.gemini"},
		{"openai_compatible", "openai", "openai"},
		{"openai_compatible", "", "openai"},
		{"openai_compatible", "ollama", "ollama"},
		{"something_new", "", "something_new"},
	} {
		if got := tracing.ProviderName(c.typ, c.profile); got != c.want {
			t.Errorf("ProviderName(%q, %q) = %q, want %q", c.typ, c.profile, got, c.want)
		}
	}
}

func TestNewNeedsAProvider(t *testing.T) {
	if _, err := tracing.New(tracing.Settings{}); err == nil {
		t.Error("New without a TracerProvider succeeded")
	}
}

// collector is an OTLP/HTTP receiver on loopback that keeps what it got.
type collector struct {
	mu      sync.Mutex
	paths   []string
	headers []http.Header
	reqs    []*coltrace.ExportTraceServiceRequest
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rd io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rd = zr
	}
	body, _ := io.ReadAll(rd)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.paths, c.headers, c.reqs = append(c.paths, r.URL.Path), append(c.headers, r.Header.Clone()), append(c.reqs, &req)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func TestOTLPExportToLoopback(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	ctx := context.Background()
	tp, err := tracing.NewOTLP(ctx, tracing.OTLPSettings{Endpoint: srv.URL, Headers: map[string]string{"Authorization": "Bearer collector-token"}, ServiceName: "cortexbuild-test", ServiceVersion: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := tracing.New(tracing.Settings{TracerProvider: tp})
	inv := observe.Invocation{ID: "inv_1", Agent: "builder", Start: time.Now()}
	octx := o.StartInvocation(ctx, inv)
	o.AttemptDone(octx, observe.Attempt{Provider: "anthropic", Model: "claude-sonnet-4-6", Outcome: "ok", Start: inv.Start, Latency: time.Millisecond})
	o.EndInvocation(octx, inv, observe.End{Outcome: "ok", Duration: time.Millisecond})
	if err := tp.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.reqs) != 1 {
		t.Fatalf("%d exports", len(col.reqs))
	}
	if col.paths[0] != "/v1/traces" || col.headers[0].Get("Authorization") != "Bearer collector-token" || col.headers[0].Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("export to %s with headers %v", col.paths[0], col.headers[0])
	}
	rs := col.reqs[0].GetResourceSpans()
	if len(rs) != 1 {
		t.Fatalf("%d resource spans", len(rs))
	}
	res := map[string]string{}
	for _, kv := range rs[0].GetResource().GetAttributes() {
		res[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if res["service.name"] != "cortexbuild-test" || res["service.version"] != "v1.2.3" {
		t.Errorf("resource = %v", res)
	}
	var names []string
	for _, ss := range rs[0].GetScopeSpans() {
		if ss.GetScope().GetName() != tracing.ScopeName {
			t.Errorf("scope %q", ss.GetScope().GetName())
		}
		for _, s := range ss.GetSpans() {
			names = append(names, s.GetName())
		}
	}
	if len(names) != 2 || names[0] != "chat claude-sonnet-4-6" || names[1] != "invoke_agent builder" {
		t.Fatalf("exported spans %v", names)
	}
	// The exporter's encoding: the chat span is the invocation's child in
	// the same trace, kinds and typed attributes as recorded.
	spans := rs[0].GetScopeSpans()[0].GetSpans()
	chat, agent := spans[0], spans[1]
	if len(chat.GetTraceId()) != 16 || string(chat.GetTraceId()) != string(agent.GetTraceId()) || string(chat.GetParentSpanId()) != string(agent.GetSpanId()) || len(agent.GetParentSpanId()) != 0 {
		t.Errorf("chat span trace %x parent %x; invoke_agent trace %x span %x parent %x", chat.GetTraceId(), chat.GetParentSpanId(), agent.GetTraceId(), agent.GetSpanId(), agent.GetParentSpanId())
	}
	if chat.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || agent.GetKind() != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("kinds %v, %v", chat.GetKind(), agent.GetKind())
	}
	if chat.GetStartTimeUnixNano() == 0 || chat.GetEndTimeUnixNano() < chat.GetStartTimeUnixNano() {
		t.Errorf("chat span times %d..%d", chat.GetStartTimeUnixNano(), chat.GetEndTimeUnixNano())
	}
	attrs := map[string]*commonpb.AnyValue{}
	for _, kv := range chat.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue()
	}
	_, isBool := attrs["gen_ai.request.stream"].GetValue().(*commonpb.AnyValue_BoolValue)
	_, isInt := attrs["gen_ai.usage.input_tokens"].GetValue().(*commonpb.AnyValue_IntValue)
	_, isDouble := attrs["cortexbuild.cost_usd"].GetValue().(*commonpb.AnyValue_DoubleValue)
	if attrs["gen_ai.request.model"].GetStringValue() != "claude-sonnet-4-6" || !isBool || !isInt || !isDouble {
		t.Errorf("chat span attributes %v", attrs)
	}
}

// The standard OTEL_EXPORTER_OTLP_* variables set the headers (when the
// settings name none) and gzip compression; a malformed one is an error.
func TestOTLPEnvironment(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=general")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=a%20team,x-env=ci")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
	export := func(headers map[string]string) http.Header {
		t.Helper()
		ctx := context.Background()
		tp, err := tracing.NewOTLP(ctx, tracing.OTLPSettings{Endpoint: srv.URL, Headers: headers})
		if err != nil {
			t.Fatal(err)
		}
		o, _ := tracing.New(tracing.Settings{TracerProvider: tp})
		inv := observe.Invocation{ID: "inv_1", Agent: "builder", Start: time.Now()}
		o.EndInvocation(o.StartInvocation(ctx, inv), inv, observe.End{Outcome: "ok"})
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		col.mu.Lock()
		defer col.mu.Unlock()
		if len(col.reqs) == 0 || len(col.reqs[len(col.reqs)-1].GetResourceSpans()) != 1 {
			t.Fatalf("nothing decodable was exported (%d exports)", len(col.reqs))
		}
		return col.headers[len(col.headers)-1]
	}
	h := export(nil)
	if h.Get("Content-Encoding") != "gzip" || h.Get("x-team") != "a team" || h.Get("x-env") != "ci" {
		t.Errorf("export headers from the environment: %v", h)
	}
	h = export(map[string]string{"x-file": "1"})
	if h.Get("x-file") != "1" || h.Get("x-team") != "" {
		t.Errorf("with headers in the settings, the environment's are not sent: %v", h)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")
	if _, err := tracing.NewOTLP(context.Background(), tracing.OTLPSettings{Endpoint: srv.URL}); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_COMPRESSION") {
		t.Errorf("NewOTLP with compression zstd = %v, want an error naming the variable", err)
	}
}

func TestOTLPSampleRatio(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	ctx := context.Background()
	tp, err := tracing.NewOTLP(ctx, tracing.OTLPSettings{Endpoint: srv.URL + "/custom/path", SampleRatio: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp.RegisterSpanProcessor(rec)
	o, _ := tracing.New(tracing.Settings{TracerProvider: tp})
	for range 20 {
		inv := observe.Invocation{Agent: "builder", Start: time.Now()}
		o.EndInvocation(o.StartInvocation(ctx, inv), inv, observe.End{Outcome: "ok"})
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d of 20 calls sampled at a ratio of 1e-12", n)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.reqs) != 0 {
		t.Errorf("%d exports of nothing", len(col.reqs))
	}
}

func TestOTLPRefusesNonHTTP(t *testing.T) {
	for _, ep := range []string{"", "127.0.0.1:4318", "grpc://127.0.0.1:4317", "http://"} {
		if _, err := tracing.NewOTLP(context.Background(), tracing.OTLPSettings{Endpoint: ep}); err == nil {
			t.Errorf("NewOTLP(%q) succeeded", ep)
		}
	}
}
