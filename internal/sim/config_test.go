package sim

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/provider"
)

func lookupSimKey(k string) (string, bool) {
	if k == KeyEnv {
		return Key, true
	}
	return "", false
}

func TestConfigPassesTheLoader(t *testing.T) {
	s := start(t)
	reg := builtin.Registry()
	f, err := config.Parse("llm-config.yaml", s.Config(), reg)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.Config())
	}
	if f.Version != 1 || !f.OrchestrationEnabled(func(string) string { return "" }) {
		t.Errorf("version %d, orchestration %v", f.Version, f.Orchestration)
	}
	if !slices.Equal(f.Routing.Preference, []string{"anthropic", "openai", "gemini", "ollama"}) || !f.Routing.AllowAlternates {
		t.Errorf("routing = %+v", f.Routing)
	}
	if f.Locality.Mode != config.LocalityLocalOnly || f.Cache.Backend != config.CacheOff {
		t.Errorf("locality %q, cache %q", f.Locality.Mode, f.Cache.Backend)
	}
	if w := f.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	for _, e := range s.Endpoints() {
		p := f.Providers[e.Provider]
		if p == nil || p.Type != e.Type || p.Profile != e.Profile || p.BaseURL != e.BaseURL {
			t.Errorf("provider %s = %+v, endpoint %+v", e.Provider, p, e)
			continue
		}
		if _, keyed := p.Credentials["api_key"]; keyed != (e.Key != "") || (keyed && p.Credentials["api_key"].EnvVar() != KeyEnv) {
			t.Errorf("%s credentials = %v", e.Provider, p.Credentials)
		}
		st, err := f.Resolve(e.Provider, reg, lookupSimKey)
		if err != nil {
			t.Errorf("resolve %s: %v", e.Provider, err)
			continue
		}
		if st.Credentials["api_key"] != e.Key {
			t.Errorf("%s resolves key %q", e.Provider, st.Credentials["api_key"])
		}
		m := Models[e.Provider]
		for i, tier := range provider.Tiers {
			if st.Models[tier] != m[i] {
				t.Errorf("%s %s model = %q, want %q", e.Provider, tier, st.Models[tier], m[i])
			}
		}
	}
	// Without the key the keyed providers say which variable to set.
	if _, err := f.Resolve("anthropic", reg, func(string) (string, bool) { return "", false }); err == nil {
		t.Error("anthropic resolved without " + KeyEnv)
	}
}

func TestPrintedConfigPassesTheLoader(t *testing.T) {
	eps, err := Options{Ports: PortsFrom(24700)}.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Parse("sim.yaml", ConfigYAML(eps), builtin.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if f.Providers["gemini"].BaseURL != "http://127.0.0.1:24704" || f.Providers["vllm"].BaseURL != "http://127.0.0.1:24703/v1" {
		t.Errorf("base urls: %+v %+v", f.Providers["gemini"], f.Providers["vllm"])
	}
}

// adapters builds every provider of the sim's configuration with the
// project's own adapters.
func adapters(t *testing.T, s *Sim) map[string]provider.Adapter {
	t.Helper()
	reg := builtin.Registry()
	f, err := config.Parse("llm-config.yaml", s.Config(), reg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]provider.Adapter{}
	for _, name := range f.ProviderNames() {
		st, err := f.Resolve(name, reg, lookupSimKey)
		if err != nil {
			t.Fatal(err)
		}
		r, err := reg.Lookup(f.Providers[name].Type)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.New(st)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = a
	}
	return out
}

// TestAdaptersRunAgainstTheSim drives the project's adapters, configured
// by Config, through the sim: echo replies, and each fault as the failure
// kind the orchestrator acts on.
func TestAdaptersRunAgainstTheSim(t *testing.T) {
	s := start(t)
	ads := adapters(t, s)
	ctx := context.Background()
	for _, p := range Providers() {
		res, err := ads[p].Invoke(ctx, &provider.Request{Prompt: "hello", MaxTokens: 64})
		if err != nil || res.Content != "echo: hello" {
			t.Errorf("%s: %+v %v", p, res, err)
		}
	}

	for _, c := range []struct {
		fault      string
		stream     bool
		kind       provider.Kind
		retryAfter time.Duration
	}{
		{fault: "anthropic:529", kind: provider.KindOverloaded},
		{fault: "anthropic:429:retry-after=2", kind: provider.KindRateLimit, retryAfter: 2 * time.Second},
		{fault: "anthropic:401", kind: provider.KindAuth},
		{fault: "anthropic:400", kind: provider.KindBadRequest},
		{fault: "anthropic:too-long", kind: provider.KindContextWindowExceeded},
		{fault: "anthropic:402", kind: provider.KindQuotaExhausted},
		{fault: "anthropic:spend-limit", kind: provider.KindQuotaExhausted},
		{fault: "anthropic:500", kind: provider.KindServer},
		{fault: "anthropic:504", kind: provider.KindTimeout},
		{fault: "anthropic:502-html", kind: provider.KindServer},
		{fault: "anthropic:midstream", stream: true, kind: provider.KindOverloaded},
		{fault: "anthropic:cut", stream: true, kind: provider.KindNetwork},
		{fault: "openai:429:retry-after=2", kind: provider.KindRateLimit, retryAfter: 2 * time.Second},
		{fault: "openai:quota", kind: provider.KindQuotaExhausted},
		{fault: "openai:401", kind: provider.KindAuth},
		{fault: "openai:400", kind: provider.KindBadRequest},
		{fault: "openai:too-long", kind: provider.KindContextWindowExceeded},
		{fault: "openai:500", kind: provider.KindServer},
		{fault: "openai:503", kind: provider.KindOverloaded},
		{fault: "openai:502-html", kind: provider.KindServer},
		{fault: "openai:cut", stream: true, kind: provider.KindNetwork},
		{fault: "ollama:503", kind: provider.KindOverloaded},
		{fault: "ollama:cut", stream: true, kind: provider.KindNetwork},
		{fault: "vllm:401", kind: provider.KindAuth},
		{fault: "vllm:too-long", kind: provider.KindContextWindowExceeded},
		{fault: "gemini:429:retry-after=31", kind: provider.KindRateLimit, retryAfter: 31 * time.Second},
		{fault: "gemini:daily-quota", kind: provider.KindQuotaExhausted},
		{fault: "gemini:bad-key", kind: provider.KindAuth},
		{fault: "gemini:too-long", kind: provider.KindContextWindowExceeded},
		{fault: "gemini:500", kind: provider.KindServer},
		{fault: "gemini:503", kind: provider.KindOverloaded},
		{fault: "gemini:504", kind: provider.KindTimeout},
		{fault: "gemini:cut", stream: true, kind: provider.KindNetwork},
	} {
		f, err := ParseFault(c.fault)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Inject(f); err != nil {
			t.Fatal(err)
		}
		req := &provider.Request{Prompt: "hello there, how are you today", MaxTokens: 64}
		if c.stream {
			err = streamErr(ctx, ads[f.Provider], req)
		} else {
			_, err = ads[f.Provider].Invoke(ctx, req)
		}
		var pe *provider.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: %v, want a *provider.Error", c.fault, err)
			continue
		}
		if pe.Kind != c.kind || pe.RetryAfter != c.retryAfter {
			t.Errorf("%s: kind %s retry-after %v, want %s %v (%v)", c.fault, pe.Kind, pe.RetryAfter, c.kind, c.retryAfter, err)
		}
		if p := s.Pending(); len(p) != 0 {
			t.Fatalf("%s: still pending %v", c.fault, p)
		}
	}
}

func streamErr(ctx context.Context, a provider.Adapter, req *provider.Request) error {
	st, err := a.Stream(ctx, req)
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		if _, err := st.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
