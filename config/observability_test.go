package config

import (
	"strings"
	"testing"
)

func TestObservabilityOffByDefault(t *testing.T) {
	f, err := Parse("cfg.yaml", []byte("version: 1\n"), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	o := f.Observability
	if o.LogsOn() || o.TracesOn() || o.MetricsOn() {
		t.Errorf("an empty file turns observability on: logs %v, traces %v, metrics %v", o.LogsOn(), o.TracesOn(), o.MetricsOn())
	}
}

func TestObservabilityValid(t *testing.T) {
	const y = `observability:
  logs:
    level: info
    format: json
    file: logs/cortexbuild.log
  traces:
    endpoint: https://otel.example.test:4318
    headers:
      Authorization: ${OTLP_AUTHORIZATION}
    sample_ratio: 0.25
    service_name: cortexbuild-ci
  metrics:
    listen: 0.0.0.0:9464
    allow_remote: true
`
	f, err := Parse("cfg.yaml", []byte(y), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	o := f.Observability
	if !o.LogsOn() || !o.TracesOn() || !o.MetricsOn() {
		t.Fatalf("not all on: %+v", o)
	}
	if o.Logs.Format != LogJSON || o.Traces.SampleRatio == nil || *o.Traces.SampleRatio != 0.25 || o.Traces.Headers["Authorization"].EnvVar() != "OTLP_AUTHORIZATION" {
		t.Errorf("decoded %+v", o)
	}
	if w := f.Warnings(); len(w) != 0 {
		t.Errorf("warnings for a ${VAR} header: %v", w)
	}
}

func TestObservabilityLiteralHeaderWarns(t *testing.T) {
	f, err := Parse("cfg.yaml", []byte("observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    headers:\n      x-api-key-for-collector: abc123\n"), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(f.Warnings(), "\n")
	if !strings.Contains(w, "cfg.yaml:5:32: observability.traces.headers.x-api-key-for-collector holds a literal value") || strings.Contains(w, "abc123") {
		t.Errorf("warnings = %q", w)
	}
}

func TestObservabilityBadInput(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad level", "observability:\n  logs:\n    level: verbose\n", `cfg.yaml:3:12: observability.logs.level: "verbose" is not valid; write one of: debug, info, warn`},
		{"bad format", "observability:\n  logs:\n    level: info\n    format: jsn\n", `cfg.yaml:4:13: observability.logs.format: "jsn" is not valid (did you mean "json"?)`},
		{"format without level", "observability:\n  logs:\n    format: json\n", "cfg.yaml:3:13: observability.logs.format is set but logs are off: write level: info"},
		{"file without level", "observability:\n  logs:\n    file: x.log\n", "cfg.yaml:3:11: observability.logs.file is set but logs are off"},
		{"unknown key", "observability:\n  trace:\n    endpoint: http://127.0.0.1:4318\n", `cfg.yaml:2:3: unknown key "trace" in observability (did you mean "traces"?)`},
		{"endpoint not a url", "observability:\n  traces:\n    endpoint: 127.0.0.1:4318\n", `cfg.yaml:3:15: observability.traces.endpoint: "127.0.0.1:4318" is not an http(s) URL`},
		{"grpc endpoint", "observability:\n  traces:\n    endpoint: grpc://127.0.0.1:4317\n", "is not an http(s) URL"},
		{"credentials in endpoint", "observability:\n  traces:\n    endpoint: https://u:p@otel.example.test/\n", "do not put credentials in the URL; use headers:"},
		{"headers without endpoint", "observability:\n  traces:\n    headers:\n      Authorization: ${X}\n", "cfg.yaml:3:5: observability.traces: endpoint is not set"},
		{"ratio zero", "observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    sample_ratio: 0\n", "cfg.yaml:4:19: observability.traces.sample_ratio must be above 0 and at most 1, got 0"},
		{"ratio above one", "observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    sample_ratio: 1.5\n", "got 1.5"},
		{"ratio not a number", "observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    sample_ratio: half\n", "cfg.yaml:4:19: observability.traces.sample_ratio"},
		{"bad header name", "observability:\n  traces:\n    endpoint: http://127.0.0.1:4318\n    headers:\n      \"bad header\": ${X}\n", `observability.traces.headers: "bad header" is not a valid header name`},
		{"remote collector in local-only", "locality:\n  mode: local-only\nobservability:\n  traces:\n    endpoint: https://otel.example.test\n", "cfg.yaml:5:15: observability.traces.endpoint: otel.example.test is not a loopback address, and locality.mode is local-only"},
		{"listen without port", "observability:\n  metrics:\n    listen: 127.0.0.1\n", `cfg.yaml:3:13: observability.metrics.listen: "127.0.0.1" is not host:port`},
		{"listen bad port", "observability:\n  metrics:\n    listen: 127.0.0.1:http\n", `"http" is not a port number`},
		{"listen remote", "observability:\n  metrics:\n    listen: 0.0.0.0:9464\n", "cfg.yaml:3:13: observability.metrics.listen: 0.0.0.0:9464 is not a loopback address, so anyone who reaches it could read the metrics; listen on 127.0.0.1, or write allow_remote: true"},
		{"listen lan", "observability:\n  metrics:\n    listen: 192.0.2.10:9464\n", "write allow_remote: true"},
		{"allow_remote alone", "observability:\n  metrics:\n    allow_remote: true\n", "cfg.yaml:3:19: observability.metrics.allow_remote does nothing without listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("cfg.yaml", []byte(tt.yaml), testRegistry(t))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
		})
	}
}

func TestObservabilityLoopbackListens(t *testing.T) {
	for _, addr := range []string{":9464", "127.0.0.1:9464", "localhost:0", "[::1]:9464", "127.0.0.2:9464"} {
		if _, err := Parse("cfg.yaml", []byte("observability:\n  metrics:\n    listen: \""+addr+"\"\n"), testRegistry(t)); err != nil {
			t.Errorf("listen %q: %v", addr, err)
		}
	}
}
