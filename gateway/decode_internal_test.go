package gateway

import "testing"

func BenchmarkDecodeChat(b *testing.B) {
	body := []byte(`{"model":"gpt/gpt-5-mini","messages":[{"role":"user","content":"hello there"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeChat(body); err != nil {
			b.Fatal(err)
		}
	}
}
