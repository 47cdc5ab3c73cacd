package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	anthropicadapter "github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The fault matrix through the gateway: the faults of the orchestrator's
// matrix (orchestrator/faultmatrix_test.go), injected on the wire by each
// upstream adapter's fake, reached through the gateway in each caller
// protocol (Chat Completions, Responses, Messages), streamed and not. Each
// cell checks what the caller gets (the status and the protocol's error
// shape, retry-after, the in-stream error of a stream that had started,
// the answer of the alternate after a failover) and that the ledger is
// consistent after Drain: the invocation's rows are the spec's attempts,
// each once, every scope's spent is the sum of its rows, nothing is held.

// The upstreams: gateway instance name and the adapter behind it.
var gmUpstreams = []struct{ name, adapter string }{{"claude", "anthropic"}, {"gpt", "openaicompat"}, {"gemini", "gemini"}}

// gmOrder puts p first.
func gmOrder(p string) []string {
	out := []string{p}
	for _, u := range gmUpstreams {
		if u.name != p {
			out = append(out, u.name)
		}
	}
	return out
}

const (
	gmTask = "faults"
	// gmHold is the attempt timeout of the faulted adapter when the first
	// byte never comes.
	gmHold = 100 * time.Millisecond
)

// gmFakes are the three fakes of a fault world.
type gmFakes struct {
	anth *anthropicfake.Server
	oai  *openaifake.Server
	gem  *geminifake.Server
}

// enqueue puts n replies on p's fake: a, o or g, whichever is p's.
func (f gmFakes) enqueue(p string, n int, a anthropicfake.Reply, o openaifake.Reply, g geminifake.Reply) {
	for range n {
		switch p {
		case "claude":
			f.anth.Enqueue(a)
		case "gpt":
			f.oai.Enqueue(o)
		case "gemini":
			f.gem.Enqueue(g)
		}
	}
}

// gmAdapter is the adapter of instance name (see gmUpstreams) on base.
func gmAdapter(t testing.TB, name, base string, timeout time.Duration) provider.Adapter {
	t.Helper()
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	s := provider.Settings{Name: name, BaseURL: base, Pricer: cat, Timeout: timeout}
	var a provider.Adapter
	switch name {
	case "claude":
		s.Credentials = map[string]string{"api_key": "ak-upstream"}
		a, err = anthropicadapter.New(s)
	case "gpt":
		s.Profile, s.Credentials = "openai", map[string]string{"api_key": "ok-upstream"}
		a, err = openaicompat.New(s)
	case "gemini":
		s.Credentials = map[string]string{"api_key": "gk-upstream"}
		a, err = gemini.New(s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newGMWorld is newWorld with a third upstream (the Gemini fake), ledger.Fast
// over the world's SQLite store with a task and a month budget, pref as the
// preference, and, when hold is set, a short attempt timeout on pref[0].
func newGMWorld(t *testing.T, pref []string, alternates, hold bool) (*world, gmFakes, *ledger.Fast) {
	t.Helper()
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(k, "")
	}
	gem := geminifake.New(geminifake.WithAPIKey("gk-upstream"))
	t.Cleanup(gem.Close)
	var fast *ledger.Fast
	w := newWorld(t, withLedger, translating, withOrch(func(s *orchestrator.Settings) {
		s.Endpoints = append(s.Endpoints, orchestrator.Endpoint{Name: "gemini", Adapter: gmAdapter(t, "gemini", gem.URL(), 0)})
		s.Preference, s.AllowAlternates = pref, alternates
		s.Agents = map[string]orchestrator.AgentSettings{"builder": {Providers: pref}}
		if hold {
			for i := range s.Endpoints {
				if ep := &s.Endpoints[i]; ep.Name == pref[0] {
					ep.Adapter = gmAdapter(t, ep.Name, ep.Adapter.(provider.Endpointer).BaseURL(), gmHold)
				}
			}
		}
		fast = newFastLedger(t, s)
	}))
	return w, gmFakes{w.anth, w.oai, gem}, fast
}

// newFastLedger puts ledger.Fast over the store s was given (withLedger),
// with budgets on the task gmTask and on the month.
func newFastLedger(t testing.TB, s *orchestrator.Settings) *ledger.Fast {
	t.Helper()
	ctx := context.Background()
	fast, err := ledger.NewFast(ctx, s.Ledger, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fast.Close() })
	for _, sc := range []ledger.Scope{ledger.TaskScope(gmTask), ledger.MonthScope(time.Now().UTC())} {
		if err := fast.SetBudget(ctx, sc, provider.MustMoney("50")); err != nil {
			t.Fatal(err)
		}
	}
	s.Ledger = fast
	return fast
}

// checkLedger drains the journal and the leases, then checks the ledger
// is consistent: no scope holds anything, each scope's spent is the sum of
// its rows, the spend report agrees. It returns the rows by invocation.
func checkLedger(t testing.TB, fast *ledger.Fast) map[string][]ledger.AttemptRow {
	t.Helper()
	ctx := context.Background()
	if err := fast.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	rows, err := fast.Attempts(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][]ledger.AttemptRow{}
	perScope := map[ledger.Scope]provider.Money{}
	var total provider.Money
	for _, r := range rows {
		byID[r.InvocationID] = append(byID[r.InvocationID], r)
		perScope[ledger.MonthScope(r.Time.UTC())] += r.Cost
		if r.Task != "" {
			perScope[ledger.TaskScope(r.Task)] += r.Cost
		}
		total += r.Cost
	}
	bs, err := fast.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) < 2 {
		t.Errorf("budgets %+v; want the task's and the month's at least", bs)
	}
	for _, b := range bs {
		if b.Held != 0 {
			t.Errorf("%s still holds $%s after the drain", b.Scope, b.Held)
		}
		if b.Spent != perScope[b.Scope] {
			t.Errorf("%s spent $%s; its rows sum to $%s", b.Scope, b.Spent, perScope[b.Scope])
		}
	}
	rep, err := fast.Spend(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Cost != total || rep.Total.Attempts != int64(len(rows)) {
		t.Errorf("spend report %+v; rows: %d costing $%s", rep.Total, len(rows), total)
	}
	return byID
}

// gmErr is an error class as each protocol must report it
// (docs/gateway.md, Errors).
type gmErr struct {
	name          string
	oStatus       int
	oType, oCode  string
	aStatus       int
	aType         string
	retryAfter    string // the retry-after header the caller must get
	noRetry       bool   // x-should-retry: false
	midStreamOnly bool
}

var (
	gmPaused     = gmErr{name: "project_paused", oStatus: 400, oType: "invalid_request_error", oCode: "project_paused", aStatus: 400, aType: "permission_error", noRetry: true}
	gmQuota      = gmErr{name: "quota", oStatus: 429, oType: "insufficient_quota", oCode: "insufficient_quota", aStatus: 402, aType: "billing_error", noRetry: true}
	gmOverloaded = gmErr{name: "overloaded", oStatus: 503, oType: "server_error", oCode: "overloaded", aStatus: 529, aType: "overloaded_error"}
	gmUpstream   = gmErr{name: "upstream", oStatus: 502, oType: "server_error", oCode: "upstream_error", aStatus: 502, aType: "api_error"}
)

// gmRateLimit is the rate limit; its OpenAI type is the limit each
// upstream's fake says was hit (gmLimitType).
func gmRateLimit(retryAfter string) gmErr {
	return gmErr{name: "rate_limit", oStatus: 429, oCode: "rate_limit_exceeded", aStatus: 429, aType: "rate_limit_error", retryAfter: retryAfter}
}

// gmLimitType is the limit each upstream's scripted rate limit hits:
// OpenAI's fake, tokens per minute; the others, requests.
var gmLimitType = map[string]string{"claude": "requests", "gpt": "tokens", "gemini": "requests"}

// gmWant is what the caller must get, and the ledger rows the invocation
// must have ("P:server N:ok": P the faulted upstream, N the next).
type gmWant struct {
	served string // "P" or "N" when the answer is a 200
	err    *gmErr // the error otherwise: an HTTP error, or in a stream that started when inStream
	// inStream: the stream started (200) and ends with the error.
	inStream bool
	rows     string
	billed   bool // P's row carries partial usage and a cost
}

type gmMode string

const (
	gmUnary  gmMode = "unary"
	gmStream gmMode = "stream"
)

type gmFault struct {
	name string
	// single: the faulted upstream is the only one the call may use.
	single, alternates, hold bool
	// script enqueues the fault on p's fake; "" or why the cell has no meaning.
	script func(f gmFakes, p string, m gmMode) (na string)
	want   map[gmMode]gmWant
}

const gmPartial = "a partial answer that is cut off before it ends, long enough for several events"

func gmStreamOnly(m gmMode) string {
	if m == gmUnary {
		return "no stream (a non-streaming request gets the HTTP error instead)"
	}
	return ""
}

func gmFaults() []gmFault {
	serverThenFailover := gmWant{served: "N", rows: "P:server P:server P:server N:ok"}
	malformed := func(invalid bool) func(f gmFakes, p string, m gmMode) string {
		return func(f gmFakes, p string, m gmMode) string {
			f.enqueue(p, 3, anthropicfake.Malformed(m == gmStream, invalid), openaifake.Malformed(m == gmStream, invalid), geminifake.Malformed(m == gmStream, invalid))
			return ""
		}
	}
	quota := func(f gmFakes, p string, m gmMode) string {
		f.enqueue(p, 4, anthropicfake.SpendLimitReached(), openaifake.InsufficientQuota(), geminifake.DailyQuotaExceeded("gemini-2.5-pro", 10*time.Second))
		return ""
	}
	rateLimited := func(n int, d time.Duration) func(f gmFakes, p string, m gmMode) string {
		return func(f gmFakes, p string, m gmMode) string {
			f.enqueue(p, n, anthropicfake.RateLimited(fmt.Sprint(int(d.Seconds()))), openaifake.RateLimited(d).WithRetryAfter(d), geminifake.RateLimited("gemini-2.5-pro", d))
			return ""
		}
	}
	rl4 := "P:rate_limit P:rate_limit P:rate_limit P:rate_limit"
	return []gmFault{
		{
			name: "error event in a 200 stream, before any content",
			script: func(f gmFakes, p string, m gmMode) string {
				f.enqueue(p, 1, anthropicfake.OverloadedMidStream(0), openaifake.ServerErrorMidStream(0), geminifake.OverloadedMidStream(0))
				return gmStreamOnly(m)
			},
			want: map[gmMode]gmWant{gmStream: {served: "P", rows: "P:{srv} P:ok"}},
		},
		{
			name: "error event in a 200 stream, after content",
			script: func(f gmFakes, p string, m gmMode) string {
				f.enqueue(p, 1,
					anthropicfake.Reply{Text: gmPartial, Usage: anthropicfake.Usage{Input: 2000, Output: 50},
						MidStreamError: &anthropicfake.StreamError{Type: anthropicfake.TypeOverloaded, Message: "Overloaded", AfterEvents: 5}},
					openaifake.Reply{Text: gmPartial, Usage: openaifake.Usage{Prompt: 2000, Completion: 50},
						MidStreamError: &openaifake.StreamError{Message: "The server had an error while processing your request.", Type: "server_error", AfterChunks: 3}},
					geminifake.Reply{Text: gmPartial, Usage: geminifake.Usage{Prompt: 2000, Candidates: 50},
						MidStreamError: &geminifake.StreamError{Code: 503, Status: geminifake.StatusUnavailable, AfterChunks: 2}})
				return gmStreamOnly(m)
			},
			// err is set per upstream: {srv}.
			want: map[gmMode]gmWant{gmStream: {inStream: true, rows: "P:{srv}", billed: true}},
		},
		{
			name: "stream cut before its end marker, after content",
			script: func(f gmFakes, p string, m gmMode) string {
				f.enqueue(p, 1, anthropicfake.Reply{Text: gmPartial, CutAfterEvents: 5}, openaifake.Reply{Text: gmPartial, CutAfterChunks: 3}, geminifake.Reply{Text: gmPartial, CutAfterChunks: 2})
				return ""
			},
			want: map[gmMode]gmWant{
				gmUnary:  {served: "P", rows: "P:network P:ok"},
				gmStream: {err: &gmUpstream, inStream: true, rows: "P:network", billed: true},
			},
		},
		{name: "malformed JSON in a 200 body: truncated document", script: malformed(false), want: map[gmMode]gmWant{gmUnary: serverThenFailover, gmStream: serverThenFailover}},
		{name: "malformed JSON in a 200 body: invalid syntax", script: malformed(true), want: map[gmMode]gmWant{gmUnary: serverThenFailover, gmStream: serverThenFailover}},
		{
			name: "HTML 502 from a proxy",
			script: func(f gmFakes, p string, m gmMode) string {
				f.enqueue(p, 3, anthropicfake.BadGateway(), openaifake.BadGateway(), geminifake.BadGateway())
				return ""
			},
			want: map[gmMode]gmWant{gmUnary: serverThenFailover, gmStream: serverThenFailover},
		},
		{
			name: "first byte never comes",
			hold: true,
			script: func(f gmFakes, p string, m gmMode) string {
				f.enqueue(p, 2, anthropicfake.TextReply("late").WithHold(never), openaifake.TextReply("late").WithHold(never), geminifake.TextReply("late").WithHold(never))
				return ""
			},
			want: map[gmMode]gmWant{gmUnary: {served: "N", rows: "P:timeout P:timeout N:ok"}, gmStream: {served: "N", rows: "P:timeout P:timeout N:ok"}},
		},
		{
			name:   "absurd retry-after (86400 s)",
			script: rateLimited(1, 24*time.Hour),
			want:   map[gmMode]gmWant{gmUnary: {served: "N", rows: "P:rate_limit N:ok"}, gmStream: {served: "N", rows: "P:rate_limit N:ok"}},
		},
		{
			name:   "absurd retry-after (86400 s), no other upstream",
			single: true,
			script: rateLimited(1, 24*time.Hour),
			want: map[gmMode]gmWant{
				gmUnary:  {err: ptr(gmRateLimit("86400")), rows: "P:rate_limit"},
				gmStream: {err: ptr(gmRateLimit("86400")), rows: "P:rate_limit"},
			},
		},
		{
			name:       "bad key (Gemini: 400 API_KEY_INVALID; others: their 401)",
			alternates: true,
			script: func(f gmFakes, p string, m gmMode) string {
				f.enqueue(p, 1, anthropicfake.AuthError(), openaifake.InvalidAPIKey("sk-wrong-000000"), geminifake.APIKeyInvalid())
				return ""
			},
			want: map[gmMode]gmWant{gmUnary: {err: &gmPaused, rows: "P:auth"}, gmStream: {err: &gmPaused, rows: "P:auth"}},
		},
		{
			name:   "429 that will not clear (per-minute limit, repeated)",
			script: rateLimited(8, 2*time.Second),
			want:   map[gmMode]gmWant{gmUnary: {served: "N", rows: rl4 + " N:ok"}, gmStream: {served: "N", rows: rl4 + " N:ok"}},
		},
		{
			name:   "429 that will not clear, no other upstream",
			single: true,
			script: rateLimited(8, 2*time.Second),
			want: map[gmMode]gmWant{
				gmUnary:  {err: ptr(gmRateLimit("2")), rows: rl4},
				gmStream: {err: ptr(gmRateLimit("2")), rows: rl4},
			},
		},
		{
			name:   "quota 429 that will not clear (billing, spend limit, daily quota)",
			script: quota,
			want:   map[gmMode]gmWant{gmUnary: {err: &gmQuota, rows: "P:quota_exhausted"}, gmStream: {err: &gmQuota, rows: "P:quota_exhausted"}},
		},
		{
			name:       "quota 429 that will not clear, alternates allowed",
			alternates: true,
			script:     quota,
			want:       map[gmMode]gmWant{gmUnary: {served: "N", rows: "P:quota_exhausted N:ok"}, gmStream: {served: "N", rows: "P:quota_exhausted N:ok"}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// never is a hold that is never released (the fake lets go when the
// client does).
var never = make(chan struct{})

// gmServerKind is the kind of each upstream's in-stream error, and the
// class the caller gets for it.
var gmServerKind = map[string]struct {
	kind string
	err  gmErr
}{"claude": {"overloaded", gmOverloaded}, "gpt": {"server", gmUpstream}, "gemini": {"overloaded", gmOverloaded}}

// A caller protocol: its route, a request body, and how to read the
// answer.
type gmProto struct {
	name   string
	path   string
	body   func(stream bool) string
	openAI bool // OpenAI error shape (else Anthropic's)
}

var gmProtos = []gmProto{
	{name: "chat", path: "/v1/chat/completions", openAI: true, body: func(s bool) string {
		return fmt.Sprintf(`{"model":"builder","max_tokens":1000,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, s)
	}},
	{name: "responses", path: "/v1/responses", openAI: true, body: func(s bool) string {
		return fmt.Sprintf(`{"model":"builder","max_output_tokens":1000,"stream":%v,"input":"hello"}`, s)
	}},
	{name: "messages", path: "/v1/messages", body: func(s bool) string {
		return fmt.Sprintf(`{"model":"builder","max_tokens":1000,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, s)
	}},
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// gmAnswer is what the caller got, on the wire.
type gmAnswer struct {
	status int
	header http.Header
	body   []byte
	events []sseEvent // when the answer is an event stream
}

// call sends one request through the gateway, raw, and reads the whole
// answer.
// request is a POST of body in p's protocol to w, with w's key, for task.
func (p gmProto) request(t testing.TB, ctx context.Context, w *world, task, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", w.url+p.path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(gateway.HeaderTask, task)
	if !p.openAI {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	return req
}

func (p gmProto) call(t testing.TB, w *world, task string, stream bool) gmAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := p.request(t, ctx, w, task, p.body(stream))
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: checkedTransport(t, tr)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := gmAnswer{status: resp.StatusCode, header: resp.Header}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if a.body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.data != "" || ev.name != "" {
				a.events = append(a.events, ev)
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("the stream broke instead of ending: %v", err)
	}
	if ev.data != "" || ev.name != "" {
		t.Errorf("the stream ended inside an event: %+v", ev)
	}
	return a
}

// jsonPath reads a string at a path of keys in a JSON document.
func jsonPath(doc []byte, keys ...string) (string, bool) {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return "", false
	}
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[k]; !ok {
			return "", false
		}
	}
	s, ok := v.(string)
	return s, ok
}

// answered checks a's answer is complete, in p's shape, and returns its
// text.
func (p gmProto) answered(t testing.TB, a gmAnswer) string {
	t.Helper()
	if a.status != 200 {
		t.Errorf("status %d (%s), want 200", a.status, a.body)
		return ""
	}
	if a.events == nil {
		var text string
		var ok bool
		switch p.name {
		case "chat":
			var c struct {
				Choices []struct {
					Message      struct{ Content string }
					FinishReason string `json:"finish_reason"`
				}
			}
			ok = json.Unmarshal(a.body, &c) == nil && len(c.Choices) == 1 && c.Choices[0].FinishReason != ""
			if ok {
				text = c.Choices[0].Message.Content
			}
		case "responses":
			st, _ := jsonPath(a.body, "status")
			var r struct {
				Output []struct{ Content []struct{ Text string } }
			}
			ok = json.Unmarshal(a.body, &r) == nil && st == "completed" && len(r.Output) > 0 && len(r.Output[0].Content) > 0
			if ok {
				text = r.Output[0].Content[0].Text
			}
		case "messages":
			var m struct {
				Type       string
				StopReason string `json:"stop_reason"`
				Content    []struct{ Text string }
			}
			ok = json.Unmarshal(a.body, &m) == nil && m.Type == "message" && m.StopReason != "" && len(m.Content) > 0
			if ok {
				text = m.Content[0].Text
			}
		}
		if !ok || text == "" {
			t.Errorf("not a complete %s answer: %s", p.name, a.body)
		}
		return text
	}
	var text strings.Builder
	last := a.events[len(a.events)-1]
	var end bool
	for _, e := range a.events {
		switch p.name {
		case "chat":
			var c struct {
				Choices []struct{ Delta struct{ Content string } }
			}
			if json.Unmarshal([]byte(e.data), &c) == nil && len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
		case "responses":
			if e.name == "response.output_text.delta" {
				d, _ := jsonPath([]byte(e.data), "delta")
				text.WriteString(d)
			}
		case "messages":
			if e.name == "content_block_delta" {
				d, _ := jsonPath([]byte(e.data), "delta", "text")
				text.WriteString(d)
			}
		}
	}
	switch p.name {
	case "chat":
		end = last.data == "[DONE]"
	case "responses":
		end = last.name == "response.completed"
	case "messages":
		end = last.name == "message_stop"
	}
	if !end || text.Len() == 0 {
		t.Errorf("not a complete %s stream: text %q, last event %+v", p.name, text.String(), last)
	}
	return text.String()
}

// failed checks a is the error e in p's shape: an HTTP error, or the
// in-stream error ending a stream that started.
func (p gmProto) failed(t testing.TB, a gmAnswer, e gmErr, inStream bool) {
	t.Helper()
	if inStream {
		if a.status != 200 || len(a.events) == 0 {
			t.Errorf("status %d with %d events (%s), want a 200 stream ending with an error", a.status, len(a.events), a.body)
			return
		}
		last := a.events[len(a.events)-1]
		var typ, code, msg string
		switch p.name {
		case "chat":
			typ, _ = jsonPath([]byte(last.data), "error", "type")
			code, _ = jsonPath([]byte(last.data), "error", "code")
			msg, _ = jsonPath([]byte(last.data), "error", "message")
		case "responses":
			if last.name == "response.failed" {
				typ = e.oType // response.error has a code, no type
			}
			code, _ = jsonPath([]byte(last.data), "response", "error", "code")
			msg, _ = jsonPath([]byte(last.data), "response", "error", "message")
		case "messages":
			if last.name == "error" {
				typ, _ = jsonPath([]byte(last.data), "error", "type")
				msg, _ = jsonPath([]byte(last.data), "error", "message")
			}
			if top, _ := jsonPath([]byte(last.data), "type"); top != "error" {
				typ = "event type " + top
			}
		}
		want, wantCode := e.aType, e.oCode
		if p.openAI {
			want = e.oType
		}
		if p.name == "responses" {
			// response.error.code is one of the spec's ResponseErrorCode.
			wantCode = "server_error"
			if e.name == "rate_limit" {
				wantCode = "rate_limit_exceeded"
			}
			p.keptPartial(t, a)
		}
		if typ != want || (p.openAI && code != wantCode) || msg == "" {
			t.Errorf("the stream ended with %+v; want the in-stream error %s/%s", last, want, wantCode)
		}
		for _, ev := range a.events[:len(a.events)-1] {
			if ev.data == "[DONE]" || ev.name == "message_stop" || ev.name == "response.completed" || strings.Contains(ev.data, `"finish_reason":"`) {
				t.Errorf("the failed stream has an end it did not have: %+v", ev)
			}
		}
		return
	}
	status, typ, code := e.aStatus, e.aType, ""
	if p.openAI {
		status, typ, code = e.oStatus, e.oType, e.oCode
	}
	if a.events != nil {
		t.Errorf("a stream (%d events, last %+v), want the HTTP error %d", len(a.events), a.events[len(a.events)-1], status)
		return
	}
	var body map[string]json.RawMessage
	if a.status != status || json.Unmarshal(a.body, &body) != nil {
		t.Errorf("status %d %s; want %d %s", a.status, a.body, status, typ)
		return
	}
	var gotType, gotCode string
	msg, _ := jsonPath(a.body, "error", "message")
	gotType, _ = jsonPath(a.body, "error", "type")
	if p.openAI {
		gotCode, _ = jsonPath(a.body, "error", "code")
		if len(body) != 1 {
			t.Errorf("OpenAI error body has keys beside error: %s", a.body)
		}
	} else if top, _ := jsonPath(a.body, "type"); top != "error" {
		t.Errorf("Anthropic error body without type error: %s", a.body)
	}
	if gotType != typ || gotCode != code || msg == "" {
		t.Errorf("error %s; want type %q code %q with a message", a.body, typ, code)
	}
	if got, ms := a.header.Get("Retry-After"), a.header.Get("Retry-After-Ms"); got != e.retryAfter || (got != "" && ms != got+"000") {
		t.Errorf("retry-after %q, retry-after-ms %q; want %q", got, ms, e.retryAfter)
	}
	if e.noRetry && a.header.Get("X-Should-Retry") != "false" {
		t.Errorf("x-should-retry %q; want false", a.header.Get("X-Should-Retry"))
	}
}

// keptPartial checks that a failed Responses stream's response.failed
// carries what was streamed: the text of its deltas, in a message item
// marked incomplete.
func (p gmProto) keptPartial(t testing.TB, a gmAnswer) {
	t.Helper()
	var streamed strings.Builder
	for _, ev := range a.events {
		if ev.name == "response.output_text.delta" {
			d, _ := jsonPath([]byte(ev.data), "delta")
			streamed.WriteString(d)
		}
	}
	var failed struct {
		Response struct {
			Output []struct {
				Type, Status string
				Content      []struct{ Text string }
			}
		}
	}
	if err := json.Unmarshal([]byte(a.events[len(a.events)-1].data), &failed); err != nil {
		t.Fatal(err)
	}
	out := failed.Response.Output
	if streamed.Len() == 0 {
		if len(out) != 0 {
			t.Errorf("nothing was streamed, yet response.failed has output %+v", out)
		}
		return
	}
	if len(out) != 1 || out[0].Type != "message" || out[0].Status != "incomplete" || len(out[0].Content) != 1 || out[0].Content[0].Text != streamed.String() {
		t.Errorf("response.failed has output %+v; want the %q streamed, in an incomplete message", out, streamed.String())
	}
}

// rowsPath renders an invocation's rows as "provider:outcome …", in order.
func rowsPath(rows []ledger.AttemptRow) string {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b ledger.AttemptRow) int { return a.Time.Compare(b.Time) })
	var parts []string
	for _, r := range rows {
		parts = append(parts, r.Provider+":"+r.Outcome)
	}
	return strings.Join(parts, " ")
}

func TestGatewayFaultMatrix(t *testing.T) {
	type line struct{ fault, up, proto, mode, got string }
	var summary []line
	for _, f := range gmFaults() {
		for _, up := range gmUpstreams {
			for _, p := range gmProtos {
				for _, mode := range []gmMode{gmUnary, gmStream} {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", f.name, up.adapter, p.name, mode), func(t *testing.T) {
						pref := gmOrder(up.name)
						if f.single {
							pref = pref[:1]
						}
						w, fakes, fast := newGMWorld(t, pref, f.alternates, f.hold)
						if na := f.script(fakes, up.name, mode); na != "" {
							summary = append(summary, line{f.name, up.adapter, p.name, string(mode), "n/a"})
							t.Skip(na)
						}
						want := f.want[mode]
						if want.inStream && want.err == nil {
							want.err = ptr(gmServerKind[up.name].err)
						}
						if want.err != nil && want.err.name == "rate_limit" {
							e := *want.err
							e.oType = gmLimitType[up.name]
							want.err = &e
						}
						expand := func(s string) string {
							s = strings.ReplaceAll(s, "{srv}", gmServerKind[up.name].kind)
							s = strings.ReplaceAll(s, "P:", up.name+":")
							return strings.ReplaceAll(s, "N:", pref[min(1, len(pref)-1)]+":")
						}
						a := p.call(t, w, gmTask, mode == gmStream)
						got := fmt.Sprint(a.status)
						switch {
						case want.err == nil:
							p.answered(t, a)
							served := a.header.Get(gateway.HeaderProvider)
							got += " from " + served
							if wantServed := expand(want.served + ":"); served+":" != wantServed {
								t.Errorf("served by %q; want %s", served, strings.TrimSuffix(wantServed, ":"))
							}
						default:
							p.failed(t, a, *want.err, want.inStream)
							got += " " + want.err.name
							if want.inStream {
								got += " in the stream"
							}
							if ra := a.header.Get("Retry-After"); ra != "" {
								got += ", retry-after " + ra
							}
						}
						id := a.header.Get(gateway.HeaderInvocation)
						byID := checkLedger(t, fast)
						rows := byID[id]
						delete(byID, id)
						if rowsPath(rows) != expand(want.rows) {
							t.Errorf("ledger rows of %s: %q; the spec's attempts are %q, each once", id, rowsPath(rows), expand(want.rows))
						}
						if len(byID) > 0 {
							t.Errorf("rows of invocations the caller never made: %v", byID)
						}
						if want.billed && (len(rows) == 0 || rows[0].Cost == 0 || rows[0].InputTokens == 0) {
							t.Errorf("the broken attempt billed nothing: %+v", rows)
						}
						summary = append(summary, line{f.name, up.adapter, p.name, string(mode), got + "; ledger " + rowsPath(rows)})
					})
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-66s %-12s %-9s %-6s %s\n", "fault", "upstream", "caller", "mode", "caller got; ledger rows")
	for _, l := range summary {
		fmt.Fprintf(&b, "%-66s %-12s %-9s %-6s %s\n", l.fault, l.up, l.proto, l.mode, l.got)
	}
	t.Log(b.String())
}
