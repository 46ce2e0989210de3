package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// DefaultShutdownTimeout is how long RunWorkers lets in-flight syncs finish after its
// context ends, unless told otherwise.
const DefaultShutdownTimeout = 30 * time.Second

// RunWorkers runs workers goroutines that take keys from queue and pass each to process,
// until ctx ends. Then it stops taking work (the queue is shut down) and waits up to
// shutdownTimeout for the syncs in flight to finish: they run on a context that outlives
// ctx, so that a stop signal does not abort a half-done sync; it is cancelled once the
// timeout has passed, or at once when the abort context of WithAbort ends. RunWorkers
// returns when every worker has returned.
func RunWorkers[T comparable](ctx context.Context, queue workqueue.TypedInterface[T], workers int,
	shutdownTimeout time.Duration, process func(ctx context.Context, key T)) {
	if shutdownTimeout <= 0 {
		shutdownTimeout = DefaultShutdownTimeout
	}
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	if abort, ok := ctx.Value(abortKey{}).(context.Context); ok {
		// No grace: in-flight syncs are cancelled the moment abort ends.
		defer context.AfterFunc(abort, cancelWork)()
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if ctx.Err() != nil {
					// Stopping: what is still queued is left for the next instance.
					queue.Done(key)
					return
				}
				func() {
					defer queue.Done(key)
					process(workCtx, key)
				}()
			}
		})
	}

	<-ctx.Done()
	logger := klog.FromContext(ctx)
	logger.Info("Stopping: finishing in-flight syncs", "timeout", shutdownTimeout)
	queue.ShutDown()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownTimeout):
		logger.Info("In-flight syncs did not finish in time, cancelling them")
		cancelWork()
		<-done
	}
}

// abortKey is the context key of WithAbort.
type abortKey struct{}

// WithAbort returns ctx carrying abort: when abort ends, the syncs RunWorkers has in
// flight are cancelled at once rather than given the shutdown timeout to finish. A
// leader that lost its lease uses it: another instance may already lead, and this one
// must not write any more.
func WithAbort(ctx, abort context.Context) context.Context {
	return context.WithValue(ctx, abortKey{}, abort)
}
