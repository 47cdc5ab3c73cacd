package gemini_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

const testKey = "AIzaSy-test-conformance-0123456789"

// fake adapts the Gemini fake to the conformance suite.
type fake struct {
	srv *geminifake.Server
	// settings built the adapter under test.
	settings provider.Settings
}

func (f *fake) Script(r providertest.Reply) {
	rep := geminifake.Reply{Text: r.Text, Usage: geminifake.Usage{
		Prompt: int(r.Usage.InputTokens), Cached: int(r.Usage.CacheReadTokens),
		Candidates: int(r.Usage.OutputTokens - r.Usage.ReasoningTokens), Thoughts: int(r.Usage.ReasoningTokens),
	}, ModelVersion: r.Model}
	if r.Reasoning != "" {
		rep.Thought = &geminifake.Thought{Text: r.Reasoning, Signature: "c2lnbmVkIHRob3VnaHQ="}
	}
	for _, tc := range r.ToolCalls {
		rep.FunctionCalls = append(rep.FunctionCalls, geminifake.FunctionCall{ID: tc.ID, Name: tc.Name, Args: tc.Arguments})
	}
	f.srv.Enqueue(rep)
}

func (f *fake) ReturnsReasoning() bool { return true }

func (f *fake) Fail(k provider.Kind, retryAfter time.Duration) bool {
	var r geminifake.Reply
	switch k {
	case provider.KindRateLimit:
		r = geminifake.RateLimited("gemini-2.5-flash", retryAfter)
	case provider.KindQuotaExhausted:
		r = geminifake.DailyQuotaExceeded("gemini-2.5-flash", 30*time.Second)
	case provider.KindAuth:
		r = geminifake.APIKeyInvalid()
	case provider.KindBadRequest:
		r = geminifake.InvalidArgument("* GenerateContentRequest.contents: contents is not specified")
	case provider.KindContextWindowExceeded:
		r = geminifake.ContextOverflow(1_200_000, 1_048_576)
	case provider.KindServer:
		r = geminifake.Internal()
	case provider.KindOverloaded:
		r = geminifake.Unavailable()
	case provider.KindTimeout:
		r = geminifake.DeadlineExceeded()
	default:
		return false
	}
	f.srv.EnqueueRoute(geminifake.RouteGenerate, r)
	f.srv.EnqueueRoute(geminifake.RouteModels, r)
	return true
}

func (f *fake) FailMidStream(k provider.Kind) bool {
	if k != provider.KindOverloaded {
		return false
	}
	r := geminifake.OverloadedMidStream(2)
	r.Text = "The first part of an answer that will not be finished today"
	f.srv.Enqueue(r)
	return true
}

func (f *fake) Truncate() bool {
	r := geminifake.CutStream(2)
	r.Text = "An answer that will be cut before the server finishes it properly"
	f.srv.Enqueue(r)
	return true
}

// Gemini sends no rate-limit headers.
func (f *fake) SetRateLimits(int64, int64) bool { return false }

func (f *fake) WaitIdle(ctx context.Context) error { return f.srv.WaitActiveConns(ctx, 0) }

func (f *fake) Last() providertest.Captured {
	reqs := f.srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		if r.Action != "generateContent" && r.Action != "streamGenerateContent" {
			continue
		}
		g, err := r.Generate()
		if err != nil {
			return providertest.Captured{}
		}
		c := providertest.Captured{Model: r.Model, Stream: r.Stream()}
		if gc := g.GenerationConfig; gc != nil {
			if gc.MaxOutputTokens != nil {
				c.MaxTokens = *gc.MaxOutputTokens
			}
			c.Sampling = providertest.Sampling{Temperature: gc.Temperature, TopP: gc.TopP, Seed: gc.Seed, Stop: gc.StopSequences}
			c.ResponseSchema = gc.ResponseJSONSchema
			if gc.TopK != nil {
				k := int(*gc.TopK)
				c.Sampling.TopK = &k
			}
			if tc := gc.ThinkingConfig; tc != nil {
				c.Reasoning = &provider.Reasoning{Effort: provider.ReasoningEffort(strings.ToLower(tc.ThinkingLevel))}
				if tc.ThinkingBudget != nil {
					c.Reasoning.Budget = *tc.ThinkingBudget
				}
			}
		}
		if g.SystemInstruction != nil {
			for _, p := range g.SystemInstruction.Parts {
				c.System += p.Text
			}
		}
		for _, t := range g.Tools {
			for _, fd := range t.FunctionDeclarations {
				c.Tools = append(c.Tools, fd.Name)
			}
		}
		// Gemini matches results to calls by name (and id when it sent one).
		for _, content := range g.Contents {
			for _, p := range content.Parts {
				if len(p.InlineData) > 0 {
					var blob struct {
						MIMEType string `json:"mimeType"`
						Data     []byte `json:"data"`
					}
					_ = json.Unmarshal(p.InlineData, &blob)
					c.Images = append(c.Images, provider.Image{Data: blob.Data, MediaType: blob.MIMEType})
				}
				if fc := p.FunctionCall; fc != nil {
					c.ToolCalls = append(c.ToolCalls, provider.ToolCall{ID: fc.ID, Name: fc.Name, Arguments: fc.Args})
				}
				if fr := p.FunctionResponse; fr != nil {
					var resp map[string]any
					_ = json.Unmarshal(fr.Response, &resp)
					text, _ := resp["result"].(string)
					c.ToolResults = append(c.ToolResults, provider.ToolResult{CallID: fr.ID, Name: fr.Name, Content: text})
				}
			}
		}
		return c
	}
	return providertest.Captured{}
}

func catalog(t testing.TB) *pricing.Catalog {
	c, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newEnv(t *testing.T, opts ...geminifake.Option) (*gemini.Adapter, *fake) {
	t.Helper()
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"} {
		t.Setenv(k, "")
	}
	srv := geminifake.New(append([]geminifake.Option{geminifake.WithAPIKey(testKey)}, opts...)...)
	t.Cleanup(srv.Close)
	s := provider.Settings{Name: "gem", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t)}
	a, err := gemini.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return a, &fake{srv: srv, settings: s}
}

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Env {
		a, f := newEnv(t)
		return &providertest.Env{Adapter: a, Fake: f, Pricer: catalog(t), Namespace: gemini.Namespace, Model: a.ModelFor(provider.TierBalanced),
			WithSettings: func(edit func(*provider.Settings)) provider.Adapter {
				s := f.settings
				edit(&s)
				a, err := gemini.New(s)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}}
	})
}

var _ = strings.TrimSpace
