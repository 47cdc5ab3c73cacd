package gemini

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
)

// The Gemini Developer API's REST messages, as much of them as the adapter
// sends and reads (https://ai.google.dev/api/generate-content). The adapter
// speaks the REST API itself: the SDK (google.golang.org/genai) brings
// Google Cloud authentication, gRPC and its test helpers into the binary,
// none of which an API key over HTTPS needs. The SDK still checks the fake
// (geminifake's tests), so the fake, and through it this client, keep to
// what the SDK sends and reads.

type content struct {
	Role  string  `json:"role,omitempty"`
	Parts []*part `json:"parts,omitempty"`
}

type part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature []byte            `json:"thoughtSignature,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
}

type blob struct {
	MIMEType string `json:"mimeType,omitempty"`
	Data     []byte `json:"data,omitempty"`
}

type functionCall struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

type functionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name,omitempty"`
	Response map[string]any `json:"response,omitempty"`
}

// Roles of a content.
const (
	roleUser  = "user"
	roleModel = "model"
)

// generateRequest is the body of models.generateContent and
// models.streamGenerateContent.
type generateRequest struct {
	Contents          []*content        `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []*tool           `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type tool struct {
	FunctionDeclarations []*functionDeclaration `json:"functionDeclarations,omitempty"`
}

type functionDeclaration struct {
	Name                 string `json:"name"`
	Description          string `json:"description,omitempty"`
	ParametersJSONSchema any    `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig *functionCallingConfig `json:"functionCallingConfig,omitempty"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode,omitempty"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// Function calling modes.
const (
	modeAuto = "AUTO"
	modeAny  = "ANY"
	modeNone = "NONE"
)

type generationConfig struct {
	MaxOutputTokens    int32           `json:"maxOutputTokens,omitempty"`
	Temperature        *float32        `json:"temperature,omitempty"`
	TopP               *float32        `json:"topP,omitempty"`
	TopK               *float32        `json:"topK,omitempty"`
	Seed               *int32          `json:"seed,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMIMEType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema any             `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int32 `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// generateResponse is one answer, or one chunk of a streamed one.
type generateResponse struct {
	Candidates     []*candidate    `json:"candidates,omitempty"`
	PromptFeedback *promptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
	ResponseID     string          `json:"responseId,omitempty"`
}

type candidate struct {
	Content      *content `json:"content,omitempty"`
	FinishReason string   `json:"finishReason,omitempty"`
}

type promptFeedback struct {
	BlockReason        string `json:"blockReason,omitempty"`
	BlockReasonMessage string `json:"blockReasonMessage,omitempty"`
}

type usageMetadata struct {
	PromptTokenCount        int32 `json:"promptTokenCount,omitempty"`
	CachedContentTokenCount int32 `json:"cachedContentTokenCount,omitempty"`
	CandidatesTokenCount    int32 `json:"candidatesTokenCount,omitempty"`
	ToolUsePromptTokenCount int32 `json:"toolUsePromptTokenCount,omitempty"`
	ThoughtsTokenCount      int32 `json:"thoughtsTokenCount,omitempty"`
}

// Finish reasons the adapter tells apart.
const (
	finishStop                    = "STOP"
	finishMaxTokens               = "MAX_TOKENS"
	finishSafety                  = "SAFETY"
	finishRecitation              = "RECITATION"
	finishBlocklist               = "BLOCKLIST"
	finishProhibitedContent       = "PROHIBITED_CONTENT"
	finishSPII                    = "SPII"
	finishImageSafety             = "IMAGE_SAFETY"
	finishImageProhibitedContent  = "IMAGE_PROHIBITED_CONTENT"
	finishImageRecitation         = "IMAGE_RECITATION"
	maxStreamEvent                = 256 << 20 // the longest streamed event read, as the SDK
	streamGenerateContentQuerySSE = "alt=sse"
)

// apiError is an error answer of the API: the google.rpc.Status in the
// body's "error", or, for a body that is not one, the HTTP status and the
// body as the message.
type apiError struct {
	Code    int              `json:"code,omitempty"`
	Message string           `json:"message,omitempty"`
	Status  string           `json:"status,omitempty"`
	Details []map[string]any `json:"details,omitempty"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("Error %d, Message: %s, Status: %s", e.Code, e.Message, e.Status)
}

// errorBody is a body (or streamed event) that carries an error.
type errorBody struct {
	Error *apiError `json:"error"`
}

// errMalformed is an answer that does not decode as the API's messages.
type errMalformed struct{ cause error }

func (e *errMalformed) Error() string { return fmt.Sprintf("malformed response: %v", e.cause) }

// client sends the adapter's calls.
type client struct {
	hc      *http.Client
	baseURL string
	key     string
}

// url returns the address of path under the API version; a model name
// without its collection gets "models/".
func (c *client) url(path string) (string, error) {
	u, err := url.Parse(c.baseURL)
	if err != nil {
		return "", fmt.Errorf("gemini: base URL %q: %v", c.baseURL, err)
	}
	path, query, _ := strings.Cut(path, "?")
	u = u.JoinPath(APIVersion, path)
	u.RawQuery = query
	return u.String(), nil
}

func modelPath(model string) string {
	if strings.HasPrefix(model, "models/") || strings.HasPrefix(model, "tunedModels/") {
		return model
	}
	return "models/" + model
}

// do sends one request and returns the response of a 2xx answer; any other
// answer is an *apiError.
func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	u, err := c.url(path)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("gemini: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("x-goog-api-key", c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

func readAPIError(resp *http.Response) error {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var eb errorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		if eb.Error.Code == 0 {
			eb.Error.Code = resp.StatusCode
		}
		return eb.Error
	}
	return &apiError{Code: resp.StatusCode, Message: string(b)}
}

// generate is models.generateContent.
func (c *client) generate(ctx context.Context, model string, req *generateRequest) (*generateResponse, error) {
	resp, err := c.do(ctx, http.MethodPost, modelPath(model)+":generateContent", req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out generateResponse
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, &errMalformed{err}
	}
	return &out, nil
}

// stream is models.streamGenerateContent as server-sent events: each
// event's data is a response chunk, or an error. It ends when the server
// closes the stream; the body is closed when the loop ends. opened is
// called once the server answered 200.
func (c *client) stream(ctx context.Context, model string, req *generateRequest, opened func()) iter.Seq2[*generateResponse, error] {
	return func(yield func(*generateResponse, error) bool) {
		resp, err := c.do(ctx, http.MethodPost, modelPath(model)+":streamGenerateContent?"+streamGenerateContentQuerySSE, req)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		opened()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 4096), maxStreamEvent)
		var data []byte
		// flush decodes the event gathered so far; false: stop.
		flush := func() bool {
			if len(data) == 0 {
				return true
			}
			d := data
			data = nil
			var eb errorBody
			if json.Unmarshal(d, &eb) == nil && eb.Error != nil {
				return yield(nil, eb.Error)
			}
			var r generateResponse
			if err := json.Unmarshal(d, &r); err != nil {
				return yield(nil, &errMalformed{err})
			}
			return yield(&r, nil)
		}
		for sc.Scan() {
			line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
			if len(line) == 0 {
				if !flush() {
					return
				}
				continue
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			switch string(field) {
			case "data":
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(value, []byte(" "))...)
			case "", "event", "id", "retry": // a comment or a field the API does not use
			default:
				yield(nil, &errMalformed{fmt.Errorf("invalid stream line %q", line)})
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, err)
			return
		}
		flush()
	}
}

// listModels is models.list with one model to a page: the health check.
func (c *client) listModels(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, "models?pageSize=1", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var out struct {
		Models []json.RawMessage `json:"models"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return &errMalformed{err}
	}
	return nil
}
