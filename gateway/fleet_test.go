package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	"github.com/cortexbuild/cortexbuild/cache"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// redisFor returns the test Redis's URL with its host replaced by addr
// ("" keeps it).
func redisFor(t testing.TB, addr string) string {
	u, err := url.Parse(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		u.Host = addr
	}
	return u.String()
}

// redisAddr is the test Redis's host:port.
func redisAddr(t testing.TB) string {
	u, _ := url.Parse(redisFor(t, ""))
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "6379")
	}
	return u.Host
}

// sharedPrefix is a key prefix of its own for the test, under the
// default one; every key under it is deleted when the test ends.
func sharedPrefix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	prefix := gateway.DefaultSharedPrefix + "test-" + hex.EncodeToString(b) + ":"
	opt, err := redis.ParseURL(redisFor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	inspect := redis.NewClient(opt)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := inspect.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			inspect.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleaning up %s*: %v", prefix, err)
		}
		inspect.Close()
	})
	return prefix
}

// openShared opens a Redis client of its own (one replica's), on url,
// whose cool-down reads clk, logging to logs.
func openShared(t testing.TB, rawURL string, clk *clock, logs io.Writer) *cache.Redis {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	r, err := cache.OpenRedis(context.Background(), rawURL, cache.RedisOptions{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// replica returns a gateway option making it a replica of a fleet: its
// keys are ks's (nil: its own), its clock clk, and its shared state in
// shared under prefix.
func replica(ks *gateway.KeyStore, clk *clock, shared gateway.Shared, prefix string, logs io.Writer) func(*gateway.Options) {
	return func(o *gateway.Options) {
		if ks != nil {
			o.Keys = ks
		}
		o.Now = clk.Now
		o.Shared, o.SharedPrefix = shared, prefix
		if logs != nil {
			o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
	}
}

// chatOn makes a chat call with token through w, returning the status and
// the X-CortexBuild-Degraded header.
func chatOn(t *testing.T, w *world, token string) (int, string) {
	t.Helper()
	var res *http.Response
	_, err := w.openai(token, ooption.WithMaxRetries(0), ooption.WithResponseInto(&res)).Chat.Completions.New(ctxT(t),
		openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi")})
	if err != nil {
		e := openAIErr(t, err)
		return e.StatusCode, e.Response.Header.Get(gateway.HeaderDegraded)
	}
	return res.StatusCode, res.Header.Get(gateway.HeaderDegraded)
}

// Two gateways, each with its own process state and its own Redis
// client, sharing one Redis: a key's rpm holds across both (calls made at
// once, alternately through each, admit exactly the rpm), and the minute
// after, it has room again on both.
func TestFleetRPMHoldsAcrossReplicas(t *testing.T) {
	prefix := sharedPrefix(t)
	clk := &clock{t: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)}
	a := newWorld(t, serveOn("gpt"), withGateway(replica(nil, clk, openShared(t, redisFor(t, ""), clk, nil), prefix, nil)))
	b := newWorld(t, serveOn("gpt"), withGateway(replica(a.keys, clk, openShared(t, redisFor(t, ""), clk, nil), prefix, nil)))
	const rpm, calls = 5, 16
	token, _, err := a.keys.Create(gateway.KeySpec{Name: "rpm", Project: "demo", KeyLimits: gateway.KeyLimits{RPM: rpm}})
	if err != nil {
		t.Fatal(err)
	}
	round := func() (admitted map[string]int, refused int) {
		admitted = map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range calls {
			w, name := a, "a"
			if i%2 == 1 {
				w, name = b, "b"
			}
			wg.Go(func() {
				st, degraded := chatOn(t, w, token)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case degraded != "":
					t.Errorf("%s: degraded %q with Redis up", name, degraded)
				case st == 200:
					admitted[name]++
				case st == 429:
					refused++
				default:
					t.Errorf("%s: status %d", name, st)
				}
			})
		}
		wg.Wait()
		return admitted, refused
	}
	admitted, refused := round()
	if admitted["a"]+admitted["b"] != rpm || refused != calls-rpm {
		t.Errorf("admitted %v and refused %d of %d calls across two replicas; want %d admitted in all", admitted, refused, calls, rpm)
	}
	clk.Advance(time.Minute + time.Second)
	admitted, _ = round()
	if admitted["a"]+admitted["b"] != rpm {
		t.Errorf("the next minute admitted %v; want %d in all", admitted, rpm)
	}
}

// The estimate of a call in flight through one replica, then the tokens
// it used, count against the key's tpm on the other.
func TestFleetTPMHoldsAcrossReplicas(t *testing.T) {
	prefix := sharedPrefix(t)
	clk := &clock{t: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)}
	a := newWorld(t, serveOn("gpt"), withGateway(replica(nil, clk, openShared(t, redisFor(t, ""), clk, nil), prefix, nil)))
	b := newWorld(t, serveOn("gpt"), withGateway(replica(a.keys, clk, openShared(t, redisFor(t, ""), clk, nil), prefix, nil)))
	// One call's estimate (its prompt and its 1000 output tokens) is above
	// the limit, its usage (the fake's, a few tokens) under it.
	token, k, err := a.keys.Create(gateway.KeySpec{Name: "tpm", Project: "demo", KeyLimits: gateway.KeyLimits{TPM: 500}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(w *world) error {
		_, err := w.openai(token, ooption.WithMaxRetries(0)).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{
			Model: "gpt/gpt-5-mini", Messages: userMsg("hi"), MaxCompletionTokens: openai.Int(1000)})
		return err
	}
	gate := make(chan struct{})
	a.oai.Enqueue(openaifake.TextReply("hello").WithHold(gate))
	first := make(chan error, 1)
	go func() { first <- call(a) }()
	if err := a.oai.WaitRequests(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	e := openAIErr(t, call(b))
	if e.StatusCode != 429 || e.Type != "tokens" || !strings.Contains(e.Message, "500 tokens per minute") || !strings.Contains(e.Message, "0 used in the last minute") || !strings.Contains(e.Message, k.ID) {
		t.Errorf("a call through b while a's is in flight: %d %q: %s; want the tpm refusal naming the reservation", e.StatusCode, e.Type, e.Message)
	}
	// A reservation lapses gateway.RateHold after its call was admitted,
	// answered or not (its replica may have been killed).
	clk.Advance(gateway.RateHold)
	b.oai.Enqueue(openaifake.TextReply("hello"))
	if err := call(b); err != nil {
		t.Errorf("through b once a's reservation lapsed: %v", err)
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatalf("the call through a: %v", err)
	}
	if err := call(b); err != nil {
		t.Errorf("through b once a's call used its few tokens: %v", err)
	}
	// Used tokens: a key whose tpm the first calls' usage reached.
	token2, _, err := a.keys.Create(gateway.KeySpec{Name: "tpm1", Project: "demo", KeyLimits: gateway.KeyLimits{TPM: 1}})
	if err != nil {
		t.Fatal(err)
	}
	token = token2
	if err := call(a); err != nil {
		t.Fatalf("the first call of the second key, through a: %v", err)
	}
	e = openAIErr(t, call(b))
	if e.StatusCode != 429 || e.Type != "tokens" || e.Response.Header.Get("Retry-After") != "60" {
		t.Errorf("through b after a's call used the minute: %d %q retry-after %q: %s", e.StatusCode, e.Type, e.Response.Header.Get("Retry-After"), e.Message)
	}
	clk.Advance(time.Minute)
	if err := call(b); err != nil {
		t.Errorf("a minute later, through b: %v", err)
	}
}

// A Gemini 3 tool loop whose second turn lands on another replica sends
// back the thought signature Gemini issued, kept in Redis by the first.
func TestFleetTurnStateCrossesReplicas(t *testing.T) {
	prefix := sharedPrefix(t)
	clk := &clock{t: time.Now()}
	gem := geminifake.New(geminifake.WithAPIKey("gk-upstream"))
	t.Cleanup(gem.Close)
	shared := func(ks *gateway.KeyStore) func(*setup) {
		return withGateway(replica(ks, clk, openShared(t, redisFor(t, ""), clk, nil), prefix, nil))
	}
	// Each replica has its own gateway and its own Gemini adapter in front
	// of the same Gemini.
	a := gemReplica(t, gem, clk, shared(nil))
	b := gemReplica(t, gem, clk, shared(a.keys))
	for _, name := range []string{"chat", "messages", "responses"} {
		t.Run(name, func(t *testing.T) {
			tt := toolTurns[name]
			gem.Enqueue(geminifake.Reply{FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}, OmitCallIDs: true})
			id := tt.first(t, a, a.key, "gem3")
			gem.Enqueue(geminifake.TextReply("18C in Paris."))
			answer, err := tt.second(t, b, a.key, "gem3", id)
			if err != nil || answer != "18C in Paris." {
				t.Fatalf("second turn through the other replica = %q, %v", answer, err)
			}
			call, sig, resp := lastCall(t, gem)
			if sig == "" || sig == skipSig {
				t.Errorf("the call went back with signature %q, not the one Gemini issued", sig)
			}
			if call.ID != "" || resp.ID != "" {
				t.Errorf("the made-up id %q went upstream: call %q, response %q", id, call.ID, resp.ID)
			}
		})
	}
}

// gemReplica is gemWorld's gateway in front of gem, with more options.
func gemReplica(t *testing.T, gem *geminifake.Server, clk *clock, more ...func(*setup)) *world {
	t.Helper()
	return newWorld(t, append([]func(*setup){
		withOrch(func(s *orchestrator.Settings) {
			s.Endpoints = append(s.Endpoints, orchestrator.Endpoint{Name: "gemini", Adapter: gmAdapter(t, "gemini", gem.URL(), 0)})
		}),
		withGateway(func(o *gateway.Options) {
			o.Providers = append(o.Providers, "gemini")
			o.Models["gem3"] = gateway.Target{Model: "gemini-3.1-pro-preview", Provider: "gemini"}
			o.Now = clk.Now
		})}, more...)...)
}

// secondChat is the chat protocol's second turn of the tool loop, through
// w with key, returning the answer's X-CortexBuild-Degraded header.
func secondChat(t *testing.T, w *world, key, id string) string {
	t.Helper()
	var res *http.Response
	msgs := append(userMsg("weather?"), openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
	}}, openai.ToolMessage("18C", id))
	if _, err := w.openai(key, ooption.WithResponseInto(&res)).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "gem3", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}); err != nil {
		t.Fatalf("second turn: %v", err)
	}
	return res.Header.Get(gateway.HeaderDegraded)
}

// Redis cut (its address stops answering): calls go on. A key's rpm is
// counted by each replica alone (so a fleet of n admits up to n times it
// meanwhile), and says so in X-CortexBuild-Degraded: rate-limits; an
// answer's provider state is kept by the replica that served it, so the
// next turn through it keeps its signatures and one through another goes
// without them (turn-state). Each replica logs the outage once. Redis
// back, the first call after the cool-down counts across the fleet again.
func TestFleetRedisCutDegradesAndRecovers(t *testing.T) {
	prefix := sharedPrefix(t)
	p := testenv.NewProxy(t, redisAddr(t))
	clk := &clock{t: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)}
	gem := geminifake.New(geminifake.WithAPIKey("gk-upstream"))
	t.Cleanup(gem.Close)
	logsA := &testenv.Buffer{}
	a := gemReplica(t, gem, clk, withGateway(replica(nil, clk, openShared(t, redisFor(t, p.Addr), clk, nil), prefix, logsA)))
	b := gemReplica(t, gem, clk, withGateway(replica(a.keys, clk, openShared(t, redisFor(t, p.Addr), clk, nil), prefix, nil)))
	token, _, err := a.keys.Create(gateway.KeySpec{Name: "rpm", Project: "demo", KeyLimits: gateway.KeyLimits{RPM: 2}})
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, w *world, status int, degraded string) {
		t.Helper()
		if st, d := chatOn(t, w, token); st != status || d != degraded {
			t.Errorf("%s: %d, degraded %q; want %d, %q", what, st, d, status, degraded)
		}
	}
	fleetWide := func(phase string) {
		t.Helper()
		expect(phase+", first call through a", a, 200, "")
		expect(phase+", second call through b", b, 200, "")
		expect(phase+", third call through a", a, 429, "")
	}
	fleetWide("Redis up")

	p.Cut()
	clk.Advance(time.Minute)
	expect("cut, first call through a", a, 200, "rate-limits")
	expect("cut, second call through a", a, 200, "rate-limits")
	expect("cut, third call through a", a, 429, "rate-limits")
	expect("cut, first call through b", b, 200, "rate-limits")
	gem.Enqueue(geminifake.Reply{FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}, OmitCallIDs: true})
	id := toolTurns["chat"].first(t, a, a.key, "gem3")
	gem.Enqueue(geminifake.TextReply("18C in Paris."))
	if d := secondChat(t, a, a.key, id); d != "turn-state" {
		t.Errorf("cut, second turn through the same replica: degraded %q", d)
	}
	if _, sig, _ := lastCall(t, gem); sig == "" || sig == skipSig {
		t.Errorf("cut, second turn through the same replica: signature %q, not Gemini's", sig)
	}
	gem.Enqueue(geminifake.TextReply("18C in Paris."))
	if d := secondChat(t, b, a.key, id); d != "turn-state" {
		t.Errorf("cut, second turn through another replica: degraded %q", d)
	}
	if _, sig, _ := lastCall(t, gem); sig != skipSig {
		t.Errorf("cut, second turn through another replica: signature %q; want the documented skip value", sig)
	}
	for _, what := range []string{"rate counters (Redis) are unreachable", "turn state (Redis) is unreachable"} {
		if n := strings.Count(logsA.String(), what); n != 1 {
			t.Errorf("a logged %q %d times; want once:\n%s", what, n, logsA.String())
		}
	}

	p.Restore()
	// Within the cool-down the replicas still count alone; after it the
	// first call finds Redis again.
	expect("mended, within the cool-down, through b", b, 200, "rate-limits")
	clk.Advance(cache.DefaultRedisCooldown)
	clk.Advance(time.Minute)
	fleetWide("Redis back")
	if n := strings.Count(logsA.String(), "rate counters (Redis) answer again"); n != 1 {
		t.Errorf("a logged the rate counters' return %d times; want once:\n%s", n, logsA.String())
	}
	// State kept in Redis again crosses replicas (the first turn through a
	// finds Redis answering: its state is written there).
	gem.Enqueue(geminifake.Reply{FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}, OmitCallIDs: true})
	id = toolTurns["chat"].first(t, a, a.key, "gem3")
	gem.Enqueue(geminifake.TextReply("18C in Paris."))
	if d := secondChat(t, b, a.key, id); d != "" {
		t.Errorf("Redis back, second turn through another replica: degraded %q", d)
	}
	if _, sig, _ := lastCall(t, gem); sig == "" || sig == skipSig {
		t.Errorf("Redis back, second turn through another replica: signature %q, not Gemini's", sig)
	}
	if n := strings.Count(logsA.String(), "turn state (Redis) answers again"); n != 1 {
		t.Errorf("a logged the turn state's return %d times; want once:\n%s", n, logsA.String())
	}
}

// Every key the gateway writes in Redis expires: a key's request and token
// counters a minute after their last write, its reservations and their
// sums gateway.RateHold after it, an answer's provider state
// gateway.DefaultTurnStateTTL after the answer.
func TestFleetKeysExpire(t *testing.T) {
	prefix := sharedPrefix(t)
	clk := &clock{t: time.Now()}
	gem := geminifake.New(geminifake.WithAPIKey("gk-upstream"))
	t.Cleanup(gem.Close)
	a := gemReplica(t, gem, clk, withGateway(replica(nil, clk, openShared(t, redisFor(t, ""), clk, nil), prefix, nil)))
	token, k, err := a.keys.Create(gateway.KeySpec{Name: "limited", Project: "demo", KeyLimits: gateway.KeyLimits{RPM: 100, TPM: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	// A call in flight holds a reservation.
	gate := make(chan struct{})
	a.oai.Enqueue(openaifake.TextReply("hello").WithHold(gate))
	first := make(chan int, 1)
	go func() { st, _ := chatOn(t, a, token); first <- st }()
	if err := a.oai.WaitRequests(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	gem.Enqueue(geminifake.Reply{FunctionCalls: []geminifake.FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}, OmitCallIDs: true})
	toolTurns["chat"].first(t, a, token, "gem3")
	opt, _ := redis.ParseURL(redisFor(t, ""))
	inspect := redis.NewClient(opt)
	defer inspect.Close()
	ctx := context.Background()
	rate := prefix + "{demo}:rate:" + k.ID + ":"
	checked := 0
	check := func(key string, lo, hi time.Duration) {
		t.Helper()
		d, err := inspect.PTTL(ctx, key).Result()
		if err != nil || d < lo || d > hi {
			t.Errorf("%s expires in %s (%v); want within [%s, %s]", strings.TrimPrefix(key, prefix), d, err, lo, hi)
		}
		checked++
	}
	check(rate+"req", 50*time.Second, time.Minute)
	check(rate+"held", gateway.RateHold-10*time.Second, gateway.RateHold)
	check(rate+"sum", gateway.RateHold-10*time.Second, gateway.RateHold)
	close(gate)
	if st := <-first; st != 200 {
		t.Fatalf("the held call: %d", st)
	}
	check(rate+"tok", 50*time.Second, time.Minute)
	keys, err := inspect.Keys(ctx, prefix+"{demo}:turn:*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("turn state keys %v, %v; want the answer's and its call's", keys, err)
	}
	for _, key := range keys {
		check(key, gateway.DefaultTurnStateTTL-time.Minute, gateway.DefaultTurnStateTTL)
	}
	// The reservation's set went with its last member; nothing else is
	// there, and nothing lasts for ever.
	all, err := inspect.Keys(ctx, prefix+"*").Result()
	if err != nil || len(all) != checked-1 {
		t.Errorf("keys under the prefix: %v, %v; want the %d checked but held", all, err, checked-1)
	}
	for _, key := range all {
		if d, err := inspect.PTTL(ctx, key).Result(); err != nil || d <= 0 {
			t.Errorf("%s expires in %s (%v)", key, d, err)
		}
	}
}
