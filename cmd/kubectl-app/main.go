// Command kubectl-app is the kubectl plugin `kubectl app`: the tree, health summary and
// list of Apps (appcontroller.k8s.io/v1). Put it on PATH and run `kubectl app --help`.
// The logic lives in internal/plugin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/app-controller/app-controller/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
