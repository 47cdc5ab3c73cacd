package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
)

// Body shapes of the large-body benchmark and tests: one huge message
// (a pasted file), many ordinary turns, and many tiny parts (an agent's
// long tool loop: text parts, tool calls and their results), where the
// count of values decoded matters more than their bytes.
var bodyShapes = []string{"text", "turns", "parts"}

// largeChatBody returns a Chat Completions body of about size bytes of the
// given shape, for model.
func largeChatBody(shape string, size int, model string) []byte {
	r := rand.New(rand.NewPCG(uint64(size), 7))
	words := strings.Fields("the gateway reads a request body once and decodes it into the call it makes func main return err nil if for range := struct { } ( ) [ ] 0 1 42 http json provider budget token estimate cache key ledger")
	text := func(n int) string {
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteString(words[r.IntN(len(words))])
			if r.IntN(12) == 0 {
				sb.WriteString(".\n")
			} else {
				sb.WriteByte(' ')
			}
		}
		return sb.String()
	}
	var b bytes.Buffer
	b.WriteString(`{"model":` + strconv.Quote(model) + `,"max_tokens":16,"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a careful builder."}`)
	switch shape {
	case "text":
		// Quoting adds an escape per line break: stay within size.
		b.WriteString(`,{"role":"user","content":` + strconv.Quote(text(size-size/16)) + `}`)
	case "turns":
		for i := 0; b.Len() < size; i++ {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			b.WriteString(`,{"role":"` + role + `","content":` + strconv.Quote(text(8<<10)) + `}`)
		}
		b.WriteString(`,{"role":"user","content":"go on"}`)
	case "parts":
		for i := 0; b.Len() < size; i++ {
			b.WriteString(`,{"role":"user","content":[`)
			for j := range 64 {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`{"type":"text","text":` + strconv.Quote(text(12)) + `}`)
			}
			b.WriteString(`]},{"role":"assistant","tool_calls":[`)
			for j := range 8 {
				if j > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":"c%d_%d","type":"function","function":{"name":"read","arguments":"{\"n\":%d}"}}`, i, j, j)
			}
			b.WriteString(`]}`)
			for j := range 8 {
				fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"c%d_%d","content":"ok %d"}`, i, j, j)
			}
		}
	default:
		panic("unknown shape " + shape)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// sinkWorld is a world whose "gpt" provider is a sink on loopback: it
// reads and discards each request and answers a fixed completion, so the
// memory and CPU measured are the gateway's (and the adapter's encoding of
// the call), not a fake's decoding. The ledger is the fast path with a
// month budget of limit dollars.
func sinkWorld(tb testing.TB, limit string) (*world, *atomic.Int64) {
	tb.Helper()
	var upstream atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		upstream.Add(n)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`)
	}))
	tb.Cleanup(sink.Close)
	cat, err := pricing.Default()
	if err != nil {
		tb.Fatal(err)
	}
	a, err := openaicompat.New(provider.Settings{Name: "gpt", Profile: "openai", BaseURL: sink.URL + "/v1", Credentials: map[string]string{"api_key": "ok-upstream"}, Pricer: cat})
	if err != nil {
		tb.Fatal(err)
	}
	w := newWorld(tb, withLedger, serveOn("gpt"), withOrch(func(s *orchestrator.Settings) {
		s.Endpoints = []orchestrator.Endpoint{{Name: "gpt", Adapter: a}}
		ctx := context.Background()
		fast, err := ledger.NewFast(ctx, s.Ledger, tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { fast.Close() })
		if err := fast.SetBudget(ctx, ledger.MonthScope(time.Now().UTC()), provider.MustMoney(limit)); err != nil {
			tb.Fatal(err)
		}
		s.Ledger = fast
	}))
	return w, &upstream
}

// postBody sends body to the gateway's Chat Completions route and returns
// the status.
func postBody(tb testing.TB, w *world, body []byte) int {
	req, _ := http.NewRequest("POST", w.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkLargeBody sends one Chat Completions request of each shape and
// size through the gateway (auth, body read, decoding, the budget's
// estimate and admission, the adapter's encoding, the call to a sink) and
// reports, besides B/op:
//
//   - alloc-B/body-B: bytes allocated per request over the body's size;
//   - peak-RSS-B/body-B: the process's peak resident set during one
//     request (VmHWM, reset before it through /proc/self/clear_refs) above
//     its resident set before it, over the body's size;
//   - cpu-ms/op: the process's user+system CPU time per request.
//
// outcome=served has room in the month's budget; outcome=refused has
// $0.000001 left, so that the budget refuses the call.
func BenchmarkLargeBody(b *testing.B) {
	for _, outcome := range []string{"served", "refused"} {
		limit, want := "1000", http.StatusOK
		if outcome == "refused" {
			limit, want = "0.000001", http.StatusTooManyRequests
		}
		w, _ := sinkWorld(b, limit)
		for _, shape := range bodyShapes {
			for _, mib := range []int{1, 4, 16, 32} {
				body := largeChatBody(shape, mib<<20-4096, "gpt/gpt-5-mini")
				b.Run(fmt.Sprintf("outcome=%s/shape=%s/size=%dMiB", outcome, shape, mib), func(b *testing.B) {
					if got := postBody(b, w, body); got != want {
						b.Fatalf("status %d, want %d", got, want)
					}
					b.ReportAllocs()
					b.SetBytes(int64(len(body)))
					var peak int64
					var cpu time.Duration
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						runtime.GC()
						debug.FreeOSMemory()
						base := procStatus(b, "VmRSS")
						resetPeakRSS(b)
						c0 := cpuTime()
						b.StartTimer()
						if got := postBody(b, w, body); got != want {
							b.Fatalf("status %d, want %d", got, want)
						}
						b.StopTimer()
						cpu += cpuTime() - c0
						peak = max(peak, procStatus(b, "VmHWM")-base)
						b.StartTimer()
					}
					b.StopTimer()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					b.ReportMetric(float64(peak)/float64(len(body)), "peak-RSS-B/body-B")
					b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
				})
			}
		}
	}
}

// procStatus returns a field of /proc/self/status in bytes.
func procStatus(tb testing.TB, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("peak RSS needs Linux's /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("%s: %v", line, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS sets VmHWM back to the current resident set.
func resetPeakRSS(tb testing.TB) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("resetting the peak RSS needs /proc/self/clear_refs (Linux 4.0+): %v", err)
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
