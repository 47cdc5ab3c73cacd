package anthropic_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

const testKey = "sk-ant-test-conformance-0123456789"

// fake adapts the Anthropic fake to the conformance suite.
type fake struct {
	srv *anthropicfake.Server
	// settings built the adapter under test.
	settings provider.Settings

	mu       sync.Mutex
	limitHdr map[string]string
}

func (f *fake) Script(r providertest.Reply) {
	rep := anthropicfake.Reply{Text: r.Text, Usage: anthropicfake.Usage{
		Input:           int(r.Usage.UncachedInputTokens()),
		Output:          int(r.Usage.OutputTokens),
		CacheRead:       int(r.Usage.CacheReadTokens),
		CacheCreation5m: int(r.Usage.CacheWriteTokens - r.Usage.CacheWriteLongTokens),
		CacheCreation1h: int(r.Usage.CacheWriteLongTokens),
	}, Model: r.Model}
	if r.Reasoning != "" {
		rep.Thinking = &anthropicfake.Thinking{Text: r.Reasoning}
	}
	for _, tc := range r.ToolCalls {
		rep.ToolUses = append(rep.ToolUses, anthropicfake.ToolUse{ID: tc.ID, Name: tc.Name, Input: tc.Arguments})
	}
	f.mu.Lock()
	for k, v := range f.limitHdr {
		rep = rep.WithHeader(k, v)
	}
	f.mu.Unlock()
	f.srv.Enqueue(rep)
}

func (f *fake) ReturnsReasoning() bool { return true }

func (f *fake) Fail(k provider.Kind, retryAfter time.Duration) bool {
	var r anthropicfake.Reply
	switch k {
	case provider.KindRateLimit:
		r = anthropicfake.RateLimited(strconv.Itoa(int(retryAfter.Seconds())))
	case provider.KindQuotaExhausted:
		r = anthropicfake.BillingError()
	case provider.KindAuth:
		r = anthropicfake.AuthError()
	case provider.KindBadRequest:
		r = anthropicfake.InvalidRequest("messages.0.content: Input should be a valid list")
	case provider.KindContextWindowExceeded:
		r = anthropicfake.PromptTooLong(250_000, 200_000)
	case provider.KindServer:
		r = anthropicfake.APIError()
	case provider.KindOverloaded:
		r = anthropicfake.Overloaded()
	case provider.KindTimeout:
		r = anthropicfake.TimeoutError()
	default:
		return false
	}
	f.srv.EnqueueRoute(anthropicfake.RouteMessages, r)
	f.srv.EnqueueRoute(anthropicfake.RouteModels, r)
	return true
}

func (f *fake) FailMidStream(k provider.Kind) bool {
	if k != provider.KindOverloaded {
		return false
	}
	f.srv.Enqueue(anthropicfake.Reply{Text: "The first part of an answer that", MidStreamError: &anthropicfake.StreamError{Type: "overloaded_error", Message: "Overloaded", AfterEvents: 4}})
	return true
}

func (f *fake) Truncate() bool {
	f.srv.Enqueue(anthropicfake.Reply{Text: "An answer that will be cut before its end marker arrives.", CutAfterEvents: 5})
	return true
}

func (f *fake) SetRateLimits(requests, tokens int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limitHdr = map[string]string{
		"anthropic-ratelimit-requests-remaining": strconv.FormatInt(requests, 10),
		"anthropic-ratelimit-tokens-remaining":   strconv.FormatInt(tokens, 10),
	}
	return true
}

func (f *fake) WaitIdle(ctx context.Context) error { return f.srv.WaitActiveConns(ctx, 0) }

// wire is the subset of a Messages request the suite inspects.
type wire struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Temperature   *float64 `json:"temperature"`
	TopP          *float64 `json:"top_p"`
	TopK          *int     `json:"top_k"`
	Seed          *int64   `json:"seed"`
	StopSequences []string `json:"stop_sequences"`
	Thinking      *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig struct {
		Effort provider.ReasoningEffort `json:"effort"`
	} `json:"output_config"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

func (f *fake) Last() providertest.Captured {
	reqs := f.srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		if r.Path != "/v1/messages" {
			continue
		}
		var w wire
		if err := r.Decode(&w); err != nil {
			return providertest.Captured{}
		}
		c := providertest.Captured{Model: w.Model, MaxTokens: w.MaxTokens, Stream: w.Stream,
			Sampling:       providertest.Sampling{Temperature: w.Temperature, TopP: w.TopP, TopK: w.TopK, Seed: w.Seed, Stop: w.StopSequences},
			ResponseSchema: r.ResponseSchema()}
		if w.Thinking != nil || w.OutputConfig.Effort != "" {
			c.Reasoning = &provider.Reasoning{Effort: w.OutputConfig.Effort}
			if w.Thinking != nil {
				c.Reasoning.Budget = w.Thinking.BudgetTokens
			}
		}
		var sys []wireBlock
		if json.Unmarshal(w.System, &sys) == nil {
			for _, b := range sys {
				c.System += b.Text
			}
		} else {
			_ = json.Unmarshal(w.System, &c.System)
		}
		for _, t := range w.Tools {
			c.Tools = append(c.Tools, t.Name)
		}
		for _, m := range w.Messages {
			var blocks []wireBlock
			if json.Unmarshal(m.Content, &blocks) != nil {
				continue
			}
			for _, b := range blocks {
				switch b.Type {
				case "image":
					if b.Source != nil {
						c.Images = append(c.Images, provider.Image{URL: b.Source.URL, Data: b.Source.Data, MediaType: b.Source.MediaType})
					}
				case "tool_use":
					c.ToolCalls = append(c.ToolCalls, provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				case "tool_result":
					tr := provider.ToolResult{CallID: b.ToolUseID, IsError: b.IsError}
					var parts []wireBlock
					if json.Unmarshal(b.Content, &parts) == nil {
						for _, p := range parts {
							tr.Content += p.Text
						}
					} else {
						_ = json.Unmarshal(b.Content, &tr.Content)
					}
					c.ToolResults = append(c.ToolResults, tr)
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

// newEnv starts a fake and an adapter pointed at it.
func newEnv(t *testing.T, opts ...anthropicfake.Option) (*anthropic.Adapter, *fake) {
	t.Helper()
	srv := anthropicfake.New(append([]anthropicfake.Option{anthropicfake.WithAPIKey(testKey)}, opts...)...)
	t.Cleanup(srv.Close)
	s := provider.Settings{Name: "claude", BaseURL: srv.URL(), Credentials: map[string]string{"api_key": testKey}, Pricer: catalog(t)}
	a, err := anthropic.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return a, &fake{srv: srv, settings: s}
}

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Env {
		a, f := newEnv(t)
		return &providertest.Env{Adapter: a, Fake: f, Pricer: catalog(t), Namespace: anthropic.Namespace, Model: a.ModelFor(provider.TierBalanced),
			WithSettings: func(edit func(*provider.Settings)) provider.Adapter {
				s := f.settings
				edit(&s)
				a, err := anthropic.New(s)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}}
	})
}
