package geminifake

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
)

func TestSDKNonStreamText(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fake := start(t, WithClock(func() time.Time { return now }))
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{Text: "Hello <there> & welcome.", Usage: Usage{Prompt: 12, Candidates: 5}})

	resp, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hello <there> & welcome." {
		t.Errorf("text = %q", resp.Text())
	}
	c := resp.Candidates[0]
	if c.Content.Role != "model" || c.FinishReason != genai.FinishReasonStop || c.Index != 0 {
		t.Errorf("candidate = role %q finish %q index %d", c.Content.Role, c.FinishReason, c.Index)
	}
	if resp.ModelVersion != "gemini-2.5-flash" || len(resp.ResponseID) != 23 {
		t.Errorf("modelVersion %q responseId %q", resp.ModelVersion, resp.ResponseID)
	}
	u := resp.UsageMetadata
	if u.PromptTokenCount != 12 || u.CandidatesTokenCount != 5 || u.TotalTokenCount != 17 || u.ThoughtsTokenCount != 0 ||
		len(u.PromptTokensDetails) != 1 || u.PromptTokensDetails[0].Modality != genai.MediaModalityText || u.PromptTokensDetails[0].TokenCount != 12 {
		t.Errorf("usage = %+v", u)
	}

	h := resp.SDKHTTPResponse.Headers
	want := map[string]string{
		"Content-Type":          "application/json; charset=UTF-8",
		"X-Gemini-Service-Tier": "standard",
		"Server":                "scaffolding on HTTPServer2",
		"Date":                  "Mon, 30 Nov 2026 12:00:00 GMT",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if !strings.HasPrefix(h.Get("Server-Timing"), "gfet4t7; dur=") || !slices.Equal(h.Values("Vary"), []string{"Origin", "X-Origin", "Referer"}) {
		t.Errorf("server-timing %q vary %q", h.Get("Server-Timing"), h.Values("Vary"))
	}
	assertNoRateLimitHeaders(t, h)

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || r.Model != "gemini-2.5-flash" || r.Action != "generateContent" {
		t.Errorf("recorded %s %s model %q action %q", r.Method, r.Path, r.Model, r.Action)
	}
	if r.APIKey() != testKey || r.Header.Get("x-goog-api-key") != testKey || r.Stream() || r.LastUserText() != "Hi" {
		t.Errorf("APIKey/Stream/LastUserText = %q/%v/%q", r.APIKey(), r.Stream(), r.LastUserText())
	}
}

// assertNoRateLimitHeaders checks that no rate-limit header leaks in: the
// Gemini API sends none, ever.
func assertNoRateLimitHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for k := range h {
		lk := strings.ToLower(k)
		if lk == "retry-after" || strings.Contains(lk, "ratelimit") || strings.Contains(lk, "rate-limit") {
			t.Errorf("unexpected rate-limit header %s: %q", k, h.Get(k))
		}
	}
}

func TestSDKDefaultEchoReply(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	resp, err := client.Models.GenerateContent(testCtx(t), "models/gemini-2.5-flash", genai.Text("ping me"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "echo: ping me" {
		t.Errorf("text = %q", resp.Text())
	}
	if got := resp.UsageMetadata.PromptTokenCount; got != int32(CountTokens("gemini-2.5-flash", fake.Requests()[0].Body)) || got < 5 {
		t.Errorf("prompt tokens = %d", got)
	}
}

func TestSDKSystemInstructionAndTools(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("You are terse.", genai.RoleUser),
		MaxOutputTokens:   1024,
		ThinkingConfig:    &genai.ThinkingConfig{ThinkingBudget: genai.Ptr[int32](512), IncludeThoughts: true},
		Tools:             []*genai.Tool{weatherTool()},
		ToolConfig:        &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAuto}},
	}
	if _, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Weather in Paris?"), cfg); err != nil {
		t.Fatal(err)
	}
	req, err := fake.Requests()[0].Generate()
	if err != nil {
		t.Fatal(err)
	}
	if req.SystemInstruction == nil || req.SystemInstruction.Parts[0].Text != "You are terse." {
		t.Errorf("systemInstruction = %+v", req.SystemInstruction)
	}
	g := req.GenerationConfig
	if g == nil || g.MaxOutputTokens == nil || *g.MaxOutputTokens != 1024 || g.ThinkingConfig == nil ||
		g.ThinkingConfig.ThinkingBudget == nil || *g.ThinkingConfig.ThinkingBudget != 512 || !g.ThinkingConfig.IncludeThoughts {
		t.Errorf("generationConfig = %+v", g)
	}
	if len(req.Tools) != 1 || len(req.Tools[0].FunctionDeclarations) != 1 {
		t.Fatalf("tools = %+v", req.Tools)
	}
	d := req.Tools[0].FunctionDeclarations[0]
	wantSchema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	if d.Name != "get_weather" || d.Description != "Get weather" || !jsonEqual(t, d.ParametersJSONSchema, []byte(wantSchema)) || d.Parameters != nil {
		t.Errorf("declaration = %s %q %s", d.Name, d.Description, d.ParametersJSONSchema)
	}
	if !jsonEqual(t, req.ToolConfig, []byte(`{"functionCallingConfig":{"mode":"AUTO"}}`)) {
		t.Errorf("toolConfig = %s", req.ToolConfig)
	}
}

func TestSDKFunctionCallWithSignature(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{FunctionCalls: []FunctionCall{{Name: "get_weather", Args: json.RawMessage(`{"city": "Paris", "days": [1, 2]}`)}}})

	resp, err := client.Models.GenerateContent(testCtx(t), "gemini-3.5-flash", genai.Text("Weather in Paris?"),
		&genai.GenerateContentConfig{Tools: []*genai.Tool{weatherTool()}})
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.FunctionCalls()
	if len(calls) != 1 {
		t.Fatalf("function calls = %v", calls)
	}
	fc := calls[0]
	if fc.Name != "get_weather" || fc.Args["city"] != "Paris" || len(fc.ID) != 8 {
		t.Errorf("call = %+v", fc)
	}
	part := resp.Candidates[0].Content.Parts[0]
	if len(part.ThoughtSignature) == 0 || !strings.HasPrefix(base64.StdEncoding.EncodeToString(part.ThoughtSignature), "E") {
		t.Errorf("thought signature = %q", part.ThoughtSignature)
	}
	c := resp.Candidates[0]
	// (The SDK drops candidates[].finishMessage; wire_test checks it.)
	if c.FinishReason != genai.FinishReasonStop {
		t.Errorf("finish = %q", c.FinishReason)
	}
}

// toolLoop runs the first turn of a tool loop and returns the history to
// send back: user question, model call (as received), function response.
func toolLoop(t *testing.T, client *genai.Client, model string) ([]*genai.Content, *genai.GenerateContentConfig) {
	t.Helper()
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{weatherTool()}}
	history := genai.Text("Weather in Paris?")
	resp, err := client.Models.GenerateContent(testCtx(t), model, history, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fc := resp.FunctionCalls()[0]
	result := genai.NewPartFromFunctionResponse(fc.Name, map[string]any{"result": "18C"})
	result.FunctionResponse.ID = fc.ID
	history = append(history, resp.Candidates[0].Content, genai.NewContentFromParts([]*genai.Part{result}, genai.RoleUser))
	return history, cfg
}

func TestSDKToolLoopEchoesSignature(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	script := func() {
		fake.Enqueue(FunctionCallReply("get_weather", `{"city":"Paris"}`), TextReply("It is 18C in Paris."))
	}

	script()
	history, cfg := toolLoop(t, client, "gemini-3.5-flash")
	resp, err := client.Models.GenerateContent(testCtx(t), "gemini-3.5-flash", history, cfg)
	if err != nil {
		t.Fatalf("second turn with the signature echoed: %v", err)
	}
	if resp.Text() != "It is 18C in Paris." {
		t.Errorf("text = %q", resp.Text())
	}
	// A Gemini 3 text answer carries a signature on its text part too.
	if len(resp.Candidates[0].Content.Parts[0].ThoughtSignature) == 0 {
		t.Error("text part without thought signature")
	}
	// The second request carried the call, its signature and the result.
	req, err := fake.Requests()[1].Generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Contents) != 3 || req.Contents[1].Role != "model" || req.Contents[2].Role != "user" {
		t.Fatalf("contents = %+v", req.Contents)
	}
	call, res := req.Contents[1].Parts[0], req.Contents[2].Parts[0]
	if call.FunctionCall == nil || call.FunctionCall.Name != "get_weather" || call.ThoughtSignature == "" ||
		res.FunctionResponse == nil || res.FunctionResponse.ID != call.FunctionCall.ID || !jsonEqual(t, res.FunctionResponse.Response, []byte(`{"result":"18C"}`)) {
		t.Errorf("call %+v / result %+v", call, res.FunctionResponse)
	}
	if got := fake.Requests()[1].LastUserText(); got != `get_weather: {"result":"18C"}` {
		t.Errorf("LastUserText = %q", got)
	}

	// Stripped: the real 400, and the queued reply is not consumed.
	script()
	history, cfg = toolLoop(t, client, "gemini-3.5-flash")
	history[1].Parts[0].ThoughtSignature = nil
	_, err = client.Models.GenerateContent(testCtx(t), "gemini-3.5-flash", history, cfg)
	e := apiError(t, err)
	want := "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:get_weather` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
	if e.Code != 400 || e.Status != "INVALID_ARGUMENT" || e.Message != want {
		t.Errorf("stripped: %d %s %q", e.Code, e.Status, e.Message)
	}
	if fake.Pending(RouteGenerate) != 1 {
		t.Errorf("pending = %d", fake.Pending(RouteGenerate))
	}

	// Altered: "Corrupted thought signature."
	history[1].Parts[0].ThoughtSignature = []byte("not the issued signature")
	_, err = client.Models.GenerateContent(testCtx(t), "gemini-3.5-flash", history, cfg)
	if e := apiError(t, err); e.Code != 400 || e.Message != "Corrupted thought signature." {
		t.Errorf("altered: %d %q", e.Code, e.Message)
	}

	// The documented dummy value passes.
	history[1].Parts[0].ThoughtSignature = []byte(SkipSignatureValidator)
	if _, err := client.Models.GenerateContent(testCtx(t), "gemini-3.5-flash", history, cfg); err != nil {
		t.Errorf("dummy signature: %v", err)
	}

	// Gemini 2.5 does not enforce signatures.
	script()
	history, cfg = toolLoop(t, client, "gemini-2.5-flash")
	if len(history[1].Parts[0].ThoughtSignature) == 0 {
		t.Error("2.5 thinking model sent no signature")
	}
	history[1].Parts[0].ThoughtSignature = nil
	if _, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", history, cfg); err != nil {
		t.Errorf("2.5 without signature: %v", err)
	}
}

func TestSignatureOptions(t *testing.T) {
	history := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`
	for _, tt := range []struct {
		opts  []Option
		model string
		want  int
	}{
		{nil, "gemini-3.5-flash", 400},
		{nil, "gemini-2.5-flash", 200},
		{[]Option{WithRequireThoughtSignatures()}, "gemini-2.5-flash", 400},
		{[]Option{WithoutThoughtSignatureCheck()}, "gemini-3.5-flash", 200},
	} {
		fake := start(t, tt.opts...)
		resp, body := raw(t, fake, "POST", "/v1beta/models/"+tt.model+":generateContent", goodHeaders(), history)
		if resp.StatusCode != tt.want {
			t.Errorf("%s %d opts: %d %s", tt.model, len(tt.opts), resp.StatusCode, body)
		}
	}
	// Only the current turn is checked: an older unsigned call passes.
	older := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]},` +
		`{"role":"model","parts":[{"text":"done"}]},{"role":"user","parts":[{"text":"next"}]}]}`
	fake := start(t)
	if resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-3.5-flash:generateContent", goodHeaders(), older); resp.StatusCode != 200 {
		t.Errorf("older turn: %d %s", resp.StatusCode, body)
	}
	for _, m := range []struct {
		name string
		want bool
	}{{"gemini-3-flash-preview", true}, {"models/gemini-3.5-flash", true}, {"gemini-4-argon", true}, {"gemini-2.5-pro", false}, {"gemini-30x", true}, {"gemma-3", false}, {"gemini-", false}} {
		if got := requiresSignatures(m.name); got != m.want {
			t.Errorf("requiresSignatures(%q) = %v", m.name, got)
		}
	}
}

func TestSDKStreamText(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	text := "The weather in Paris is mild today, with light winds from the west and a high of eighteen degrees."
	fake.Enqueue(Reply{
		Thought: &Thought{Text: "**Checking the forecast**\n\nThe user wants Paris."},
		Text:    text,
		Usage:   Usage{Prompt: 20, Candidates: 30, Thoughts: 40},
	})

	var got strings.Builder
	var chunks []*genai.GenerateContentResponse
	for chunk, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("Weather?"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, chunk)
		got.WriteString(chunk.Text())
	}
	if got.String() != text {
		t.Errorf("reassembled %q", got.String())
	}
	if len(chunks) < 5 {
		t.Fatalf("%d chunks", len(chunks))
	}
	// The first chunk is the thought; every later one holds only new text.
	if p := chunks[0].Candidates[0].Content.Parts[0]; !p.Thought || !strings.HasPrefix(p.Text, "**Checking") || chunks[0].Text() != "" {
		t.Errorf("first chunk = %+v", p)
	}
	prev := int32(-1)
	seen := ""
	for i, c := range chunks {
		last := i == len(chunks)-1
		if c.ResponseID != chunks[0].ResponseID || c.ModelVersion != "gemini-2.5-flash" {
			t.Errorf("chunk %d id/version %q/%q", i, c.ResponseID, c.ModelVersion)
		}
		if i > 0 && (c.Text() == "" || strings.Contains(seen, c.Text()) && len(c.Text()) > 3) {
			t.Errorf("chunk %d text %q repeats earlier text", i, c.Text())
		}
		seen += c.Text()
		u := c.UsageMetadata
		if u == nil || u.PromptTokenCount != 20 || u.ThoughtsTokenCount != 40 || u.CandidatesTokenCount < prev ||
			u.TotalTokenCount != 20+40+u.CandidatesTokenCount {
			t.Errorf("chunk %d usage %+v", i, u)
		}
		prev = u.CandidatesTokenCount
		if fr := c.Candidates[0].FinishReason; (fr == genai.FinishReasonStop) != last {
			t.Errorf("chunk %d finishReason %q", i, fr)
		}
		if c.SDKHTTPResponse.Headers.Get("Content-Type") != "text/event-stream" {
			t.Errorf("chunk %d content-type %q", i, c.SDKHTTPResponse.Headers.Get("Content-Type"))
		}
	}
	if prev != 30 {
		t.Errorf("final candidates tokens %d", prev)
	}
	if r := fake.Requests()[0]; r.Action != "streamGenerateContent" || r.Query().Get("alt") != "sse" || !r.Stream() {
		t.Errorf("recorded %s?%s", r.Path, r.RawQuery)
	}
}

func TestSDKStreamFunctionCall(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{
		Text: "Let me check both cities.",
		FunctionCalls: []FunctionCall{
			{Name: "get_weather", Args: json.RawMessage(`{"city":"Paris","opts":{"units":"C","note":"a, b: \"c\""}}`)},
			{Name: "get_weather", Args: json.RawMessage(`{"city":"Zürich"}`)},
		},
	})
	var calls []*genai.Part
	var n int
	var last *genai.GenerateContentResponse
	for chunk, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-3.5-flash", genai.Text("Weather?"),
		&genai.GenerateContentConfig{Tools: []*genai.Tool{weatherTool()}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		last = chunk
		for _, p := range chunk.Candidates[0].Content.Parts {
			if p.FunctionCall != nil {
				if len(chunk.Candidates[0].Content.Parts) != 1 {
					t.Errorf("a call shares its chunk: %+v", chunk.Candidates[0].Content.Parts)
				}
				calls = append(calls, p)
			}
		}
	}
	if len(calls) != 2 || n < 4 {
		t.Fatalf("%d calls in %d chunks", len(calls), n)
	}
	// Each arrives whole; only the first (parallel calls) carries the signature.
	if a := calls[0].FunctionCall.Args; a["city"] != "Paris" || a["opts"].(map[string]any)["note"] != `a, b: "c"` {
		t.Errorf("args = %v", a)
	}
	if calls[1].FunctionCall.Args["city"] != "Zürich" || calls[0].FunctionCall.ID == calls[1].FunctionCall.ID {
		t.Errorf("second call = %+v", calls[1].FunctionCall)
	}
	if len(calls[0].ThoughtSignature) == 0 || len(calls[1].ThoughtSignature) != 0 {
		t.Errorf("signatures %q / %q", calls[0].ThoughtSignature, calls[1].ThoughtSignature)
	}
	if c := last.Candidates[0]; c.FinishReason != genai.FinishReasonStop || c.Content.Parts[0].FunctionCall == nil {
		t.Errorf("last chunk = %+v", c)
	}
}

func TestSDKUsageSemantics(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	u := Usage{Prompt: 1000, Cached: 600, Candidates: 20, Thoughts: 30, ToolUsePrompt: 5}
	if u.Total() != 1055 {
		t.Fatalf("Total = %d", u.Total())
	}
	fake.Enqueue(Reply{Text: "one two three four five six seven", Usage: u}, Reply{Text: "one two three four five six seven", Usage: u})

	check := func(where string, m *genai.GenerateContentResponseUsageMetadata) {
		t.Helper()
		if m.PromptTokenCount != 1000 || m.CachedContentTokenCount != 600 || m.CandidatesTokenCount != 20 ||
			m.ThoughtsTokenCount != 30 || m.ToolUsePromptTokenCount != 5 || m.TotalTokenCount != 1055 {
			t.Errorf("%s: usage %+v", where, m)
		}
		if len(m.CacheTokensDetails) != 1 || m.CacheTokensDetails[0].TokenCount != 600 {
			t.Errorf("%s: cacheTokensDetails %+v", where, m.CacheTokensDetails)
		}
	}
	resp, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	check("unary", resp.UsageMetadata)
	var final *genai.GenerateContentResponse
	for chunk, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if chunk.UsageMetadata.PromptTokenCount != 1000 || chunk.UsageMetadata.CachedContentTokenCount != 600 {
			t.Errorf("chunk usage %+v", chunk.UsageMetadata)
		}
		final = chunk
	}
	check("final chunk", final.UsageMetadata)

	// A scripted Usage whose cache exceeds the prompt is a scripting mistake.
	defer func() {
		if recover() == nil {
			t.Error("no panic for Cached > Prompt")
		}
	}()
	fake.Enqueue(Reply{Text: "x", Usage: Usage{Prompt: 1, Cached: 2}})
}

func TestSDKBlockedPrompt(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(BlockedPrompt("PROHIBITED_CONTENT"), BlockedPrompt("SAFETY"), BlockedPrompt("SAFETY"))

	resp, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("something bad"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Candidates) != 0 || resp.PromptFeedback == nil || resp.PromptFeedback.BlockReason != genai.BlockedReasonProhibitedContent ||
		resp.Text() != "" || resp.UsageMetadata.PromptTokenCount == 0 || resp.UsageMetadata.CandidatesTokenCount != 0 {
		t.Errorf("blocked = %+v / %+v", resp.PromptFeedback, resp.UsageMetadata)
	}
	resp, err = client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("something bad"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pf := resp.PromptFeedback
	if pf.BlockReason != genai.BlockedReasonSafety || len(pf.SafetyRatings) != 4 || !pf.SafetyRatings[3].Blocked ||
		pf.SafetyRatings[3].Probability != genai.HarmProbabilityHigh {
		t.Errorf("safety feedback = %+v", pf)
	}
	n := 0
	for chunk, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("something bad"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if len(chunk.Candidates) != 0 || chunk.PromptFeedback.BlockReason != genai.BlockedReasonSafety {
			t.Errorf("streamed block = %+v", chunk)
		}
	}
	if n != 1 {
		t.Errorf("%d chunks", n)
	}
}

func TestSDKErrorConstructors(t *testing.T) {
	tests := []struct {
		name    string
		reply   Reply
		code    int
		status  string
		message string
		check   func(t *testing.T, e genai.APIError)
	}{
		{"InvalidArgument", InvalidArgument("bad thing"), 400, "INVALID_ARGUMENT", "bad thing", nil},
		{"APIKeyInvalid", APIKeyInvalid(), 400, "INVALID_ARGUMENT", MessageAPIKeyInvalid, checkKeyDetails},
		{"ContextOverflow", ContextOverflow(1200000, 1048576), 400, "INVALID_ARGUMENT",
			"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", nil},
		{"LocationNotSupported", LocationNotSupported(), 400, "FAILED_PRECONDITION", MessageLocation, nil},
		{"BillingRequired", BillingRequired(), 400, "FAILED_PRECONDITION", MessageFreeTierRegion, nil},
		{"MissingAPIKey", MissingAPIKey(), 403, "PERMISSION_DENIED", MessageUnregisteredCaller, nil},
		{"PermissionDenied", PermissionDenied(), 403, "PERMISSION_DENIED", MessagePermissionDenied, nil},
		{"ModelNotFound", ModelNotFound("gemini-nope"), 404, "NOT_FOUND",
			"models/gemini-nope is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", nil},
		{"RateLimited", RateLimited("gemini-2.5-flash", 31*time.Second), 429, "RESOURCE_EXHAUSTED", "", checkQuota(QuotaPerMinute, "31s", "15")},
		{"DailyQuotaExceeded", DailyQuotaExceeded("gemini-3.6-flash", 23472316927*time.Nanosecond), 429, "RESOURCE_EXHAUSTED", "", checkQuota(QuotaPerDay, "23s", "20")},
		{"Internal", Internal(), 500, "INTERNAL", MessageInternal, nil},
		{"Unavailable", Unavailable(), 503, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil},
		{"DeadlineExceeded", DeadlineExceeded(), 504, "DEADLINE_EXCEEDED", MessageDeadlineExceeded, nil},
		{"CorruptedThoughtSignature", CorruptedThoughtSignature(), 400, "INVALID_ARGUMENT", "Corrupted thought signature.", nil},
		{"BadGateway", BadGateway(), 502, "502 Bad Gateway", BadGatewayHTML, nil},
		{"StatusOnly", Reply{Status: StatusUnavailable}, 503, "UNAVAILABLE", MessageOverloaded, nil},
		{"CodeOnly", Reply{Code: 500}, 500, "INTERNAL", MessageInternal, nil},
		{"CustomDetails", ErrorReply(429, StatusResourceExhausted, "slow down", RetryInfoDetail(2500*time.Millisecond)), 429, "RESOURCE_EXHAUSTED", "slow down",
			func(t *testing.T, e genai.APIError) {
				if d := detail(e.Details, "RetryInfo"); d == nil || d["retryDelay"] != "2.5s" {
					t.Errorf("details = %v", e.Details)
				}
			}},
	}
	fake := start(t)
	client, _ := sdk(t, fake)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				fake.Enqueue(tt.reply)
				var err error
				if stream {
					for _, e := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil) {
						if err = e; err != nil {
							break
						}
					}
				} else {
					_, err = client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
				}
				e := apiError(t, err)
				if e.Code != tt.code || e.Status != tt.status {
					t.Errorf("stream=%v: code %d status %q, want %d %q", stream, e.Code, e.Status, tt.code, tt.status)
				}
				if tt.message != "" && e.Message != tt.message {
					t.Errorf("stream=%v: message = %q, want %q", stream, e.Message, tt.message)
				}
				if e.Message == "" {
					t.Errorf("stream=%v: empty message", stream)
				}
				if tt.check != nil {
					tt.check(t, e)
				}
			}
		})
	}
}

func checkKeyDetails(t *testing.T, e genai.APIError) {
	t.Helper()
	info := detail(e.Details, "google.rpc.ErrorInfo")
	if info == nil || info["reason"] != "API_KEY_INVALID" || info["domain"] != "googleapis.com" ||
		info["metadata"].(map[string]any)["service"] != "generativelanguage.googleapis.com" {
		t.Errorf("ErrorInfo = %v", info)
	}
	if lm := detail(e.Details, "LocalizedMessage"); lm == nil || lm["locale"] != "en-US" || lm["message"] != MessageAPIKeyInvalid {
		t.Errorf("LocalizedMessage = %v", lm)
	}
}

func checkQuota(quotaID, delay, value string) func(*testing.T, genai.APIError) {
	return func(t *testing.T, e genai.APIError) {
		t.Helper()
		ri := detail(e.Details, "google.rpc.RetryInfo")
		if ri == nil || ri["retryDelay"] != delay {
			t.Errorf("RetryInfo = %v", ri)
		}
		if d, err := time.ParseDuration(ri["retryDelay"].(string)); err != nil || d <= 0 {
			t.Errorf("retryDelay %v not a duration: %v", ri["retryDelay"], err)
		}
		qf := detail(e.Details, "google.rpc.QuotaFailure")
		v := qf["violations"].([]any)[0].(map[string]any)
		if v["quotaId"] != quotaID || v["quotaValue"] != value ||
			v["quotaMetric"] != "generativelanguage.googleapis.com/generate_content_free_tier_requests" ||
			v["quotaDimensions"].(map[string]any)["location"] != "global" {
			t.Errorf("QuotaFailure = %v", qf)
		}
		if help := detail(e.Details, "google.rpc.Help"); help == nil || len(help["links"].([]any)) != 1 {
			t.Errorf("Help = %v", help)
		}
		if !strings.HasPrefix(e.Message, "You exceeded your current quota") || !strings.Contains(e.Message, "* Quota exceeded for metric: ") {
			t.Errorf("message = %q", e.Message)
		}
	}
}

func TestSDKMidStreamError(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(Reply{Text: "one two three four five six seven eight nine ten eleven twelve", MidStreamError: &StreamError{AfterChunks: 2}})

	var texts []string
	var errs []error
	for chunk, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("Count"), nil) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		texts = append(texts, chunk.Text())
	}
	if len(texts) != 2 || texts[0] != "one two three" {
		t.Errorf("chunks before the error = %q", texts)
	}
	if len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	e := apiError(t, errs[0])
	if e.Code != 503 || e.Status != "UNAVAILABLE" || e.Message != MessageOverloaded {
		t.Errorf("error = %+v", e)
	}

	// Without streaming the same script is an HTTP 503.
	fake.Enqueue(OverloadedMidStream(1))
	_, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
	if e := apiError(t, err); e.Code != 503 || e.Status != "UNAVAILABLE" {
		t.Errorf("non-stream = %+v", e)
	}
}

func TestSDKCutStream(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	fake.Enqueue(CutStream(2)) // on the echo of a 4-chunk prompt
	var n int
	var last error
	for _, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("one two three four five six seven eight nine"), nil) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 2 || !errors.Is(last, io.ErrUnexpectedEOF) {
		t.Errorf("%d chunks, err = %v; want 2 and io.ErrUnexpectedEOF", n, last)
	}

	// A cut non-streaming body fails too.
	fake.Enqueue(Reply{Text: "truncated", CutAfterBytes: 20})
	if _, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil); err == nil {
		t.Error("cut body: no error")
	}
}

func TestSDKModelsList(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	all := DefaultModels()

	page, err := client.Models.List(testCtx(t), &genai.ListModelsConfig{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.NextPageToken == "" {
		t.Fatalf("page = %d items, token %q", len(page.Items), page.NextPageToken)
	}
	m := page.Items[0]
	if m.Name != "models/"+all[0].Name || m.DisplayName != all[0].DisplayName || m.InputTokenLimit != int32(all[0].InputTokenLimit) ||
		!slices.Contains(m.SupportedActions, "generateContent") {
		t.Errorf("model = %+v", m)
	}
	if r := fake.Requests()[0]; r.Method != "GET" || r.Path != "/v1beta/models" || r.Query().Get("pageSize") != "1" {
		t.Errorf("recorded %s %s?%s", r.Method, r.Path, r.RawQuery)
	}
	page, err = page.Next(testCtx(t))
	if err != nil || len(page.Items) != 1 || page.Items[0].Name != "models/"+all[1].Name {
		t.Fatalf("next page = %+v, %v", page.Items, err)
	}

	var names []string
	for m, err := range client.Models.All(testCtx(t)) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimPrefix(m.Name, "models/"))
	}
	if len(names) != len(all) {
		t.Errorf("All = %v", names)
	}

	info, err := client.Models.Get(testCtx(t), "gemini-2.5-flash", nil)
	if err != nil || info.Name != "models/gemini-2.5-flash" || !info.Thinking || info.OutputTokenLimit != 65536 {
		t.Errorf("Get = %+v, %v", info, err)
	}
	_, err = client.Models.Get(testCtx(t), "gemini-nope", nil)
	if e := apiError(t, err); e.Code != 404 || e.Status != "NOT_FOUND" {
		t.Errorf("Get unknown = %+v", e)
	}

	// Models has its own queue of faults (a failing health check).
	fake.EnqueueRoute(RouteModels, Unavailable())
	_, err = client.Models.List(testCtx(t), &genai.ListModelsConfig{PageSize: 1})
	if e := apiError(t, err); e.Code != 503 {
		t.Errorf("scripted models fault = %+v", e)
	}
}

func TestSDKCountTokens(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	res, err := client.Models.CountTokens(testCtx(t), "gemini-2.5-flash", genai.Text("How many tokens is this?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := fake.Requests()[0]
	if rec.Path != "/v1beta/models/gemini-2.5-flash:countTokens" || rec.Action != "countTokens" {
		t.Fatalf("path %s", rec.Path)
	}
	if res.TotalTokens != int32(CountTokens("gemini-2.5-flash", rec.Body)) || res.TotalTokens < 5 {
		t.Errorf("totalTokens = %d, CountTokens = %d", res.TotalTokens, CountTokens("gemini-2.5-flash", rec.Body))
	}
	fake.EnqueueRoute(RouteCountTokens, Reply{Usage: Usage{Prompt: 4242, Cached: 42}})
	res, err = client.Models.CountTokens(testCtx(t), "gemini-2.5-flash", genai.Text("x"), nil)
	if err != nil || res.TotalTokens != 4242 || res.CachedContentTokenCount != 42 {
		t.Errorf("scripted count = %+v, %v", res, err)
	}
	fake.EnqueueRoute(RouteCountTokens, RateLimited("gemini-2.5-flash", time.Second))
	_, err = client.Models.CountTokens(testCtx(t), "gemini-2.5-flash", genai.Text("x"), nil)
	if e := apiError(t, err); e.Code != 429 {
		t.Errorf("scripted fault = %+v", e)
	}
	if fake.Pending(RouteGenerate) != 0 || fake.Pending(RouteCountTokens) != 0 {
		t.Error("queues")
	}
}

func TestSDKBadKey(t *testing.T) {
	fake := start(t)
	fake.Enqueue(TextReply("kept"))
	client, _ := sdkWithKey(t, fake, "wrong-key")
	_, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
	e := apiError(t, err)
	if e.Code != 400 || e.Status != "INVALID_ARGUMENT" || e.Message != MessageAPIKeyInvalid {
		t.Fatalf("err = %+v", e)
	}
	checkKeyDetails(t, e)
	if fake.Pending(RouteGenerate) != 1 {
		t.Error("queue changed")
	}
	// Every route checks the key.
	if _, err := client.Models.List(testCtx(t), nil); apiError(t, err).Code != 400 {
		t.Errorf("list: %v", err)
	}
	// ?key= works too; no key at all is the real 403.
	resp, body := raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent?key="+testKey, nil, `{"contents":[{"parts":[{"text":"hi"}]}]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "kept") {
		t.Errorf("?key=: %d %s", resp.StatusCode, body)
	}
	resp, body = raw(t, fake, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", nil, `{"contents":[{"parts":[{"text":"hi"}]}]}`)
	if e := errorOf(t, body); resp.StatusCode != 403 || e["status"] != "PERMISSION_DENIED" || e["message"] != MessageUnregisteredCaller {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
}

func TestSDKHoldGate(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	gate := make(chan struct{})
	fake.Enqueue(TextReply("finally").WithHold(gate))

	type result struct {
		resp *genai.GenerateContentResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
		done <- result{resp, err}
	}()
	if err := fake.WaitRequests(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	// The request has arrived and is parked on the gate: no byte has been
	// written, so the call cannot have returned.
	select {
	case r := <-done:
		t.Fatalf("call returned before the gate opened: %v %v", r.resp, r.err)
	default:
	}
	if fake.ActiveConns() != 1 {
		t.Errorf("ActiveConns = %d while held", fake.ActiveConns())
	}
	close(gate)
	r := <-done
	if r.err != nil || r.resp.Text() != "finally" {
		t.Fatalf("after the gate: %v %v", r.resp, r.err)
	}
}

func TestHoldReleasedByCancelAndClose(t *testing.T) {
	fake := start(t)
	client, _ := sdk(t, fake)
	never := make(chan struct{})
	fake.Enqueue(TextReply("x").WithHold(never), TextReply("y").WithHold(never))

	ctx, cancel := contextWithCancel(t)
	errc := make(chan error, 1)
	go func() {
		_, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("Hi"), nil)
		errc <- err
	}()
	if err := fake.WaitRequests(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled call succeeded")
	}

	go func() {
		_, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
		errc <- err
	}()
	if err := fake.WaitRequests(testCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	fake.Close()
	if err := <-errc; err == nil {
		t.Error("held call succeeded after Close")
	}
}

func TestSDKActiveConnsReturnToZero(t *testing.T) {
	fake := start(t)
	client, tr := sdk(t, fake)
	for range 3 {
		if _, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("one two three four five six seven"), nil) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.WaitActiveConns(testCtx(t), 0); err != nil {
		t.Fatalf("active connections: %d (%v)", fake.ActiveConns(), err)
	}
	if n := fake.OpenConns(); n < 1 {
		t.Errorf("OpenConns = %d with a kept-alive connection", n)
	}

	// A consumer that stops early closes the body; the server side ends.
	fake.Enqueue(Reply{Text: strings.Repeat("word ", 60)})
	for range client.Models.GenerateContentStream(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil) {
		break
	}
	if err := fake.WaitActiveConns(testCtx(t), 0); err != nil {
		t.Fatalf("after an early break: active %d (%v)", fake.ActiveConns(), err)
	}
	tr.CloseIdleConnections()
	if err := fake.WaitOpenConns(testCtx(t), 0); err != nil {
		t.Fatalf("connections still open: %d (%v)", fake.OpenConns(), err)
	}
}

func TestSDKUnknownModelAndOverflow(t *testing.T) {
	fake := start(t, WithModels(Model{Name: "models/gemini-tiny", InputTokenLimit: 50, OutputTokenLimit: 10}))
	client, _ := sdk(t, fake)
	_, err := client.Models.GenerateContent(testCtx(t), "gemini-2.5-flash", genai.Text("Hi"), nil)
	e := apiError(t, err)
	if e.Code != 404 || e.Status != "NOT_FOUND" || e.Message != modelNotFoundMessage("gemini-2.5-flash", "v1beta", "generateContent") {
		t.Errorf("unknown model = %+v", e)
	}
	if _, err := client.Models.GenerateContent(testCtx(t), "gemini-tiny", genai.Text("Hi"), nil); err != nil {
		t.Errorf("configured model: %v", err)
	}
	long := strings.Repeat("lorem ipsum ", 40)
	_, err = client.Models.GenerateContent(testCtx(t), "gemini-tiny", genai.Text(long), nil)
	n := CountTokens("gemini-2.5-flash", fake.Requests()[2].Body)
	if e := apiError(t, err); e.Code != 400 || e.Message != contextOverflowMessage(n, 50) || n <= 50 {
		t.Errorf("overflow (%d tokens) = %+v", n, e)
	}
}
