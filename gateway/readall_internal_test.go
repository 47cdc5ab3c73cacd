package gateway

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readAll returns every byte whatever the announced length and however
// the bytes arrive, never a buffer the next request reads into, and a
// body of the announced size in a buffer of that size.
func TestReadAllBodies(t *testing.T) {
	body := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		return b
	}
	for _, size := range []int{0, 1, 100, firstRead - 512, firstRead - 511, firstRead, firstRead + 1, 200 << 10, 1 << 20} {
		want := body(size)
		for _, announced := range []int64{int64(size), -1, int64(size) + 1000, int64(size) / 2} {
			for name, r := range map[string]io.Reader{"whole": bytes.NewReader(want), "a byte at a time": iotest.OneByteReader(bytes.NewReader(want)), "data with EOF": iotest.DataErrReader(bytes.NewReader(want))} {
				got, err := readAll(r, announced)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes announced as %d, %s: %d bytes, %v", size, announced, name, len(got), err)
				}
				// The next body does not land in this one's memory.
				if _, err := readAll(bytes.NewReader(bytes.Repeat([]byte("z"), size)), announced); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes announced as %d, %s: changed by the next read", size, announced, name)
				}
			}
		}
	}
	got, _ := readAll(bytes.NewReader(body(200<<10)), 200<<10)
	if cap(got) != 200<<10+512 {
		t.Errorf("a 200 KiB body announced as such is in a buffer of %d bytes, want its size and the read's margin", cap(got))
	}
	boom := errors.New("connection reset")
	if got, err := readAll(io.MultiReader(bytes.NewReader(body(100<<10)), iotest.ErrReader(boom)), 200<<10); !errors.Is(err, boom) || len(got) != 100<<10 {
		t.Errorf("a body cut after 100 KiB: %d bytes, %v", len(got), err)
	}
}

// BenchmarkReadAll reads a 200 KB body announced by its Content-Length
// (allocations per body: one of its size).
func BenchmarkReadAll(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 200<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readAll(bytes.NewReader(body), int64(len(body))); err != nil {
			b.Fatal(err)
		}
	}
}
