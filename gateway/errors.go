package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// ErrShuttingDown is the cause of the context of every request still in
// flight when a [Server]'s shutdown deadline passes.
var ErrShuttingDown = errors.New("the gateway is shutting down")

// class is what went wrong, before it is put in a protocol's error shape.
// docs/gateway.md has the table of statuses and types per protocol.
type class uint8

const (
	classInternal    class = iota // a bug or an unexpected failure
	classAuth                     // no key, a wrong or a revoked key
	classPermission               // the key may not do this; the locality gate or the critic gate refused
	classPaused                   // the project is paused (refused provider credentials)
	classBadRequest               // the request is wrong
	classNotFound                 // an unknown model name or route
	classMethod                   // the route exists with another method
	classTooLarge                 // the body is over the limit
	classContext                  // the prompt does not fit the context window
	classRateLimit                // the provider rate-limited the call
	classBudget                   // a budget or an exhausted quota refused the call
	classOverloaded               // the provider is overloaded
	classUpstream                 // the provider failed or could not be reached
	classTimeout                  // the provider timed out
	classUnavailable              // no provider can serve the call
	classShutdown                 // the gateway is shutting down
	classMisdirected              // the Host header is not one the gateway answers to
	classMediaType                // the body is not JSON by its Content-Type
	classBodyTimeout              // the body did not arrive within gateway.body_timeout
	classBrowser                  // a web page of another site called the gateway
)

// failure is an error as the gateway reports it.
type failure struct {
	class class
	msg   string
	// param is the request field at fault (OpenAI's error.param).
	param string
	// code overrides OpenAI's error.code.
	code string
	// errorCode is Anthropic's error.details.error_code, which the official
	// SDKs branch on.
	errorCode string
	// typ overrides OpenAI's error.type (a rate limit's "tokens").
	typ string
	// retryAfter is sent as retry-after and retry-after-ms when positive.
	retryAfter time.Duration
	// retry, when set, is sent as x-should-retry, which both official SDK
	// families honour over the status.
	retry *bool
	// prompt and limit are the token counts of a context-window overflow,
	// when the provider said them.
	prompt, limit int64
}

// openAIMessage is the message in OpenAI's words.
func (f *failure) openAIMessage() string {
	if f.class == classContext {
		if f.prompt > 0 {
			return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", f.limit, f.prompt)
		}
		return "This model's maximum context length was exceeded: " + f.msg
	}
	return f.msg
}

// anthropicMessage is the message in Anthropic's words.
func (f *failure) anthropicMessage() string {
	if f.class == classContext {
		if f.prompt > 0 {
			return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", f.prompt, f.limit)
		}
		return "prompt is too long for the model's context window: " + f.msg
	}
	return f.msg
}

func (f *failure) Error() string { return f.msg }

var (
	yes = ptr(true)
	no  = ptr(false)
)

func ptr[T any](v T) *T { return &v }

func fail(c class, format string, args ...any) *failure {
	return &failure{class: c, msg: fmt.Sprintf(format, args...)}
}

// shape is how one protocol reports a class.
type shape struct {
	status int
	typ    string
	code   string // OpenAI only
	retry  *bool
}

// openAIShapes and anthropicShapes are the error mapping of docs/gateway.md.
// CortexBuild's own refusals of a call (the project paused, a key's scope,
// the locality and critic gates) are 400s: the hosts that users run show a
// 400's message as it is, but answer a 401 or 403 with their own login
// advice ("Not logged in · Please run /login", "Authentication failed …
// check your API key") and a 5xx with "try again in a moment".
var openAIShapes = map[class]shape{
	classInternal:    {500, "server_error", "internal_error", nil},
	classAuth:        {401, "invalid_request_error", "invalid_api_key", no},
	classPermission:  {400, "invalid_request_error", "permission_denied", no},
	classPaused:      {400, "invalid_request_error", "project_paused", no},
	classBadRequest:  {400, "invalid_request_error", "", no},
	classNotFound:    {404, "invalid_request_error", "not_found", no},
	classMethod:      {405, "invalid_request_error", "method_not_allowed", no},
	classTooLarge:    {413, "invalid_request_error", "request_too_large", no},
	classContext:     {400, "invalid_request_error", "context_length_exceeded", no},
	classRateLimit:   {429, "requests", "rate_limit_exceeded", nil},
	classBudget:      {429, "insufficient_quota", "insufficient_quota", no},
	classOverloaded:  {503, "server_error", "overloaded", nil},
	classUpstream:    {502, "server_error", "upstream_error", nil},
	classTimeout:     {504, "server_error", "timeout", nil},
	classUnavailable: {503, "server_error", "no_provider", nil},
	classShutdown:    {503, "server_error", "shutting_down", yes},
	classMisdirected: {421, "invalid_request_error", "misdirected_request", no},
	classMediaType:   {415, "invalid_request_error", "unsupported_media_type", no},
	classBodyTimeout: {408, "invalid_request_error", "request_timeout", no},
	classBrowser:     {403, "invalid_request_error", "permission_denied", no},
}

var anthropicShapes = map[class]shape{
	classInternal:    {500, "api_error", "", nil},
	classAuth:        {401, "authentication_error", "", no},
	classPermission:  {400, "permission_error", "", no},
	classPaused:      {400, "permission_error", "", no},
	classBadRequest:  {400, "invalid_request_error", "", no},
	classNotFound:    {404, "not_found_error", "", no},
	classMethod:      {405, "invalid_request_error", "", no},
	classTooLarge:    {413, "request_too_large", "", no},
	classContext:     {400, "invalid_request_error", "", no},
	classRateLimit:   {429, "rate_limit_error", "", nil},
	classBudget:      {402, "billing_error", "", no},
	classOverloaded:  {529, "overloaded_error", "", nil},
	classUpstream:    {502, "api_error", "", nil},
	classTimeout:     {504, "timeout_error", "", nil},
	classUnavailable: {503, "api_error", "", nil},
	classShutdown:    {529, "overloaded_error", "", yes},
	classMisdirected: {421, "invalid_request_error", "", no},
	classMediaType:   {415, "invalid_request_error", "", no},
	classBodyTimeout: {408, "invalid_request_error", "", no},
	classBrowser:     {403, "permission_error", "", no},
}

// errorHeaders sets retry-after, retry-after-ms and x-should-retry.
func errorHeaders(h http.Header, f *failure, s shape) {
	if f.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(f.retryAfter.Seconds())), 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(f.retryAfter.Milliseconds(), 10))
	}
	retry := s.retry
	if f.retry != nil {
		retry = f.retry
	}
	if retry != nil {
		h.Set("X-Should-Retry", strconv.FormatBool(*retry))
	}
}

// classify turns what the orchestrator (or the gateway itself) returned
// into a failure. ctx is the request's context: a call cancelled because
// the server is shutting down is reported as such.
func classify(ctx context.Context, err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return &failure{class: classBadRequest, msg: fe.Error(), param: fe.Param}
	}
	if errors.Is(context.Cause(ctx), ErrShuttingDown) {
		return fail(classShutdown, "the gateway is shutting down; the call was cancelled before it finished: retry it")
	}
	msg := err.Error()
	var ee *orchestrator.EstimateError
	switch {
	case errors.Is(err, orchestrator.ErrPaused):
		return pausedFailure("")
	case errors.As(err, &ee):
		if ee.NeedsApproval {
			msg += "; approval cannot be given through the gateway: raise agents." + ee.Agent + ".budget or run the call with 'cortexbuild invoke'"
		}
		return &failure{class: classBudget, msg: "CortexBuild budget: " + msg, code: "budget_exceeded"}
	case errors.Is(err, ledger.ErrOverBudget), errors.Is(err, ledger.ErrPaused):
		return &failure{class: classBudget, msg: "CortexBuild budget: " + msg, code: "budget_exceeded"}
	case errors.Is(err, ledger.ErrUnavailable):
		return &failure{class: classUnavailable, msg: msg, code: "ledger_unavailable"}
	case errors.Is(err, orchestrator.ErrUnpriced):
		return &failure{class: classUnavailable, msg: msg, code: "unpriced", retry: no}
	case errors.Is(err, locality.ErrRefused):
		return &failure{class: classPermission, msg: msg, code: "locality_refused"}
	case errors.Is(err, orchestrator.ErrNoIndependentModel):
		return &failure{class: classPermission, msg: msg, code: "critic_gate"}
	case errors.Is(err, orchestrator.ErrImageURL):
		return &failure{class: classBadRequest, msg: msg, code: "image_url_refused"}
	case errors.Is(err, orchestrator.ErrNoCandidate):
		return &failure{class: classUnavailable, msg: msg, code: "no_provider", retry: no}
	}
	var we *orchestrator.WaitError
	if errors.As(err, &we) {
		// Every candidate is waiting: the caller gets the rate limit,
		// overload or breaker that frees up first, and how long that is.
		switch we.Reason {
		case orchestrator.WaitRateLimit:
			return &failure{class: classRateLimit, msg: msg, typ: limitType(err), retryAfter: we.RetryAfter}
		case orchestrator.WaitOverloaded:
			return &failure{class: classOverloaded, msg: msg, retryAfter: we.RetryAfter}
		default:
			return &failure{class: classUnavailable, msg: msg, retryAfter: we.RetryAfter}
		}
	}
	switch provider.KindOf(err) {
	case provider.KindRateLimit:
		return &failure{class: classRateLimit, msg: msg, typ: limitType(err), retryAfter: provider.RetryAfterOf(err)}
	case provider.KindQuotaExhausted:
		return &failure{class: classBudget, msg: msg}
	case provider.KindOverloaded:
		return &failure{class: classOverloaded, msg: msg, retryAfter: provider.RetryAfterOf(err)}
	case provider.KindServer, provider.KindNetwork:
		return &failure{class: classUpstream, msg: msg}
	case provider.KindTimeout:
		return &failure{class: classTimeout, msg: msg}
	case provider.KindBadRequest:
		return &failure{class: classBadRequest, msg: msg, param: paramOf(err)}
	case provider.KindCapabilityMissing:
		return &failure{class: classBadRequest, msg: msg, code: "capability_missing"}
	case provider.KindContextWindowExceeded:
		return contextFailure(err)
	case provider.KindAuth:
		// The provider refused CortexBuild's own credentials: the
		// orchestrator paused the project. A 401 would tell the client
		// that its key is wrong, which it is not.
		prov := ""
		if pe := (*provider.Error)(nil); errors.As(err, &pe) {
			prov = pe.Provider
		}
		return pausedFailure(prov)
	case provider.KindCanceled:
		return &failure{class: classShutdown, msg: "the call was cancelled", retry: yes}
	}
	var oe *orchestrator.Error
	if errors.As(err, &oe) {
		return &failure{class: classUnavailable, msg: msg}
	}
	return &failure{class: classInternal, msg: msg}
}

// pausedFailure is the refusal of a call while the project is paused
// because prov ("" when not known) refused CortexBuild's own credentials.
// It names neither the provider's words nor its status: a host reads
// "invalid x-api-key" or "authentication_error" in a message as its own
// key being wrong and tells its user to log in again.
func pausedFailure(prov string) *failure {
	who := "a provider"
	if prov != "" {
		who = "provider " + prov
	}
	return fail(classPaused, "CortexBuild paused the project: %s refused the credentials CortexBuild holds for it (not the key of this client); fix them, then run 'cortexbuild project resume' ('cortexbuild project status' says why)", who)
}

func paramOf(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Diagnostic.Param
	}
	return ""
}

// limitType is OpenAI's error.type for a rate limit: "tokens" when the
// provider said a token limit was hit (OpenAI's own type; a token count
// in Anthropic's or Gemini's message), else "requests".
func limitType(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		switch d := pe.Diagnostic; {
		case d.Type == "tokens" || d.Type == "requests":
			return d.Type
		case strings.Contains(strings.ToLower(d.Message+" "+d.Code), "token"):
			return "tokens"
		}
	}
	return "requests"
}

var integers = regexp.MustCompile(`\d[\d,]*`)

// contextFailure words a context-window overflow the way the caller's
// vendor does, so that clients which recover by wording (compacting the
// conversation) recognise it whichever provider refused the prompt. The
// provider's message holds the prompt size and the limit in some order;
// the larger number is the prompt.
func contextFailure(err error) *failure {
	f := &failure{class: classContext, msg: err.Error()}
	var pe *provider.Error
	msg := err.Error()
	if errors.As(err, &pe) && pe.Diagnostic.Message != "" {
		msg = pe.Diagnostic.Message
	}
	var nums []int64
	for _, s := range integers.FindAllString(msg, -1) {
		n, perr := strconv.ParseInt(stripCommas(s), 10, 64)
		if perr == nil && n >= 1000 {
			nums = append(nums, n)
		}
	}
	if len(nums) >= 2 {
		a, b := nums[0], nums[1]
		f.prompt, f.limit = max(a, b), min(a, b)
	}
	return f
}

func stripCommas(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != ',' {
			out = append(out, s[i])
		}
	}
	return string(out)
}
