package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// readUntilText reads a Messages stream up to its first text delta.
func readUntilText(t *testing.T, next func() bool, cur func() anthropic.MessageStreamEventUnion) []string {
	t.Helper()
	var events []string
	for next() {
		ev := cur()
		events = append(events, ev.Type)
		if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok && d.Delta.Type == "text_delta" {
			return events
		}
	}
	t.Fatalf("the stream ended before any text: %v", events)
	return nil
}

// held is what the month's budget holds in reservations.
func held(t *testing.T, w *world) provider.Money {
	t.Helper()
	b, err := w.store.Budget(context.Background(), ledger.MonthScope(time.Now().UTC()))
	if err != nil {
		t.Fatal(err)
	}
	return b.Held
}

// A shutdown whose deadline passes while a stream is in flight cancels
// it: the client gets the protocol's error event (never a message_stop),
// the reservation is released and the attempt is recorded.
func TestShutdownMidStreamSettlesTheLedger(t *testing.T) {
	w := newWorld(t, withLedger)
	ctx := ctxT(t)
	w.oai.Enqueue(openaifake.Reply{Text: "one two three four five six seven", StallAfterChunks: 3}) // stalls until the client gives up
	stream := w.anthropic(w.key).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "gpt/gpt-5-mini", MaxTokens: 200, Messages: userMsgA("hi")},
		aoption.WithHeader(gateway.HeaderTask, "T-9"))
	defer stream.Close()
	readUntilText(t, stream.Next, stream.Current)
	if held(t, w) == 0 {
		t.Fatal("no reservation is held during the call: the test does not test anything")
	}
	if w.srv.InFlight() != 1 {
		t.Fatalf("in flight = %d", w.srv.InFlight())
	}
	deadline, cancel := context.WithCancel(ctx)
	cancel() // the grace period is over at once
	err := w.srv.Shutdown(deadline)
	if err == nil || !strings.Contains(err.Error(), "1 in-flight requests were cancelled") {
		t.Errorf("Shutdown = %v", err)
	}
	var rest []string
	for stream.Next() {
		rest = append(rest, stream.Current().Type)
	}
	ae := anthropicErr(t, stream.Err())
	if ae.Type() != "overloaded_error" || !strings.Contains(ae.Error(), "shutting down") || strings.Contains(strings.Join(rest, " "), "message_stop") {
		t.Errorf("the client saw %v then %v", rest, ae)
	}
	if h := held(t, w); h != 0 {
		t.Errorf("%s still held after shutdown", h)
	}
	rows, err := w.store.Attempts(ctx, ledger.Filter{Task: "T-9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Provider != "gpt" || rows[0].Outcome != "canceled" || !strings.HasPrefix(rows[0].InvocationID, "inv_") {
		t.Errorf("ledger rows = %+v", rows)
	}
}

// A shutdown with time to spare lets the stream in flight finish, settles
// it, and refuses new connections afterwards.
func TestShutdownLetsInFlightStreamsFinish(t *testing.T) {
	w := newWorld(t, withLedger)
	ctx := ctxT(t)
	stall := make(chan struct{})
	w.oai.Enqueue(openaifake.Reply{Text: "one two three four five six seven", StallAfterChunks: 3, Stall: stall})
	stream := w.openai(w.key).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt/gpt-5-mini", Messages: userMsg("hi"),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}, ooptionHeader(gateway.HeaderTask, "T-10"))
	defer stream.Close()
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	done := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- w.srv.Shutdown(sctx)
	}()
	close(stall)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the in-flight stream failed: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if !strings.Contains(acc.Choices[0].Message.Content, "seven") || acc.Usage.TotalTokens == 0 {
		t.Errorf("accumulated = %+v", acc.ChatCompletion)
	}
	if h := held(t, w); h != 0 {
		t.Errorf("%s still held", h)
	}
	rows, err := w.store.Attempts(ctx, ledger.Filter{Task: "T-10"})
	if err != nil || len(rows) != 1 || rows[0].Outcome != "ok" || rows[0].Cost == 0 {
		t.Errorf("ledger rows = %+v, %v", rows, err)
	}
	if resp, err := http.Get(w.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("the server still accepts connections after Shutdown")
	}
}
