package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func testEnv(dir string, stderr io.Writer, vars map[string]string) *env {
	return &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, wd: dir, registry: builtin.Registry(),
		getenv:    func(k string) string { return vars[k] },
		lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
}

func parseConfig(t *testing.T, body string) *config.File {
	t.Helper()
	dir := writeConfig(t, body)
	f, err := config.Load(filepath.Join(dir, config.Dir, config.FileName), builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Zero egress: with no observability configured, nothing is built, so
// nothing can send or listen.
func TestTelemetryOffByDefault(t *testing.T) {
	f := parseConfig(t, "orchestration: true\n")
	var errb bytes.Buffer
	tel, err := testEnv(t.TempDir(), &errb, nil).openTelemetry(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if tel.observer != nil || tel.tracer != nil || tel.metrics != nil || tel.server != nil || tel.logFile != nil {
		t.Errorf("unconfigured telemetry built something: %+v", tel)
	}
	tel.close()
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
}

// otlpCollector is an OTLP/HTTP receiver on loopback that keeps the span
// names and the headers it got.
type otlpCollector struct {
	mu      sync.Mutex
	spans   []string
	headers []http.Header
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.headers = append(c.headers, r.Header.Clone())
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, s.GetName())
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func TestObservabilityThroughInvoke(t *testing.T) {
	col := &otlpCollector{}
	colSrv := httptest.NewServer(col)
	defer colSrv.Close()
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	srv2 := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv2.Close)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
  claude2:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
routing:
  preference: [claude, claude2]
  allow_alternates: true
observability:
  logs:
    level: info
    format: json
    file: logs/cortexbuild.log
  traces:
    endpoint: %s
    headers:
      Authorization: ${OTLP_AUTH}
    service_name: cb-test
  metrics:
    listen: 127.0.0.1:0
`, srv.URL(), srv2.URL(), colSrv.URL))
	vars := map[string]string{"MY_KEY": testKey, "OTLP_AUTH": "Bearer collector-secret"}
	srv.Enqueue(anthropicfake.BillingError())
	srv2.Enqueue(anthropicfake.TextReply("observed answer"))
	const prompt = "a prompt that stays out of the telemetry"
	code, out, errs := run(t, dir, vars, "invoke", "--agent", "builder", "--task", "T7", prompt)
	if code != 0 || !strings.Contains(out, "observed answer") {
		t.Fatalf("invoke = %d %q %q", code, out, errs)
	}

	// Log lines went to the file, as JSON, never with the prompt or key.
	b, err := os.ReadFile(filepath.Join(dir, "logs", "cortexbuild.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), prompt) || strings.Contains(string(b), testKey) || strings.Contains(errs, `"msg":"llm`) {
		t.Fatalf("log file:\n%s\nstderr:\n%s", b, errs)
	}
	var msgs []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		msgs = append(msgs, fmt.Sprintf("%s %s %s %s", m["msg"], m["provider"], m["outcome"], m["task"]))
	}
	if want := []string{"llm attempt claude quota_exhausted T7", "llm invocation claude2 ok T7"}; strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Errorf("log lines %q, want %q", msgs, want)
	}

	// No global tracer provider or propagator was installed, so nothing
	// (the provider SDKs' own instrumentation included) sends trace context
	// to a provider.
	if _, global := otel.GetTracerProvider().(*sdktrace.TracerProvider); global {
		t.Error("the global tracer provider was replaced")
	}
	for _, r := range append(srv.Requests(), srv2.Requests()...) {
		for _, h := range []string{"Traceparent", "Tracestate", "Baggage"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("a provider request carried %s: %s", h, v)
			}
		}
	}

	// The spans were flushed to the collector when the command ended.
	col.mu.Lock()
	defer col.mu.Unlock()
	if strings.Join(col.spans, "|") != "chat claude-sonnet-4-6|chat claude-sonnet-4-6|invoke_agent builder" {
		t.Errorf("exported spans %q", col.spans)
	}
	if len(col.headers) == 0 || col.headers[0].Get("Authorization") != "Bearer collector-secret" {
		t.Errorf("export headers %v", col.headers)
	}
}

func TestMetricsEndpointLifecycle(t *testing.T) {
	f := parseConfig(t, "observability:\n  metrics:\n    listen: 127.0.0.1:0\n")
	tel, err := testEnv(t.TempDir(), io.Discard, nil).openTelemetry(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if tel.server == nil || tel.observer == nil || tel.tracer != nil || tel.logFile != nil {
		t.Fatalf("telemetry = %+v", tel)
	}
	tel.observer.EndInvocation(context.Background(), observe.Invocation{Agent: "builder"}, observe.End{Outcome: "ok"})
	url := "http://" + tel.server.Addr().String() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "# TYPE cortexbuild_requests_total counter") {
		t.Errorf("GET /metrics = %d\n%s", resp.StatusCode, body)
	}
	tel.close()
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics server outlived the command")
	}
}

// Another command of the project already serving the metrics address is no
// reason to fail this one.
func TestMetricsAddressInUseIsAWarning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := parseConfig(t, "observability:\n  metrics:\n    listen: "+ln.Addr().String()+"\n")
	var errb bytes.Buffer
	tel, err := testEnv(t.TempDir(), &errb, nil).openTelemetry(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.close()
	if tel.server != nil || tel.observer == nil || !strings.Contains(errb.String(), "this command serves no metrics") {
		t.Errorf("server %v observer %v stderr %q", tel.server, tel.observer, errb.String())
	}
}

func TestTraceHeaderVariableMustBeSet(t *testing.T) {
	f := parseConfig(t, "observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    headers:\n      Authorization: ${UNSET_OTLP_AUTH}\n")
	_, err := testEnv(t.TempDir(), io.Discard, nil).openTelemetry(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "UNSET_OTLP_AUTH is not set") {
		t.Errorf("err = %v", err)
	}
}

// The metrics the CLI builds keep the configured names (a provider's
// tier models, an agent's model, the price catalog's models) as labels
// and count every other name, such as models a gateway client chose,
// under "other".
func TestMetricLabelsAreConfiguredNames(t *testing.T) {
	f := parseConfig(t, `orchestration: true
providers:
  local:
    type: openai_compatible
    profile: ollama
    base_url: http://127.0.0.1:11434/v1
    models:
      balanced: qwen3:8b
agents:
  builder:
    model: llama3.3:70b
observability:
  metrics:
    listen: 127.0.0.1:0
`)
	tel, err := testEnv(t.TempDir(), io.Discard, nil).openTelemetry(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.close()
	ctx := context.Background()
	for _, model := range []string{"qwen3:8b", "llama3.3:70b", "claude-sonnet-4-6"} {
		tel.metrics.EndInvocation(ctx, observe.Invocation{Agent: "builder"}, observe.End{Outcome: "ok", Provider: "local", Model: model})
	}
	for i := range 2000 {
		tel.metrics.EndInvocation(ctx, observe.Invocation{Agent: fmt.Sprintf("agent-%d", i)}, observe.End{Outcome: "ok", Provider: "local", Model: fmt.Sprintf("client-chosen-%d", i)})
	}
	mfs, err := tel.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "cortexbuild_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got = append(got, fmt.Sprintf("%s/%s/%s=%v", l["provider"], l["model"], l["agent"], m.GetCounter().GetValue()))
		}
	}
	slices.Sort(got)
	want := []string{"local/claude-sonnet-4-6/builder=1", "local/llama3.3:70b/builder=1", "local/other/other=2000", "local/qwen3:8b/builder=1"}
	if !slices.Equal(got, want) {
		t.Errorf("requests_total series %q, want %q", got, want)
	}
}
