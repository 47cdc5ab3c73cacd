package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	anthropicadapter "github.com/cortexbuild/cortexbuild/provider/anthropic"
)

// TestRelayedStreamWritesWhatHasArrived: a relayed stream's event reaches
// the client before the provider sends the next one (the upstream below
// waits for the client to have read each batch before it sends the
// next), and events that arrived together leave together, in one chunk
// of the response, rather than a write and a flush each.
func TestRelayedStreamWritesWhatHasArrived(t *testing.T) {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	batches := []string{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_01Up","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
			ev("ping", `{"type": "ping"}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`) +
			ev("message_stop", `{"type":"message_stop"}`),
	}
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Request-Id", "req_01Up")
		w.WriteHeader(http.StatusOK)
		for i, b := range batches {
			if i > 0 {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = io.WriteString(w, b) // one write per batch
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := anthropicadapter.New(provider.Settings{Name: "claude", BaseURL: up.URL, Credentials: map[string]string{"api_key": "ak-upstream"}, Pricer: cat})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, withOrch(func(s *orchestrator.Settings) {
		s.Endpoints, s.Preference = []orchestrator.Endpoint{{Name: "claude", Adapter: a}}, []string{"claude"}
	}))

	// The response is read on the connection itself, chunk by chunk: each
	// chunk is one flush of the gateway.
	u, err := url.Parse(w.url)
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctxT(t), "tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if dl, ok := ctxT(t).Deadline(); ok {
		_ = conn.SetDeadline(dl) // a held event fails the test rather than hanging it
	}
	body := `{"model":"claude-sonnet-4-6","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.Host, w.key, len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
		t.Fatalf("status %d, transfer encoding %v; want 200, chunked", resp.StatusCode, resp.TransferEncoding)
	}
	// http.ReadResponse left the chunked body on br: read its framing.
	chunk := func() string {
		t.Helper()
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading a chunk's size: %v", err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		return string(b[:n])
	}
	for i, want := range batches {
		if i > 0 {
			next <- struct{}{} // the provider sends the next batch only now
		}
		if got := chunk(); got != want {
			t.Fatalf("chunk %d of the relayed stream:\n got  %q\n want %q (batch %d as the provider sent it, in one chunk)", i, got, want, i)
		}
	}
	if got := chunk(); got != "" {
		t.Fatalf("after the last event, a chunk %q; want the end of the body", got)
	}
}
