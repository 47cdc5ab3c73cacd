package provider

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"time"
)

// Adapter is one configured provider endpoint: the Go form of the spec's
// ProviderAdapter. Implementations are safe for concurrent use, never retry
// (the orchestrator owns retries) and return failures as [*Error].
type Adapter interface {
	// Name is the instance name from the configuration ("anthropic",
	// "ollama-local").
	Name() string
	// Invoke runs one request to completion.
	Invoke(ctx context.Context, req *Request) (*Result, error)
	// Stream starts one request and returns its chunks as they arrive.
	// Cancelling ctx or calling Close ends the stream and releases the
	// connection.
	Stream(ctx context.Context, req *Request) (Stream, error)
	// EstimateCost returns an upper bound of what req can cost: the prompt
	// counted offline, the output bounded by req's max tokens. An error
	// means the request cannot be priced.
	EstimateCost(req *Request) (Money, error)
	// Capabilities returns what this endpoint can do with at least one of its
	// models; see [ModelCapabler] for per-model sets.
	Capabilities() CapabilitySet
	// RateLimitStatus returns what the provider last reported.
	RateLimitStatus(ctx context.Context) RateLimitStatus
	// HealthCheck probes the endpoint without spending tokens where the
	// provider allows.
	HealthCheck(ctx context.Context) HealthStatus
}

// ModelCapabler is implemented by adapters whose models differ in
// capabilities (context window, vision).
type ModelCapabler interface {
	ModelCapabilities(model string) CapabilitySet
}

// Endpointer is implemented by adapters that talk to one base URL; the
// locality gate decides on it before any connection is made.
type Endpointer interface {
	BaseURL() string
}

// ImageURLFetcher is implemented by adapters whose provider fetches an
// image given by URL on its own side: a hosted API reached at its vendor's
// own endpoint. The orchestrator sends an image URL only to such an adapter
// (or to an endpoint configured to take them), never to a server that would
// fetch the URL from this machine's network.
type ImageURLFetcher interface {
	FetchesImageURLs() bool
}

// TierMapper is implemented by adapters that map tiers to models; the router
// uses it to explain its choices.
type TierMapper interface {
	ModelFor(t Tier) string
}

// Stream is an invocation in progress. Recv returns chunks in order; after
// the final chunk (Chunk.Final, carrying the assembled Result) it returns
// io.EOF. A failure midway is an [*Error] whose Usage holds what was billed.
// Close may be called at any time, more than once, and releases the
// connection. After Close, Recv returns at once the error that ended the
// stream: for a stream closed before its end, a [KindCanceled] *Error whose
// Usage holds what the provider can bill for the answer so far.
type Stream interface {
	Recv() (Chunk, error)
	Close() error
}

// Chunk is one piece of a streamed answer.
type Chunk struct {
	// Text is new answer text.
	Text string `json:"delta_text,omitempty"`
	// ToolCall is a fragment of a tool call.
	ToolCall *ToolCallDelta `json:"delta_tool_call,omitempty"`
	// Reasoning is new reasoning text (Anthropic thinking, Gemini thought
	// summaries), where the provider streams it; the final Result holds
	// it whole as reasoning parts.
	Reasoning string `json:"delta_reasoning,omitempty"`
	// ReasoningMeta, when set, ends the reasoning streamed so far with its
	// provider data (an Anthropic thinking block's signature), as the
	// reasoning part of the final Result carries it in Meta.
	ReasoningMeta Metadata `json:"reasoning_meta,omitempty"`
	// Final marks the last chunk; Result then holds the whole answer, its
	// usage, cost and stop reason.
	Final  bool    `json:"is_final"`
	Result *Result `json:"result,omitempty"`
	// Model, on the first chunk, is the model answering as the provider
	// names it (a dated snapshot of the model asked for, say), when the
	// provider said it; later chunks leave it empty.
	Model string `json:"model,omitempty"`
	// Usage, on the first chunk, is what the provider reported of the
	// usage before the answer (Anthropic's message_start, Gemini's usage
	// metadata: input and cache counts), nil when it reports none until
	// the end.
	Usage *Usage `json:"usage,omitempty"`
	// Raw, on a stream relayed in its client's protocol
	// ([Request.Native]), is the provider's event as it came, framing
	// included ("event: …\ndata: …\n\n"): every event, pings and
	// events that carry nothing above among them, is one chunk. Nil on
	// a translated stream.
	Raw []byte `json:"-"`
	// More, on a relayed stream, says the next chunk has already arrived
	// whole (Recv returns it without waiting on the provider): a relay may
	// write this chunk's bytes with the next one's, in one write, rather
	// than flushing each.
	More bool `json:"-"`
	// Reply, on the first chunk of a relayed stream, holds the provider's
	// status and end-to-end headers (no body).
	Reply *NativeReply `json:"-"`
}

// ToolCallDelta is a fragment of a streamed tool call. Index identifies the
// call within the answer; ID and Name arrive with the first fragment;
// Arguments fragments concatenate to the JSON arguments.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Chunks adapts s to a range loop. It closes s when the loop ends, also on
// break, and yields a final non-nil error if the stream failed.
func Chunks(s Stream) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		defer s.Close()
		for {
			c, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(Chunk{}, err)
				return
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// Collect reads s to the end, closes it and returns the final Result. A
// stream that ends without a final chunk is a network error (truncated).
func Collect(s Stream) (*Result, error) {
	var text strings.Builder
	for c, err := range Chunks(s) {
		if err != nil {
			return nil, err
		}
		text.WriteString(c.Text)
		if c.Final {
			if c.Result == nil {
				return nil, &Error{Kind: KindServer, Diagnostic: Diagnostic{Message: "final stream chunk carries no result"}}
			}
			return c.Result, nil
		}
	}
	return nil, &Error{Kind: KindNetwork, Diagnostic: Diagnostic{Message: "stream ended before its final chunk"}}
}

// Pricer prices usage and estimates requests; pricing.Catalog implements it.
// Adapters receive one in [Settings].
type Pricer interface {
	// Cost prices u for model in pricing namespace ns (anthropic, openai,
	// gemini, or a local namespace such as ollama that prices at zero).
	Cost(ns, model string, u Usage, at time.Time) (Money, error)
	// Estimate returns an upper bound of the cost of req on model, each
	// image of req bounded by images (the adapter's formula for model).
	Estimate(ns, model string, req *Request, images ImageTokens, at time.Time) (Money, error)
	// Limits returns what the catalog knows of model's size and inputs; an
	// error when the model is unknown, zero limits for a local namespace.
	Limits(ns, model string) (ModelLimits, error)
	// BoundPrompt returns the upper bound of req's prompt tokens that
	// Estimate prices, in namespace ns's tokenizer, each image bounded by
	// images.
	BoundPrompt(ns string, req *Request, images ImageTokens) int64
	// BoundText returns an upper bound of the tokens namespace ns's
	// tokenizer counts for text, by the rule Estimate bounds a prompt's
	// texts with.
	BoundText(ns, text string) int64
}

// ModelLimits describes a model's context window, output limit and inputs.
type ModelLimits struct {
	ContextWindow   int64
	MaxOutputTokens int64
	Vision          bool
}

// Capabilities returns the long-context and vision capabilities these
// limits imply.
func (l ModelLimits) Capabilities() CapabilitySet {
	var s CapabilitySet
	if l.ContextWindow >= 200_000 {
		s = s.With(CapLongContext200K)
	}
	if l.ContextWindow >= 1_000_000 {
		s = s.With(CapLongContext1M)
	}
	if l.Vision {
		s = s.With(CapVision)
	}
	return s
}
