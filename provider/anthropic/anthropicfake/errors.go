package anthropicfake

import (
	"fmt"
	"strconv"
)

// Error types of the Anthropic API (error.type in an error body).
const (
	TypeInvalidRequest  = "invalid_request_error"
	TypeAuthentication  = "authentication_error"
	TypeBilling         = "billing_error"
	TypePermission      = "permission_error"
	TypeNotFound        = "not_found_error"
	TypeConflict        = "conflict_error"
	TypeRequestTooLarge = "request_too_large"
	TypeRateLimit       = "rate_limit_error"
	TypeAPI             = "api_error"
	TypeTimeout         = "timeout_error"
	TypeOverloaded      = "overloaded_error"
)

// ErrorCodeEnforcedSpendLimitReached is the error.details.error_code of a
// 429 sent when the organisation crossed the spend limit of its API tier.
// Retrying does not help, and the response carries no retry-after.
const ErrorCodeEnforcedSpendLimitReached = "enforced_spend_limit_reached"

// StatusOverloaded is the non-standard HTTP status of overloaded_error.
const StatusOverloaded = 529

var typeStatus = map[string]int{
	TypeInvalidRequest:  400,
	TypeAuthentication:  401,
	TypeBilling:         402,
	TypePermission:      403,
	TypeNotFound:        404,
	TypeConflict:        409,
	TypeRequestTooLarge: 413,
	TypeRateLimit:       429,
	TypeAPI:             500,
	TypeTimeout:         504,
	TypeOverloaded:      StatusOverloaded,
}

// StatusForType is the HTTP status the real API uses for an error type
// (500 for an unknown type).
func StatusForType(errType string) int {
	if s, ok := typeStatus[errType]; ok {
		return s
	}
	return 500
}

// TypeForStatus is the error type the real API uses for an HTTP status
// (api_error for a status it has no specific type for, such as 502 or 503).
func TypeForStatus(status int) string {
	for t, s := range typeStatus {
		if s == status {
			return t
		}
	}
	return TypeAPI
}

// ErrorReply is a fault with the given status, error type and message.
func ErrorReply(status int, errType, message string) Reply {
	return Reply{Status: status, ErrorType: errType, ErrorMessage: message}
}

// InvalidRequest is a 400 invalid_request_error with the given message.
func InvalidRequest(message string) Reply {
	return ErrorReply(400, TypeInvalidRequest, message)
}

// PromptTooLong is the 400 the real API sends when the prompt exceeds the
// context window: "prompt is too long: N tokens > M maximum".
func PromptTooLong(tokens, maximum int) Reply {
	return InvalidRequest(fmt.Sprintf("prompt is too long: %d tokens > %d maximum", tokens, maximum))
}

// AuthError is a 401 authentication_error ("invalid x-api-key").
func AuthError() Reply {
	return ErrorReply(401, TypeAuthentication, "invalid x-api-key")
}

// BillingError is a 402 billing_error.
func BillingError() Reply {
	return ErrorReply(402, TypeBilling, "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
}

// PermissionError is a 403 permission_error.
func PermissionError() Reply {
	return ErrorReply(403, TypePermission, "Your API key does not have permission to use the specified resource.")
}

// NotFound is a 404 not_found_error ("Not Found").
func NotFound() Reply {
	return ErrorReply(404, TypeNotFound, "Not Found")
}

// ModelNotFound is the 404 not_found_error for an unknown model
// ("model: <id>").
func ModelNotFound(model string) Reply {
	return ErrorReply(404, TypeNotFound, "model: "+model)
}

// Conflict is a 409 conflict_error (the SDK retries it).
func Conflict() Reply {
	return ErrorReply(409, TypeConflict, "Conflict")
}

// RequestTooLarge is a 413 request_too_large.
func RequestTooLarge() Reply {
	return ErrorReply(413, TypeRequestTooLarge, "Request exceeds the maximum allowed number of bytes. The maximum request size is 32 MB.")
}

// RateLimited is a 429 rate_limit_error. A non-empty retryAfter is sent as
// the retry-after header (seconds, or an HTTP-date).
func RateLimited(retryAfter string) Reply {
	r := ErrorReply(429, TypeRateLimit, "Number of requests has exceeded your per-minute rate limit (https://docs.claude.com/en/api/rate-limits); see the response headers for current usage. Please try again later.")
	if retryAfter != "" {
		r = r.WithHeader("retry-after", retryAfter)
	}
	return r
}

// RateLimitedMs is [RateLimited] with both retry-after (whole seconds,
// rounded up) and retry-after-ms.
func RateLimitedMs(ms int) Reply {
	return RateLimited(strconv.Itoa((ms+999)/1000)).WithHeader("retry-after-ms", strconv.Itoa(ms))
}

// SpendLimitReached is the 429 rate_limit_error with error.details.error_code
// "enforced_spend_limit_reached" and no retry-after: waiting does not help.
func SpendLimitReached() Reply {
	r := ErrorReply(429, TypeRateLimit, "You have reached your specified API usage limits. You will regain access on the first day of next month at 00:00 UTC.")
	r.ErrorCode = ErrorCodeEnforcedSpendLimitReached
	return r
}

// APIError is a 500 api_error.
func APIError() Reply {
	return ErrorReply(500, TypeAPI, "Internal server error")
}

// TimeoutError is a 504 timeout_error.
func TimeoutError() Reply {
	return ErrorReply(504, TypeTimeout, "Request timed out")
}

// Overloaded is a 529 overloaded_error ("Overloaded").
func Overloaded() Reply {
	return ErrorReply(StatusOverloaded, TypeOverloaded, "Overloaded")
}

// BadGatewayHTML is the page a proxy in front of the API (Cloudflare) sends
// with a 502.
const BadGatewayHTML = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"

// BadGateway is a 502 whose body is a proxy's HTML page, not an Anthropic
// error body: the SDK's *anthropic.Error then has an empty Type().
func BadGateway() Reply {
	return Reply{Status: 502, RawBody: BadGatewayHTML, RawContentType: "text/html"}
}

// OverloadedMidStream is a streaming success that fails with an
// `event: error` overloaded_error after afterEvents events, while the HTTP
// status stays 200. (A non-streaming request gets a 529 instead.)
func OverloadedMidStream(afterEvents int) Reply {
	return Reply{MidStreamError: &StreamError{Type: TypeOverloaded, Message: "Overloaded", AfterEvents: afterEvents}}
}

// CutStream is a streaming success whose connection is closed abruptly
// after afterEvents events.
func CutStream(afterEvents int) Reply {
	return Reply{CutAfterEvents: afterEvents}
}

// errorBody is the wire shape of an error response.
type errorBody struct {
	Type      string      `json:"type"`
	Error     errorDetail `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

type errorDetail struct {
	Type    string        `json:"type"`
	Message string        `json:"message"`
	Details *errorDetails `json:"details,omitempty"`
}

type errorDetails struct {
	ErrorCode string `json:"error_code"`
}

func newErrorBody(errType, message, code, requestID string) errorBody {
	b := errorBody{Type: "error", Error: errorDetail{Type: errType, Message: message}, RequestID: requestID}
	if code != "" {
		b.Error.Details = &errorDetails{ErrorCode: code}
	}
	return b
}
