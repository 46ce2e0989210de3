// Package signals turns SIGINT and SIGTERM into a cancelled context: the first signal
// asks for a graceful stop, a second one exits the process at once with status 1.
package signals

import (
	"context"
	"os"
	"os/signal"
)

var onlyOneSignalHandler = make(chan struct{})

// SetupSignalContext returns a context that is cancelled on the first SIGINT or SIGTERM.
// On a second signal the process exits with status 1 without waiting for anything.
// It panics if called twice.
func SetupSignalContext() context.Context {
	close(onlyOneSignalHandler) // panics when called twice

	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan os.Signal, 2)
	signal.Notify(c, shutdownSignals...)
	go func() {
		<-c
		cancel()
		<-c
		os.Exit(1) // second signal: exit directly
	}()
	return ctx
}
