package geminifake

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// google.rpc.Code names used as error.status.
const (
	StatusInvalidArgument    = "INVALID_ARGUMENT"
	StatusFailedPrecondition = "FAILED_PRECONDITION"
	StatusOutOfRange         = "OUT_OF_RANGE"
	StatusUnauthenticated    = "UNAUTHENTICATED"
	StatusPermissionDenied   = "PERMISSION_DENIED"
	StatusNotFound           = "NOT_FOUND"
	StatusAborted            = "ABORTED"
	StatusAlreadyExists      = "ALREADY_EXISTS"
	StatusResourceExhausted  = "RESOURCE_EXHAUSTED"
	StatusCancelled          = "CANCELLED"
	StatusInternal           = "INTERNAL"
	StatusUnimplemented      = "UNIMPLEMENTED"
	StatusUnavailable        = "UNAVAILABLE"
	StatusDeadlineExceeded   = "DEADLINE_EXCEEDED"
	StatusUnknown            = "UNKNOWN"
)

// statusCodes is the HTTP mapping of google.rpc.Code (google/rpc/code.proto).
var statusCodes = map[string]int{
	StatusInvalidArgument:    400,
	StatusFailedPrecondition: 400,
	StatusOutOfRange:         400,
	StatusUnauthenticated:    401,
	StatusPermissionDenied:   403,
	StatusNotFound:           404,
	StatusAborted:            409,
	StatusAlreadyExists:      409,
	StatusResourceExhausted:  429,
	StatusCancelled:          499,
	StatusInternal:           500,
	StatusUnknown:            500,
	StatusUnimplemented:      501,
	StatusUnavailable:        503,
	StatusDeadlineExceeded:   504,
}

// codeStatuses is the canonical status of each HTTP code.
var codeStatuses = map[int]string{
	400: StatusInvalidArgument,
	401: StatusUnauthenticated,
	403: StatusPermissionDenied,
	404: StatusNotFound,
	409: StatusAborted,
	429: StatusResourceExhausted,
	499: StatusCancelled,
	500: StatusInternal,
	501: StatusUnimplemented,
	503: StatusUnavailable,
	504: StatusDeadlineExceeded,
}

// CodeForStatus is the HTTP status of a google.rpc status name (500 for an
// unknown one).
func CodeForStatus(status string) int {
	if c, ok := statusCodes[status]; ok {
		return c
	}
	return 500
}

// StatusForCode is the google.rpc status name of an HTTP status (UNKNOWN
// for one with no canonical status, such as 502).
func StatusForCode(code int) string {
	if s, ok := codeStatuses[code]; ok {
		return s
	}
	return StatusUnknown
}

// Messages of the real API.
const (
	MessageAPIKeyInvalid      = "API key not valid. Please pass a valid API key."
	MessageUnregisteredCaller = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."
	MessageOverloaded         = "The model is overloaded. Please try again later."
	MessageInternal           = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	MessageDeadlineExceeded   = "Deadline expired before operation could complete."
	MessagePermissionDenied   = "The caller does not have permission"
	MessageLocation           = "User location is not supported for the API use."
	MessageFreeTierRegion     = "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio."
	MessageCorruptedSignature = "Corrupted thought signature."
	ThoughtSignaturesDocURL   = "https://ai.google.dev/gemini-api/docs/thought-signatures"
	rateLimitsDocURL          = "https://ai.google.dev/gemini-api/docs/rate-limits"
)

// defaultMessages are used when a fault names a status but no message.
var defaultMessages = map[string]string{
	StatusInvalidArgument:    "Request contains an invalid argument.",
	StatusFailedPrecondition: "Precondition check failed.",
	StatusUnauthenticated:    "Request had invalid authentication credentials.",
	StatusPermissionDenied:   MessagePermissionDenied,
	StatusNotFound:           "Requested entity was not found.",
	StatusResourceExhausted:  "Resource has been exhausted (e.g. check quota).",
	StatusInternal:           MessageInternal,
	StatusUnknown:            "Unknown error.",
	StatusUnavailable:        MessageOverloaded,
	StatusDeadlineExceeded:   MessageDeadlineExceeded,
}

func defaultMessage(status string) string {
	if m, ok := defaultMessages[status]; ok {
		return m
	}
	return "Unknown error."
}

// ErrorReply is a fault with the given HTTP code, status and message, and
// optional details.
func ErrorReply(code int, status, message string, details ...json.RawMessage) Reply {
	return Reply{Code: code, Status: status, Message: message, Details: details}
}

// InvalidArgument is a 400 INVALID_ARGUMENT with the given message.
func InvalidArgument(message string) Reply {
	return ErrorReply(400, StatusInvalidArgument, message)
}

// APIKeyInvalid is the 400 INVALID_ARGUMENT a wrong API key gets, with the
// ErrorInfo (reason API_KEY_INVALID) and LocalizedMessage details.
func APIKeyInvalid() Reply {
	return ErrorReply(400, StatusInvalidArgument, MessageAPIKeyInvalid, apiKeyInvalidDetails()...)
}

func apiKeyInvalidDetails() []json.RawMessage {
	return []json.RawMessage{
		ErrorInfoDetail("API_KEY_INVALID", "googleapis.com", map[string]string{"service": "generativelanguage.googleapis.com"}),
		LocalizedMessageDetail("en-US", MessageAPIKeyInvalid),
	}
}

// MissingAPIKey is the 403 PERMISSION_DENIED a request without any API key
// gets ("Method doesn't allow unregistered callers …").
func MissingAPIKey() Reply {
	return ErrorReply(403, StatusPermissionDenied, MessageUnregisteredCaller)
}

// ContextOverflow is the 400 INVALID_ARGUMENT of a prompt over the context
// window: "The input token count (N) exceeds the maximum number of tokens
// allowed (M)."
func ContextOverflow(tokens, maximum int) Reply {
	return InvalidArgument(contextOverflowMessage(tokens, maximum))
}

func contextOverflowMessage(tokens, maximum int) string {
	return fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", tokens, maximum)
}

// FailedPrecondition is a 400 FAILED_PRECONDITION with the given message.
func FailedPrecondition(message string) Reply {
	return ErrorReply(400, StatusFailedPrecondition, message)
}

// LocationNotSupported is the 400 FAILED_PRECONDITION "User location is not
// supported for the API use."
func LocationNotSupported() Reply { return FailedPrecondition(MessageLocation) }

// BillingRequired is the 400 FAILED_PRECONDITION of a free-tier key used
// from a region where the free tier is not offered.
func BillingRequired() Reply { return FailedPrecondition(MessageFreeTierRegion) }

// PermissionDenied is a 403 PERMISSION_DENIED.
func PermissionDenied() Reply {
	return ErrorReply(403, StatusPermissionDenied, MessagePermissionDenied)
}

// ModelNotFound is the 404 NOT_FOUND for an unknown model on
// generateContent.
func ModelNotFound(model string) Reply {
	return ErrorReply(404, StatusNotFound, modelNotFoundMessage(bareModel(model), "v1beta", "generateContent"))
}

func modelNotFoundMessage(model, version, method string) string {
	return fmt.Sprintf("models/%s is not found for API version %s, or is not supported for %s. Call ListModels to see the list of available models and their supported methods.", model, version, method)
}

// Quota describes one google.rpc.QuotaFailure violation of a 429.
type Quota struct {
	// Metric defaults to
	// "generativelanguage.googleapis.com/generate_content_free_tier_requests".
	Metric string
	// ID is the quotaId, e.g. [QuotaPerMinute] or [QuotaPerDay]. A quotaId
	// containing "PerDay" will not clear in seconds.
	ID string
	// Model is quotaDimensions.model (bare name).
	Model string
	// Location is quotaDimensions.location; default "global".
	Location string
	// Value is quotaValue, the limit (e.g. 15).
	Value int
	// RetryDelay is google.rpc.RetryInfo.retryDelay; zero sends no
	// RetryInfo.
	RetryDelay time.Duration
}

// Well-known quota ids.
const (
	QuotaPerMinute            = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
	QuotaPerDay               = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
	QuotaInputTokensPerMinute = "GenerateContentInputTokensPerModelPerMinute-FreeTier"
	freeTierRequestsMetric    = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
)

// ResourceExhausted is a 429 RESOURCE_EXHAUSTED for q, with the real body:
// the quota message, google.rpc.Help, google.rpc.QuotaFailure and (when
// q.RetryDelay > 0) google.rpc.RetryInfo. There is no Retry-After header:
// the API never sends one.
func ResourceExhausted(q Quota) Reply {
	q.Metric = cmpOr(q.Metric, freeTierRequestsMetric)
	q.Location = cmpOr(q.Location, "global")
	q.Model = bareModel(q.Model)
	msg := "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: " +
		rateLimitsDocURL + ". To monitor your current usage, head to: https://ai.dev/rate-limit. \n" +
		fmt.Sprintf("* Quota exceeded for metric: %s, limit: %d, model: %s\n", q.Metric, q.Value, q.Model)
	if q.RetryDelay > 0 {
		msg += "Please retry in " + durationString(q.RetryDelay) + "."
	}
	details := []json.RawMessage{
		HelpDetail("Learn more about Gemini API quotas", rateLimitsDocURL),
		QuotaFailureDetail(q),
	}
	if q.RetryDelay > 0 {
		details = append(details, RetryInfoDetail(q.RetryDelay.Truncate(time.Second)))
	}
	return ErrorReply(429, StatusResourceExhausted, msg, details...)
}

// RateLimited is the free tier's per-minute request quota 429 for model
// (limit 15), asking to retry after retryDelay.
func RateLimited(model string, retryDelay time.Duration) Reply {
	return ResourceExhausted(Quota{ID: QuotaPerMinute, Model: model, Value: 15, RetryDelay: retryDelay})
}

// DailyQuotaExceeded is the free tier's per-day request quota 429 for model
// (limit 20). The API still sends a RetryInfo of some seconds, which does
// not help: the quota resets daily.
func DailyQuotaExceeded(model string, retryDelay time.Duration) Reply {
	return ResourceExhausted(Quota{ID: QuotaPerDay, Model: model, Value: 20, RetryDelay: retryDelay})
}

// Internal is a 500 INTERNAL.
func Internal() Reply { return ErrorReply(500, StatusInternal, MessageInternal) }

// Unavailable is the 503 UNAVAILABLE "The model is overloaded. Please try
// again later." (Gemini's equivalent of Anthropic's 529).
func Unavailable() Reply { return ErrorReply(503, StatusUnavailable, MessageOverloaded) }

// DeadlineExceeded is a 504 DEADLINE_EXCEEDED.
func DeadlineExceeded() Reply {
	return ErrorReply(504, StatusDeadlineExceeded, MessageDeadlineExceeded)
}

// CorruptedThoughtSignature is the 400 the API sends when a thought
// signature comes back altered.
func CorruptedThoughtSignature() Reply { return InvalidArgument(MessageCorruptedSignature) }

// BadGatewayHTML is the page Google's front end sends with a 502.
const BadGatewayHTML = "<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n" +
	"  <meta name=viewport content=\"initial-scale=1, minimum-scale=1, width=device-width\">\n" +
	"  <title>Error 502 (Server Error)!!1</title>\n" +
	"  <a href=//www.google.com/><span id=logo aria-label=Google></span></a>\n" +
	"  <p><b>502.</b> <ins>That’s an error.</ins>\n" +
	"  <p>The server encountered a temporary error and could not complete your request.<p>Please try again in 30 seconds.  <ins>That’s all we know.</ins>\n"

// BadGateway is a 502 whose body is the front end's HTML page, not a JSON
// error: the SDK's genai.APIError then has Code 502, Status "502 Bad
// Gateway" and the HTML as Message.
func BadGateway() Reply {
	return Reply{Code: 502, RawBody: BadGatewayHTML, RawContentType: "text/html; charset=UTF-8"}
}

// OverloadedMidStream is a streamed success that fails with a 503
// UNAVAILABLE error chunk after afterChunks chunks, while the HTTP status
// stays 200. (A non-streaming request gets a 503 instead.)
func OverloadedMidStream(afterChunks int) Reply {
	return Reply{MidStreamError: &StreamError{Code: 503, Status: StatusUnavailable, Message: MessageOverloaded, AfterChunks: afterChunks}}
}

// CutStream is a streamed success whose connection is closed abruptly
// after afterChunks chunks.
func CutStream(afterChunks int) Reply { return Reply{CutAfterChunks: afterChunks} }

// Detail type URLs.
const (
	TypeErrorInfo        = "type.googleapis.com/google.rpc.ErrorInfo"
	TypeLocalizedMessage = "type.googleapis.com/google.rpc.LocalizedMessage"
	TypeQuotaFailure     = "type.googleapis.com/google.rpc.QuotaFailure"
	TypeRetryInfo        = "type.googleapis.com/google.rpc.RetryInfo"
	TypeHelp             = "type.googleapis.com/google.rpc.Help"
	TypeBadRequest       = "type.googleapis.com/google.rpc.BadRequest"
)

// RetryInfoDetail is a google.rpc.RetryInfo detail: {"@type":…,
// "retryDelay":"31s"} (a proto Duration string).
func RetryInfoDetail(delay time.Duration) json.RawMessage {
	return marshal(struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	}{TypeRetryInfo, durationString(delay)})
}

// ErrorInfoDetail is a google.rpc.ErrorInfo detail.
func ErrorInfoDetail(reason, domain string, metadata map[string]string) json.RawMessage {
	return marshal(struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata,omitempty"`
	}{TypeErrorInfo, reason, domain, metadata})
}

// LocalizedMessageDetail is a google.rpc.LocalizedMessage detail.
func LocalizedMessageDetail(locale, message string) json.RawMessage {
	return marshal(struct {
		Type    string `json:"@type"`
		Locale  string `json:"locale"`
		Message string `json:"message"`
	}{TypeLocalizedMessage, locale, message})
}

// HelpDetail is a google.rpc.Help detail with one link.
func HelpDetail(description, url string) json.RawMessage {
	type link struct {
		Description string `json:"description"`
		URL         string `json:"url"`
	}
	return marshal(struct {
		Type  string `json:"@type"`
		Links []link `json:"links"`
	}{TypeHelp, []link{{description, url}}})
}

// QuotaFailureDetail is a google.rpc.QuotaFailure detail with one
// violation (quotaMetric, quotaId, quotaDimensions{model,location},
// quotaValue).
func QuotaFailureDetail(q Quota) json.RawMessage {
	type dims struct {
		Model    string `json:"model,omitempty"`
		Location string `json:"location,omitempty"`
	}
	type violation struct {
		QuotaMetric     string `json:"quotaMetric"`
		QuotaID         string `json:"quotaId"`
		QuotaDimensions dims   `json:"quotaDimensions"`
		QuotaValue      string `json:"quotaValue,omitempty"`
	}
	v := violation{QuotaMetric: cmpOr(q.Metric, freeTierRequestsMetric), QuotaID: q.ID,
		QuotaDimensions: dims{bareModel(q.Model), cmpOr(q.Location, "global")}}
	if q.Value > 0 {
		v.QuotaValue = strconv.Itoa(q.Value)
	}
	return marshal(struct {
		Type       string      `json:"@type"`
		Violations []violation `json:"violations"`
	}{TypeQuotaFailure, []violation{v}})
}

// BadRequestDetail is a google.rpc.BadRequest detail with one field
// violation.
func BadRequestDetail(field, description string) json.RawMessage {
	type fv struct {
		Field       string `json:"field,omitempty"`
		Description string `json:"description"`
	}
	return marshal(struct {
		Type            string `json:"@type"`
		FieldViolations []fv   `json:"fieldViolations"`
	}{TypeBadRequest, []fv{{field, description}}})
}

// durationString formats d as a proto Duration ("31s", "23.472316927s").
func durationString(d time.Duration) string {
	s := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if strings.Contains(s, "e") {
		s = strconv.FormatFloat(d.Seconds(), 'f', 9, 64)
	}
	return s + "s"
}

// errorBody is the wire shape of an error (google.rpc.Status).
type errorBody struct {
	Error errorStatus `json:"error"`
}

type errorStatus struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details,omitempty"`
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
