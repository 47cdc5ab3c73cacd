package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// cutWords are one-token words of o200k: an answer of n of them is n
// tokens, so the text the fake streams agrees with the output count it
// reports at the end, as the Messages API's does.
var cutWords = strings.Fields("the of and to in is was for on that with as by at from this be are it an or have not but were which had their one all been has more can its who also")

const (
	cutOutput    = 4000 // output tokens of the answer
	cutInput     = 2000 // input tokens message_start reports
	cutMaxTokens = 8192
	// cutLead is how many events the Anthropic fake sends before the
	// first text delta: message_start, content_block_start, ping.
	cutLead = 3
)

func cutText() string {
	words := make([]string, cutOutput)
	for i := range words {
		words[i] = cutWords[i%len(cutWords)]
	}
	return strings.Join(words, " ")
}

// cutBodies are the streaming requests of each caller protocol.
var cutBodies = map[string]string{
	"chat":      `{"model":"builder","max_tokens":%d,"stream":true,"messages":[{"role":"user","content":"write at length"}]}`,
	"responses": `{"model":"builder","max_output_tokens":%d,"stream":true,"input":"write at length"}`,
	"messages":  `{"model":"builder","max_tokens":%d,"stream":true,"messages":[{"role":"user","content":"write at length"}]}`,
}

// cutRead streams p's request through the gateway and reads text events
// until it has read stop of them (all of them when stop < 0), then closes
// the connection. It returns the text read, how many text events, and the
// invocation id.
func cutRead(t *testing.T, w *world, p gmProto, stop int) (string, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := p.request(t, ctx, w, gmTask, fmt.Sprintf(cutBodies[p.name], cutMaxTokens))
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Closing the body of a response not read to its end closes the
	// connection: the client is gone.
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var text strings.Builder
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var name string
	for n != stop && sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			name = ev
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var d string
		switch p.name {
		case "chat":
			var c struct {
				Choices []struct{ Delta struct{ Content string } }
			}
			if json.Unmarshal([]byte(data), &c) == nil && len(c.Choices) > 0 {
				d = c.Choices[0].Delta.Content
			}
		case "responses":
			if name == "response.output_text.delta" {
				d, _ = jsonPath([]byte(data), "delta")
			}
		case "messages":
			if name == "content_block_delta" {
				d, _ = jsonPath([]byte(data), "delta", "text")
			}
		}
		if d != "" {
			text.WriteString(d)
			n++
		}
	}
	return text.String(), n, resp.Header.Get(gateway.HeaderInvocation)
}

// cutRow waits until the gateway has finished every request, drains the
// ledger and returns the one row of invocation id.
func cutRow(t *testing.T, w *world, fast *ledger.Fast, id string) ledger.AttemptRow {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.srv.InFlight() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the gateway still serves the request the client left")
		}
		time.Sleep(time.Millisecond) // polling under a deadline
	}
	rows := checkLedger(t, fast)[id]
	if len(rows) != 1 {
		t.Fatalf("rows of %s: %+v; want one", id, rows)
	}
	return rows[0]
}

// A client that reads every text event of a stream but the last and
// closes the connection is billed at least what it received: the Anthropic
// upstream streams N deltas of an answer of 4,000 tokens and reports them
// only in message_delta at the end; it stalls before the last delta until
// the client has gone. The ledger row of the canceled call carries at
// least the catalog's upper bound of the text received (capped at the
// output limit sent) and its price, never the single output token
// message_start reported. Every caller protocol.
func TestStreamLeftBeforeItsEndBillsWhatWasReceived(t *testing.T) {
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	text := cutText()
	full := anthropicfake.Reply{Text: text, Usage: anthropicfake.Usage{Input: cutInput, Output: cutOutput}}
	for _, p := range gmProtos {
		t.Run(p.name, func(t *testing.T) {
			w, fakes, fast := newGMWorld(t, gmOrder("claude"), false, false)
			// The whole answer, read to its end, counts the deltas.
			fakes.anth.Enqueue(full)
			got, n, id := cutRead(t, w, p, -1)
			whole := cutRow(t, w, fast, id)
			if got != text || whole.Outcome != "ok" || whole.OutputTokens != cutOutput {
				t.Fatalf("the whole answer: %d text events, text intact %v, row %+v", n, got == text, whole)
			}
			// The same answer, left one delta before its end.
			cut := full
			cut.StallAfterEvents = cutLead + n - 1
			fakes.anth.Enqueue(cut)
			got, m, id := cutRead(t, w, p, n-1)
			if m != n-1 {
				t.Fatalf("read %d text events of %d", m, n)
			}
			row := cutRow(t, w, fast, id)
			bound := min(cat.BoundText("anthropic", got), cutMaxTokens)
			want, err := cat.Cost("anthropic", row.Model, provider.Usage{InputTokens: cutInput, OutputTokens: bound}, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: read to the end: %d output tokens, $%s; left after %d of %d text events (%d of %d words): %s, %d output tokens, $%s (bound %d, $%s)",
				p.name, whole.OutputTokens, whole.Cost, m, n, len(strings.Fields(got)), cutOutput, row.Outcome, row.OutputTokens, row.Cost, bound, want)
			if row.Outcome != "canceled" {
				t.Errorf("outcome %q, want canceled", row.Outcome)
			}
			if row.InputTokens != cutInput || row.OutputTokens < bound || row.Cost < want {
				t.Errorf("the call left %d of %d deltas into its answer is billed %d input, %d output tokens, $%s; want %d input, at least %d output tokens (the bound of the text received) and $%s",
					n-1, n, row.InputTokens, row.OutputTokens, row.Cost, cutInput, bound, want)
			}
			if !row.EstimatedUsage {
				t.Errorf("row %+v: usage bounded from the text received is not marked estimated", row)
			}
		})
	}
}
