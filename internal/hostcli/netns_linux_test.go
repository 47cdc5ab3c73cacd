package hostcli_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// inNetns is set in the environment of the test binary re-run in its own
// network namespace.
const inNetns = "CORTEXBUILD_HOSTCLI_NETNS"

// isolate re-runs the test binary in a new network namespace and returns
// its exit code; ok is false when it cannot (not root): the tests then
// skip, saying so.
func isolate() (code int, ok bool) {
	if os.Getenv(inNetns) != "" {
		if err := loopbackOnly(); err != nil {
			fmt.Fprintln(os.Stderr, "hostcli:", err)
			return 1, true
		}
		return 0, false
	}
	if os.Geteuid() != 0 {
		return 0, false
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), inNetns+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		return ee.ExitCode(), true
	default:
		fmt.Fprintln(os.Stderr, "hostcli: cannot re-run in a network namespace:", err)
		return 1, true
	}
}

// loopbackOnly brings up lo in this (new) namespace and checks that it is
// the only interface: nothing here can reach another machine.
func loopbackOnly() error {
	if err := testenv.LoopbackUp(); err != nil {
		return err
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	if len(ifs) != 1 || ifs[0].Name != "lo" {
		return fmt.Errorf("the namespace has interfaces %v, want lo only", ifs)
	}
	return nil
}
