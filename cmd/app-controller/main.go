// Command app-controller is a controller-manager that runs the App controller, the
// Service->Ingress controller and the node labeler.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/app-controller/app-controller/internal/logformat"
	"github.com/app-controller/app-controller/pkg/controllermanager"
	"github.com/app-controller/app-controller/pkg/signals"
	"github.com/app-controller/app-controller/pkg/version"
)

func main() {
	cl := controllermanager.NewCommandLine(os.Args[0], flag.ExitOnError)
	fs, opts := cl.FlagSet, cl.Options
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		os.Exit(2)
	}
	if *cl.Version {
		fmt.Println(version.Get())
		return
	}
	verbosity, err := logformat.Verbosity(fs)
	if err == nil {
		err = logformat.Apply(*cl.LogFormat, verbosity, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctx := signals.SetupSignalContext()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	controllermanager.SetGCPercent(logger)
	if err := controllermanager.SetMemoryLimit(logger); err != nil {
		logger.Error(err, "Reading the memory limit")
		klog.FlushAndExit(klog.ExitFlushTimeout, 2)
	}

	if err := controllermanager.Run(ctx, opts); err != nil {
		logger.Error(err, "Controller manager failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	logger.Info("Stopped")
	klog.Flush()
}
