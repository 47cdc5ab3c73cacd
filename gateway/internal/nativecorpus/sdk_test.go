package nativecorpus_test

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cortexbuild/cortexbuild/provider"
)

// The official SDKs' requests with what the gateway's contract does not
// model: server and hosted tools, context management under its beta,
// documents and search results, reasoning items, service tiers, cache
// keys and a top-level field no API defines yet.

// moduleVersion is the version of a module the repository requires (go
// test binaries carry no dependency list in their build information).
func moduleVersion(t *testing.T, path string) string {
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + `\s+v(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod does not require %s", path)
	}
	return string(m[1])
}

func captureSDKs(t *testing.T, c *capture) {
	t.Run("anthropic-sdk-go", func(t *testing.T) { captureAnthropicSDK(t, c) })
	t.Run("openai-go", func(t *testing.T) { captureOpenAISDK(t, c) })
}

func captureAnthropicSDK(t *testing.T, c *capture) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := anthropic.NewClient(aoption.WithBaseURL(c.srv.URL()), aoption.WithAPIKey(c.key("sk-ant-api03-")), aoption.WithMaxRetries(0))
	const model = "claude-sonnet-5-5"
	var recs []captured

	// A web_search server tool, streamed.
	recs = append(recs, c.srv.run("web-search", func(cl *call) answer {
		id := ident("srvtoolu_01", "srv"+cl.seed(), 22)
		m := aMessage{stop: "end_turn", searches: 1, content: []obj{
			o("type", "server_tool_use", "id", id, "name", "web_search", "input", o("query", "Go 1.26 release notes")),
			o("type", "web_search_tool_result", "tool_use_id", id, "content", []obj{
				o("type", "web_search_result", "title", "Go 1.26 Release Notes", "url", "https://go.dev/doc/go1.26",
					"encrypted_content", blob("wsr"+cl.seed(), 480), "page_age", "February 10, 2026")}),
			o("type", "text", "text", "Go 1.26 makes the Green Tea garbage collector the default.", "citations", []obj{
				o("type", "web_search_result_location", "cited_text", "The Green Tea garbage collector is now enabled by default.",
					"url", "https://go.dev/doc/go1.26", "title", "Go 1.26 Release Notes", "encrypted_index", blob("idx"+cl.seed(), 64))}),
		}}
		a := anthropicMessage(cl, "a web_search_20250305 server tool (max_uses, allowed_domains, user_location), streamed; the answer has server_tool_use, web_search_tool_result, a cited text block and usage.server_tool_use.web_search_requests", m)
		a.what = "stream"
		return a
	}, func() {
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: model, MaxTokens: 2048,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What changed in Go 1.26?"))},
			Tools: []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{
				MaxUses: anthropic.Int(3), AllowedDomains: []string{"go.dev"},
				UserLocation: anthropic.WebSearchTool20250305UserLocationParam{City: anthropic.String("Berlin"), Country: anthropic.String("DE"), Timezone: anthropic.String("Europe/Berlin")},
			}}},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Errorf("web-search: accumulating the stream: %v", err)
			}
		}
		if err := stream.Err(); err != nil || len(msg.Content) != 3 || msg.Usage.ServerToolUse.WebSearchRequests != 1 {
			t.Errorf("web-search: err %v, %d blocks, %d searches", err, len(msg.Content), msg.Usage.ServerToolUse.WebSearchRequests)
		}
	})...)

	// Context management under its beta, after a tool loop.
	recs = append(recs, c.srv.run("context-management", func(cl *call) answer {
		m := aMessage{stop: "end_turn", content: []obj{aText("The build passes.")},
			extra: o("context_management", o("applied_edits", []obj{o("type", "clear_tool_uses_20250919", "cleared_tool_uses", 1, "cleared_input_tokens", 1840)}))}
		a := anthropicMessage(cl, "context_management (clear_tool_uses_20250919) with the context-management-2025-06-27 beta, after a tool_use/tool_result turn; the answer reports the applied edit", m)
		a.what = "beta"
		return a
	}, func() {
		msg, err := client.Beta.Messages.New(ctx, anthropic.BetaMessageNewParams{
			Model: model, MaxTokens: 1024,
			Betas: []anthropic.AnthropicBeta{"context-management-2025-06-27"},
			Tools: []anthropic.BetaToolUnionParam{{OfTool: &anthropic.BetaToolParam{
				Name: "run_tests", Description: anthropic.String("Run the test suite"),
				InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"package": map[string]any{"type": "string"}}},
			}}},
			Messages: []anthropic.BetaMessageParam{
				anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Does the build pass?")),
				{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
					anthropic.NewBetaToolUseBlock("toolu_01A09q90qw90lq917835lq9", map[string]any{"package": "./..."}, "run_tests")}}},
				anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock("toolu_01A09q90qw90lq917835lq9", "ok  \tgithub.com/example/app\t0.412s", false)),
			},
			ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{{
				OfClearToolUses20250919: &anthropic.BetaClearToolUses20250919EditParam{
					Trigger:         anthropic.BetaClearToolUses20250919EditTriggerUnionParam{OfInputTokens: &anthropic.BetaInputTokensTriggerParam{Value: 30000}},
					Keep:            anthropic.BetaToolUsesKeepParam{Value: 2},
					ClearAtLeast:    anthropic.BetaInputTokensClearAtLeastParam{Value: 5000},
					ClearToolInputs: anthropic.BetaClearToolUses20250919EditClearToolInputsUnionParam{OfBool: anthropic.Bool(true)},
					ExcludeTools:    []string{"memory"},
				},
			}}},
		})
		if err != nil || len(msg.ContextManagement.AppliedEdits) != 1 {
			t.Errorf("context-management: err %v, answer %+v", err, msg)
		}
	})...)

	// A document, a search result and a field no API defines yet.
	recs = append(recs, c.srv.run("documents", func(cl *call) answer {
		m := aMessage{stop: "end_turn", content: []obj{
			o("type", "text", "text", "The relay keeps the body as sent.", "citations", []obj{
				o("type", "char_location", "cited_text", "The gateway relays a request as the client sent it.", "document_index", 0, "document_title", "Gateway notes", "start_char_index", 0, "end_char_index", 51, "file_id", nil)}),
			aText(" "),
			o("type", "text", "text", "Answers come back as the provider sent them.", "citations", []obj{
				o("type", "search_result_location", "cited_text", "Answers and errors come back as the provider sent them.", "source", "https://docs.example.com/relay", "title", "Relay", "search_result_index", 1, "start_block_index", 0, "end_block_index", 0)}),
		}}
		a := anthropicMessage(cl, "a document block (plain text, citations on), a search_result block and an unknown top-level field, unary; the answer has char_location and search_result_location citations", m)
		a.what = "unary"
		return a
	}, func() {
		doc := anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: "The gateway relays a request as the client sent it. It changes only the model."})
		doc.OfDocument.Title = anthropic.String("Gateway notes")
		doc.OfDocument.Citations = anthropic.CitationsConfigParam{Enabled: anthropic.Bool(true)}
		sr := anthropic.NewSearchResultBlock([]anthropic.TextBlockParam{{Text: "Answers and errors come back as the provider sent them."}}, "https://docs.example.com/relay", "Relay")
		sr.OfSearchResult.Citations = anthropic.CitationsConfigParam{Enabled: anthropic.Bool(true)}
		msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model: model, MaxTokens: 1024,
			System: []anthropic.TextBlockParam{{Text: "Answer from the sources, citing them."}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(doc, sr,
				anthropic.NewTextBlock("What does the relay change?"))},
			Metadata: anthropic.MetadataParam{UserID: anthropic.String("user-7f3a")},
		}, aoption.WithJSONSet("future_option", map[string]any{"mode": "strict", "level": 2}))
		if err != nil || len(msg.Content) != 3 {
			t.Errorf("documents: err %v, answer %+v", err, msg)
		}
	})...)

	// Adaptive thinking and a tool, streamed, then the thinking sent back.
	var turn1 anthropic.Message
	think := func(cl *call) answer {
		if messagesConvo(cl.js).last("get_weather") != nil {
			a := anthropicAnswer(cl, "turn 2: the SDK sends the thinking block (with its signature), a redacted_thinking block and the tool_use back with the tool_result", "end_turn",
				aThinking(cl.seed(), "It is sunny; say so."), aText("It is 18 °C and sunny in Paris."))
			a.what = "turn2"
			return a
		}
		a := anthropicAnswer(cl, "turn 1: adaptive thinking, effort, a tool and a cache breakpoint, streamed; the answer has thinking_delta and signature_delta, a redacted_thinking block and a tool_use", "tool_use",
			aThinking(cl.seed(), "The user asks for the weather; I should call get_weather for Paris."),
			o("type", "redacted_thinking", "data", blob("redacted"+cl.seed(), 256)),
			aToolUse(ident("toolu_01", "tu"+cl.seed(), 22), "get_weather", o("city", "Paris")))
		a.what = "turn1"
		return a
	}
	recs = append(recs, c.srv.run("thinking", think, func() {
		params := anthropic.MessageNewParams{
			Model: model, MaxTokens: 4096,
			Thinking:     anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{Display: "summarized"}},
			OutputConfig: anthropic.OutputConfigParam{Effort: "high"},
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
				Name: "get_weather", Description: anthropic.String("The weather in a city"),
				InputSchema:  anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
				CacheControl: anthropic.NewCacheControlEphemeralParam(),
			}}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What's the weather in Paris?"))},
		}
		stream := client.Messages.NewStreaming(ctx, params)
		for stream.Next() {
			if err := turn1.Accumulate(stream.Current()); err != nil {
				t.Errorf("thinking: %v", err)
			}
		}
		if err := stream.Err(); err != nil || len(turn1.Content) != 3 || turn1.Content[0].Signature == "" {
			t.Fatalf("thinking turn 1: err %v, answer %+v", err, turn1)
		}
		params.Messages = append(params.Messages, turn1.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(turn1.Content[2].ID, "18 °C, sunny", false)))
		stream = client.Messages.NewStreaming(ctx, params)
		var turn2 anthropic.Message
		for stream.Next() {
			_ = turn2.Accumulate(stream.Current())
		}
		if err := stream.Err(); err != nil || len(turn2.Content) != 2 {
			t.Errorf("thinking turn 2: err %v, answer %+v", err, turn2)
		}
	})...)

	// count_tokens with tools and thinking.
	recs = append(recs, c.srv.run("count-tokens", func(cl *call) answer {
		return countAnswer(cl, "count_tokens with a system prompt, a tool and thinking", tokens(cl.body))
	}, func() {
		n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    model,
			System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "You are terse."}}},
			Thinking: anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}},
			Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{
				Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
			}}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What's the weather in Paris?"))},
		})
		if err != nil || n.InputTokens == 0 {
			t.Errorf("count-tokens: err %v, %+v", err, n)
		}
	})...)
	c.store(t, "anthropic-sdk-go", moduleVersion(t, "github.com/anthropics/anthropic-sdk-go/v2"), recs)
}

func captureOpenAISDK(t *testing.T, c *capture) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := openai.NewClient(ooption.WithBaseURL(c.srv.URL()+"/v1"), ooption.WithAPIKey(c.key("sk-proj-")), ooption.WithMaxRetries(0))
	const model = "gpt-6.2-sol"
	var recs []captured

	// Hosted tools, reasoning, priority tier, a cache key, streamed.
	recs = append(recs, c.srv.run("responses-hosted-tools", func(cl *call) answer {
		a := responsesAnswer(cl, "hosted tools (web_search, file_search, code_interpreter) beside a function tool, reasoning with encrypted content, store:false, service_tier priority, prompt_cache_key, streamed; the answer has a reasoning item, a web_search_call and a message with a url_citation",
			rReasoning(cl.seed(), "**Searching the release notes**"),
			o("id", "ws_"+hexID("ws"+cl.seed(), 48), "type", "web_search_call", "status", "completed",
				"action", o("type", "search", "query", "Go 1.26 release notes", "sources", nil)),
			rMessage(cl.seed(), "Go 1.26 makes the Green Tea garbage collector the default.",
				o("type", "url_citation", "end_index", 57, "start_index", 0, "title", "Go 1.26 Release Notes", "url", "https://go.dev/doc/go1.26")))
		a.what = "stream"
		return a
	}, func() {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model:        model,
			Instructions: openai.String("Answer briefly, citing sources."),
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("What changed in Go 1.26?")},
			Tools: []responses.ToolUnionParam{
				{OfWebSearch: &responses.WebSearchToolParam{Type: "web_search", SearchContextSize: "low"}},
				{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{"vs_68a1f0c2e6d48191"}, MaxNumResults: openai.Int(4)}},
				{OfCodeInterpreter: &responses.ToolCodeInterpreterParam{Container: responses.ToolCodeInterpreterContainerUnionParam{
					OfCodeInterpreterToolAuto: &responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{}}}},
				{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: openai.Bool(true),
					Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}, "additionalProperties": false}}},
			},
			Store:          openai.Bool(false),
			Include:        []responses.ResponseIncludable{"reasoning.encrypted_content", "web_search_call.action.sources"},
			Reasoning:      shared.ReasoningParam{Effort: "high", Summary: "auto"},
			ServiceTier:    "priority",
			PromptCacheKey: openai.String("corpus-sdk-7f3a"),
		})
		var done *responses.Response
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.completed" {
				r := ev.Response
				done = &r
			}
		}
		if err := stream.Err(); err != nil || done == nil || len(done.Output) != 3 {
			t.Errorf("responses-hosted-tools: err %v, completed %v", err, done != nil)
		}
	})...)

	// Reasoning items sent back with a function call and its output, and
	// an unknown top-level field.
	recs = append(recs, c.srv.run("responses-reasoning-items", func(cl *call) answer {
		a := responsesAnswer(cl, "turn 2 of a stateless tool loop: a reasoning item with encrypted_content, a function_call and its function_call_output in input, an unknown top-level field, unary",
			rReasoning(cl.seed(), ""), rMessage(cl.seed(), "It is 18 °C and sunny in Paris."))
		a.what = "unary"
		return a
	}, func() {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("What's the weather in Paris?", responses.EasyInputMessageRoleUser),
				{OfReasoning: &responses.ResponseReasoningItemParam{
					ID: "rs_" + hexID("sdk-rs", 48), EncryptedContent: openai.String("gAAAAAB" + urlBlob("sdk-enc", 800)),
					Summary: []responses.ResponseReasoningItemSummaryParam{{Text: "**Checking the weather**"}},
				}},
				{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
					ID: openai.String("fc_" + hexID("sdk-fc", 48)), CallID: "call_" + ident("", "sdk-call", 24),
					Name: "get_weather", Arguments: `{"city":"Paris"}`, Status: "completed",
				}},
				{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: openai.String("call_" + ident("", "sdk-call", 24)),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temp_c":18,"sky":"sunny"}`)},
				}},
			}},
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: openai.Bool(true),
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}, "additionalProperties": false}}}},
			Store:          openai.Bool(false),
			Include:        []responses.ResponseIncludable{"reasoning.encrypted_content"},
			Reasoning:      shared.ReasoningParam{Effort: "medium"},
			PromptCacheKey: openai.String("corpus-sdk-7f3a"),
		}, ooption.WithJSONSet("future_option", map[string]any{"mode": "strict"}))
		if err != nil || r.OutputText() == "" {
			t.Errorf("responses-reasoning-items: err %v", err)
		}
	})...)

	// Chat Completions, streamed, with a flex tier, a cache key, web search
	// options and an unknown top-level field.
	recs = append(recs, c.srv.run("chat-stream", func(cl *call) answer {
		return chatAnswer(cl, "service_tier flex, prompt_cache_key, web_search_options, reasoning_effort, verbosity, store and metadata, stream_options.include_usage, an unknown top-level field, streamed", "Go 1.26 makes the Green Tea garbage collector the default.")
	}, func() {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.DeveloperMessage("Answer in one sentence."),
				openai.UserMessage("What changed in Go 1.26?"),
			},
			ServiceTier:      "flex",
			PromptCacheKey:   openai.String("corpus-sdk-7f3a"),
			WebSearchOptions: openai.ChatCompletionNewParamsWebSearchOptions{SearchContextSize: "low"},
			ReasoningEffort:  "low",
			Verbosity:        "low",
			Store:            openai.Bool(false),
			Metadata:         shared.Metadata{"team": "gateway"},
			StreamOptions:    openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, ooption.WithJSONSet("future_option", true))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || len(acc.Choices) == 0 || acc.Usage.TotalTokens == 0 {
			t.Errorf("chat-stream: err %v, %+v", err, acc.ChatCompletion)
		}
	})...)

	// Chat Completions, unary, with tools and cache retention.
	recs = append(recs, c.srv.run("chat-tools", func(cl *call) answer {
		a := chatAnswer(cl, "function tools with parallel_tool_calls false, prompt_cache_retention 24h, max_completion_tokens, a tool_choice, unary; the answer calls a tool", "",
			cCall(cl.seed(), "get_weather", `{"city":"Paris"}`))
		a.what = "unary"
		return a
	}, func() {
		cc, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What's the weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "get_weather", Strict: openai.Bool(true),
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}, "additionalProperties": false},
			})},
			ToolChoice:           openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			ParallelToolCalls:    openai.Bool(false),
			PromptCacheRetention: "24h",
			MaxCompletionTokens:  openai.Int(2048),
		})
		if err != nil || len(cc.Choices) != 1 || len(cc.Choices[0].Message.ToolCalls) != 1 {
			t.Errorf("chat-tools: err %v", err)
		}
	})...)
	for _, r := range recs {
		if r.ex.Protocol == provider.ProtoMessages {
			t.Errorf("openai-go made a Messages request")
		}
	}
	c.store(t, "openai-go", moduleVersion(t, "github.com/openai/openai-go/v3"), recs)
}
