package gateway_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	anthropicadapter "github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// world is a gateway on loopback in front of an orchestrator whose two
// providers are wire-faithful fakes: "claude" (the Anthropic fake) and
// "gpt" (the OpenAI fake). Which one serves depends on the preference, so
// a request in one protocol can be served by the other vendor's fake.
type world struct {
	anth  *anthropicfake.Server
	oai   *openaifake.Server
	o     *orchestrator.Orchestrator
	g     *gateway.Gateway
	srv   *gateway.Server
	keys  *gateway.KeyStore
	store ledger.Store
	key   string // an active virtual key
	url   string
	t     testing.TB
}

// setup adjusts a world before it starts.
type setup struct {
	anthOpts   []anthropicfake.Option
	oaiOpts    []openaifake.Option
	preference []string // default: claude, gpt
	ledger     bool
	orch       func(*orchestrator.Settings)
	gw         func(*gateway.Options)
}

func serveOn(pref ...string) func(*setup) { return func(s *setup) { s.preference = pref } }

func withLedger(s *setup) { s.ledger = true }

// translating makes the gateway translate every call, relaying none: for
// the tests of translation itself (a same-vendor route relays otherwise).
func translating(s *setup) {
	prev := s.gw
	s.gw = func(o *gateway.Options) {
		if prev != nil {
			prev(o)
		}
		o.Translate = true
	}
}

// only keeps the one provider named ("claude" or "gpt"): a request in the
// other vendor's protocol is then translated, with no relay to fall to.
func only(name string) func(*setup) {
	return withOrch(func(s *orchestrator.Settings) {
		for _, ep := range s.Endpoints {
			if ep.Name == name {
				s.Endpoints, s.Preference = []orchestrator.Endpoint{ep}, []string{name}
				return
			}
		}
	})
}

func withOrch(f func(*orchestrator.Settings)) func(*setup) {
	return func(s *setup) { s.orch = f }
}

func withGateway(f func(*gateway.Options)) func(*setup) {
	return func(s *setup) {
		prev := s.gw
		s.gw = func(o *gateway.Options) {
			if prev != nil {
				prev(o)
			}
			f(o)
		}
	}
}

func newWorld(t testing.TB, opts ...func(*setup)) *world {
	t.Helper()
	var su setup
	for _, o := range opts {
		o(&su)
	}
	if su.preference == nil {
		su.preference = []string{"claude", "gpt"}
	}
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t}
	w.anth = anthropicfake.New(append([]anthropicfake.Option{anthropicfake.WithAPIKey("ak-upstream")}, su.anthOpts...)...)
	w.oai = openaifake.New(append([]openaifake.Option{openaifake.WithAPIKey("ok-upstream")}, su.oaiOpts...)...)
	t.Cleanup(func() { w.anth.Close(); w.oai.Close() })
	a, err := anthropicadapter.New(provider.Settings{Name: "claude", BaseURL: w.anth.URL(), Credentials: map[string]string{"api_key": "ak-upstream"}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	o, err := openaicompat.New(provider.Settings{Name: "gpt", Profile: "openai", BaseURL: w.oai.URL() + "/v1", Credentials: map[string]string{"api_key": "ok-upstream"}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	s := orchestrator.Settings{
		Project: "demo",
		// The fakes stand for Anthropic's and OpenAI's own APIs, which fetch
		// image URLs on their side; the adapters see loopback base URLs.
		Endpoints:     []orchestrator.Endpoint{{Name: "claude", Adapter: a, AllowImageURLs: true}, {Name: "gpt", Adapter: o, AllowImageURLs: true}},
		Preference:    su.preference,
		MaxRetryAfter: 5 * time.Second,
		Sleep:         func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		Backoff:       func(int) time.Duration { return time.Millisecond },
		Online:        func(context.Context) bool { return true },
		State:         &orchestrator.MemoryState{},
	}
	if su.ledger {
		w.store, err = ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.store.Close() })
		s.Ledger = w.store
	}
	if su.orch != nil {
		su.orch(&s)
	}
	if w.o, err = orchestrator.New(s); err != nil {
		t.Fatal(err)
	}
	w.keys = gateway.OpenKeyStore(filepath.Join(t.TempDir(), gateway.KeyFileName))
	if w.key, _, err = w.keys.Create(gateway.KeySpec{Name: "test", Project: "demo"}); err != nil {
		t.Fatal(err)
	}
	gopts := gateway.Options{
		Orchestrator: w.o,
		Project:      "demo",
		Keys:         w.keys,
		Providers:    []string{"claude", "gpt"},
		Models: map[string]gateway.Target{
			"claude-sonnet-4-6": {Agent: "builder"},
			"cheap":             {Tier: provider.TierFastCheap},
			"pinned-gpt":        {Model: "gpt-5-mini", Provider: "gpt"},
		},
	}
	if su.gw != nil {
		su.gw(&gopts)
	}
	if w.g, err = gateway.New(gopts); err != nil {
		t.Fatal(err)
	}
	if w.srv, err = w.g.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- w.srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	w.url = w.srv.URL()
	return w
}

// openai is the official OpenAI SDK pointed at the gateway.
func (w *world) openai(key string, opts ...ooption.RequestOption) *openai.Client {
	base := []ooption.RequestOption{ooption.WithBaseURL(w.url + "/v1/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0),
		ooption.WithRequestTimeout(30 * time.Second), ooption.WithHTTPClient(w.http())}
	c := openai.NewClient(append(base, opts...)...)
	return &c
}

// anthropic is the official Anthropic SDK pointed at the gateway.
func (w *world) anthropic(key string, opts ...aoption.RequestOption) *anthropic.Client {
	base := []aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(w.url), aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0), aoption.WithRequestTimeout(30 * time.Second), aoption.WithHTTPClient(w.http())}
	c := anthropic.NewClient(append(base, opts...)...)
	return &c
}

// http is a client whose every answer in the OpenAI protocol is checked
// against OpenAI's published schemas (schemaChecked).
func (w *world) http() *http.Client {
	return &http.Client{Transport: checkedTransport(w.t, nil)}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ooptionHeader(k, v string) ooption.RequestOption { return ooption.WithHeader(k, v) }
