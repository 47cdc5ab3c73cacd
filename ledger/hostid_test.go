package ledger

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckHostID(t *testing.T) {
	for _, tc := range []struct {
		in, err string // err: "" for valid, else a part of the message
	}{
		{"", ""},
		{"2f0c8f8e-5d1a-4c5e-9a55-1c0f1e6f6a11", ""},
		{"agent with spaces and ünïcödé 漢字", ""},
		{strings.Repeat("漢", MaxHostIDLen), ""},
		{strings.Repeat("漢", MaxHostIDLen+1), "201 characters, at most 200"},
		{strings.Repeat("a", 5000), "5000 characters, at most 200"},
		{"tab\there", "only printable characters"},
		{"nul\x00", "only printable characters"},
		{"del\x7f", "only printable characters"},
		{"ls\u2028", "only printable characters"},
		{"bad\xc3", "not valid UTF-8"},
	} {
		err := CheckHostID(tc.in)
		if tc.err == "" {
			if err != nil {
				t.Errorf("CheckHostID(%.30q) = %v; want nil", tc.in, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) || len(err.Error()) > 200 {
			t.Errorf("CheckHostID(%.30q) = %v; want ErrInvalid saying %q, short", tc.in, err, tc.err)
		}
	}
}

// HostID keeps what CheckHostID accepts as it is, and makes anything else
// into something it accepts.
func FuzzHostID(f *testing.F) {
	for _, s := range []string{"", "sess-1", "nul\x00", "bad\xff\xfe", strings.Repeat("é", 300), "a\u2028b", "\U0010FFFF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := HostID(v)
		if err := CheckHostID(got); err != nil {
			t.Fatalf("HostID(%q) = %q, which CheckHostID refuses: %v", v, got, err)
		}
		if (CheckHostID(v) == nil) != (got == v) {
			t.Fatalf("HostID(%q) = %q; CheckHostID(v) = %v", v, got, CheckHostID(v))
		}
	})
}
