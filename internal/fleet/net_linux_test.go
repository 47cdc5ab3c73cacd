//go:build linux

package fleet_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// fleetNet is a bridge on this host and one network namespace per
// replica, each joined to the bridge by a veth pair: the replicas reach
// the host (its address on the bridge) and each other, and nothing else;
// the host reaches each replica's address. Everything is removed when the
// test ends.
type fleetNet struct {
	t      *testing.T
	bridge string
	host   string   // the host's address on the bridge
	ns     []string // the namespaces, one per replica
	addrs  []string // the replicas' addresses
}

// ipCmd runs ip with args and fails the test on error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newFleetNet makes the bridge and n namespaces, on a /24 of 10.0.0.0/8
// chosen from the process id (a test run's own; a clash with a network of
// the machine fails at once).
func newFleetNet(t *testing.T, n int) *fleetNet {
	t.Helper()
	id := os.Getpid() % 100000
	sub := 200 + id%50
	f := &fleetNet{t: t, bridge: fmt.Sprintf("cbf%db", id), host: fmt.Sprintf("10.%d.%d.1", sub, id%250)}
	ipCmd(t, "link", "add", f.bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", f.bridge).Run() })
	ipCmd(t, "addr", "add", f.host+"/24", "dev", f.bridge)
	ipCmd(t, "link", "set", f.bridge, "up")
	prefix := f.host[:strings.LastIndexByte(f.host, '.')]
	for i := range n {
		ns := fmt.Sprintf("cbf%d-%d", id, i)
		host, peer := fmt.Sprintf("cbf%dh%d", id, i), fmt.Sprintf("cbf%dn%d", id, i)
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		ipCmd(t, "link", "add", host, "type", "veth", "peer", "name", peer)
		ipCmd(t, "link", "set", peer, "netns", ns)
		ipCmd(t, "link", "set", host, "master", f.bridge)
		ipCmd(t, "link", "set", host, "up")
		addr := fmt.Sprintf("%s.%d", prefix, 11+i)
		ipCmd(t, "-n", ns, "addr", "add", addr+"/24", "dev", peer)
		ipCmd(t, "-n", ns, "link", "set", peer, "up")
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
		f.ns = append(f.ns, ns)
		f.addrs = append(f.addrs, addr)
	}
	return f
}

// rootAndTools skips the test unless it runs as root with ip and haproxy
// installed; under CI it fails instead.
func rootAndTools(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces)")
	}
	for _, tool := range []string{"ip", "haproxy"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "the fleet test needs " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI runs it as root with haproxy installed by .ci/run)")
	}
	t.Skip(msg)
}
