package openaifake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// OpenAI error types (error.type of an error body).
const (
	TypeInvalidRequest    = "invalid_request_error"
	TypeServer            = "server_error"
	TypeInsufficientQuota = "insufficient_quota"
	// TypeTokens and TypeRequests are the error.type of a 429 for an
	// exhausted tokens-per-minute or requests-per-minute bucket.
	TypeTokens   = "tokens"
	TypeRequests = "requests"
)

// OpenAI error codes (error.code of an error body).
const (
	CodeInvalidAPIKey         = "invalid_api_key"
	CodeContextLengthExceeded = "context_length_exceeded"
	CodeRateLimitExceeded     = "rate_limit_exceeded"
	CodeInsufficientQuota     = "insufficient_quota"
	CodeUnsupportedParameter  = "unsupported_parameter"
	CodeUnsupportedValue      = "unsupported_value"
	CodeModelNotFound         = "model_not_found"
	CodeMissingRequiredParam  = "missing_required_parameter"
	CodeEmptyArray            = "empty_array"
)

const (
	messageServerError         = "The server had an error while processing your request. Sorry about that!"
	messageOverloaded          = "The engine is currently overloaded, please try again later"
	messageInsufficientQuota   = "You exceeded your current quota, please check your plan and billing details."
	messageMaxTokensNotAllowed = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
)

// Ollama error types (derived from the HTTP status by the real server).
const (
	OllamaTypeInvalidRequest = "invalid_request_error"
	OllamaTypeNotFound       = "not_found_error"
	OllamaTypeAPI            = "api_error"
)

// ErrorReply is a fault with the given status, OpenAI error type, code and
// message.
func ErrorReply(status int, errType, code, message string) Reply {
	return Reply{Status: status, ErrorType: errType, ErrorCode: code, ErrorMessage: message}
}

// InvalidRequest is a 400 invalid_request_error with the given message
// (param and code null).
func InvalidRequest(message string) Reply {
	return ErrorReply(400, TypeInvalidRequest, "", message)
}

// ContextLengthExceeded is OpenAI's 400 for a prompt over the context
// window: code context_length_exceeded, param "messages", "This model's
// maximum context length is <maximum> tokens. However, your messages
// resulted in <tokens> tokens. Please reduce the length of the messages."
func ContextLengthExceeded(maximum, tokens int) Reply {
	r := ErrorReply(400, TypeInvalidRequest, CodeContextLengthExceeded, fmt.Sprintf(
		"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
		maximum, tokens))
	r.ErrorParam = "messages"
	return r
}

// VLLMContextLengthExceeded is vLLM's 400 BadRequestError for a request
// over max_model_len: "This model's maximum context length is <maximum>
// tokens. However, you requested <messages+completion> tokens (<messages>
// in the messages, <completion> in the completion). Please reduce the
// length of the messages or completion." Its code is the integer 400, or
// "context_length_exceeded" with [ErrorStyleVLLMStringCode].
func VLLMContextLengthExceeded(maximum, messages, completion int) Reply {
	return ErrorReply(400, "", CodeContextLengthExceeded, fmt.Sprintf(
		"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
		maximum, messages+completion, messages, completion))
}

// OllamaContextLengthExceeded is the 400 some Ollama builds send instead of
// truncating an oversized prompt.
func OllamaContextLengthExceeded() Reply {
	return ErrorReply(400, "", "", "the input length exceeds the context length")
}

// MaxTokensUnsupported is OpenAI's 400 for max_tokens sent to a GPT-5 or
// o-series model (code unsupported_parameter, param "max_tokens"). The
// OpenAI flavour sends it by itself for such requests.
func MaxTokensUnsupported() Reply {
	r := ErrorReply(400, TypeInvalidRequest, CodeUnsupportedParameter, messageMaxTokensNotAllowed)
	r.ErrorParam = "max_tokens"
	return r
}

// InvalidAPIKey is OpenAI's 401 invalid_api_key for key, which the message
// shows masked ([MaskKey]), never whole.
func InvalidAPIKey(key string) Reply {
	return ErrorReply(401, TypeInvalidRequest, CodeInvalidAPIKey, fmt.Sprintf(
		"Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", MaskKey(key)))
}

// MissingAPIKey is OpenAI's 401 for a request without Authorization.
func MissingAPIKey() Reply {
	return ErrorReply(401, TypeInvalidRequest, "", "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.")
}

// MaskKey shows a key the way OpenAI's 401 message does: a few leading and
// trailing characters around "***" (e.g. "sk-ab***yz"). Short keys show
// less; a key of 6 characters or fewer shows nothing.
func MaskKey(key string) string {
	n := len(key)
	if n <= 6 {
		return "***"
	}
	head, tail := min(5, n/4), min(2, n/6)
	return key[:head] + "***" + key[n-tail:]
}

// ModelNotFound is OpenAI's 404 for an unknown model (code
// model_not_found).
func ModelNotFound(model string) Reply {
	return ErrorReply(404, TypeInvalidRequest, CodeModelNotFound, fmt.Sprintf(
		"The model `%s` does not exist or you do not have access to it.", model))
}

// OllamaModelNotFound is Ollama's 404 not_found_error for a model that is
// not pulled: `model "x" not found, try pulling it first`.
func OllamaModelNotFound(model string) Reply {
	return ErrorReply(404, "", "", fmt.Sprintf("model %q not found, try pulling it first", model))
}

// VLLMModelNotFound is vLLM's 404 NotFoundError for a model it does not
// serve: "The model `x` does not exist." (param "model").
func VLLMModelNotFound(model string) Reply {
	r := ErrorReply(404, "", "", fmt.Sprintf("The model `%s` does not exist.", model))
	r.ErrorParam = "model"
	return r
}

// RateLimited is OpenAI's 429 for an exhausted tokens-per-minute bucket:
// type "tokens", code rate_limit_exceeded, "Rate limit reached for
// gpt-5-mini in organization org-x on tokens per min (TPM): Limit 30000,
// Used 30000, Requested 1200. Please try again in <tryAgainIn>." On the
// OpenAI flavour the response reports x-ratelimit-remaining-tokens 0 and
// x-ratelimit-reset-tokens tryAgainIn. Add [Reply.WithRetryAfter] for the
// retry-after headers (the real API often sends none).
func RateLimited(tryAgainIn time.Duration) Reply {
	r := ErrorReply(429, TypeTokens, CodeRateLimitExceeded, fmt.Sprintf(
		"Rate limit reached for gpt-5-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in %s.",
		FormatDuration(tryAgainIn)))
	r.RateLimitReset = tryAgainIn
	return r
}

// RateLimitedRequests is [RateLimited] for the requests-per-minute bucket
// (type "requests").
func RateLimitedRequests(tryAgainIn time.Duration) Reply {
	r := ErrorReply(429, TypeRequests, CodeRateLimitExceeded, fmt.Sprintf(
		"Rate limit reached for gpt-5-mini in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in %s.",
		FormatDuration(tryAgainIn)))
	r.RateLimitReset = tryAgainIn
	return r
}

// InsufficientQuota is OpenAI's 429 insufficient_quota (type and code):
// billing, not load, so retrying does not help.
func InsufficientQuota() Reply {
	return ErrorReply(429, TypeInsufficientQuota, CodeInsufficientQuota, messageInsufficientQuota)
}

// ServerError is OpenAI's 500 server_error.
func ServerError() Reply {
	return ErrorReply(500, TypeServer, "", messageServerError)
}

// Overloaded is OpenAI's 503 "The engine is currently overloaded, please
// try again later" (type server_error).
func Overloaded() Reply {
	return ErrorReply(503, TypeServer, "", messageOverloaded)
}

// BadGatewayHTML is the page a proxy in front of the server (Cloudflare, in
// OpenAI's case) sends with a 502.
const BadGatewayHTML = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"

// BadGateway is a 502 whose body is a proxy's HTML page, not an error JSON:
// the SDK's *openai.Error then has empty Type and Code.
func BadGateway() Reply {
	return Reply{Status: 502, RawBody: BadGatewayHTML, RawContentType: "text/html"}
}

// ServerErrorMidStream is a streaming success that fails with an error
// chunk (OpenAI: type server_error, code null) after afterChunks chunks,
// while the HTTP status stays 200. A non-streaming request gets a 500.
func ServerErrorMidStream(afterChunks int) Reply {
	return Reply{MidStreamError: &StreamError{Message: messageServerError, Type: TypeServer, AfterChunks: afterChunks}}
}

// CutStream is a streaming success whose connection is closed abruptly
// after afterChunks chunks.
func CutStream(afterChunks int) Reply {
	return Reply{CutAfterChunks: afterChunks}
}

// apiError is an error response before it is shaped for a flavour.
type apiError struct {
	status  int
	typ     string
	message string
	param   string
	code    string
}

func (r *Reply) apiError() apiError {
	status := r.faultStatus()
	typ := r.ErrorType
	if typ == "" {
		typ = openAITypeForStatus(status)
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = defaultMessage(status)
	}
	return apiError{status: status, typ: typ, message: msg, param: r.ErrorParam, code: r.ErrorCode}
}

// openAITypeForStatus is the OpenAI error.type used when a fault names only
// a status.
func openAITypeForStatus(status int) string {
	if status >= 500 {
		return TypeServer
	}
	return TypeInvalidRequest
}

func defaultMessage(status int) string {
	switch {
	case status == 503:
		return messageOverloaded
	case status >= 500:
		return messageServerError
	case status == 429:
		return "Rate limit reached. Please try again later."
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "Error"
}

// ollamaType is the error.type Ollama derives from a status.
func ollamaType(status int) string {
	switch status {
	case 400:
		return OllamaTypeInvalidRequest
	case 404:
		return OllamaTypeNotFound
	}
	return OllamaTypeAPI
}

// vllmType is the error.type vLLM uses for a status: the HTTP reason
// phrase in CamelCase with "Error" appended ("BadRequestError",
// "NotFoundError", "InternalServerError").
func vllmType(status int) string {
	text := http.StatusText(status)
	if text == "" {
		return "InternalServerError"
	}
	var b strings.Builder
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == '-' || r == '\'' }) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	s := b.String()
	if !strings.HasSuffix(s, "Error") {
		s += "Error"
	}
	return s
}

// nullable is a JSON string, or null when empty.
type nullable string

func (n nullable) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(n))
}

type openAIErrorDetail struct {
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Param   nullable `json:"param"`
	Code    nullable `json:"code"`
}

type vllmErrorDetail struct {
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Param   nullable `json:"param"`
	Code    any      `json:"code"`
}

type vllmLegacyError struct {
	Object  string   `json:"object"`
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Param   nullable `json:"param"`
	Code    any      `json:"code"`
}

// errorBody shapes e for the flavour and error style (the content-type is
// always application/json).
func (s *Server) errorBody(e apiError) []byte {
	if s.cfg.errorStyle == ErrorStyleBareString {
		return marshal(struct {
			Error string `json:"error"`
		}{e.message}, false)
	}
	switch s.cfg.flavor {
	case FlavorOllama:
		return append(marshal(struct {
			Error openAIErrorDetail `json:"error"`
		}{openAIErrorDetail{Message: e.message, Type: ollamaType(e.status)}}, true), '\n')
	case FlavorVLLM:
		code := any(e.status)
		if s.cfg.errorStyle == ErrorStyleVLLMStringCode && e.code != "" {
			code = e.code
		}
		if s.cfg.errorStyle == ErrorStyleVLLMLegacy {
			return marshal(vllmLegacyError{"error", e.message, vllmType(e.status), nullable(e.param), code}, false)
		}
		return marshal(struct {
			Error vllmErrorDetail `json:"error"`
		}{vllmErrorDetail{e.message, vllmType(e.status), nullable(e.param), code}}, false)
	}
	return marshalIndent(struct {
		Error openAIErrorDetail `json:"error"`
	}{openAIErrorDetail{e.message, e.typ, nullable(e.param), nullable(e.code)}}, "    ")
}

// streamErrorData is the data of a mid-stream error chunk.
func (s *Server) streamErrorData(me *StreamError) []byte {
	status := cmpOr(me.Status, 500)
	msg := cmpOr(me.Message, defaultMessage(status))
	if s.cfg.errorStyle == ErrorStyleBareString {
		return marshal(struct {
			Error string `json:"error"`
		}{msg}, false)
	}
	switch s.cfg.flavor {
	case FlavorOllama:
		return marshal(struct {
			Error openAIErrorDetail `json:"error"`
		}{openAIErrorDetail{Message: msg, Type: OllamaTypeAPI}}, true)
	case FlavorVLLM:
		// vLLM writes it with Python's json.dumps: spaces after ':' and ','.
		return []byte(fakekit.SpacedJSON(marshal(struct {
			Error vllmErrorDetail `json:"error"`
		}{vllmErrorDetail{msg, vllmType(status), "", status}}, false)))
	}
	return marshal(struct {
		Error openAIErrorDetail `json:"error"`
	}{openAIErrorDetail{msg, cmpOr(me.Type, TypeServer), "", nullable(me.Code)}}, false)
}

// marshal encodes v compactly; escapeHTML escapes <, > and & as Go's
// encoding/json does by default (Ollama), otherwise they stay literal.
func marshal(v any, escapeHTML bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		panic("openaifake: marshal: " + err.Error()) // only fixed wire types are encoded
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// marshalIndent encodes v indented, with a final newline, as OpenAI's API
// answers non-streaming requests.
func marshalIndent(v any, indent string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		panic("openaifake: marshal: " + err.Error())
	}
	return buf.Bytes()
}

// retryAfterHeaders sets retry-after (seconds, rounded up) and
// retry-after-ms for d.
func retryAfterHeaders(h http.Header, d time.Duration) {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	h.Set("retry-after", strconv.FormatInt((ms+999)/1000, 10))
	h.Set("retry-after-ms", strconv.FormatInt(ms, 10))
}
