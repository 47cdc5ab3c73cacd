package gateway

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestDefaultsFollowMemory(t *testing.T) {
	for _, tc := range []struct {
		mem           int64
		inFlight, key int
	}{
		{0, 256, 128},            // unknown: the floor
		{256 << 20, 256, 128},    // a small container: the floor
		{1 << 30, 1024, 512},     // 1 GiB
		{24 << 30, 16384, 8192},  // this size of machine: the ceiling
		{512 << 30, 16384, 8192}, // never more
	} {
		got := DefaultMaxInFlight(tc.mem)
		if got != tc.inFlight || DefaultMaxInFlightPerKey(got) != tc.key {
			t.Errorf("memory %d: max_in_flight %d, per key %d; want %d, %d", tc.mem, got, DefaultMaxInFlightPerKey(got), tc.inFlight, tc.key)
		}
	}
	// 2,000 long streams of one host fit the defaults of a 4 GiB gateway.
	if n := DefaultMaxInFlightPerKey(DefaultMaxInFlight(4 << 30)); n < 2000 {
		t.Errorf("a 4 GiB gateway takes %d streams of one key; want at least 2,000", n)
	}
	if DefaultMaxInFlightPerKey(100) != 64 {
		t.Error("the per-key default is at least 64")
	}
}

func TestMemoryFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n := meminfoTotal(write("meminfo", "MemTotal:       25165824 kB\nMemFree:  1 kB\n")); n != 24<<30 {
		t.Errorf("MemTotal read as %d", n)
	}
	if n := cgroupLimit(write("max", "max\n")); n != 0 {
		t.Errorf("an unlimited cgroup read as %d", n)
	}
	if n := cgroupLimit(write("limit", "2147483648\n")); n != 2<<30 {
		t.Errorf("a 2 GiB cgroup limit read as %d", n)
	}
	if n := meminfoTotal(filepath.Join(dir, "missing")); n != 0 {
		t.Errorf("a missing file read as %d", n)
	}
	if runtime.GOOS == "linux" && ProcessMemory() <= 0 {
		t.Error("no memory figure on Linux")
	}
}
