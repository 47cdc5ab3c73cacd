package adapterkit

import (
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// boundPricer bounds a text by its bytes and every prompt at 500 tokens;
// it lists every model with no output cap.
type boundPricer struct{}

func (boundPricer) Cost(string, string, provider.Usage, time.Time) (provider.Money, error) {
	return 0, nil
}

func (boundPricer) Estimate(string, string, *provider.Request, provider.ImageTokens, time.Time) (provider.Money, error) {
	return 0, nil
}

func (boundPricer) Limits(string, string) (provider.ModelLimits, error) {
	return provider.ModelLimits{}, nil
}
func (boundPricer) BoundPrompt(string, *provider.Request, provider.ImageTokens) int64 { return 500 }
func (boundPricer) BoundText(_, text string) int64                                    { return int64(len(text)) }

// TestBilledEarlyEnd pins the rule a stream that ends before its end is
// billed by: the larger of the output reported and the bound of the output
// received (capped at the limit sent), the limit itself when the stream
// ended early knowing nothing better, the input reported or else bounded.
func TestBilledEarlyEnd(t *testing.T) {
	b := &Base{Pricer: boundPricer{}}
	req := &provider.Request{Prompt: "p", MaxTokens: 1000}
	start := &provider.Usage{InputTokens: 40, OutputTokens: 1}
	tests := []struct {
		name   string
		kind   provider.Kind
		noAns  bool // the provider never answered 200
		hidden bool
		report *provider.Usage
		final  bool
		out    string
		want   *provider.Usage
	}{
		{name: "never answered", kind: provider.KindCanceled, noAns: true, want: nil},
		{name: "canceled after 40 bytes", kind: provider.KindCanceled, report: start, out: "0123456789012345678901234567890123456789",
			want: &provider.Usage{InputTokens: 40, OutputTokens: 40, Estimated: true}},
		{name: "canceled: the bound is capped at the limit", kind: provider.KindCanceled, report: start, out: string(make([]byte, 1500)),
			want: &provider.Usage{InputTokens: 40, OutputTokens: 1000, Estimated: true}},
		{name: "cut, nothing reported: input bounded", kind: provider.KindNetwork, out: "abcd",
			want: &provider.Usage{InputTokens: 500, OutputTokens: 4, Estimated: true}},
		{name: "timeout before any output: the limit", kind: provider.KindTimeout, report: start,
			want: &provider.Usage{InputTokens: 40, OutputTokens: 1000, Estimated: true}},
		{name: "hidden reasoning unreported: the limit", kind: provider.KindCanceled, hidden: true, report: start, out: "abcd",
			want: &provider.Usage{InputTokens: 40, OutputTokens: 1000, Estimated: true}},
		{name: "hidden reasoning reported so far", kind: provider.KindCanceled, hidden: true, report: &provider.Usage{InputTokens: 40, OutputTokens: 300, ReasoningTokens: 290}, out: "abcd",
			want: &provider.Usage{InputTokens: 40, OutputTokens: 300, ReasoningTokens: 290}},
		{name: "final counts reported, then cut", kind: provider.KindNetwork, hidden: true, report: &provider.Usage{InputTokens: 40, OutputTokens: 700}, final: true,
			want: &provider.Usage{InputTokens: 40, OutputTokens: 700}},
		{name: "error event after output: reported plus received", kind: provider.KindOverloaded, hidden: true, report: start, out: "abcdefgh",
			want: &provider.Usage{InputTokens: 40, OutputTokens: 8, Estimated: true}},
		{name: "error event before any output", kind: provider.KindOverloaded, report: start,
			want: &provider.Usage{InputTokens: 40, OutputTokens: 1}},
		{name: "error event, nothing reported or received", kind: provider.KindServer, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Received
			if !tt.noAns {
				r.Start(tt.hidden)
			}
			if tt.report != nil {
				r.Report(*tt.report, tt.final)
			}
			r.Output(tt.out)
			got := b.Billed(tt.kind, &r, req, "ns", "m", nil)
			switch {
			case got == nil && tt.want == nil:
			case got == nil || tt.want == nil || *got != *tt.want:
				t.Errorf("billed %+v, want %+v", got, tt.want)
			}
		})
	}
}
