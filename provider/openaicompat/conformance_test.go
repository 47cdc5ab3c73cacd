package openaicompat_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

const testKey = "sk-proj-test-conformance-0123456789"

// fake adapts one flavour of the OpenAI-compatible fake to the suite.
type fake struct {
	srv    *openaifake.Server
	flavor openaifake.Flavor
	// settings built the adapter under test.
	settings provider.Settings

	mu       sync.Mutex
	limitHdr map[string]string
}

func (f *fake) Script(r providertest.Reply) {
	rep := openaifake.Reply{Text: r.Text, Usage: openaifake.Usage{
		Prompt: int(r.Usage.InputTokens), Completion: int(r.Usage.OutputTokens),
		Cached: int(r.Usage.CacheReadTokens), Reasoning: int(r.Usage.ReasoningTokens),
	}, Model: r.Model}
	for _, tc := range r.ToolCalls {
		rep.ToolCalls = append(rep.ToolCalls, openaifake.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)})
	}
	f.mu.Lock()
	for k, v := range f.limitHdr {
		rep = rep.WithHeader(k, v)
	}
	f.mu.Unlock()
	f.srv.Enqueue(rep)
}

func gatewayTimeout() openaifake.Reply {
	return openaifake.Reply{Status: 504, RawBody: "<html><head><title>504 Gateway Time-out</title></head></html>", RawContentType: "text/html"}
}

func (f *fake) Fail(k provider.Kind, retryAfter time.Duration) bool {
	var r openaifake.Reply
	openai := f.flavor == openaifake.FlavorOpenAI
	switch k {
	case provider.KindRateLimit:
		if !openai {
			return false // local servers do not rate-limit
		}
		r = openaifake.RateLimited(retryAfter)
	case provider.KindQuotaExhausted:
		if !openai {
			return false
		}
		r = openaifake.InsufficientQuota()
	case provider.KindAuth:
		if f.flavor == openaifake.FlavorOllama {
			return false // Ollama ignores keys
		}
		r = openaifake.InvalidAPIKey("sk-wrong-key-0000000000")
	case provider.KindBadRequest:
		r = openaifake.InvalidRequest("'messages' must contain at least one message")
	case provider.KindContextWindowExceeded:
		switch f.flavor {
		case openaifake.FlavorVLLM:
			r = openaifake.VLLMContextLengthExceeded(4096, 4000, 1000)
		case openaifake.FlavorOllama:
			r = openaifake.OllamaContextLengthExceeded()
		default:
			r = openaifake.ContextLengthExceeded(128000, 130000)
		}
	case provider.KindServer:
		r = openaifake.ServerError()
	case provider.KindOverloaded:
		r = openaifake.Overloaded()
	case provider.KindTimeout:
		r = gatewayTimeout()
	default:
		return false
	}
	f.srv.EnqueueRoute(openaifake.RouteChat, r)
	f.srv.EnqueueRoute(openaifake.RouteModels, r)
	return true
}

func (f *fake) FailMidStream(k provider.Kind) bool {
	if k != provider.KindOverloaded {
		return false
	}
	f.srv.Enqueue(openaifake.Reply{Text: "The first part of an answer that will not be finished", MidStreamError: &openaifake.StreamError{
		Message: "The engine is currently overloaded, please try again later", Type: "server_error", Status: 503, AfterChunks: 2}})
	return true
}

func (f *fake) Truncate() bool {
	f.srv.Enqueue(openaifake.Reply{Text: "An answer that will be cut before the server finishes it properly", CutAfterChunks: 3})
	return true
}

func (f *fake) SetRateLimits(requests, tokens int64) bool {
	if f.flavor != openaifake.FlavorOpenAI {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limitHdr = map[string]string{
		"x-ratelimit-remaining-requests": strconv.FormatInt(requests, 10),
		"x-ratelimit-remaining-tokens":   strconv.FormatInt(tokens, 10),
	}
	return true
}

func (f *fake) WaitIdle(ctx context.Context) error { return f.srv.WaitActiveConns(ctx, 0) }

func (f *fake) Last() providertest.Captured {
	reqs := f.srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		if r.Path != "/v1/chat/completions" {
			continue
		}
		var body struct {
			MaxTokens           int                      `json:"max_tokens"`
			MaxCompletionTokens int                      `json:"max_completion_tokens"`
			Temperature         *float64                 `json:"temperature"`
			TopP                *float64                 `json:"top_p"`
			TopK                *int                     `json:"top_k"`
			Seed                *int64                   `json:"seed"`
			Stop                []string                 `json:"stop"`
			ReasoningEffort     provider.ReasoningEffort `json:"reasoning_effort"`
			Messages            []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		_ = r.Decode(&body)
		c := providertest.Captured{Model: r.Model(), Stream: r.Stream(), MaxTokens: max(body.MaxTokens, body.MaxCompletionTokens),
			Sampling:       providertest.Sampling{Temperature: body.Temperature, TopP: body.TopP, TopK: body.TopK, Seed: body.Seed, Stop: body.Stop},
			ResponseSchema: r.ResponseSchema()}
		if body.ReasoningEffort != "" {
			c.Reasoning = &provider.Reasoning{Effort: body.ReasoningEffort}
		}
		for _, t := range body.Tools {
			c.Tools = append(c.Tools, t.Function.Name)
		}
		for _, m := range body.Messages {
			var parts []struct {
				Type     string `json:"type"`
				ImageURL struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			_ = json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				if p.Type != "image_url" {
					continue
				}
				im := provider.Image{URL: p.ImageURL.URL}
				if rest, ok := strings.CutPrefix(im.URL, "data:"); ok {
					mime, data, _ := strings.Cut(rest, ";base64,")
					im.URL, im.MediaType = "", mime
					im.Data, _ = base64.StdEncoding.DecodeString(data)
				}
				c.Images = append(c.Images, im)
			}
		}
		for _, m := range r.Messages() {
			switch m.Role {
			case "system", "developer":
				c.System += m.Content
			case "tool":
				c.ToolResults = append(c.ToolResults, provider.ToolResult{CallID: m.ToolCallID, Content: m.Content})
			case "assistant":
				for _, tc := range m.ToolCalls {
					c.ToolCalls = append(c.ToolCalls, provider.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: json.RawMessage(tc.Arguments)})
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

type flavour struct {
	fake    openaifake.Flavor
	profile string
	key     string
	models  map[provider.Tier]string
	priced  bool
}

var flavours = []flavour{
	{openaifake.FlavorOpenAI, "openai", testKey, nil, true},
	{openaifake.FlavorOllama, "ollama", "", map[provider.Tier]string{provider.TierBalanced: "llama3.2"}, false},
	{openaifake.FlavorVLLM, "vllm", testKey, map[provider.Tier]string{provider.TierBalanced: "Qwen/Qwen3-32B"}, false},
}

func newEnv(t *testing.T, fl flavour, opts ...openaifake.Option) (*openaicompat.Adapter, *fake) {
	t.Helper()
	o := []openaifake.Option{openaifake.WithFlavor(fl.fake)}
	if fl.key != "" {
		o = append(o, openaifake.WithAPIKey(fl.key))
	}
	srv := openaifake.New(append(o, opts...)...)
	t.Cleanup(srv.Close)
	creds := map[string]string{}
	if fl.key != "" {
		creds["api_key"] = fl.key
	}
	s := provider.Settings{Name: "oai-" + fl.profile, Profile: fl.profile, BaseURL: srv.URL() + "/v1", Credentials: creds, Models: fl.models, Pricer: catalog(t)}
	a, err := openaicompat.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return a, &fake{srv: srv, flavor: fl.fake, settings: s}
}

func TestConformance(t *testing.T) {
	for _, fl := range flavours {
		t.Run(fl.profile, func(t *testing.T) {
			providertest.Run(t, func(t *testing.T) *providertest.Env {
				a, f := newEnv(t, fl)
				e := &providertest.Env{Adapter: a, Fake: f, Model: a.ModelFor(provider.TierBalanced),
					WithSettings: func(edit func(*provider.Settings)) provider.Adapter {
						s := f.settings
						edit(&s)
						a, err := openaicompat.New(s)
						if err != nil {
							t.Fatal(err)
						}
						return a
					}}
				if fl.priced {
					e.Pricer, e.Namespace = catalog(t), "openai"
				}
				return e
			})
		})
	}
}
