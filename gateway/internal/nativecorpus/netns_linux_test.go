package nativecorpus_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// isolate re-runs the test binary in new network and UTS namespaces and
// returns its exit code (done); when it cannot (not root) it returns
// done false and the capture says why. In the child it brings up lo,
// checks it is the only interface and sets the host name.
func isolate() (code int, done bool) {
	if os.Getenv(inNetns) != "" {
		if err := loopbackOnly(); err != nil {
			fmt.Fprintln(os.Stderr, "nativecorpus:", err)
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		return ee.ExitCode(), true
	default:
		fmt.Fprintln(os.Stderr, "nativecorpus: cannot re-run in a network namespace:", err)
		return 1, true
	}
}

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
	return syscall.Sethostname([]byte(captureHostname))
}
