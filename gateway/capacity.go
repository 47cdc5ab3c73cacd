package gateway

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// RequestMemory is the memory budgeted per API request in flight when the
// defaults of gateway.max_in_flight and gateway.max_in_flight_per_key are
// sized: a long stream held open measured about 135 KiB of RSS (the
// benchmark's 2,000 slow streams), a small call about 150 KB with its
// decoded body; 256 KiB leaves room for buffers.
const RequestMemory = 256 << 10

// Bounds of the memory-sized default of gateway.max_in_flight.
const (
	minDefaultInFlight = 256
	maxDefaultInFlight = 16384
)

// DefaultMaxInFlight is the default of gateway.max_in_flight for a process
// that may use mem bytes (0: unknown): a quarter of mem at
// [RequestMemory] per request, between 256 and 16,384. Coding agents hold
// long streams, so the bound follows memory, not a count picked for
// short calls: 16 GiB serves 16,384 at once, 1 GiB 1,024.
func DefaultMaxInFlight(mem int64) int {
	if mem <= 0 {
		return minDefaultInFlight
	}
	return int(min(max(mem/4/RequestMemory, minDefaultInFlight), maxDefaultInFlight))
}

// DefaultMaxInFlightPerKey is the default of gateway.max_in_flight_per_key
// for a gateway serving maxInFlight requests at once: half of them, at
// least 64, so that one client cannot hold every slot yet a host with
// many subagents' streams open is not refused.
func DefaultMaxInFlightPerKey(maxInFlight int) int { return max(maxInFlight/2, 64) }

// ProcessMemory returns the memory this process may use: its cgroup's
// limit (v2 memory.max, v1 memory.limit_in_bytes) when one is set, else
// the machine's physical memory; 0 when neither can be read.
func ProcessMemory() int64 {
	phys := meminfoTotal("/proc/meminfo")
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if n := cgroupLimit(p); n > 0 && (phys == 0 || n < phys) {
			return n
		}
	}
	return phys
}

// cgroupLimit reads a cgroup memory limit file: a byte count, or "max"
// (none: 0).
func cgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// meminfoTotal reads MemTotal (kB) from a /proc/meminfo file, in bytes.
func meminfoTotal(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return n << 10
			}
		}
	}
	return 0
}
