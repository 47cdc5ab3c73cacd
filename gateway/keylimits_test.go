package gateway_test

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// keyID is the public part of a token.
func keyID(token string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(token, "cbk_"), "_")
	return id
}

func secretOf(token string) string { return strings.TrimPrefix(token, "cbk_"+keyID(token)+"_") }

// A key's budget is a ledger scope held with every call made with the key:
// many calls at once against a budget that fits one call's estimate admit
// exactly one, whose cost is recorded under the key's id; the others get
// the protocol's budget error naming the key's budget, never its secret.
func TestKeyBudgetRunsOutUnderConcurrentCalls(t *testing.T) {
	w := newWorld(t, serveOn("gpt"), withLedger)
	body := `{"model":"gpt/gpt-5-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	// A key whose budget is zero is refused with the estimate of the call.
	zero := provider.Money(0)
	probe, _, err := w.keys.Create(gateway.KeySpec{Name: "probe", Project: "demo", KeyLimits: gateway.KeyLimits{Budget: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	st, m := w.call(t, "POST", "/v1/chat/completions", "", body, bearer(probe)...)
	est := regexp.MustCompile(`the estimate \$([0-9.]+)`).FindStringSubmatch(errMessage(m))
	if st != 429 || est == nil {
		t.Fatalf("a key with a zero budget got %d %q; want 429 with the estimate", st, errMessage(m))
	}
	budget := provider.MustMoney(est[1])
	token, k, err := w.keys.Create(gateway.KeySpec{Name: "ci", Project: "demo", KeyLimits: gateway.KeyLimits{Budget: &budget, Period: ledger.PeriodMonth}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var refusals []string
	for range n {
		wg.Go(func() {
			st, m := w.call(t, "POST", "/v1/chat/completions", "", body, bearer(token)...)
			mu.Lock()
			defer mu.Unlock()
			codes[st]++
			if st != 200 {
				refusals = append(refusals, errMessage(m))
				if e, _ := m["error"].(map[string]any); e["code"] != "insufficient_quota" || e["type"] != "insufficient_quota" {
					t.Errorf("refusal error %v; want insufficient_quota", e)
				}
			}
		})
	}
	wg.Wait()
	if codes[200] != 1 || codes[429] != n-1 {
		t.Errorf("statuses %v; want one 200 and %d 429s (the budget fits one call's estimate)", codes, n-1)
	}
	for _, msg := range refusals {
		if !strings.Contains(msg, "API key "+k.ID) && !strings.Contains(msg, "key:"+k.ID) || strings.Contains(msg, secretOf(token)) {
			t.Errorf("refusal %q does not name the key's budget, or holds the secret", msg)
		}
	}
	sc, _ := ledger.KeyScope(k.ID, ledger.PeriodMonth, time.Now().UTC())
	b, err := w.store.Budget(ctxT(t), sc)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Limited || b.Limit != budget || b.Spent <= 0 || b.Spent > budget || b.Held != 0 {
		t.Errorf("the key's budget after the calls: %+v; want limit $%s, spent above zero and within it, nothing held", b, budget)
	}
	rep, err := w.store.Spend(ctxT(t), ledger.Filter{Key: k.ID})
	if err != nil || rep.Total.Attempts != 1 || rep.Total.Cost != b.Spent {
		t.Errorf("ledger rows of the key: %+v, %v; want one row costing $%s", rep.Total, err, b.Spent)
	}
	// The Messages API's shape of the same refusal is a 402.
	// (A larger output limit: the relayed Chat call's estimate bounds its
	// body by its bytes, which may leave room for a small translated one.)
	msgBody := `{"model":"gpt/gpt-5-mini","max_tokens":4096,"messages":[{"role":"user","content":"hi"}]}`
	if st, m := w.call(t, "POST", "/v1/messages", "", msgBody, bearer(token)...); st != 402 || !strings.Contains(errMessage(m), k.ID) {
		t.Errorf("/v1/messages over the key's budget: %d %q; want 402 naming the key", st, errMessage(m))
	}
	// Raising the budget (another process's 'serve keys update') takes
	// effect on the next call.
	more := budget * 3
	if _, err := w.keys.Update(k.ID, func(k *gateway.Key) error { k.Budget = &more; return nil }); err != nil {
		t.Fatal(err)
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", body, bearer(token)...); st != 200 {
		t.Errorf("after the budget was raised: %d %q", st, errMessage(m))
	}
	rows, _ := w.store.Attempts(ctxT(t), ledger.Filter{})
	for _, r := range rows {
		if strings.Contains(r.Key, secretOf(token)) || (r.Key != k.ID && r.Key != keyID(probe)) {
			t.Errorf("ledger row key %q; want the key's public id", r.Key)
		}
	}
}

// A key's requests and tokens per minute are counted on the gateway's
// clock: over either, a call gets a 429 saying which limit, with the wait
// until the minute has room, and goes through once it has.
func TestKeyRateLimits(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	w := newWorld(t, serveOn("gpt"), withGateway(func(o *gateway.Options) { o.Now = clk.Now }))
	chat := func(token string) error {
		_, err := w.openai(token, ooption.WithMaxRetries(0)).Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi")})
		return err
	}
	t.Run("requests", func(t *testing.T) {
		token, k, err := w.keys.Create(gateway.KeySpec{Name: "rpm", Project: "demo", KeyLimits: gateway.KeyLimits{RPM: 2}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := chat(token); err != nil {
				t.Fatalf("call %d within the rpm: %v", i, err)
			}
			clk.Advance(10 * time.Second)
		}
		e := openAIErr(t, chat(token))
		if e.StatusCode != 429 || e.Type != "requests" || e.Response.Header.Get("Retry-After") != "40" ||
			!strings.Contains(e.Message, "2 requests per minute") || !strings.Contains(e.Message, k.ID) {
			t.Errorf("the third call got %d %q retry-after %q: %s", e.StatusCode, e.Type, e.Response.Header.Get("Retry-After"), e.Message)
		}
		if st, m := w.call(t, "POST", "/v1/messages", "", `{"model":"gpt/gpt-5-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, bearer(token)...); st != 429 ||
			m["error"].(map[string]any)["type"] != "rate_limit_error" {
			t.Errorf("/v1/messages over the rpm: %d %v", st, m)
		}
		// Other keys are not limited by it.
		if err := chat(w.key); err != nil {
			t.Errorf("another key: %v", err)
		}
		clk.Advance(40 * time.Second) // the first call leaves the window
		if err := chat(token); err != nil {
			t.Errorf("once the minute has room: %v", err)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		token, _, err := w.keys.Create(gateway.KeySpec{Name: "tpm", Project: "demo", KeyLimits: gateway.KeyLimits{TPM: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := chat(token); err != nil {
			t.Fatalf("the first call: %v", err)
		}
		clk.Advance(15 * time.Second)
		e := openAIErr(t, chat(token))
		if e.StatusCode != 429 || e.Type != "tokens" || e.Response.Header.Get("Retry-After") != "45" || !strings.Contains(e.Message, "1 tokens per minute") {
			t.Errorf("the call over the tpm got %d %q retry-after %q: %s", e.StatusCode, e.Type, e.Response.Header.Get("Retry-After"), e.Message)
		}
		clk.Advance(45 * time.Second)
		if err := chat(token); err != nil {
			t.Errorf("once the minute has room: %v", err)
		}
	})
}

// An expired key is refused with a 401 that says it expired, and when; a
// key whose expiry was moved is accepted again.
func TestKeyExpiry(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	w := newWorld(t, serveOn("gpt"))
	w.keys.SetClock(clk.Now)
	at := clk.Now().Add(time.Hour)
	token, k, err := w.keys.Create(gateway.KeySpec{Name: "temp", Project: "demo", KeyLimits: gateway.KeyLimits{ExpiresAt: &at}})
	if err != nil {
		t.Fatal(err)
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith("gpt/gpt-5-mini"), bearer(token)...); st != 200 {
		t.Fatalf("before its expiry: %d %v", st, m)
	}
	clk.Advance(time.Hour)
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		body := chatWith("gpt/gpt-5-mini")
		if path == "/v1/messages" {
			body = `{"model":"gpt/gpt-5-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
		}
		st, m := w.call(t, "POST", path, "", body, bearer(token)...)
		if msg := errMessage(m); st != 401 || !strings.Contains(msg, "expired at 2026-12-03T10:00:00Z") || strings.Contains(msg, secretOf(token)) {
			t.Errorf("%s after its expiry: %d %q; want 401 saying when it expired", path, st, msg)
		}
	}
	if _, err := w.keys.Check(token); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Check after the expiry: %v", err)
	}
	later := clk.Now().Add(24 * time.Hour)
	if _, err := w.keys.Update(k.ID, func(k *gateway.Key) error { k.ExpiresAt = &later; return nil }); err != nil {
		t.Fatal(err)
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith("gpt/gpt-5-mini"), bearer(token)...); st != 200 {
		t.Errorf("after the expiry was moved: %d %v", st, m)
	}
}

// A key with allowed agents calls only as one of them, on the agent's own
// tier and providers.
func TestKeyAgentsAllowList(t *testing.T) {
	w := newWorld(t)
	token, _, err := w.keys.Create(gateway.KeySpec{Name: "team", Project: "demo", Agents: []string{"builder", "critic"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ model, header string }{{"builder", ""}, {"critic", ""}, {"claude-sonnet-4-6", ""}, {"claude-sonnet-4-5", "critic"}} {
		hdr := bearer(token)
		if c.header != "" {
			hdr = append(hdr, gateway.HeaderAgent, c.header)
		}
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith(c.model), hdr...); st != 200 {
			t.Errorf("model %s, agent header %q: %d %v", c.model, c.header, st, m)
		}
	}
	for _, c := range []struct{ model, header, want string }{
		{"planner", "", "calls only as the agents builder, critic; \"planner\" calls as agent planner"},
		{"cheap", "", "send one of them as the model"},
		{"gpt/gpt-5-mini", "builder", "on their own tiers and providers"},
		{"claude-sonnet-4-5", "planner", "calls as agent planner"},
	} {
		hdr := bearer(token)
		if c.header != "" {
			hdr = append(hdr, gateway.HeaderAgent, c.header)
		}
		st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith(c.model), hdr...)
		if msg := errMessage(m); st != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("model %s, agent header %q: %d %q; want 400 %q", c.model, c.header, st, msg, c.want)
		}
	}
}

// An expiry is a duration from now, a date (its start, UTC) or an RFC 3339
// time, in the future.
func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	for in, want := range map[string]string{
		"720h":                      "2027-01-02T09:00:00Z",
		"2027-01-31":                "2027-01-31T00:00:00Z",
		"2027-01-31T18:00:00+01:00": "2027-01-31T17:00:00Z",
	} {
		if got, err := gateway.ParseExpiry(in, now); err != nil || got.Format(time.RFC3339) != want {
			t.Errorf("ParseExpiry(%q) = %s, %v; want %s", in, got.Format(time.RFC3339), err, want)
		}
	}
	for in, want := range map[string]string{"soon": "give a duration", "2026-12-01": "not in the future", "-1h": "not in the future"} {
		if _, err := gateway.ParseExpiry(in, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseExpiry(%q) = %v; want an error with %q", in, err, want)
		}
	}
}
