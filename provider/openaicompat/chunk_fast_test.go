package openaicompat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/adapterkit"
)

// textChunks are streamed chunks as the API writes them and as it could:
// decodeTextChunk takes the first textChunksTaken, and leaves the rest to
// json.Unmarshal.
var textChunks = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"model":"m","choices":[]}`,
	`{"model":"m","choices":null,"service_tier":"default"}`,
	`{"model":"m","choices":[],"error":{"message":"overloaded"},"service_tier":5}`,
	`{"model":"m","choices":[{"index":2,"delta":{"content":"a \"b\"\n\u00e9"},"finish_reason":null},{"index":1,"delta":null}]}`,
	`{"model":"m","choices":[{"index":0,"delta":{"content":"x","tool_calls":null}}]}`,
	`{"model":"m","x":{"a":[1,-2.5e+3,true,false,null,"s\u0041"]},"choices":[{"index":-0,"delta":{"content":"\ud83d\ude00 \ud800 \u00e9\/"},"finish_reason":"stop"}],"service_tier":"\u0070riority"}`,
	// Left to json.Unmarshal:
	`{"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}`,
	`{"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"model":"m","Model":"n","choices":[]}`,
	`{"model":"m","mod\u0065l":"n","choices":[]}`,
	`{"model":"m","model":"n","choices":[]}`,
	`{"model":"m","choices":[{"index":0,"delta":{"content":"a","CONTENT":"b"}}]}`,
	`{"model":"m","choices":[{"index":1.0,"delta":{"content":"a"}}]}`,
	`{"model":"m","choices":[{"index":99999999999999999999}]}`,
	`{"model":"m","choices":[null]}`,
	`{"model":5,"choices":[]}`,
	`{"model":"a\xffb","choices":[]}`,
	`{"model":"m","choices":[]} trailing`,
	`[]`,
	`{"model":"m","choices":[],"x":01}`,
	`{"model":"m","choices":[],"\u0078":1}`,
}

const textChunksTaken = 9

// The fast path decodes a chunk exactly as json.Unmarshal does, and takes
// the chunks of text the API writes.
func TestDecodeTextChunkMatchesUnmarshal(t *testing.T) {
	for i, d := range textChunks {
		checkTextChunk(t, []byte(d))
		var c chunk
		if took := decodeTextChunk([]byte(d), &c); took != (i < textChunksTaken) {
			t.Errorf("decodeTextChunk(%s) = %v, want %v", d, took, i < textChunksTaken)
		}
	}
}

func checkTextChunk(t *testing.T, b []byte) {
	t.Helper()
	var fast chunk
	if !decodeTextChunk(b, &fast) {
		return
	}
	var want chunk
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("decodeTextChunk took %q, which json.Unmarshal refuses: %v", b, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("decodeTextChunk(%q) = %+v, json.Unmarshal %+v", b, fast, want)
	}
	// Read with the event's error and tier, the same chunk, and those
	// two as one pass over the top level reads them.
	var ev chunk
	var top eventTop
	if !decodeTextEvent(b, &ev, &top) {
		return
	}
	tt := adapterkit.Top(b, "error", "service_tier")
	if !reflect.DeepEqual(ev, want) || string(top.err) != tt[0].Raw || string(top.tier) != tt[1].Raw || (top.err == nil) == tt[0].Exists() || (top.tier == nil) == tt[1].Exists() {
		t.Fatalf("decodeTextEvent(%q) = %+v %q %q, want %+v %q %q", b, ev, top.err, top.tier, want, tt[0].Raw, tt[1].Raw)
	}
}

func FuzzDecodeTextChunk(f *testing.F) {
	for _, d := range textChunks {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkTextChunk(t, b) })
}

// BenchmarkDecodeChunk decodes a chunk of text: "fast" as the stream does,
// "unmarshal" with json.Unmarshal, what it did before the fast path.
func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(textChunks[0])
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var c wireChunk
			if c.UnmarshalJSON(data) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for b.Loop() {
			var c chunk
			if json.Unmarshal(data, &c) != nil {
				b.Fatal("refused")
			}
		}
	})
}
