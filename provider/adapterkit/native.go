package adapterkit

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/provider"
)

// NativeBody returns the body a relayed request ([provider.Native]) goes
// upstream with: the client's, with the edits the gateway owns and no
// other. "model" becomes model when the client named another; each of
// limitFields (the protocol's names for the output limit: max_tokens,
// max_completion_tokens, max_output_tokens) that the body sets above
// req.MaxTokens is lowered to it; when the body sets none of them, the
// first is added with req.MaxTokens, the limit the call was priced with
// (a provider's own default may be far higher). The client's bytes are
// never changed in place. edits names each change with its value
// ("model=…", "max_tokens=…"), for [provider.NativeReply.Edits].
func NativeBody(req *provider.Request, model string, limitFields ...string) (body Body, edits []string, err error) {
	client := req.Native.Body
	top := TopOf(req.Native, append([]string{"model"}, limitFields...)...)
	var ch []change
	if m := top[0]; m.String() != model {
		q, _ := json.Marshal(model)
		if m.Exists() {
			ch = append(ch, change{old: m, val: q})
		} else {
			ch = append(ch, change{add: append([]byte(`"model":`), q...)})
		}
		edits = append(edits, "model="+model)
	}
	if req.MaxTokens > 0 {
		set := false
		for i, f := range limitFields {
			v := top[1+i]
			set = set || v.Exists()
			if v.Type == gjson.Number && v.Int() > int64(req.MaxTokens) {
				ch = append(ch, change{old: v, val: strconv.AppendInt(nil, int64(req.MaxTokens), 10)})
				edits = append(edits, fmt.Sprintf("%s=%d", f, req.MaxTokens))
			}
		}
		if !set && len(limitFields) > 0 {
			field, _ := json.Marshal(limitFields[0])
			ch = append(ch, change{add: fmt.Appendf(nil, "%s:%d", field, req.MaxTokens)})
			edits = append(edits, fmt.Sprintf("%s=%d", limitFields[0], req.MaxTokens))
		}
	}
	if len(ch) == 0 {
		return Body{client}, nil, nil
	}
	if body, err = apply(client, ch); err != nil {
		return nil, nil, err
	}
	return body, edits, nil
}

// Body is a request body as it goes upstream: its pieces, sent one after
// the other. An edit of a relayed body is a piece of its own between
// pieces of the client's bytes ([NativeBody]), so that changing the model
// of a 200 KB prompt neither copies it nor allocates its size again.
type Body [][]byte

// Len is b's length in bytes.
func (b Body) Len() int64 {
	var n int64
	for _, p := range b {
		n += int64(len(p))
	}
	return n
}

// Reader returns a reader of b from its start; each call gives a new one.
func (b Body) Reader() io.Reader { return &bodyReader{left: slices.Clone(b)} }

// bodyReader reads a Body's pieces in turn. Its WriteTo writes them as
// they are, without a buffer of its own (net/http copies what follows a
// body's announced length to io.Discard, which io.MultiReader's WriteTo
// would allocate 32 KiB for).
type bodyReader struct{ left [][]byte }

func (r *bodyReader) Read(p []byte) (int, error) {
	for len(r.left) > 0 && len(r.left[0]) == 0 {
		r.left = r.left[1:]
	}
	if len(r.left) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.left[0])
	r.left[0] = r.left[0][n:]
	return n, nil
}

func (r *bodyReader) WriteTo(w io.Writer) (int64, error) {
	var sum int64
	for len(r.left) > 0 {
		n, err := w.Write(r.left[0])
		sum += int64(n)
		r.left[0] = r.left[0][n:]
		if err != nil {
			return sum, err
		}
		r.left = r.left[1:]
	}
	return sum, nil
}

// Bytes returns b as one slice: its only piece as it is (the caller must
// not change it), or its pieces copied into a new one.
func (b Body) Bytes() []byte {
	if len(b) == 1 {
		return b[0]
	}
	return bytes.Join(b, nil)
}

// joinUpTo is the largest body Send joins into one slice. net/http writes
// a body it knows to be in memory (a *bytes.Reader) together with the
// request's head, in one system call; any other reader makes it flush the
// head first, a write of its own. Copying a body this small costs less
// than that write; a bigger one goes as its pieces.
const joinUpTo = 64 << 10

// Send makes b r's body: its length announced (Content-Length, as a body
// in one slice would have it) and a new reader for each retry.
func (b Body) Send(r *http.Request) {
	r.ContentLength = b.Len()
	if r.ContentLength == 0 {
		r.Body, r.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		return
	}
	if len(b) == 1 || r.ContentLength <= joinUpTo {
		one := b.Bytes()
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(one)), nil }
	} else {
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.Reader()), nil }
	}
	r.Body, _ = r.GetBody()
}

// Top returns the values of keys in body, a JSON object, in one pass over
// its top level (a key named twice: its first value); a key body lacks
// gets a Result that does not exist. Each Result's Index is its offset in
// body; its Raw and Str point into body, which the caller must not change
// while it holds them.
func Top(body []byte, keys ...string) []gjson.Result {
	out := make([]gjson.Result, len(keys))
	left := len(keys)
	gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))).ForEach(func(k, v gjson.Result) bool {
		for i, key := range keys {
			if k.Str == key && !out[i].Exists() {
				out[i] = v
				left--
			}
		}
		return left > 0
	})
	return out
}

// TopOf is [Top] over n.Body, read from n.Members when the gateway's
// scan set them: a lookup among a few members, not a pass over the body.
func TopOf(n *provider.Native, keys ...string) []gjson.Result {
	if n.Members == nil {
		return Top(n.Body, keys...)
	}
	out := make([]gjson.Result, len(keys))
	for i, key := range keys {
		for _, m := range n.Members {
			if m.Key == key {
				out[i] = gjson.Parse(unsafe.String(unsafe.SliceData(n.Body[m.Start:]), m.End-m.Start))
				out[i].Index = m.Start
				break
			}
		}
	}
	return out
}

// change is one edit of a body: old's value (found with its index)
// replaced by val, or, with add, a member added at the end of the object.
type change struct {
	old gjson.Result
	val []byte
	add []byte
}

// apply returns body with ch made, as the pieces of body between them
// and the changes' own: the client's bytes are not copied.
func apply(body []byte, ch []change) (Body, error) {
	open, end := bytes.IndexByte(body, '{'), bytes.LastIndexByte(body, '}')
	if open < 0 || end < open {
		return nil, errors.New("the request body is not a JSON object")
	}
	slices.SortStableFunc(ch, func(a, b change) int { return cmp.Compare(a.at(end), b.at(end)) })
	members := len(bytes.TrimSpace(body[open+1:end])) > 0
	for _, c := range ch {
		if c.add == nil && (c.old.Index <= open || c.old.Index+len(c.old.Raw) > end || string(body[c.old.Index:c.old.Index+len(c.old.Raw)]) != c.old.Raw) {
			return nil, errors.New("the request body's member cannot be located to edit it")
		}
	}
	out := make(Body, 0, 2*len(ch)+1)
	at := 0
	for _, c := range ch {
		if c.add != nil {
			out = append(out, body[at:end])
			if members {
				out = append(out, []byte{','})
			}
			out = append(out, c.add)
			members, at = true, end
			continue
		}
		out = append(out, body[at:c.old.Index], c.val)
		at = c.old.Index + len(c.old.Raw)
	}
	return append(out, body[at:]), nil
}

// at is where c applies in a body whose object ends at end.
func (c change) at(end int) int {
	if c.add != nil {
		return end
	}
	return c.old.Index
}

// SSEEvent is one server-sent event as it came: Raw holds its bytes,
// framing and the blank line that ends it included; Name and Data are
// its event field and its data lines joined by "\n".
type SSEEvent struct {
	Name string
	Data []byte
	Raw  []byte
}

// SSEReader splits a server-sent event stream into events without
// changing a byte. Comments and fields other than event and data are
// kept in Raw.
type SSEReader struct {
	r   *bufio.Reader
	max int
}

// NewSSEReader reads events from r; an event longer than max bytes is an
// error (max ≤ 0: 16 MiB).
func NewSSEReader(r io.Reader, max int) *SSEReader {
	if max <= 0 {
		max = 16 << 20
	}
	return &SSEReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// Next returns the next event, io.EOF at the end of the stream, or
// io.ErrUnexpectedEOF when it ends inside an event (the partial bytes in
// the event's Raw).
func (s *SSEReader) Next() (SSEEvent, error) {
	var ev SSEEvent
	var data [][]byte
	for {
		line, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: gather it whole.
			full := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				if len(full)+len(ev.Raw) > s.max {
					return ev, fmt.Errorf("a server-sent event is longer than %d bytes", s.max)
				}
				line, err = s.r.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if len(ev.Raw)+len(line) > s.max {
			return ev, fmt.Errorf("a server-sent event is longer than %d bytes", s.max)
		}
		ev.Raw = append(ev.Raw, line...)
		// The line as kept in Raw: line itself is the reader's buffer,
		// which the next read may overwrite before the event ends, while
		// bytes already in Raw never change.
		line = ev.Raw[len(ev.Raw)-len(line):]
		if err != nil {
			if err == io.EOF {
				if len(bytes.TrimSpace(ev.Raw)) == 0 {
					return SSEEvent{}, io.EOF
				}
				// The last event without its blank line: complete when
				// its data is (a server that closes right after it).
				s.field(&ev, &data, bytes.TrimRight(line, "\r\n"))
				ev.Data = bytes.Join(data, []byte("\n"))
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		content := bytes.TrimRight(line, "\r\n")
		if len(content) == 0 {
			if len(bytes.TrimSpace(ev.Raw)) == 0 {
				continue // blank lines between events stay with the next
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			return ev, nil
		}
		s.field(&ev, &data, content)
	}
}

// Ready reports whether a whole event has already arrived, so that Next
// returns it without reading from the connection: the buffered bytes hold
// a line that is not blank and, after it, the blank line ending an event.
func (s *SSEReader) Ready() bool {
	b, _ := s.r.Peek(s.r.Buffered())
	b = bytes.TrimLeft(b, "\r\n")
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r\n")) || bytes.Contains(b, []byte("\r\r"))
}

func (s *SSEReader) field(ev *SSEEvent, data *[][]byte, line []byte) {
	if len(line) == 0 || line[0] == ':' {
		return
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		ev.Name = string(value)
	case "data":
		*data = append(*data, value)
	}
}
