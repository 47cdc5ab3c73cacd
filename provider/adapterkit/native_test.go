package adapterkit_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

func TestSSEReaderKeepsEveryByte(t *testing.T) {
	in := "event: message_start\ndata: {\"type\":\"message_start\"}\n\n" +
		": a comment\r\nevent: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n" +
		"\n" + // a stray blank line stays with the next event
		"id: 7\ndata: line one\ndata:line two\n\n" +
		"data: [DONE]\n\n"
	r := adapterkit.NewSSEReader(strings.NewReader(in), 0)
	var raw bytes.Buffer
	var names, datas []string
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raw.Write(ev.Raw)
		names = append(names, ev.Name)
		datas = append(datas, string(ev.Data))
	}
	if raw.String() != in {
		t.Fatalf("raw bytes differ:\n%q\n%q", raw.String(), in)
	}
	if got := strings.Join(names, ","); got != "message_start,ping,," {
		t.Errorf("names %q", got)
	}
	if datas[2] != "line one\nline two" || datas[3] != "[DONE]" || datas[1] != `{"type": "ping"}` {
		t.Errorf("data %q", datas)
	}
}

func TestSSEReaderCutMidEvent(t *testing.T) {
	r := adapterkit.NewSSEReader(strings.NewReader("data: {\"a\":1}\n\ndata: {\"b\""), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	ev, err := r.Next()
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(ev.Raw) != `data: {"b"` {
		t.Fatalf("got %q, %v; want the partial event and io.ErrUnexpectedEOF", ev.Raw, err)
	}
}

func TestSSEReaderBoundsAnEvent(t *testing.T) {
	r := adapterkit.NewSSEReader(strings.NewReader("data: "+strings.Repeat("x", 100<<10)+"\n\n"), 64<<10)
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an event over the bound: %v", err)
	}
}

func TestNativeBodyEditsOnlyModelAndLimit(t *testing.T) {
	client := []byte(`{"model":"claude-x","max_tokens":64000,"tools":[{"type":"web_search_20250305","name":"web_search"}],"future_field":{"a":[1,2]}}`)
	req := &provider.Request{MaxTokens: 32000, Native: &provider.Native{Protocol: provider.ProtoMessages, Body: client}}
	got, edits, err := adapterkit.NativeBody(req, "claude-sonnet-4-6", "max_tokens", "max_completion_tokens")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(edits, ",") != "model=claude-sonnet-4-6,max_tokens=32000" {
		t.Errorf("edits %q", edits)
	}
	want := `{"model":"claude-sonnet-4-6","max_tokens":32000,"tools":[{"type":"web_search_20250305","name":"web_search"}],"future_field":{"a":[1,2]}}`
	if string(got.Bytes()) != want || got.Len() != int64(len(want)) {
		t.Fatalf("body\n%s (%d bytes)\nwant\n%s", got.Bytes(), got.Len(), want)
	}
	if sent, _ := io.ReadAll(got.Reader()); string(sent) != want {
		t.Fatalf("read\n%s\nwant\n%s", sent, want)
	}
	if !bytes.HasPrefix(client, []byte(`{"model":"claude-x"`)) {
		t.Fatal("the client's bytes were changed in place")
	}
	// The client's bytes between the edits are not copied.
	for _, p := range got {
		if len(p) > 20 && !inside(client, p) {
			t.Fatalf("piece %q is a copy of the client's bytes", p)
		}
	}
	// Nothing to edit: the very same bytes.
	whole := got.Bytes()
	same, _, _ := adapterkit.NativeBody(&provider.Request{MaxTokens: 64000, Native: &provider.Native{Body: whole}}, "claude-sonnet-4-6", "max_tokens")
	if len(same) != 1 || &same[0][0] != &whole[0] {
		t.Fatal("an unedited body was copied")
	}
}

// A body without an output limit gets the one the call was priced with:
// the provider's own default may be far above it.
func TestNativeBodyAddsTheLimitItWasPricedWith(t *testing.T) {
	req := &provider.Request{MaxTokens: 4096, Native: &provider.Native{Body: []byte(`{"model":"gpt-5","input":"hi"}`)}}
	got, edits, err := adapterkit.NativeBody(req, "gpt-5", "max_output_tokens")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Bytes()) != `{"model":"gpt-5","input":"hi","max_output_tokens":4096}` || strings.Join(edits, ",") != "max_output_tokens=4096" {
		t.Errorf("body %s, edits %q", got.Bytes(), edits)
	}
	// One of the protocol's names set: nothing added under the other.
	req.Native.Body = []byte(`{"model":"gpt-5","max_tokens":100}`)
	got, _, _ = adapterkit.NativeBody(req, "gpt-5", "max_completion_tokens", "max_tokens")
	if string(got.Bytes()) != `{"model":"gpt-5","max_tokens":100}` {
		t.Errorf("body %s", got.Bytes())
	}
}

// Edits land on the members wherever they are and however the client
// spaced them, in one copy; nothing else moves.
func TestNativeBodyEditsInPlaceOfTheMembers(t *testing.T) {
	client := []byte("{\n  \"messages\": [{\"role\": \"user\", \"content\": \"} \\\"model\\\": x\"}],\n  \"max_tokens\" : 99999 ,\n  \"model\": \"planner\"\n}\n")
	req := &provider.Request{MaxTokens: 4096, Native: &provider.Native{Body: client}}
	got, edits, err := adapterkit.NativeBody(req, "claude-\"q\"-4", "max_tokens")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"messages\": [{\"role\": \"user\", \"content\": \"} \\\"model\\\": x\"}],\n  \"max_tokens\" : 4096 ,\n  \"model\": \"claude-\\\"q\\\"-4\"\n}\n"
	if string(got.Bytes()) != want || strings.Join(edits, ",") != `model=claude-"q"-4,max_tokens=4096` {
		t.Errorf("body\n%s\nwant\n%s\nedits %q", got.Bytes(), want, edits)
	}
	// No model and no limit: both added, the object still valid.
	req = &provider.Request{MaxTokens: 10, Native: &provider.Native{Body: []byte(`{ }`)}}
	got, _, err = adapterkit.NativeBody(req, "m", "max_tokens")
	if err != nil || string(got.Bytes()) != `{ "model":"m","max_tokens":10}` {
		t.Errorf("body %s, %v", got.Bytes(), err)
	}
}

// TopOf reads from the members the gateway's scan found what Top reads
// from the body, index and all, and NativeBody edits from them alike.
func TestTopOfReadsTheScannedMembers(t *testing.T) {
	body := []byte(` { "messages":[{"role":"user","content":"hi"}], "max_tokens" : 99999 ,"model": "pl\u0061nner","stream":true,"temperature":0.5,"stream_options":{"include_usage":true}} `)
	keys := []string{"model", "max_tokens", "stream", "temperature", "stream_options", "absent"}
	want := adapterkit.Top(body, keys...)
	// The members as the gateway's scan reports them: keys unescaped,
	// values' spans in the body.
	var members []provider.Member
	for _, r := range adapterkit.Top(body, "messages", "max_tokens", "model", "stream", "temperature", "stream_options") {
		members = append(members, provider.Member{Start: r.Index, End: r.Index + len(r.Raw)})
	}
	for i, k := range []string{"messages", "max_tokens", "model", "stream", "temperature", "stream_options"} {
		members[i].Key = k
	}
	n := &provider.Native{Body: body, Members: members}
	got := adapterkit.TopOf(n, keys...)
	for i := range keys {
		if got[i].Raw != want[i].Raw || got[i].Index != want[i].Index || got[i].Type != want[i].Type || got[i].Str != want[i].Str || got[i].Num != want[i].Num {
			t.Errorf("%s: %+v, Top reads %+v", keys[i], got[i], want[i])
		}
	}
	if got[0].Str != "planner" || got[5].Exists() {
		t.Errorf("model %q, absent %v", got[0].Str, got[5].Exists())
	}
	scanned, edits, err := adapterkit.NativeBody(&provider.Request{MaxTokens: 4096, Native: n}, "m", "max_tokens")
	if err != nil {
		t.Fatal(err)
	}
	plain, _, _ := adapterkit.NativeBody(&provider.Request{MaxTokens: 4096, Native: &provider.Native{Body: body}}, "m", "max_tokens")
	if string(scanned.Bytes()) != string(plain.Bytes()) || strings.Join(edits, ",") != "model=m,max_tokens=4096" {
		t.Errorf("from the members\n%s\nfrom the body\n%s\nedits %q", scanned.Bytes(), plain.Bytes(), edits)
	}
	// An object without members: nothing to find, and no pass over it.
	if r := adapterkit.TopOf(&provider.Native{Body: []byte(`{}`), Members: []provider.Member{}}, "model"); r[0].Exists() {
		t.Errorf("model %+v in an empty object", r[0])
	}
}

// chunks hands out one element per Read, as a connection hands out what
// has arrived so far.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	(*c)[0] = (*c)[0][n:]
	if (*c)[0] == "" {
		*c = (*c)[1:]
	}
	return n, nil
}

func TestSSEReaderReadyOnlyWithAWholeEventBuffered(t *testing.T) {
	in := chunks{
		"data: one\n\n\n\r\n",    // an event, then blank lines only
		"data: two\n\ndata: thr", // an event, then half of one
		"ee\r\n\r\n: ping\n\n",   // its end, CRLF style, and a whole comment
	}
	r := adapterkit.NewSSEReader(&in, 0)
	next := func(want string) {
		t.Helper()
		ev, err := r.Next()
		if err != nil || strings.TrimLeft(string(ev.Raw), "\r\n") != want {
			t.Fatalf("Next: %q, %v; want %q", ev.Raw, err, want)
		}
	}
	ready := func(want bool, when string) {
		t.Helper()
		if got := r.Ready(); got != want {
			t.Fatalf("Ready() %v %s; want %v", got, when, want)
		}
	}
	ready(false, "before anything was read")
	next("data: one\n\n")
	ready(false, "with only blank lines buffered")
	next("data: two\n\n")
	ready(false, "with half an event buffered")
	next("data: three\r\n\r\n")
	ready(true, "with a whole comment event buffered")
	next(": ping\n\n")
	ready(false, "at the end")
}

// An event whose blank line comes in a later read than its data: the read
// that brings it may reuse the buffer the data lines were read into.
func TestSSEReaderEventAcrossReads(t *testing.T) {
	in := chunks{
		"data: one\n\ndata: {\"type\":\"content_block_delta\"}\n",
		"\ndata: " + strings.Repeat("x", 200) + "\n\n",
	}
	r := adapterkit.NewSSEReader(&in, 0)
	for _, want := range []string{"one", `{"type":"content_block_delta"}`, strings.Repeat("x", 200)} {
		ev, err := r.Next()
		if err != nil || string(ev.Data) != want {
			t.Fatalf("Next: data %q, %v; want %q", ev.Data, err, want)
		}
	}
}

// inside reports whether p lies within c's memory.
func inside(c, p []byte) bool {
	return len(p) > 0 && len(c) > 0 && uintptr(unsafe.Pointer(&p[0])) >= uintptr(unsafe.Pointer(&c[0])) && uintptr(unsafe.Pointer(&p[len(p)-1])) <= uintptr(unsafe.Pointer(&c[len(c)-1]))
}

// A Body reads the same bytes however it is read, each reader from the
// start, and its pieces are never changed by reading.
func TestBodyReaders(t *testing.T) {
	b := adapterkit.Body{[]byte(`{"model":`), []byte(`"m"`), nil, []byte(`,"x":1}`)}
	want := `{"model":"m","x":1}`
	for name, read := range map[string]func(io.Reader) ([]byte, error){
		"ReadAll":          io.ReadAll,
		"a byte at a time": func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.OneByteReader(r)) },
		"WriteTo": func(r io.Reader) ([]byte, error) {
			var buf bytes.Buffer
			_, err := r.(io.WriterTo).WriteTo(&buf)
			return buf.Bytes(), err
		},
	} {
		for range 2 {
			got, err := read(b.Reader())
			if err != nil || string(got) != want {
				t.Errorf("%s: %q, %v", name, got, err)
			}
		}
	}
	if err := iotest.TestReader(b.Reader(), []byte(want)); err != nil {
		t.Error(err)
	}
	if string(b.Bytes()) != want || b.Len() != int64(len(want)) {
		t.Errorf("Bytes %q, Len %d", b.Bytes(), b.Len())
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = io.Copy(io.Discard, b.Reader()) }); n > 3 {
		t.Errorf("copying a body to io.Discard allocates %v times: no buffer of its own", n)
	}
}
