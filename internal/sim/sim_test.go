package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// start runs a sim on 127.0.0.1, any free ports, closed with the test.
func start(t *testing.T, faults ...string) *Sim {
	t.Helper()
	return startOpts(t, Options{}, faults...)
}

func startOpts(t *testing.T, o Options, faults ...string) *Sim {
	t.Helper()
	for _, s := range faults {
		f, err := ParseFault(s)
		if err != nil {
			t.Fatal(err)
		}
		o.Faults = append(o.Faults, f)
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func endpointOf(t *testing.T, s *Sim, provider string) Endpoint {
	t.Helper()
	for _, e := range s.Endpoints() {
		if e.Provider == provider {
			return e
		}
	}
	t.Fatalf("no %s endpoint", provider)
	return Endpoint{}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends one generation request in provider's own protocol, with the
// endpoint's key, and returns the response.
func call(ctx context.Context, e Endpoint, text string) (*response, error) {
	var url string
	var body any
	h := http.Header{"Content-Type": {"application/json"}}
	msgs := []map[string]any{{"role": "user", "content": text}}
	switch e.Provider {
	case Anthropic:
		url = e.BaseURL + "/v1/messages"
		h.Set("X-Api-Key", e.Key)
		h.Set("Anthropic-Version", "2023-06-01")
		body = map[string]any{"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": msgs}
	case OpenAI, Ollama, VLLM:
		url = e.BaseURL + "/chat/completions"
		if e.Key != "" {
			h.Set("Authorization", "Bearer "+e.Key)
		}
		body = map[string]any{"model": Models[e.Provider][1], "messages": msgs}
	case Gemini:
		url = e.BaseURL + "/v1beta/models/gemini-2.5-flash:generateContent"
		h.Set("X-Goog-Api-Key", e.Key)
		body = map[string]any{"contents": []map[string]any{{"role": "user", "parts": []map[string]any{{"text": text}}}}}
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header = h
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &response{res.StatusCode, res.Header, data}, nil
}

func mustCall(t *testing.T, e Endpoint, text string) *response {
	t.Helper()
	r, err := call(context.Background(), e, text)
	if err != nil {
		t.Fatalf("%s: %v", e.Provider, err)
	}
	return r
}

// replyText extracts the answer text of a successful response.
func replyText(t *testing.T, provider string, body []byte) string {
	t.Helper()
	var v struct {
		Content []struct{ Text string } // anthropic
		Choices []struct {
			Message struct{ Content string }
		} // chat completions
		Candidates []struct {
			Content struct {
				Parts []struct{ Text string }
			}
		} // gemini
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v in %s", provider, err, body)
	}
	switch {
	case len(v.Content) > 0:
		return v.Content[0].Text
	case len(v.Choices) > 0:
		return v.Choices[0].Message.Content
	case len(v.Candidates) > 0 && len(v.Candidates[0].Content.Parts) > 0:
		return v.Candidates[0].Content.Parts[0].Text
	}
	t.Fatalf("%s: no answer in %s", provider, body)
	return ""
}

func TestEndpointsAnswerTheirOwnProtocols(t *testing.T) {
	s := start(t)
	want := []struct{ provider, typ, profile, suffix, key string }{
		{"anthropic", "anthropic", "", "", Key},
		{"openai", "openai_compatible", "openai", "/v1", Key},
		{"ollama", "openai_compatible", "ollama", "/v1", ""},
		{"vllm", "openai_compatible", "vllm", "/v1", ""},
		{"gemini", "gemini", "", "", Key},
	}
	eps := s.Endpoints()
	if len(eps) != len(want) {
		t.Fatalf("endpoints = %+v", eps)
	}
	seen := map[string]bool{}
	for i, w := range want {
		e := eps[i]
		if e.Provider != w.provider || e.Type != w.typ || e.Profile != w.profile || e.Key != w.key ||
			!strings.HasPrefix(e.BaseURL, "http://127.0.0.1:") || !strings.HasSuffix(e.BaseURL, w.suffix) {
			t.Errorf("endpoint %d = %+v, want %+v", i, e, w)
		}
		if seen[e.BaseURL] {
			t.Errorf("%s shares %s", e.Provider, e.BaseURL)
		}
		seen[e.BaseURL] = true
		r := mustCall(t, e, "hello "+e.Provider)
		if r.status != 200 {
			t.Errorf("%s: status %d: %s", e.Provider, r.status, r.body)
			continue
		}
		if got := replyText(t, e.Provider, r.body); got != "echo: hello "+e.Provider {
			t.Errorf("%s answered %q", e.Provider, got)
		}
	}
}

func TestKeyedEndpointsRefuseAnotherKey(t *testing.T) {
	s := start(t)
	for provider, want := range map[string]int{Anthropic: 401, OpenAI: 401, Gemini: 400, Ollama: 200, VLLM: 200} {
		e := endpointOf(t, s, provider)
		e.Key = "not-the-sim-key"
		if r := mustCall(t, e, "hi"); r.status != want {
			t.Errorf("%s with another key: %d, want %d: %s", provider, r.status, want, r.body)
		}
	}
}

func TestOverloadedTwiceThenEcho(t *testing.T) {
	s := start(t, "anthropic:529x2")
	e := endpointOf(t, s, Anthropic)
	for i := 1; i <= 2; i++ {
		r := mustCall(t, e, "hi")
		var body struct {
			Type  string
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(r.body, &body)
		if r.status != 529 || body.Type != "error" || body.Error.Type != "overloaded_error" || body.Error.Message != "Overloaded" {
			t.Errorf("call %d: %d %s", i, r.status, r.body)
		}
	}
	if r := mustCall(t, e, "third"); r.status != 200 || replyText(t, Anthropic, r.body) != "echo: third" {
		t.Errorf("call 3: %d %s", r.status, r.body)
	}
	if p := s.Pending(); len(p) != 0 {
		t.Errorf("pending after the faults: %v", p)
	}
	// The other providers were untouched.
	if r := mustCall(t, endpointOf(t, s, OpenAI), "x"); r.status != 200 {
		t.Errorf("openai: %d", r.status)
	}
}

func TestOpenAIRateLimitWithRetryAfter(t *testing.T) {
	s := start(t, "openai:429:retry-after=2", "openai:429")
	e := endpointOf(t, s, OpenAI)
	r := mustCall(t, e, "hi")
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	_ = json.Unmarshal(r.body, &body)
	if r.status != 429 || r.header.Get("retry-after") != "2" || r.header.Get("retry-after-ms") != "2000" ||
		body.Error.Code != "rate_limit_exceeded" || !strings.Contains(body.Error.Message, "Please try again in 2s.") {
		t.Errorf("openai:429:retry-after=2 = %d %v %s", r.status, r.header, r.body)
	}
	// Without retry-after: the message still says when, no header.
	r = mustCall(t, e, "hi")
	_ = json.Unmarshal(r.body, &body)
	if r.status != 429 || r.header.Get("retry-after") != "" || !strings.Contains(body.Error.Message, "try again in 2s") {
		t.Errorf("openai:429 = %d %v %s", r.status, r.header, r.body)
	}
}

func TestAnthropicRateLimitRetryAfter(t *testing.T) {
	s := start(t, "anthropic:429:retry-after=2", "anthropic:529:retry-after=0.5", "anthropic:spend-limit")
	e := endpointOf(t, s, Anthropic)
	if r := mustCall(t, e, "hi"); r.status != 429 || r.header.Get("retry-after") != "2" || !strings.Contains(string(r.body), "rate_limit_error") {
		t.Errorf("429 = %d %v %s", r.status, r.header, r.body)
	}
	if r := mustCall(t, e, "hi"); r.status != 529 || r.header.Get("retry-after") != "1" || r.header.Get("retry-after-ms") != "500" {
		t.Errorf("529 = %d %v %s", r.status, r.header, r.body)
	}
	if r := mustCall(t, e, "hi"); r.status != 429 || r.header.Get("retry-after") != "" || !strings.Contains(string(r.body), "enforced_spend_limit_reached") {
		t.Errorf("spend-limit = %d %v %s", r.status, r.header, r.body)
	}
}

func TestGeminiRetryInfo(t *testing.T) {
	s := start(t, "gemini:429:retry-after=31")
	r := mustCall(t, endpointOf(t, s, Gemini), "hi")
	var body struct {
		Error struct {
			Code    int
			Status  string
			Details []map[string]any
		}
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	var delay any
	for _, d := range body.Error.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
			delay = d["retryDelay"]
		}
	}
	if r.status != 429 || body.Error.Code != 429 || body.Error.Status != "RESOURCE_EXHAUSTED" || delay != "31s" || r.header.Get("retry-after") != "" {
		t.Errorf("gemini:429:retry-after=31 = %d %v %s", r.status, r.header, r.body)
	}
}

func TestEveryFaultOfEveryProviderAnswers(t *testing.T) {
	// Each non-stream fault answers with its status (the stream faults and
	// slow are exercised elsewhere).
	want := map[string]int{"midstream": 0, "cut": 0, "slow": 0, "502-html": 502, "too-long": 400, "bad-key": 400,
		"spend-limit": 429, "quota": 429, "daily-quota": 429, "blocked": 200}
	for _, p := range Providers() {
		for _, name := range FaultNames(p) {
			status, named := want[name]
			if named && status == 0 {
				continue
			}
			if !named {
				status = atoi(t, name)
			}
			t.Run(p+":"+name, func(t *testing.T) {
				s := start(t, p+":"+name)
				r := mustCall(t, endpointOf(t, s, p), "hi")
				if r.status != status {
					t.Errorf("status %d, want %d: %s", r.status, status, r.body)
				}
				if r := mustCall(t, endpointOf(t, s, p), "again"); r.status != 200 {
					t.Errorf("the call after the fault: %d %s", r.status, r.body)
				}
			})
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("fault %q is neither a status nor a known name", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestForeverAndInjectedFaults(t *testing.T) {
	s := start(t, "ollama:503xinf")
	e := endpointOf(t, s, Ollama)
	for i := 0; i < 3; i++ {
		if r := mustCall(t, e, "hi"); r.status != 503 || !strings.Contains(string(r.body), "server busy") {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	if p := s.Pending(); len(p) != 1 || p[0].String() != "ollama:503xinf" {
		t.Errorf("pending = %v", p)
	}

	o := endpointOf(t, s, OpenAI)
	f, err := ParseFault("openai:503x2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Inject(f); err != nil {
		t.Fatal(err)
	}
	if p := s.Pending(); len(p) != 2 || p[0].String() != "openai:503x2" || p[1].String() != "ollama:503xinf" { // in endpoint order
		t.Errorf("pending = %v", p)
	}
	for i, want := range []int{503, 503, 200} {
		if r := mustCall(t, o, "hi"); r.status != want {
			t.Errorf("openai call %d: %d, want %d", i, r.status, want)
		}
	}
	for bad, want := range map[*Fault]string{
		{Provider: "nobody", Spec: "500", Count: 1}: `fault "nobody:500": unknown provider "nobody"; write PROVIDER:FAULT`,
		{Provider: Gemini, Spec: "529", Count: 1}:   `fault "gemini:529": unknown gemini fault "529"; valid gemini faults: 400, bad-key,`,
		{Provider: OpenAI, Spec: "500", Count: -1}:  "count -1 is negative",
	} {
		if err := s.Inject(*bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Inject(%+v) = %v, want %q", *bad, err, want)
		}
	}
}

func TestFaultsApplyInOrder(t *testing.T) {
	s := start(t, "vllm:500", "vllm:401x2", "vllm:404")
	e := endpointOf(t, s, VLLM)
	for i, want := range []int{500, 401, 401, 404, 200} {
		if r := mustCall(t, e, "hi"); r.status != want {
			t.Errorf("call %d: %d, want %d", i, r.status, want)
		}
	}
}

// logs collects Options.Logf lines and signals each.
type logs struct {
	mu    sync.Mutex
	lines []string
	c     chan string
}

func newLogs() *logs { return &logs{c: make(chan string, 100)} }

func (l *logs) logf(format string, args ...any) {
	line := strings.TrimSpace(fmt.Sprintf(format, args...))
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	l.c <- line
}

// wait returns the next log line; the watchdog only bounds a broken test.
func (l *logs) wait(t *testing.T) string {
	t.Helper()
	select {
	case line := <-l.c:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no fault was served")
		return ""
	}
}

func TestSlowHoldsUntilTheClientGivesUp(t *testing.T) {
	lg := newLogs()
	s := startOpts(t, Options{Logf: lg.logf}, "anthropic:slow", "openai:slow", "ollama:slow", "vllm:slow", "gemini:slow")
	for _, e := range s.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := call(ctx, e, "hi")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the client's deadline", e.Provider, err)
		}
		if line := lg.wait(t); line != e.Provider+": fault slow (call 1 of 1)" {
			t.Errorf("log %q", line)
		}
		// The fault was used up: the next call answers.
		if r := mustCall(t, e, "next"); r.status != 200 {
			t.Errorf("%s after slow: %d", e.Provider, r.status)
		}
	}
}

func TestCloseReleasesSlowCalls(t *testing.T) {
	lg := newLogs()
	s, err := Start(context.Background(), Options{Logf: lg.logf, Faults: []Fault{{Provider: Gemini, Spec: "slow"}}}) // Count 0: every call
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := call(context.Background(), endpointOf(t, s, Gemini), "hi")
			done <- err
		}()
	}
	lg.wait(t)
	lg.wait(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-done: // released: answered or cut, but no longer held
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not release a held call")
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := call(context.Background(), endpointOf(t, s, Gemini), "hi"); err == nil {
		t.Error("a closed sim still answers")
	}
}

func TestContextEndStopsTheSim(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := endpointOf(t, s, Ollama)
	if r := mustCall(t, e, "hi"); r.status != 200 {
		t.Fatal(r.status)
	}
	cancel()
	// Close waits for the shutdown the cancellation started.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := call(context.Background(), e, "hi"); err == nil {
		t.Error("the sim still answers after its context ended")
	}
}

func TestHostMustBeLoopback(t *testing.T) {
	for _, h := range []string{"0.0.0.0", "::", "[::]", "192.168.1.10", "10.0.0.1", "8.8.8.8", "example.com", "127.0.0.1.nip.io"} {
		_, err := Start(context.Background(), Options{Host: h})
		if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "loopback") || !strings.Contains(err.Error(), h) {
			t.Errorf("Start(host %q) = %v", h, err)
		}
		if _, err := (Options{Host: h, Ports: PortsFrom(24700)}).Endpoints(); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Endpoints(host %q) = %v", h, err)
		}
	}
	if _, err := Start(context.Background(), Options{Host: "0.0.0.0"}); !strings.Contains(err.Error(), "every interface") {
		t.Errorf("0.0.0.0: %v", err)
	}
	for _, h := range []string{"", "127.0.0.1", "localhost", "127.0.0.2"} {
		s := startOpts(t, Options{Host: h})
		if r := mustCall(t, endpointOf(t, s, VLLM), "hi"); r.status != 200 {
			t.Errorf("host %q: %d", h, r.status)
		}
	}
	eps, err := Options{Host: "::1", Ports: PortsFrom(24700)}.Endpoints()
	if err != nil || eps[0].BaseURL != "http://[::1]:24700" || eps[1].BaseURL != "http://[::1]:24701/v1" || eps[4].BaseURL != "http://[::1]:24704" {
		t.Errorf("::1 endpoints = %+v, %v", eps, err)
	}
}

func TestPorts(t *testing.T) {
	if _, err := (Options{Ports: map[string]int{"anthropic": 1}}).Endpoints(); err == nil || !strings.Contains(err.Error(), "openai port is not fixed") {
		t.Errorf("partial ports: %v", err)
	}
	if _, err := Start(context.Background(), Options{Ports: map[string]int{"antropic": 1}}); err == nil || !strings.Contains(err.Error(), `did you mean "anthropic"`) {
		t.Errorf("unknown provider in ports: %v", err)
	}
	if _, err := Start(context.Background(), Options{Ports: map[string]int{"gemini": 70000}}); err == nil {
		t.Error("port 70000 accepted")
	}
	// A port in use is an error naming the endpoint, and nothing is left open.
	s := start(t)
	used := s.Endpoints()[3].BaseURL // vllm
	port := atoi(t, strings.TrimSuffix(used[strings.LastIndex(used, ":")+1:], "/v1"))
	_, err := Start(context.Background(), Options{Ports: map[string]int{VLLM: port}})
	if err == nil || !strings.Contains(err.Error(), "vllm endpoint") {
		t.Errorf("port in use: %v", err)
	}
	// Fixed ports are used as given.
	free := s.Endpoints()[0].BaseURL
	_ = s.Close()
	p0 := atoi(t, free[strings.LastIndex(free, ":")+1:])
	s2 := startOpts(t, Options{Ports: map[string]int{Anthropic: p0}})
	if got := s2.Endpoints()[0].BaseURL; got != free {
		t.Errorf("anthropic at %s, want %s", got, free)
	}
}

func TestSeedMakesIDsDeterministic(t *testing.T) {
	id := func() string {
		s := startOpts(t, Options{Seed: 42})
		r := mustCall(t, endpointOf(t, s, Anthropic), "hi")
		var v struct{ ID string }
		_ = json.Unmarshal(r.body, &v)
		return v.ID
	}
	if a, b := id(), id(); a == "" || a != b {
		t.Errorf("ids %q and %q", a, b)
	}
}

// Every endpoint stops at the request's output limit: an echo of a long
// prompt with a limit of one token bills one output token (it billed 52).
func TestEchoHonoursTheOutputLimit(t *testing.T) {
	s := start(t)
	text := strings.Repeat("a long prompt to echo ", 40)
	for _, e := range s.Endpoints() {
		h := http.Header{"Content-Type": {"application/json"}}
		var url string
		var body any
		msgs := []map[string]any{{"role": "user", "content": text}}
		switch e.Provider {
		case Anthropic:
			url = e.BaseURL + "/v1/messages"
			h.Set("X-Api-Key", e.Key)
			h.Set("Anthropic-Version", "2023-06-01")
			body = map[string]any{"model": "claude-sonnet-4-6", "max_tokens": 1, "messages": msgs}
		case OpenAI, Ollama, VLLM:
			url = e.BaseURL + "/chat/completions"
			if e.Key != "" {
				h.Set("Authorization", "Bearer "+e.Key)
			}
			limit := "max_tokens"
			if e.Provider == OpenAI {
				limit = "max_completion_tokens"
			}
			body = map[string]any{"model": Models[e.Provider][1], limit: 1, "messages": msgs}
		case Gemini:
			url = e.BaseURL + "/v1beta/models/gemini-2.5-flash:generateContent"
			h.Set("X-Goog-Api-Key", e.Key)
			body = map[string]any{"contents": []map[string]any{{"role": "user", "parts": []map[string]any{{"text": text}}}}, "generationConfig": map[string]any{"maxOutputTokens": 1}}
		}
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
		req.Header = h
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var u struct {
			Usage struct {
				Output     int `json:"output_tokens"`
				Completion int `json:"completion_tokens"`
			}
			UsageMetadata struct {
				Candidates int `json:"candidatesTokenCount"`
				Thoughts   int `json:"thoughtsTokenCount"`
			}
		}
		if res.StatusCode != 200 || json.Unmarshal(data, &u) != nil {
			t.Fatalf("%s: %d %s", e.Provider, res.StatusCode, data)
		}
		if out := u.Usage.Output + u.Usage.Completion + u.UsageMetadata.Candidates + u.UsageMetadata.Thoughts; out != 1 {
			t.Errorf("%s billed %d output tokens for a limit of 1: %s", e.Provider, out, data)
		}
	}
}
