package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
)

// Observability configures structured logs, traces and metrics. Each is off
// until its key is set (logs.level, traces.endpoint, metrics.listen), so an
// unconfigured project sends nothing and opens no port.
type Observability struct {
	Pos yamlx.Pos `yaml:"-"`

	Logs    Logs    `yaml:"logs" desc:"Structured log lines (log/slog), one per invocation and per attempt."`
	Traces  Traces  `yaml:"traces" desc:"OpenTelemetry traces (GenAI semantic conventions) exported over OTLP/HTTP."`
	Metrics Metrics `yaml:"metrics" desc:"Prometheus metrics served at /metrics."`
}

// Log levels and formats.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"

	LogText = "text"
	LogJSON = "json"
)

// Logs configures the structured log lines.
type Logs struct {
	Pos yamlx.Pos `yaml:"-"`

	Level  string `yaml:"level" desc:"debug, info or warn. info writes a line per invocation and one per failed attempt; debug adds the answering attempts; warn keeps the failures only. Unset: no lines."`
	Format string `yaml:"format" desc:"text (default: key=value) or json."`
	File   string `yaml:"file" desc:"File the lines are appended to, relative to the project root. Default: standard error."`
}

// Traces configures the OpenTelemetry exporter.
type Traces struct {
	Pos yamlx.Pos `yaml:"-"`

	Endpoint    string            `yaml:"endpoint" desc:"OTLP/HTTP collector URL, e.g. http://127.0.0.1:4318 (/v1/traces is appended when the URL has no path). Unset: no traces and nothing sent."`
	Headers     map[string]Secret `yaml:"headers" desc:"Headers sent with each export, e.g. an API key of a hosted collector: {Authorization: ${OTLP_AUTHORIZATION}}."`
	SampleRatio *float64          `yaml:"sample_ratio" desc:"Fraction of invocations traced, above 0 and at most 1. Default 1."`
	ServiceName string            `yaml:"service_name" desc:"service.name of the exported resource. Default cortexbuild."`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Pos yamlx.Pos `yaml:"-"`

	Listen      string `yaml:"listen" desc:"host:port to serve /metrics on, e.g. 127.0.0.1:9464; an empty host means 127.0.0.1. Unset: no listener."`
	AllowRemote bool   `yaml:"allow_remote" desc:"Allow a listen address other than loopback (0.0.0.0, a LAN address): anyone who reaches it reads the metrics. Default false."`
}

// LogsOn reports whether log lines are configured (logs.level is set).
func (o *Observability) LogsOn() bool { return o.Logs.Level != "" }

// TracesOn reports whether traces are exported (traces.endpoint is set).
func (o *Observability) TracesOn() bool { return o.Traces.Endpoint != "" }

// MetricsOn reports whether metrics are served (metrics.listen is set).
func (o *Observability) MetricsOn() bool { return o.Metrics.Listen != "" }

var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// validate checks the section; localOnly is locality.mode local-only, where
// the trace collector must be on loopback too.
func (o *Observability) validate(localOnly bool) yamlx.Errors {
	var errs yamlx.Errors
	add := func(p yamlx.Pos, format string, args ...any) { errs = append(errs, p.Errorf(format, args...)) }
	oneOf := func(p yamlx.Pos, where, v string, valid ...string) {
		if v != "" && !slices.Contains(valid, v) {
			add(p, "%s: %q is not valid%s; write one of: %s", where, v, suggest(v, valid), strings.Join(valid, ", "))
		}
	}

	l := &o.Logs
	oneOf(l.Pos.Key("level"), "observability.logs.level", l.Level, LogDebug, LogInfo, LogWarn)
	oneOf(l.Pos.Key("format"), "observability.logs.format", l.Format, LogText, LogJSON)
	if l.Level == "" {
		for _, kv := range [][2]string{{"format", l.Format}, {"file", l.File}} {
			if kv[1] != "" {
				add(l.Pos.Key(kv[0]), "observability.logs.%s is set but logs are off: write level: info to turn them on", kv[0])
			}
		}
	}

	t := &o.Traces
	if t.Endpoint == "" {
		if len(t.Headers) > 0 || t.SampleRatio != nil || t.ServiceName != "" {
			add(t.Pos, "observability.traces: endpoint is not set, so traces are off and these keys do nothing: write endpoint: http://127.0.0.1:4318 or remove them")
		}
	} else if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add(t.Pos.Key("endpoint"), "observability.traces.endpoint: %q is not an http(s) URL; write e.g. http://127.0.0.1:4318", t.Endpoint)
	} else if u.User != nil {
		add(t.Pos.Key("endpoint"), "observability.traces.endpoint: do not put credentials in the URL; use headers:")
	} else if localOnly && !loopbackHost(u.Hostname()) {
		add(t.Pos.Key("endpoint"), "observability.traces.endpoint: %s is not a loopback address, and locality.mode is local-only; run a collector on 127.0.0.1 or change the mode", u.Host)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		if !headerName.MatchString(name) {
			add(t.Headers[name].Pos(), "observability.traces.headers: %q is not a valid header name", name)
		}
	}
	if r := t.SampleRatio; r != nil && (*r <= 0 || *r > 1) {
		add(t.Pos.Key("sample_ratio"), "observability.traces.sample_ratio must be above 0 and at most 1, got %v; to trace nothing, remove endpoint:", *r)
	}

	m := &o.Metrics
	if m.Listen == "" {
		if m.AllowRemote {
			add(m.Pos.Key("allow_remote"), "observability.metrics.allow_remote does nothing without listen: write listen: 127.0.0.1:9464 or remove it")
		}
	} else if host, port, err := net.SplitHostPort(m.Listen); err != nil {
		add(m.Pos.Key("listen"), "observability.metrics.listen: %q is not host:port; write e.g. 127.0.0.1:9464 or :9464", m.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		add(m.Pos.Key("listen"), "observability.metrics.listen: %q is not a port number", port)
	} else if !loopbackHost(host) && !m.AllowRemote {
		add(m.Pos.Key("listen"), "observability.metrics.listen: %s is not a loopback address, so anyone who reaches it could read the metrics; listen on 127.0.0.1, or write allow_remote: true", m.Listen)
	}
	return errs
}

// warnings advises against literal secrets in the trace headers.
func (o *Observability) warnings() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(o.Traces.Headers)) {
		s := o.Traces.Headers[name]
		if s.EnvVar() == "" && !s.IsZero() {
			out = append(out, fmt.Sprintf("%s: observability.traces.headers.%s holds a literal value; prefer ${ENV_VAR} so the secret stays out of the file", s.Pos(), name))
		}
	}
	return out
}

// loopbackHost reports whether host ("" meaning the default, 127.0.0.1) is
// a loopback name or address.
func loopbackHost(host string) bool {
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
