package config

import (
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
)

func TestRoutingBreakerAndHeadroom(t *testing.T) {
	f, err := Parse("cfg.yaml", []byte(`routing:
  circuit_breaker:
    failures: 3
    cooldown: 45s
    max_cooldown: 10m
  rate_limit_headroom:
    requests: 10
    tokens: 0
`), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Routing.CircuitBreaker.Settings(), (orchestrator.BreakerSettings{Failures: 3, Cooldown: 45 * time.Second, MaxCooldown: 10 * time.Minute}); got != want {
		t.Errorf("breaker settings = %+v, want %+v", got, want)
	}
	// An unset threshold is the orchestrator's default (0), a written 0
	// turns the check off (negative).
	if got, want := f.Routing.RateLimitHeadroom.Settings(), (orchestrator.Headroom{Requests: 10, Tokens: -1}); got != want {
		t.Errorf("headroom = %+v, want %+v", got, want)
	}

	f, err = Parse("cfg.yaml", []byte("routing:\n  circuit_breaker:\n    enabled: false\n"), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Routing.CircuitBreaker.Settings(); !s.Disabled {
		t.Errorf("enabled: false gave %+v", s)
	}
	d := Default()
	if s := d.Routing.CircuitBreaker.Settings(); s.Disabled || s.Failures != 0 {
		t.Errorf("default breaker settings = %+v", s)
	}
	if h := d.Routing.RateLimitHeadroom.Settings(); h != (orchestrator.Headroom{}) {
		t.Errorf("default headroom = %+v", h)
	}
}

func TestRoutingBreakerAndHeadroomErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"negative failures", "routing:\n  circuit_breaker:\n    failures: -1\n", "cfg.yaml:3:15: routing.circuit_breaker.failures must be positive, got -1"},
		{"failures not a number", "routing:\n  circuit_breaker:\n    failures: many\n", "cfg.yaml:3:15: routing.circuit_breaker.failures: expected a whole number"},
		{"cooldown without unit", "routing:\n  circuit_breaker:\n    cooldown: 30\n", "cfg.yaml:3:15: routing.circuit_breaker.cooldown: invalid duration \"30\": write e.g. 30s, 5m or 24h (add a unit: 30s)"},
		{"negative cooldown", "routing:\n  circuit_breaker:\n    cooldown: -5s\n", "cfg.yaml:3:15: routing.circuit_breaker.cooldown: duration must not be negative"},
		{"cooldown over a day", "routing:\n  circuit_breaker:\n    max_cooldown: 48h\n", "cfg.yaml:3:19: routing.circuit_breaker.max_cooldown: 48h0m0s is longer than a day"},
		{"max below cooldown", "routing:\n  circuit_breaker:\n    cooldown: 1m\n    max_cooldown: 30s\n", "cfg.yaml:4:19: routing.circuit_breaker.max_cooldown (30s) is shorter than cooldown (1m0s)"},
		{"misspelt key", "routing:\n  circuit_breaker:\n    failure: 3\n", `cfg.yaml:3:5: unknown key "failure" in routing.circuit_breaker (did you mean "failures"?)`},
		{"enabled not a bool", "routing:\n  circuit_breaker:\n    enabled: yes please\n", "routing.circuit_breaker.enabled: expected true or false"},
		{"negative headroom", "routing:\n  rate_limit_headroom:\n    tokens: -100\n", "cfg.yaml:3:13: routing.rate_limit_headroom.tokens must not be negative, got -100; write 0 to turn the check off"},
		{"fractional headroom", "routing:\n  rate_limit_headroom:\n    requests: 0.1\n", "cfg.yaml:3:15: routing.rate_limit_headroom.requests: expected a whole number"},
		{"misspelt headroom key", "routing:\n  rate_limit_headroom:\n    request: 5\n", `did you mean "requests"?`},
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
