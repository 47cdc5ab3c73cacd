package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// upstreamContent returns the content of the last message the OpenAI fake
// received, as sent.
func (w *world) upstreamContent(t *testing.T) json.RawMessage {
	t.Helper()
	reqs := w.oai.Requests()
	if len(reqs) == 0 {
		t.Fatal("the OpenAI fake received nothing")
	}
	var b struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &b); err != nil || len(b.Messages) == 0 {
		t.Fatalf("upstream body %s: %v", reqs[len(reqs)-1].Body, err)
	}
	return b.Messages[len(b.Messages)-1].Content
}

// Two text parts of one message reach an OpenAI-compatible upstream as two
// text parts, from a Chat client and from an Anthropic client alike.
func TestTextPartsStaySeparate(t *testing.T) {
	w := newWorld(t, serveOn("gpt"))
	ctx := ctxT(t)
	const want = `[{"text":"hi","type":"text"},{"text":"there","type":"text"}]`

	_, err := w.openai(w.key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "pinned-gpt",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("hi"), openai.TextContentPart("there")})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.upstreamContent(t); string(got) != want {
		t.Errorf("chat: upstream content = %s, want %s", got, want)
	}

	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{
		Model: "pinned-gpt", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"), anthropic.NewTextBlock("there"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.upstreamContent(t); string(got) != want {
		t.Errorf("messages: upstream content = %s, want %s", got, want)
	}
}

// withVLLM adds "vllm", an OpenAI-compatible endpoint with the vllm
// profile (it honours temperature, top_p, top_k and seed), served by its
// own fake, and the gateway model "qwen" pinned to it.
func withVLLM(srv **openaifake.Server) func(*setup) {
	return func(s *setup) {
		f := openaifake.New(openaifake.WithFlavor(openaifake.FlavorVLLM))
		*srv = f
		s.orch = func(os *orchestrator.Settings) {
			a, err := openaicompat.New(provider.Settings{Name: "vllm", Profile: "vllm", BaseURL: f.URL() + "/v1",
				Models: map[provider.Tier]string{provider.TierBalanced: "Qwen/Qwen3-32B"}})
			if err != nil {
				panic(err)
			}
			os.Endpoints = append(os.Endpoints, orchestrator.Endpoint{Name: "vllm", Adapter: a})
		}
		s.gw = func(o *gateway.Options) {
			o.Providers = append(o.Providers, "vllm")
			o.Models["qwen"] = gateway.Target{Model: "Qwen/Qwen3-32B", Provider: "vllm"}
		}
	}
}

// sampling is the sampling fields of an upstream OpenAI-compatible or
// Anthropic body.
type sampling struct {
	Temperature   *float64 `json:"temperature"`
	TopP          *float64 `json:"top_p"`
	TopK          *int     `json:"top_k"`
	Seed          *int64   `json:"seed"`
	Stop          []string `json:"stop"`
	StopSequences []string `json:"stop_sequences"`
}

func lastSampling(t *testing.T, raw []byte) sampling {
	t.Helper()
	var s sampling
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("upstream body %s: %v", raw, err)
	}
	return s
}

func eqF(p *float64, v float64) bool { return p != nil && *p == v }

// Sampling settings reach the provider in each caller protocol, in the
// provider's own names; a model that does not honour one drops it and the
// response names it in X-CortexBuild-Ignored-Params, streamed or not.
func TestSamplingThroughEachProtocol(t *testing.T) {
	var vllm *openaifake.Server
	w := newWorld(t, withVLLM(&vllm), translating)
	t.Cleanup(func() { vllm.Close() })
	ctx := ctxT(t)
	oc := w.openai(w.key)

	// Chat to a model that honours everything: all of it arrives.
	var raw *http.Response
	chat := openai.ChatCompletionNewParams{Model: "qwen", Messages: userMsg("hi"),
		Temperature: openai.Float(0.3), TopP: openai.Float(0.8), Seed: openai.Int(42),
		Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END", "STOP"}}}
	if _, err := oc.Chat.Completions.New(ctx, chat, ooption.WithResponseInto(&raw), ooption.WithJSONSet("top_k", 30)); err != nil {
		t.Fatal(err)
	}
	got := lastSampling(t, vllm.Requests()[len(vllm.Requests())-1].Body)
	if !eqF(got.Temperature, 0.3) || !eqF(got.TopP, 0.8) || got.Seed == nil || *got.Seed != 42 || got.TopK == nil || *got.TopK != 30 || !slices.Equal(got.Stop, []string{"END", "STOP"}) {
		t.Errorf("chat → vllm sent %+v", got)
	}
	if h := raw.Header.Get(gateway.HeaderIgnored); h != "" {
		t.Errorf("chat → vllm: ignored = %q, want none", h)
	}

	// Chat to an OpenAI reasoning model: temperature and top_p are
	// dropped (the API refuses them) and named; seed and stop go.
	chat.Model = "pinned-gpt"
	for _, stream := range []bool{false, true} {
		if stream {
			s := oc.Chat.Completions.NewStreaming(ctx, chat, ooption.WithResponseInto(&raw))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else if _, err := oc.Chat.Completions.New(ctx, chat, ooption.WithResponseInto(&raw)); err != nil {
			t.Fatal(err)
		}
		got = lastSampling(t, w.oai.Requests()[len(w.oai.Requests())-1].Body)
		if got.Temperature != nil || got.TopP != nil || got.Seed == nil || *got.Seed != 42 || !slices.Equal(got.Stop, []string{"END", "STOP"}) {
			t.Errorf("stream %v: chat → gpt-5-mini sent %+v", stream, got)
		}
		if h := raw.Header.Get(gateway.HeaderIgnored); h != "temperature, top_p" {
			t.Errorf("stream %v: chat → gpt-5-mini: ignored = %q, want \"temperature, top_p\"", stream, h)
		}
	}

	// Messages to Anthropic, translated: the API version the adapter
	// speaks has no sampling parameters; stop_sequences go.
	ac := w.anthropic(w.key)
	msg := anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 50, Messages: userMsgA("hi"), StopSequences: []string{"END"}}
	if _, err := ac.Messages.New(ctx, msg, aoption.WithJSONSet("temperature", 0.5), aoption.WithJSONSet("top_k", 20), aoption.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	}
	got = lastSampling(t, w.anth.Requests()[len(w.anth.Requests())-1].Body)
	if got.Temperature != nil || got.TopK != nil || !slices.Equal(got.StopSequences, []string{"END"}) {
		t.Errorf("messages → claude sent %+v", got)
	}
	if h := raw.Header.Get(gateway.HeaderIgnored); h != "temperature, top_k" {
		t.Errorf("messages → claude: ignored = %q, want \"temperature, top_k\"", h)
	}
	// Messages to vLLM: all of it, under Chat's names.
	msg.Model = "qwen"
	if _, err := ac.Messages.New(ctx, msg, aoption.WithJSONSet("temperature", 0.5), aoption.WithJSONSet("top_k", 20), aoption.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	}
	got = lastSampling(t, vllm.Requests()[len(vllm.Requests())-1].Body)
	if !eqF(got.Temperature, 0.5) || got.TopK == nil || *got.TopK != 20 || !slices.Equal(got.Stop, []string{"END"}) {
		t.Errorf("messages → vllm sent %+v", got)
	}
	// Messages keeps Anthropic's range.
	_, err := ac.Messages.New(ctx, msg, aoption.WithJSONSet("temperature", 1.5))
	if ae := anthropicErr(t, err); ae.StatusCode != 400 || !strings.Contains(ae.Error(), "temperature: must be between 0 and 1, got 1.5") {
		t.Errorf("temperature 1.5 on Messages = %d %v", ae.StatusCode, err)
	}

	// Responses: temperature and top_p, echoed in the response object
	// when the serving model applied them, null when it dropped them.
	rp := responses.ResponseNewParams{Model: "qwen", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Temperature: openai.Float(0.4), TopP: openai.Float(0.7)}
	for _, c := range []struct {
		model   string
		applied bool
	}{{"qwen", true}, {"pinned-gpt", false}} {
		rp.Model = c.model
		for _, stream := range []bool{false, true} {
			var r *responses.Response
			if stream {
				s := oc.Responses.NewStreaming(ctx, rp)
				for s.Next() {
					if e := s.Current(); e.Type == "response.completed" {
						r = &e.Response
					}
				}
				if err := s.Err(); err != nil || r == nil {
					t.Fatalf("%s stream: %v", c.model, err)
				}
			} else {
				var err error
				if r, err = oc.Responses.New(ctx, rp); err != nil {
					t.Fatal(err)
				}
			}
			if applied := r.Temperature == 0.4 && r.TopP == 0.7; applied != c.applied || (!c.applied && (r.JSON.Temperature.Raw() != "null" || r.JSON.TopP.Raw() != "null")) {
				t.Errorf("responses → %s (stream %v): temperature %s, top_p %s; want applied: %v", c.model, stream, r.JSON.Temperature.Raw(), r.JSON.TopP.Raw(), c.applied)
			}
		}
	}
	got = lastSampling(t, vllm.Requests()[len(vllm.Requests())-1].Body)
	if !eqF(got.Temperature, 0.4) || !eqF(got.TopP, 0.7) {
		t.Errorf("responses → vllm sent %+v", got)
	}
}

var tripSchema = map[string]any{"type": "object", "additionalProperties": false, "required": []string{"city", "days"},
	"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}

// matchesTrip reports whether text is a JSON object with exactly the keys
// of tripSchema, of its types.
func matchesTrip(text string) bool {
	var v struct {
		City *string `json:"city"`
		Days *int    `json:"days"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	return dec.Decode(&v) == nil && v.City != nil && v.Days != nil
}

// upstreamField returns the value at path (dot-separated keys) of the
// last body a fake received.
func upstreamField(t *testing.T, raw []byte, path ...string) json.RawMessage {
	t.Helper()
	v := json.RawMessage(raw)
	for _, k := range path {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatalf("upstream body %s: %s is not an object", raw, k)
		}
		v = m[k]
	}
	return v
}

// A JSON schema response format reaches the provider as its own field in
// each caller protocol, and the answer is JSON matching it, streamed or
// not.
func TestStructuredOutputThroughEachProtocol(t *testing.T) {
	w := newWorld(t, translating)
	ctx := ctxT(t)
	oc := w.openai(w.key)
	wantSchema, _ := json.Marshal(tripSchema)

	// Chat, strict, to OpenAI: response_format as sent.
	chat := openai.ChatCompletionNewParams{Model: "pinned-gpt", Messages: userMsg("Plan a trip"),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "trip", Schema: tripSchema, Strict: openai.Bool(true)}}}}
	cc, err := oc.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if !matchesTrip(cc.Choices[0].Message.Content) {
		t.Errorf("chat answer %q does not match the schema", cc.Choices[0].Message.Content)
	}
	body := w.oai.Requests()[len(w.oai.Requests())-1].Body
	if got := upstreamField(t, body, "response_format", "json_schema"); !jsonEq(got, fmt.Sprintf(`{"name":"trip","strict":true,"schema":%s}`, wantSchema)) {
		t.Errorf("chat → gpt: json_schema sent as %s", got)
	}
	s := oc.Chat.Completions.NewStreaming(ctx, chat)
	var text strings.Builder
	for s.Next() {
		if c := s.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := s.Err(); err != nil || !matchesTrip(text.String()) {
		t.Errorf("streamed chat answer %q does not match the schema (%v)", text.String(), err)
	}

	// Responses to Anthropic: output_config.format.
	r, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "claude-sonnet-4-6", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Plan a trip")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "trip", Schema: tripSchema, Strict: openai.Bool(true)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !matchesTrip(r.OutputText()) {
		t.Errorf("responses answer %q does not match the schema", r.OutputText())
	}
	body = w.anth.Requests()[len(w.anth.Requests())-1].Body
	if got := upstreamField(t, body, "output_config", "format"); !jsonEq(got, fmt.Sprintf(`{"type":"json_schema","schema":%s}`, wantSchema)) {
		t.Errorf("responses → claude: output_config.format sent as %s", got)
	}

	// Messages to OpenAI: response_format json_schema named "response".
	m, err := w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "pinned-gpt", MaxTokens: 200, Messages: userMsgA("Plan a trip"),
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: tripSchema}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || !matchesTrip(m.Content[0].Text) {
		t.Errorf("messages answer %+v does not match the schema", m.Content)
	}
	body = w.oai.Requests()[len(w.oai.Requests())-1].Body
	if got := upstreamField(t, body, "response_format"); !jsonEq(got, fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"response","schema":%s}}`, wantSchema)) {
		t.Errorf("messages → gpt: response_format sent as %s", got)
	}

	// JSON mode without a schema is refused, naming the field.
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "pinned-gpt", Messages: userMsg("hi"),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}})
	if e := openAIErr(t, err); e.StatusCode != 400 || e.Param != "response_format.type" {
		t.Errorf("json_object = %d %q %q", e.StatusCode, e.Param, e.Message)
	}
}

func jsonEq(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// pngBytes is a 1×1 PNG.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// Images reach the provider in its own shape from each caller protocol,
// inline (a data URL or base64 block) or by URL, in their place among the
// turn's text; a model without vision is never sent one.
func TestImagesThroughEachProtocol(t *testing.T) {
	var vllm *openaifake.Server
	w := newWorld(t, withVLLM(&vllm), translating)
	t.Cleanup(func() { vllm.Close() })
	ctx := ctxT(t)
	oc := w.openai(w.key)
	b64 := base64.StdEncoding.EncodeToString(pngBytes)
	dataURL := "data:image/png;base64," + b64

	// Chat to OpenAI: text then image, as sent.
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "pinned-gpt", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("What is this?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL})})}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.upstreamContent(t), fmt.Sprintf(`[{"text":"What is this?","type":"text"},{"image_url":{"url":%q},"type":"image_url"}]`, dataURL); !jsonEq(got, want) {
		t.Errorf("chat → gpt content = %s, want %s", got, want)
	}

	// Messages to Anthropic: a base64 block and a URL block.
	ac := w.anthropic(w.key)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 50, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewImageBlockBase64("image/png", b64), anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/cat.png"}),
		anthropic.NewTextBlock("Compare them."))}})
	if err != nil {
		t.Fatal(err)
	}
	body := w.anth.Requests()[len(w.anth.Requests())-1].Body
	want := fmt.Sprintf(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}},{"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}},{"type":"text","text":"Compare them."}]`, b64)
	if got := upstreamField(t, body, "messages"); !jsonEq(got, `[{"role":"user","content":`+want+`}]`) {
		t.Errorf("messages → claude sent %s", got)
	}

	// Responses to Anthropic: input_image by URL.
	_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "claude-sonnet-4-6", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
			responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto),
		}, responses.EasyInputMessageRoleUser)}}}, ooption.WithJSONSet("input.0.content.0.image_url", "https://example.com/dog.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	body = w.anth.Requests()[len(w.anth.Requests())-1].Body
	if got := upstreamField(t, body, "messages"); !jsonEq(got, `[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/dog.jpg"}}]}]`) {
		t.Errorf("responses → claude sent %s", got)
	}

	// A model without vision is never sent an image.
	before := len(vllm.Requests())
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "qwen", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL})})}})
	if e := openAIErr(t, err); !strings.Contains(e.Message, "vision") || len(vllm.Requests()) != before {
		t.Errorf("image to a model without vision = %d %q", e.StatusCode, e.Message)
	}
	// An image where only text goes is refused, naming the field.
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "pinned-gpt", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage([]openai.ChatCompletionContentPartTextParam{{Text: "x"}}), openai.UserMessage("hi")}},
		ooption.WithJSONSet("messages.0.content.0", map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL}}))
	if e := openAIErr(t, err); e.StatusCode != 400 || e.Param != "messages[0].content" {
		t.Errorf("image in a system message = %d %q %q", e.StatusCode, e.Param, e.Message)
	}
}
