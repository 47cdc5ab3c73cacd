package geminifake

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/genai"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const hiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "real", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkHeaders checks that every header named in a fixture list is sent.
func checkHeaders(t *testing.T, fixture string, got http.Header) {
	t.Helper()
	for _, name := range strings.Fields(string(readFixture(t, fixture))) {
		if got.Get(name) == "" {
			t.Errorf("response lacks header %s (have %v)", name, got)
		}
	}
	assertNoRateLimitHeaders(t, got)
}

const fixtureSignature = "EkC7VjCN8FxeDa4g9l6/HgLg9LddPiBZnG+z2nKDkmPMZPYymBYd5MqK7q/w72UHWazFjnIQSRJeJLCOx/saYS29"

func TestUnaryBodyMatchesFixture(t *testing.T) {
	fake := start(t)
	fake.Enqueue(Reply{
		FunctionCalls: []FunctionCall{{ID: "k2v7q0xd", Name: "get_weather", Args: json.RawMessage(`{"city": "Paris", "days": [1, 2]}`), ThoughtSignature: fixtureSignature}},
		ResponseID:    "sX0yat2XDJWonsEPtsmCiA8",
		Usage:         Usage{Prompt: 275, Candidates: 30, Thoughts: 107},
	})
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-3.5-flash:generateContent", goodHeaders(), hiBody)
	if want := readFixture(t, "unary_function_call.json"); !bytes.Equal(body, want) {
		t.Errorf("body differs from the fixture\ngot:\n%s\nwant:\n%s", body, want)
	}
	checkHeaders(t, "response_headers_json.txt", resp.Header)
	if resp.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Errorf("content-length %q", resp.Header.Get("Content-Length"))
	}
}

// keyOrder lists the key paths of a JSON document in document order
// (array elements share their array's path).
func keyOrder(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []string
	var walk func(prefix string) error
	walk = func(prefix string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				p := prefix + kt.(string)
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
				if err := walk(p + "."); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if err := walk(prefix); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	if err := walk(""); err != nil {
		t.Fatalf("keyOrder(%s): %v", data, err)
	}
	return out
}

func TestStreamChunksMatchFixture(t *testing.T) {
	fixture := readFixture(t, "stream_text.sse")
	real := splitSSE(t, fixture, "\r\n\r\n")
	// The fake's JSON style reproduces each recorded-style line from its
	// content.
	for i, line := range real {
		if got := streamJSON(json.RawMessage(line)); string(got) != line {
			t.Errorf("chunk %d restyled\ngot  %s\nwant %s", i, got, line)
		}
	}
	// A fake stream of the same answer has the same fields in the same
	// order, first and last chunk alike.
	fake := start(t)
	fake.Enqueue(Reply{
		Text:       "Warsaw, on the Vistula, is Poland's capital and its largest city.",
		ResponseID: "g6eJafflLZKRkdUPoZCXmA0",
		Usage:      Usage{Prompt: 15, Candidates: 42, Thoughts: 1304},
	})
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", goodHeaders(), hiBody)
	got := splitSSE(t, body, "\r\n\r\n")
	if len(got) < 2 {
		t.Fatalf("%d chunks", len(got))
	}
	for _, pair := range [][2]string{{real[0], got[0]}, {real[1], got[len(got)-1]}} {
		if r, f := keyOrder(t, []byte(pair[0])), keyOrder(t, []byte(pair[1])); !slices.Equal(r, f) {
			t.Errorf("key order\nreal %v\nfake %v", r, f)
		}
	}
	var last map[string]any
	_ = json.Unmarshal([]byte(got[len(got)-1]), &last)
	if u := last["usageMetadata"].(map[string]any); u["candidatesTokenCount"] != 42.0 || u["totalTokenCount"] != 1361.0 {
		t.Errorf("final usage %v", u)
	}
	checkHeaders(t, "response_headers_sse.txt", resp.Header)
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Content-Disposition") != "attachment" {
		t.Errorf("headers %v", resp.Header)
	}
}

func TestKeyOrder(t *testing.T) {
	got := keyOrder(t, []byte(`{"a": {"b": 1,"c": [{"d": 2}]},"e": "x"}`))
	if want := []string{"a", "a.b", "a.c", "a.c.d", "e"}; !slices.Equal(got, want) {
		t.Errorf("keyOrder = %v", got)
	}
}

func TestErrorBodiesMatchFixtures(t *testing.T) {
	fake := start(t)
	h := goodHeaders()
	h["x-goog-api-key"] = "AIzaSyWrong"
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", h, hiBody)
	if want := readFixture(t, "error_api_key_invalid.json"); resp.StatusCode != 400 || !bytes.Equal(body, want) {
		t.Errorf("bad key: %d\n%s", resp.StatusCode, body)
	}
	fake.Enqueue(RateLimited("gemini-2.5-flash", 31*time.Second))
	resp, body = raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), hiBody)
	if want := readFixture(t, "error_quota_429.json"); resp.StatusCode != 429 || !bytes.Equal(body, want) {
		t.Errorf("429: %d\n%s", resp.StatusCode, body)
	}
	if resp.Header.Get("Content-Type") != "application/json; charset=UTF-8" {
		t.Errorf("content-type %q", resp.Header.Get("Content-Type"))
	}
	assertNoRateLimitHeaders(t, resp.Header)
}

func TestSSEFraming(t *testing.T) {
	for _, sep := range []string{"\r\n\r\n", "\n\n"} {
		var opts []Option
		if sep != DefaultSSESeparator {
			opts = append(opts, WithSSESeparator(sep))
		}
		fake := start(t, opts...)
		fake.Enqueue(Reply{Text: "alpha beta gamma delta epsilon zeta eta theta", FunctionCalls: []FunctionCall{{Name: "f", Args: json.RawMessage(`{"x":"a\nb"}`)}}})
		resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", goodHeaders(), hiBody)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		s := string(body)
		if strings.Contains(s, "[DONE]") || strings.Contains(s, "event:") || strings.Contains(s, "\nid:") {
			t.Errorf("unexpected SSE fields in %q", s)
		}
		if sep == "\n\n" && strings.Contains(s, "\r") {
			t.Errorf("CR with \\n\\n framing: %q", s)
		}
		events := splitSSE(t, body, sep)
		if len(events) != 4 {
			t.Errorf("%d events", len(events))
		}
		var text strings.Builder
		for i, ev := range events {
			m := decodeMap(t, []byte(ev))
			if _, ok := m["candidates"]; !ok {
				t.Errorf("event %d: %s", i, ev)
			}
			parts := m["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)
			if s, ok := parts[0].(map[string]any)["text"].(string); ok {
				text.WriteString(s)
			}
		}
		if text.String() != "alpha beta gamma delta epsilon zeta eta theta" {
			t.Errorf("text %q", text.String())
		}
		if !strings.Contains(events[3], `"functionCall": {"name": "f","args": {"x": "a\nb"},"id": "`) {
			t.Errorf("function call chunk %s", events[3])
		}
	}
}

func TestGoldenStream(t *testing.T) {
	fake := start(t, WithSeed(42))
	fake.Enqueue(Reply{
		Thought:       &Thought{Text: "**Checking the weather**\n\nThe user asks about Paris."},
		Text:          "I'll check the weather in Paris for you — one moment.",
		FunctionCalls: []FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris","units":"celsius"}`)}},
		Usage:         Usage{Prompt: 57, Cached: 32, Candidates: 15, Thoughts: 48},
	})
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-3.5-flash:streamGenerateContent?alt=sse", goodHeaders(),
		`{"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather"}]}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	path := filepath.Join("testdata", "golden", "stream.sse")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(body, want) {
		t.Errorf("stream differs from %s (run with -update if intended)\ngot:\n%s", path, body)
	}
}

func TestSnakeCaseBody(t *testing.T) {
	fake := start(t)
	body := `{
	  "system_instruction": {"parts": [{"text": "Be terse."}]},
	  "contents": [
	    {"role": "user", "parts": [{"text": "Weather?"}]},
	    {"role": "model", "parts": [{"function_call": {"name": "get_weather", "args": {"snake_arg": 1}}, "thought_signature": "` + SkipSignatureValidator + `"}]},
	    {"role": "user", "parts": [{"function_response": {"name": "get_weather", "response": {"snake_out": "18C"}}}]}
	  ],
	  "tools": [{"function_declarations": [
	    {"name": "get_weather", "parameters_json_schema": {"type": "object", "properties": {"some_field": {"type": "string", "max_length": 5}}, "required": ["some_field"]}},
	    {"name": "legacy", "parameters": {"type": "OBJECT", "properties": {"snake_key": {"type": "STRING", "max_length": "5"}}}}
	  ]}],
	  "tool_config": {"function_calling_config": {"mode": "ANY", "allowed_function_names": ["get_weather"]}},
	  "generation_config": {"max_output_tokens": 256, "thinking_config": {"thinking_budget": 0, "include_thoughts": true}}
	}`
	resp, out := raw(t, fake, "POST", "/v1beta/models/gemini-3.5-flash:generateContent", goodHeaders(), body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	rec := fake.Requests()[0]
	req, err := rec.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if req.SystemInstruction == nil || req.SystemInstruction.Parts[0].Text != "Be terse." {
		t.Errorf("systemInstruction %+v", req.SystemInstruction)
	}
	g := req.GenerationConfig
	if g == nil || *g.MaxOutputTokens != 256 || *g.ThinkingConfig.ThinkingBudget != 0 || !g.ThinkingConfig.IncludeThoughts {
		t.Errorf("generationConfig %+v", g)
	}
	call := req.Contents[1].Parts[0]
	if call.FunctionCall == nil || string(call.FunctionCall.Args) != `{"snake_arg":1}` || call.ThoughtSignature != SkipSignatureValidator {
		t.Errorf("call %+v", call)
	}
	if fr := req.Contents[2].Parts[0].FunctionResponse; fr == nil || string(fr.Response) != `{"snake_out":"18C"}` {
		t.Errorf("response %+v", fr)
	}
	d := req.Tools[0].FunctionDeclarations
	if len(d) != 2 || !jsonEqual(t, d[0].ParametersJSONSchema, []byte(`{"type":"object","properties":{"some_field":{"type":"string","max_length":5}},"required":["some_field"]}`)) {
		t.Errorf("declarations %+v", d)
	}
	// In the proto Schema, property names are data but schema fields are
	// proto fields: snake_key stays, max_length becomes maxLength.
	if !jsonEqual(t, d[1].Parameters, []byte(`{"type":"OBJECT","properties":{"snake_key":{"type":"STRING","maxLength":"5"}}}`)) {
		t.Errorf("legacy parameters %s", d[1].Parameters)
	}
	if !jsonEqual(t, req.ToolConfig, []byte(`{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}}`)) {
		t.Errorf("toolConfig %s", req.ToolConfig)
	}
	camel := string(rec.CamelBody())
	for _, s := range []string{`"systemInstruction"`, `"functionDeclarations"`, `"parametersJsonSchema"`, `"thoughtSignature"`, `"functionCall"`} {
		if !strings.Contains(camel, s) {
			t.Errorf("CamelBody lacks %s: %s", s, camel)
		}
	}
	if strings.Contains(camel, "system_instruction") || !strings.HasPrefix(camel, `{"systemInstruction"`) {
		t.Errorf("CamelBody %s", camel)
	}
	// The same request in camelCase counts the same number of tokens.
	var generic any
	_ = json.Unmarshal(rec.CamelBody(), &generic)
	camelBody, _ := json.Marshal(generic)
	if CountTokens("", []byte(body)) != CountTokens("", camelBody) {
		t.Errorf("CountTokens differs: %d vs %d", CountTokens("", []byte(body)), CountTokens("", camelBody))
	}
	// Decode works on either spelling.
	var v struct {
		ToolConfig struct {
			FunctionCallingConfig struct {
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
		} `json:"toolConfig"`
	}
	if err := rec.Decode(&v); err != nil || !slices.Equal(v.ToolConfig.FunctionCallingConfig.AllowedFunctionNames, []string{"get_weather"}) {
		t.Errorf("Decode = %+v, %v", v, err)
	}
	if rec.LastUserText() != `get_weather: {"snake_out":"18C"}` {
		t.Errorf("LastUserText %q", rec.LastUserText())
	}

	// snake_case on a Gemini 3 model: a stripped signature is still caught.
	stripped := strings.Replace(body, `, "thought_signature": "`+SkipSignatureValidator+`"`, "", 1)
	resp, out = raw(t, fake, "POST", "/v1beta/models/gemini-3.5-flash:generateContent", goodHeaders(), stripped)
	if resp.StatusCode != 400 || !strings.Contains(string(out), "`default_api:get_weather` , position 2") {
		t.Errorf("stripped: %d %s", resp.StatusCode, out)
	}
}

func TestValidation(t *testing.T) {
	fake := start(t)
	fake.Enqueue(TextReply("kept"))
	tests := []struct {
		path, body, message string
	}{
		{":generateContent", `not json`, "Invalid JSON payload received. Unexpected token."},
		{":generateContent", `{}`, "* GenerateContentRequest.contents: contents is not specified\n"},
		{":generateContent", `{"contents":[]}`, "* GenerateContentRequest.contents: contents is not specified\n"},
		{":generateContent", `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "Please use a valid role: user, model."},
		{":generateContent", `{"contents":[{"role":"user","parts":[]}]}`, "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n"},
		{":generateContent", `{"contents":[{"parts":[{"text":"x"}]}],"temperature":1}`, `Invalid JSON payload received. Unknown name "temperature": Cannot find field.`},
		{":generateContent", `{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"description":"no name"}]}]}`,
			"* GenerateContentRequest.tools[0].function_declarations[0].name: Name cannot be empty.\n"},
		{":generateContent", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"thinkingConfig":{"thinkingLevel":"HIGH"}}}`,
			"* GenerateContentRequest.generation_config.thinking_config.thinking_level: Thinking level is not supported for this model.\n"},
		{":generateContent", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":30000}}}`,
			"* GenerateContentRequest.generation_config.thinking_config.thinking_budget: The thinking budget 30000 is invalid. Please choose a value between 0 and 24576.\n"},
		{":streamGenerateContent?alt=sse", `{"contents":[{"role":"user"}]}`, "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n"},
		{":countTokens", `{}`, "* CountTokensRequest.contents: contents is not specified\n"},
		{":countTokens", `{"generateContentRequest":{"model":"models/gemini-2.5-flash"}}`, "* CountTokensRequest.generate_content_request.contents: contents is not specified\n"},
	}
	for _, tt := range tests {
		resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash"+tt.path, goodHeaders(), tt.body)
		if resp.StatusCode != 400 {
			t.Errorf("%s %s: status %d", tt.path, tt.body, resp.StatusCode)
			continue
		}
		if e := errorOf(t, body); e["status"] != "INVALID_ARGUMENT" || e["message"] != tt.message || e["code"] != 400.0 {
			t.Errorf("%s %s: error %v, want %q", tt.path, tt.body, e, tt.message)
		}
	}
	if fake.Pending(RouteGenerate) != 1 {
		t.Error("validation consumed a reply")
	}
	// Unknown-name errors carry a BadRequest detail.
	_, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), `{"contents":[],"bogus":1}`)
	if d := errorOf(t, body)["details"].([]any)[0].(map[string]any); d["@type"] != TypeBadRequest {
		t.Errorf("details %v", d)
	}
	// count tokens in the wrapped form.
	wrapped := `{"generateContentRequest":{"model":"models/gemini-2.5-flash","contents":[{"role":"user","parts":[{"text":"hello"}]}],"systemInstruction":{"parts":[{"text":"sys"}]}}}`
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:countTokens", goodHeaders(), wrapped)
	want := fmt.Sprintf("{\n  \"totalTokens\": %d,\n  \"promptTokensDetails\": [\n    {\n      \"modality\": \"TEXT\",\n      \"tokenCount\": %d\n    }\n  ]\n}\n", CountTokens("", []byte(wrapped)), CountTokens("", []byte(wrapped)))
	if resp.StatusCode != 200 || string(body) != want {
		t.Errorf("wrapped countTokens: %d %s", resp.StatusCode, body)
	}
}

func TestUnknownRoutesAndModels(t *testing.T) {
	fake := start(t)
	for _, r := range [][2]string{{"GET", "/v1beta/nope"}, {"GET", "/"}, {"POST", "/v1beta/models"}, {"GET", "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"POST", "/v1beta/models/gemini-2.5-flash:embedContent"}, {"POST", "/v1beta/models/a/b:generateContent"}, {"POST", "/v2/models/gemini-2.5-flash:generateContent"}} {
		resp, body := raw(t, fake, r[0], r[1], nil, "")
		if e := errorOf(t, body); resp.StatusCode != 404 || e["status"] != "NOT_FOUND" || e["message"] != "The requested URL "+strings.SplitN(r[1], "?", 2)[0]+" was not found on this server." {
			t.Errorf("%s %s: %d %s", r[0], r[1], resp.StatusCode, body)
		}
	}
	for _, tt := range []struct{ path, method string }{
		{"/v1beta/models/gemini-9:generateContent", "generateContent"},
		{"/v1beta/models/gemini-9:streamGenerateContent?alt=sse", "generateContent"},
		{"/v1beta/models/gemini-9:countTokens", "countTokens"},
		{"/v1/models/gemini-9:generateContent", "generateContent"},
	} {
		resp, body := raw(t, fake, "POST", tt.path, goodHeaders(), hiBody)
		version := strings.Split(tt.path, "/")[1]
		want := "models/gemini-9 is not found for API version " + version + ", or is not supported for " + tt.method + ". Call ListModels to see the list of available models and their supported methods."
		if e := errorOf(t, body); resp.StatusCode != 404 || e["status"] != "NOT_FOUND" || e["message"] != want {
			t.Errorf("%s: %d %s", tt.path, resp.StatusCode, body)
		}
	}
	// A model that does not support a method is not found for it.
	only := start(t, WithModels(Model{Name: "embedder", SupportedGenerationMethods: []string{"embedContent"}}))
	if resp, _ := raw(t, only, "POST", "/v1beta/models/embedder:generateContent", goodHeaders(), hiBody); resp.StatusCode != 404 {
		t.Errorf("unsupported method: %d", resp.StatusCode)
	}
	if resp, _ := raw(t, only, "GET", "/v1beta/models/models%2Fembedder", goodHeaders(), ""); resp.StatusCode != 404 {
		t.Errorf("escaped slash: %d", resp.StatusCode)
	}
}

func TestJSONArrayStreamWithoutAltSSE(t *testing.T) {
	fake := start(t)
	fake.Enqueue(TextReply("one two three four five six seven"), Reply{Text: "a b c d e f g", MidStreamError: &StreamError{AfterChunks: 1}})
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", goodHeaders(), hiBody)
	var chunks []map[string]any
	if err := json.Unmarshal(body, &chunks); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v %s", resp.StatusCode, err, body)
	}
	if len(chunks) != 3 || !bytes.Contains(body, []byte("}\n,\r\n{")) && !bytes.Contains(body, []byte("},\r\n{")) {
		t.Errorf("%d chunks: %s", len(chunks), body)
	}
	_, body = raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", goodHeaders(), hiBody)
	if err := json.Unmarshal(body, &chunks); err != nil || len(chunks) != 2 || chunks[1]["error"].(map[string]any)["code"] != 503.0 {
		t.Errorf("mid-stream error array: %v %s", err, body)
	}
}

func TestModelPaging(t *testing.T) {
	fake := start(t)
	all := DefaultModels()
	var names []string
	token := ""
	for pages := 0; ; pages++ {
		path := "/v1beta/models?pageSize=3"
		if token != "" {
			path += "&pageToken=" + token
		}
		resp, body := raw(t, fake, "GET", path, goodHeaders(), "")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var page struct {
			Models []struct {
				Name                       string   `json:"name"`
				InputTokenLimit            int      `json:"inputTokenLimit"`
				SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
				Thinking                   bool     `json:"thinking"`
			} `json:"models"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Models {
			names = append(names, m.Name)
			if m.InputTokenLimit != 1048576 || len(m.SupportedGenerationMethods) == 0 {
				t.Errorf("model %+v", m)
			}
		}
		if token = page.NextPageToken; token == "" || pages > 10 {
			break
		}
	}
	if len(names) != len(all) || names[0] != "models/"+all[0].Name {
		t.Errorf("paged %v", names)
	}
	for _, q := range []string{"pageSize=abc", "pageToken=bogus", "pageSize=-1"} {
		if resp, body := raw(t, fake, "GET", "/v1beta/models?"+q, goodHeaders(), ""); resp.StatusCode != 400 || errorOf(t, body)["status"] != "INVALID_ARGUMENT" {
			t.Errorf("%s: %d %s", q, resp.StatusCode, body)
		}
	}
	resp, body := raw(t, fake, "GET", "/v1beta/models/gemini-3.5-flash", goodHeaders(), "")
	if m := decodeMap(t, body); resp.StatusCode != 200 || m["name"] != "models/gemini-3.5-flash" || m["thinking"] != true || m["outputTokenLimit"] != 65536.0 {
		t.Errorf("get: %d %s", resp.StatusCode, body)
	}
	if ko := keyOrder(t, body); !slices.Equal(ko[:6], []string{"name", "version", "displayName", "description", "inputTokenLimit", "outputTokenLimit"}) {
		t.Errorf("model field order %v", ko)
	}
}

func TestRequestTooLargeAndRawFaults(t *testing.T) {
	fake := start(t, WithMaxBodyBytes(100))
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), `{"contents":[{"parts":[{"text":"`+strings.Repeat("x", 200)+`"}]}]}`)
	if e := errorOf(t, body); resp.StatusCode != 400 || e["message"] != "Request payload size exceeds the limit: 100 bytes." {
		t.Errorf("%d %s", resp.StatusCode, body)
	}

	fake = start(t)
	fake.Enqueue(Reply{RawBody: `{"not":"a response"`}, BadGateway(), Unavailable().WithHeader("x-extra", "1"))
	resp, body = raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), hiBody)
	if resp.StatusCode != 200 || string(body) != `{"not":"a response"` || resp.Header.Get("Content-Type") != jsonContentType {
		t.Errorf("raw 200: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", goodHeaders(), hiBody)
	if resp.StatusCode != 502 || string(body) != BadGatewayHTML || resp.Header.Get("Content-Type") != "text/html; charset=UTF-8" {
		t.Errorf("502: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	resp, body = raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), hiBody)
	if resp.StatusCode != 503 || resp.Header.Get("x-extra") != "1" || errorOf(t, body)["message"] != MessageOverloaded {
		t.Errorf("503: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	assertNoRateLimitHeaders(t, resp.Header)
}

func TestEnqueuePanicsOnInvalidReply(t *testing.T) {
	fake := start(t)
	for _, r := range []Reply{
		{FunctionCalls: []FunctionCall{{Name: "f", Args: json.RawMessage(`[1]`)}}},
		{FunctionCalls: []FunctionCall{{Name: "f", Args: json.RawMessage(`{`)}}},
		{FunctionCalls: []FunctionCall{{Args: json.RawMessage(`{}`)}}},
		{FunctionCalls: []FunctionCall{{Name: "f", ThoughtSignature: "not base64!"}}},
		{Thought: &Thought{Text: "t", Signature: "abc"}},
		{Details: []json.RawMessage{json.RawMessage(`"str"`)}},
		{Code: 42},
		{CutAfterChunks: -1},
		{Usage: Usage{Prompt: -1}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic for %+v", r)
				}
			}()
			fake.Enqueue(r)
		}()
	}
	// From a default-reply function the same mistake is a 500.
	bad := start(t, WithDefaultReply(func(Recorded) Reply { return FunctionCallReply("f", "nope") }))
	resp, body := raw(t, bad, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), hiBody)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "invalid scripted reply") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestConcurrentCallsTakeEachReplyOnce(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	const n = 24
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("reply-%02d", i)
		fake.Enqueue(TextReply(want[i]))
	}
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			var text strings.Builder
			if i%2 == 0 {
				resp, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
				if err != nil {
					t.Error(err)
					return
				}
				text.WriteString(resp.Text())
			} else {
				for chunk, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-3.5-flash", genai.Text("Hi"), nil) {
					if err != nil {
						t.Error(err)
						return
					}
					text.WriteString(chunk.Text())
				}
			}
			mu.Lock()
			got = append(got, text.String())
			mu.Unlock()
			_ = fake.Requests()
			_ = fake.OpenConns()
			_ = fake.ActiveConns()
		})
	}
	wg.Wait()
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("got %v", got)
	}
	if len(fake.Requests()) != n {
		t.Errorf("recorded %d", len(fake.Requests()))
	}
}

func TestStandaloneHandler(t *testing.T) {
	fake := NewUnstarted(WithAPIKey(testKey))
	defer fake.Close()
	if fake.URL() != "" || fake.Client() != nil {
		t.Error("unstarted fake has a URL or client")
	}
	ts := httptest.NewUnstartedServer(fake.Handler())
	ts.Config.ConnState = fake.ConnState
	ts.Start()
	defer ts.Close()

	fake.Enqueue(TextReply("standalone"))
	isolateEnv(t)
	tr := &http.Transport{}
	client, err := genai.NewClient(testCtx(t), &genai.ClientConfig{APIKey: testKey, Backend: genai.BackendGeminiAPI,
		HTTPClient: &http.Client{Transport: tr}, HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
	if err != nil || resp.Text() != "standalone" {
		t.Fatalf("%v %v", resp, err)
	}
	if fake.OpenConns() != 1 {
		t.Errorf("OpenConns = %d", fake.OpenConns())
	}
	tr.CloseIdleConnections()
	if err := fake.WaitOpenConns(testCtx(t), 0); err != nil {
		t.Error(err)
	}
}

func TestSplitText(t *testing.T) {
	text := "I'd be happy to check the weather in Zürich — naïve café.\nSupercalifragilisticexpialidocious-and-then-some!"
	chunks := splitText(text)
	if strings.Join(chunks, "") != text || len(chunks) < 4 {
		t.Errorf("splitText = %q", chunks)
	}
	for _, c := range chunks {
		if !utf8.ValidString(c) || c == "" {
			t.Errorf("bad chunk %q", c)
		}
	}
	if got := splitText("Hi"); !slices.Equal(got, []string{"Hi"}) {
		t.Errorf("splitText(Hi) = %q", got)
	}
	if got := splitText(""); got != nil {
		t.Errorf("splitText('') = %q", got)
	}
}

func TestNormalizeBody(t *testing.T) {
	in := `{"generation_config":{"response_json_schema":{"snake_prop":{"max_len":1}},"response_schema":{"properties":{"a_b":{"min_items":1}}}},"labels":{"my_label":"x"},"@type":"t","contents":[{"parts":[{"inline_data":{"mime_type":"image/png","data":"AA=="}}]}]}`
	got, err := normalizeBody([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"generationConfig":{"responseJsonSchema":{"snake_prop":{"max_len":1}},"responseSchema":{"properties":{"a_b":{"minItems":1}}}},"labels":{"my_label":"x"},"@type":"t","contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`
	if string(got) != want {
		t.Errorf("normalizeBody\ngot  %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"a":`, `{} {}`, ``} {
		if _, err := normalizeBody([]byte(bad)); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
	if CountTokens("", []byte("nope")) != 1 {
		t.Error("CountTokens of garbage")
	}
}

func TestServiceTierOption(t *testing.T) {
	for _, tier := range []string{"", "priority"} {
		fake := start(t, WithServiceTier(tier))
		resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", goodHeaders(), hiBody)
		u := decodeMap(t, body)["usageMetadata"].(map[string]any)
		if got, _ := u["serviceTier"].(string); got != tier || resp.Header.Get("X-Gemini-Service-Tier") != tier {
			t.Errorf("tier %q: header %q field %v", tier, resp.Header.Get("X-Gemini-Service-Tier"), u["serviceTier"])
		}
		if _, ok := resp.Header["X-Gemini-Service-Tier"]; ok != (tier != "") {
			t.Errorf("tier %q: header present = %v", tier, ok)
		}
	}
}
