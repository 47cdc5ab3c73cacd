// Command cortexbuild is CortexBuild's provider layer on the command line:
// configuration, prices, providers and (in orchestration mode) invocations.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cortexbuild/cortexbuild/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
