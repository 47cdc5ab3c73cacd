package secretscan_test

// Network rules: every provider is a wire-faithful fake on 127.0.0.1, and
// the adapters connect through a locality gate whose resolver knows no
// name and whose dialer refuses every address that is not loopback.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/observe"
	"github.com/cortexbuild/cortexbuild/observe/metrics"
	"github.com/cortexbuild/cortexbuild/observe/tracing"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	anthropicadapter "github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

func random(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// loopbackOnly resolves nothing and dials only loopback addresses.
type loopbackOnly struct{}

func (loopbackOnly) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (loopbackOnly) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(host); err != nil || !a.Unmap().IsLoopback() {
		return nil, errors.New("test dialer refuses " + address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// recordingStore keeps a copy of every cache entry it is given, so that
// the stored values can be scanned.
type recordingStore struct {
	cache.Store
	mu   sync.Mutex
	puts []string
}

func (r *recordingStore) Put(ctx context.Context, key cache.Key, e cache.Entry, ttl time.Duration) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.puts = append(r.puts, key.String()+" "+string(b))
	r.mu.Unlock()
	return r.Store.Put(ctx, key, e, ttl)
}

func (r *recordingStore) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.puts, "\n")
}

// collected is everything the run produced, by source.
type collected struct {
	mu      sync.Mutex
	sources map[string]*strings.Builder
}

func (c *collected) add(source string, parts ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.sources[source]
	if b == nil {
		b = &strings.Builder{}
		c.sources[source] = b
	}
	for _, p := range parts {
		fmt.Fprintf(b, "%v\n", p)
	}
}

// addErr records an error, its chain and its Go representation.
func (c *collected) addErr(source string, err error) {
	if err == nil {
		return
	}
	c.add(source, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	var pe *provider.Error
	if errors.As(err, &pe) {
		c.add(source, fmt.Sprintf("%#v", *pe))
	}
	if b, jerr := json.Marshal(err); jerr == nil {
		c.add(source, string(b))
	}
}

func TestNoSecretInAnyOutput(t *testing.T) {
	ctx := context.Background()
	r := random(t)
	anthropicKey := "sk-ant-TESTKEY-" + r
	openaiKey := "sk-TESTKEY-" + r
	geminiKey := "AIza-TESTKEY-" + r
	hookToken := "HOOKTOKEN-" + r
	out := &collected{sources: map[string]*strings.Builder{}}

	// A webhook whose URL carries a token, as a chat webhook's does.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		out.add("webhook body", string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	hookURL := hook.URL + "/services/" + hookToken

	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	gate := &locality.Gate{Consents: locality.NewMemoryStore(), Resolver: loopbackOnly{}, Dial: loopbackOnly{}.Dial}

	// Telemetry: JSON logs to a buffer, spans to a recorder, metrics to a
	// private registry.
	logs := &testenv.Buffer{}
	spans := tracetest.NewSpanRecorder()
	met := metrics.New(metrics.Settings{})
	tr, err := tracing.New(tracing.Settings{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The ledger: SQLite behind the fast path, in its own directory so
	// that every byte it writes can be read back.
	stateDir := t.TempDir()
	sqlite, err := ledger.OpenSQLite(ctx, filepath.Join(stateDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	fast, err := ledger.NewFast(ctx, sqlite, filepath.Join(stateDir, "journal"))
	if err != nil {
		t.Fatal(err)
	}

	// The cache: memory, and Redis when one is reachable.
	mem := &recordingStore{Store: cache.NewMemory(cache.MemoryOptions{})}
	var caches []*cache.Cache
	caches = append(caches, cache.New(mem, cache.Options{}))
	redisText := func() string { return "" }
	if os.Getenv(testenv.RedisEnv) != "" {
		url := testenv.Redis(t)
		prefix := cache.DefaultRedisPrefix + "secretscan-" + random(t) + ":"
		rs, err := cache.OpenRedis(ctx, url, cache.RedisOptions{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		inspect := redis.NewClient(opt)
		t.Cleanup(func() {
			ks, _ := inspect.Keys(ctx, prefix+"*").Result()
			for _, k := range ks {
				inspect.Del(ctx, k)
			}
			inspect.Close()
			rs.Close()
		})
		caches = append(caches, cache.New(rs, cache.Options{}))
		redisText = func() string {
			var b strings.Builder
			ks, err := inspect.Keys(ctx, prefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range ks {
				v, err := inspect.Get(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString(k + " " + v + "\n")
			}
			if len(ks) == 0 {
				t.Error("nothing was stored in Redis: the scan of it proves nothing")
			}
			return b.String()
		}
	}

	// Every fault gets fresh fakes and a fresh orchestrator (no reply left
	// queued, no breaker state), over the same telemetry, ledger and
	// caches.
	var (
		anth  *anthropicfake.Server
		oai   *openaifake.Server
		gem   *geminifake.Server
		orchs []*orchestrator.Orchestrator
	)
	build := func() {
		anth = anthropicfake.New(anthropicfake.WithAPIKey(anthropicKey))
		oai = openaifake.New(openaifake.WithAPIKey(openaiKey))
		gem = geminifake.New(geminifake.WithAPIKey(geminiKey))
		t.Cleanup(func() { anth.Close(); oai.Close(); gem.Close() })
		a, err := anthropicadapter.New(provider.Settings{Name: "claude", BaseURL: anth.URL(), Credentials: map[string]string{"api_key": anthropicKey}, Pricer: cat, HTTPClient: gate.Client("claude", nil)})
		if err != nil {
			t.Fatal(err)
		}
		o, err := openaicompat.New(provider.Settings{Name: "gpt", Profile: "openai", BaseURL: oai.URL() + "/v1", Credentials: map[string]string{"api_key": openaiKey}, Pricer: cat, HTTPClient: gate.Client("gpt", nil)})
		if err != nil {
			t.Fatal(err)
		}
		g, err := gemini.New(provider.Settings{Name: "gem", BaseURL: gem.URL(), Credentials: map[string]string{"api_key": geminiKey}, Pricer: cat, HTTPClient: gate.Client("gem", nil)})
		if err != nil {
			t.Fatal(err)
		}
		orchs = make([]*orchestrator.Orchestrator, len(caches))
		for i, c := range caches {
			orchs[i], err = orchestrator.New(orchestrator.Settings{
				Project:       "scan",
				Endpoints:     []orchestrator.Endpoint{{Name: "claude", Adapter: a}, {Name: "gpt", Adapter: o}, {Name: "gem", Adapter: g}},
				Preference:    []string{"claude", "gpt", "gem"},
				MaxRetryAfter: 5 * time.Second,
				Sleep:         func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
				Backoff:       func(int) time.Duration { return time.Millisecond },
				Online:        func(context.Context) bool { return true },
				Gate:          gateCheck{gate},
				State:         &orchestrator.MemoryState{},
				Notifier: orchestrator.Notifiers{
					orchestrator.LogNotifier{Logger: logger},
					orchestrator.WebhookNotifier{URL: hookURL, Client: gate.Client("webhook", nil)},
				},
				Observer: observe.Multi(observe.NewLogger(logger), tr, met),
				Ledger:   fast,
				Cache:    c,
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	// The failures, each on one provider, with the others failing over or
	// failing too. A call pinned to one provider sees the raw failure.
	const malformed = `{"id": "x", "content": [ {"type": "text", "text": `
	type fault struct {
		name    string
		pin     string
		stream  bool
		agent   string
		enqueue func()
	}
	faults := []fault{
		{name: "anthropic 401", pin: "claude", enqueue: func() { anth.Enqueue(anthropicfake.AuthError()) }},
		{name: "anthropic 429 retry-after", pin: "claude", enqueue: func() {
			anth.Enqueue(anthropicfake.RateLimited("7"), anthropicfake.RateLimited("7"), anthropicfake.RateLimited("7"), anthropicfake.RateLimited("7"))
		}},
		{name: "anthropic 500", pin: "claude", enqueue: func() {
			anth.Enqueue(anthropicfake.APIError(), anthropicfake.APIError(), anthropicfake.APIError(), anthropicfake.APIError())
		}},
		{name: "anthropic HTML 502", pin: "claude", enqueue: func() {
			anth.Enqueue(anthropicfake.BadGateway(), anthropicfake.BadGateway(), anthropicfake.BadGateway(), anthropicfake.BadGateway())
		}},
		{name: "anthropic mid-stream error", pin: "claude", stream: true, enqueue: func() { anth.Enqueue(anthropicfake.OverloadedMidStream(3)) }},
		{name: "anthropic cut stream", pin: "claude", stream: true, enqueue: func() { anth.Enqueue(anthropicfake.CutStream(3)) }},
		{name: "anthropic malformed JSON", pin: "claude", enqueue: func() {
			anth.Enqueue(anthropicfake.Reply{Status: 200, RawBody: malformed, RawContentType: "application/json"})
		}},
		{name: "openai 401", pin: "gpt", enqueue: func() { oai.Enqueue(openaifake.InvalidAPIKey(openaiKey)) }},
		{name: "openai 429 retry-after", pin: "gpt", enqueue: func() {
			oai.Enqueue(openaifake.RateLimited(3*time.Second), openaifake.RateLimited(3*time.Second), openaifake.RateLimited(3*time.Second), openaifake.RateLimited(3*time.Second))
		}},
		{name: "openai 500", pin: "gpt", enqueue: func() {
			oai.Enqueue(openaifake.ServerError(), openaifake.ServerError(), openaifake.ServerError(), openaifake.ServerError())
		}},
		{name: "openai HTML 502", pin: "gpt", enqueue: func() {
			oai.Enqueue(openaifake.BadGateway(), openaifake.BadGateway(), openaifake.BadGateway(), openaifake.BadGateway())
		}},
		{name: "openai mid-stream error", pin: "gpt", stream: true, enqueue: func() { oai.Enqueue(openaifake.ServerErrorMidStream(2)) }},
		{name: "openai cut stream", pin: "gpt", stream: true, enqueue: func() { oai.Enqueue(openaifake.CutStream(2)) }},
		{name: "openai malformed JSON", pin: "gpt", enqueue: func() {
			oai.Enqueue(openaifake.Reply{Status: 200, RawBody: malformed, RawContentType: "application/json"})
		}},
		{name: "gemini 401", pin: "gem", enqueue: func() { gem.Enqueue(geminifake.APIKeyInvalid()) }},
		{name: "gemini 429 retry-after", pin: "gem", enqueue: func() {
			gem.Enqueue(geminifake.RateLimited("gemini-2.5-flash", 3*time.Second), geminifake.RateLimited("gemini-2.5-flash", 3*time.Second), geminifake.RateLimited("gemini-2.5-flash", 3*time.Second), geminifake.RateLimited("gemini-2.5-flash", 3*time.Second))
		}},
		{name: "gemini 500", pin: "gem", enqueue: func() {
			gem.Enqueue(geminifake.Internal(), geminifake.Internal(), geminifake.Internal(), geminifake.Internal())
		}},
		{name: "gemini HTML 502", pin: "gem", enqueue: func() {
			gem.Enqueue(geminifake.BadGateway(), geminifake.BadGateway(), geminifake.BadGateway(), geminifake.BadGateway())
		}},
		{name: "gemini mid-stream error", pin: "gem", stream: true, enqueue: func() { gem.Enqueue(geminifake.OverloadedMidStream(2)) }},
		{name: "gemini cut stream", pin: "gem", stream: true, enqueue: func() { gem.Enqueue(geminifake.CutStream(2)) }},
		{name: "gemini malformed JSON", pin: "gem", enqueue: func() {
			gem.Enqueue(geminifake.Reply{RawBody: malformed})
		}},
		// Failover: the first provider fails, the next answers; a cached
		// agent stores the answer.
		{name: "failover to a cached answer", agent: "explore", pin: "claude,gpt", enqueue: func() {
			anth.Enqueue(anthropicfake.BadGateway(), anthropicfake.BadGateway(), anthropicfake.BadGateway(), anthropicfake.BadGateway())
			oai.Enqueue(openaifake.TextReply("an answer"))
		}},
	}
	failures := 0
	for oi := range caches {
		for i, f := range faults {
			build()
			orch := orchs[oi]
			f.enqueue()
			call := orchestrator.Call{Agent: f.agent, Task: fmt.Sprintf("task-%d-%d", oi, i), InvocationID: fmt.Sprintf("inv-%d-%d", oi, i),
				Request: provider.Request{Prompt: "question " + fmt.Sprint(oi, i), MaxTokens: 64, Tier: provider.TierBalanced}}
			if f.pin != "" {
				call.Providers = strings.Split(f.pin, ",")
			}
			var err error
			if f.stream {
				var s *orchestrator.Stream
				s, err = orch.Stream(ctx, call)
				if err == nil {
					for c, cerr := range provider.Chunks(s) {
						out.add("stream chunks", c.Text)
						if cerr != nil {
							err = cerr
							break
						}
					}
					for _, at := range s.Attempts() {
						out.add("attempts", fmt.Sprintf("%+v", at))
					}
				}
			} else {
				res, ierr := orch.Invoke(ctx, call)
				err = ierr
				if res != nil {
					b, _ := json.Marshal(res)
					out.add("outcomes", string(b), fmt.Sprintf("%+v", res))
				}
			}
			out.addErr("errors", err)
			if err != nil {
				failures++
			}
		}
	}
	// Some faults are retried into a success (a stream broken before its
	// first token, a malformed answer); the rest fail the call.
	if failures < len(caches)*12 {
		t.Errorf("%d calls failed, want at least %d: the faults were not delivered", failures, len(caches)*12)
	}

	// The gateway, with a virtual key: good requests, failing ones, and
	// requests with a wrong key.
	keys := gateway.OpenKeyStore(filepath.Join(t.TempDir(), gateway.KeyFileName))
	vkey, _, err := keys.Create(gateway.KeySpec{Name: "scan", Project: "scan"})
	if err != nil {
		t.Fatal(err)
	}
	// serve builds fresh fakes and a gateway over them.
	var gwURL string
	serve := func() {
		build()
		gw, err := gateway.New(gateway.Options{Orchestrator: orchs[0], Project: "scan", Keys: keys, Providers: []string{"claude", "gpt", "gem"},
			Models: map[string]gateway.Target{"m": {Agent: "builder"}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		gwURL = srv.URL
	}
	post := func(path, key, body string, auth func(*http.Request, string)) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gwURL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			auth(req, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out.addErr("gateway errors", err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var hdr strings.Builder
		resp.Header.Write(&hdr)
		out.add("gateway responses", resp.Status, hdr.String(), string(b))
	}
	bearer := func(r *http.Request, k string) { r.Header.Set("Authorization", "Bearer "+k) }
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	chatStream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	msgs := `{"model":"m","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`
	msgsStream := `{"model":"m","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	gwFaults := []func(){
		func() { anth.Enqueue(anthropicfake.TextReply("fine")) },
		func() { anth.Enqueue(anthropicfake.AuthError()) },
		func() {
			anth.Enqueue(anthropicfake.BadGateway(), anthropicfake.BadGateway(), anthropicfake.BadGateway(), anthropicfake.BadGateway())
			oai.Enqueue(openaifake.InvalidAPIKey(openaiKey))
			gem.Enqueue(geminifake.APIKeyInvalid())
		},
		func() { anth.Enqueue(anthropicfake.OverloadedMidStream(3)) },
		func() { anth.Enqueue(anthropicfake.CutStream(3)) },
	}
	for _, enqueue := range gwFaults {
		for _, p := range []struct{ path, body string }{{"/v1/chat/completions", chat}, {"/v1/chat/completions", chatStream}, {"/v1/messages", msgs}, {"/v1/messages", msgsStream}} {
			serve()
			enqueue()
			post(p.path, vkey, p.body, bearer)
		}
	}
	serve()
	wrong := vkey[:len(vkey)-4] + "0000"
	post("/v1/chat/completions", wrong, chat, bearer)
	post("/v1/messages", "", msgs, bearer)
	post("/v1/chat/completions", anthropicKey, chat, bearer) // a provider key sent to the gateway by mistake

	// Read everything back.
	if err := fast.Close(); err != nil { // flushes the journal and closes the store
		out.addErr("errors", err)
	}
	sqlite, err = ledger.OpenSQLite(ctx, filepath.Join(stateDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := sqlite.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no attempt in the ledger: the scan of it proves nothing")
	}
	for _, row := range rows {
		b, _ := json.Marshal(row)
		out.add("ledger rows", string(b), fmt.Sprintf("%+v", row))
	}
	spend, err := sqlite.Spend(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out.add("ledger spend", fmt.Sprintf("%+v", spend))
	if err := sqlite.Close(); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(stateDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			out.add("ledger files", path, string(b))
		}
		return nil
	})
	// Notifications are sent in the background: every one is in the logs
	// and at the webhook once drained.
	for _, o := range orchs {
		if err := o.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	out.add("logs", logs.String())
	for _, s := range spans.Ended() {
		out.add("traces", s.Name(), s.Status().Description)
		for _, kv := range s.Attributes() {
			out.add("traces", string(kv.Key)+"="+kv.Value.Emit())
		}
		for _, ev := range s.Events() {
			out.add("traces", ev.Name)
			for _, kv := range ev.Attributes {
				out.add("traces", string(kv.Key)+"="+kv.Value.Emit())
			}
		}
	}
	rec := httptest.NewRecorder()
	met.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out.add("metrics", rec.Body.String())
	out.add("cache (memory)", mem.text())
	out.add("cache (redis)", redisText())

	// Each source must have something in it, or its scan proves nothing.
	for _, s := range []string{"errors", "logs", "traces", "metrics", "ledger rows", "ledger files", "cache (memory)", "gateway responses", "webhook body"} {
		if out.sources[s] == nil || out.sources[s].Len() < 2 {
			t.Errorf("nothing collected from %s", s)
		}
	}
	if !strings.Contains(out.sources["cache (memory)"].String(), "an answer") {
		t.Error("the cached answer is not in the cache: the scan of it proves nothing")
	}
	secrets := map[string]string{"anthropic key": anthropicKey, "openai key": openaiKey, "gemini key": geminiKey, "virtual key": vkey, "webhook token": hookToken}
	hits := 0
	for source, b := range out.sources {
		text := b.String()
		for what, secret := range secrets {
			if i := strings.Index(text, secret); i >= 0 {
				hits++
				lo, hi := max(0, i-200), min(len(text), i+len(secret)+80)
				t.Errorf("the %s appears in %s: …%s…", what, source, text[lo:hi])
			}
		}
	}
	t.Logf("scanned %d sources, %d bytes: %d hits", len(out.sources), total(out), hits)
}

func total(c *collected) int {
	n := 0
	for _, b := range c.sources {
		n += b.Len()
	}
	return n
}

type gateCheck struct{ g *locality.Gate }

func (c gateCheck) Check(ctx context.Context, prov, baseURL string) error {
	_, err := c.g.Check(ctx, prov, baseURL)
	return err
}
