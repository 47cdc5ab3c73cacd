package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// The fixed wire codec (wire.go) against the SDK's: the same JSON value
// for every request, the same result or error for every answer.

const equivKey = "sk-ant-equivalence-key"

func equivAdapter(t testing.TB, base string) *Adapter {
	t.Helper()
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(provider.Settings{Name: "claude", BaseURL: base, Credentials: map[string]string{"api_key": equivKey}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// invokeSDK is Invoke as it was before the fixed codec: the SDK's
// parameters, Messages.New and its decoded Message.
func (a *Adapter) invokeSDK(ctx context.Context, req *provider.Request) (*provider.Result, error) {
	model := a.base.Model(req)
	params, err := a.sdkParams(req, model)
	if err != nil {
		return nil, err
	}
	bs, err := betas(req)
	if err != nil {
		return nil, a.base.BadRequest(model, err.Error())
	}
	ctx, cancel := a.base.Attempt(ctx, req)
	defer cancel()
	var raw *http.Response
	opts := []option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&raw)}
	for _, b := range bs {
		opts = append(opts, option.WithHeaderAdd("anthropic-beta", b))
	}
	msg, err := a.client.Messages.New(ctx, params, opts...)
	if raw != nil {
		a.observe(raw.Header, 0)
	}
	if err != nil {
		return nil, a.classify(ctx, err, model)
	}
	if msg == nil {
		id := ""
		if raw != nil {
			id = raw.Header.Get("request-id")
		}
		return nil, a.base.Protocol(model, id, "the response is null")
	}
	res := a.sdkResult(msg, model)
	if raw != nil {
		res.RequestID = raw.Header.Get("request-id")
	}
	return res, nil
}

// streamSDK starts req as Stream did before the fixed codec and reads it
// to its end.
func (a *Adapter) streamSDK(ctx context.Context, req *provider.Request) error {
	model := a.base.Model(req)
	params, err := a.sdkParams(req, model)
	if err != nil {
		return err
	}
	bs, _ := betas(req)
	opts := []option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req))}
	for _, b := range bs {
		opts = append(opts, option.WithHeaderAdd("anthropic-beta", b))
	}
	s := a.client.Messages.NewStreaming(ctx, params, opts...)
	defer s.Close()
	for s.Next() {
	}
	return s.Err()
}

// seedStrings returns the string values of a fuzz corpus directory's files.
func seedStrings(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus %s: %v", dir, err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, pre := range []string{"[]byte(", "string("} {
				if v, ok := strings.CutPrefix(line, pre); ok {
					s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
					if err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func meta(kv ...string) provider.Metadata {
	m := provider.Metadata{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

// equivRequests is a table of requests using every feature the adapter
// maps.
func equivRequests(t testing.TB) map[string]provider.Request {
	weather := provider.ToolDef{Name: "get_weather", Description: "Weather of a city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"enum":["c","f"]}},"required":["city"],"additionalProperties":false,"$defs":{"x":{"type":"number","maximum":1e21}}}`)}
	noArgs := provider.ToolDef{Name: "now"}
	convo := []provider.Message{
		provider.UserText("What's the weather in Paris?"),
		{Role: provider.RoleAssistant, Parts: []provider.Part{
			{Type: provider.PartReasoning, Text: "The user wants weather.", Meta: meta(MetaSignature, `"sig-abc=="`)},
			{Type: provider.PartReasoning, Meta: meta(MetaRedactedThinking, `"EncryptedData=="`)},
			{Type: provider.PartReasoning, Text: "from another provider"},
			{Type: provider.PartText, Text: ""},
			{Type: provider.PartText, Text: "Let me check <that> & \"more\"."},
			{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}},
			{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "toolu_2", Name: "now"}},
			{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "toolu_3", Name: "now", Arguments: json.RawMessage(`null`)}, Cache: provider.PromptCache5m},
		}},
		{Role: provider.RoleUser, Parts: []provider.Part{
			{Type: provider.PartToolResult, ToolResult: &provider.ToolResult{CallID: "toolu_1", Content: "18°C, sunny"}},
			{Type: provider.PartToolResult, ToolResult: &provider.ToolResult{CallID: "toolu_2", Content: "", IsError: true}, Cache: provider.PromptCache1h},
			{Type: provider.PartToolResult, ToolResult: &provider.ToolResult{CallID: "toolu_3", Content: "12:00"}},
			{Type: provider.PartText, Text: "And the picture?", Cache: provider.PromptCache5m},
			{Type: provider.PartImage, Image: &provider.Image{URL: "https://example.com/cat.png"}, Cache: provider.PromptCache1h},
			{Type: provider.PartImage, Image: &provider.Image{Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}, MediaType: "image/png"}},
		}},
		{Role: provider.RoleAssistant, Parts: []provider.Part{
			{Type: provider.PartReasoning, Text: "", Meta: meta(MetaSignature, `""`), Cache: provider.PromptCache5m},
			{Type: provider.PartText, Text: "A cat."},
		}},
	}
	reqs := map[string]provider.Request{
		"prompt":                 {Prompt: "What is the answer?", MaxTokens: 256},
		"system":                 {System: "Be brief.", Prompt: "hi"},
		"system cached 5m":       {System: "Be brief.", Prompt: "hi", PromptCache: provider.PromptCache5m},
		"system cached 1h":       {System: "Be brief.", Prompt: "hi", PromptCache: provider.PromptCache1h, Tools: []provider.ToolDef{weather, noArgs}},
		"conversation":           {System: "sys", Messages: convo, MaxTokens: 2048, Tools: []provider.ToolDef{weather, noArgs}},
		"conversation cached":    {System: "sys", Messages: convo, Prompt: "and now?", PromptCache: provider.PromptCache5m, Tools: []provider.ToolDef{weather, noArgs}},
		"stop nil":               {Prompt: "hi", Stop: nil},
		"stop empty":             {Prompt: "hi", Stop: []string{}},
		"stop":                   {Prompt: "hi", Stop: []string{"\n\nHuman:", "END", ""}},
		"sampling dropped":       {Prompt: "hi", Temperature: ptr(0.5), TopP: ptr(0.9), TopK: ptr(40), Seed: ptr(int64(7))},
		"tools strict cached":    {Prompt: "hi", Tools: []provider.ToolDef{{Name: "a", Strict: true, Cache: provider.PromptCache1h, InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", Cache: provider.PromptCache5m}}},
		"schema null":            {Prompt: "hi", Tools: []provider.ToolDef{{Name: "a", InputSchema: json.RawMessage(`null`)}}},
		"schema properties null": {Prompt: "hi", Tools: []provider.ToolDef{{Name: "a", InputSchema: json.RawMessage(`{"properties":null,"required":[]}`)}}},
		"schema required odd":    {Prompt: "hi", Tools: []provider.ToolDef{{Name: "a", InputSchema: json.RawMessage(`{"properties":{"x":{}},"required":["x",3,null,"y"]}`)}, {Name: "b", InputSchema: json.RawMessage(`{"required":"x","properties":7}`)}, {Name: "c", InputSchema: json.RawMessage(`{"required":[1]}`)}}},
		"schema not object":      {Prompt: "hi", Tools: []provider.ToolDef{{Name: "a", InputSchema: json.RawMessage(`{"type":"string"}`)}}},
		"choice auto":            {Prompt: "hi", Tools: []provider.ToolDef{weather}, ToolChoice: provider.ToolChoiceAuto},
		"choice auto serial":     {Prompt: "hi", Tools: []provider.ToolDef{weather}, ToolChoice: provider.ToolChoiceAuto, DisableParallelToolCalls: true},
		"choice serial no tools": {Prompt: "hi", DisableParallelToolCalls: true},
		"choice none":            {Prompt: "hi", Tools: []provider.ToolDef{weather}, ToolChoice: provider.ToolChoiceNone},
		"choice none no tools":   {Prompt: "hi", ToolChoice: provider.ToolChoiceNone},
		"choice required":        {Prompt: "hi", Tools: []provider.ToolDef{weather}, ToolChoice: provider.ToolChoiceRequired},
		"choice required serial": {Prompt: "hi", Tools: []provider.ToolDef{weather}, ToolChoice: provider.ToolChoiceRequired, DisableParallelToolCalls: true},
		"choice tool":            {Prompt: "hi", Tools: []provider.ToolDef{weather, noArgs}, ToolChoice: "now"},
		"choice tool serial":     {Prompt: "hi", Tools: []provider.ToolDef{weather, noArgs}, ToolChoice: "get_weather", DisableParallelToolCalls: true},
		"structured output":      {Prompt: "hi", ResponseFormat: &provider.ResponseFormat{Name: "r", Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":12345678901234567890}},"required":["n"]}`)}},
		"reasoning default":      {Prompt: "hi", MaxTokens: 4096, Reasoning: &provider.Reasoning{}},
		"reasoning budget":       {Prompt: "hi", MaxTokens: 8192, Reasoning: &provider.Reasoning{Budget: 2048}},
		"reasoning effort":       {Prompt: "hi", MaxTokens: 32000, Reasoning: &provider.Reasoning{Effort: provider.EffortHigh}},
		"reasoning both":         {Prompt: "hi", MaxTokens: 32000, Reasoning: &provider.Reasoning{Effort: provider.EffortLow, Budget: 3000}},
		"reasoning small max":    {Prompt: "hi", MaxTokens: 512, Reasoning: &provider.Reasoning{Effort: provider.EffortLow}},
		"reasoning forced tool":  {Prompt: "hi", Tools: []provider.ToolDef{weather}, ToolChoice: provider.ToolChoiceRequired, Reasoning: &provider.Reasoning{}},
		"reasoning and format":   {Prompt: "hi", MaxTokens: 8192, Reasoning: &provider.Reasoning{Effort: provider.EffortMedium}, ResponseFormat: &provider.ResponseFormat{Schema: json.RawMessage(`{"type":"object"}`)}},
		"betas":                  {Prompt: "hi", Meta: meta(MetaBeta, `["context-1m-2025-08-07","files-api-2025-04-14"]`, "other", `{"x":1}`)},
		"betas bad":              {Prompt: "hi", Meta: meta(MetaBeta, `"one"`)},
		"tier":                   {Prompt: "hi", Tier: provider.TierFastCheap},
		"unicode":                {Prompt: "naïve café 日本 \u2028 \x7f \\ \"q\" </script>", System: "\t\n"},
		"invalid utf-8":          {Prompt: "a\xffb\xc3", System: "\xed\xa0\x80"},
		"bad arguments":          {Messages: []provider.Message{{Role: provider.RoleAssistant, Parts: []provider.Part{{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "t", Name: "x", Arguments: json.RawMessage(`{"a":`)}}}}}, Prompt: "go on"},
		"empty message":          {Messages: []provider.Message{{Role: provider.RoleAssistant, Parts: []provider.Part{{Type: provider.PartText}}}}, Prompt: "hi"},
		"invalid":                {},
	}
	// The arguments the tool-call fuzz target is seeded with, as a tool
	// call's arguments sent back.
	for i, args := range seedStrings(t, "FuzzToolCallArguments") {
		if !json.Valid([]byte(args)) {
			continue
		}
		reqs[fmt.Sprintf("fuzz arguments %d", i)] = provider.Request{Prompt: "go on", Messages: []provider.Message{
			provider.UserText("call it"),
			{Role: provider.RoleAssistant, Parts: []provider.Part{{Type: provider.PartToolCall, ToolCall: &provider.ToolCall{ID: "toolu_f", Name: "f", Arguments: json.RawMessage(args)}}}},
			provider.ToolResults(provider.ToolResult{CallID: "toolu_f", Content: args}),
		}}
	}
	return reqs
}

func ptr[T any](v T) *T { return &v }

// equivModels have each of the thinking styles.
var equivModels = []string{"claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-5", "claude-opus-4-7", "claude-3-haiku-20240307"}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestWireRequestMatchesSDK: for every request and model the fixed
// encoding is the JSON value of the SDK's parameters, and both refuse the
// same requests with the same error.
func TestWireRequestMatchesSDK(t *testing.T) {
	a := equivAdapter(t, "http://127.0.0.1:9")
	reqs := equivRequests(t)
	for _, name := range slices.Sorted(mapsKeys(reqs)) {
		for _, model := range equivModels {
			t.Run(name+"/"+model, func(t *testing.T) {
				req := reqs[name]
				sp, serr := a.sdkParams(&req, model)
				wp, werr := a.params(&req, model)
				if errText(serr) != errText(werr) {
					t.Fatalf("errors differ:\n sdk   %v\n fixed %v", serr, werr)
				}
				if serr != nil {
					return
				}
				sb, serr := sp.MarshalJSON()
				wb, werr := wp.encode()
				if (serr == nil) != (werr == nil) {
					t.Fatalf("encoding errors differ:\n sdk   %v\n fixed %v", serr, werr)
				}
				if serr != nil {
					return
				}
				sv, wv := jsonValue(t, sb), jsonValue(t, wb)
				if !reflect.DeepEqual(sv, wv) {
					t.Fatalf("bodies differ:\n sdk   %s\n fixed %s", sb, wb)
				}
				// Streamed, the body also says so (the SDK sets it
				// with WithJSONSet).
				wp.Stream = true
				wb, err := wp.encode()
				if err != nil {
					t.Fatal(err)
				}
				sv.(map[string]any)["stream"] = true
				if wv := jsonValue(t, wb); !reflect.DeepEqual(sv, wv) {
					t.Fatalf("streamed bodies differ:\n sdk   %s + stream\n fixed %s", sb, wb)
				}
			})
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// captured is one request a test server received.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// recorder is a loopback server that answers every request with the
// current answer and keeps what it received.
type recorder struct {
	srv         *httptest.Server
	mu          sync.Mutex
	got         []captured
	status      int
	contentType string
	body        []byte
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{status: 200, contentType: "application/json"}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, captured{req.Method, req.URL.String(), req.Header.Clone(), b})
		status, ct, body := r.status, r.contentType, r.body
		r.mu.Unlock()
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.Header().Set("request-id", "req_equivalence")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) answer(status int, contentType string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.contentType, r.body = status, contentType, body
}

func (r *recorder) take() []captured {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// sameRequest compares what the server received from the SDK's path and
// from the fixed codec's: method, path, every header and the body's JSON
// value (its length, and so Content-Length, may differ with key order).
func sameRequest(t *testing.T, sdk, fixed []captured) {
	t.Helper()
	if len(sdk) != 1 || len(fixed) != 1 {
		t.Fatalf("requests: sdk %d, fixed %d", len(sdk), len(fixed))
	}
	s, f := sdk[0], fixed[0]
	if s.method != f.method || s.path != f.path {
		t.Errorf("sdk %s %s, fixed %s %s", s.method, s.path, f.method, f.path)
	}
	sh, fh := s.header.Clone(), f.header.Clone()
	sh.Del("Content-Length")
	fh.Del("Content-Length")
	if !reflect.DeepEqual(sh, fh) {
		t.Errorf("headers differ:\n sdk   %v\n fixed %v", sh, fh)
	}
	if !reflect.DeepEqual(jsonValue(t, s.body), jsonValue(t, f.body)) {
		t.Errorf("bodies differ:\n sdk   %s\n fixed %s", s.body, f.body)
	}
}

// TestWireMatchesSDKOnTheWire sends every request of the table through
// the SDK's path and the fixed codec's, streamed and not, to a loopback
// server: the same method, path, headers (x-api-key, anthropic-version,
// anthropic-beta, the SDK's own) and body arrive.
func TestWireMatchesSDKOnTheWire(t *testing.T) {
	rec := newRecorder(t)
	a := equivAdapter(t, rec.srv.URL)
	reqs := equivRequests(t)
	answer := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	events := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-6\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	ctx := context.Background()
	for _, name := range slices.Sorted(mapsKeys(reqs)) {
		t.Run(name, func(t *testing.T) {
			req := reqs[name]
			rec.answer(200, "application/json", answer)
			_, serr := a.invokeSDK(ctx, &req)
			sdk := rec.take()
			_, werr := a.Invoke(ctx, &req)
			fixed := rec.take()
			if name == "bad arguments" {
				// The cause names the SDK's nested parameter types
				// around the same encoding/json error.
				sameOutcome(t, nil, causeOf(serr), nil, causeOf(werr))
			} else {
				sameOutcome(t, nil, serr, nil, werr)
			}
			if len(sdk) == 0 && len(fixed) == 0 {
				return // refused before sending
			}
			sameRequest(t, sdk, fixed)

			rec.answer(200, "text/event-stream", events)
			serr = a.streamSDK(ctx, &req)
			sdk = rec.take()
			s, werr := a.Stream(ctx, &req)
			if werr == nil {
				_, werr = provider.Collect(s)
				s.Close()
			}
			fixed = rec.take()
			if (serr == nil) != (werr == nil) {
				t.Fatalf("stream errors differ:\n sdk   %v\n fixed %v", serr, werr)
			}
			if len(sdk) == 0 && len(fixed) == 0 {
				return
			}
			sameRequest(t, sdk, fixed)
		})
	}
}

// The fixed structs are decoded by encoding/json, the SDK's by its own
// decoder over gjson; they read the same JSON the same way but for two
// things no Messages API answer holds, left out of the table: a key
// repeated in one object (encoding/json keeps the last value, the SDK the
// first) and a key in other letter case ("Model": encoding/json takes it
// for model, the SDK ignores it).

// equivAnswers is a table of answer bodies: the fake's, real-looking ones
// with every block type and usage field, absent and null fields, and
// bodies the fixed structs do not take (which go through the SDK's own
// decoding).
func equivAnswers(t *testing.T) map[string]string {
	answers := map[string]string{
		"text": `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"The answer is 42."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`,
		"every block": `{"id":"msg_02","type":"message","role":"assistant","model":"claude-opus-4-7","container":null,
			"content":[
				{"type":"thinking","thinking":"Let me think.\nStep 1.","signature":"EqQBCkYIBxgCKkA=="},
				{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"},
				{"type":"text","text":"I'll check. ","citations":null},
				{"type":"text","text":"Both cities.","citations":[{"type":"char_location","cited_text":"x","document_index":0,"start_char_index":0,"end_char_index":1}]},
				{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris","units":["c"]}},
				{"type":"tool_use","id":"toolu_01B","name":"now","input":{}},
				{"type":"tool_use","id":"toolu_01C","name":"now","input":null},
				{"type":"tool_use","id":"toolu_01D","name":"now"},
				{"type":"tool_use","id":"toolu_01E","name":"f","input": { "spaced" : [ 1, 2 ] } },
				{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},
				{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://e.com","title":"t","encrypted_content":"x","page_age":null}]},
				{"type":"mystery_block","text":"ignored"}
			],
			"stop_reason":"tool_use","stop_sequence":null,"stop_details":null,
			"usage":{"input_tokens":2095,"output_tokens":503,"cache_creation_input_tokens":2051,"cache_read_input_tokens":1024,
				"cache_creation":{"ephemeral_5m_input_tokens":51,"ephemeral_1h_input_tokens":2000},
				"output_tokens_details":{"thinking_tokens":321},
				"server_tool_use":{"web_search_requests":1},"service_tier":"standard","inference_geo":"us"}}`,
		"every stop reason": `{"model":"claude-haiku-4-5","content":[],"stop_reason":"model_context_window_exceeded","usage":{"input_tokens":1,"output_tokens":1}}`,
		"pause":             `{"model":"claude-haiku-4-5","content":[{"type":"text","text":""}],"stop_reason":"pause_turn","usage":{"input_tokens":1,"output_tokens":0}}`,
		"refusal":           `{"model":"claude-haiku-4-5","content":[],"stop_reason":"refusal","stop_details":{"type":"refusal","category":"cyber"},"usage":{"input_tokens":5,"output_tokens":0}}`,
		"max tokens":        `{"model":"claude-haiku-4-5","content":[{"type":"text","text":"cut"}],"stop_reason":"max_tokens","usage":{"input_tokens":5,"output_tokens":256}}`,
		"stop sequence":     `{"model":"claude-haiku-4-5","content":[{"type":"text","text":"a"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":5,"output_tokens":2}}`,
		"unknown model":     `{"model":"claude-unpriced-9","content":[{"type":"text","text":"a"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`,
		"absent fields":     `{}`,
		"null fields":       `{"id":null,"model":null,"content":null,"stop_reason":null,"usage":null}`,
		"null usage fields": `{"model":"claude-sonnet-4-6","content":[{"type":"text","text":null},{"type":"thinking","thinking":null,"signature":null},{"type":"redacted_thinking","data":null},{"type":"tool_use","id":null,"name":null,"input":null},null],"stop_reason":"end_turn","usage":{"input_tokens":null,"output_tokens":null,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"cache_creation":null,"output_tokens_details":null}}`,
		"null":              `null`,
		"empty":             ``,
		"whitespace":        " \n\t{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]} \n",
		"trailing data":     `{"model":"claude-sonnet-4-6","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":1,"output_tokens":1}} {"more":1}`,
		"trailing garbage":  `{"content":[{"type":"text","text":"ok"}]}garbage`,
		"invalid":           `{"content":[{"type":"text","text":"ok"}`,
		"array":             `[1,2]`,
		"string":            `"message"`,
		"number as text":    `{"content":[{"type":"text","text":42}],"usage":{"input_tokens":"12","output_tokens":6.0}}`,
		"float tokens":      `{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":12.5,"output_tokens":1e3}}`,
		"bool as string":    `{"model":true,"content":[{"type":"text","text":false}],"stop_reason":12}`,
		"content object":    `{"content":{"type":"text","text":"x"},"usage":{"input_tokens":1,"output_tokens":1}}`,
		"usage array":       `{"content":[],"usage":[1,2]}`,
		"huge tokens":       `{"content":[],"usage":{"input_tokens":99999999999999999999,"output_tokens":1}}`,
		"negative tokens":   `{"content":[],"usage":{"input_tokens":-5,"output_tokens":-1}}`,
		"escapes":           `{"content":[{"type":"text","text":"\u00e9\ud83d\ude00\n\t\"\\\/ \u2028"}]}`,
		"invalid utf-8":     "{\"content\":[{\"type\":\"text\",\"text\":\"a\xff\xfeb\"}],\"model\":\"m\xc3\"}",
		"lone surrogate":    `{"content":[{"type":"text","text":"a\ud800b\udc00"}]}`,
		"tool input string": `{"content":[{"type":"tool_use","id":"t","name":"n","input":"{\"a\":1}"}]}`,
		"tool input array":  `{"content":[{"type":"tool_use","id":"t","name":"n","input":[1,2]}]}`,
		"tool input number": `{"content":[{"type":"tool_use","id":"t","name":"n","input":7}]}`,
	}
	// What the fake answers, with every kind of block it sends.
	target := providertest.FuzzTarget{Secret: equivKey, New: func(tb testing.TB, base string, hc *http.Client) provider.Adapter {
		cat, _ := pricing.Default()
		a, err := New(provider.Settings{Name: "claude", BaseURL: base, Credentials: map[string]string{"api_key": equivKey}, Pricer: cat, HTTPClient: hc})
		if err != nil {
			tb.Fatal(err)
		}
		return a
	}}
	fake := anthropicfake.New(anthropicfake.WithAPIKey(equivKey), anthropicfake.WithSeed(1))
	for i, b := range providertest.FakeBodies(t, target, fake, false,
		anthropicfake.TextReply("The answer is 42."),
		anthropicfake.Reply{Text: "The answer is 42.", Usage: anthropicfake.Usage{Input: 12, Output: 6}},
		anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: "hmm"}, Text: "so", ToolUses: []anthropicfake.ToolUse{{Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}, {Name: "now"}},
			Usage: anthropicfake.Usage{Input: 100, Output: 20, CacheRead: 50, CacheCreation5m: 30, CacheCreation1h: 70}},
		anthropicfake.ToolUseReply("get_weather", `{"city":"Paris","units":["c","f"]}`),
		anthropicfake.Reply{Text: "stop", StopReason: "stop_sequence", StopSequence: "END"},
		anthropicfake.Malformed(false, false),
		anthropicfake.Malformed(false, true),
	) {
		answers[fmt.Sprintf("fake %d", i)] = string(b)
	}
	// The stream fuzz target's corpus, which it also feeds as the body of
	// a call that did not stream.
	for i, b := range seedStrings(t, "FuzzStreamBody") {
		answers[fmt.Sprintf("stream corpus %d", i)] = b
	}
	// The tool-call fuzz seeds as a tool_use block's input.
	for i, args := range seedStrings(t, "FuzzToolCallArguments") {
		if json.Valid([]byte(args)) {
			answers[fmt.Sprintf("fuzz input %d", i)] = `{"content":[{"type":"tool_use","id":"t","name":"f","input":` + args + `}],"stop_reason":"tool_use"}`
		}
	}
	return answers
}

// sameOutcome compares the SDK path's result or error with the fixed
// codec's.
func sameOutcome(t *testing.T, sres *provider.Result, serr error, wres *provider.Result, werr error) {
	t.Helper()
	if errText(serr) != errText(werr) {
		t.Fatalf("errors differ:\n sdk   %v\n fixed %v", serr, werr)
	}
	if serr != nil {
		spe, sok := serr.(*provider.Error)
		wpe, wok := werr.(*provider.Error)
		if sok != wok {
			t.Fatalf("error types differ: %T, %T", serr, werr)
		}
		if sok {
			if spe.Kind != wpe.Kind || !reflect.DeepEqual(spe.Diagnostic, wpe.Diagnostic) || spe.RetryAfter != wpe.RetryAfter || errText(spe.Err) != errText(wpe.Err) {
				t.Fatalf("errors differ:\n sdk   %#v\n fixed %#v", spe, wpe)
			}
		}
		return
	}
	if sres == nil && wres == nil {
		return // only the errors were compared
	}
	sres.Latency, wres.Latency = 0, 0
	if !reflect.DeepEqual(sres, wres) {
		sj, _ := json.Marshal(sres)
		wj, _ := json.Marshal(wres)
		t.Fatalf("results differ:\n sdk   %s\n fixed %s", sj, wj)
	}
	for i, p := range wres.Parts {
		if p.Type == provider.PartToolCall && p.ToolCall == nil {
			t.Fatalf("part %d: tool call not linked", i)
		}
	}
}

// TestWireAnswerMatchesSDK serves every answer of the table, with JSON and
// other content types, to the SDK's path and the fixed codec's: the same
// provider.Result, or the same error.
func TestWireAnswerMatchesSDK(t *testing.T) {
	rec := newRecorder(t)
	a := equivAdapter(t, rec.srv.URL)
	answers := equivAnswers(t)
	ctx := context.Background()
	req := provider.Request{Prompt: "hi", Model: "claude-sonnet-4-6"}
	for _, name := range slices.Sorted(mapsKeys(answers)) {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/problem+json", "text/html", ""} {
			if ct != "application/json" && !strings.HasPrefix(name, "text") && name != "null" && name != "empty" {
				continue
			}
			t.Run(name+"/"+ct, func(t *testing.T) {
				rec.answer(200, ct, []byte(answers[name]))
				sres, serr := a.invokeSDK(ctx, &req)
				wres, werr := a.Invoke(ctx, &req)
				rec.take()
				sameOutcome(t, sres, serr, wres, werr)
			})
		}
	}
}

// TestWireErrorsMatchSDK: error answers (the error fuzz target's corpus
// and the fake's faults) still come back as the SDK's *anthropic.Error and
// are classified as before.
func TestWireErrorsMatchSDK(t *testing.T) {
	rec := newRecorder(t)
	a := equivAdapter(t, rec.srv.URL)
	ctx := context.Background()
	req := provider.Request{Prompt: "hi"}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzErrorBody", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		status, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(lines[1], "int("), ")"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "[]byte("), ")"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range []string{"application/json", "text/html"} {
			t.Run(filepath.Base(f)+"/"+ct, func(t *testing.T) {
				rec.answer(status, ct, []byte(body))
				sres, serr := a.invokeSDK(ctx, &req)
				wres, werr := a.Invoke(ctx, &req)
				rec.take()
				if serr == nil {
					t.Fatalf("status %d gave no error", status)
				}
				sameOutcome(t, sres, serr, wres, werr)
			})
		}
	}
	// The SDK's own error type is what the classifier reads.
	rec.answer(529, "application/json", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	var body []byte
	err := a.client.Post(ctx, messagesPath, []byte(`{}`), &body, option.WithMaxRetries(0))
	var apiErr *anthropic.Error
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != 529 {
		t.Fatalf("Post error = %T %v, want *anthropic.Error", err, err)
	}
	rec.take()
}

// TestWireRequestTimeoutHeader: the attempt timeout reaches the SDK, which
// sends it as X-Stainless-Timeout, as Messages.New did.
func TestWireRequestTimeoutHeader(t *testing.T) {
	rec := newRecorder(t)
	a := equivAdapter(t, rec.srv.URL)
	rec.answer(200, "application/json", []byte(`{"content":[]}`))
	if _, err := a.Invoke(context.Background(), &provider.Request{Prompt: "hi", Timeout: 42 * time.Second}); err != nil {
		t.Fatal(err)
	}
	got := rec.take()
	if len(got) != 1 || got[0].header.Get("X-Stainless-Timeout") != "42" || got[0].path != "/v1/messages" {
		t.Fatalf("got %+v", got)
	}
	if !bytes.Contains(got[0].body, []byte(`"max_tokens"`)) {
		t.Fatalf("body %s", got[0].body)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// causeOf is err without its cause's text, which names types of the
// codec.
func causeOf(err error) error {
	pe, ok := err.(*provider.Error)
	if !ok || pe.Err == nil {
		return err
	}
	c := *pe
	if !strings.HasSuffix(pe.Err.Error(), "json: error calling MarshalJSON for type json.RawMessage: unexpected end of JSON input") {
		return err
	}
	c.Err = nil
	return &c
}

// sdkEvent is what the stream read of an event as the SDK decoded it.
func sdkEvent(u *anthropic.MessageStreamEventUnion) wireEvent {
	m := u.Message
	e := wireEvent{Type: u.Type, Index: u.Index, Message: wireAnswer{ID: m.ID, Model: string(m.Model), StopReason: string(m.StopReason), Content: make([]wireContent, len(m.Content))}}
	for i, b := range m.Content {
		e.Message.Content[i] = wireContent{Type: b.Type, Text: b.Text, Thinking: b.Thinking, Signature: b.Signature, Data: b.Data, ID: b.ID, Name: b.Name, Input: b.Input}
	}
	mu := m.Usage
	e.Message.Usage = wireUsage{InputTokens: mu.InputTokens, OutputTokens: mu.OutputTokens, CacheReadInputTokens: mu.CacheReadInputTokens, CacheCreationInputTokens: mu.CacheCreationInputTokens}
	e.Message.Usage.CacheCreation.Ephemeral1hInputTokens = mu.CacheCreation.Ephemeral1hInputTokens
	e.Message.Usage.OutputTokensDetails.ThinkingTokens = mu.OutputTokensDetails.ThinkingTokens
	cb := u.ContentBlock
	e.ContentBlock = wireBlockStart{Type: cb.Type, Text: cb.Text, Thinking: cb.Thinking, Signature: cb.Signature, Data: cb.Data, ID: cb.ID, Name: cb.Name}
	d := u.Delta
	e.Delta = wireDelta{Type: d.Type, Text: d.Text, PartialJSON: d.PartialJSON, Thinking: d.Thinking, Signature: d.Signature, StopReason: string(d.StopReason)}
	us := u.Usage
	e.Usage = wireUsage{InputTokens: us.InputTokens, OutputTokens: us.OutputTokens, CacheReadInputTokens: us.CacheReadInputTokens, CacheCreationInputTokens: us.CacheCreationInputTokens}
	e.Usage.OutputTokensDetails.ThinkingTokens = us.OutputTokensDetails.ThinkingTokens
	return e
}

// TestWireEventsMatchSDK decodes every event of the stream bodies (the
// stream fuzz target's corpus, the fake's streams, events with every
// delta and usage field, and data the fixed structs do not take) into the
// fixed event and the SDK's: the stream reads the same fields from both,
// or both fail the same way.
func TestWireEventsMatchSDK(t *testing.T) {
	bodies := seedStrings(t, "FuzzStreamBody")
	target := providertest.FuzzTarget{Secret: equivKey, New: func(tb testing.TB, base string, hc *http.Client) provider.Adapter {
		cat, _ := pricing.Default()
		a, err := New(provider.Settings{Name: "claude", BaseURL: base, Credentials: map[string]string{"api_key": equivKey}, Pricer: cat, HTTPClient: hc})
		if err != nil {
			tb.Fatal(err)
		}
		return a
	}}
	fake := anthropicfake.New(anthropicfake.WithAPIKey(equivKey), anthropicfake.WithSeed(1))
	for _, b := range providertest.FakeBodies(t, target, fake, true,
		anthropicfake.Reply{Thinking: &anthropicfake.Thinking{Text: "hmm, let me see"}, Text: "so it is", ToolUses: []anthropicfake.ToolUse{{Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}},
			Usage: anthropicfake.Usage{Input: 100, Output: 20, CacheRead: 50, CacheCreation5m: 30, CacheCreation1h: 70}},
		anthropicfake.OverloadedMidStream(2),
		anthropicfake.Malformed(true, false),
		anthropicfake.Malformed(true, true),
	) {
		bodies = append(bodies, string(b))
	}
	var data []string
	for _, body := range bodies {
		for _, frame := range strings.Split(body, "\n\n") {
			for _, line := range strings.Split(frame, "\n") {
				if v, ok := strings.CutPrefix(line, "data:"); ok {
					data = append(data, strings.TrimPrefix(v, " ")+"\n")
				}
			}
		}
	}
	data = append(data,
		`{"type":"message_start","message":{"id":"msg_1","model":"claude-opus-4-7","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5,"cache_creation_input_tokens":7,"cache_creation":{"ephemeral_1h_input_tokens":7},"output_tokens_details":{"thinking_tokens":0}}}}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"redacted_thinking","data":"EmwK"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"hi","citations":null}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQB=="}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"step"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location"}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":12,"output_tokens":40,"cache_read_input_tokens":5,"cache_creation_input_tokens":7,"output_tokens_details":{"thinking_tokens":25},"server_tool_use":null}}`,
		`{"type":"message_delta","delta":{"stop_reason":null},"usage":null}`,
		`{"type":"message_stop"}`,
		`{"type":"ping"}`,
		`{}`, `null`, `[]`, `"x"`, `7`,
		`{"type":"content_block_delta","index":"2","delta":{"type":"text_delta","text":5}}`,
		`{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"a\xffb"}}`,
		`{"type":"message_delta","usage":{"output_tokens":"12"}}`,
		`{"type":"content_block_start","index":0,"content_block":[1]}`,
		`{"type":"message_start","message":{"content":{"a":1},"usage":{"input_tokens":1e2}}}`,
		`{"type":"message_stop"} trailing`,
		`{"type":"message_st`,
	)
	for i, d := range data {
		var u anthropic.MessageStreamEventUnion
		serr := json.Unmarshal([]byte(d), &u)
		var w wireEvent
		werr := json.Unmarshal([]byte(d), &w)
		if errText(serr) != errText(werr) {
			t.Errorf("event %d %q: errors differ:\n sdk   %v\n fixed %v", i, d, serr, werr)
			continue
		}
		if serr != nil {
			continue
		}
		s := sdkEvent(&u)
		// An empty content list and none read the same.
		if len(s.Message.Content) == 0 && len(w.Message.Content) == 0 {
			s.Message.Content, w.Message.Content = nil, nil
		}
		if !reflect.DeepEqual(s, w) {
			t.Errorf("event %d %q:\n sdk   %+v\n fixed %+v", i, d, s, w)
		}
	}
	if len(data) < 40 {
		t.Fatalf("only %d events", len(data))
	}
}

// deltaEvents are content_block_delta events as the API writes them and
// as it could: decodeDelta takes the first kind, and leaves the rest to
// json.Unmarshal.
var deltaEvents = []string{
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, wor"}}`,
	`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"a \"quote\"\n\u00e9"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"step"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQB=="}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
	`{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location"}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}`,
	`{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","TEXT":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","te\u0078t":"a"}}`,
	`{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":1e1,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":99999999999999999999,"delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\xffb"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}} trailing`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"`,
	`{"type":"content_block_delta","index":0}`,
	`{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`,
	`{"type":"content_block_delta","index":0,"delta":[]}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"extra":1}`,
}

// The fast path decodes a delta exactly as json.Unmarshal does, and takes
// the events the API writes.
func TestDecodeDeltaMatchesUnmarshal(t *testing.T) {
	for i, d := range deltaEvents {
		checkDecodeDelta(t, []byte(d))
		var e wireEvent
		if took := decodeDelta([]byte(d), &e); took != (i < 6) {
			t.Errorf("decodeDelta(%s) = %v, want %v", d, took, i < 6)
		}
	}
}

func checkDecodeDelta(t *testing.T, data []byte) {
	t.Helper()
	var fast wireEvent
	if !decodeDelta(data, &fast) {
		return
	}
	type plain wireEvent
	var want wireEvent
	if err := json.Unmarshal(data, (*plain)(&want)); err != nil {
		t.Fatalf("decodeDelta took %q, which json.Unmarshal refuses: %v", data, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("decodeDelta(%q) = %+v, json.Unmarshal %+v", data, fast, want)
	}
}

func FuzzDecodeDelta(f *testing.F) {
	for _, d := range deltaEvents {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeDelta(t, data) })
}

// BenchmarkDecodeEvent decodes a text delta: "fast" as the stream does,
// "unmarshal" with json.Unmarshal, what it did before the fast path.
func BenchmarkDecodeEvent(b *testing.B) {
	data := []byte(deltaEvents[1])
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var e wireEvent
			if decodeEvent(data, &e) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		type plain wireEvent
		for b.Loop() {
			var e wireEvent
			if json.Unmarshal(data, (*plain)(&e)) != nil {
				b.Fatal("refused")
			}
		}
	})
}
