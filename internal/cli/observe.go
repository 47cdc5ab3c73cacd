package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/observe/metrics"
	"github.com/cortexbuild/cortexbuild/observe/tracing"
)

// shutdownTimeout bounds the final flush of spans and the metrics server's
// shutdown when a command ends.
const shutdownTimeout = 5 * time.Second

// telemetry is what observability: in the configuration turned on. Each
// part is nil when off; with nothing configured, all are, and nothing is
// sent or opened.
type telemetry struct {
	observer observe.Observer
	logFile  *os.File
	tracer   *sdktrace.TracerProvider
	metrics  *metrics.Observer
	server   *metrics.Server
}

// openTelemetry builds the observer the configuration asks for: structured
// log lines, an OTLP trace exporter, a Prometheus endpoint. A metrics
// address already in use (another command of the project serving it) is
// reported and skipped, not fatal.
func (e *env) openTelemetry(ctx context.Context, f *config.File) (*telemetry, error) {
	t := &telemetry{}
	ob := &f.Observability
	var parts []observe.Observer
	if ob.LogsOn() {
		w := e.stderr
		if ob.Logs.File != "" {
			path := ob.Logs.File
			if !filepath.IsAbs(path) {
				path = filepath.Join(e.projectDir(f), path)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, withCode(ExitFailure, fmt.Errorf("observability.logs.file: %w", err))
			}
			lf, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, withCode(ExitFailure, fmt.Errorf("observability.logs.file: %w", err))
			}
			t.logFile, w = lf, lf
		}
		e.logOut = w
		parts = append(parts, observe.NewLogger(slog.New(logHandler(w, ob.Logs.Format, ob.Logs.Level))))
	}
	if ob.TracesOn() {
		headers := map[string]string{}
		for name, s := range ob.Traces.Headers {
			v, err := s.Resolve(e.lookupEnv)
			if err != nil {
				t.close()
				return nil, withCode(ExitConfig, err)
			}
			headers[name] = v
		}
		g := e.gate(f)
		if err := checkServiceURL(g, svcTraces, ob.Traces.Pos.Key("endpoint"), ob.Traces.Endpoint); err != nil {
			t.close()
			return nil, err
		}
		s := tracing.OTLPSettings{Endpoint: ob.Traces.Endpoint, Headers: headers, ServiceName: ob.Traces.ServiceName, ServiceVersion: buildVersion(),
			HTTPClient: g.ServiceClient(svcTraces, nil)}
		if r := ob.Traces.SampleRatio; r != nil {
			s.SampleRatio = *r
		}
		tp, err := tracing.NewOTLP(ctx, s)
		if err != nil {
			t.close()
			return nil, withCode(ExitConfig, err)
		}
		t.tracer = tp
		names := map[string]string{}
		for name, p := range f.Providers {
			names[name] = tracing.ProviderName(p.Type, p.Profile)
		}
		tr, err := tracing.New(tracing.Settings{TracerProvider: tp, ProviderNames: names})
		if err != nil {
			t.close()
			return nil, withCode(ExitFailure, err)
		}
		parts = append(parts, tr)
	}
	if ob.MetricsOn() {
		t.metrics = metrics.New(metrics.Settings{Runtime: true, Names: e.metricNames(f)})
		srv, err := metrics.Serve(ob.Metrics.Listen, t.metrics.Handler())
		if err != nil {
			fmt.Fprintf(e.stderr, "cortexbuild: observability.metrics.listen: %v; this command serves no metrics\n", err)
		} else {
			t.server = srv
		}
		parts = append(parts, t.metrics)
	}
	t.observer = observe.Multi(parts...)
	return t, nil
}

// metricNames are the label values metrics keep: the configured providers,
// their tier models (the adapter's defaults included), the agents and
// their models, the exact models of gateway.models, and the price catalog's models and aliases. Any other
// name, such as a model a gateway client chose, is counted as "other".
func (e *env) metricNames(f *config.File) *metrics.Names {
	n := &metrics.Names{Providers: f.ProviderNames()}
	for _, name := range n.Providers {
		p := f.Providers[name]
		if r, err := e.registry.Lookup(p.Type); err == nil {
			for _, m := range r.DefaultModels {
				n.Models = append(n.Models, m)
			}
		}
		for _, m := range p.Models {
			n.Models = append(n.Models, m)
		}
	}
	for name, a := range f.Agents {
		n.Agents = append(n.Agents, name)
		if a.Model != "" {
			n.Models = append(n.Models, a.Model)
		}
	}
	for _, g := range f.Gateway.Models {
		if g != nil && g.Model != "" {
			n.Models = append(n.Models, g.Model)
		}
	}
	if cat, err := e.catalog(f); err == nil {
		for _, m := range cat.Models("") {
			n.Models = append(n.Models, m.ID)
			n.Models = append(n.Models, m.Aliases...)
		}
	}
	return n
}

// close flushes the spans left, stops the metrics server and closes the log
// file, each within shutdownTimeout.
func (t *telemetry) close() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if t.tracer != nil {
		_ = t.tracer.Shutdown(ctx)
	}
	if t.server != nil {
		_ = t.server.Shutdown(ctx)
	}
	if t.logFile != nil {
		_ = t.logFile.Close()
	}
}

// logHandler returns the slog handler for a configured format and level
// (both validated by config).
func logHandler(w io.Writer, format, level string) slog.Handler {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == config.LogJSON {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// buildVersion is the version traces report as service.version.
func buildVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
