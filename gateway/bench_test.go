package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// BenchmarkGatewayOverhead measures, in one run, the same non-streamed
// Chat Completions call made with the official OpenAI SDK directly to the
// OpenAI fake and through the gateway (auth, decoding, the orchestrator's
// routing and failure policy, the adapter, encoding), alternating the two
// so that both see the same machine state. It reports both latencies, the
// added latency and their ratio.
func BenchmarkGatewayOverhead(b *testing.B) {
	w := newWorld(b, serveOn("gpt"))
	ctx := context.Background()
	direct := openai.NewClient(ooption.WithBaseURL(w.oai.URL()+"/v1/"), ooption.WithAPIKey("ok-upstream"), ooption.WithMaxRetries(0), ooption.WithHTTPClient(&http.Client{}))
	via := w.openai(w.key)
	dp := openai.ChatCompletionNewParams{Model: "gpt-5-mini", Messages: userMsg("hello there")}
	vp := openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hello there")}
	call := func(c *openai.Client, p openai.ChatCompletionNewParams) time.Duration {
		t0 := time.Now()
		if _, err := c.Chat.Completions.New(ctx, p); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// The orchestrator called in-process with the same request: what the
	// gateway adds on top of it is its own HTTP hop, auth, decoding and
	// encoding.
	oc := orchestrator.Call{Providers: []string{"gpt"}, Request: provider.Request{Model: "gpt-5-mini", Messages: []provider.Message{provider.UserText("hello there")}}}
	inproc := func() time.Duration {
		t0 := time.Now()
		if _, err := w.o.Invoke(ctx, oc); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 20 { // warm every path: connections, pools, tokenizer
		call(&direct, dp)
		inproc()
		call(via, vp)
	}
	var d, o, g time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d += call(&direct, dp)
		o += inproc()
		g += call(via, vp)
	}
	b.StopTimer()
	report(b, d, g, "")
	b.ReportMetric(float64(o.Microseconds())/float64(b.N), "orchestrator-µs/op")
	b.ReportMetric(float64((g-o).Microseconds())/float64(b.N), "gateway-only-µs/op")
}

// BenchmarkGatewayStreamTTFB does the same for streams: the time to the
// first content chunk, directly and through the gateway.
func BenchmarkGatewayStreamTTFB(b *testing.B) {
	w := newWorld(b, serveOn("gpt"))
	ctx := context.Background()
	direct := openai.NewClient(ooption.WithBaseURL(w.oai.URL()+"/v1/"), ooption.WithAPIKey("ok-upstream"), ooption.WithMaxRetries(0), ooption.WithHTTPClient(&http.Client{}))
	via := w.openai(w.key)
	dp := openai.ChatCompletionNewParams{Model: "gpt-5-mini", Messages: userMsg("hello there, how are you today")}
	vp := openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hello there, how are you today")}
	ttfb := func(c *openai.Client, p openai.ChatCompletionNewParams) time.Duration {
		t0 := time.Now()
		s := c.Chat.Completions.NewStreaming(ctx, p)
		var first time.Duration
		for s.Next() {
			if ch := s.Current(); first == 0 && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				first = time.Since(t0)
			}
		}
		if err := s.Err(); err != nil || first == 0 {
			b.Fatalf("stream: %v (first content after %s)", err, first)
		}
		return first
	}
	for range 20 {
		ttfb(&direct, dp)
		ttfb(via, vp)
	}
	var d, g time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d += ttfb(&direct, dp)
		g += ttfb(via, vp)
	}
	b.StopTimer()
	report(b, d, g, "ttfb-")
}

func report(b *testing.B, direct, via time.Duration, prefix string) {
	n := float64(b.N)
	dus, gus := float64(direct.Microseconds())/n, float64(via.Microseconds())/n
	b.ReportMetric(dus, prefix+"direct-µs/op")
	b.ReportMetric(gus, prefix+"gateway-µs/op")
	b.ReportMetric(gus-dus, prefix+"added-µs/op")
	b.ReportMetric(gus/dus, prefix+"ratio")
}
