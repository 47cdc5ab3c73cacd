package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The providers the sim serves, in the order of [Sim.Endpoints].
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Ollama    = "ollama"
	VLLM      = "vllm"
	Gemini    = "gemini"
)

// Providers returns the provider names the sim serves, in endpoint order.
func Providers() []string { return []string{Anthropic, OpenAI, Ollama, VLLM, Gemini} }

// Fault is one parsed fault: PROVIDER:FAULT[:PARAM=VALUE...][xN]. See the
// package documentation for every fault of every provider.
type Fault struct {
	// Provider is anthropic, openai, ollama, vllm or gemini.
	Provider string `json:"provider"`
	// Spec is the fault: an HTTP status ("529") or a name ("too-long").
	Spec string `json:"fault"`
	// Params are the PARAM=VALUE pairs, e.g. {"retry-after": "2"}.
	Params map[string]string `json:"params,omitempty"`
	// Count is how many consecutive calls fail; 0 means every call (x0,
	// xinf). ParseFault gives 1 when the spec has no xN.
	Count int `json:"count"`
}

// Parameter names.
const (
	ParamRetryAfter = "retry-after"
	ParamAfter      = "after"
	ParamReason     = "reason"
)

// String is the fault in the syntax ParseFault reads, parameters sorted, x1
// omitted and every-call written xinf.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(f.Provider + ":" + f.Spec)
	for _, k := range slices.Sorted(maps.Keys(f.Params)) {
		b.WriteString(":" + k + "=" + f.Params[k])
	}
	switch {
	case f.Count == 0:
		b.WriteString("xinf")
	case f.Count != 1:
		b.WriteString("x" + strconv.Itoa(f.Count))
	}
	return b.String()
}

// Syntax is the fault grammar, for messages and help.
const Syntax = "PROVIDER:FAULT[:PARAM=VALUE...][xN]"

var countSuffix = regexp.MustCompile(`x([^:=x]*)$`)

// ParseFault reads a fault written PROVIDER:FAULT[:PARAM=VALUE...][xN]:
//
//   - PROVIDER is anthropic, openai, ollama, vllm or gemini;
//   - FAULT is an HTTP status or a name valid for that provider (see the
//     package documentation, or [FaultHelp]);
//   - PARAM=VALUE is retry-after=SECONDS (2, 0.5 or 1500ms) on the
//     rate-limit and overload faults that take it, after=N on midstream and
//     cut (stream events or chunks sent before the failure), reason=R on
//     gemini:blocked;
//   - xN is how many consecutive calls fail (default 1); x0 and xinf fail
//     every call.
//
// For example anthropic:529x2, anthropic:429:retry-after=2, openai:quota,
// gemini:429:retry-after=31, ollama:slowxinf. The error for a bad spec
// says what is valid, listing the provider's faults when the fault is
// unknown.
func ParseFault(s string) (Fault, error) {
	raw := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Fault{}, fmt.Errorf("empty fault: write %s, e.g. anthropic:529x2", Syntax)
	}
	f := Fault{Count: 1}
	if m := countSuffix.FindStringSubmatchIndex(s); m != nil && m[0] > 0 && s[m[0]-1] != ':' {
		n := s[m[2]:m[3]]
		switch c, err := strconv.Atoi(n); {
		case strings.EqualFold(n, "inf"):
			f.Count = 0
		case err != nil || c < 0 || n[0] == '+' || n[0] == '-':
			return Fault{}, fmt.Errorf("fault %q: bad count %q: write xN with N a whole number of calls (x2: the next two calls), or x0 or xinf for every call", raw, "x"+n)
		default:
			f.Count = c
		}
		s = s[:m[0]]
	}
	parts := strings.Split(s, ":")
	f.Provider = strings.ToLower(strings.TrimSpace(parts[0]))
	if _, ok := catalog[f.Provider]; !ok {
		return Fault{}, fmt.Errorf("fault %q: %w", raw, unknownProvider(f.Provider))
	}
	if len(parts) < 2 || strings.TrimSpace(parts[1]) == "" {
		return Fault{}, fmt.Errorf("fault %q names no fault: write %s, e.g. %s:%s; %s", raw, Syntax, f.Provider, catalog[f.Provider][0].name, validFaults(f.Provider))
	}
	f.Spec = strings.ToLower(strings.TrimSpace(parts[1]))
	for _, p := range parts[2:] {
		k, v, ok := strings.Cut(p, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return Fault{}, fmt.Errorf("fault %q: parameter %q: write PARAM=VALUE, e.g. %s=2", raw, p, ParamRetryAfter)
		}
		if f.Params == nil {
			f.Params = map[string]string{}
		}
		if _, dup := f.Params[k]; dup {
			return Fault{}, fmt.Errorf("fault %q: parameter %s is given twice", raw, k)
		}
		f.Params[k] = v
	}
	if _, err := f.compile(); err != nil {
		return Fault{}, fmt.Errorf("fault %q: %w", raw, err)
	}
	return f, nil
}

func unknownProvider(p string) error {
	return fmt.Errorf("unknown provider %q%s; write %s with PROVIDER one of %s", p, didYouMean(p, Providers()), Syntax, strings.Join(Providers(), ", "))
}

func didYouMean(s string, names []string) string {
	if c := provider.Closest(s, names); c != "" && c != s {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// FaultNames returns the faults of a provider, in help order (nil for an
// unknown provider).
func FaultNames(providerName string) []string {
	var out []string
	for _, d := range catalog[providerName] {
		out = append(out, d.name)
	}
	return out
}

func validFaults(p string) string {
	return fmt.Sprintf("valid %s faults: %s", p, strings.Join(FaultNames(p), ", "))
}

// FaultHelp describes every fault of every provider, one per line, for
// command help.
func FaultHelp() string {
	var b strings.Builder
	spec := func(p string, d faultDef) string {
		s := p + ":" + d.name
		for _, k := range d.params {
			s += ":" + k + "=…"
		}
		return s
	}
	width := 0
	for _, p := range Providers() {
		for _, d := range catalog[p] {
			width = max(width, utf8.RuneCountInString(spec(p, d)))
		}
	}
	for _, p := range Providers() {
		fmt.Fprintf(&b, "  %s:\n", p)
		for _, d := range catalog[p] {
			s := spec(p, d)
			fmt.Fprintf(&b, "    %s%s  %s\n", s, strings.Repeat(" ", width-utf8.RuneCountInString(s)), d.help)
		}
	}
	return b.String()
}

// args is what a fault needs to build one reply.
type args struct {
	model string // the model the request named
	key   string // the credential the request sent
	hold  <-chan struct{}

	retryAfter    time.Duration
	hasRetryAfter bool
	after         int
	hasAfter      bool
	reason        string
}

// faultDef is one fault of one provider. build returns the provider's
// fake Reply type (anthropicfake.Reply, openaifake.Reply or
// geminifake.Reply).
type faultDef struct {
	name   string
	help   string
	params []string
	// minAfter is the least after= value accepted (1 for cuts: a cut after
	// zero events would be no cut).
	minAfter int
	build    func(a args) any
}

// compiled is a validated fault ready to build replies.
type compiled struct {
	def  *faultDef
	args args
}

// compile checks f against the catalogue and parses its parameters.
func (f Fault) compile() (*compiled, error) {
	defs, ok := catalog[f.Provider]
	if !ok {
		return nil, unknownProvider(f.Provider)
	}
	if f.Count < 0 {
		return nil, fmt.Errorf("count %d is negative: write xN with N a whole number, or xinf for every call", f.Count)
	}
	i := slices.IndexFunc(defs, func(d faultDef) bool { return d.name == f.Spec })
	if i < 0 {
		hint := ""
		if _, err := strconv.Atoi(f.Spec); err != nil { // no near-miss statuses: 429 is not 529
			hint = didYouMean(f.Spec, FaultNames(f.Provider))
		}
		return nil, fmt.Errorf("unknown %s fault %q%s; %s", f.Provider, f.Spec, hint, validFaults(f.Provider))
	}
	d := &defs[i]
	c := &compiled{def: d}
	for _, k := range slices.Sorted(maps.Keys(f.Params)) {
		v := f.Params[k]
		if !slices.Contains(d.params, k) {
			if len(d.params) == 0 {
				return nil, fmt.Errorf("%s:%s takes no parameters, got %s=%s", f.Provider, f.Spec, k, v)
			}
			return nil, fmt.Errorf("%s:%s takes no parameter %q; it takes: %s", f.Provider, f.Spec, k, strings.Join(d.params, ", "))
		}
		switch k {
		case ParamRetryAfter:
			dur, err := parseSeconds(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%s: %v", k, v, err)
			}
			c.args.retryAfter, c.args.hasRetryAfter = dur, true
		case ParamAfter:
			n, err := strconv.Atoi(v)
			if err != nil || n < d.minAfter || n > 1_000_000 {
				return nil, fmt.Errorf("%s=%s: write a whole number of stream events or chunks, at least %d", k, v, d.minAfter)
			}
			c.args.after, c.args.hasAfter = n, true
		case ParamReason:
			r := strings.ToUpper(v)
			if !slices.Contains(blockReasons, r) {
				return nil, fmt.Errorf("%s=%s: write one of %s", k, v, strings.Join(blockReasons, ", "))
			}
			c.args.reason = r
		}
	}
	return c, nil
}

// parseSeconds reads "2", "0.5" (seconds) or a Go duration ("1500ms").
func parseSeconds(v string) (time.Duration, error) {
	var d time.Duration
	if sec, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(sec) && !math.IsInf(sec, 0) {
		d = time.Duration(sec * float64(time.Second))
	} else if pd, err := time.ParseDuration(v); err == nil {
		d = pd
	} else {
		return 0, fmt.Errorf("write seconds (2, 0.5) or a duration (1500ms)")
	}
	if d < 0 || d > 24*time.Hour {
		return 0, fmt.Errorf("write a delay between 0 and 24h")
	}
	return d, nil
}

// build makes the reply for one call to the model of a, with the request's
// key and the sim's hold channel.
func (c *compiled) build(model, key string, hold <-chan struct{}) any {
	a := c.args
	a.model, a.key, a.hold = model, key, hold
	return c.def.build(a)
}

var blockReasons = []string{"SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY"}

// simMessage is the message of the faults the real APIs word in ways that
// depend on the request (a generic 400).
const simMessage = "invalid request (fault injected by cortexbuild sim)"

// Messages of the local servers, as they word them.
const (
	ollamaRunnerDied = "llama runner process has terminated: exit status 2"
	ollamaBusy       = "server busy, please try again.  maximum pending requests exceeded"
	vllmEngineDead   = "EngineCore encountered an issue. See stack trace (above) for the root cause."
)

func after(a args, def int) int {
	if a.hasAfter {
		return a.after
	}
	return def
}

// anthropicRetry adds the retry-after header (and retry-after-ms for a
// delay that is not whole seconds) when the fault asked for one.
func anthropicRetry(r anthropicfake.Reply, a args) anthropicfake.Reply {
	if !a.hasRetryAfter {
		return r
	}
	ms := (a.retryAfter + time.Millisecond - 1) / time.Millisecond
	r = r.WithHeader("retry-after", strconv.FormatInt(int64((ms+999)/1000), 10))
	if ms%1000 != 0 {
		r = r.WithHeader("retry-after-ms", strconv.FormatInt(int64(ms), 10))
	}
	return r
}

// openAIFaults are the faults common to the three Chat Completions
// flavours, specialised per flavour.
func openAICompatFaults(flavor openaifake.Flavor) []faultDef {
	slow := faultDef{name: "slow", help: "no first byte until the client gives up (or the sim closes)",
		build: func(a args) any { return openaifake.Reply{Hold: a.hold} }}
	html := faultDef{name: "502-html", help: "502 with a proxy's HTML page instead of a JSON error",
		build: func(args) any { return openaifake.BadGateway() }}
	bad := faultDef{name: "400", help: "400 invalid request",
		build: func(args) any { return openaifake.InvalidRequest(simMessage) }}
	midstream := func(msg string) faultDef {
		return faultDef{name: "midstream", help: "200 stream ending in an error chunk (after=2 chunks); unstreamed: 500",
			params: []string{ParamAfter},
			build: func(a args) any {
				return openaifake.Reply{MidStreamError: &openaifake.StreamError{Message: msg, Type: openaifake.TypeServer, Status: 500, AfterChunks: after(a, 2)}}
			}}
	}
	cut := faultDef{name: "cut", help: "200 stream cut before finish_reason and [DONE] (after=2 chunks); unstreamed: body cut",
		params: []string{ParamAfter}, minAfter: 1,
		build: func(a args) any { return openaifake.CutStream(after(a, 2)) }}
	switch flavor {
	case openaifake.FlavorOllama:
		return []faultDef{
			bad,
			{name: "404", help: "404 model \"x\" not found, try pulling it first",
				build: func(a args) any { return openaifake.OllamaModelNotFound(a.model) }},
			{name: "500", help: "500 api_error: " + ollamaRunnerDied,
				build: func(args) any { return openaifake.ErrorReply(500, "", "", ollamaRunnerDied) }},
			html,
			{name: "503", help: "503 " + ollamaBusy,
				build: func(args) any { return openaifake.ErrorReply(503, "", "", ollamaBusy) }},
			{name: "too-long", help: "400 the input length exceeds the context length",
				build: func(args) any { return openaifake.OllamaContextLengthExceeded() }},
			midstream(ollamaRunnerDied), cut, slow,
		}
	case openaifake.FlavorVLLM:
		return []faultDef{
			bad,
			{name: "401", help: "401 {\"error\":\"Unauthorized\"} (vLLM started with --api-key)",
				build: func(args) any {
					return openaifake.Reply{Status: 401, RawBody: `{"error":"Unauthorized"}`, RawContentType: "application/json"}
				}},
			{name: "404", help: "404 NotFoundError: the model does not exist",
				build: func(a args) any { return openaifake.VLLMModelNotFound(a.model) }},
			{name: "500", help: "500 InternalServerError",
				build: func(args) any { return openaifake.ErrorReply(500, "", "", vllmEngineDead) }},
			html,
			{name: "too-long", help: "400 BadRequestError: maximum context length is 32768 tokens",
				build: func(args) any { return openaifake.VLLMContextLengthExceeded(32768, 30720, 4096) }},
			midstream(vllmEngineDead), cut, slow,
		}
	}
	return []faultDef{
		bad,
		{name: "401", help: "401 invalid_api_key (the key is refused)",
			build: func(a args) any {
				if a.key == "" {
					return openaifake.MissingAPIKey()
				}
				return openaifake.InvalidAPIKey(a.key)
			}},
		{name: "404", help: "404 model_not_found for the requested model",
			build: func(a args) any { return openaifake.ModelNotFound(a.model) }},
		{name: "429", help: "429 rate_limit_exceeded \"try again in 2s\"; retry-after=S: that delay, and retry-after headers",
			params: []string{ParamRetryAfter},
			build: func(a args) any {
				if !a.hasRetryAfter {
					return openaifake.RateLimited(2 * time.Second)
				}
				return openaifake.RateLimited(a.retryAfter).WithRetryAfter(a.retryAfter)
			}},
		{name: "quota", help: "429 insufficient_quota (billing: waiting does not help)",
			build: func(args) any { return openaifake.InsufficientQuota() }},
		{name: "500", help: "500 server_error",
			build: func(args) any { return openaifake.ServerError() }},
		html,
		{name: "503", help: "503 the engine is currently overloaded",
			build: func(args) any { return openaifake.Overloaded() }},
		{name: "too-long", help: "400 context_length_exceeded",
			build: func(args) any { return openaifake.ContextLengthExceeded(400_000, 412_000) }},
		midstream("The server had an error while processing your request. Sorry about that!"), cut, slow,
	}
}

// catalog lists every fault of every provider, in help order.
var catalog = map[string][]faultDef{
	Anthropic: {
		{name: "400", help: "400 invalid_request_error",
			build: func(args) any { return anthropicfake.InvalidRequest(simMessage) }},
		{name: "401", help: "401 authentication_error (the key is refused)",
			build: func(args) any { return anthropicfake.AuthError() }},
		{name: "402", help: "402 billing_error (credit balance too low)",
			build: func(args) any { return anthropicfake.BillingError() }},
		{name: "403", help: "403 permission_error",
			build: func(args) any { return anthropicfake.PermissionError() }},
		{name: "404", help: "404 not_found_error for the requested model",
			build: func(a args) any { return anthropicfake.ModelNotFound(a.model) }},
		{name: "429", help: "429 rate_limit_error; retry-after=S adds the retry-after header",
			params: []string{ParamRetryAfter},
			build:  func(a args) any { return anthropicRetry(anthropicfake.RateLimited(""), a) }},
		{name: "500", help: "500 api_error",
			build: func(args) any { return anthropicfake.APIError() }},
		{name: "502-html", help: "502 with a proxy's HTML page instead of a JSON error",
			build: func(args) any { return anthropicfake.BadGateway() }},
		{name: "504", help: "504 timeout_error",
			build: func(args) any { return anthropicfake.TimeoutError() }},
		{name: "529", help: "529 overloaded_error; retry-after=S adds the retry-after header",
			params: []string{ParamRetryAfter},
			build:  func(a args) any { return anthropicRetry(anthropicfake.Overloaded(), a) }},
		{name: "too-long", help: "400 prompt is too long: 215000 tokens > 200000 maximum",
			build: func(args) any { return anthropicfake.PromptTooLong(215_000, 200_000) }},
		{name: "spend-limit", help: "429 enforced_spend_limit_reached (no retry-after: waiting does not help)",
			build: func(args) any { return anthropicfake.SpendLimitReached() }},
		{name: "midstream", help: "200 stream ending in an overloaded_error event (after=4 events); unstreamed: 529",
			params: []string{ParamAfter},
			build:  func(a args) any { return anthropicfake.OverloadedMidStream(after(a, 4)) }},
		{name: "cut", help: "200 stream cut before message_stop (after=4 events); unstreamed: body cut",
			params: []string{ParamAfter}, minAfter: 1,
			build: func(a args) any { return anthropicfake.CutStream(after(a, 4)) }},
		{name: "slow", help: "no first byte until the client gives up (or the sim closes)",
			build: func(a args) any { return anthropicfake.Reply{Hold: a.hold} }},
	},
	OpenAI: openAICompatFaults(openaifake.FlavorOpenAI),
	Ollama: openAICompatFaults(openaifake.FlavorOllama),
	VLLM:   openAICompatFaults(openaifake.FlavorVLLM),
	Gemini: {
		{name: "400", help: "400 INVALID_ARGUMENT",
			build: func(args) any { return geminifake.InvalidArgument("Request contains an invalid argument.") }},
		{name: "bad-key", help: "400 INVALID_ARGUMENT API key not valid (reason API_KEY_INVALID)",
			build: func(args) any { return geminifake.APIKeyInvalid() }},
		{name: "403", help: "403 PERMISSION_DENIED",
			build: func(args) any { return geminifake.PermissionDenied() }},
		{name: "404", help: "404 NOT_FOUND for the requested model",
			build: func(a args) any { return geminifake.ModelNotFound(a.model) }},
		{name: "429", help: "429 RESOURCE_EXHAUSTED per-minute quota; retry-after=S adds RetryInfo",
			params: []string{ParamRetryAfter},
			build:  func(a args) any { return geminifake.RateLimited(a.model, a.retryAfter) }},
		{name: "daily-quota", help: "429 RESOURCE_EXHAUSTED per-day quota (does not clear); retry-after=S adds RetryInfo",
			params: []string{ParamRetryAfter},
			build:  func(a args) any { return geminifake.DailyQuotaExceeded(a.model, a.retryAfter) }},
		{name: "too-long", help: "400 INVALID_ARGUMENT the input token count exceeds the maximum",
			build: func(args) any { return geminifake.ContextOverflow(1_100_000, 1_048_576) }},
		{name: "500", help: "500 INTERNAL",
			build: func(args) any { return geminifake.Internal() }},
		{name: "502-html", help: "502 with Google's front-end HTML page",
			build: func(args) any { return geminifake.BadGateway() }},
		{name: "503", help: "503 UNAVAILABLE the model is overloaded",
			build: func(args) any { return geminifake.Unavailable() }},
		{name: "504", help: "504 DEADLINE_EXCEEDED",
			build: func(args) any { return geminifake.DeadlineExceeded() }},
		{name: "midstream", help: "200 stream ending in a 503 UNAVAILABLE chunk (after=1 chunk); unstreamed: 503",
			params: []string{ParamAfter},
			build:  func(a args) any { return geminifake.OverloadedMidStream(after(a, 1)) }},
		{name: "cut", help: "200 stream cut without its terminating chunk (after=1 chunk); unstreamed: body cut",
			params: []string{ParamAfter}, minAfter: 1,
			build: func(a args) any { return geminifake.CutStream(after(a, 1)) }},
		{name: "blocked", help: "200 with no candidates, promptFeedback.blockReason (reason=SAFETY)",
			params: []string{ParamReason},
			build: func(a args) any {
				if a.reason == "" {
					return geminifake.BlockedPrompt("SAFETY")
				}
				return geminifake.BlockedPrompt(a.reason)
			}},
		{name: "slow", help: "no first byte until the client gives up (or the sim closes)",
			build: func(a args) any { return geminifake.Reply{Hold: a.hold} }},
	},
}

// requestModel reads "model" from a JSON body ("" when absent).
func requestModel(body []byte) string {
	var v struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Model
}
