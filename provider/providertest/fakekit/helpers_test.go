package fakekit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRecordedBase(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/v1/x?a=1&b=two&a=3", nil)
	req.Header.Set("X-Api-Key", "k")
	b := NewRecordedBase(req, []byte(`{"n":7}`))
	if b.Method != "POST" || b.Path != "/v1/x" || b.RawQuery != "a=1&b=two&a=3" || b.Header.Get("X-Api-Key") != "k" {
		t.Fatalf("NewRecordedBase = %+v", b)
	}
	req.Header.Set("X-Api-Key", "changed")
	if b.Header.Get("X-Api-Key") != "k" {
		t.Fatal("NewRecordedBase aliases the request header")
	}
	if q := b.Query(); !reflect.DeepEqual(q["a"], []string{"1", "3"}) || q.Get("b") != "two" {
		t.Fatalf("Query = %v", q)
	}
	var v struct{ N int }
	if err := b.Decode(&v); err != nil || v.N != 7 {
		t.Fatalf("Decode = %v, %+v", err, v)
	}
	if err := (RecordedBase{Body: []byte("nope")}).Decode(&v); err == nil {
		t.Fatal("Decode of a non-JSON body succeeded")
	}

	c := CloneBase(b)
	c.Header.Set("X-Api-Key", "other")
	c.Body[0] = '['
	if b.Header.Get("X-Api-Key") != "k" || b.Body[0] != '{' {
		t.Fatal("CloneBase shares memory with its source")
	}
}

func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		body     string
		limit    int64
		want     string
		tooLarge bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"", 3, "", false},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
		got, tooLarge, err := ReadBody(req, tc.limit)
		if err != nil || string(got) != tc.want || tooLarge != tc.tooLarge {
			t.Errorf("ReadBody(%q, %d) = %q, %v, %v; want %q, %v", tc.body, tc.limit, got, tooLarge, err, tc.want, tc.tooLarge)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("ab"), errReader{}))
	if got, _, err := ReadBody(req, 10); err == nil || string(got) != "ab" {
		t.Errorf("ReadBody on a failing body = %q, %v", got, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestWithHeader(t *testing.T) {
	orig := map[string]string{"a": "1"}
	got := WithHeader(orig, "b", "2")
	if !reflect.DeepEqual(got, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("WithHeader = %v", got)
	}
	if len(orig) != 1 {
		t.Fatal("WithHeader modified its argument")
	}
	if got := WithHeader(nil, "a", "x"); !reflect.DeepEqual(got, map[string]string{"a": "x"}) {
		t.Fatalf("WithHeader(nil) = %v", got)
	}
}

func TestHold(t *testing.T) {
	c := newCore()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if !c.Hold(req, nil) {
		t.Fatal("Hold(nil) = false")
	}
	gate := make(chan struct{})
	close(gate)
	if !c.Hold(req, gate) {
		t.Fatal("Hold(closed gate) = false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c.Hold(req.WithContext(ctx), make(chan struct{})) {
		t.Fatal("Hold with a gone client = true")
	}
	c.Close()
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("Hold on a closed Core panicked with %v, want http.ErrAbortHandler", r)
		}
	}()
	c.Hold(req, make(chan struct{}))
	t.Fatal("Hold on a closed Core returned")
}

// serve runs h on a test server and returns the raw response (status line,
// headers and body as far as the client got) and whether reading it
// failed before EOF.
func serve(t *testing.T, h http.HandlerFunc) (resp *http.Response, body string, readErr error) {
	t.Helper()
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, readErr := io.ReadAll(resp.Body)
	return resp, string(b), readErr
}

func TestWriteBody(t *testing.T) {
	resp, body, err := serve(t, func(w http.ResponseWriter, r *http.Request) {
		WriteBody(w, 418, []byte("hello"), 0)
	})
	if err != nil || resp.StatusCode != 418 || body != "hello" {
		t.Fatalf("WriteBody = %d %q %v", resp.StatusCode, body, err)
	}
	resp, body, err = serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		WriteBody(w, 200, []byte("0123456789"), 4)
	})
	if err == nil || body != "0123" {
		t.Fatalf("cut WriteBody = %d %q %v; want \"0123\" and an error", resp.StatusCode, body, err)
	}
}

func TestStreamWriter(t *testing.T) {
	first := make(chan string, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sw, err := StartStream(w, http.StatusOK)
		if err != nil {
			t.Error(err)
			return
		}
		if err := sw.Printf("data: %s\n\n", "one"); err != nil {
			t.Error(err)
		}
		// The event must reach the client before the handler goes on.
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Error("the first event was not flushed")
		}
		_ = sw.Printf("data: %d\r\n\r\n", 2)
		sw.Cut()
	}))
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("response = %d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first line = %q, %v", line, err)
	}
	first <- line
	rest, err := io.ReadAll(br)
	if err == nil {
		t.Fatal("a cut stream ended cleanly")
	}
	if string(rest) != "\ndata: 2\r\n\r\n" {
		t.Fatalf("rest = %q", rest)
	}
}

func TestCutRunes(t *testing.T) {
	for _, tc := range []struct {
		s     string
		sizes []int
		want  []string
	}{
		{"", []int{3}, nil},
		{"abcdefg", []int{3}, []string{"abc", "def", "g"}},
		{"abcdef", []int{3}, []string{"abc", "def"}},
		{"abcdefghij", []int{1, 4}, []string{"a", "bcde", "f", "ghij"}},
		{"aé€", []int{2}, []string{"a", "é", "€"}},
		{"€x", []int{1}, []string{"€", "x"}},
	} {
		if got := CutRunes(tc.s, tc.sizes); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("CutRunes(%q, %v) = %q, want %q", tc.s, tc.sizes, got, tc.want)
		}
	}
}

func TestSpacedJSON(t *testing.T) {
	in := `{"a":"x:y, z","b":[1,2],"c":{"d":"\"e\":","u":"Zürich\\"},"f":{}}`
	want := `{"a": "x:y, z", "b": [1, 2], "c": {"d": "\"e\":", "u": "Zürich\\"}, "f": {}}`
	if got := SpacedJSON([]byte(in)); got != want {
		t.Errorf("SpacedJSON = %s\nwant          %s", got, want)
	}
}

func TestColonSpacedJSON(t *testing.T) {
	in := `{"a":"x:y,z","b":[1,2],"c":{"d":"\"e\":"}}`
	want := `{"a": "x:y,z","b": [1,2],"c": {"d": "\"e\":"}}`
	if got := string(ColonSpacedJSON([]byte(in))); got != want {
		t.Errorf("ColonSpacedJSON = %s\nwant               %s", got, want)
	}
}

func TestWordPieces(t *testing.T) {
	space := func(c byte) bool { return c == ' ' }
	ws := func(c byte) bool { return c == ' ' || c == '\n' }
	for _, tc := range []struct {
		s     string
		space func(byte) bool
		max   int
		want  []string
	}{
		{"", space, 4, nil},
		{"a bb  ccc", space, 10, []string{"a", " bb", "  ccc"}},
		{" lead", space, 10, []string{" lead"}},
		{"a\nb c", space, 10, []string{"a\nb", " c"}},
		{"a\nb c", ws, 10, []string{"a", "\nb", " c"}},
		{"abcdefg hi", space, 3, []string{"abc", "def", "g", " hi"}},
		{"ééé", space, 3, []string{"é", "é", "é"}},
	} {
		got := WordPieces(tc.s, tc.space, tc.max)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("WordPieces(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
		if strings.Join(got, "") != tc.s {
			t.Errorf("WordPieces(%q) does not concatenate back", tc.s)
		}
	}
}
