package adapterkit

import (
	"strings"

	"github.com/cortexbuild/cortexbuild/provider"
)

// Received is what a stream received from the provider once it answered
// 200: the output it streamed and the usage it reported. An adapter feeds
// it as events arrive; [Base.Billed] turns it into what the provider can
// bill for a stream that ends before its end. The zero value is a stream
// the provider has not answered.
type Received struct {
	started bool
	hidden  bool
	final   bool
	usage   *provider.Usage
	out     strings.Builder
}

// Start records that the provider answered 200: from then on it may bill.
// hidden says the answer may hold output the provider generates but does
// not stream (reasoning it keeps to itself or streams only a summary of).
func (r *Received) Start(hidden bool) { r.started, r.hidden = true, hidden }

// Output records output received: answer text, reasoning text, a tool
// call's name or a fragment of its arguments.
func (r *Received) Output(s string) { r.out.WriteString(s) }

// Report records the usage the provider reported, its counts so far
// (cumulative); final says they are its counts for the whole answer.
func (r *Received) Report(u provider.Usage, final bool) {
	r.usage = &u
	r.final = r.final || final
}

// earlyEnd reports whether a stream that failed with kind k ended before
// the provider was done: the caller left or cancelled, a deadline passed,
// the connection was cut. Any other failure is the provider's own end (an
// error event, an answer that breaks its protocol).
func earlyEnd(k provider.Kind) bool {
	return k == provider.KindCanceled || k == provider.KindTimeout || k == provider.KindNetwork
}

// Billed returns the usage a stream that failed with an error of kind k
// is billed, r being what it received, for req sent to model (priced in
// namespace ns); nil when nothing is billed. A stream the provider never
// answered bills nothing. Otherwise:
//
//   - output: the larger of the output the provider reported so far and
//     an upper bound of the output received ([provider.Pricer.BoundText]
//     of every text, reasoning text, tool name and argument fragment),
//     the latter capped at the output limit sent ([Base.MaxTokens]), past
//     which no provider bills. When the stream ended early ([earlyEnd])
//     before the provider reported its final counts, and it received no
//     output at all, or the answer may hold output the provider does not
//     stream that no count it reported covers (no reasoning tokens
//     reported), the output is that limit: what the provider generated
//     is not known better.
//   - input: what the provider reported (with its cache counts), else
//     the prompt's upper bound ([provider.Pricer.BoundPrompt]).
//
// The usage is marked Estimated when a count is not the provider's. A
// failure that is the provider's own end before any output or report
// bills nothing, as it did before the stream was counted.
func (b *Base) Billed(k provider.Kind, r *Received, req *provider.Request, ns, model string, images provider.ImageTokens) *provider.Usage {
	if !r.started {
		return nil
	}
	early := earlyEnd(k)
	if !early && r.usage == nil && r.out.Len() == 0 {
		return nil
	}
	var u provider.Usage
	if r.usage != nil {
		u = *r.usage
	} else {
		u = provider.Usage{InputTokens: b.boundPrompt(ns, req, images), Estimated: true}
	}
	limit := int64(b.MaxTokens(ns, model, req))
	out := min(b.boundText(ns, r.out.String()), limit)
	hiddenUnreported := r.hidden && (r.usage == nil || r.usage.ReasoningTokens == 0)
	if early && !r.final && (r.out.Len() == 0 || hiddenUnreported) {
		out = limit
	}
	if out > u.OutputTokens {
		u.OutputTokens, u.Estimated = out, true
	}
	return &u
}

// boundPrompt bounds req's prompt with the catalog; without one, the
// prompt is not counted (the call cannot be priced, and is charged its
// reservation).
func (b *Base) boundPrompt(ns string, req *provider.Request, images provider.ImageTokens) int64 {
	if b.Pricer == nil {
		return 0
	}
	return b.Pricer.BoundPrompt(ns, req, images)
}

// boundText bounds text with the catalog; without one, by its bytes, the
// most tokens any byte-level tokenizer counts.
func (b *Base) boundText(ns, text string) int64 {
	if b.Pricer == nil {
		return int64(len(text))
	}
	return b.Pricer.BoundText(ns, text)
}
