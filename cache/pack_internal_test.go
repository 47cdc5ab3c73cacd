package cache

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// fullEntry sets every field of an Entry, its Usage and its NativeReply.
func fullEntry() Entry {
	call := provider.ToolCall{ID: "toolu_9", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)}
	return Entry{
		Content:   "Here is the summary.",
		ToolCalls: []provider.ToolCall{call},
		Parts: []provider.Part{
			{Type: provider.PartReasoning, Text: "hmm", Meta: provider.Metadata{"anthropic.signature": json.RawMessage(`"s"`)}},
			{Type: provider.PartToolCall, ToolCall: &call},
		},
		Usage: provider.Usage{InputTokens: 5000, OutputTokens: 700, CacheReadTokens: 4000, CacheWriteTokens: 12, CacheWriteLongTokens: 13,
			ReasoningTokens: 14, WebSearchRequests: 2, ServiceTier: "priority", Estimated: true},
		Cost:          provider.MustMoney("0.0123"),
		Provider:      "anthropic-main",
		Model:         "claude-haiku-4-5",
		StopReason:    provider.StopToolUse,
		RawStopReason: "tool_use",
		RequestID:     "req_1",
		Native: &provider.NativeReply{Status: 200, Header: http.Header{"Request-Id": {"req_1"}, "X-Twice": {"a", "b"}, "X-Empty": {}},
			Body: []byte(`{"id":"msg_1"}`), Edits: []string{"model=claude-haiku-4-5", "max_tokens=100"}},
		StoredAt: time.Date(2026, 12, 6, 3, 4, 5, 6, time.FixedZone("CET", 3600)),
	}
}

// checkEveryField fails when a field of v (a struct) is its zero value:
// a field added to Entry must be added to fullEntry, and so to what is
// packed.
func checkEveryField(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("%s.%s is not set in fullEntry: set it, and pack it", name, v.Type().Field(i).Name)
		}
	}
}

// An entry comes back from its packed form as it went in, every field of
// it, nil and empty apart; a cut or a changed byte is an error, never a
// wrong entry or a panic.
func TestPackEntryRoundTrips(t *testing.T) {
	e := fullEntry()
	checkEveryField(t, "Entry", reflect.ValueOf(e))
	checkEveryField(t, "Usage", reflect.ValueOf(e.Usage))
	checkEveryField(t, "NativeReply", reflect.ValueOf(*e.Native))
	for name, e := range map[string]Entry{
		"full":  e,
		"empty": {},
		"empty slices": {ToolCalls: []provider.ToolCall{}, Parts: []provider.Part{},
			Native: &provider.NativeReply{Header: http.Header{}, Body: []byte{}, Edits: []string{}}},
		"no native header or body": {Content: "x", Native: &provider.NativeReply{Status: 500}},
	} {
		b, err := packEntry(e)
		if err != nil {
			t.Fatal(name, err)
		}
		got, err := unpackEntry(b)
		if err != nil {
			t.Fatal(name, err)
		}
		if !got.StoredAt.Equal(e.StoredAt) {
			t.Errorf("%s: stored at %v, want %v", name, got.StoredAt, e.StoredAt)
		}
		got.StoredAt, e.StoredAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s:\n got %#v\nwant %#v", name, got, e)
		}
		for cut := range len(b) {
			if _, err := unpackEntry(b[:cut]); err == nil {
				t.Fatalf("%s cut at %d of %d bytes unpacked", name, cut, len(b))
			}
		}
	}
	// The copy is the caller's: changing it leaves the stored bytes alone.
	b, _ := packEntry(e)
	got, _ := unpackEntry(b)
	got.Native.Body[0], got.Native.Header["Request-Id"][0] = 'X', "changed"
	again, _ := unpackEntry(b)
	if string(again.Native.Body) != `{"id":"msg_1"}` || again.Native.Header.Get("Request-Id") != "req_1" {
		t.Errorf("the stored entry changed with its copy: %s %v", again.Native.Body, again.Native.Header)
	}
}

func FuzzUnpackEntry(f *testing.F) {
	b, _ := packEntry(fullEntry())
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = unpackEntry(b) // never a panic
	})
}
