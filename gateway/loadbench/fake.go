package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// The benchmark's upstream is the project's two wire-faithful provider
// fakes behind one address: the Anthropic fake (anthropicfake) answers the
// Messages API (/v1/messages and its other routes), the OpenAI fake
// (openaifake) every other path (/v1/chat/completions, /v1/responses,
// /v1/models). Their bytes are theirs: Messages answers with usage, the
// stream's event names, pings and padding, Chat chunks with the usage
// chunk and [DONE]. The benchmark shapes an answer through a directive in
// the request's prompt, which a gateway relays or translates like any
// other text:
//
//	[loadbench chunks=N every=D]
//
// chunks=N answers with text that streams in N content chunks (N
// text_delta events on Messages, N content chunks on Chat); every=D
// trickles a stream: each event after the headers is sent D after the one
// before it, as a model generating slowly does. Without a directive the
// fakes answer with their echo.

// directive is what a request's prompt asks of the fake's answer.
type directive struct {
	chunks int
	every  time.Duration
}

// directiveMarker opens a directive in a prompt.
const directiveMarker = "[loadbench "

// directiveWindow is how far from the end of a body a directive is
// looked for: it is in the conversation's last message, which a
// translating gateway may follow with the tools.
const directiveWindow = 16 << 10

// parseDirective finds the directive in the last directiveWindow bytes of
// a request body (the zero directive when there is none or it does not
// parse). The last directive wins: an earlier turn of a conversation may
// quote one.
func parseDirective(body []byte) directive {
	var d directive
	body = body[max(0, len(body)-directiveWindow):]
	i := bytes.LastIndex(body, []byte(directiveMarker))
	if i < 0 {
		return d
	}
	rest := body[i+len(directiveMarker):]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		return d
	}
	for _, f := range strings.Fields(string(rest[:end])) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "chunks":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				d.chunks = n
			}
		case "every":
			if t, err := time.ParseDuration(v); err == nil && t > 0 {
				d.every = t
			}
		}
	}
	return d
}

// directiveText is the directive for chunks and every, to put in a prompt.
func directiveText(chunks int, every time.Duration) string {
	var b strings.Builder
	b.WriteString(directiveMarker)
	b.WriteString("chunks=" + strconv.Itoa(chunks))
	if every > 0 {
		b.WriteString(" every=" + every.String())
	}
	b.WriteString("]")
	return b.String()
}

// answerWord is the word a long answer repeats: with its leading space,
// one piece of either fake's stream splitting.
const answerWord = " token"

// words returns n answer words ("token token …").
func words(n int) string {
	return strings.TrimPrefix(strings.Repeat(answerWord, max(n, 1)), " ")
}

// anthropicReply answers a Messages request: N text_delta events for
// chunks=N (the fake streams the first word alone, then two words per
// event), else the echo.
func anthropicReply(rec anthropicfake.Recorded) anthropicfake.Reply {
	if d := parseDirective(rec.Body); d.chunks > 0 {
		return anthropicfake.Reply{Text: words(2*d.chunks - 1)}
	}
	return anthropicfake.Echo(rec)
}

// openAIReply answers a Chat Completions or Responses request: N content
// chunks for chunks=N (the fake streams one word per chunk), else the
// echo.
func openAIReply(rec openaifake.Recorded) openaifake.Reply {
	if d := parseDirective(rec.Body); d.chunks > 0 {
		return openaifake.Reply{Text: words(d.chunks)}
	}
	return openaifake.Echo(rec)
}

// benchFake is the benchmark's upstream (see above).
type benchFake struct {
	anth *anthropicfake.Server
	oai  *openaifake.Server
	// wait waits d, or until ctx is done (false); a test replaces it.
	wait func(ctx context.Context, d time.Duration) bool
}

// newBenchFake returns the upstream, both fakes checking key (sent as
// Authorization: Bearer, or x-api-key on Messages).
func newBenchFake(key string) *benchFake {
	return &benchFake{
		anth: anthropicfake.NewUnstarted(anthropicfake.WithAPIKey(key), anthropicfake.WithSeed(1),
			anthropicfake.WithDefaultReply(anthropicReply)),
		oai: openaifake.NewUnstarted(openaifake.WithAPIKey(key), openaifake.WithSeed(1),
			openaifake.WithDefaultReply(openAIReply)),
		wait: sleepCtx,
	}
}

// sleepCtx waits d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ServeHTTP routes r to its fake; a trickle directive spaces the events
// of the answer.
func (f *benchFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var h http.Handler = f.oai
	if strings.HasPrefix(r.URL.Path, "/v1/messages") {
		h = f.anth
	}
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := readAll(r.Body, r.ContentLength)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body.Close()
		r.Body = readCloser{bytes.NewReader(body)}
		if d := parseDirective(body); d.every > 0 {
			w = &trickleWriter{ResponseWriter: w, ctx: r.Context(), every: d.every, wait: f.wait}
		}
	}
	h.ServeHTTP(w, r)
}

// forget drops what the fakes record of each request (bodies and answers
// kept for tests' assertions), so that a long benchmark does not grow
// their heap.
func (f *benchFake) forget() {
	f.anth.ForgetRequests()
	f.oai.ForgetRequests()
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// readAll reads r whole, its buffer sized by the announced length n.
func readAll(r interface{ Read([]byte) (int, error) }, n int64) ([]byte, error) {
	var buf bytes.Buffer
	if n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(readerOnly{r})
	return buf.Bytes(), err
}

type readerOnly struct {
	r interface{ Read([]byte) (int, error) }
}

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

// trickleWriter spaces a stream's events: the fakes flush once for the
// headers and once after each event, and every flush after the first
// (each event) waits every first.
type trickleWriter struct {
	http.ResponseWriter
	ctx     context.Context
	every   time.Duration
	wait    func(context.Context, time.Duration) bool
	flushed bool
}

// FlushError waits (but for the headers), then flushes.
func (t *trickleWriter) FlushError() error {
	if t.flushed && !t.wait(t.ctx, t.every) {
		return t.ctx.Err()
	}
	t.flushed = true
	return http.NewResponseController(t.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the connection's writer.
func (t *trickleWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// fake serves the benchmark's upstream until SIGTERM.
func fake(args []string) error {
	fs := flag.NewFlagSet("fake", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18801", "address")
	key := fs.String("key", "sk-upstream", "the API key both fakes check")
	_ = fs.Parse(args)
	f := newBenchFake(*key)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f.forget()
			case <-stop:
				return
			}
		}
	}()
	return serveUntilSignal(*listen, f)
}
