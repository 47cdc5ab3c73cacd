// Package providertest is the conformance suite every adapter must pass.
//
// An adapter's test calls [Run] with a function that builds a fresh adapter
// pointed at a fresh wire-faithful fake of its provider (the fakes live with
// their vendor, for example provider/anthropic/anthropicfake). The suite
// drives both through the [Fake] interface, so one set of checks covers
// every adapter: plain completion, system prompt, sampling settings (sent
// where the model honours them, dropped where it does not), structured
// output (a schema-matching answer, or a refusal before sending where the
// model cannot), image inputs, tools and tool results,
// streaming text and tool calls, usage after a stream, early cancel without
// leaks, a stream left one delta before its end billed at least the bound
// of the output it received, every error kind the protocol can produce (with retry-after),
// mid-stream errors, truncated streams, answers larger than the response
// cap, health, rate-limit status, and cost estimates that bound the billed
// cost from above, also on adversarial prompts ([AdversarialTexts]) billed
// with the fake's own counts, with no more output billed than max_tokens.
//
// Adding a provider means passing this suite.
package providertest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Reply is a successful answer scripted on a fake, in vendor-neutral terms.
type Reply struct {
	Text      string
	ToolCalls []provider.ToolCall
	// Usage is what the provider bills, in the normalised convention; the
	// fake expresses it in its protocol's own (for example Anthropic's
	// exclusive input count).
	Usage provider.Usage
	// Model is the model id the answer names; empty means the request's.
	Model string
	// Reasoning, when set, is reasoning the answer shows before its text
	// (signed where the provider signs it); only a fake that implements
	// [ReasoningFake] sends it.
	Reasoning string
}

// ReasoningFake is a [Fake] whose provider returns reasoning text, which
// [Reply.Reasoning] scripts.
type ReasoningFake interface {
	ReturnsReasoning() bool
}

// Captured is a vendor-neutral view of the last request a fake received.
type Captured struct {
	Model       string
	System      string
	Tools       []string
	ToolResults []provider.ToolResult
	ToolCalls   []provider.ToolCall // from assistant turns
	MaxTokens   int
	Stream      bool
	Sampling    Sampling
	// ResponseSchema is the JSON schema the answer was held to (nil when
	// none was sent).
	ResponseSchema json.RawMessage
	// Images are the image inputs of the user turns, in order, as sent: a
	// URL, or the decoded bytes with their media type.
	Images []provider.Image
	// Reasoning is the reasoning setting as sent (nil when none was): the
	// effort the provider received, lower case ("" when it got none), and
	// the token budget (0 when it got none).
	Reasoning *provider.Reasoning
}

// Fake is a vendor fake as the suite drives it. Methods that script a
// failure return false when the protocol cannot express it; the suite then
// skips that check for the adapter, saying so.
type Fake interface {
	// Script makes the next call answer r.
	Script(r Reply)
	// Fail makes the next call fail so that a correct adapter reports kind;
	// retryAfter is sent where the protocol carries a retry delay.
	Fail(kind provider.Kind, retryAfter time.Duration) bool
	// FailMidStream makes the next streaming call send some output, then an
	// in-stream error that a correct adapter reports as kind.
	FailMidStream(kind provider.Kind) bool
	// Truncate makes the next streaming call stop after some output, before
	// the protocol's end marker.
	Truncate() bool
	// SetRateLimits makes later responses report these remaining counts.
	SetRateLimits(requests, tokens int64) bool
	// Last returns the last request received.
	Last() Captured
	// WaitIdle returns once no client connection is open, or ctx ends.
	WaitIdle(ctx context.Context) error
}

// Env is one adapter wired to one fake.
type Env struct {
	Adapter provider.Adapter
	Fake    Fake
	// Pricer and Namespace price the adapter's models, to check costs and
	// estimates; a nil Pricer skips those checks (local servers).
	Pricer    provider.Pricer
	Namespace string
	// Model is the model the adapter uses for the balanced tier.
	Model string
	// WithSettings, when set, builds another adapter on the same fake from
	// the settings that built Adapter, changed by edit (another response
	// cap, another HTTP client). Checks that need it skip without it.
	WithSettings func(edit func(*provider.Settings)) provider.Adapter
}
